# Errors: parameter validation at load and at runtime; a lost completion ends in a controller
# reset and a retried request, not a hang; a controller that stops answering fails its I/O.

rejected_at_load() {
    # rejected_at_load PARAM=VALUE RANGE_TEXT
    unload_adaptive
    load_deps || fail "the modules nvme_adaptive depends on did not load"
    name=${1%%=*}
    want="invalid $name=.*must be $2"
    before=$(dmesg_count "$want")
    insmod "$NVA_KO" "$1" >/dev/null 2>&1 && { rmmod nvme_adaptive; fail "insmod accepted $1"; }
    [ "$(dmesg_count "$want")" -gt "$before" ] || fail "no message naming $name and its range: $(dmesg | tail -n 2)"
}

accepted_at_load() {
    unload_adaptive
    load_deps || fail "the modules nvme_adaptive depends on did not load"
    insmod "$NVA_KO" max_delay_us=500 io_queue_depth=64 poll_queues=1 || fail "insmod refused valid values"
    [ "$(cat $PARAMS/max_delay_us)" = 500 ] || fail "max_delay_us reads $(cat $PARAMS/max_delay_us)"
    [ "$(cat $PARAMS/io_queue_depth)" = 64 ] || fail "io_queue_depth reads $(cat $PARAMS/io_queue_depth)"
}

runtime_writes() {
    echo 250 >$PARAMS/max_delay_us || fail "valid write refused"
    [ "$(cat $PARAMS/max_delay_us)" = 250 ] || fail "value not updated"
    want='invalid max_delay_us=.*must be 5 to 100000 (us)'
    before=$(dmesg_count "$want")
    (echo 0 >$PARAMS/max_delay_us) 2>/dev/null && fail "max_delay_us=0 accepted"
    [ "$(cat $PARAMS/max_delay_us)" = 250 ] || fail "value changed by a refused write"
    [ "$(dmesg_count "$want")" -gt "$before" ] || fail "no message for the refused write"
    (echo abc >$PARAMS/target_batch) 2>/dev/null && fail "non-number accepted"
    # The queue layout's parameters are writable too, as pci.c's (they apply at the next reset),
    # poll_queues and write_queues up to the CPU count.
    cpus=$(possible_cpus)
    want="invalid poll_queues=.*must be 0 to $cpus (queues)"
    before=$(dmesg_count "$want")
    (echo $((cpus + 1)) >$PARAMS/poll_queues) 2>/dev/null && fail "poll_queues=$((cpus + 1)) accepted with $cpus CPUs"
    [ "$(dmesg_count "$want")" -gt "$before" ] || fail "no message naming poll_queues and 0 to $cpus"
    (echo 4096 >$PARAMS/io_queue_depth) 2>/dev/null && fail "io_queue_depth=4096 accepted"
    want="invalid write_queues=.*must be 0 to $cpus (queues)"
    before=$(dmesg_count "$want")
    (echo $((cpus + 1)) >$PARAMS/write_queues) 2>/dev/null && fail "write_queues=$((cpus + 1)) accepted with $cpus CPUs"
    [ "$(dmesg_count "$want")" -gt "$before" ] || fail "no message naming write_queues and 0 to $cpus"
    set_params poll_queues="$cpus" io_queue_depth=2 write_queues="$cpus" poll_queues=1 io_queue_depth=64 write_queues=0
}

# The number of possible CPUs (blk_mq_num_possible_queues(0), the largest poll_queues).
possible_cpus() {
    n=0
    for r in $(tr , ' ' </sys/devices/system/cpu/possible); do
        n=$((n + ${r#*-} - ${r%-*} + 1))
    done
    echo $n
}

# Loses one completion (fault injection), with a 2 s I/O timeout: the watchdog finds the command,
# polls the queue, resets the controller and the request is retried.
lost_completion_recovers() {
    to_adaptive "$CTRL_FILE" || fail "bind failed"
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    ctrl=$(ctrl_of "$CTRL_FILE" "$disk") || fail "no controller name"
    echo 2000 >"/sys/block/$disk/queue/io_timeout"
    fi=/sys/kernel/debug/fail_io_timeout
    echo 0 >$fi/verbose
    echo 100 >$fi/probability
    echo 1 >$fi/times
    echo 1 >"/sys/block/$disk/io-timeout-fail"
    resets=$(dmesg_count "$ctrl: .*timeout, reset controller")
    retries=$(stat_sum "$ctrl" retries)
    start=$(date +%s)
    out=$(timeout -s KILL 90 dd if="/dev/$disk" of=/dev/null bs=4096 count=1 iflag=direct 2>&1)
    rc=$?
    [ $rc != 137 ] || out="the read was still waiting after 90 s (killed)"
    echo 0 >"/sys/block/$disk/io-timeout-fail"
    echo 30000 >"/sys/block/$disk/queue/io_timeout"
    [ $rc = 0 ] || fail "read did not complete after the lost completion (rc $rc): $out"
    [ "$(dmesg_count "$ctrl: .*timeout, reset controller")" -gt "$resets" ] || fail "no controller reset logged"
    # The lost command was retried after the reset, not completed from nowhere.
    [ "$(stat_sum "$ctrl" retries)" -gt "$retries" ] || fail "retries stayed at $retries after the reset"
    echo "recovered in $(($(date +%s) - start)) s"
}

works_after_reset() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    run_fio --name=after-reset --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=32 --size=8m --verify=crc32c --do_verify=1
}

no_disk_of() {
    ! disk_of "$@"
}

# A reset in which every Create I/O Completion Queue fails (nvme-core's fault injection on the
# admin queue) loses the I/O queues: the disks go, the controller stays live. The next reset,
# without the failures, brings the queues and the disks back, and they work.
lost_queues_come_back() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    ctrl=$(ctrl_of "$CTRL_FILE" "$disk") || fail "no controller name"
    fi=/sys/kernel/debug/$ctrl/fault_inject
    [ -d "$fi" ] || fail "no $fi (CONFIG_FAULT_INJECTION_DEBUG_FS)"
    echo 0 >$fi/verbose
    echo 5 >$fi/opcode
    echo 100 >$fi/probability
    echo -1 >$fi/times
    lost=$(dmesg_count "$ctrl: IO queues lost")
    echo 1 >"/sys/class/nvme/$ctrl/reset_controller"
    wait_for 60 sh -c "[ \$(cat /sys/class/nvme/$ctrl/state) = live ]"
    state=$(cat "/sys/class/nvme/$ctrl/state")
    echo 0 >$fi/probability
    [ "$state" = live ] || fail "$ctrl $state after the reset that lost its queues"
    [ "$(dmesg_count "$ctrl: IO queues lost")" -gt "$lost" ] || fail "no \"IO queues lost\" after failing every Create I/O CQ"
    wait_for 60 no_disk_of "$CTRL_FILE" 1 || fail "disk still there without I/O queues"
    echo 1 >"/sys/class/nvme/$ctrl/reset_controller"
    wait_for 60 disk_of "$CTRL_FILE" 1 || fail "no disk after the reset that should recover the queues"
    disk=$(disk_of "$CTRL_FILE" 1)
    run_fio --name=after-lost --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=32 --size=8m --verify=crc32c --do_verify=1 || return 1
    echo "$(grep -c "${ctrl}q[1-9]" /proc/interrupts) I/O vectors back"
}

# Sets (1) or clears (0) the memory-space enable bit of a device's PCI command register. Cleared,
# the controller no longer answers: QEMU drops doorbell writes and register reads return zero.
set_memory_space() {
    cfg=/sys/bus/pci/devices/$1/config
    cmd=$(dd if="$cfg" bs=1 skip=4 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
    if [ "$2" = 1 ]; then cmd=$((cmd | 2)); else cmd=$((cmd & ~2)); fi
    printf "\\$(printf %o "$cmd")" | dd of="$cfg" bs=1 seek=4 count=1 conv=notrunc 2>/dev/null
}

# The controller stops answering under load (memory decoding off, 2 s I/O timeout): its commands
# time out and a reset follows. Either the reset fails and the controller is given up on (its
# disk loses its capacity, a read fails promptly), or, as with pci.c, whose reset enables the
# device's memory decoding again, the reset brings it back and reads work. Either way nothing
# hangs, unbind is clean, and the controller works again once it answers.
dead_controller_fails_io() {
    to_adaptive "$CTRL_NULL" || fail "bind failed"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk"
    ctrl=$(ctrl_of "$CTRL_NULL" "$disk") || fail "no controller name"
    # The driver's own words, or nvme-core's (pci.c's).
    dead="giving up on the controller\|$ctrl: Disabling device after reset failure"
    reset="controller reset done\|$ctrl: .*timeout, reset controller"
    given_up=$(dmesg_count "$dead") resets=$(dmesg_count "$reset")
    echo 2000 >"/sys/block/$disk/queue/io_timeout" || fail "cannot set the disk's I/O timeout"
    # The load needs only to have commands in flight when the controller stops answering (they
    # time out whatever fio does next); a controller that comes back lets fio run out its time,
    # which the check then waits for, so the time is short.
    start_background_io "$disk" randread 20
    set_memory_space "$CTRL_NULL" 0
    # Timeouts (2 s, twice: abort, then reset); checked once a second (each check forks).
    outcome=
    for i in $(seq 1 90); do
        if [ "$(dmesg_count "$dead")" -gt "$given_up" ]; then outcome=given-up; break; fi
        if [ "$(dmesg_count "$reset")" -gt "$resets" ]; then outcome=reset; break; fi
        sleep 1
    done
    [ -n "$outcome" ] || {
        set_memory_space "$CTRL_NULL" 1
        kill "$FIO_PID" 2>/dev/null
        fail "no reset and no give-up 90 s after the controller stopped answering"
    }
    if [ "$outcome" = reset ]; then
        # The reset either fails (given up, the reset's wait for CSTS.RDY is CAP.TO, 7.5 s) or
        # brings the controller back: it enables memory decoding itself (pci_enable_device, as
        # pci.c's). Meanwhile the check leaves the command register alone: its read-modify-write
        # of it, racing the reset's pci_set_master, once cleared bus mastering, and the
        # controller's admin commands then timed out.
        for i in $(seq 1 60); do
            if [ "$(dmesg_count "$dead")" -gt "$given_up" ]; then outcome=given-up; break; fi
            if limit 20 "a read after the reset" dd if="/dev/$disk" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
                outcome=recovered
                break
            fi
            sleep 1
        done
    fi
    reap_background_io 60
    # The driver is done with the controller: memory decoding back on (if the controller was
    # given up on before a reset turned it on), for the unbind and the rebind below.
    set_memory_space "$CTRL_NULL" 1
    case "$outcome" in
        given-up)
            # A dead disk has no capacity left: a read gets an error or end of file, promptly.
            [ "$(cat /sys/block/$disk/size)" = 0 ] || fail "the dead disk still has $(cat /sys/block/$disk/size) sectors"
            got=$(timeout -s KILL 30 dd if="/dev/$disk" bs=4096 count=1 iflag=direct 2>/dev/null | wc -c
                exit "${PIPESTATUS[0]}")
            [ $? != 137 ] || fail "a read from the dead controller hung (killed after 30 s)"
            [ "$got" = 0 ] || fail "read $got bytes from the dead controller" ;;
        recovered) ;;
        *) fail "after the reset, neither given up on nor reading again within 60 s" ;;
    esac
    unbind_adaptive "$CTRL_NULL" || fail "unbind hung"
    ! grep -q "${ctrl}q" /proc/interrupts || fail "interrupts left after unbind"
    to_adaptive "$CTRL_NULL" || fail "rebind failed once the controller answered again"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk after rebind"
    dd if="/dev/$disk" of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null || fail "read after rebind failed"
    echo "$outcome"
}

poll_queue_serves_hipri() {
    # Loaded above with poll_queues=1: queue 3 has no vector and serves io_uring polled I/O.
    to_adaptive "$CTRL_NULL" || fail "bind failed"
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk"
    [ "$(cat /sys/block/$disk/queue/io_poll)" = 1 ] || fail "queue does not support polling"
    run_fio --name=hipri --filename="/dev/$disk" --direct=1 --ioengine=io_uring --hipri=1 \
        --rw=randread --bs=4k --iodepth=4 --runtime=3 --time_based || return 1
    ctrl=$(ctrl_of "$CTRL_NULL" "$disk") || fail "no controller name"
    polled=$(awk '$1 == "reaped_blk_poll:" { print $2 }' "/sys/kernel/debug/nvme_adaptive/$ctrl/q3")
    [ "${polled:-0}" -gt 0 ] || fail "no completions reaped by blk-mq polling on q3"
    [ "$(awk '$1 == "vector:" { print $2 }' "/sys/kernel/debug/nvme_adaptive/$ctrl/q3")" = 0 ] || fail "poll queue has a vector"
    ! grep -q "${ctrl}q3" /proc/interrupts || fail "poll queue has an interrupt"
}

# PCI error recovery under verified writes: the host injects an uncorrectable non-fatal error
# (Unexpected Completion) at the root port above the hot-plug slot's controller (QEMU's
# pcie_aer_inject_error, which tools/vm runs when the guest asks on its console). The AER
# driver walks the driver's handlers (error_detected with the channel normal, then resume):
# recovery succeeds, no write is lost, the controller stays live. (A fatal error's path, the
# frozen channel and slot_reset, needs a link reset that QEMU 10.0's root port does not
# complete: after it the kernel finds no Data Link Layer Link Active and gives the device up.)
recoveries() { dmesg | grep -c "AER: device recovery successful"; }
recovered_since() { [ "$(recoveries)" -gt "$1" ]; }

aer_recovers() {
    to_adaptive "$CTRL_HP" || fail "bind failed"
    disk=$(disk_of "$CTRL_HP" 1) || fail "no disk under $CTRL_HP"
    c=$(ctrl_of "$CTRL_HP" "$disk") || fail "no controller name for $CTRL_HP"
    before=$(recoveries)
    timeout -s KILL 600 fio --name=aer --filename="/dev/$disk" --direct=1 --ioengine=io_uring \
        --rw=randwrite --bs=4k --iodepth=32 --size=32m --verify=crc32c --do_verify=1 --verify_fatal=1 \
        --output-format=terse --terse-version=3 >/tmp/aer-fio.out 2>&1 &
    pid=$!
    wait_for 60 has_inflight "$disk" || { kill $pid; fail "fio never had I/O in flight"; }
    echo "NVA-HOST-HMP pcie_aer_inject_error rp0 UNX_COMP" >/dev/console
    wait_for 120 recovered_since "$before" ||
        { kill $pid; fail "no successful recovery: $(dmesg | grep 'AER:' | tail -n 3 | tr '\n' ' ')"; }
    wait_verify $pid /tmp/aer-fio.out "the error recovery"
    wait_for 60 ctrl_live "$c" || fail "$c $(cat "/sys/class/nvme/$c/state") after the recovery"
    [ "$(bound_driver "$CTRL_HP")" = nvme_adaptive ] || fail "$CTRL_HP is on $(bound_driver "$CTRL_HP") now"
    echo "non-fatal error at the root port recovered under verify, $c live"
}

check rejects-max-delay rejected_at_load max_delay_us=0 "5 to 100000 (us)"
check rejects-queue-depth rejected_at_load io_queue_depth=5000 "2 to 4095 (entries)"
check rejects-adaptive rejected_at_load adaptive=2 "0 to 1 (bool)"
check rejects-garbage rejected_at_load sample_size=many "8 to 65536 (completions)"
check rejects-poll-queues rejected_at_load poll_queues=$(($(possible_cpus) + 1)) "0 to $(possible_cpus) (queues)"
check rejects-write-queues rejected_at_load write_queues=$(($(possible_cpus) + 1)) "0 to $(possible_cpus) (queues)"
check accepts-valid accepted_at_load
check runtime-writes runtime_writes
check lost-completion-recovers lost_completion_recovers
check works-after-reset works_after_reset
check lost-queues-come-back lost_queues_come_back
check poll-queue-hipri poll_queue_serves_hipri
check aer-recovers aer_recovers
check dead-controller-fails-io dead_controller_fails_io
