"""Checks adaptive-polling parameter settings ("name=value ...") against the ranges the module
itself enforces, read from policy.rs's PARAM_SPECS, so a bad --params fails before anything runs."""

import os
import re

POLICY_RS = os.path.join(os.path.dirname(__file__), "..", "..", "policy.rs")

SPEC = re.compile(
    r'ParamSpec\s*\{\s*name:\s*"(?P<name>\w+)",.*?min:\s*(?P<min>[\d_]+),\s*max:\s*(?P<max>[\d_]+),',
    re.S,
)


def specs(text=None):
    """{name: (min, max)} of every tunable in policy.rs."""
    if text is None:
        with open(POLICY_RS) as f:
            text = f.read()
    out = {m["name"]: (int(m["min"].replace("_", "")), int(m["max"].replace("_", ""))) for m in SPEC.finditer(text)}
    if not out:
        raise ValueError("no ParamSpec found in policy.rs")
    return out


def parse(setting, known):
    """ "a=1 b=2" -> [("a", 1), ("b", 2)]; ValueError naming the bad item and the valid range."""
    out = []
    for item in setting.split():
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise ValueError("'%s' is not name=value" % item)
        if name not in known:
            raise ValueError("unknown parameter '%s' (known: %s)" % (name, ", ".join(sorted(known))))
        lo, hi = known[name]
        if not re.fullmatch(r"\d+", value) or not lo <= int(value) <= hi:
            raise ValueError("%s=%s is out of range: %s takes an integer in %d..%d" % (name, value, name, lo, hi))
        out.append((name, int(value)))
    return out
