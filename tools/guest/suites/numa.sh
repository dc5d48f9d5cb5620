# With two NUMA nodes (tools/test boots this suite with tools/vm --numa: CPU 0 on node 0, CPU 1
# on node 1), the descriptor pools come in a set per node that has a queue, as with pci.c: the
# file controller's two I/O queues are each set up for one CPU's node, so each driver makes two
# sets, and requests whose descriptors come from them pass write+verify from both CPUs.

# pool_sets PCI_ADDR NAME: how many "NAME descriptor page" DMA pools (one per set) the device has.
pool_sets() {
    grep -c "^$2 descriptor page " "/sys/bus/pci/devices/$1/pools"
}

pools_per_node() {
    [ -e /sys/devices/system/node/node1/cpu1 ] || fail "CPU 1 is not on NUMA node 1 (booted without tools/vm --numa?)"
    for drv in nvme nvme_adaptive; do
        if [ $drv = nvme ]; then to_stock "$CTRL_FILE"; else to_adaptive "$CTRL_FILE"; fi ||
            fail "cannot bind $CTRL_FILE to $drv"
        disk=$(disk_of "$CTRL_FILE" 1) || fail "$drv: no disk"
        # 8 to 128 KiB: PRP lists from both pools (SGLs where the controller takes them).
        verify_from_both_cpus "$disk" --bsrange=8k-128k --iodepth=8 || fail "$drv: verify failed"
        sets=$(pool_sets "$CTRL_FILE" "$drv") || fail "$drv: no descriptor pools"
        [ "$sets" = 2 ] || fail "$drv: $sets descriptor pool sets for two nodes"
    done
    nvme-bind "$CTRL_FILE" none >/dev/null || fail "cannot release the controller"
    echo "two descriptor pool sets with either driver, I/O verified from both nodes"
}

check pools-per-node pools_per_node
