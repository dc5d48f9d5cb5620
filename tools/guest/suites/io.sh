# The I/O path: data integrity under fio verify, flushes and FUA, discard and write zeroes, errors
# from the device, several namespaces and block sizes (interop: the stock driver and other
# controllers).

PATTERN=/tmp/pattern

setup_io() {
    load_stock || fail "stock driver did not load"
    load_adaptive || fail "nvme_adaptive did not load"
    to_adaptive "$CTRL_FILE" && to_adaptive "$CTRL_MULTI" || fail "binding failed"
    head -c 8388608 /dev/urandom >"$PATTERN"
}

# fio write+verify with crc32c: block sizes 512 B to 1 MiB, buffers at 512-byte (not page)
# alignment, one job per CPU on its own region, at queue depth $2.
verify_at_qd() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    run_fio --name=verify --filename="/dev/$disk" --direct=1 --ioengine=io_uring \
        --rw=randwrite --bsrange=512-1m --blockalign=512 --mem_align=512 \
        --iodepth="$1" --numjobs=2 --cpus_allowed=0-1 --cpus_allowed_policy=split \
        --size=24m --offset_increment=64m --verify=crc32c --do_verify=1 --verify_fatal=1 \
        --randrepeat=0
}

# The same on another namespace (block size differs), smaller.
verify_namespace() {
    disk=$(disk_of "$CTRL_MULTI" "$1") || fail "no disk for namespace $1"
    run_fio --name=verify --filename="/dev/$disk" --direct=1 --ioengine=io_uring \
        --rw=randwrite --bsrange="$2"-256k --blockalign="$2" --iodepth=16 --size=16m \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0
}

block_size_is() {
    disk=$(disk_of "$CTRL_MULTI" "$1") || fail "no disk for namespace $1"
    got=$(cat "/sys/block/$disk/queue/logical_block_size")
    [ "$got" = "$2" ] || fail "$disk logical block size $got, expected $2"
}

zeroes_after() {
    # zeroes_after discard|write-zeroes: write a pattern, drop its second MiB, read zeroes back.
    # write-zeroes goes through the device's Write Zeroes command: fallocate's punch-hole on a
    # block device asks for it without the block layer's fallback of writing zero pages, and
    # the requests the driver receives are counted.
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    dd if="$PATTERN" of="/dev/$disk" bs=1M count=4 oflag=direct 2>/dev/null || fail "write failed"
    if [ "$1" = write-zeroes ]; then
        max=$(cat "/sys/block/$disk/queue/write_zeroes_max_bytes")
        [ "$max" -gt 0 ] || fail "write_zeroes_max_bytes is $max: the disk offers no Write Zeroes"
        trace_requests "$disk"
        fallocate --punch-hole --offset 1048576 --length 1048576 "/dev/$disk" || { requests_traced WZ; fail "Write Zeroes (no fallback) failed"; }
        n=$(requests_traced 'WZ[A-Z]*')
        [ "$n" -gt 0 ] || fail "no write-zeroes request reached the driver"
    else
        /usr/sbin/blkdiscard -o 1048576 -l 1048576 "/dev/$disk" || fail "BLKDISCARD failed"
    fi
    head -c 1048576 /dev/zero >/tmp/zero1m
    head -c 1048576 "$PATTERN" >/tmp/pattern1m
    dd if="/dev/$disk" bs=1M skip=1 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/zero1m ||
        fail "range does not read back as zeroes"
    dd if="/dev/$disk" bs=1M count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/pattern1m ||
        fail "data before the range changed"
    dd if="/dev/$disk" bs=1M skip=2 count=1 iflag=direct 2>/dev/null |
        cmp -s - <(head -c 3145728 "$PATTERN" | tail -c 1048576) || fail "data after the range changed"
    [ "$1" != write-zeroes ] || echo "$n write-zeroes requests (write_zeroes_max_bytes $max)"
}

discard_reads_zero() {
    # The device promises zeroes for deallocated blocks: DLFEAT bits 2:0 = 001, as nvme-cli reads
    # Identify Namespace through the driver.
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    dlfeat=$(nvme id-ns "/dev/$disk" --output-format=json | jq -r .dlfeat) || fail "nvme id-ns failed on $disk"
    [ $((dlfeat & 7)) = 1 ] || fail "device does not promise zeroes (DLFEAT $dlfeat)"
    zeroes_after discard
}

device_error_is_enodata() {
    disk=$(disk_of "$CTRL_MULTI" 3) || fail "no disk for namespace 3"
    before=$(dmesg | grep -c "critical medium error")
    out=$(limit 120 "read of the bad sector" dd if="/dev/$disk" of=/dev/null bs=4096 count=1 skip=256 iflag=direct 2>&1) &&
        fail "read of the bad sector succeeded"
    # A media error is BLK_STS_MEDIUM, which reaches the reader as ENODATA (as with the stock
    # driver), not as a generic I/O error.
    echo "$out" | grep -q "No data available" || fail "unexpected error: $out"
    after=$(dmesg | grep -c "critical medium error")
    [ "$after" -gt "$before" ] || fail "no medium error reported (status mapping)"
    # The rest of the namespace reads fine, and the queue is still usable.
    dd if="/dev/$disk" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null || fail "good sector unreadable"
}

# The disk's capacity is the namespace's (the 512 MiB image behind the file-backed controller);
# its last block is written and read back through the driver; I/O past the end fails without
# reaching the driver (the block layer checks the capacity the driver set), and does not hang.
capacity_and_last_block() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    sectors=$(cat "/sys/block/$disk/size")
    [ "$sectors" = $((512 * 2048)) ] || fail "capacity $sectors sectors, the namespace has $((512 * 2048))"
    last=$((sectors / 8 - 1))
    head -c 4096 "$PATTERN" >/tmp/pattern4k
    dd if=/tmp/pattern4k of="/dev/$disk" bs=4096 seek=$last count=1 oflag=direct 2>/dev/null || fail "write of the last block failed"
    dd if="/dev/$disk" bs=4096 skip=$last count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/pattern4k ||
        fail "the last block does not read back"
    out=$(limit 60 "read beyond the end" dd if="/dev/$disk" of=/dev/null bs=512 skip="$sectors" count=1 iflag=direct 2>&1)
    case "$out" in *"still running after"*) fail "$out" ;; esac
    ! echo "$out" | grep -q '^1+0 records in' || fail "read beyond the end returned data"
    out=$(limit 60 "write beyond the end" dd if=/dev/zero of="/dev/$disk" bs=512 seek="$sectors" count=1 oflag=direct 2>&1) &&
        fail "write beyond the end succeeded"
    echo "$out" | grep -qE "No space left|Input/output error" || fail "unexpected error: $out"
}

# Flushes and FUA writes reach the driver and the data survives them: fio's fsync issues
# flushes (counted in the disk's statistics), O_DSYNC direct writes on a disk with FUA become
# FUA writes (counted as the driver receives them).
flush_and_fua() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    [ "$(cat "/sys/block/$disk/queue/write_cache")" = "write back" ] || fail "volatile write cache not exposed"
    [ "$(cat "/sys/block/$disk/queue/fua")" = 1 ] || fail "FUA not exposed"
    # Field 16 of the disk's stat file: flush requests completed.
    f0=$(awk '{ print $16 }' "/sys/block/$disk/stat")
    run_fio --name=sync --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite --bs=4k \
        --iodepth=4 --size=4m --fsync=4 --verify=crc32c --do_verify=1 || return 1
    flushes=$(($(awk '{ print $16 }' "/sys/block/$disk/stat") - f0))
    # 256 fsyncs; the block layer merges flushes that wait together, so fewer reach the device.
    [ "$flushes" -ge 64 ] || fail "$flushes flushes completed for 1024 writes with fsync every 4"
    trace_requests "$disk"
    head -c 262144 "$PATTERN" >/tmp/pattern256k
    dd if=/tmp/pattern256k of="/dev/$disk" bs=4096 count=64 oflag=direct,dsync 2>/dev/null || { requests_traced W; fail "O_DSYNC write failed"; }
    fua=$(requests_traced 'WF[A-Z]*')
    [ "$fua" -ge 64 ] || fail "$fua FUA writes reached the driver for 64 O_DSYNC writes"
    dd if="/dev/$disk" bs=4096 count=64 iflag=direct 2>/dev/null | cmp -s - /tmp/pattern256k || fail "FUA-written data differs"
    echo "$flushes flushes, $fua FUA writes"
}

# nvme-core's nvme_sq trace of each completion carries the queue's SQ tail (the driver reads
# its mirror only while the trace is on): at QD 1 every command completes before the next is
# submitted, so the tail equals the SQ head the controller reports, and it moves on.
sq_trace_has_the_tail() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    [ -d $TRACING/events/nvme/nvme_sq ] || fail "no nvme_sq tracepoint in this kernel"
    trace_start nvme/nvme_sq "disk == \"$disk\""
    dd if="/dev/$disk" of=/dev/null bs=4096 count=64 iflag=direct 2>/dev/null
    ok=$?
    trace_stop nvme/nvme_sq
    [ $ok = 0 ] || fail "reads failed"
    # "nvme0: disk=nvme0n1, qid=1, head=5, tail=5": events, those whose tail is not the head,
    # distinct tails.
    set -- $(awk '/nvme_sq:/ {
            match($0, /head=[0-9]+/); h = substr($0, RSTART + 5, RLENGTH - 5)
            match($0, /tail=[0-9]+/); t = substr($0, RSTART + 5, RLENGTH - 5)
            n++; if (h != t) bad++; if (!(t in seen)) { seen[t] = 1; tails++ }
        } END { print n + 0, bad + 0, tails + 0 }' $TRACING/trace)
    [ "$1" -ge 64 ] || fail "$1 nvme_sq events for 64 reads"
    [ "$2" = 0 ] || fail "$2 of $1 nvme_sq events trace a tail other than the head at QD 1"
    [ "$3" -ge 32 ] || fail "$1 nvme_sq events trace only $3 distinct tails"
    echo "$1 events, $3 distinct tails"
}

check setup setup_io
check verify-qd1 verify_at_qd 1
check verify-qd16 verify_at_qd 16
check verify-qd128 verify_at_qd 128
check verify-ns-512 verify_namespace 1 512
check verify-ns-4k verify_namespace 2 4k
check block-size-512 block_size_is 1 512
check block-size-4k block_size_is 2 4096
check flush-and-fua flush_and_fua
check sq-trace-has-the-tail sq_trace_has_the_tail
check discard-reads-zeroes discard_reads_zero
check write-zeroes zeroes_after write-zeroes
check media-error-is-enodata device_error_is_enodata
check capacity-and-last-block capacity_and_last_block
check no-bad-completions no_bad_completions
