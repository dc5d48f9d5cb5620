# Helpers for the guest test suites (busybox sh). Sourced by /guest/run.
# Every check reports one line "NVA-RESULT PASS|FAIL|SKIP suite/name [: detail]".

MODDIR=/lib/modules
NVA_KO=$MODDIR/nvme_adaptive.ko
RESULTS=/tmp/results

result() {
    # result PASS|FAIL|SKIP name [detail]
    line="NVA-RESULT $1 $SUITE/$2"
    [ -n "${3:-}" ] && line="$line : $3"
    echo "$line" >>"$RESULTS"
    echo "$line"
}

# check NAME COMMAND...: PASS when the command exits 0, FAIL with its last output lines otherwise.
check() {
    name=$1
    shift
    if out=$("$@" 2>&1); then
        result PASS "$name"
    else
        result FAIL "$name" "$(echo "$out" | tail -n 4 | tr '\n' ' ')"
    fi
}

# Fail with a message (for use inside check functions).
fail() {
    echo "$*" >&2
    return 1
}

# The test rig's controllers, at the fixed slots tools/vm gives them.
CTRL_NULL=0000:00:04.0   # null-co backend: fast, reads zeroes, drops writes
CTRL_FILE=0000:00:05.0   # raw file backend: data survives, for integrity checks
CTRL_MULTI=0000:00:06.0  # two namespaces: 512 B and 4 KiB logical blocks

load_stock() {
    grep -q '^nvme ' /proc/modules && return 0
    insmod "$MODDIR/nvme-core.ko" && insmod "$MODDIR/nvme.ko" "$@"
}

unload_stock() {
    grep -q '^nvme ' /proc/modules || return 0
    rmmod nvme && rmmod nvme_core
}

load_adaptive() {
    grep -q '^nvme_adaptive ' /proc/modules && return 0
    insmod "$NVA_KO" "$@"
}

unload_adaptive() {
    grep -q '^nvme_adaptive ' /proc/modules || return 0
    rmmod nvme_adaptive
}

# Driver currently bound to a PCI device, or "none".
bound_driver() {
    if [ -e "/sys/bus/pci/devices/$1/driver" ]; then
        basename "$(readlink "/sys/bus/pci/devices/$1/driver")"
    else
        echo none
    fi
}

# Block disks of a PCI device (names under /sys/block whose device path runs through it).
disks_of() {
    for b in /sys/block/*; do
        case "$(readlink -f "$b")" in
            */"$1"/*) basename "$b" ;;
        esac
    done
}

# Wait until COMMAND succeeds, polling every 0.1 s, at most SECONDS (for sysfs state to settle).
wait_for() {
    tries=$(($1 * 10))
    shift
    while ! "$@" >/dev/null 2>&1; do
        tries=$((tries - 1))
        [ "$tries" -gt 0 ] || return 1
        usleep 100000
    done
}
