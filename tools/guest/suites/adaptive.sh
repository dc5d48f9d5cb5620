# Adaptive interrupt polling with the module's defaults. Where the CPU sets the pace (the null
# controller under a deep closed loop) a queue polls most completions and takes fewer
# interrupts; on two devices slower than the emulated CPU (device-bound queues, as on real
# flash): the throttled slow controller (2000 commands/s on the plain kernel: ~16 ms at QD 32)
# and a fixed 20 ms one, an open-loop stream on the 20 ms one polls, sparse queues stay on
# interrupts on both, every queue returns to interrupts when the load stops, data stays intact
# through hundreds of switches, a write queue and a read queue poll each on their own, and
# teardown while polling is clean, also while the queue's CPU goes offline. tools/test runs this
# suite on the plain kernel: on the debug kernel the guest's CPU, not the device, limits the
# queue (about 210 I/Os a second at QD 32 on the 20 ms device), too sparse for a poll of at most
# 10 ms to collect a batch.

# Hard interrupts taken by the I/O vectors of controller CTRL (not the admin queue).
vector_irqs() {
    grep -E " $1q[1-9][0-9]*\$" /proc/interrupts | awk '{ s += $2 + $3 } END { print s + 0 }'
}

setup_adaptive() {
    unload_adaptive
    load_adaptive || fail "insmod failed"
    to_adaptive "$CTRL_SLOW" && to_adaptive "$CTRL_LAT" && to_adaptive "$CTRL_NULL" || fail "bind failed"
    slow
}

# The fio job of a randread load on disk $1 at queue depth $2, $3 I/Os (4 KiB) per job, on CPU
# 1, in the array JOB. Sized by I/O count, not time: on a loaded host a timed run does fewer
# I/Os and asserts less.
read_job() {
    JOB=(--filename="/dev/$1" --direct=1 --ioengine=io_uring --rw=randread --bs=4k
        --iodepth="$2" --size=256m --io_size=$(($3 * 4))k --cpus_allowed=1)
}

# randread on disk $1 at queue depth $2, $3 I/Os, one job; further arguments go to fio.
load_disk() {
    read_job "$1" "$2" "$3"
    shift 3
    run_fio --name=load "${JOB[@]}" "$@"
}

# dense_job DISK N: the dense load's job (in JOB), N reads on DISK as four independent streams
# of 250 reads a second (up to 8 in flight each), all on CPU 1: an open loop, about 20 commands
# on the 20 ms device and one completion a millisecond. In a closed loop paced by the device
# every microsecond a poll adds comes off the IOPS, so the policy polls there only as much as
# keeps the loss within 3 % (design.rst), which takes no fixed share of interrupts; where
# arrivals do not wait for completions, a poll within the latency budget (2 ms on average)
# collects several, and the queue polls for good.
dense_job() {
    read_job "$1" 8 $(($2 / 4))
    JOB+=(--numjobs=4 --rate_iops=250)
}

# The dense load of N reads on DISK (dense_load DISK N).
dense_load() {
    dense_job "$1" "$2"
    run_fio --name=load "${JOB[@]}" --group_reporting
}

load_slow() {
    load_disk "$SLOW_DISK" "$@"
}

# Runs "$3 $1 ${@:4}" (load_disk or dense_load on disk $1) on controller $2 and reports "IOS IRQS
# EPISODES POLLED" for the run.
measure() {
    i0=$(vector_irqs "$2"); e0=$(stat_sum "$2" episodes)
    p0=$(stat_sum "$2" reaped_poll); c0=$(stat_sum "$2" completed)
    "$3" "$1" "${@:4}" || return 1
    i1=$(vector_irqs "$2"); e1=$(stat_sum "$2" episodes)
    p1=$(stat_sum "$2" reaped_poll); c1=$(stat_sum "$2" completed)
    echo "$((c1 - c0)) $((i1 - i0)) $((e1 - e0)) $((p1 - p0))"
}

# The statistics file of controller $1's busiest queue (most completions), in REPLY.
busiest_queue() {
    local best= most=-1 f
    for f in $(queue_files "$1"); do
        qget "$f" completed && [ "$REPLY" -gt "$most" ] && most=$REPLY best=$f
    done
    REPLY=$best
}

# The policy's view of controller $1's busiest queue, for failure messages.
policy_digest() {
    busiest_queue "$1"
    queue_digest "$REPLY"
}

# Where the CPU sets the pace, the busiest queue polls most completions with the defaults, and
# its device interrupts per I/O fall below half of the interrupt-only run's: the null controller
# (no device latency) under one closed loop of 128 reads on CPU 1, which interrupts alone keep
# busy. (Where the device sets the pace, as on the 20 ms controller, a closed loop polls only as
# much as keeps its IOPS within 3 % of interrupts': no fixed share; design.rst.) Before the
# measured run, a shorter one lets the policy learn the device and the CPU's load.
dense_queue_polls_cpu_bound() {
    nullctl || return 1
    set -- "$NULL_DISK" "$NULL_CTRL"
    set_params adaptive=0
    set -- "$1" "$2" $(measure "$1" "$2" load_disk 128 30000) || return 1
    off_ios=$3 off_irqs=$4
    set_params adaptive=1
    load_disk "$1" 128 10000 || return 1
    set -- "$1" "$2" $(measure "$1" "$2" load_disk 128 60000) || return 1
    on_ios=$3 on_irqs=$4 episodes=$5 polled=$6
    [ "$episodes" -gt 0 ] || fail "$2: no poll episode under the CPU-bound load ($(policy_digest "$2"))"
    [ $((polled * 2)) -gt "$on_ios" ] ||
        fail "$2: only $polled of $on_ios completions reaped by polling ($(policy_digest "$2"))"
    # Hard IRQs per I/O, in thousandths, must drop well below the interrupt-only run's.
    off=$((off_irqs * 1000 / off_ios)) on=$((on_irqs * 1000 / on_ios))
    [ $((on * 2)) -lt "$off" ] ||
        fail "$2: IRQs per 1000 I/Os: $on with polling vs $off without ($(policy_digest "$2"))"
    echo "$2: IRQs per 1000 I/Os: $off off, $on adaptive ($episodes episodes, $polled of $on_ios polled," \
        "wait $(stat_sum "$2" wait_ns) ns)"
}

# The service latency the dense queue measured (each command from its submission to its reap,
# the submission stamped by blk-mq or by the driver) is the device's 20 ms, plus what emulation
# adds but far less than another 20 ms: a stamp on another clock, or none, is far outside.
latency_measured_at_20ms() {
    lat || return 1
    dense_load "$LAT_DISK" 512 || return 1
    busiest_queue "$LAT_CTRL"
    qget "$REPLY" latency_ns || fail "$LAT_CTRL: no latency_ns in $REPLY"
    [ "$REPLY" -ge 20000000 ] && [ "$REPLY" -lt 40000000 ] ||
        fail "$LAT_CTRL: measured a latency of $REPLY ns on the 20 ms device ($(policy_digest "$LAT_CTRL"))"
    echo "$LAT_CTRL: $REPLY ns"
}

# At QD 1 a poll could never collect two completions: the queue stays on interrupts.
sparse_stays() {
    set -- "$1" "$2" $(measure "$1" "$2" load_disk 1 "$3") || return 1
    [ "$5" = 0 ] || fail "$2: QD1 started $5 poll episodes"
    [ "$6" = 0 ] || fail "$2: QD1 reaped $6 completions by polling"
    [ "$4" -ge "$3" ] || fail "$2: QD1 took $4 interrupts for $3 I/Os"
}

sparse_queue_stays() {
    slow || return 1
    sparse_stays "$SLOW_DISK" "$SLOW_CTRL" 600
}

sparse_queue_stays_at_20ms() {
    lat || return 1
    sparse_stays "$LAT_DISK" "$LAT_CTRL" 200
}

# A queue of the slow controller is polling.
some_queue_polls() {
    queue_files "$SLOW_CTRL" | xargs grep -qx 'stage: poll'
}


back_on_interrupts() {
    slow || return 1
    load_slow 32 900 || return 1
    # The last episode ends at the next poll that finds the queue idle.
    wait_for 10 all_on_interrupts "$SLOW_CTRL" || fail "queues still polling after the load stopped"
    # And the vectors work: a light load is served by interrupts.
    i0=$(vector_irqs "$SLOW_CTRL")
    load_slow 1 100 || return 1
    [ "$(vector_irqs "$SLOW_CTRL")" -gt "$i0" ] || fail "no interrupts after polling ended"
}

# fio write+verify passes (verify_switches in lib.sh: every block read back and checked soon after
# it is written) while the parameters force episodes of two polls and 10 us backoffs, until the
# slow controller has switched modes at least 500 times.
verify_through_switches() {
    slow || return 1
    verify_switches "$SLOW_DISK" "$SLOW_CTRL" 250 600
}

# Runs "$@" until it succeeds, for at most $1 seconds of wall-clock time (wait_for counts tries,
# which take much longer than their nominal 0.1 s on a loaded host).
within() {
    end=$(($(date +%s) + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}

# What the 20 ms controller's queues are doing, for a failure message.
poll_state() {
    for q in $(queue_files "$LAT_CTRL"); do
        printf '%s: %s; ' "${q##*/}" "$(grep -E '^(stage|episodes|ended_[a-z]+|completed|latency_ns|slack_ns|per_irq|backoff_ns):' "$q" | tr '\n' ' ')"
    done
}

# A queue of the 20 ms controller is polling.
some_queue_polls() {
    queue_files "$LAT_CTRL" | xargs grep -qx 'stage: poll'
}

# Starts $1 reads of the dense load on the 20 ms disk in the background (its pid in $pid) and
# waits until a queue polls.
start_polling_load() {
    dense_job "$LAT_DISK" "$1"
    fio --name=bg "${JOB[@]}" >/dev/null 2>&1 &
    pid=$!
    within 60 some_queue_polls || { kill $pid; fail "never polled: $(poll_state)"; }
}

# The 20 ms controller completed $1 more commands than $2.
completed_beyond() {
    [ "$(stat_sum "$LAT_CTRL" completed)" -ge $(($2 + $1)) ]
}

# On the 20 ms controller, whose queue polls under the open-loop dense load (dense_job).
runtime_switch() {
    lat || return 1
    # adaptive=0 during polling ends it at the next poll; adaptive=1 brings it back.
    start_polling_load 100000
    set_params adaptive=0
    within 30 all_on_interrupts "$LAT_CTRL" || { kill $pid; echo 1 >$PARAMS/adaptive; fail "still polling after adaptive=0"; }
    # 300 completions with adaptive off: none of them polled.
    p0=$(stat_sum "$LAT_CTRL" reaped_poll) c0=$(stat_sum "$LAT_CTRL" completed)
    within 60 completed_beyond 300 "$c0" || { kill $pid; echo 1 >$PARAMS/adaptive; fail "the load stalled"; }
    p1=$(stat_sum "$LAT_CTRL" reaped_poll)
    set_params adaptive=1
    within 60 some_queue_polls || { kill $pid; fail "did not poll again: $(poll_state)"; }
    kill $pid
    wait $pid 2>/dev/null
    [ "$p1" = "$p0" ] || fail "polled $((p1 - p0)) completions with adaptive=0"
}

# Poll episodes of each queue of the 20 ms controller ("qN=EPISODES ...").
episodes_by_queue() {
    for q in $(queue_files "$LAT_CTRL"); do
        qget "$q" episodes && printf '%s=%s ' "${q##*/}" "$REPLY"
    done
}

# Queue $1 of the 20 ms controller counted more than $2 poll episodes.
episodes_beyond() {
    qget "$STATS/$LAT_CTRL/$1" episodes && [ "$REPLY" -gt "$2" ]
}

# Poll episodes of queue $2 in an episodes_by_queue line $1.
episodes_of() {
    for kv in $1; do
        [ "${kv%%=*}" = "$2" ] && { echo "${kv#*=}"; return 0; }
    done
    echo 0
}

# rebind_lat: the 20 ms controller probed again by ours, with the parameters as they are now
# (a reset keeps the tag set, and so whether it has a read map).
rebind_lat() {
    nvme-bind "$CTRL_LAT" none >/dev/null && to_adaptive "$CTRL_LAT" && wait_for 60 disk_of "$CTRL_LAT" 1
}

# With write_queues=1 the 20 ms controller, probed again, has one write queue beside a read
# queue per CPU (pci.c's layout), and each polls on its own: the open-loop dense load of writes
# from CPU 1 starts episodes on the write queue and none on a read queue, then the same load of
# reads starts them on CPU 1's read queue and none on the idle write queue; every queue is back
# on interrupts when its load stops.
write_queue_polls_alone() {
    set_params write_queues=1
    rebind_lat || { set_params write_queues=0; fail "rebind with write_queues=1 failed"; }
    set_params write_queues=0
    lat || return 1
    w=$(queue_of_cpu "$LAT_DISK" 1 default) && r=$(queue_of_cpu "$LAT_DISK" 1 read) ||
        fail "no write and read queue for CPU 1: $(grep . /sys/kernel/debug/block/$LAT_DISK/hctx*/type | tr '\n' ' ')"
    n=$(queue_files "$LAT_CTRL" | grep -vc '/q0$')
    [ "$n" = 3 ] || fail "$n I/O queues with write_queues=1 on 2 CPUs"
    for rw in randwrite randread; do
        if [ $rw = randwrite ]; then busy=$w; else busy=$r; fi
        before=$(episodes_by_queue)
        # Until the queue that serves the load polls (a fresh queue first samples the device).
        dense_job "$LAT_DISK" 100000
        fio --name=$rw "${JOB[@]}" --rw=$rw >/dev/null 2>&1 &
        pid=$!
        within 60 episodes_beyond "$busy" "$(episodes_of "$before" "$busy")" ||
            { stop_load; fail "$rw: no episode on $busy within 60 s: $(poll_state)"; }
        stop_load
        after=$(episodes_by_queue)
        within 10 all_on_interrupts "$LAT_CTRL" || fail "$rw: still polling after the load stopped: $(poll_state)"
        for kv in $after; do
            q=${kv%%=*} e=$((${kv#*=} - $(episodes_of "$before" "$q")))
            if [ "$q" = "$busy" ]; then
                [ "$e" -gt 0 ] || fail "$rw: no episode on $q, which served it: $(poll_state)"
                msg="${msg:+$msg, }$rw: $e episodes on $q"
            else
                [ "$e" = 0 ] || fail "$rw: $e episodes on $q, which it did not use (on $busy): $(poll_state)"
            fi
        done
    done
    rebind_lat || fail "rebind with write_queues=0 failed"
    lat || return 1
    n=$(queue_files "$LAT_CTRL" | grep -vc '/q0$')
    [ "$n" = 2 ] || fail "$n I/O queues after write_queues=0 and a rebind"
    echo "$msg, none on the other queues"
}

# Stops the load start_polling_load started once its disk is gone: fio would otherwise keep
# pacing its failed reads until the run's nominal length (100 s for 100000 reads).
stop_load() {
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
}

# Unbinding while the polling queue's CPU goes offline and back, five times: the CPU-hotplug
# callbacks stay until the queues are disabled, so every episode ends before its CPU takes the
# vector down (an unmask after that would be a kernel warning, which fails the run).
unbind_while_cpu_cycles() {
    lat || return 1
    start_polling_load 100000
    online=/sys/devices/system/cpu/cpu1/online
    (for i in 1 2 3 4 5; do echo 0 >$online; echo 1 >$online; done) &
    cycler=$!
    unbind_adaptive "$CTRL_LAT" || { wait $cycler; fail "unbind hung"; }
    wait $cycler
    stop_load
    [ "$(cat $online)" = 1 ] || fail "CPU 1 stayed offline"
    to_adaptive "$CTRL_LAT" || fail "rebind failed"
}

unbind_while_polling() {
    lat || return 1
    start_polling_load 100000
    unbind_adaptive "$CTRL_LAT" || fail "unbind hung"
    stop_load
    ! grep -q "${LAT_CTRL}q" /proc/interrupts || fail "interrupts left after unbind"
    # Bind again, poll, and unload the module right after the load stops.
    to_adaptive "$CTRL_LAT" || fail "rebind failed"
    lat || return 1
    dense_load "$LAT_DISK" 1500 || return 1
    nvme-bind "$CTRL_LAT" none >/dev/null || fail "unbind failed"
    limit 60 rmmod rmmod nvme_adaptive || fail "rmmod failed"
}

# The kernel threads of controller $1's interrupt lines (irq/N-nvmeXqY), their PIDs.
irq_threads() {
    for irq in $(grep -E " $1q[0-9]+\$" /proc/interrupts | awk '{ sub(":", "", $1); print $1 }'); do
        grep -l "^irq/$irq-" /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3
    done
}

# How often the threads PID... slept (each run of a threaded handler ends in one).
thread_sleeps() {
    for p in "$@"; do
        awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "/proc/$p/status"
    done | awk '{ s += $1 } END { print s + 0 }'
}

# use_threaded_interrupts=1 (load time, as the stock driver's): a value but 0 or 1 fails insmod;
# every line of the null controller (admin and I/O) has its thread, the threads run under load,
# and adaptive polling, whose policy then runs in the thread, still starts episodes and polls
# under the CPU-bound load; fio write+verify passes through forced switches on the slow
# controller.
threaded_interrupts() {
    unload_adaptive || fail "rmmod failed"
    if load_adaptive use_threaded_interrupts=2 2>/dev/null; then
        unload_adaptive
        fail "insmod accepted use_threaded_interrupts=2"
    fi
    load_adaptive use_threaded_interrupts=1 || fail "insmod use_threaded_interrupts=1 failed"
    [ "$(cat $PARAMS/use_threaded_interrupts)" = 1 ] || fail "use_threaded_interrupts reads $(cat $PARAMS/use_threaded_interrupts)"
    to_adaptive "$CTRL_NULL" && to_adaptive "$CTRL_SLOW" || fail "bind failed"
    nullctl || return 1
    lines=$(grep -cE " ${NULL_CTRL}q[0-9]+\$" /proc/interrupts)
    set -- $(irq_threads "$NULL_CTRL")
    [ "$lines" -ge 2 ] && [ $# = "$lines" ] ||
        fail "$# interrupt threads for the $lines lines of $NULL_CTRL: $(grep -E " ${NULL_CTRL}q" /proc/interrupts | tr -s ' ')"
    s0=$(thread_sleeps "$@") e0=$(stat_sum "$NULL_CTRL" episodes) p0=$(stat_sum "$NULL_CTRL" reaped_poll)
    load_disk "$NULL_DISK" 128 40000 || return 1
    s1=$(thread_sleeps "$@") e1=$(stat_sum "$NULL_CTRL" episodes) p1=$(stat_sum "$NULL_CTRL" reaped_poll)
    [ $((s1 - s0)) -ge 100 ] || fail "the interrupt threads ran $((s1 - s0)) times for 40000 reads"
    [ $((e1 - e0)) -gt 0 ] || fail "$NULL_CTRL: no poll episode with threaded interrupts ($(policy_digest "$NULL_CTRL"))"
    [ $((p1 - p0)) -gt 0 ] || fail "$NULL_CTRL: nothing reaped by polling with threaded interrupts"
    slow || return 1
    out=$(verify_switches "$SLOW_DISK" "$SLOW_CTRL" 100 600) || fail "$out"
    unload_adaptive || fail "rmmod failed"
    echo "$# threads ran $((s1 - s0)) times; $((e1 - e0)) episodes, $((p1 - p0)) polled; $out"
}

check setup setup_adaptive
check dense-queue-polls-cpu-bound dense_queue_polls_cpu_bound
check latency-measured-at-20ms latency_measured_at_20ms
check sparse-queue-stays sparse_queue_stays
check sparse-queue-stays-at-20ms sparse_queue_stays_at_20ms
check back-on-interrupts back_on_interrupts
check verify-through-switches verify_through_switches
check runtime-switch runtime_switch
check write-queue-polls-alone write_queue_polls_alone
check unbind-while-cpu-cycles unbind_while_cpu_cycles
check unbind-while-polling unbind_while_polling
check threaded-interrupts threaded_interrupts
