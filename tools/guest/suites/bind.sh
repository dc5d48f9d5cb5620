# Binding: the module never takes a controller by itself; it binds when asked, sees the
# controller as the stock driver does (Identify, registers), lets go cleanly, and tools/nvme-bind
# refuses busy devices.

no_device_taken() {
    for d in "$CTRL_NULL" "$CTRL_FILE" "$CTRL_MULTI"; do
        [ "$(bound_driver "$d")" = none ] || fail "$d bound to $(bound_driver "$d") by itself"
    done
}

no_modalias() {
    # The .modinfo strings, read from the file itself (busybox modinfo needs modules.dep).
    info=$(tr '\0' '\n' <"$NVA_KO" | grep -E '^(alias|license|parm)=')
    echo "$info" | grep -q '^license=' || fail "cannot read the module's .modinfo"
    aliases=$(echo "$info" | grep '^alias=')
    [ -z "$aliases" ] || fail "module has aliases: $aliases"
    echo "$(echo "$info" | grep -c '^parm=') parameters, no alias"
}

# The controller as nvme-cli sees it through the bound driver: Identify Controller (sent as a
# passthrough admin command on the driver's admin queue) and CAP from BAR0, one "field value"
# per line.
controller_view() {
    ctrl=$(ctrl_of "$CTRL_NULL") || fail "no nvme controller for $CTRL_NULL (character device)"
    nvme id-ctrl "/dev/$ctrl" --output-format=json |
        jq -r '"vid \(.vid)", "sn \(.sn)", "mn \(.mn)", "fr \(.fr)", "mdts \(.mdts)", "nn \(.nn)",
            "oncs \(.oncs)", "vwc \(.vwc)", "sqes \(.sqes)", "cqes \(.cqes)"' || fail "nvme id-ctrl failed on $ctrl"
    nvme show-regs "/dev/$ctrl" | awk '$1 == "cap" { print "cap", $3 }'
    # The quirks the driver gave nvme-core (QEMU's controller: its ID table's bogus_nid).
    echo "quirks $(xargs <"/sys/class/nvme/$ctrl/quirks")"
}

record_stock_view() {
    controller_view >/tmp/stock_view || return 1
    grep -q '^cap 0x' /tmp/stock_view || fail "nvme show-regs printed no cap"
    echo "$(wc -l </tmp/stock_view) fields"
}

bound_to_adaptive() {
    [ "$(bound_driver "$CTRL_NULL")" = nvme_adaptive ] || fail "bound to $(bound_driver "$CTRL_NULL")"
}

# Identify Controller through our admin queue, and the registers, read as under the stock driver.
view_matches_stock() {
    controller_view >/tmp/our_view || return 1
    d=$(diff /tmp/stock_view /tmp/our_view) || fail "differs from the stock driver's view: $(echo "$d" | tr '\n' ' ')"
    echo "$(wc -l </tmp/our_view) fields as under stock"
}

# pci.c's DMI rules (check_vendor_combination_bug): the test rig's board is named LXKT-ZXEG-N6
# (tools/vm), which gives any controller no_apst; the stock driver must show it, or the rig
# proves nothing, and ours the same quirks.
dmi_quirk() {
    stock=$(grep ^quirks /tmp/stock_view | cut -d' ' -f2-)
    ours=$(grep ^quirks /tmp/our_view | cut -d' ' -f2-)
    echo " $stock " | grep -q " no_apst " ||
        fail "the stock driver's quirks '$stock' lack no_apst (board: $(cat /sys/class/dmi/id/board_name 2>&1))"
    [ "$ours" = "$stock" ] || fail "quirks show '$ours', the stock driver's '$stock'"
    echo "$ours, as under stock"
}

# quirks=VID:DID:names, as pci.c parses it: an unknown name fails insmod; a known one is added to
# the controller's quirks, and ^name removes one its ID table gave (QEMU's: bogus_nid).
quirks_param() {
    ! load_adaptive quirks=1b36:0010:no_such_quirk 2>/dev/null || fail "insmod accepted quirks=1b36:0010:no_such_quirk"
    load_adaptive quirks=1b36:0010:no_deepest_ps,^bogus_nid ||
        fail "insmod refused quirks=1b36:0010:no_deepest_ps,^bogus_nid"
    nvme-bind "$CTRL_NULL" nvme_adaptive >/dev/null || fail "bind failed"
    ctrl=$(ctrl_of "$CTRL_NULL") || fail "no controller for $CTRL_NULL"
    have=$(xargs <"/sys/class/nvme/$ctrl/quirks")
    nvme-bind "$CTRL_NULL" nvme >/dev/null || fail "unbind to stock failed"
    unload_adaptive || fail "rmmod failed"
    grep -qw bogus_nid /tmp/stock_view || fail "the stock driver's quirks lack bogus_nid: $(grep ^quirks /tmp/stock_view)"
    want=$(grep ^quirks /tmp/stock_view | cut -d' ' -f2- | tr ' ' '\n' | grep -vx bogus_nid)
    for q in $want no_deepest_ps; do
        echo " $have " | grep -q " $q " || fail "quirks show '$have', without $q"
    done
    ! echo " $have " | grep -q " bogus_nid " || fail "quirks show '$have': ^bogus_nid did not remove it"
    echo "$have"
}

stock_reads_a_block() {
    disk=$(disk_of "$CTRL_NULL" 1) || fail "no disk under $CTRL_NULL"
    dd if="/dev/$disk" of=/dev/null bs=4096 count=1 iflag=direct 2>&1
}

# expect_refusal WHAT: nvme-bind must fail, name the reason, and leave the binding alone.
# Prints nothing on success; the caller undoes its setup before judging.
try_to_take() {
    out=$(nvme-bind "$CTRL_FILE" nvme_adaptive 2>&1) && { echo "nvme-bind took a device with $1: $out"; return 1; }
    echo "$out" | grep -q "$1" || { echo "refusal does not mention '$1': $out"; return 1; }
    [ "$(bound_driver "$CTRL_FILE")" = nvme ] || { echo "binding changed despite the refusal"; return 1; }
}

refuses_mounted() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    mke2fs -q "/dev/$disk" >/dev/null 2>&1 || fail "mke2fs failed"
    mount "/dev/$disk" /mnt || fail "mount failed"
    why=$(try_to_take "mounted filesystem")
    umount /mnt
    [ -z "$why" ] || fail "$why"
}

refuses_open() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    sleep 600 <"/dev/$disk" &
    holder=$!
    why=$(try_to_take "open by pid $holder")
    kill $holder
    wait $holder 2>/dev/null
    [ -z "$why" ] || fail "$why"
}

refuses_swap() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk"
    mkswap "/dev/$disk" >/dev/null 2>&1 || fail "mkswap failed"
    swapon "/dev/$disk" || fail "swapon failed"
    why=$(try_to_take "active swap")
    swapoff "/dev/$disk"
    [ -z "$why" ] || fail "$why"
}

bad_usage() {
    # No arguments lists the controllers, each with its driver.
    out=$(nvme-bind 2>&1) || fail "no arguments: exit status $? (it lists the controllers)"
    for c in "$CTRL_NULL" "$CTRL_FILE" "$CTRL_MULTI" "$CTRL_SLOW"; do
        echo "$out" | grep -q -- "$c" || fail "the list misses $c: $out"
    done
    nvme-bind "$CTRL_NULL" extra argument >/dev/null 2>&1; [ $? = 2 ] || fail "three arguments: exit status not 2"
    nvme-bind "$CTRL_NULL" sata >/dev/null 2>&1; [ $? = 2 ] || fail "unknown driver: exit status not 2"
    nvme-bind 00:1f "$CTRL_NULL" >/dev/null 2>&1; [ $? = 2 ] || fail "bad address: exit status not 2"
    out=$(nvme-bind 0000:00:00.0 nvme 2>&1); [ $? = 1 ] || fail "non-NVMe device accepted"
    echo "$out" | grep -q "not an NVMe controller" || fail "non-NVMe refusal unclear: $out"
}

# Probe is asynchronous, as the stock driver's (PROBE_PREFER_ASYNCHRONOUS): a controller set to
# bind to nvme_adaptive (driver_override) when the module loads is probed by an async worker, so
# the admin commands of its probe (nvme_setup_cmd tracepoint) come from a kworker, none from
# insmod; insmod still returns only once that probe finished (module load waits for async
# probes), so the controller is bound right then. An explicit bind (nvme-bind writes
# drivers_probe) stays synchronous: the probe's first command comes from nvme-bind itself.
async_probe() {
    ev=nvme/nvme_setup_cmd
    [ -d "$TRACING/events/$ev" ] || fail "no $ev tracepoint in this kernel"
    nvme-bind "$CTRL_NULL" none >/dev/null || fail "releasing $CTRL_NULL failed"
    unload_adaptive || fail "rmmod failed"
    echo nvme_adaptive >"/sys/bus/pci/devices/$CTRL_NULL/driver_override" || fail "cannot set driver_override"
    trace_start $ev "qid == 0"
    load_adaptive
    rc=$? now=$(bound_driver "$CTRL_NULL")
    trace_stop $ev
    # "  kworker/u8:1-57  [000] ..... 1.234: nvme_setup_cmd: nvme0: qid=0, ...": the task.
    tasks=$(awk '/nvme_setup_cmd:/ { sub(/-[0-9]+$/, "", $1); print $1 }' $TRACING/trace | sort | uniq -c | tr -s ' \n' ' ')
    [ $rc = 0 ] || fail "insmod failed"
    [ "$now" = nvme_adaptive ] || fail "$CTRL_NULL bound to $now right after insmod"
    echo "$tasks" | grep -q kworker || fail "no admin command from an async worker during insmod: $tasks"
    ! echo "$tasks" | grep -q insmod || fail "the probe ran in insmod: $tasks"
    nvme-bind "$CTRL_NULL" none >/dev/null || fail "releasing $CTRL_NULL failed"
    trace_start $ev "qid == 0"
    nvme-bind "$CTRL_NULL" nvme_adaptive >/dev/null
    rc=$?
    trace_stop $ev
    first=$(awk '/nvme_setup_cmd:/ { sub(/-[0-9]+$/, "", $1); print $1; exit }' $TRACING/trace)
    [ $rc = 0 ] || fail "nvme-bind failed"
    case "$first" in
        nvme-bind) ;;
        *) fail "the explicit bind's first admin command came from '$first', not nvme-bind" ;;
    esac
    nvme-bind "$CTRL_NULL" nvme >/dev/null || fail "back to stock failed"
    echo "insmod: $tasks; explicit bind: $first"
}

check insmod load_adaptive
check no-autobind no_device_taken
check no-modalias no_modalias
check stock-loads load_stock
check stock-view record_stock_view
check bind nvme-bind "$CTRL_NULL" nvme_adaptive
check bound-to-adaptive bound_to_adaptive
check view-matches-stock view_matches_stock
check dmi-quirk dmi_quirk
check unbind-to-stock nvme-bind "$CTRL_NULL" nvme
check rmmod unload_adaptive
check quirks-param quirks_param
check stock-reads-again stock_reads_a_block
check reload load_adaptive
check refuses-mounted refuses_mounted
check refuses-open refuses_open
check refuses-swap refuses_swap
check bad-usage bad_usage
check async-probe async_probe
