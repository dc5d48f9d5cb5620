# With every DMA mapping bounced through swiotlb (tools/test boots this suite with
# swiotlb=force,track_hiwater),
# as on a machine whose controller cannot reach all of memory: data read lands in a bounce buffer
# and reaches the request's memory only when unmapped, a single range at once, and ranges the
# block layer's iterator mapped (no IOMMU merges them) one by one, from what the driver recorded
# while mapping. Write+verify on both CPUs with sizes from one sector to 1 MiB passes, and the
# bounce buffers were used.

bounce_buffered() {
    grep -qw 'swiotlb=force' /proc/cmdline || fail "the guest was not booted with swiotlb=force"
    hiwater=/sys/kernel/debug/swiotlb/io_tlb_used_hiwater
    [ -r "$hiwater" ] || fail "no $hiwater"
    load_adaptive || fail "insmod failed"
    to_adaptive "$CTRL_FILE" || fail "bind failed"
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    verify_from_both_cpus "$disk" --bsrange=512-1m --blockalign=512 --mem_align=512 \
        --iodepth=16 || fail "verify failed"
    used=$(cat "$hiwater")
    [ "$used" -gt 0 ] || fail "no bounce buffer was used"
    nvme-bind "$CTRL_FILE" none >/dev/null || fail "cannot release the controller"
    echo "write+verify from 512 B to 1 MiB through bounce buffers (at most $used slots in use)"
}

check bounce-buffered bounce_buffered
