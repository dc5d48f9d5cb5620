# blktests, the block layer's own test suite (vendored, built by tools/guest/mkroot), on the
# controller in the PCIe hotplug slot: each device test runs with TEST_DEVS set to our disk, then
# to the stock driver's disk on the same emulated controller. One result per test, from the
# comparison: it passes when the test passes on ours, or fails on stock too, or both skip it for
# the same reason; it fails when the test fails on ours and not on stock, or when ours skips it
# and stock does not (or for another reason). blktests' own output for each run is in the
# console log (lines "NVA-BLKTESTS ...").

# The device tests that apply: the block layer's, and nvme-core's that run on a PCI controller
# (they use its sysfs attributes and character devices; 032, 050 and 053 reset, rescan or remove
# the controller: they run alone, see BLKTESTS_ALONE). blktests checks the nvme group's
# transport list (NVMET_TRTYPES: loop, rdma, tcp, fc) even for device tests, so 049 and 053 need
# the nvme-loop target driver loaded to run at all (setup loads it: the guest has no modprobe
# tree); 032 and 050 name the PCI transport themselves and need the stock driver loaded.
BLKTESTS_TESTS="block/003 block/004 block/005 block/007 block/008 block/011 block/012 block/019 block/036
nvme/032 nvme/039 nvme/049 nvme/050 nvme/053"
# Seconds each timed test runs its I/O (blktests' TIMEOUT; its default is a test's own, up to
# 20 minutes for block/011).
BLKTESTS_TIMEOUT=${BLKTESTS_TIMEOUT:-10}
BLKTESTS=/usr/local/blktests

blktests_setup() {
    [ -x $BLKTESTS/check ] || fail "blktests is not installed in $BLKTESTS (tools/guest/mkroot)"
    [ -e "/sys/bus/pci/devices/$CTRL_HP" ] || fail "no controller at $CTRL_HP (the hotplug slot of tools/vm's test rig)"
    load_stock || fail "stock driver did not load"
    load_adaptive || fail "nvme_adaptive did not load"
    for m in nvme-fabrics nvmet nvme-loop; do
        load_module "$m" || fail "$m did not load"
    done
    findmnt -t configfs /sys/kernel/config >/dev/null || mount -t configfs none /sys/kernel/config ||
        fail "configfs did not mount"
    start_udev || fail "udevd did not start"
    mkdir -p /tmp/blktests
    echo "blktests $(cd $BLKTESTS && ls tests | wc -l) groups, TIMEOUT=$BLKTESTS_TIMEOUT"
}

# Tests that may remove the device (PCI rescan in block/011, pciehp in block/019) run alone and
# last: afterwards the controller may be bound to the stock driver, whichever ran the test.
BLKTESTS_ALONE="block/011 block/019 nvme/032 nvme/050 nvme/053"

# blktests_run DRIVER TEST...: runs the TESTs in one blktests invocation with our disk (DRIVER
# adaptive) or the stock driver's (stock); appends "TEST STATUS REASON" lines to
# /tmp/blktests/DRIVER.results, STATUS pass, fail or skip, REASON why it did not run (the
# device's name replaced by TEST_DEV, to compare across drivers).
blktests_run() {
    drv=$1
    shift
    res=/tmp/blktests/$drv.results
    udevadm settle --timeout=60
    if ! "to_$drv" "$CTRL_HP" || ! udevadm settle --timeout=60 || ! disk=$(disk_of "$CTRL_HP" 1); then
        for t in "$@"; do echo "$t fail no disk on $CTRL_HP under $drv" >>"$res"; done
        return
    fi
    out=/tmp/blktests/$drv-$(echo "$*" | tr '/ ' '-_').log
    printf 'TEST_DEVS=(/dev/%s)\nTIMEOUT=%s\n' "$disk" "$BLKTESTS_TIMEOUT" >/tmp/blktests/config
    secs=$((($# * 6 * BLKTESTS_TIMEOUT) + 300))
    (cd $BLKTESTS && timeout -s KILL $secs ./check -c /tmp/blktests/config -o "/tmp/blktests/results-$drv" "$@") \
        >"$out" 2>&1
    rc=$?
    sed "s/^/NVA-BLKTESTS $drv /" "$out" >/dev/console
    # A failed test's full log (its commands' own output) says why; blktests keeps it apart.
    for t in "$@"; do
        grep -q "^$t .*\[failed\]" "$out" || continue
        for f in /tmp/blktests/results-"$drv"/*/"$t".full; do
            [ -f "$f" ] && tail -n 30 "$f" | sed "s|^|NVA-BLKTESTS $drv $t.full: |" >/dev/console
        done
    done
    # "block/003 => nvme0n1 (run various discard sizes)    [passed]"; a skip's reasons follow,
    # indented.
    for t in "$@"; do
        awk -v t="$t" -v d="$disk" -v rc=$rc -v secs=$secs '
            index($0, t " ") == 1 && /\[(passed|failed|not run)\]/ {
                s = $0; sub(/.*\[/, "", s); sub(/\].*/, "", s)
                st = (s == "passed") ? "pass" : (s == "failed") ? "fail" : "skip"; inside = 1; next }
            inside && /^    / { if (st == "skip") { r = $0; sub(/^ +/, "", r)
                    gsub("/dev/" d, "TEST_DEV", r); gsub(d, "TEST_DEV", r); reason = reason (reason == "" ? "" : "; ") r }
                next }
            { inside = 0 }
            END { if (st == "") print t, "fail", (rc == 137 ? "blktests killed after " secs " s" : "no result (exit status " rc ")")
                  else print t, st, reason }' "$out" >>"$res"
    done
}

# Runs every test on ours, then on stock.
blktests_all() {
    rm -f /tmp/blktests/*.results
    grouped=$(printf '%s\n' $BLKTESTS_TESTS | grep -vxF "$(printf '%s\n' $BLKTESTS_ALONE)")
    alone=$(printf '%s\n' $BLKTESTS_TESTS | grep -xF "$(printf '%s\n' $BLKTESTS_ALONE)")
    # (An empty list would have blktests run every test it has.)
    for drv in adaptive stock; do
        [ -z "$grouped" ] || blktests_run $drv $grouped
    done
    for t in $alone; do
        for drv in adaptive stock; do
            blktests_run $drv "$t"
        done
    done
    for drv in adaptive stock; do
        echo "$drv: $(awk '{ n[$2]++ } END { for (s in n) printf "%d %s ", n[s], s }' /tmp/blktests/$drv.results)"
    done | tr '\n' ' '
}

blktests_compare() {
    read -r _ ours ours_why < <(grep "^$1 " /tmp/blktests/adaptive.results)
    read -r _ stock stock_why < <(grep "^$1 " /tmp/blktests/stock.results)
    [ -n "$ours" ] && [ -n "$stock" ] || fail "no result for $1 (ours: ${ours:-none}, stock: ${stock:-none})"
    case "$stock" in pass) does=passes ;; fail) does=fails ;; *) does=skips ;; esac
    case "$ours/$stock" in
        pass/*) echo "passes on ours (stock: $stock${stock_why:+, $stock_why})" ;;
        fail/fail) echo "fails on stock too" ;;
        skip/skip)
            [ "$ours_why" = "$stock_why" ] || fail "skipped on ours ($ours_why), on stock ($stock_why)"
            echo "both skip: $ours_why" ;;
        fail/*) fail "fails on ours, $does on stock${stock_why:+ ($stock_why)}${ours_why:+: $ours_why}" ;;
        skip/*) fail "skipped on ours ($ours_why), $does on stock" ;;
    esac
}

check setup blktests_setup
check run blktests_all
for T in $BLKTESTS_TESTS; do
    check "${T//\//-}" blktests_compare "$T"
done
check stop-udev stop_udev
