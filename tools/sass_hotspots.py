#!/usr/bin/env python3
"""tools/sass_hotspots.py — read ncu's per-SASS-line CSV (`ncu --import r.ncu-rep --page source --csv
--print-source sass`, written by tools/gpu_check.sh's `sass` phase) and print where a kernel spends
its issue slots and stall samples: totals per opcode, then the hottest lines.

  python3 tools/sass_hotspots.py sass_backward.csv [--top 40]
"""
import argparse
import collections
import csv
import re


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    lines = open(a.csv, errors="replace").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"') and "Source" in l)
    rows = list(csv.DictReader(lines[start:]))
    cols = rows[0].keys()
    src = next(c for c in cols if c.strip() == "Source")
    addr = next((c for c in cols if "Address" in c), None)
    execd = next((c for c in cols if c.startswith("Instructions Executed")), None)
    stall = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
    pred = next((c for c in cols if "Predicated-On Thread" in c), None)
    print("columns:", ", ".join(cols))
    per_op = collections.Counter()
    per_op_stall = collections.Counter()
    total_e = total_s = 0.0
    for r in rows:
        text = r[src].strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split(" ")[0].split(".")[0]
        e, s = num(r.get(execd, 0)), num(r.get(stall, 0))
        per_op[op] += e
        per_op_stall[op] += s
        total_e += e
        total_s += s
    print(f"\ninstructions executed {total_e:,.0f}, stall samples {total_s:,.0f}")
    print(f"{'opcode':10} {'executed':>14} {'share':>6} {'stall samples':>14} {'share':>6}")
    for op, e in per_op.most_common(30):
        print(f"{op:10} {e:14,.0f} {e / max(total_e, 1):6.1%} {per_op_stall[op]:14,.0f} "
              f"{per_op_stall[op] / max(total_s, 1):6.1%}")
    print(f"\nhottest lines by stall samples (top {a.top}):")
    hot = sorted(rows, key=lambda r: -num(r.get(stall, 0)))[: a.top]
    for r in hot:
        print(f"{r.get(addr, ''):>8} {num(r.get(stall, 0)):10,.0f} {num(r.get(execd, 0)):12,.0f} "
              f"{r.get(pred, '') if pred else '':>10}  {r[src].strip()[:90]}")


if __name__ == "__main__":
    main()
