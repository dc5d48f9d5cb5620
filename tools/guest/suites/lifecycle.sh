# Binding and loading over and over, with and without I/O running; afterwards nothing is left
# behind and the stock driver takes the device back.

# The cycles write the driver's bind and unbind files directly: nvme-bind's busy checks (tested
# in the bind suite) cost more than the bind itself on the debug kernel. The device's
# driver_override, set once, keeps the stock driver from taking it in between, and makes each
# insmod of the module bind it.
BIND=/sys/bus/pci/drivers/nvme_adaptive/bind
UNBIND=/sys/bus/pci/drivers/nvme_adaptive/unbind

# Starts fio reading the controller's first disk in the background; waits until it has I/O in
# flight. Sets FIO_PID.
start_background_io() {
    disk=$(disk_of "$1" 1) || fail "no disk"
    fio --name=bg --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randrw --bs=4k \
        --iodepth=32 --runtime=120 --time_based >/dev/null 2>&1 &
    FIO_PID=$!
    wait_for 60 sh -c "[ \"\$(awk '{ print \$1 + \$2 }' /sys/block/$disk/inflight)\" -gt 0 ]" ||
        fail "fio never had I/O in flight"
}

# Waits for the background fio to end (it fails once its disk is gone).
reap_background_io() {
    i=0
    while kill -0 "$FIO_PID" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 600 ] || { kill -9 "$FIO_PID"; fail "fio still running 60 s after its disk went"; }
        usleep 100000
    done
    wait "$FIO_PID" 2>/dev/null
    return 0
}

unbind_with_io() {
    start_background_io "$CTRL_NULL" || return 1
    timeout 60 sh -c "echo $CTRL_NULL >$UNBIND" || fail "unbind with I/O in flight did not finish"
    reap_background_io
}

bind_cycles() {
    # A clean start: no controller left bound (or set to bind) by an earlier suite.
    for c in $CTRL_NULL $CTRL_FILE $CTRL_MULTI $CTRL_SLOW; do
        nvme-bind "$c" none >/dev/null || fail "cannot release $c"
    done
    to_adaptive "$CTRL_NULL" || fail "first bind failed"
    for i in $(seq 1 30); do
        if [ $((i % 3)) = 0 ]; then
            unbind_with_io || fail "cycle $i: $(cat /tmp/err 2>/dev/null)"
        else
            timeout 60 sh -c "echo $CTRL_NULL >$UNBIND" || fail "cycle $i: unbind failed"
        fi
        [ -z "$(ls /sys/block | grep nvma)" ] || fail "cycle $i: disks left: $(ls /sys/block | grep nvma)"
        ! grep -q nvma /proc/interrupts || fail "cycle $i: interrupts left behind"
        echo "$CTRL_NULL" >$BIND || fail "cycle $i: bind failed"
        disk_of "$CTRL_NULL" 1 >/dev/null || fail "cycle $i: no disk after bind"
    done
}

module_cycles() {
    unload_adaptive || fail "rmmod before the cycles failed"
    echo nvme_adaptive >"/sys/bus/pci/devices/$CTRL_NULL/driver_override"
    for i in $(seq 1 10); do
        load_adaptive || fail "cycle $i: insmod failed"
        [ "$(bound_driver "$CTRL_NULL")" = nvme_adaptive ] || fail "cycle $i: insmod did not bind the overridden device"
        if [ $((i % 2)) = 0 ]; then
            start_background_io "$CTRL_NULL" || return 1
            # An open disk pins the module: rmmod refuses cleanly.
            rmmod nvme_adaptive 2>/dev/null && fail "cycle $i: rmmod succeeded with the disk open"
            timeout 60 sh -c "echo $CTRL_NULL >$UNBIND" || fail "cycle $i: unbind hung"
            reap_background_io
        fi
        timeout 60 rmmod nvme_adaptive || fail "cycle $i: rmmod failed"
        [ ! -d /sys/module/nvme_adaptive ] || fail "cycle $i: module still present"
    done
}

nothing_left() {
    [ -z "$(ls /sys/block | grep nvma)" ] || fail "disks left: $(ls /sys/block | grep nvma)"
    ! grep -q nvma /proc/interrupts || fail "interrupts left: $(grep nvma /proc/interrupts)"
    [ ! -d /sys/kernel/debug/nvme_adaptive ] || fail "debugfs directory left"
}

KMEMLEAK=/sys/kernel/debug/kmemleak

# Leaks of the bind/unbind cycles, with the module still loaded so that kmemleak's backtraces
# name it; then the reports so far are set aside for the module cycles.
no_leaks_bound() {
    [ -w $KMEMLEAK ] || skip "kmemleak is not in this kernel (the debug kernel has it)"
    echo scan >$KMEMLEAK && echo scan >$KMEMLEAK
    n=$(grep -c nvme_adaptive $KMEMLEAK)
    [ "$n" = 0 ] || fail "kmemleak: $n lines naming nvme_adaptive: $(grep -B2 -A12 nvme_adaptive $KMEMLEAK | head -20 | tr '\n' ' ')"
    echo clear >$KMEMLEAK
}

# Leaks of the insmod/rmmod cycles: any report since no_leaks_bound (the module is gone, so its
# frames no longer have names).
no_leaks_unloaded() {
    [ -w $KMEMLEAK ] || skip "kmemleak is not in this kernel (the debug kernel has it)"
    echo scan >$KMEMLEAK && echo scan >$KMEMLEAK
    n=$(grep -c "unreferenced object" $KMEMLEAK)
    [ "$n" = 0 ] || fail "kmemleak: $n new unreferenced objects: $(head -n 20 $KMEMLEAK | tr '\n' ' ')"
}

stock_takes_it_back() {
    load_stock || fail "stock driver did not load"
    to_stock "$CTRL_NULL" || fail "stock driver did not bind"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no stock disk"
    dd if="/dev/$disk" of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null || fail "stock read failed"
}

check bind-unbind-30 bind_cycles
check no-leaks-bound no_leaks_bound
check unbind-last nvme-bind "$CTRL_NULL" none
check insmod-rmmod-10 module_cycles
check nothing-left nothing_left
check no-leaks-unloaded no_leaks_unloaded
check stock-takes-back stock_takes_it_back
