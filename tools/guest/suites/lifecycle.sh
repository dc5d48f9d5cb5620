# Binding and loading over and over, with and without I/O running; afterwards nothing is left
# behind and the stock driver takes the device back. The soak suite runs the same cycles 30 and
# 10 times (tools/test soak); here each count is what the defect it targets needs, said at its
# check below.

# The cycles write the driver's bind and unbind files directly: nvme-bind's busy checks (tested
# in the bind suite) cost more than the bind itself on the debug kernel. The device's
# driver_override, set once, keeps the stock driver from taking it in between, and makes each
# insmod of the module bind it.
BIND=/sys/bus/pci/drivers/nvme_adaptive/bind

# Unbinds the null controller while fio has I/O in flight on it.
unbind_with_io() {
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk"
    start_background_io "$disk" randrw 120
    unbind_adaptive "$CTRL_NULL" || fail "unbind with I/O in flight did not finish"
    reap_background_io 60
}

# The null controller, unbound, has no disk or interrupt left.
no_disks_or_irqs_left() {
    [ -z "$(disks_of "$CTRL_NULL")" ] || fail "disks left: $(disks_of "$CTRL_NULL" | tr '\n' ' ')"
    ! grep -q -- "-$CTRL_NULL " /proc/interrupts || fail "interrupts left: $(grep -- "-$CTRL_NULL " /proc/interrupts)"
}

# bind_cycles N: N unbinds and binds of the null controller, every third unbind with I/O in
# flight.
bind_cycles() {
    # A clean start: no controller left bound (or set to bind) by an earlier suite.
    for c in $CTRL_NULL $CTRL_FILE $CTRL_MULTI $CTRL_SLOW; do
        nvme-bind "$c" none >/dev/null || fail "cannot release $c"
    done
    to_adaptive "$CTRL_NULL" || fail "first bind failed"
    for i in $(seq 1 "$1"); do
        if [ $((i % 3)) = 0 ]; then
            unbind_with_io
        else
            unbind_adaptive "$CTRL_NULL" || fail "cycle $i: unbind failed"
        fi
        no_disks_or_irqs_left
        echo "$CTRL_NULL" >$BIND || fail "cycle $i: bind failed"
        disk_of "$CTRL_NULL" 1 >/dev/null || fail "cycle $i: no disk after bind"
    done
}

# Unbinds the null controller while its character device is open: nvme-core keeps the
# controller, and with it the driver's queues, until the last close, past the unbind after
# which devres unmaps BAR0. The queues must have let go of their doorbells before that (one
# still held warns and keeps the BAR mapped). Then binds it again.
unbind_held_open() {
    ctrl=$(ctrl_of "$CTRL_NULL") || fail "no controller"
    held=$(dmesg_count "held past unbind")
    exec 3<"/dev/$ctrl" || fail "cannot open /dev/$ctrl"
    unbind_adaptive "$CTRL_NULL" || fail "unbind with /dev/$ctrl open hung"
    no_disks_or_irqs_left
    [ "$(dmesg_count "held past unbind")" = "$held" ] || fail "a queue held a doorbell past the unbind"
    exec 3<&-
    echo "$CTRL_NULL" >$BIND || fail "bind after the close failed"
    disk_of "$CTRL_NULL" 1 >/dev/null || fail "no disk after the bind"
}

# module_cycles N: N insmods (each binding the null controller) and rmmods, every second one with
# I/O in flight and the disk open when rmmod is tried.
module_cycles() {
    unload_adaptive || fail "rmmod before the cycles failed"
    echo nvme_adaptive >"/sys/bus/pci/devices/$CTRL_NULL/driver_override"
    for i in $(seq 1 "$1"); do
        load_adaptive || fail "cycle $i: insmod failed"
        [ "$(bound_driver "$CTRL_NULL")" = nvme_adaptive ] || fail "cycle $i: insmod did not bind the overridden device"
        if [ $((i % 2)) = 0 ]; then
            disk=$(disk_of "$CTRL_NULL" 1) || fail "cycle $i: no disk"
            start_background_io "$disk" randrw 120
            # An open disk pins the module: rmmod refuses cleanly.
            rmmod nvme_adaptive 2>/dev/null && fail "cycle $i: rmmod succeeded with the disk open"
            unbind_adaptive "$CTRL_NULL" || fail "cycle $i: unbind hung"
            reap_background_io 60
        fi
        unload_adaptive || fail "cycle $i: rmmod failed for 60 s"
        [ ! -d /sys/module/nvme_adaptive ] || fail "cycle $i: module still present"
    done
}

nothing_left() {
    no_disks_or_irqs_left
    [ ! -d /sys/kernel/debug/nvme_adaptive ] || fail "debugfs directory left"
}

KMEMLEAK=/sys/kernel/debug/kmemleak

# Two scans (an object is reported once two scans found it unreferenced). kmemleak that has
# disabled itself (out of memory for its metadata, or an internal error) refuses the scan and has
# said so in the log: that fails the check instead of reporting no leaks.
kmemleak_scan() {
    [ -e $KMEMLEAK ] || skip "kmemleak is not in this kernel (the debug kernel has it)"
    off=$(dmesg | grep -E 'kmemleak: .*(disabled|[Cc]annot|failed)' | head -n 1)
    [ -z "$off" ] || fail "kmemleak has disabled itself: $off"
    for i in 1 2; do
        err=$(echo scan 2>&1 >$KMEMLEAK) || fail "kmemleak refused the scan ($err): it has disabled itself"
    done
}

# Leaks of the bind/unbind cycles, with the module still loaded so that kmemleak's backtraces
# name it; then the reports so far are set aside for the module cycles.
no_leaks_bound() {
    kmemleak_scan
    n=$(grep -c nvme_adaptive $KMEMLEAK)
    [ "$n" = 0 ] || fail "kmemleak: $n lines naming nvme_adaptive: $(grep -B2 -A12 nvme_adaptive $KMEMLEAK | head -20 | tr '\n' ' ')"
    echo clear >$KMEMLEAK
}

# Leaks of the insmod/rmmod cycles: any report since no_leaks_bound (the module is gone, so its
# frames no longer have names).
no_leaks_unloaded() {
    kmemleak_scan
    n=$(grep -c "unreferenced object" $KMEMLEAK)
    [ "$n" = 0 ] || fail "kmemleak: $n new unreferenced objects: $(head -n 20 $KMEMLEAK | tr '\n' ' ')"
}

stock_takes_it_back() {
    load_stock || fail "stock driver did not load"
    to_stock "$CTRL_NULL" || fail "stock driver did not bind"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no stock disk"
    dd if="/dev/$disk" of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null || fail "stock read failed"
}

# The soak suite sources this file for its functions, and runs the long cycles itself.
[ "$SUITE" = lifecycle ] || return 0
# 6 binds, 2 of them with I/O in flight: what an unbind leaves behind (a disk, an interrupt) is
# checked after each and shows at the first; a leak per bind or unbind leaves 6 objects nothing
# points to, and kmemleak (no-leaks-bound) reports each; each unbind under I/O has fio's
# requests in flight to cancel. Races that hit one cycle in many are the soak's (30 binds).
check bind-unbind-6 bind_cycles 6
check no-leaks-bound no_leaks_bound
check unbind-held-open unbind_held_open
check unbind-last nvme-bind "$CTRL_NULL" none
# 4 loads, 2 with the disk open: the module's own state (its PCI driver, its CPU-hotplug states,
# its debugfs directory) is made and removed at each, so a leak shows at the first unload and
# anything left that makes the next insmod fail shows at the second; rmmod must refuse while
# the disk is open, twice. The soak loads 10 times.
check insmod-rmmod-4 module_cycles 4
check nothing-left nothing_left
check no-leaks-unloaded no_leaks_unloaded
check stock-takes-back stock_takes_it_back
