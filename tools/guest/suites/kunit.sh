# The module's KUnit suites (CMB layout, command encoding, HMB sizing, interrupt sets, register
# decoding).
# KUnit is built into the test kernel, so the suites run when the module loads; each case is
# reported here: "ok" PASS, "ok ... # SKIP" SKIP (which fails a debug-kernel run unless
# allowed), "not ok" FAIL. The suites the module registers (the KUnit debugfs entries its insmod
# adds) must be exactly these:
KUNIT_SUITES="nvme_adaptive_cmb nvme_adaptive_cmd nvme_adaptive_hmb nvme_adaptive_pci nvme_adaptive_regs"
KUNIT=/sys/kernel/debug/kunit

kunit_dirs() {
    ls "$KUNIT" 2>/dev/null | sort
}

fresh_load() {
    for d in "$CTRL_NULL" "$CTRL_FILE" "$CTRL_MULTI"; do
        [ "$(bound_driver "$d")" = nvme_adaptive ] && { nvme-bind "$d" none >/dev/null || return 1; }
    done
    unload_adaptive || fail "rmmod failed"
    kunit_dirs >/tmp/kunit.before
    load_adaptive || fail "insmod failed"
    kunit_dirs | comm -13 /tmp/kunit.before - >/tmp/kunit.module
    echo "module suites: $(tr '\n' ' ' </tmp/kunit.module)"
}

# The suites the module registered are the ones listed above (none missing, none unlisted).
suites_match() {
    got=$(tr '\n' ' ' </tmp/kunit.module | sed 's/ $//')
    want=$(printf '%s\n' $KUNIT_SUITES | sort | tr '\n' ' ' | sed 's/ $//')
    [ "$got" = "$want" ] || fail "the module registered KUnit suites [$got], expected [$want] (update KUNIT_SUITES in kunit.sh if a suite was added)"
    echo "$want"
}

check load-for-kunit fresh_load
check suites suites_match
for suite in $KUNIT_SUITES; do
    results=$KUNIT/$suite/results
    if [ ! -f "$results" ]; then
        result FAIL "$suite" "no KUnit results in $results"
        continue
    fi
    cases=0
    while read -r status n name rest; do
        case "$status $n" in
            "ok "[0-9]*)
                [ "$name" != "$suite" ] || continue
                cases=$((cases + 1))
                case "$rest" in
                    *"# SKIP"*) result SKIP "$suite.$name" "${rest#*# SKIP}" ;;
                    *) result PASS "$suite.$name" ;;
                esac ;;
            "not ok")
                set -- $rest
                [ "$1" != "$suite" ] || continue
                cases=$((cases + 1))
                result FAIL "$suite.$1" "$(grep -B3 "not ok.* $1\$" "$results" | head -3 | tr '\n' ' ')" ;;
        esac
    done <"$results"
    # The suite's own line: "ok" only if every case passed or skipped.
    if grep -qE "^not ok [0-9]+ $suite( |\$)" "$results"; then
        result FAIL "$suite" "suite reported not ok"
    elif [ "$cases" = 0 ]; then
        result FAIL "$suite" "no test case results in $results"
    fi
done
