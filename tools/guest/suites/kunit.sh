# The module's KUnit suites (command encoding, PRP construction, status mapping). KUnit is built
# into the test kernel, so the suites run when the module loads; each case is reported here.

fresh_load() {
    for d in "$CTRL_NULL" "$CTRL_FILE" "$CTRL_MULTI"; do
        [ "$(bound_driver "$d")" = nvme_adaptive ] && { nvme-bind "$d" none >/dev/null || return 1; }
    done
    unload_adaptive && load_adaptive
}

check load-for-kunit fresh_load
found=0
for results in /sys/kernel/debug/kunit/nvme_adaptive_*/results; do
    [ -f "$results" ] || continue
    suite=$(basename "$(dirname "$results")")
    while read -r status n name rest; do
        case "$status $n" in
            "ok "[0-9]*) [ "$name" = "$suite" ] || { found=$((found + 1)); result PASS "$suite.$name"; } ;;
            "not ok") set -- $rest; result FAIL "$suite.$1" "$(grep -B3 "not ok.* $1\$" "$results" | head -3 | tr '\n' ' ')"; found=$((found + 1)) ;;
        esac
    done <"$results"
done
[ "$found" -gt 0 ] || result FAIL suites "no KUnit results for nvme_adaptive in /sys/kernel/debug/kunit"
