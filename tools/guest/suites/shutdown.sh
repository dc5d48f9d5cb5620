# System shutdown with nvme_adaptive bound and I/O running: the controller is told to shut down
# and confirms it. The guest powers off right after its suites, so the check here only arms the
# test; tools/verdict passes shutdown/confirmed when the driver's "shut down" line for the
# controller follows NVA-DONE on the console. /guest/run runs this suite last.

arm_shutdown() {
    to_adaptive "$CTRL_NULL" || fail "bind failed"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk"
    # Still submitting when the kernel shuts the device down.
    fio --name=at-poweroff --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randrw \
        --bs=4k --iodepth=32 --runtime=600 --time_based >/dev/null 2>&1 &
    wait_for 60 sh -c "[ \"\$(awk '{ print \$1 + \$2 }' /sys/block/$disk/inflight)\" -gt 0 ]" ||
        fail "fio never had I/O in flight"
    echo "expecting shutdown of $CTRL_NULL"
}

check armed arm_shutdown
