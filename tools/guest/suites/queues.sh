# The queue layout's parameters changed at runtime (io_queue_depth, poll_queues, write_queues)
# take effect at the next controller reset, as with the stock driver: each state is compared
# with stock's through the same steps. tools/test runs this suite on the plain kernel: each
# sequence resets the controller and verifies I/O about twenty times per driver, eight minutes
# on the debug kernel; the reset paths themselves run there in the core and errors suites.

setup_queues() {
    unload_adaptive
    load_adaptive io_queue_depth=64 poll_queues=1 || fail "insmod failed"
    to_adaptive "$CTRL_FILE" || fail "bind failed"
}

# queue_maps CTRL DISK: blk-mq's hardware queues of DISK (hN:TYPE:CPUS), the CPUs of each I/O
# vector of controller CTRL (qN:CPUS, its managed affinity), on one line.
queue_maps() {
    for h in $(ls -v "/sys/kernel/debug/block/$2" | grep '^hctx'); do
        n=${h#hctx}
        printf 'h%s:%s:%s ' "$n" "$(cat "/sys/kernel/debug/block/$2/$h/type")" "$(tr -d ' ' <"/sys/block/$2/mq/$n/cpu_list")"
    done
    awk -v c="$1" '$NF ~ "^" c "q[1-9][0-9]*$" { sub(":", "", $1); print $1, substr($NF, length(c) + 1) }' /proc/interrupts |
        sort -k2V | while read -r irq q; do
            printf '%s:%s ' "$q" "$(cat "/proc/irq/$irq/smp_affinity_list")"
        done
}

# queue_layout DRIVER STEP...: binds the file controller to DRIVER (nvme or nvme_adaptive) with
# the first STEP's parameters, then for each further STEP sets them and resets the controller. A
# STEP is POLL_QUEUES:IO_QUEUE_DEPTH[:WRITE_QUEUES] (write_queues 0 if left out). Prints one
# line per state: the "default/read/poll queues" line, blk-mq's hardware queues (their number,
# then queue_maps), where verified I/O went (reads=QIDS writes=QIDS: the queues of the Read and
# Write commands of a write+verify job on each CPU, polled, io_uring hipri, when there is a
# poll queue), nvme-core's sqsize and each Create I/O Submission Queue command sent
# (queue:size, 0's based). Queues and commands are seen through nvme-core's nvme_setup_cmd
# tracepoint, which both drivers go through.
queue_layout() {
    drv=$1
    shift
    dir=/sys/module/$drv/parameters
    [ -d $TRACING/events/nvme/nvme_setup_cmd ] || skip "no nvme tracepoints in this kernel"
    # Loaded first: the stock driver, loaded, takes the controllers no driver has.
    if [ "$drv" = nvme ]; then load_stock; else load_adaptive; fi >/dev/null 2>&1
    [ -d "$dir" ] || fail "$drv did not load"
    nvme-bind "$CTRL_FILE" none >/dev/null || fail "cannot release $CTRL_FILE"
    first=1
    for step in "$@"; do
        IFS=: read -r poll depth write <<<"$step"
        echo "$poll" >"$dir/poll_queues" || fail "$drv refused poll_queues=$poll"
        echo "$depth" >"$dir/io_queue_depth" || fail "$drv refused io_queue_depth=$depth"
        echo "${write:-0}" >"$dir/write_queues" || fail "$drv refused write_queues=${write:-0}"
        lines=$(dmesg_count "default/read/poll queues")
        trace_start nvme/nvme_setup_cmd "qid == 0 && opcode == 1"
        if [ $first = 1 ]; then
            nvme-bind "$CTRL_FILE" "$drv" >/dev/null || fail "cannot bind $CTRL_FILE to $drv"
            first=0
        else
            echo 1 >"/sys/class/nvme/$ctrl/reset_controller" || fail "$drv: reset refused"
        fi
        wait_for 60 sh -c "[ \$(dmesg | grep -c 'default/read/poll queues') -gt $lines ]" ||
            fail "$drv, $step: no queue layout logged"
        ctrl=$(ctrl_of "$CTRL_FILE") || fail "no controller name"
        wait_for 60 sh -c "[ \"\$(cat /sys/class/nvme/$ctrl/state)\" = live ]" || fail "$drv, $step: not live"
        wait_for 60 disk_of "$CTRL_FILE" 1 || fail "$drv, $step: no disk"
        trace_stop nvme/nvme_setup_cmd
        disk=$(disk_of "$CTRL_FILE" 1)
        layout=$(dmesg | grep "$ctrl: .*default/read/poll queues" | tail -n 1 | sed 's/.*: \([0-9/]*\) default.*/\1/')
        sqs=$(sed -n "s/.* $ctrl: .*nvme_admin_create_sq sqid=\([0-9]*\), qsize=\([0-9]*\),.*/\1:\2/p" $TRACING/trace |
            sort -n | tr '\n' ' ')
        maps=$(queue_maps "$ctrl" "$disk")
        hipri=0
        [ "${layout##*/}" -gt 0 ] && hipri=1
        trace_start nvme/nvme_setup_cmd "qid != 0"
        run_fio --name=layout --filename="/dev/$disk" --direct=1 --ioengine=io_uring --hipri=$hipri \
            --rw=randwrite --bs=4k --iodepth=8 --size=1m --offset_increment=4m --numjobs=2 \
            --cpus_allowed=0,1 --cpus_allowed_policy=split --verify=crc32c --verify_backlog=16 \
            --do_verify=1 --verify_fatal=1 >&2 || { trace_stop nvme/nvme_setup_cmd; fail "$drv, $step: verified I/O (hipri=$hipri) failed"; }
        trace_stop nvme/nvme_setup_cmd
        went=$(for op in read write; do
            printf '%ss=%s ' $op "$(sed -n "s/.* $ctrl: .*qid=\([0-9]*\),.*cmd=(nvme_cmd_$op .*/\1/p" $TRACING/trace |
                sort -nu | paste -sd,)"
        done)
        echo "$step: $layout mq=$(ls "/sys/block/$disk/mq" | wc -l) ${maps}${went}sqsize=$(cat "/sys/class/nvme/$ctrl/sqsize") sq=${sqs% }"
    done
}

# io_queue_depth and poll_queues changed at runtime take effect at the next controller reset, as
# with the stock driver: each state matches stock's with the same parameters. Loaded without a
# poll queue, the tag set has no poll map and none can be added; loaded with one, the poll
# queues follow the parameter (up to the queues allocated at probe); a new depth applies to
# queues allocated afterwards, those kept keep theirs. Bound with as many poll queues as CPUs
# (the most accepted), every poll queue has a CPU and resets keep them.
queue_params_at_reset() {
    same_layouts "0:1024 1:1024" "1:64 2:32 0:32 1:32 1:128" "2:64 2:64 1:64 2:64"
    # Not the same by standing still: the poll queues and the depth did change.
    grep -q "^2:32: 1/0/2 .*sqsize=31 " /tmp/layouts && grep -q "^1:32: 2/0/1 .* 3:31$" /tmp/layouts &&
        grep -q "^1:128: .*sqsize=127 " /tmp/layouts && [ "$(grep -c "^2:64: 2/0/2 mq=4 " /tmp/layouts)" = 3 ] || fail "unexpected layouts: $(tr '\n' ';' </tmp/layouts)"
    layout_params_back
}

# same_layouts SEQUENCE...: queue_layout through each SEQUENCE (its steps, as one word) with
# each driver; fails unless every state of ours is stock's. Writes ours to /tmp/layouts.
same_layouts() {
    for steps in "$@"; do
        # shellcheck disable=SC2086 # the steps are words
        ours=$(queue_layout nvme_adaptive $steps 2>&1) || fail "nvme_adaptive: $(echo "$ours" | tail -n 2)"
        # shellcheck disable=SC2086
        stock=$(queue_layout nvme $steps 2>&1) || fail "nvme: $(echo "$stock" | tail -n 2)"
        [ "$ours" = "$stock" ] || fail "nvme_adaptive: $(echo $ours) / nvme: $(echo $stock)"
        echo "$ours"
    done >/tmp/layouts
}

# Puts both drivers' queue parameters back (stock's defaults, ours as loaded by setup) and the
# file controller on ours; prints the layouts.
layout_params_back() {
    echo 0 >/sys/module/nvme/parameters/poll_queues
    echo 0 >/sys/module/nvme/parameters/write_queues
    echo 1024 >/sys/module/nvme/parameters/io_queue_depth
    set_params poll_queues=1 io_queue_depth=64 write_queues=0
    to_adaptive "$CTRL_FILE" || fail "cannot bind $CTRL_FILE back"
    tr '\n' ';' </tmp/layouts
}

# write_queues changed at runtime takes effect at the next controller reset, as with the stock
# driver: reads and writes get queue sets of their own (the read map, HCTX_TYPE_READ), each set
# with its own vectors spread over the CPUs, and every state (maps, the vectors' CPUs, the
# queues each CPU's reads and writes went to) is stock's with the same parameters. Bound with
# one write queue, then two, none, one again; bound with a poll queue and write queues; bound
# without write queues, where the tag set has no read map and a later write_queues changes
# nothing.
write_queues_at_reset() {
    same_layouts "0:64:1 0:64:2 0:64:0 0:64:1" "1:64:1 1:64:2" "0:64:0 0:64:1"
    # Not the same by standing still: reads and writes did part, and come together again.
    grep -q "^0:64:1: 1/2/0 mq=3 h0:default:0,1 h1:read:[01] h2:read:[01] q1:0-1 q2:[01] q3:[01] reads=2,3 writes=1 " /tmp/layouts &&
        grep -q "^0:64:2: 2/1/0 mq=3 h0:default:[01] h1:default:[01] h2:read:0,1 q1:[01] q2:[01] q3:0-1 reads=3 writes=1,2 " /tmp/layouts &&
        grep -q "^0:64:0: 2/0/0 mq=2 h0:default:[01] h1:default:[01] q1:[01] q2:[01] reads=1,2 writes=1,2 " /tmp/layouts &&
        grep -q "^1:64:1: 1/2/1 mq=4 " /tmp/layouts && grep -q "^1:64:2: 2/1/1 mq=4 " /tmp/layouts &&
        [ "$(grep -c "^0:64:1: 2/0/0 " /tmp/layouts)" = 1 ] || fail "unexpected layouts: $(tr '\n' ';' </tmp/layouts)"
    layout_params_back
}

check setup setup_queues
check queue-params-at-reset queue_params_at_reset
check write-queues-at-reset write_queues_at_reset
