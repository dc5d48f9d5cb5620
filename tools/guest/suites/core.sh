# nvme-core on our controllers: every stock tool and feature works through nvme_adaptive as it
# does through the stock driver, on the same controller: nvme-cli's admin commands and logs,
# sysfs identity, hwmon, Format NVM, namespace attachment through asynchronous events, reset
# under I/O, io_uring passthrough, protection information, and bad passthrough input.

# The generic character device (/dev/ngXnY) of namespace $2 through the controller at PCI
# address $1 (its path, not a multipath head's).
ng_of() {
    for g in /sys/class/nvme-generic/ng*n"$2"; do
        case "$(readlink -f "$g")" in
            */"$1"/*) echo "/dev/$(basename "$g")"; return 0 ;;
        esac
    done
    return 1
}

# Identify Controller as nvme-cli prints it, without what changes between two bindings of one
# controller (its controller number in the output header).
id_ctrl() {
    nvme id-ctrl "/dev/$(ctrl_of "$1")" -o json
}

# What nvme-cli reads through a driver, for one controller: Identify Controller and Namespace,
# the firmware log, features, the SMART fields that do not count I/O, a raw log page.
collect() {
    c=/dev/$(ctrl_of "$1")
    nvme id-ctrl "$c" -o json &&
        nvme id-ns "$c" -n 1 -o json &&
        nvme fw-log "$c" -o json &&
        nvme get-feature "$c" -f 7 -H &&
        nvme get-feature "$c" -f 4 -H &&
        nvme get-feature "$c" -f 8 -H &&
        nvme smart-log "$c" -o json | grep -E '"(critical_warning|avail_spare|spare_thresh|percent_used|endurance_grp_critical_warning_summary|temperature)"' &&
        nvme get-log "$c" --log-id=3 --log-len=512 -b | od -An -tx1
}

same_answers_as_stock() {
    to_stock "$CTRL_FILE" || fail "bind to stock failed"
    collect "$CTRL_FILE" >/tmp/stock.out 2>&1 || fail "nvme-cli through stock failed: $(tail -n 2 /tmp/stock.out)"
    to_adaptive "$CTRL_FILE" || fail "bind to adaptive failed"
    collect "$CTRL_FILE" >/tmp/ours.out 2>&1 || fail "nvme-cli through ours failed: $(tail -n 2 /tmp/ours.out)"
    diff /tmp/stock.out /tmp/ours.out >/tmp/answers.diff || fail "answers differ: $(head -n 6 /tmp/answers.diff | tr '\n' ' ')"
    echo "$(wc -l </tmp/ours.out) lines of nvme-cli output identical"
}

listed_by_nvme_cli() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $CTRL_FILE"
    out=$(nvme list -o json) || fail "nvme list failed"
    echo "$out" | grep -q "/dev/$disk\"" || fail "nvme list does not show /dev/$disk: $(echo "$out" | head -c 300)"
    echo "$out" | grep -q '"nva-file' || fail "nvme list does not show the serial nva-file"
    lsblk -dno MODEL,SERIAL "/dev/$disk" | grep -q "QEMU NVMe Ctrl.*nva-file" ||
        fail "lsblk model/serial: $(lsblk -dno MODEL,SERIAL "/dev/$disk")"
    echo "/dev/$disk listed by nvme list and lsblk"
}

sysfs_identity() {
    c=$(ctrl_of "$CTRL_FILE")
    id=$(id_ctrl "$CTRL_FILE") || fail "id-ctrl failed"
    for f in model:mn serial:sn firmware_rev:fr; do
        got=$(sed 's/ *$//' "/sys/class/nvme/$c/${f%%:*}")
        want=$(echo "$id" | sed -n "s/.*\"${f#*:}\" *: *\"\\([^\"]*\\)\".*/\\1/p" | sed 's/ *$//')
        [ "$got" = "$want" ] || fail "sysfs ${f%%:*} '$got', Identify ${f#*:} '$want'"
    done
    [ "$(cat "/sys/class/nvme/$c/transport")" = pcie ] || fail "transport $(cat "/sys/class/nvme/$c/transport")"
    [ "$(cat "/sys/class/nvme/$c/address")" = "$CTRL_FILE" ] || fail "address $(cat "/sys/class/nvme/$c/address")"
    [ "$(cat "/sys/class/nvme/$c/state")" = live ] || fail "state $(cat "/sys/class/nvme/$c/state")"
    echo "model, serial, firmware, transport, address and state as expected"
}

hwmon_temperature() {
    c=$(ctrl_of "$CTRL_FILE")
    t=$(cat /sys/class/nvme/"$c"/hwmon*/temp1_input 2>/dev/null) || fail "no hwmon under $c"
    [ "$t" -gt 0 ] && [ "$t" -lt 100000 ] || fail "temperature $t millidegrees"
    # The SMART log is in kelvins; hwmon in millidegrees Celsius (0 C = 273.15 K).
    kelvin=$(nvme smart-log "/dev/$c" -o json | sed -n 's/.*"temperature" *: *\([0-9]*\).*/\1/p')
    [ "$t" = $((kelvin * 1000 - 273150)) ] || fail "hwmon says $t millidegrees, SMART log $kelvin K"
    sensors 2>/dev/null | grep -qi nvme || fail "sensors does not list the NVMe controller"
    echo "$((t / 1000)) C in hwmon, the SMART log and sensors"
}

set_feature_through_ours() {
    c=/dev/$(ctrl_of "$CTRL_FILE")
    # Temperature threshold (feature 4): set through ours, read back through ours and stock.
    old=$(nvme get-feature "$c" -f 4 | sed -n 's/.*Current value:\(0x[0-9a-f]*\).*/\1/p')
    [ -n "$old" ] || fail "cannot read feature 4"
    nvme set-feature "$c" -f 4 -V 0x150 >/dev/null || fail "set-feature failed"
    got=$(nvme get-feature "$c" -f 4 | sed -n 's/.*Current value:\(0x[0-9a-f]*\).*/\1/p')
    [ "$((got))" = $((0x150)) ] || fail "feature 4 reads $got after setting 0x150"
    to_stock "$CTRL_FILE" || fail "bind to stock failed"
    c=/dev/$(ctrl_of "$CTRL_FILE")
    got=$(nvme get-feature "$c" -f 4 | sed -n 's/.*Current value:\(0x[0-9a-f]*\).*/\1/p')
    nvme set-feature "$c" -f 4 -V "$old" >/dev/null
    to_adaptive "$CTRL_FILE" || fail "bind back failed"
    [ "$((got))" = $((0x150)) ] || fail "the stock driver reads $got"
    echo "feature 4 set through ours, read back through both"
}

error_log_and_smart() {
    c=/dev/$(ctrl_of "$CTRL_FILE")
    nvme error-log "$c" -e 4 >/dev/null || fail "error-log failed"
    smartctl -a "$c" >/tmp/smartctl.out 2>&1
    # smartctl's exit status is a bit mask; 0 and 4 (some SMART command failed: QEMU has no
    # self-test log) are fine, anything in the low two bits is not.
    [ $(($? & 3)) = 0 ] || fail "smartctl failed: $(tail -n 3 /tmp/smartctl.out)"
    grep -q "QEMU NVMe Ctrl" /tmp/smartctl.out || fail "smartctl does not show the model"
    grep -q "nva-file" /tmp/smartctl.out || fail "smartctl does not show the serial"
    echo "error-log and smartctl work"
}

by_id_names() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $CTRL_FILE"
    start_udev || fail "udevd did not start"
    # The disk was there before udevd: replay its add event.
    udevadm trigger --action=add "/sys/block/$disk" && udevadm settle --timeout=60
    link=$(ls -l /dev/disk/by-id/ 2>/dev/null | grep -E "nvme-.*nva-file.* -> ../../$disk$" | head -n 1)
    info=$(udevadm info --query=property "/dev/$disk" 2>&1 | grep -E "ID_SERIAL|ID_MODEL|DEVLINKS" | tr '\n' ' ')
    stop_udev || fail "udevd is still running after it was killed"
    [ -n "$link" ] || fail "no /dev/disk/by-id name for $disk (udev: $info; /dev/disk: $(ls /dev/disk 2>&1))"
    echo "$link" | awk '{ print $(NF - 2) }'
}

# Starts fio writing one pattern everywhere on the file-backed controller's disk and verifying
# it (in the background: $pid), and waits until it has I/O in flight.
start_verify() {
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $CTRL_FILE"
    timeout -s KILL 600 fio --name=v --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite --bs=4k \
        --iodepth=32 --size=64m --verify=crc32c --do_verify=1 --verify_fatal=1 \
        --output-format=terse --terse-version=3 >/tmp/reset-fio.out 2>&1 &
    pid=$!
    wait_for 60 has_inflight "$disk" || { kill $pid; fail "fio never had I/O in flight"; }
}

# Waits for start_verify's fio, across what $1 names: no I/O error, no data lost.
end_verify() {
    wait_verify $pid /tmp/reset-fio.out "$1"
}

# The controller is reset twice under verified writes.
reset_under_verify() {
    c=$(ctrl_of "$CTRL_FILE")
    start_verify
    setups=$(dmesg_count "$c: .*default/read/poll queues")
    for i in 1 2; do
        echo 1 >"/sys/class/nvme/$c/reset_controller" || { kill $pid; fail "reset $i refused"; }
        wait_for 60 sh -c "[ \$(cat /sys/class/nvme/$c/state) = live ]" || { kill $pid; fail "not live after reset $i"; }
    done
    end_verify resets
    setups=$(($(dmesg_count "$c: .*default/read/poll queues") - setups))
    [ "$setups" -ge 2 ] || fail "$setups queue setups logged for 2 resets"
    echo "2 resets under verify, $setups queue setups"
}

# A function-level reset through sysfs under verified writes returns once the controller is
# live again, as with the stock driver (pci.c's reset_done flushes the reset work it queued).
flr_under_verify() {
    c=$(ctrl_of "$CTRL_FILE")
    start_verify
    for i in 1 2 3; do
        echo 1 >"/sys/bus/pci/devices/$CTRL_FILE/reset" || { kill $pid; fail "function reset $i refused"; }
        state=$(cat "/sys/class/nvme/$c/state")
        [ "$state" = live ] || { kill $pid; fail "controller $state right after function reset $i"; }
    done
    end_verify "function resets"
    echo "3 function resets under verify, live after each"
}

# One system suspend and resume: s2idle through pm_test, which suspends the devices, waits
# 5 s and resumes them (the guest has no wake source).
suspend_cycle() {
    echo devices >/sys/power/pm_test || { echo "no /sys/power/pm_test (CONFIG_PM_DEBUG)"; return 1; }
    echo freeze >/sys/power/state
    rc=$?
    echo none >/sys/power/pm_test
    [ $rc = 0 ] || { echo "the suspend failed: $(dmesg | tail -n 3 | tr '\n' ' ')"; return 1; }
}

# A suspend and resume under verified writes: no write lost, the controller live again.
suspend_under_verify() {
    c=$(ctrl_of "$CTRL_FILE")
    start_verify
    suspend_cycle || { kill $pid; fail "suspend and resume under verify"; }
    wait_for 60 ctrl_live "$c" || { kill $pid; fail "controller $(cat "/sys/class/nvme/$c/state") after the resume"; }
    end_verify "a suspend and resume"
    echo "suspended and resumed under verify, $c live"
}

# The same while the slow controller's queues poll (FORCE_POLLING under verified writes): the
# suspend ends the episodes in flight, and after the resume the queues poll again.
more_episodes() { [ "$(stat_sum "$1" episodes)" -gt "$2" ]; }

suspend_while_polling() {
    to_adaptive "$CTRL_SLOW" || fail "bind of the slow controller failed"
    slow
    saved=$(for kv in $FORCE_POLLING; do echo "${kv%%=*}=$(cat "$PARAMS/${kv%%=*}")"; done)
    set_params $FORCE_POLLING
    timeout -s KILL 600 fio --name=sp --filename="/dev/$SLOW_DISK" --direct=1 --ioengine=io_uring \
        --rw=randwrite --bs=4k --iodepth=24 --size=16m --io_size=4m --verify=crc32c --verify_backlog=64 \
        --verify_fatal=1 --output-format=terse --terse-version=3 >/tmp/suspend-fio.out 2>&1 &
    pid=$!
    e0=$(stat_sum "$SLOW_CTRL" episodes)
    wait_for 120 more_episodes "$SLOW_CTRL" "$e0" ||
        { kill $pid; set_params $saved; fail "the slow controller never polled"; }
    if ! suspend_cycle; then
        kill $pid
        set_params $saved
        fail "suspend and resume while polling"
    fi
    e1=$(stat_sum "$SLOW_CTRL" episodes)
    wait $pid
    rc=$?
    e2=$(stat_sum "$SLOW_CTRL" episodes)
    set_params $saved
    [ $rc = 0 ] || fail "fio failed across the suspend: $(tail -n 2 /tmp/suspend-fio.out)"
    bad=$(fio_errors /tmp/suspend-fio.out)
    [ -z "$bad" ] || fail "fio error across the suspend: $bad"
    ctrl_live "$SLOW_CTRL" || fail "$SLOW_CTRL $(cat "/sys/class/nvme/$SLOW_CTRL/state") after the resume"
    [ "$e2" -gt "$e1" ] || fail "no poll episode after the resume ($e1 before it, $e2 at the end)"
    echo "suspended while polling ($((e1 - e0)) episodes before, $((e2 - e1)) after), writes verified"
}

# Format NVM through nvme-cli changes the LBA format, and the disk follows.
format_follows() {
    c=/dev/$(ctrl_of "$CTRL_MULTI")
    disk=$(disk_of "$CTRL_MULTI" 5) || fail "no disk for namespace 5"
    [ "$(cat /sys/block/$disk/queue/logical_block_size)" = 512 ] || fail "namespace 5 does not start at 512 B"
    # LBA format 4 of QEMU's controller: 4096-byte blocks, no metadata.
    limit 120 "format" nvme format "$c" -n 5 --lbaf=4 --force >/dev/null || fail "format to 4 KiB failed"
    wait_for 30 sh -c "[ \$(cat /sys/block/$disk/queue/logical_block_size) = 4096 ]" ||
        fail "logical block size $(cat /sys/block/$disk/queue/logical_block_size) after the format"
    run_fio --name=after-format --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=8 --size=8m --verify=crc32c --do_verify=1 || return 1
    limit 120 "format back" nvme format "$c" -n 5 --lbaf=0 --force >/dev/null || fail "format back failed"
    wait_for 30 sh -c "[ \$(cat /sys/block/$disk/queue/logical_block_size) = 512 ]" || fail "not back at 512 B"
    echo "512 B -> 4096 B -> 512 B, I/O verified in between"
}

# The path devices (nvmeXcYnZ) of namespace $2 on the controller named $1: in an NVM subsystem
# nvme-core shows each namespace as a multipath head disk (nvmeXnZ) with one path per
# controller.
paths_of() {
    ls "/sys/class/nvme/$1" | grep -E "^nvme[0-9]+c[0-9]+n$2\$"
}

# Namespace attachment in an emulated NVM subsystem: attach-ns makes the controller send a
# Namespace Attribute Changed event, nvme-core rescans, the disk appears; detach-ns removes it.
attach_detach() {
    to_adaptive "$CTRL_SUBSYS" || fail "bind failed"
    c=$(ctrl_of "$CTRL_SUBSYS")
    [ -n "$(paths_of "$c" 1)" ] || fail "namespace 1 is not attached"
    [ -z "$(paths_of "$c" 2)" ] || fail "namespace 2 is attached before the test"
    cntlid=$(nvme id-ctrl "/dev/$c" -o json | sed -n 's/.*"cntlid" *: *\([0-9]*\).*/\1/p')
    aen=$(dmesg_count "$c: rescanning namespaces")
    nvme attach-ns "/dev/$c" -n 2 -c "$cntlid" >/dev/null || fail "attach-ns failed"
    wait_for 60 sh -c "ls /sys/class/nvme/$c | grep -qE '^nvme[0-9]+c[0-9]+n2\$'" ||
        fail "no path for namespace 2 after attach"
    [ "$(dmesg_count "$c: rescanning namespaces")" -gt "$aen" ] || fail "no rescan through an asynchronous event"
    path=$(paths_of "$c" 2)
    head=$(echo "$path" | sed 's/c[0-9]*n/n/')
    [ -b "/dev/$head" ] || fail "no disk /dev/$head for the path $path"
    run_fio --name=attached --filename="/dev/$head" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bs=4k --iodepth=8 --size=4m --verify=crc32c --do_verify=1 || return 1
    nvme detach-ns "/dev/$c" -n 2 -c "$cntlid" >/dev/null || fail "detach-ns failed"
    wait_for 60 sh -c "! ls /sys/class/nvme/$c | grep -qE '^nvme[0-9]+c[0-9]+n2\$'" ||
        fail "namespace 2 still has a path after detach"
    wait_for 60 sh -c "[ ! -e /sys/block/$head ]" || fail "the disk $head is still there after detach"
    [ -n "$(paths_of "$c" 1)" ] || fail "namespace 1 lost its path"
    echo "namespace 2 attached (event, rescan, $head), verified, detached"
}

# fio's io_uring passthrough on the namespace's character device, on interrupts and polled.
uring_passthrough() {
    ng=$(ng_of "$CTRL_FILE" 1) || fail "no generic character device for $CTRL_FILE namespace 1"
    [ -c "$ng" ] || fail "no $ng"
    run_fio --name=ng --filename="$ng" --ioengine=io_uring_cmd --cmd_type=nvme --rw=randwrite \
        --bs=4k --iodepth=16 --size=16m --verify=crc32c --do_verify=1 --verify_fatal=1 || return 1
    echo "$ng verified on interrupts"
}

uring_passthrough_polled() {
    # Polled passthrough needs a poll queue: loaded with poll_queues=1 for this check.
    c=$(ctrl_of "$CTRL_FILE")
    ng=$(ng_of "$CTRL_FILE" 1) || fail "no generic character device for $CTRL_FILE namespace 1"
    polled=$(stat_sum "$c" reaped_blk_poll)
    run_fio --name=ngpoll --filename="$ng" --ioengine=io_uring_cmd --cmd_type=nvme --hipri=1 \
        --rw=randwrite --bs=4k --iodepth=8 --size=8m --verify=crc32c --do_verify=1 --verify_fatal=1 || return 1
    now=$(stat_sum "$c" reaped_blk_poll)
    [ "$now" -gt "$polled" ] || fail "nothing reaped by blk-mq polling"
    echo "$((now - polled)) completions reaped by polling"
}

reload_with_poll_queue() {
    for d in "$CTRL_FILE" "$CTRL_MULTI" "$CTRL_SUBSYS"; do
        [ "$(bound_driver "$d")" = nvme_adaptive ] && { nvme-bind "$d" none >/dev/null || fail "cannot release $d"; }
    done
    unload_adaptive || fail "rmmod failed"
    load_adaptive poll_queues=1 || fail "insmod poll_queues=1 failed"
    to_adaptive "$CTRL_FILE" && to_adaptive "$CTRL_MULTI" || fail "rebind failed"
}

# A namespace with 8 bytes of metadata carrying protection information (type 1): the block layer
# generates and verifies the tags; data written and read back with integrity checking on.
protection_information() {
    disk=$(disk_of "$CTRL_MULTI" 4) || fail "no disk for namespace 4"
    fmt=$(cat "/sys/block/$disk/integrity/format")
    [ "$fmt" = T10-DIF-TYPE1-CRC ] || fail "integrity format '$fmt'"
    [ "$(cat "/sys/block/$disk/integrity/read_verify")" = 1 ] || fail "read verification is off"
    [ "$(cat "/sys/block/$disk/integrity/write_generate")" = 1 ] || fail "write generation is off"
    run_fio --name=pi --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite \
        --bsrange=512-128k --blockalign=512 --iodepth=16 --size=16m --verify=crc32c --do_verify=1 \
        --verify_fatal=1 || return 1
    echo "T10-DIF type 1 namespace verified"
}

# Malformed passthrough gets errors and breaks nothing; admin commands need privilege.
bad_passthrough() {
    c=$(ctrl_of "$CTRL_FILE")
    disk=$(disk_of "$CTRL_FILE" 1) || fail "no disk under $CTRL_FILE"
    ng=$(ng_of "$CTRL_FILE" 1) || fail "no generic character device for $CTRL_FILE namespace 1"
    passthru-abuse "/dev/$c" >/tmp/abuse.out 2>&1 || fail "$(grep FAIL /tmp/abuse.out | head -n 3 | tr '\n' ' ')"
    passthru-abuse "$ng" >>/tmp/abuse.out 2>&1 || fail "$(grep FAIL /tmp/abuse.out | head -n 3 | tr '\n' ' ')"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups nvme id-ctrl "/dev/$c" 2>&1) &&
        fail "id-ctrl ran without privilege"
    echo "$out" | grep -qiE "denied|not permitted" || fail "unprivileged id-ctrl: $out"
    # The controller still answers and the disk still works.
    nvme id-ctrl "/dev/$c" >/dev/null || fail "controller broken after the abuse"
    dd if="/dev/$disk" of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null || fail "disk broken after the abuse"
    echo "$(grep -c '^ok' /tmp/abuse.out) malformed commands refused; unprivileged admin refused"
}

# SR-IOV through ours, as the stock driver offers it (pci_sriov_configure_simple), by the steps
# of QEMU's nvme.rst: the SR-IOV controller, bound to ours, gives up any flexible queues and
# interrupts it holds (Virtualization Management; QEMU's holds none at start), which a
# function-level reset through ours applies; sriov_numvfs=1 enables its virtual function, which
# gets 3 of each (an admin and two I/O queues) and goes online, binds to ours and passes
# verified I/O with a vector per queue with interrupts.
# sriov_numvfs=0 removes the function (ours lets go of it), and the physical function unbinds
# leaving nothing enabled.
sriov_vf_io() {
    pf=$CTRL_SRIOV
    dev=/sys/bus/pci/devices/$pf
    [ -e "$dev/sriov_numvfs" ] || fail "$pf has no sriov_numvfs (CONFIG_PCI_IOV, QEMU's sriov_max_vfs)"
    to_adaptive "$pf" || fail "bind failed"
    c=$(ctrl_of "$pf") || fail "no controller name for $pf"
    pfid=$(nvme id-ctrl "/dev/$c" -o json | jq -e .cntlid) || fail "no controller ID for $c"
    for rt in 0 1; do
        nvme virt-mgmt "/dev/$c" -c "$pfid" -r $rt -a 1 -n 0 >/dev/null || fail "$c kept its flexible resources of type $rt"
    done
    echo 1 >"$dev/reset" || fail "function reset refused"
    ctrl_live "$c" || fail "$c $(cat "/sys/class/nvme/$c/state") after the function reset"
    # Offline until it has resources: no driver may probe it before.
    echo 0 >"$dev/sriov_drivers_autoprobe"
    echo 1 >"$dev/sriov_numvfs" || fail "sriov_numvfs=1 refused: $(dmesg | tail -n 1)"
    vf=$(basename "$(readlink -f "$dev/virtfn0")") || fail "no virtfn0 under $pf"
    vfid=$(nvme list-secondary "/dev/$c" -o json | jq -e '."secondary-controllers"[0]."secondary-controller-identifier"') ||
        fail "no secondary controller listed: $(nvme list-secondary "/dev/$c")"
    for rt in 0 1; do
        nvme virt-mgmt "/dev/$c" -c "$vfid" -r $rt -a 8 -n 3 >/dev/null || fail "cannot give VF $vfid 3 resources of type $rt"
    done
    nvme virt-mgmt "/dev/$c" -c "$vfid" -r 0 -a 9 -n 0 >/dev/null || fail "cannot bring VF $vfid online"
    nvme-bind "$vf" nvme_adaptive >/dev/null || fail "cannot bind the VF $vf"
    wait_for 60 disk_of "$vf" 1 || fail "no disk on the VF $vf"
    disk=$(disk_of "$vf" 1)
    vc=$(ctrl_of "$vf" "$disk") || fail "no controller name for $vf"
    run_fio --name=vf --filename="/dev/$disk" --direct=1 --ioengine=io_uring --rw=randwrite --bs=4k \
        --iodepth=16 --size=16m --verify=crc32c --do_verify=1 --verify_fatal=1 || fail "verified I/O on the VF failed"
    # Its two I/O queues (poll queues among them, if the module was loaded with some), and a
    # vector for the admin queue and each one with interrupts.
    layout=$(dmesg | grep "$vc: .*default/read/poll queues" | tail -n 1 | sed 's|.*: \([0-9]*\)/\([0-9]*\)/\([0-9]*\) default.*|\1 \2 \3|')
    read -r d r p <<<"$layout"
    [ "$((d + r + p))" = 2 ] || fail "the VF has I/O queues $d/$r/$p, not two"
    vectors=$(grep -c "${vc}q[0-9]" /proc/interrupts)
    [ "$vectors" = $((1 + d + r)) ] || fail "the VF has $vectors vectors for $d/$r/$p queues"
    echo 0 >"$dev/sriov_numvfs" || fail "sriov_numvfs=0 refused"
    [ ! -e "/sys/bus/pci/devices/$vf" ] || fail "the VF $vf is still there"
    ! grep -q "${vc}q" /proc/interrupts || fail "the VF's interrupts are left"
    left=$(dmesg_count "SR-IOV enabled after remove")
    nvme-bind "$pf" none >/dev/null || fail "unbinding $pf failed"
    [ "$(dmesg_count "SR-IOV enabled after remove")" = "$left" ] || fail "unbind left SR-IOV enabled"
    echo "VF $vf ($vc) on ours: $d/$r/$p queues, $vectors vectors, verified I/O, removed with sriov_numvfs=0"
}

setup_core() {
    load_stock || fail "stock driver did not load"
    load_adaptive || fail "nvme_adaptive did not load"
    to_adaptive "$CTRL_FILE" && to_adaptive "$CTRL_MULTI" || fail "binding failed"
}

check setup setup_core
check listed-by-nvme-cli listed_by_nvme_cli
check same-answers-as-stock same_answers_as_stock
check set-feature set_feature_through_ours
check sysfs-identity sysfs_identity
check hwmon-temperature hwmon_temperature
check error-log-and-smartctl error_log_and_smart
check by-id-names by_id_names
check reset-under-verify reset_under_verify
check flr-under-verify flr_under_verify
check suspend-under-verify suspend_under_verify
check suspend-while-polling suspend_while_polling
check format-follows format_follows
check attach-detach attach_detach
check uring-passthrough uring_passthrough
check reload-with-poll-queue reload_with_poll_queue
check uring-passthrough-polled uring_passthrough_polled
check protection-information protection_information
check bad-passthrough bad_passthrough
check sriov-vf-io sriov_vf_io
