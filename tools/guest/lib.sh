# Helpers for the guest test suites (bash, Debian userspace). Sourced by /guest/run.
# Every check reports one line "NVA-RESULT PASS|FAIL|SKIP suite/name [: detail]".

MODDIR=/lib/modules
NVA_KO=$MODDIR/nvme_adaptive.ko
RESULTS=/tmp/results

result() {
    # result PASS|FAIL|SKIP name [detail]
    line="NVA-RESULT $1 $SUITE/$2"
    [ -n "${3:-}" ] && line="$line : $3"
    echo "$line" >>"$RESULTS"
    echo "$line"
}

# Microseconds since the epoch, without a fork.
now_us() {
    echo "${EPOCHREALTIME//[!0-9]/}"
}

# time_line WHAT START_US: the console line "NVA-SUITE-TIME WHAT S.S s", the wall-clock time
# since START_US (a check's or a suite's: where a run's time goes, for the timing table in
# testing.rst). Console only: it is not a result, and tools/verdict ignores it.
time_line() {
    local us=$(($(now_us) - $2))
    echo "NVA-SUITE-TIME $1 $((us / 1000000)).$((us / 100000 % 10)) s"
}

# check NAME COMMAND...: PASS (with the command's last output line, if any, as detail) when
# the command exits 0, SKIP when it calls skip, FAIL with its last output lines otherwise. The
# command runs in a subshell: variables it sets do not outlive the check. Its time goes to the
# console (time_line).
check() {
    name=$1
    shift
    check_start=$(now_us)
    if out=$("$@" 2>&1); then
        result PASS "$name" "$(echo "$out" | tail -n 1)"
    elif [ $? = 77 ]; then
        result SKIP "$name" "$(echo "$out" | tail -n 1)"
    else
        result FAIL "$name" "$(echo "$out" | tail -n 4 | tr '\n' ' ')"
    fi
    time_line "$SUITE/$name" "$check_start"
}

# Skips the current check, saying why (reported as SKIP, counted as skipped).
skip() {
    echo "$*"
    exit 77
}

# Fails the current check with a message: exits the check's subshell.
fail() {
    echo "$*" >&2
    exit 1
}

# The test rig's controllers, at the fixed slots tools/vm gives them.
CTRL_NULL=0000:00:04.0   # null-co backend: fast, reads zeroes, drops writes
CTRL_FILE=0000:00:05.0   # raw file backend: data survives, for integrity checks
CTRL_MULTI=0000:00:06.0  # namespaces: 1 with 512 B blocks, 2 with 4 KiB, 3 with a bad sector,
                         # 4 with protection information, 5 for Format NVM, 6 failing
                         # writes at 1 MiB, discards at 2 MiB and its first flush
CTRL_SLOW=0000:00:07.0   # file backend throttled (2000 commands/s, 100 on the debug kernel)
CTRL_HP=0000:01:00.0     # file backend, in a PCIe hotplug slot (behind a root port)
CTRL_SUBSYS=0000:00:09.0 # in an NVM subsystem: namespace 1 attached, namespace 2 detached
CTRL_LAT=0000:00:0a.0    # null-co backend with a fixed 20 ms latency
CTRL_ONEVEC=0000:00:0b.0 # file backend, one MSI-X vector for all its queues
CTRL_CMB=0000:00:0c.0    # file backend, a 16 MiB controller memory buffer
CTRL_SRIOV=0000:02:00.0  # file backend, SR-IOV: one virtual function with flexible resources

# Loads module NAME from /lib/modules with the parameters given, unless it is loaded already.
load_module() {
    grep -q "^${1//-/_} " /proc/modules || insmod "$MODDIR/$1.ko" "${@:2}"
}

# Loads the stock driver with the parameters given (nvme-core may be loaded already, for
# nvme_adaptive).
load_stock() {
    load_module nvme-core && load_module nvme "$@"
}

# Loads the modules nvme_adaptive.ko depends on (its .modinfo "depends", e.g. nvme-core), from
# /lib/modules.
load_deps() {
    for dep in $(modinfo -F depends "$NVA_KO" | tr , ' '); do
        load_module "$dep" || return 1
    done
}

# Loads nvme_adaptive (after what it depends on) with the parameters given.
load_adaptive() {
    load_deps && load_module nvme_adaptive "$@"
}

# Unloads nvme_adaptive if it is loaded. nvme-core adds the disks from its scan work after probe,
# and scanning a disk's partitions opens it, which holds the module (nvme_ns_open): rmmod refuses
# while that runs, so it is tried for 60 s, then once more to say why it still refuses.
unload_adaptive() {
    grep -q '^nvme_adaptive ' /proc/modules || return 0
    wait_for 60 limit 60 rmmod rmmod nvme_adaptive || rmmod nvme_adaptive
}

# Driver currently bound to a PCI device, or "none".
bound_driver() {
    if [ -e "/sys/bus/pci/devices/$1/driver" ]; then
        basename "$(readlink "/sys/bus/pci/devices/$1/driver")"
    else
        echo none
    fi
}

# Block disks of a PCI device (names under /sys/block whose device path runs through it). No
# fork per disk: cd -P resolves the path (a fork costs the debug guest a tenth of a second or
# more, and nearly every check looks a disk up); the working directory is put back.
disks_of() {
    local b here=$PWD
    for b in /sys/block/*; do
        cd -P "$b" 2>/dev/null || continue
        case "$PWD/" in
            */"$1"/*) echo "${b##*/}" ;;
        esac
    done
    cd "$here"
}

# Wait until COMMAND succeeds, polling every 0.1 s, at most SECONDS (for sysfs state to settle).
wait_for() {
    tries=$(($1 * 10))
    shift
    while ! "$@" >/dev/null 2>&1; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || return 1
        sleep 0.1
    done
}

# Moves a controller to nvme_adaptive (loading it if needed); prints nothing.
to_adaptive() {
    load_adaptive >/dev/null 2>&1
    nvme-bind "$1" nvme_adaptive >/dev/null
}

# Moves a controller to the stock driver (loading it if needed).
to_stock() {
    load_stock >/dev/null 2>&1
    nvme-bind "$1" nvme >/dev/null
}

# The disk of namespace NSID on controller PCI_ADDR (either driver). nvme-core numbers its disks
# in the order the namespaces were scanned, not by NSID: the disk's nsid attribute says which.
disk_of() {
    local d n
    for d in $(disks_of "$1"); do
        if [ -r "/sys/block/$d/nsid" ]; then
            read -r n <"/sys/block/$d/nsid"
            [ "$n" = "$2" ] && { echo "$d"; return 0; }
        else
            case "$d" in *n"$2") echo "$d"; return 0 ;; esac
        fi
    done
    return 1
}

# ctrl_of PCI_ADDR [DISK]: the controller's name (nvmeN: its character device, the prefix of its
# interrupts, its nvme_adaptive debugfs directory), from nvme-core's sysfs; without nvme-core,
# DISK's name up to its namespace part.
ctrl_of() {
    local c
    for c in "/sys/bus/pci/devices/$1/nvme"/*; do
        [ -e "$c" ] && { echo "${c##*/}"; return 0; }
    done
    [ -n "${2:-}" ] && echo "${2%n*}"
}

# stuck_report WHAT: what a load that does not finish leaves to look at, written to the console
# log (a check's own output is only its result line): each NVMe disk's busy hardware contexts in
# blk-mq (state, requests waiting for dispatch, requests the driver holds), every nvme_adaptive
# queue's counters, where each fio and io_uring worker thread waits, every process and the state
# of the rings.
stuck_report() {
    local f t c
    {
        echo "NVA-STUCK-BEGIN $1"
        for f in /sys/kernel/debug/block/nvme*/hctx*; do
            [ -n "$(cat "$f/busy" "$f/dispatch" "$f"/cpu*/default_rq_list 2>/dev/null)" ] || continue
            echo "== $f: state $(cat "$f/state"), active $(cat "$f/active"), $(grep -o 'busy=[0-9]*' "$f/tags") tags"
            sed 's/^/  dispatch: /' "$f/dispatch"
            sed 's/^/  busy: /' "$f/busy"
            for c in "$f"/cpu*/default_rq_list; do
                sed "s|^|  ${c#$f/}: |" "$c"
            done
        done
        for c in "$STATS"/*/; do
            for f in $(c=${c%/} && queue_files "${c##*/}"); do
                echo "== $f: $(tr '\n' ' ' <"$f")"
            done
        done
        for t in /proc/[0-9]*/task/*; do
            case "$(cat "$t/comm" 2>/dev/null)" in fio | iou-*) ;; *) continue ;; esac
            echo "== $(cat "$t/comm") thread ${t##*/}: $(cut -d' ' -f3 "$t/stat")"
            sed 's/^/  /' "$t/stack" 2>/dev/null
        done
        # Every process but the kernel's threads, with what it waits in: a background load's
        # shell that outlives its fio shows here, a zombie too.
        ps -e -o pid=,ppid=,stat=,wchan:24=,args= | awk '$1 != 2 && $2 != 2 { print "== process " $0 }'
        # Each fio ring's heads and tails: whether completions were posted and not taken.
        for f in /proc/[0-9]*/fd/*; do
            [ "$(readlink "$f")" = "anon_inode:[io_uring]" ] || continue
            echo "== io_uring ${f#/proc/}: $(head -n 12 "${f%/fd/*}/fdinfo/${f##*/}" | tr '\n' ' ')"
        done
        echo "NVA-STUCK-END $1"
    } >/dev/console 2>&1
}

# killed WHAT SECONDS [PID]: fails the check for WHAT, still running after SECONDS, after a
# stuck_report (taken before PID, if given, is killed).
killed() {
    stuck_report "$1"
    [ -z "${3:-}" ] || kill_tree "$3"
    fail "$1: still running after $2 s, killed"
}

# kill_tree PID: SIGKILLs PID and every process below it, so that a killed background loop
# leaves no fio behind to load the checks after it. PID is stopped first: it cannot start
# another child while its children go.
kill_tree() {
    local child
    kill -STOP "$1" 2>/dev/null
    for child in $(pgrep -P "$1"); do
        kill_tree "$child"
    done
    kill -9 "$1" 2>/dev/null
}

# limit SECONDS WHAT COMMAND...: runs COMMAND, killed with SIGKILL after SECONDS (coreutils
# timeout then exits 137). A kill fails the check (killed WHAT); otherwise COMMAND's status.
limit() {
    secs=$1 what=$2
    shift 2
    timeout -s KILL "$secs" "$@"
    rc=$?
    [ $rc != 137 ] || killed "$what" "$secs"
    return $rc
}

# running PID: PID has not exited. kill -0 succeeds on a zombie too (a child that exited and
# that its shell has not waited for yet), so this reads the process's state instead; no fork.
running() {
    local st
    read -r st 2>/dev/null <"/proc/$1/stat" || return 1
    st=${st##*) }
    [ "${st%% *}" != Z ]
}

# reap PID SECONDS WHAT: waits at most SECONDS for background PID, then returns its exit status;
# kills it and fails the check (killed WHAT) if it is still running.
reap() {
    local end=$((SECONDS + $2))
    while running "$1"; do
        [ $SECONDS -lt $end ] || killed "$3" "$2" "$1"
        nap 0.2
    done
    wait "$1" 2>/dev/null
}

# Lines of the kernel log matching the basic regular expression $1 (compare counts taken before
# and after an action, rather than the last lines: other messages may come in between).
dmesg_count() {
    dmesg | grep -c -- "$1"
}

# Starts udevd (persistent /dev/disk/by-id names, blktests' "udevadm settle") and waits until
# it has handled the devices present. Suites that unbind and bind in loops run without it:
# its workers open new disks to probe them, and nvme-bind refuses open disks.
start_udev() {
    [ -S /run/udev/control ] && return 0
    /usr/lib/systemd/systemd-udevd --daemon --resolve-names=never || return 1
    udevadm trigger --action=add --type=subsystems && udevadm trigger --action=add --type=devices &&
        udevadm settle --timeout=120
}

# Stops udevd and waits until it and its workers are gone. Left running, its watches probe a
# disk again after each write that closes it (I/O a later check counts as its own) and its
# probes hold new disks open (rmmod then finds the module in use). One that outlives its exit
# request is killed. The socket is removed with it, so that start_udev starts it again.
stop_udev() {
    [ -S /run/udev/control ] || return 0
    udevadm settle --timeout=120
    udevadm control --exit
    if ! wait_for 30 udev_gone; then
        echo "stop_udev: udevd still running 30 s after its exit request: killed" >/dev/console
        pkill -KILL -x systemd-udevd
        pkill -KILL -x '\(udev-worker\)'
        wait_for 10 udev_gone || return 1
    fi
    rm -f /run/udev/control
}

udev_gone() {
    ! pgrep -x systemd-udevd && ! pgrep -x '\(udev-worker\)'
}

# verify_from_both_cpus DISK FIO_OPTION...: write+verify on DISK, a job pinned to each CPU on
# 8 MiB of its own, with the block sizes and queue depth the options give.
verify_from_both_cpus() {
    local disk=$1
    shift
    run_fio --name=verify --filename="/dev/$disk" --direct=1 --ioengine=io_uring \
        --rw=randwrite --numjobs=2 --cpus_allowed=0-1 \
        --cpus_allowed_policy=split --size=8m --offset_increment=16m --verify=crc32c \
        --do_verify=1 --verify_fatal=1 --randrepeat=0 "$@"
}

# Runs fio with a time limit; fails unless it completes with no I/O or verify error.
FIO_OUT=/tmp/fio.out
run_fio() {
    timeout -s KILL 900 fio --output-format=terse --terse-version=3 "$@" >"$FIO_OUT" 2>/tmp/fio.err
    rc=$?
    [ $rc != 137 ] || killed fio 900
    if [ $rc != 0 ]; then
        echo "fio exited with $rc: $(tail -n 3 /tmp/fio.err | tr '\n' ' ')"
        return 1
    fi
    bad=$(fio_errors "$FIO_OUT")
    [ -z "$bad" ] || fail "fio reported errors: $bad"
}

# wait_verify PID OUT WHAT: waits for a background fio verify (PID, terse output in OUT, started
# under timeout -s KILL 600) that ran across WHAT: no kill, no I/O or verify error.
wait_verify() {
    wait "$1"
    rc=$?
    [ $rc != 137 ] || killed "fio across $3" 600
    [ $rc = 0 ] || fail "fio failed across $3: $(tail -n 2 "$2")"
    bad=$(fio_errors "$2")
    [ -z "$bad" ] || fail "fio error across $3: $bad"
}

# ctrl_live CTRL: controller CTRL (nvmeN) is live.
ctrl_live() { [ "$(cat "/sys/class/nvme/$1/state")" = live ]; }

# fio_errors FILE: the jobs in fio's terse v3 output FILE that ended with an error, one
# "JOB: error N" each (field 5 is the job's error number); nothing when none did.
fio_errors() {
    awk -F';' '$1 == 3 && $5 != 0 { print $3 ": error " $5 }' "$1"
}

PARAMS=/sys/module/nvme_adaptive/parameters
STATS=/sys/kernel/debug/nvme_adaptive

# Writes nvme_adaptive parameters given as NAME=VALUE; fails the check naming the first one
# that is refused or does not read back as written.
set_params() {
    for kv in "$@"; do
        echo "${kv#*=}" >"$PARAMS/${kv%%=*}" || fail "set_params: writing ${kv%%=*}=${kv#*=} failed"
        got=$(cat "$PARAMS/${kv%%=*}")
        [ "$got" = "${kv#*=}" ] || fail "set_params: ${kv%%=*} reads $got after writing ${kv#*=}"
    done
}

# Whether DISK has commands in flight.
has_inflight() {
    [ "$(awk '{ print $1 + $2 }' "/sys/block/$1/inflight")" -gt 0 ]
}

# start_background_io DISK RW SECONDS: fio at QD 32 on DISK in the background (its pid in
# FIO_PID), once it has I/O in flight.
start_background_io() {
    fio --name=bg --filename="/dev/$1" --direct=1 --ioengine=io_uring --rw="$2" --bs=4k \
        --iodepth=32 --runtime="$3" --time_based >/dev/null 2>&1 &
    FIO_PID=$!
    wait_for 60 has_inflight "$1" || { kill "$FIO_PID"; fail "fio never had I/O in flight"; }
}

# reap_background_io SECONDS: waits for the background fio to end (it fails once its disk is
# gone or dead), whatever its exit status. Called by the shell that started it. SECONDS counts
# ticks of 0.1 s sleeps, each longer on a slow guest: a controller that comes back lets fio run
# out its time, which the ticks have covered on the debug kernel (reap's wall-clock deadline did
# not).
reap_background_io() {
    i=0
    while running "$FIO_PID"; do
        i=$((i + 1))
        [ $i -lt $(($1 * 10)) ] || killed fio "$1" "$FIO_PID"
        sleep 0.1
    done
    wait "$FIO_PID" 2>/dev/null
    return 0
}

# Unbinds a controller from nvme_adaptive through sysfs; fails the check if that takes over
# 60 s (killed, and named as a hang).
unbind_adaptive() {
    limit 60 "unbind of $1" sh -c "echo $1 >/sys/bus/pci/drivers/nvme_adaptive/unbind"
}

# The statistics files of nvme_adaptive controller CTRL's queues (q0, q1, ...; not the other
# files of its debugfs directory, such as fault injection controls).
queue_files() {
    for q in "$STATS/$1"/q*; do
        case "${q##*/}" in q[0-9]|q[0-9][0-9]|q[0-9][0-9][0-9]) echo "$q" ;; esac
    done
}

# Sum of field KEY over the queue files of nvme_adaptive controller CTRL (its debugfs name).
stat_sum() {
    queue_files "$1" | xargs cat | awk -v k="$2:" '$1 == k { s += $2 } END { print s + 0 }'
}

TRACING=/sys/kernel/tracing

# trace_start EVENT FILTER: records only tracepoint EVENT (GROUP/NAME) where FILTER holds, into
# an emptied trace; trace_stop EVENT stops recording and drops the filter (the trace stays).
trace_start() {
    echo 0 >$TRACING/tracing_on && : >$TRACING/trace && echo "$2" >"$TRACING/events/$1/filter" &&
        echo 1 >"$TRACING/events/$1/enable" && echo 1 >$TRACING/tracing_on || fail "cannot trace $1"
}
trace_stop() {
    echo 0 >$TRACING/tracing_on
    echo 0 >"$TRACING/events/$1/enable"
    echo 0 >"$TRACING/events/$1/filter"
}

# Block requests as the driver receives them, through the block_rq_issue tracepoint:
# trace_requests DISK starts recording DISK's requests; requests_traced REGEX stops and counts
# those whose operation flags (blktrace's RWBS: W write, F after W FUA, WZ write zeroes, F alone
# a flush) match REGEX.
trace_requests() {
    ev=$TRACING/events/block/block_rq_issue
    [ -d $ev ] || skip "no block tracepoints in this kernel ($ev)"
    majmin=$(cat "/sys/block/$1/dev")
    trace_start block/block_rq_issue "dev == $(((${majmin%:*} << 20) | ${majmin#*:}))"
}
requests_traced() {
    trace_stop block/block_rq_issue
    awk -v re="^($1)\$" '{ for (i = 1; i < NF; i++) if ($i == "block_rq_issue:") { if ($(i + 2) ~ re) n++; break } }
        END { print n + 0 }' $TRACING/trace
}

# qget FILE KEY: the value of the "KEY: value" line of FILE (a queue's statistics) in REPLY,
# without a fork: loops that sample statistics while I/O runs must not load the guest.
qget() {
    local k v
    REPLY=
    while read -r k v; do
        [ "$k" = "$2:" ] && { REPLY=$v; return 0; }
    done <"$1"
    return 1
}

# queue_digest FILE: the policy's view of one queue (its statistics file), for failure messages.
queue_digest() {
    awk '$1 ~ /^(stage|episodes|ended_stalled|ended_idle|ended_capped|rate_per_sec|depth|per_irq|latency_ns|poll_latency_ns|slack_ns|wait_fit_percent|wait_ns|batch|backoff_ns):$/ {
        printf "%s %s ", $1, $2 }' "$1"
}

# nap SECONDS: sleeps without a fork (a read that times out on a pipe nothing writes to).
nap() {
    [ -n "${NAP_FD:-}" ] || exec {NAP_FD}<> <(:)
    read -r -t "$1" -u "$NAP_FD" _
    return 0
}

# queue_of_cpu DISK CPU [TYPE]: the queue (qN) that serves DISK's requests submitted on CPU:
# blk-mq's hardware context N-1, whose cpu_list names the CPU; with TYPE (default, read, poll),
# the context of that type.
queue_of_cpu() {
    for m in /sys/block/"$1"/mq/*; do
        [ -z "${3:-}" ] || [ "$(cat "/sys/kernel/debug/block/$1/hctx${m##*/}/type")" = "$3" ] || continue
        case ",$(tr -d ' ' <"$m/cpu_list")," in
            *",$2,"*) echo "q$((${m##*/} + 1))"; return 0 ;;
        esac
    done
    return 1
}

# queue_irqs CTRL QN: hard interrupts taken by the vector of queue QN of controller CTRL, over
# all CPUs.
queue_irqs() {
    awk -v name="$1$2" '$NF == name { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i }
        END { print s + 0 }' /proc/interrupts
}

# Parameters under which a queue polls whenever a poll fits: a decision every 8 completions, a
# 10 us backoff, the whole device latency as the budget (under emulation the poll timer fires
# about a millisecond late), and waits of up to 100 ms: on the debug kernel the guest's CPU
# limits a queue to about 200 I/Os a second, too few for the default 10 ms cap to collect the
# two completions a poll needs. The slow and the 20 ms controller poll most of the time under
# load.
FORCE_POLLING="sample_size=8 backoff_us=10 backoff_max_us=10 latency_budget_percent=100 max_delay_us=100000"
# The same, with episodes of two polls of two completions each: a queue of the slow controller
# switches modes as often as it can.
FORCE_SWITCHING="$FORCE_POLLING target_batch=2 episode_polls=2"

# verify_switches DISK CTRL EPISODES SECONDS [FIO_OPTION...]: fio write+verify passes on DISK
# (random writes, every block read back and checked soon after, one job on CPU 1; each pass 1024
# 4 KiB writes at QD 24 unless FIO_OPTIONs give other sizes and depth) under FORCE_SWITCHING,
# until controller CTRL has counted EPISODES more poll episodes (each two mode switches: mask,
# then unmask). Fails on an I/O or verify error, or when SECONDS pass first; puts the parameters
# back as they were. Prints "N mode switches in P verified write passes".
verify_switches() {
    local disk=$1 ctrl=$2 want=$3 secs=$4
    shift 4
    [ $# -gt 0 ] || set -- --bs=4k --iodepth=24 --size=64m --io_size=4m
    vs_saved=$(for kv in $FORCE_SWITCHING; do echo "${kv%%=*}=$(cat "$PARAMS/${kv%%=*}")"; done)
    set_params $FORCE_SWITCHING
    vs_e0=$(stat_sum "$ctrl" episodes) vs_passes=0 vs_end=$((SECONDS + secs))
    while [ $(($(stat_sum "$ctrl" episodes) - vs_e0)) -lt "$want" ]; do
        if [ $SECONDS -ge $vs_end ]; then
            set_params $vs_saved
            fail "only $(($(stat_sum "$ctrl" episodes) - vs_e0)) of $want episodes after $secs s ($vs_passes passes)"
        fi
        # In a subshell: run_fio's fail must not skip putting the parameters back.
        if ! (run_fio --name=switches --filename="/dev/$disk" --direct=1 --ioengine=io_uring \
            --rw=randwrite --cpus_allowed=1 --verify=crc32c --verify_backlog=64 --verify_fatal=1 \
            --randrepeat=0 "$@"); then
            set_params $vs_saved
            fail "pass $((vs_passes + 1)) failed after $(($(stat_sum "$ctrl" episodes) - vs_e0)) episodes"
        fi
        vs_passes=$((vs_passes + 1))
    done
    vs_n=$(($(stat_sum "$ctrl" episodes) - vs_e0))
    set_params $vs_saved
    echo "$((2 * vs_n)) mode switches in $vs_passes verified write passes"
}

# Sets SLOW_DISK and SLOW_CTRL for the slow controller (each check runs in a subshell, so every check
# calls the ones it needs), and likewise LAT_DISK/LAT_CTRL, FILE_DISK/FILE_CTRL.
slow() {
    SLOW_DISK=$(disk_of "$CTRL_SLOW" 1) || fail "no disk on the slow controller"
    SLOW_CTRL=$(ctrl_of "$CTRL_SLOW" "$SLOW_DISK") || fail "no controller name for $CTRL_SLOW"
    [ -d "$STATS/$SLOW_CTRL" ] || fail "no statistics for $SLOW_CTRL"
}
nullctl() {
    NULL_DISK=$(disk_of "$CTRL_NULL" 1) || fail "no disk on the null controller"
    NULL_CTRL=$(ctrl_of "$CTRL_NULL" "$NULL_DISK") || fail "no controller name for $CTRL_NULL"
    [ -d "$STATS/$NULL_CTRL" ] || fail "no statistics for $NULL_CTRL"
}
lat() {
    LAT_DISK=$(disk_of "$CTRL_LAT" 1) || fail "no disk on the 20 ms controller"
    LAT_CTRL=$(ctrl_of "$CTRL_LAT" "$LAT_DISK") || fail "no controller name for $CTRL_LAT"
    [ -d "$STATS/$LAT_CTRL" ] || fail "no statistics for $LAT_CTRL"
}
filectl() {
    FILE_DISK=$(disk_of "$CTRL_FILE" 1) || fail "no disk on the file controller"
    FILE_CTRL=$(ctrl_of "$CTRL_FILE" "$FILE_DISK") || fail "no controller name for $CTRL_FILE"
}

# Every queue of controller $1 is on interrupts: not polling, vector not masked.
all_on_interrupts() {
    for q in $(queue_files "$1"); do
        grep -qx 'stage: poll' "$q" && return 1
        grep -qx 'masked: 1' "$q" && return 1
    done
    return 0
}

# No completion was dropped as unknown or stale on any bound controller of ours.
no_bad_completions() {
    n_ctrls=0
    for c in "$STATS"/*/; do
        [ -d "$c" ] || continue
        c=${c%/}
        n=$(stat_sum "${c##*/}" bad_completions)
        [ "$n" = 0 ] || fail "${c##*/}: $n bad completions"
        n_ctrls=$((n_ctrls + 1))
    done
    [ $n_ctrls -gt 0 ] || fail "no controller of ours to check"
    echo "$n_ctrls controllers"
}
