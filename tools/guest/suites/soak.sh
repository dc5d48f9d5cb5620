# The switch soak (tools/test soak, not in CI: about an hour on the debug kernel): fio
# write+verify passes on the slow controller while the parameters force the shortest episodes
# and backoffs, until its queues have switched modes 10,000 times; every block is read back and
# checked. CI runs a slice of it (reliability/switch-soak-slice). First, mixed reads and writes
# of 512 B to 64 KiB while the queue switches (not in CI: on the debug kernel under a loaded host
# its queue switches too rarely to finish in reasonable time).

setup_soak() {
    unload_adaptive
    load_adaptive || fail "insmod failed"
    to_adaptive "$CTRL_SLOW" || fail "bind failed"
    slow
}

# Mixed random reads and writes of 512 B to 64 KiB (fio bsrange), verified, on the slow
# controller while its queue switches modes as often as it can.
mixed_rw_bsrange() {
    slow || return 1
    saved=$(for kv in $FORCE_SWITCHING; do echo "${kv%%=*}=$(cat "$PARAMS/${kv%%=*}")"; done)
    BG_PIDS=
    trap 'kill $BG_PIDS 2>/dev/null; set_params $saved' EXIT
    set_params $FORCE_SWITCHING
    e0=$(stat_sum "$SLOW_CTRL" episodes) c0=$(stat_sum "$SLOW_CTRL" completed)
    # Reads in the second half of the disk keep the queue deep while the verified writes run in
    # the first (fio's verify with mixed block sizes keeps about one write in flight: alone,
    # nothing would poll). Write passes follow each other until the queue has switched modes 40
    # times; the reads run until then.
    fio --name=mixed-reads --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randread --bsrange=512-64k --iodepth=16 --cpus_allowed=1 --offset=32m --size=32m \
        --time_based --runtime=900 >/dev/null 2>&1 &
    BG_PIDS=$!
    passes=0 end=$((SECONDS + 600))
    while [ $(($(stat_sum "$SLOW_CTRL" episodes) - e0)) -lt 20 ]; do
        [ $SECONDS -lt $end ] ||
            fail "only $(($(stat_sum "$SLOW_CTRL" episodes) - e0)) episodes in 600 s ($passes passes)"
        run_fio --name=mixed-writes --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
            --rw=randwrite --bsrange=512-64k --iodepth=16 --cpus_allowed=1 --offset=0 --size=32m \
            --io_size=8m --verify=crc32c --verify_backlog=64 --verify_fatal=1 --randrepeat=0 ||
            return 1
        passes=$((passes + 1))
    done
    kill "$BG_PIDS"
    wait "$BG_PIDS" 2>/dev/null
    BG_PIDS=
    e=$(($(stat_sum "$SLOW_CTRL" episodes) - e0)) c=$(($(stat_sum "$SLOW_CTRL" completed) - c0))
    echo "$((2 * e)) mode switches over $c completions of 512 B..64 KiB in $passes verified write passes"
}

# 5,000 episodes, each two switches (mask and poll, then unmask).
switch_soak() {
    slow || return 1
    verify_switches "$SLOW_DISK" "$SLOW_CTRL" 5000 7200
}

check setup setup_soak
check mixed-rw-bsrange-switching mixed_rw_bsrange
check switches-10000 switch_soak
