# The switch soak (tools/test soak, not in CI: 5 minutes on the debug kernel of a quiet host,
# more under load): fio write+verify passes on the slow controller while the parameters force
# the shortest episodes and backoffs, until its queues have switched modes 10,000 times; every
# block is read back and checked. CI runs a slice of it (reliability/switch-soak-slice).

setup_soak() {
    unload_adaptive
    load_adaptive || fail "insmod failed"
    to_adaptive "$CTRL_SLOW" || fail "bind failed"
    slow
}

# 5,000 episodes, each two switches (mask and poll, then unmask).
switch_soak() {
    slow || return 1
    verify_switches "$SLOW_DISK" "$SLOW_CTRL" 5000 7200
}

check setup setup_soak
check switches-10000 switch_soak
