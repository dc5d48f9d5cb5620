# Shared settings for the tools/ scripts. Sourced, never run.
# shellcheck shell=bash

# Where everything that is not the repository lives: the trixie root, the kernel trees, run logs.
NVA_CACHE=${NVME_ADAPTIVE_CACHE:-/var/cache/nvme-adaptive}
NVA_ROOT=$NVA_CACHE/root
NVA_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NVA_SUITE=trixie
NVA_MIRROR=${NVME_ADAPTIVE_MIRROR:-http://deb.debian.org/debian}
NVA_KVER=7.3
NVA_LLVM=-19
# Each checkout builds its module in its own directory under the cache (relative to it): a test
# run in one clone must not pick up the module another clone just built.
NVA_MODBUILD=modbuild/$(printf '%s' "$NVA_REPO" | cksum | cut -d' ' -f1)

die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }
say() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }

# hold_lock FILE: takes an exclusive lock on FILE for the rest of this process (fd 9), waiting,
# and saying so, while another process holds it: two tools started together must not build into
# the same cache directory at once.
hold_lock() {
    exec 9>"$1"
    if ! flock -n 9; then
        say "$1 is held by another run; waiting for it"
        flock 9
    fi
}

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (it uses chroot, mounts and /dev/kvm); try: sudo $0 $*"
}

# Run a command inside the toolchain root, with /proc, /dev and the repository bind-mounted.
# The mounts live in a private mount namespace, so nothing leaks if we are killed.
in_root() {
    unshare -m --propagation private bash -c '
        set -e
        r=$1; repo=$2; shift 2
        mount -t proc proc "$r/proc"
        mount --rbind /dev "$r/dev"
        mount -t tmpfs tmpfs "$r/tmp"
        mkdir -p "$r/repo" "$r/cache"
        mount --bind "$repo" "$r/repo"
        mount --bind "$(dirname "$r")" "$r/cache"
        cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
        exec chroot "$r" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            TERM="${TERM:-dumb}" "$@"
    ' in_root "$NVA_ROOT" "$NVA_REPO" "$@"
}
