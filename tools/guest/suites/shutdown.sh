# System shutdown with nvme_adaptive bound and I/O running: the controller is told to shut down
# and confirms it. The guest powers off right after its suites, so the check here only arms the
# test; tools/verdict passes shutdown/confirmed when the driver's "shut down" line for the
# controller follows NVA-DONE on the console. /guest/run runs this suite last.

arm_shutdown() {
    to_adaptive "$CTRL_NULL" || fail "bind failed"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk"
    # Still submitting when the kernel shuts the device down.
    start_background_io "$disk" randrw 600
    ctrl=$(ctrl_of "$CTRL_NULL" "$disk") || fail "no controller name"
    echo "expecting shutdown of $CTRL_NULL $ctrl"
}

check armed arm_shutdown
