# Without MSI or MSI-X (tools/test boots this suite with pci=nomsi): a controller falls back to
# its legacy INTx line, as with pci.c (QEMU's controller has MSI-X only, so the MSI fallback is
# not reachable here). All its queues share that line, which may be another device's too: none
# masks it to poll, and write+verify passes on both CPUs, with the I/O queues busy.

intx_only() {
    grep -qw 'pci=nomsi' /proc/cmdline || fail "the guest was not booted with pci=nomsi"
    load_adaptive || fail "insmod failed"
    to_adaptive "$CTRL_FILE" || fail "bind failed"
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    ctrl=$(ctrl_of "$CTRL_FILE" "$disk") || fail "no controller name"
    line=$(grep -E "(^|[ ,])${ctrl}q0(,|$)" /proc/interrupts) || fail "no interrupt line for ${ctrl}q0"
    echo "$line" | grep -q -- '-fasteoi\|IO-APIC' || fail "${ctrl}q0 is not on an INTx line: $line"
    echo "$line" | grep -q "${ctrl}q1" || fail "${ctrl}q1 does not share ${ctrl}q0's line: $line"
    set_params $FORCE_POLLING
    verify_from_both_cpus "$disk" --bs=4k --iodepth=32 || fail "verify failed"
    episodes=$(stat_sum "$ctrl" episodes)
    [ "$episodes" = 0 ] || fail "$episodes poll episodes on a shared INTx line"
    nvme-bind "$CTRL_FILE" none >/dev/null || fail "cannot release the controller"
    echo "queues on INTx ($(echo "$line" | awk '{ print $1 }') $(echo "$line" | grep -o 'IO-APIC[^ ]*\|[0-9]*-fasteoi' | head -n 1)), I/O verified, no polling"
}

check intx-fallback intx_only
