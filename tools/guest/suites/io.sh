# The I/O path: data integrity under fio verify, interchange with the stock driver, discard and
# write zeroes, errors from the device, several controllers and namespaces, block sizes.

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

# Data written by one driver reads back identically through the other.
interchange() {
    from=$1 to=$2 offset=$3
    "to_$from" "$CTRL_FILE"
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $from"
    dd if="$PATTERN" of="/dev/$disk" bs=1M seek="$offset" oflag=direct,seek_bytes 2>/dev/null || fail "write through $from failed"
    "to_$to" "$CTRL_FILE"
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $to"
    dd if="/dev/$disk" bs=1M count=8 skip="$offset" iflag=direct,skip_bytes 2>/dev/null | cmp - "$PATTERN" ||
        fail "data written through $from differs when read through $to"
}

zeroes_after() {
    # zeroes_after discard|zeroout: write a pattern, drop its second MiB, read zeroes back.
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    dd if="$PATTERN" of="/dev/$disk" bs=1M count=4 oflag=direct 2>/dev/null || fail "write failed"
    if [ "$1" = zeroout ]; then
        /usr/sbin/blkdiscard -z -o 1048576 -l 1048576 "/dev/$disk" || fail "BLKZEROOUT failed"
    else
        /usr/sbin/blkdiscard -o 1048576 -l 1048576 "/dev/$disk" || fail "BLKDISCARD failed"
    fi
    head -c 1048576 /dev/zero >/tmp/zero1m
    head -c 1048576 "$PATTERN" >/tmp/pattern1m
    dd if="/dev/$disk" bs=1M skip=1 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/zero1m ||
        fail "range does not read back as zeroes"
    dd if="/dev/$disk" bs=1M count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/pattern1m ||
        fail "data before the range changed"
}

discard_reads_zero() {
    # The device promises zeroes for deallocated blocks (DLFEAT); the driver logs that.
    dmesg | grep -q "nvma.*n1: .*discarded blocks read as zeroes" || fail "device does not promise zeroes"
    zeroes_after discard
}

device_error_is_enodata() {
    disk=$(disk_of "$CTRL_MULTI" 3) || fail "no disk for namespace 3"
    before=$(dmesg | grep -c "critical medium error")
    out=$(timeout 120 dd if="/dev/$disk" of=/dev/null bs=4096 count=1 skip=256 iflag=direct 2>&1) &&
        fail "read of the bad sector succeeded"
    # A media error is BLK_STS_MEDIUM, which reaches the reader as ENODATA (as with the stock
    # driver), not as a generic I/O error.
    echo "$out" | grep -q "No data available" || fail "unexpected error: $out"
    after=$(dmesg | grep -c "critical medium error")
    [ "$after" -gt "$before" ] || fail "no medium error reported (status mapping)"
    # The rest of the namespace reads fine, and the queue is still usable.
    dd if="/dev/$disk" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null || fail "good sector unreadable"
}

beyond_capacity() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    sectors=$(cat "/sys/block/$disk/size")
    # A read at the end returns nothing; a write there fails with "no space". Neither hangs.
    n=$(timeout 60 dd if="/dev/$disk" of=/dev/null bs=512 skip="$sectors" count=1 iflag=direct 2>&1 | grep -c '^1+0 records in')
    [ "$n" = 0 ] || fail "read beyond the end returned data"
    out=$(timeout 60 dd if=/dev/zero of="/dev/$disk" bs=512 seek="$sectors" count=1 oflag=direct 2>&1) &&
        fail "write beyond the end succeeded"
    echo "$out" | grep -qE "No space left|Input/output error" || fail "unexpected error: $out"
}

two_controllers() {
    # The null controller stays with the stock driver, the file-backed one is ours.
    to_stock "$CTRL_NULL" && to_adaptive "$CTRL_FILE" || fail "binding failed"
    stock_disk=$(disk_of "$CTRL_NULL" 1) && ours=$(disk_of "$CTRL_FILE" 1) || fail "disks missing"
    case "$stock_disk" in nvme[0-9]*n1) ;; *) fail "stock disk named $stock_disk" ;; esac
    case "$ours" in nvma[0-9]*n1) ;; *) fail "our disk named $ours" ;; esac
    run_fio --direct=1 --ioengine=io_uring --rw=randread --bs=4k --iodepth=8 --runtime=3 --time_based \
        --name=stock --filename="/dev/$stock_disk" --name=ours --filename="/dev/$ours"
}

flush_and_fua() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    [ "$(cat "/sys/block/$disk/queue/write_cache")" = "write back" ] || fail "volatile write cache not exposed"
    [ "$(cat "/sys/block/$disk/queue/fua")" = 1 ] || fail "FUA not exposed"
    run_fio --name=sync --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite --bs=4k \
        --iodepth=4 --size=4m --fsync=4 --verify=crc32c --do_verify=1
}

check setup setup_io
check verify-qd1 verify_at_qd 1
check verify-qd16 verify_at_qd 16
check verify-qd128 verify_at_qd 128
check verify-ns-512 verify_namespace 1 512
check verify-ns-4k verify_namespace 2 4k
check block-size-512 block_size_is 1 512
check block-size-4k block_size_is 2 4096
check stock-to-adaptive interchange stock adaptive 0
check adaptive-to-stock interchange adaptive stock 16777216
check back-to-adaptive to_adaptive "$CTRL_FILE"
check flush-and-fua flush_and_fua
check discard-reads-zeroes discard_reads_zero
check write-zeroes zeroes_after zeroout
check media-error-is-enodata device_error_is_enodata
check beyond-capacity beyond_capacity
check two-controllers two_controllers
