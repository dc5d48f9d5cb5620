# Deployed as on a server: the modules installed under /lib/modules/RELEASE (as the kernel's
# packages and DKMS install them) so that modprobe resolves nvme_adaptive's dependency on
# nvme-core, and udev rules from tools/nvme-bind --persist that put a controller back on
# nvme_adaptive whenever it appears: hot-swapped, rescanned, at boot.

RELEASE=$(uname -r)

# The modules where modprobe looks: the kernel's own in kernel/, ours where DKMS puts it.
install_modules() {
    d=$MODDIR/$RELEASE
    mkdir -p "$d/kernel/drivers/nvme/host" "$d/updates/dkms" || return 1
    cp "$MODDIR/nvme-core.ko" "$MODDIR/nvme.ko" "$d/kernel/drivers/nvme/host/" || return 1
    cp "$NVA_KO" "$d/updates/dkms/" || return 1
    depmod -a "$RELEASE"
}

modprobe_loads_nvme_core() {
    unload_adaptive || fail "cannot unload nvme_adaptive"
    for m in nvme nvme_core; do
        if grep -q "^$m " /proc/modules; then
            rmmod "$m" || fail "cannot unload $m to start without it"
        fi
    done
    install_modules || fail "installing the modules under $MODDIR/$RELEASE failed"
    depends=$(modinfo -F depends nvme_adaptive) || fail "modinfo finds no installed nvme_adaptive"
    [ "$depends" = nvme-core ] || fail "modinfo nvme_adaptive shows depends \"$depends\", not nvme-core"
    modprobe nvme_adaptive || fail "modprobe nvme_adaptive failed"
    grep -q '^nvme_core ' /proc/modules || fail "nvme_adaptive is loaded without nvme-core"
    grep -q '^nvme_adaptive ' /proc/modules || fail "modprobe nvme_adaptive did not load it"
    echo "modprobe nvme_adaptive loaded nvme-core first (depends: $depends)"
}

# Takes controller $1 off the PCI bus and rescans: it appears again as after a hot-swap, a new
# device the drivers probe and udev hears about. Waits for udev to finish with it.
replug() {
    echo 1 >"/sys/bus/pci/devices/$1/remove" || fail "cannot remove $1"
    wait_for 30 test ! -e "/sys/bus/pci/devices/$1" || fail "$1 is still on the bus"
    echo 1 >/sys/bus/pci/rescan
    wait_for 30 test -e "/sys/bus/pci/devices/$1" || fail "$1 did not come back on a rescan"
    udevadm settle --timeout=120 || fail "udev did not settle"
}

driver_is() { [ "$(bound_driver "$1")" = "$2" ]; }
has_disks() { [ -n "$(disks_of "$1")" ]; }

# The controller is bound to $2 with its disks (drivers scan them asynchronously), and stays
# there once udev has handled the events of its start (nvme-core's "connected" comes after the
# scan is queued).
bound_with_disks() {
    wait_for 60 driver_is "$1" "$2" || fail "$1 came back on $(bound_driver "$1"), not $2"
    wait_for 60 has_disks "$1" || fail "$1 came back on $2 without its disks"
    udevadm settle --timeout=120 || fail "udev did not settle"
    driver_is "$1" "$2" || fail "$1 moved on to $(bound_driver "$1") from $2"
}

# persisted_binding PCI_ADDR|serial=SERIAL CONTROLLER: the controller, on the stock driver, is
# persisted onto nvme_adaptive (and moves now); replugged, it comes back on nvme_adaptive with
# its disks, though the stock driver is loaded and probes it first; unpersisted, it comes back
# on the stock driver.
persisted_binding() {
    c=$2
    start_udev || fail "udevd did not start"
    modprobe nvme || fail "modprobe nvme failed"
    # Its workers probe the disks nvme just added: nvme-bind refuses open disks.
    udevadm settle --timeout=120 || fail "udev did not settle"
    nvme-bind "$c" nvme >/dev/null || fail "cannot bind $c to nvme"
    nvme-bind --persist "$1" >/dev/null || fail "nvme-bind --persist $1 failed"
    [ "$(bound_driver "$c")" = nvme_adaptive ] || fail "--persist left $c on $(bound_driver "$c")"
    replug "$c"
    bound_with_disks "$c" nvme_adaptive
    disks=$(disks_of "$c" | xargs)
    nvme-bind --unpersist "$1" >/dev/null || fail "nvme-bind --unpersist $1 failed"
    replug "$c"
    bound_with_disks "$c" nvme
    nvme-bind "$c" none >/dev/null || fail "cannot release $c"
    echo "$1: replugged, back on nvme_adaptive with $disks; unpersisted, back on nvme"
}

# Stops udevd, and the stock driver the checks loaded (it took every free controller).
deploy_cleanup() {
    stop_udev || fail "udevd is still running after it was killed"
    [ ! -e /etc/udev/rules.d/70-nvme-adaptive.rules ] || fail "the rules are left after --unpersist"
    rmmod nvme || fail "cannot unload nvme"
}

check modprobe-loads-nvme-core modprobe_loads_nvme_core
check udev-rebinds-by-address persisted_binding "$CTRL_LAT" "$CTRL_LAT"
check udev-rebinds-by-serial persisted_binding serial=nva-onevec "$CTRL_ONEVEC"
check cleanup deploy_cleanup
