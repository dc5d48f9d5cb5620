# Adaptive interrupt polling on the slow controller (a device-bound queue, as on real flash):
# dense queues poll and take fewer interrupts, sparse ones stay on interrupts, every queue
# returns to interrupts when the load stops, data stays intact through thousands of switches,
# and teardown while polling is clean.

# The slow controller completes 300 to 2000 commands/s, hundreds of times fewer than a flash
# device: the latency window is scaled up and the batch down accordingly.
EMULATION="target_batch=2 max_delay_us=10000"

# Hard interrupts taken by the I/O vectors of controller CTRL (not the admin queue).
vector_irqs() {
    grep -E " $1q[1-9][0-9]*\$" /proc/interrupts | awk '{ s += $2 + $3 } END { print s + 0 }'
}

# Sets SLOW_DISK and SLOW_CTRL (its debugfs name) for the slow controller's namespace.
# (Each check runs in a subshell, so every check calls this.)
slow() {
    SLOW_DISK=$(disk_of "$CTRL_SLOW" 1) || fail "no disk on the slow controller"
    SLOW_CTRL=$(ctrl_of "$CTRL_SLOW" "$SLOW_DISK") || fail "no controller name for $CTRL_SLOW"
    [ -d "$STATS/$SLOW_CTRL" ] || fail "no statistics for $SLOW_CTRL"
}

setup_adaptive() {
    unload_adaptive
    load_adaptive $EMULATION || fail "insmod failed"
    to_adaptive "$CTRL_SLOW" || fail "bind failed"
    slow
}

# randread on the slow disk at queue depth $1, $2 I/Os (4 KiB), one job on CPU 1. Sized by I/O
# count, not time: on a loaded host a timed run does fewer I/Os and asserts less.
load_slow() {
    run_fio --name=load --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring --rw=randread \
        --bs=4k --iodepth="$1" --size=256m --io_size=$(($2 * 4))k --cpus_allowed=1
}

# Runs load_slow and reports "IOS IRQS EPISODES POLLED" for the run.
measure() {
    i0=$(vector_irqs "$SLOW_CTRL"); e0=$(stat_sum "$SLOW_CTRL" episodes)
    p0=$(stat_sum "$SLOW_CTRL" reaped_poll); c0=$(stat_sum "$SLOW_CTRL" completed)
    load_slow "$@" || return 1
    i1=$(vector_irqs "$SLOW_CTRL"); e1=$(stat_sum "$SLOW_CTRL" episodes)
    p1=$(stat_sum "$SLOW_CTRL" reaped_poll); c1=$(stat_sum "$SLOW_CTRL" completed)
    echo "$((c1 - c0)) $((i1 - i0)) $((e1 - e0)) $((p1 - p0))"
}

dense_queue_polls() {
    slow || return 1
    set_params adaptive=0
    set -- $(measure 32 1500) || return 1
    off_ios=$1 off_irqs=$2
    set_params adaptive=1
    set -- $(measure 32 1500) || return 1
    on_ios=$1 on_irqs=$2 episodes=$3 polled=$4
    [ "$episodes" -gt 0 ] || fail "no poll episode at QD32"
    [ $((polled * 2)) -gt "$on_ios" ] || fail "only $polled of $on_ios completions reaped by polling"
    # Hard IRQs per I/O, in thousandths, must drop well below the interrupt-only run's.
    off=$((off_irqs * 1000 / off_ios)) on=$((on_irqs * 1000 / on_ios))
    [ $((on * 2)) -lt "$off" ] || fail "IRQs per 1000 I/Os: $on with polling vs $off without"
    echo "IRQs per 1000 I/Os: $off off, $on adaptive ($episodes episodes)"
}

sparse_queue_stays() {
    slow || return 1
    set -- $(measure 1 600) || return 1
    [ "$3" = 0 ] || fail "QD1 started $3 poll episodes"
    [ "$4" = 0 ] || fail "QD1 reaped $4 completions by polling"
    [ "$2" -ge "$1" ] || fail "QD1 took $2 interrupts for $1 I/Os"
}

# A queue of the slow controller is polling.
some_queue_polls() {
    queue_files "$SLOW_CTRL" | xargs grep -qx 'stage: poll'
}

# Every queue of the controller is on interrupts: not polling, vector not masked.
all_on_interrupts() {
    for q in $(queue_files "$SLOW_CTRL"); do
        grep -qx 'stage: poll' "$q" && return 1
        grep -qx 'masked: 1' "$q" && return 1
    done
    return 0
}

back_on_interrupts() {
    slow || return 1
    load_slow 32 900 || return 1
    # The last episode ends at the next poll that finds the queue idle.
    wait_for 10 all_on_interrupts || fail "queues still polling after the load stopped"
    # And the vectors work: a light load is served by interrupts.
    i0=$(vector_irqs "$SLOW_CTRL")
    load_slow 1 100 || return 1
    [ "$(vector_irqs "$SLOW_CTRL")" -gt "$i0" ] || fail "no interrupts after polling ended"
}

# fio write+verify (each block read back and checked soon after it is written), 4096 writes and
# their reads, while the parameters force very short episodes and backoffs. One job, so that one queue gets all of
# the device's completions (split over two, the debug kernel's rate fills no batch in time).
verify_through_switches() {
    slow || return 1
    set_params sample_size=8 target_batch=2 episode_polls=2 backoff_us=10 backoff_max_us=100
    e0=$(stat_sum "$SLOW_CTRL" episodes)
    run_fio --name=switches --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randwrite --bs=4k --iodepth=24 --cpus_allowed=1 --size=64m --io_size=16m \
        --verify=crc32c --verify_backlog=64 --verify_fatal=1 --randrepeat=0 || return 1
    e1=$(stat_sum "$SLOW_CTRL" episodes)
    set_params sample_size=64 $EMULATION episode_polls=10000 backoff_us=1000 backoff_max_us=1000000
    # Each episode is two switches: mask and poll, then unmask.
    [ $((e1 - e0)) -ge 500 ] || fail "only $((e1 - e0)) poll episodes"
    echo "$((2 * (e1 - e0))) mode switches, data verified"
}

# Starts fio at QD 32 on the slow disk for $1 seconds in the background (its pid in $pid) and
# waits until a queue polls.
start_polling_load() {
    fio --name=bg --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring --rw=randread \
        --bs=4k --iodepth=32 --runtime="$1" --time_based --cpus_allowed=1 >/dev/null 2>&1 &
    pid=$!
    wait_for 10 some_queue_polls || { kill $pid; fail "never polled"; }
}

runtime_switch() {
    slow || return 1
    # adaptive=0 during polling ends it at the next poll; adaptive=1 brings it back.
    start_polling_load 20
    set_params adaptive=0
    wait_for 5 all_on_interrupts || { kill $pid; echo 1 >$PARAMS/adaptive; fail "still polling after adaptive=0"; }
    p0=$(stat_sum "$SLOW_CTRL" reaped_poll)
    sleep 1
    p1=$(stat_sum "$SLOW_CTRL" reaped_poll)
    set_params adaptive=1
    wait_for 10 some_queue_polls || { kill $pid; fail "did not poll again"; }
    kill $pid
    wait $pid 2>/dev/null
    [ "$p1" = "$p0" ] || fail "polled $((p1 - p0)) completions with adaptive=0"
}

unbind_while_polling() {
    slow || return 1
    start_polling_load 60
    unbind_adaptive "$CTRL_SLOW" || fail "unbind hung"
    wait $pid 2>/dev/null
    ! grep -q "${SLOW_CTRL}q" /proc/interrupts || fail "interrupts left after unbind"
    # Bind again, poll, and unload the module right after the load stops.
    to_adaptive "$CTRL_SLOW" || fail "rebind failed"
    slow || return 1
    load_slow 32 600 || return 1
    nvme-bind "$CTRL_SLOW" none >/dev/null || fail "unbind failed"
    limit 60 rmmod rmmod nvme_adaptive || fail "rmmod failed"
}

check setup setup_adaptive
check dense-queue-polls dense_queue_polls
check sparse-queue-stays sparse_queue_stays
check back-on-interrupts back_on_interrupts
check verify-through-switches verify_through_switches
check runtime-switch runtime_switch
check unbind-while-polling unbind_while_polling
