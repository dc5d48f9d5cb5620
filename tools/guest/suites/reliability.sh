# Reliability: what happens around polling when the system does not hold still. CPUs go offline
# and back while queues poll, a completion is lost on a polling queue (a reset), every adaptive
# parameter changes at random under verify, the queues are two entries deep, several queues and
# controllers poll at once, the device fails writes, flushes and discards, a completion arrives
# twice, and a slice of the switch soak (tools/test soak runs it in full). Data is checked by fio
# verify throughout; loads are sized by I/O count.

# The adaptive parameters with their ranges (policy.rs PARAM_SPECS, params.rst).
PARAM_RANGES="adaptive:0:1 sample_size:8:65536 target_batch:2:1024 max_delay_us:5:100000
latency_budget_percent:1:100 backoff_us:10:1000000 backoff_max_us:10:60000000 backoff_growth:1:16
episode_polls:2:10000000"
# Where the module's defaults are kept (read once, at setup).
DEFAULTS_FILE=/tmp/reliability.defaults

defaults() {
    cat "$DEFAULTS_FILE"
}

# What a check leaves behind when it fails halfway: background fio, an offline CPU, changed
# parameters, fault injection, a short I/O timeout. Each check that needs it sets
# "trap cleanup EXIT" in its own subshell.
BG_PIDS=
cleanup() {
    for p in $BG_PIDS; do kill_tree "$p"; done
    for f in /sys/devices/system/cpu/cpu*/online; do
        [ "$(cat "$f")" = 1 ] || echo 1 >"$f"
    done
    for d in /sys/block/*/io-timeout-fail; do
        [ "$(cat "$d")" = 0 ] || echo 0 >"$d"
    done
    for kv in $(defaults); do echo "${kv#*=}" >"$PARAMS/${kv%%=*}"; done 2>/dev/null
    wait 2>/dev/null
}

# wait_masked QFILE SECONDS: waits (without forking) until the queue's vector is masked, i.e.
# the queue polls; fails (status 1) after SECONDS.
wait_masked() {
    local end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        qget "$1" masked && [ "$REPLY" = 1 ] && return 0
        nap 0.005
    done
    return 1
}

# each_queue_takes_interrupts DISK CTRL: for each online CPU, 64 reads at QD 1 submitted there
# raise interrupts on the queue that serves it (so its vector is enabled and delivers).
each_queue_takes_interrupts() {
    for cpu in $(seq 0 $(($(nproc --all) - 1))); do
        q=$(queue_of_cpu "$1" "$cpu") || fail "no queue serves CPU $cpu on $1"
        i0=$(queue_irqs "$2" "$q")
        run_fio --name=irq-cpu$cpu --filename="/dev/$1" --direct=1 --ioengine=io_uring --rw=randread \
            --bs=4k --iodepth=1 --size=64m --io_size=256k --cpus_allowed="$cpu" || return 1
        i1=$(queue_irqs "$2" "$q")
        [ "$i1" -gt "$i0" ] || fail "$q (CPU $cpu) took no interrupt for 64 reads: its vector does not deliver"
        echo -n "$q +$((i1 - i0)) irqs; "
    done
}

setup_reliability() {
    unload_adaptive
    load_adaptive || fail "insmod failed"
    # The module's defaults, as loaded, for the checks to return to.
    for kv in $PARAM_RANGES; do
        echo "${kv%%:*}=$(cat "$PARAMS/${kv%%:*}")"
    done >"$DEFAULTS_FILE" || fail "cannot read the parameters"
    for c in "$CTRL_SLOW" "$CTRL_LAT" "$CTRL_FILE" "$CTRL_MULTI"; do
        to_adaptive "$c" || fail "bind of $c failed"
    done
    slow && lat && filectl
    echo "slow $SLOW_CTRL ($SLOW_DISK), 20 ms $LAT_CTRL ($LAT_DISK), file $FILE_CTRL ($FILE_DISK)"
}

# --- CPU hotplug -------------------------------------------------------------------------------

# fio write+verify passes on DISK, one after the other, until STOPFILE exists: passes are sized
# by I/O count (each complete and verified), so the load covers however long the hotplug takes.
# Appends "pass N" or "FAIL ..." to LOG. With CPUFILE, each pass starts on the CPU it names when
# that CPU is online (taking a CPU offline unpins the tasks on it, this loop included).
verify_loop() {
    n=0
    while [ ! -e "$2" ]; do
        n=$((n + 1))
        [ -s "${4:-}" ] && taskset -p -c "$(cat "$4")" $BASHPID >/dev/null 2>&1
        if ! fio --name=hotplug --thread --filename="/dev/$1" --direct=1 --ioengine=io_uring \
            --rw=randwrite --bs=4k --iodepth=24 --size=64m --io_size=2m --verify=crc32c \
            --verify_backlog=32 --verify_fatal=1 --randrepeat=0 --output-format=terse \
            --terse-version=3 >/tmp/verify-loop.out 2>/tmp/verify-loop.err; then
            echo "FAIL pass $n: $(tail -n 2 /tmp/verify-loop.err | tr '\n' ' ')" >>"$3"
            return 1
        fi
        bad=$(fio_errors /tmp/verify-loop.out)
        [ -z "$bad" ] || { echo "FAIL pass $n: $bad" >>"$3"; return 1; }
        echo "pass $n" >>"$3"
    done
}

# cpu_hotplug_while_polling MIN MAX: each CPU that can go offline goes offline and comes back
# while the slow controller's queues poll under fio verify, MIN times and then on until an
# offline has ended an episode, at most MAX times: before each offline the check waits until the
# queue of that CPU polls (its vector masked), and counts the offlines that ended an episode, at
# least one (ended_disabled: the driver ends episodes before a CPU goes down, since the CPU's
# managed interrupt is shut down and started again behind a masked vector's back). Afterwards
# every queue is back on interrupts and each one's vector delivers.
cpu_hotplug_while_polling() {
    slow || return 1
    trap cleanup EXIT
    cpus=
    for f in /sys/devices/system/cpu/cpu[0-9]*; do
        [ -e "$f/online" ] && cpus="$cpus ${f##*cpu}"
    done
    [ -n "$cpus" ] || fail "no CPU can go offline (no cpuN/online file)"
    # x86 cannot take CPU 0 offline: it has no online file.
    fixed=
    [ -e /sys/devices/system/cpu/cpu0/online ] || fixed="CPU 0 cannot go offline (no online file); "
    set_params $FORCE_POLLING
    log=/tmp/hotplug-verify.log stop=/tmp/hotplug-verify.stop on=/tmp/hotplug-verify.cpu
    rm -f "$log" "$stop" "$on"
    verify_loop "$SLOW_DISK" "$stop" "$log" "$on" &
    BG_PIDS=$!
    d0=$(stat_sum "$SLOW_CTRL" ended_disabled)
    summary=
    for cpu in $cpus; do
        q=$(queue_of_cpu "$SLOW_DISK" "$cpu") || fail "no queue serves CPU $cpu"
        echo "$cpu" >"$on"
        polling=0 ended=0 i=0
        while [ $i -lt "$2" ] && { [ $i -lt "$1" ] || [ $ended = 0 ]; }; do
            i=$((i + 1))
            # The running pass back on this CPU (later passes start there).
            pid=$(pgrep -x fio | head -n 1)
            [ -n "$pid" ] && taskset -a -p -c "$cpu" "$pid" >/dev/null 2>&1
            wait_masked "$STATS/$SLOW_CTRL/$q" 30 && polling=$((polling + 1))
            qget "$STATS/$SLOW_CTRL/$q" ended_disabled
            e0=$REPLY
            limit 120 "cpu$cpu offline (cycle $i)" sh -c "echo 0 >/sys/devices/system/cpu/cpu$cpu/online" ||
                fail "cpu$cpu did not go offline (cycle $i)"
            [ "$(cat /sys/devices/system/cpu/cpu$cpu/online)" = 0 ] || fail "cpu$cpu still online after offline (cycle $i)"
            qget "$STATS/$SLOW_CTRL/$q" ended_disabled
            [ "$REPLY" -gt "$e0" ] && ended=$((ended + 1))
            qget "$STATS/$SLOW_CTRL/$q" masked
            [ "$REPLY" = 0 ] || fail "$q still masked with cpu$cpu offline (cycle $i)"
            limit 120 "cpu$cpu online (cycle $i)" sh -c "echo 1 >/sys/devices/system/cpu/cpu$cpu/online" ||
                fail "cpu$cpu did not come back (cycle $i)"
            grep -q FAIL "$log" 2>/dev/null && fail "verify failed during cycle $i: $(grep FAIL "$log")"
        done
        summary="${summary}cpu$cpu: $i cycles, $polling with $q polling, $ended ended its episode; "
        # Whether an episode outlives the moment between seeing the vector masked and the CPU's
        # teardown is timing; at least one must, or the case was never tried.
        [ "$ended" -ge 1 ] ||
            fail "${summary}no offline of cpu$cpu caught $q polling"
    done
    touch "$stop"
    reap "$BG_PIDS" 300 "the verify load after the hotplug cycles" || fail "verify failed: $(grep FAIL "$log")"
    BG_PIDS=
    passes=$(grep -c '^pass' "$log")
    grep -q FAIL "$log" && fail "verify failed: $(grep FAIL "$log")"
    [ "$passes" -ge 1 ] || fail "no verify pass completed"
    for kv in $(defaults); do set_params "$kv"; done
    # The load has stopped: every queue ends its last episode at its next poll.
    wait_for 10 all_on_interrupts "$SLOW_CTRL" || fail "a queue still polls or is masked after the load"
    irqs=$(each_queue_takes_interrupts "$SLOW_DISK" "$SLOW_CTRL") || fail "$irqs"
    echo "$fixed$summary$passes verify passes, ended_disabled +$(($(stat_sum "$SLOW_CTRL" ended_disabled) - d0)); $irqs"
}

# --- A reset while a queue polls ---------------------------------------------------------------

# One completion lost (fail_io_timeout) on a polling queue of the slow controller under fio
# verify, the disk's I/O timeout at 2 s: nvme-core's timeout handler aborts the command, then
# resets the controller; the requests the reset cancels are submitted again. The slow controller
# is in no NVM subsystem (CMIC 0), so nvme-core puts no multipath head over its namespace: its
# requests carry no REQ_NVME_MPATH, and a cancelled one is requeued by nvme_retry_req (counted in
# the driver's retries) rather than failed over as a new request (which only submitted would
# count).
reset_while_polling() {
    slow || return 1
    trap cleanup EXIT
    case "$(readlink -f "/sys/block/$SLOW_DISK/device")" in
        */nvme-subsystem/*) fail "$SLOW_DISK is a multipath head: a reset fails requests over instead of retrying them" ;;
    esac
    q=$(queue_of_cpu "$SLOW_DISK" 1) || fail "no queue serves CPU 1"
    Q=$STATS/$SLOW_CTRL/$q
    fi=/sys/kernel/debug/fail_io_timeout
    [ -d $fi ] || fail "no $fi (CONFIG_FAIL_IO_TIMEOUT)"
    set_params $FORCE_POLLING
    echo 2000 >"/sys/block/$SLOW_DISK/queue/io_timeout" || fail "cannot set the I/O timeout"
    reset_msg="$SLOW_CTRL: .*QID ${q#q} timeout, reset controller"
    resets=$(dmesg_count "$reset_msg") any_resets=$(dmesg_count "$SLOW_CTRL: .*timeout, reset controller")
    retries=$(stat_sum "$SLOW_CTRL" retries)
    echo 0 >$fi/verbose && echo 100 >$fi/probability && echo 1 >$fi/interval && echo 0 >$fi/space ||
        fail "cannot configure $fi"
    fio --name=reset --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=32 --cpus_allowed=1 --size=64m --io_size=12m --verify=crc32c \
        --verify_backlog=64 --verify_fatal=1 --randrepeat=0 --output-format=terse --terse-version=3 \
        >/tmp/reset.out 2>/tmp/reset.err &
    BG_PIDS=$!
    wait_masked "$Q" 60 || fail "$q never polled under the load"
    qget "$Q" episodes
    ep=$REPLY
    # The next completion on the disk is lost: the one the timer reaps next.
    echo 1 >$fi/times && echo 1 >"/sys/block/$SLOW_DISK/io-timeout-fail"
    end=$((SECONDS + 60))
    while read -r left <$fi/times && [ "$left" != 0 ] && [ $SECONDS -lt $end ]; do nap 0.002; done
    qget "$Q" episodes
    ep1=$REPLY
    qget "$Q" masked
    masked=$REPLY
    echo 0 >"/sys/block/$SLOW_DISK/io-timeout-fail"
    [ "$left" = 0 ] || fail "no completion was lost within 60 s"
    # Still the same episode, vector still masked: the lost completion was reaped by the poll
    # timer, in the episode that was running when the fault was armed.
    [ "$ep1" = "$ep" ] && [ "$masked" = 1 ] ||
        fail "the completion was lost outside the episode (episodes $ep -> $ep1, masked $masked)"
    # Timeout (2 s), abort, timeout again (2 s), reset.
    end=$((SECONDS + 120))
    while [ "$(dmesg_count "$reset_msg")" -le "$resets" ] && [ $SECONDS -lt $end ]; do sleep 1; done
    [ "$(dmesg_count "$reset_msg")" -gt "$resets" ] ||
        fail "no reset for the lost command on $q within 120 s ($(($(dmesg_count "$SLOW_CTRL: .*timeout, reset controller") - any_resets)) resets on other queues)"
    reap "$BG_PIDS" 600 "fio after the reset"
    rc=$?
    BG_PIDS=
    [ $rc = 0 ] || fail "fio failed after the reset (status $rc): $(tail -n 3 /tmp/reset.err | tr '\n' ' ')"
    bad=$(fio_errors /tmp/reset.out)
    [ -z "$bad" ] || fail "fio reported $bad after the reset"
    r=$(($(stat_sum "$SLOW_CTRL" retries) - retries))
    [ "$r" -gt 0 ] || fail "retries stayed at $retries: the cancelled requests were not issued again"
    qget "$Q" episodes
    ep2=$REPLY
    echo 30000 >"/sys/block/$SLOW_DISK/queue/io_timeout"
    [ "$ep2" -gt "$ep1" ] || fail "$q did not poll again after the reset"
    echo "lost on $q in episode $ep (masked), reset, $r requests issued again, verify passed, $((ep2 - ep1)) episodes after"
}

# --- Parameters changed at random under load ---------------------------------------------------

# random_params: one random valid value for every adaptive parameter, "NAME=VALUE ..." in
# REPLY: a tenth of the time the minimum, the maximum or the default, otherwise a random value of
# random magnitude (as many small values as large ones). No fork: it runs every 100 ms, and a
# fork costs the debug guest more than that.
random_params() {
    local out= spec name lo hi r bits v k
    for spec in $PARAM_RANGES; do
        name=${spec%%:*} hi=${spec##*:} lo=${spec#*:}
        lo=${lo%%:*}
        r=$((RANDOM % 10))
        if [ $r = 0 ]; then
            v=$lo
        elif [ $r = 1 ]; then
            v=$hi
        elif [ $r = 2 ]; then
            while IFS== read -r k v; do [ "$k" = "$name" ] && break; done <"$DEFAULTS_FILE"
        else
            bits=1
            while [ $((1 << bits)) -le "$hi" ]; do bits=$((bits + 1)); done
            r=$((RANDOM % bits))
            v=$(((1 << r) + (((RANDOM << 15) | RANDOM) % (1 << r))))
            [ "$v" -ge "$lo" ] || v=$lo
            [ "$v" -le "$hi" ] || v=$hi
        fi
        out="$out$name=$v "
    done
    REPLY=$out
}

# apply_params NAME=VALUE...: writes each and reads it back, without forks; status 1 with REPLY
# naming the first value refused or not read back.
apply_params() {
    local kv got
    for kv in "$@"; do
        echo "${kv#*=}" >"$PARAMS/${kv%%=*}" 2>/dev/null || { REPLY="$kv refused"; return 1; }
        read -r got <"$PARAMS/${kv%%=*}"
        [ "$got" = "${kv#*=}" ] || { REPLY="$kv reads back $got"; return 1; }
    done
}

# Every 100 ms, CHURN_TICKS times, every adaptive parameter gets a random valid value, while fio
# verify passes run on the slow controller (CPU 1) and reads on the 20 ms one (CPU 0), both
# polling when the values allow. Every write must be accepted and read back. Afterwards the
# defaults are restored and read back, and the slow controller behaves: a dense load polls, then
# every queue returns to interrupts and each one's vector delivers.
CHURN_TICKS=100
params_churn() {
    slow || return 1
    lat || return 1
    trap cleanup EXIT
    log=/tmp/churn-verify.log stop=/tmp/churn-verify.stop
    rm -f "$log" "$stop"
    verify_loop "$SLOW_DISK" "$stop" "$log" &
    verify_pid=$!
    fio --name=churn-reads --filename="/dev/$LAT_DISK" --direct=1 --ioengine=io_uring --rw=randread \
        --bs=4k --iodepth=32 --cpus_allowed=0 --size=256m --time_based --runtime=900 >/dev/null 2>&1 &
    BG_PIDS="$verify_pid $!"
    e0=$(($(stat_sum "$SLOW_CTRL" episodes) + $(stat_sum "$LAT_CTRL" episodes)))
    # CHURN_TICKS changes, however fast the guest runs; the verify passes go on meanwhile.
    ticks=0 last=
    while [ $ticks -lt $CHURN_TICKS ] && kill -0 "$verify_pid" 2>/dev/null; do
        random_params
        last=$REPLY
        apply_params $last || fail "tick $((ticks + 1)): $last: $REPLY"
        ticks=$((ticks + 1))
        nap 0.1
    done
    touch "$stop"
    reap "$verify_pid" 600 "the verify load" || fail "verify failed under changing parameters: $(grep FAIL "$log")"
    passes=$(grep -c '^pass' "$log")
    grep -q FAIL "$log" && fail "verify failed under changing parameters: $(grep FAIL "$log")"
    [ "$ticks" = $CHURN_TICKS ] || fail "the verify load ended after $ticks parameter changes"
    [ "$passes" -ge 1 ] || fail "no verify pass completed"
    for p in $BG_PIDS; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    BG_PIDS=
    episodes=$(($(stat_sum "$SLOW_CTRL" episodes) + $(stat_sum "$LAT_CTRL" episodes) - e0))
    # Back to the defaults, each read back.
    for kv in $(defaults); do set_params "$kv"; done
    # A backoff begun under a large backoff_max_us runs out as it was set; the queues start
    # afresh once the load has stopped for a while (idle) - but whatever they do, a load
    # completes, the queues end on interrupts and their vectors deliver.
    run_fio --name=after-churn --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randwrite --bs=4k --iodepth=24 --cpus_allowed=1 --size=64m --io_size=4m \
        --verify=crc32c --verify_backlog=64 --verify_fatal=1 || return 1
    wait_for 10 all_on_interrupts "$SLOW_CTRL" || fail "a queue still polls or is masked after the load"
    wait_for 10 all_on_interrupts "$LAT_CTRL" || fail "a queue of $LAT_CTRL still polls or is masked after the load"
    irqs=$(each_queue_takes_interrupts "$SLOW_DISK" "$SLOW_CTRL") || fail "$irqs"
    e1=$(stat_sum "$SLOW_CTRL" episodes)
    out=$(verify_switches "$SLOW_DISK" "$SLOW_CTRL" 20 300) || fail "after the churn: $out"
    echo "$ticks changes of all 9 parameters (last: $last), $passes verify passes and $episodes episodes meanwhile; defaults back; $irqs polls again: $out"
}

# --- Several queues and controllers at once ----------------------------------------------------

# sample_masked PID FILE...: while PID runs, samples the masked field of every FILE (each a
# queue's statistics) about every 5 ms; prints "SAMPLES ALL" (ALL: samples with all of them
# masked at once).
sample_masked() {
    pid=$1
    shift
    n=0 all=0
    while kill -0 "$pid" 2>/dev/null; do
        n=$((n + 1)) k=0
        for f in "$@"; do
            qget "$f" masked && [ "$REPLY" = 1 ] && k=$((k + 1))
        done
        [ $k = $# ] && all=$((all + 1))
        nap 0.005
    done
    echo "$n $all"
}

# Reads at QD 32 on both CPUs (one job each) on the 20 ms controller: both of its I/O queues
# must be seen polling at the same moment.
two_queues_poll_at_once() {
    lat || return 1
    trap cleanup EXIT
    set_params $FORCE_POLLING
    q0=$(queue_of_cpu "$LAT_DISK" 0) && q1=$(queue_of_cpu "$LAT_DISK" 1) || fail "no queue for each CPU"
    [ "$q0" != "$q1" ] || fail "CPUs 0 and 1 share $q0"
    e0=$(stat_sum "$LAT_CTRL" episodes)
    fio --filename="/dev/$LAT_DISK" --direct=1 --ioengine=io_uring --rw=randread --bs=4k \
        --iodepth=32 --size=256m --io_size=12m --name=cpu0 --cpus_allowed=0 \
        --name=cpu1 --cpus_allowed=1 >/tmp/two-queues.out 2>&1 &
    BG_PIDS=$!
    set -- $(sample_masked "$BG_PIDS" "$STATS/$LAT_CTRL/$q0" "$STATS/$LAT_CTRL/$q1")
    wait "$BG_PIDS" || fail "fio failed: $(tail -n 3 /tmp/two-queues.out | tr '\n' ' ')"
    BG_PIDS=
    qget "$STATS/$LAT_CTRL/$q0" episodes; a=$REPLY
    qget "$STATS/$LAT_CTRL/$q1" episodes; b=$REPLY
    [ "$2" -gt 0 ] || fail "$q0 and $q1 never polled at the same time ($1 samples; episodes $a and $b)"
    echo "$q0 and $q1 both polling in $2 of $1 samples ($(($(stat_sum "$LAT_CTRL" episodes) - e0)) episodes)"
}

# fio verify on the slow controller (CPU 1) and reads on the 20 ms one (CPU 0) at the same time:
# both controllers poll while the other does, and the data verifies. fio paces a verify load
# unevenly (the slow queue's depth swings between 1 and 24), so whether one pass is dense enough
# to poll varies from run to run: verify passes go on until both controllers were seen polling
# at the same moment, at most TWO_CONTROLLER_PASSES of them.
TWO_CONTROLLER_PASSES=4
two_controllers_at_once() {
    slow || return 1
    lat || return 1
    trap cleanup EXIT
    set_params $FORCE_POLLING
    qs=$(queue_of_cpu "$SLOW_DISK" 1) && ql=$(queue_of_cpu "$LAT_DISK" 0) || fail "no queue for the CPUs"
    es=$(stat_sum "$SLOW_CTRL" episodes) el=$(stat_sum "$LAT_CTRL" episodes)
    fio --name=lat --filename="/dev/$LAT_DISK" --direct=1 --ioengine=io_uring --rw=randread --bs=4k \
        --iodepth=32 --cpus_allowed=0 --size=256m --time_based --runtime=900 >/dev/null 2>&1 &
    lat_pid=$!
    samples=0 both=0 passes=0
    while [ $passes -lt $TWO_CONTROLLER_PASSES ] && [ $both = 0 ]; do
        fio --name=slow --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring --rw=randwrite \
            --bs=4k --iodepth=24 --cpus_allowed=1 --size=64m --io_size=6m --verify=crc32c \
            --verify_backlog=64 --verify_fatal=1 --randrepeat=0 --output-format=terse --terse-version=3 \
            >/tmp/two-ctrls.out 2>/tmp/two-ctrls.err &
        BG_PIDS="$! $lat_pid"
        set -- $(sample_masked "$!" "$STATS/$SLOW_CTRL/$qs" "$STATS/$LAT_CTRL/$ql")
        wait "${BG_PIDS%% *}" || fail "fio verify failed: $(tail -n 3 /tmp/two-ctrls.err | tr '\n' ' ')"
        bad=$(fio_errors /tmp/two-ctrls.out)
        [ -z "$bad" ] || fail "fio reported $bad"
        kill -0 "$lat_pid" 2>/dev/null || fail "the 20 ms controller's load ended during verify pass $((passes + 1))"
        passes=$((passes + 1)) samples=$((samples + $1)) both=$((both + $2))
    done
    kill "$lat_pid" 2>/dev/null
    wait 2>/dev/null
    BG_PIDS=
    es=$(($(stat_sum "$SLOW_CTRL" episodes) - es)) el=$(($(stat_sum "$LAT_CTRL" episodes) - el))
    [ "$es" -gt 0 ] && [ "$el" -gt 0 ] && [ "$both" -gt 0 ] ||
        fail "the two controllers never polled at the same time in $passes verify passes ($samples samples; episodes $es on $SLOW_CTRL, $el on $LAT_CTRL; $SLOW_CTRL $qs: $(queue_digest "$STATS/$SLOW_CTRL/$qs"))"
    echo "$SLOW_CTRL $qs and $LAT_CTRL $ql both polling in $both of $samples samples; episodes $es and $el; $passes verify passes passed"
}

# --- Errors from the device --------------------------------------------------------------------

# Namespace 6 of the multi-namespace controller (blkdebug under QEMU's NVMe): a write at 1 MiB
# fails every time, a discard covering 2 MiB fails (armed by the last write), and the first flush
# fails once. QEMU reports Write Fault (writes, flushes) and Internal Error (discards), without
# Do Not Retry: nvme-core retries each up to max_retries times, then fails the I/O.
ns6() {
    ERR_DISK=$(disk_of "$CTRL_MULTI" 6) || fail "no namespace 6 on $CTRL_MULTI"
    ERR_CTRL=$(ctrl_of "$CTRL_MULTI" "$ERR_DISK") || fail "no controller name"
    [ -d "$STATS/$ERR_CTRL" ] || fail "$CTRL_MULTI is not bound to nvme_adaptive"
    MAX_RETRIES=$(cat /sys/module/nvme_core/parameters/max_retries) || fail "no nvme_core max_retries"
    dd if=/dev/urandom of=/tmp/ns6.blk bs=4k count=1 2>/dev/null
}

# Sums of the I/O queues' retries and submitted on the error controller: "RETRIES SUBMITTED".
ns6_counts() {
    queue_files "$ERR_CTRL" | grep -v '/q0$' | xargs cat |
        awk '$1 == "retries:" { r += $2 } $1 == "submitted:" { s += $2 } END { print r + 0, s + 0 }'
}

write_fault_fails() {
    ns6 || return 1
    log=$(dmesg_count "$ERR_DISK: Write(0x1) @ LBA 2048, .*Write Fault")
    set -- $(ns6_counts)
    out=$(timeout -s KILL 120 dd if=/tmp/ns6.blk of="/dev/$ERR_DISK" bs=4k seek=256 count=1 oflag=direct 2>&1)
    rc=$?
    [ $rc != 137 ] || fail "the failing write hung (killed after 120 s)"
    [ $rc != 0 ] || fail "the write at 1 MiB succeeded"
    set -- $(($(ns6_counts | cut -d' ' -f1) - $1)) $(($(ns6_counts | cut -d' ' -f2) - $2))
    [ "$1" = "$MAX_RETRIES" ] && [ "$2" = $((MAX_RETRIES + 1)) ] ||
        fail "retries +$1, submitted +$2 (expected $MAX_RETRIES retries of the one write)"
    [ "$(dmesg_count "$ERR_DISK: Write(0x1) @ LBA 2048, .*Write Fault")" -gt "$log" ] || fail "no Write Fault logged"
    # Elsewhere writes work and read back.
    dd if=/tmp/ns6.blk of="/dev/$ERR_DISK" bs=4k seek=1 count=1 oflag=direct 2>/dev/null || fail "a write at 4 KiB failed"
    dd if="/dev/$ERR_DISK" of=/tmp/ns6.back bs=4k skip=1 count=1 iflag=direct 2>/dev/null &&
        cmp -s /tmp/ns6.blk /tmp/ns6.back || fail "the write at 4 KiB does not read back"
    echo "failed after $1 retries: ${out##*: }"
}

discard_fault_fails() {
    ns6 || return 1
    # The discard rule is armed by the last write.
    dd if=/tmp/ns6.blk of="/dev/$ERR_DISK" bs=4k seek=2 count=1 oflag=direct 2>/dev/null || fail "arming write failed"
    log=$(dmesg_count "$ERR_DISK: Dataset Management(0x9) @ LBA 4096, .*Internal Error")
    set -- $(ns6_counts)
    out=$(timeout -s KILL 120 blkdiscard -f -o $((2 << 20)) -l 65536 "/dev/$ERR_DISK" 2>&1)
    rc=$?
    [ $rc != 137 ] || fail "the failing discard hung (killed after 120 s)"
    [ $rc != 0 ] || fail "the discard at 2 MiB succeeded"
    r=$(($(ns6_counts | cut -d' ' -f1) - $1))
    [ "$r" = "$MAX_RETRIES" ] || fail "retries +$r (expected $MAX_RETRIES retries of the one discard)"
    [ "$(dmesg_count "$ERR_DISK: Dataset Management(0x9) @ LBA 4096, .*Internal Error")" -gt "$log" ] ||
        fail "no Internal Error logged for the discard"
    blkdiscard -f -o $((4 << 20)) -l 65536 "/dev/$ERR_DISK" || fail "a discard at 4 MiB failed"
    echo "failed after $r retries: ${out##*: }"
}

flush_fault_retried() {
    ns6 || return 1
    [ "$(cat "/sys/block/$ERR_DISK/queue/write_cache")" = "write back" ] || fail "no volatile write cache: no flushes"
    flushes=$(awk '{ print $16 }' "/sys/block/$ERR_DISK/stat")
    set -- $(ns6_counts)
    # A write and its flush (fsync on the block device).
    out=$(timeout -s KILL 120 dd if=/tmp/ns6.blk of="/dev/$ERR_DISK" bs=4k seek=3 count=1 conv=fsync 2>&1) ||
        fail "write+fsync failed: $out"
    set -- $(($(ns6_counts | cut -d' ' -f1) - $1)) $(($(ns6_counts | cut -d' ' -f2) - $2))
    [ "$1" = 1 ] || fail "retries +$1, submitted +$2: the flush did not fail once and get retried (namespace 6's one flush fault is spent by the first flush of the run)"
    [ "$(awk '{ print $16 }' "/sys/block/$ERR_DISK/stat")" -gt "$flushes" ] || fail "no flush completed"
    echo "flush failed once, retried, fsync succeeded (submitted +$2)"
}

# --- A completion handled twice ----------------------------------------------------------------

# qN_inject_duplicates makes the queue handle its next completions twice, as a controller that
# posts a duplicate: nvme-core advanced the command's generation at the first, so the second
# finds a stale command id; it must be counted in bad_completions and dropped, each I/O
# completing once (a second completion would end a request twice: KASAN, a WARN, or a verify
# error).
duplicate_completion_dropped() {
    filectl || return 1
    q=$(queue_of_cpu "$FILE_DISK" 1) || fail "no queue serves CPU 1"
    f=$STATS/$FILE_CTRL/$q
    [ -w "${f}_inject_duplicates" ] || fail "no ${f}_inject_duplicates (CONFIG_FAULT_INJECTION_DEBUG_FS)"
    qget "$f" bad_completions; b0=$REPLY
    qget "$f" completed; c0=$REPLY
    set -- $(awk '{ print $1 + $5 }' "/sys/block/$FILE_DISK/stat")
    io0=$1 log=$(dmesg_count "genctr mismatch")
    echo 4 >"${f}_inject_duplicates" || fail "cannot write ${f}_inject_duplicates"
    run_fio --name=dup --filename="/dev/$FILE_DISK" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=4 --size=8m --io_size=256k --cpus_allowed=1 --verify=crc32c || return 1
    qget "$f" bad_completions; b=$((REPLY - b0))
    qget "$f" completed; c=$((REPLY - c0))
    io=$(($(awk '{ print $1 + $5 }' "/sys/block/$FILE_DISK/stat") - io0))
    [ "$b" = 4 ] || fail "bad_completions +$b for 4 injected duplicates"
    [ "$c" = "$io" ] || fail "$q reaped $c completions for the $io I/Os the disk completed"
    [ "$(dmesg_count "genctr mismatch")" -gt "$log" ] || fail "nvme-core logged no genctr mismatch"
    echo "4 duplicates counted and dropped; $io I/Os, $c completions, verified"
}

# --- Mixed block sizes while the queue switches ------------------------------------------------

# Mixed random reads and writes of 512 B to 64 KiB (fio bsrange), verified, on the slow
# controller while its queue switches modes as often as it can.
mixed_rw_bsrange() {
    slow || return 1
    trap cleanup EXIT
    c0=$(stat_sum "$SLOW_CTRL" completed)
    # The verified writes (and their read-back) keep about one I/O in flight: fio's verify with
    # mixed block sizes does. 4 KiB reads in the second half of the disk keep the queue deep
    # meanwhile: reads of mixed sizes would not, on either driver, since in the debug guest the
    # block layer and io_uring take longer to issue a multi-page request than the device takes
    # to serve it (measured at QD 16: 15 requests in the driver with 4 KiB reads, 0-1 with
    # 512 B-64 KiB). Write passes follow each other until the queue has switched modes 40
    # times; the reads run until then.
    fio --name=dense-reads --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randread --bs=4k --iodepth=16 --cpus_allowed=1 --offset=32m --size=32m \
        --time_based --runtime=900 >/dev/null 2>&1 &
    BG_PIDS=$!
    out=$(verify_switches "$SLOW_DISK" "$SLOW_CTRL" 20 600 --bsrange=512-64k --iodepth=16 \
        --offset=0 --size=32m --io_size=8m 2>&1) || fail "$out"
    kill "$BG_PIDS"
    wait "$BG_PIDS" 2>/dev/null
    BG_PIDS=
    echo "$out, over $(($(stat_sum "$SLOW_CTRL" completed) - c0)) completions (4 KiB reads; writes of 512 B..64 KiB, read back)"
}

# --- The switch soak, a slice ------------------------------------------------------------------

switch_soak_slice() {
    slow || return 1
    trap cleanup EXIT
    verify_switches "$SLOW_DISK" "$SLOW_CTRL" 50 600
}

# --- Two entries per queue ---------------------------------------------------------------------

# Reloaded with io_queue_depth=2 (one command per queue: a ring of two entries holds one), QD 128
# verify from both CPUs waits for tags and for the ring, and completes intact.
queue_depth_exhaustion() {
    trap cleanup EXIT
    unload_adaptive || fail "rmmod failed"
    load_adaptive io_queue_depth=2 || fail "insmod io_queue_depth=2 failed"
    to_adaptive "$CTRL_FILE" || fail "bind failed"
    filectl || return 1
    [ "$(cat "/sys/block/$FILE_DISK/queue/nr_requests")" = 1 ] ||
        fail "nr_requests is $(cat "/sys/block/$FILE_DISK/queue/nr_requests"), not 1"
    run_fio --name=qd128 --filename="/dev/$FILE_DISK" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=128 --size=32m --io_size=4m --verify=crc32c --verify_backlog=256 \
        --verify_fatal=1 --numjobs=2 --offset_increment=32m --cpus_allowed=0-1 \
        --cpus_allowed_policy=split || return 1
    # Every command the I/O queues took completed (the admin queue, q0, keeps nvme-core's
    # Asynchronous Event Request outstanding).
    submitted=0 completed=0
    for q in $(queue_files "$FILE_CTRL"); do
        [ "${q##*/}" = q0 ] && continue
        qget "$q" submitted && submitted=$((submitted + REPLY))
        qget "$q" completed && completed=$((completed + REPLY))
    done
    [ "$submitted" = "$completed" ] || fail "I/O queues: submitted $submitted, completed $completed"
    unload_adaptive || fail "rmmod failed"
    load_adaptive || fail "reload with the defaults failed"
    for c in "$CTRL_SLOW" "$CTRL_LAT" "$CTRL_FILE" "$CTRL_MULTI"; do
        to_adaptive "$c" || fail "rebind of $c failed"
    done
    echo "2048 writes at QD 128 on 1 tag per queue, verified"
}

# --- Teardown while polling -------------------------------------------------------------------

# The slow controller unbound while the queue of CPU 1 polls under reads (the adaptive suite
# does this with the defaults on the plain kernel; here the debug kernel watches the teardown):
# the unbind finishes, the load's fio can be killed, no interrupt of the controller is left, and
# it binds again and reads.
unbind_while_polling() {
    slow || return 1
    trap cleanup EXIT
    q=$(queue_of_cpu "$SLOW_DISK" 1) || fail "no queue serves CPU 1"
    set_params $FORCE_POLLING
    fio --name=unbind --thread --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randread --bs=4k --iodepth=32 --cpus_allowed=1 --size=64m --time_based --runtime=600 \
        >/dev/null 2>&1 &
    BG_PIDS=$!
    wait_masked "$STATS/$SLOW_CTRL/$q" 60 || fail "$q never polled under the load"
    unbind_adaptive "$CTRL_SLOW" || fail "unbind hung with $q polling"
    # The disk is gone. What fio makes of that is fio's business (a time-based job on a dead
    # disk may go on resubmitting), but killed it must exit (--thread: a forked job would outlive
    # its parent's SIGKILL), and then nothing may hold the module: a request left in flight keeps
    # io_uring's reference to the disk, and an open disk pins the module.
    kill -9 "$BG_PIDS"
    reap "$BG_PIDS" 60 "fio on the unbound disk, after SIGKILL"
    BG_PIDS=
    wait_for 60 module_unused ||
        fail "nvme_adaptive still in use (refcnt $(cat /sys/module/nvme_adaptive/refcnt)) after fio exited"
    ! grep -q "${SLOW_CTRL}q" /proc/interrupts ||
        fail "interrupts left after unbind: $(grep "${SLOW_CTRL}q" /proc/interrupts | tr -s ' ')"
    for kv in $(defaults); do set_params "$kv"; done
    to_adaptive "$CTRL_SLOW" || fail "rebind failed"
    slow || return 1
    run_fio --name=after-unbind --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randread --bs=4k --iodepth=8 --size=64m --io_size=256k || return 1
    echo "unbound with $q polling; bound again as $SLOW_CTRL, 64 reads"
}

module_unused() {
    [ "$(cat /sys/module/nvme_adaptive/refcnt)" = 0 ]
}

# No controller counted a bad completion but the four injected on the file controller.
only_injected_bad_completions() {
    for c in "$CTRL_SLOW" "$CTRL_LAT" "$CTRL_MULTI" "$CTRL_FILE"; do
        n=$(ctrl_of "$c" "$(disks_of "$c" | head -n 1)") || fail "no controller name for $c"
        want=0
        [ "$c" = "$CTRL_FILE" ] && want=4
        b=$(stat_sum "$n" bad_completions)
        [ "$b" = $want ] || fail "$n counted $b bad completions (expected $want)"
    done
}

# The soak suite sources this file for its functions, and runs their long versions itself.
[ "$SUITE" = reliability ] || return 0
check setup setup_reliability
check write-fault-fails write_fault_fails
check discard-fault-fails discard_fault_fails
check flush-fault-retried flush_fault_retried
check duplicate-completion-dropped duplicate_completion_dropped
# At least 6 offlines of each CPU: one that catches its queue polling shows a vector left
# masked across the offline (the queue then takes no interrupt, or the kernel warns of an
# unbalanced enable), and 18 of 20 offlines did in each of two debug runs (2026-12-06); the
# cycles go on until one has, at most 20. Every online runs the callback that lets the queues
# poll again. The soak offlines each CPU 20 times.
check cpu-hotplug-while-polling cpu_hotplug_while_polling 6 20
check reset-while-polling reset_while_polling
check params-churn-under-verify params_churn
check two-queues-poll-at-once two_queues_poll_at_once
check two-controllers-at-once two_controllers_at_once
check mixed-rw-bsrange-switching mixed_rw_bsrange
# 100 switches (50 episodes), one or two verified passes of 1024 writes: a switch that loses,
# doubles or corrupts a completion fails its pass's verify or hangs it, and the debug kernel's
# lockdep and KASAN watch each path of an episode (mask, a reap by the timer, unmask, a reap by
# the interrupt) from its first run, here 50 times. The soak switches 10,000 times.
check switch-soak-slice switch_soak_slice
check no-bad-completions only_injected_bad_completions
check queue-depth-exhaustion queue_depth_exhaustion
check unbind-while-polling unbind_while_polling
