# The driver among others: data moved between the stock driver and ours, both drivers at once,
# and the controllers of other shapes (one MSI-X vector, a controller memory buffer) as stock
# handles them.

PATTERN=/tmp/pattern

setup_interop() {
    load_stock || fail "stock driver did not load"
    load_adaptive || fail "nvme_adaptive did not load"
    head -c 8388608 /dev/urandom >"$PATTERN"
}

# Data written by one driver reads back identically through the other. Each move is checked:
# the controller is bound to the driver named, and has its disk.
interchange() {
    from=$1 to=$2 offset=$3
    on_driver "$from"
    dd if="$PATTERN" of="/dev/$disk" bs=1M seek="$offset" oflag=direct,seek_bytes 2>/dev/null || fail "write through $from failed"
    on_driver "$to"
    dd if="/dev/$disk" bs=1M count=8 skip="$offset" iflag=direct,skip_bytes 2>/dev/null | cmp - "$PATTERN" ||
        fail "data written through $from differs when read through $to"
    echo "written through $from, read back through $to ($disk)"
}

# on_driver stock|adaptive: moves the file-backed controller there; sets disk.
on_driver() {
    "to_$1" "$CTRL_FILE" || fail "binding to $1 failed"
    case "$1" in stock) want=nvme ;; adaptive) want=nvme_adaptive ;; esac
    [ "$(bound_driver "$CTRL_FILE")" = "$want" ] || fail "bound to $(bound_driver "$CTRL_FILE"), not $want"
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $want"
}

two_controllers() {
    # The null controller stays with the stock driver, the file-backed one is ours.
    to_stock "$CTRL_NULL" && to_adaptive "$CTRL_FILE" || fail "binding failed"
    stock_disk=$(disk_of "$CTRL_NULL" 1) && ours=$(disk_of "$CTRL_FILE" 1) || fail "disks missing"
    [ "$(bound_driver "$CTRL_NULL")/$(bound_driver "$CTRL_FILE")" = nvme/nvme_adaptive ] ||
        fail "bound to $(bound_driver "$CTRL_NULL") and $(bound_driver "$CTRL_FILE")"
    run_fio --direct=1 --ioengine=io_uring --rw=randread --bs=4k --iodepth=8 --runtime=3 --time_based \
        --name=stock --filename="/dev/$stock_disk" --name=ours --filename="/dev/$ours"
}

# A controller with one MSI-X vector: its admin queue and I/O queue 1 share the interrupt line
# (both handlers on one line of /proc/interrupts), and write+verify passes on both CPUs.
single_vector() {
    to_adaptive "$CTRL_ONEVEC" || fail "bind failed"
    disk=$(disk_of "$CTRL_ONEVEC" 1) || fail "no disk"
    ctrl=$(ctrl_of "$CTRL_ONEVEC" "$disk") || fail "no controller name"
    awk -v a="${ctrl}q0" -v b="${ctrl}q1" '{
            n = 0
            for (i = 1; i <= NF; i++) { f = $i; sub(/,$/, "", f); if (f == a || f == b) n++ }
            if (n == 2) found = 1
        } END { exit !found }' /proc/interrupts ||
        fail "${ctrl}q0 and ${ctrl}q1 not on one line: $(grep "${ctrl}q" /proc/interrupts | tr -s ' ')"
    verify_from_both_cpus "$disk" --bs=4k --iodepth=16 || fail "verify failed"
    nvme-bind "$CTRL_ONEVEC" none >/dev/null || fail "cannot release the controller"
    echo "${ctrl}q0 and ${ctrl}q1 on one line, I/O verified"
}

# CMBLOC and CMBSZ of the controller with a controller memory buffer, as the bound driver's sysfs
# shows them.
cmb_attributes() {
    ctrl=$(ctrl_of "$CTRL_CMB") || return 1
    for a in cmb cmbloc cmbsz; do
        echo "$a: $(tr '\n' ' ' <"/sys/class/nvme/$ctrl/$a")" || return 1
    done
    p2p=/sys/bus/pci/devices/$CTRL_CMB/p2pmem
    echo "p2pmem: $(cat $p2p/size) bytes, $(cat $p2p/available) available, published $(cat $p2p/published)"
}

# The controller with a CMB, bound to each driver in turn: sysfs shows cmb, cmbloc and cmbsz with
# the same contents, each driver registers the CMB as peer-to-peer memory, and with use_cmb_sqes
# (on by default) takes the same share of it for its submission queues (p2pmem's available
# bytes, which the SQs' allocations lower), and write+verify passes on ours: its queues' commands
# are written into the device's BAR. The test kernels have CONFIG_PCI_P2PDMA; without it both
# drivers warn that the CMB cannot be registered, and the SQs stay in host memory.
cmb_as_stock() {
    # Released first, so that each driver probes it here (the stock driver took it at load).
    nvme-bind "$CTRL_CMB" none >/dev/null || fail "cannot release the controller"
    warned=$(dmesg_count 'failed to register the CMB')
    to_stock "$CTRL_CMB" && wait_for 60 disk_of "$CTRL_CMB" 1 || fail "nvme: bind failed"
    stock=$(cmb_attributes) || fail "nvme: no CMB attributes: $stock"
    stock_warned=$(($(dmesg_count 'failed to register the CMB') - warned))
    to_adaptive "$CTRL_CMB" && wait_for 60 disk_of "$CTRL_CMB" 1 || fail "nvme_adaptive: bind failed"
    ours=$(cmb_attributes) || fail "nvme_adaptive: no CMB attributes: $ours"
    ours_warned=$(($(dmesg_count 'failed to register the CMB') - warned - stock_warned))
    echo "$stock" | grep -q '^cmbsz: 0 ' && fail "nvme: no CMB: $(echo $stock)"
    set -- $(echo "$stock" | sed -n 's/^p2pmem: \([0-9]*\) bytes, \([0-9]*\) available.*/\1 \2/p')
    [ $# = 2 ] && [ "$2" -lt "$1" ] || fail "nvme: no SQs in the CMB: $(echo $stock)"
    [ "$ours" = "$stock" ] || fail "nvme_adaptive: $(echo $ours) / nvme: $(echo $stock)"
    [ "$ours_warned" = "$stock_warned" ] ||
        fail "'failed to register the CMB' logged $ours_warned times by nvme_adaptive, $stock_warned by nvme"
    disk=$(disk_of "$CTRL_CMB" 1)
    verify_from_both_cpus "$disk" --bs=4k --iodepth=16 || fail "verify failed"
    nvme-bind "$CTRL_CMB" none >/dev/null || fail "cannot release the controller"
    echo "$(echo $ours), registration warnings $ours_warned, I/O verified"
}

check setup setup_interop
check stock-to-adaptive interchange stock adaptive 0
check adaptive-to-stock interchange adaptive stock 16777216
check back-to-adaptive on_driver adaptive
check two-controllers two_controllers
check single-vector single_vector
check cmb-as-stock cmb_as_stock
check no-bad-completions no_bad_completions
