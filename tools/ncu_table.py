#!/usr/bin/env python3
"""tools/ncu_table.py — ncu's text reports (`ncu --metrics ...`, default page) as one markdown table
per file: a column per kernel launch, a row per metric, so flashlab's kernels and a peer's read side
by side. Stall reasons (smsp__average_warps_issue_stalled_*_per_issue_active.ratio) are shown as
"stall: <reason>" and only where some kernel spends >= 0.05 cycles per issued instruction on them.

  python3 tools/ncu_table.py report.txt [report2.txt ...]
"""
import re
import sys

HEADER = re.compile(r"^  (\S.*?)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Context")
METRIC = re.compile(r"^    (\S+)\s+(\S+)?\s+([-\d.,]+|n/a)\s*$")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")


def short_name(sig):
    name = re.sub(r"\(.*$", "", sig.split(" ", 1)[-1])  # drop the return type and the arguments
    m = re.match(r"(?:[\w:]*::)?(\w+)<(.*)>$", name)
    if not m:
        return name[-40:]
    args = re.sub(r"cutlass::|flashlab::sm80::|pytorch_flash::|\s", "", m.group(2))
    return f"{m.group(1)}<{args[:60]}>"


def parse(path):
    kernels = []
    for line in open(path, errors="replace"):
        h = HEADER.match(line)
        if h:
            kernels.append((short_name(h.group(1)), {}))
            continue
        m = METRIC.match(line)
        if m and kernels and "__" in m.group(1):
            kernels[-1][1][m.group(1)] = (m.group(3), m.group(2) or "")
    return kernels


def table(path):
    kernels = parse(path)
    if not kernels:
        return f"### {path}\n\n(no kernel reports)\n"
    names = sorted({k for _, d in kernels for k in d})
    rows = []
    for n in names:
        vals = [d.get(n, ("", ""))[0] for _, d in kernels]
        s = STALL.match(n)
        if s:
            nums = [float(v.replace(",", "")) for v in vals if v and v != "n/a"]
            if not nums or max(nums) < 0.05:
                continue
            n = "stall: " + s.group(1)
        unit = next((d[n][1] for _, d in kernels if n in d), "")
        rows.append((n, unit, vals))
    rows.sort(key=lambda r: (r[0].startswith("stall"), r[0]))
    out = [f"### {path}", "", "| metric | unit | " + " | ".join(k for k, _ in kernels) + " |",
           "|---|---|" + "---|" * len(kernels)]
    out += [f"| {n} | {u} | " + " | ".join(vals) + " |" for n, u, vals in rows]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print("\n".join(table(p) for p in sys.argv[1:]))
