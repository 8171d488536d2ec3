#!/usr/bin/env python3
"""tools/ab_table.py — tools/device_ab.sh's log as one row per grid point: SDPA flash and each
variant's own milliseconds (the best of the repetitions) and its ratio to variant A.

  python3 tools/ab_table.py ab.txt
"""
import collections
import re
import sys


def main(path):
    ms = collections.defaultdict(lambda: collections.defaultdict(list))
    sdpa = collections.defaultdict(list)
    variant = None
    for line in open(path):
        m = re.match(r"=== variant (\S+) rep", line)
        if m:
            variant = m.group(1)
            continue
        if variant and line.startswith("| "):
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            key = (c[3], int(c[0]), "causal" if c[2] == "1" else "full", int(c[1]))
            ms[key][variant].append(float(c[6]))
            sdpa[key].append(float(c[4]))
    variants = sorted({v for k in ms for v in ms[k]}, key=lambda v: (v != "A", v))
    print("| pass | hdim | mask | seqlen | SDPA flash ms | " + " | ".join(f"{v} ms" for v in variants) + " |")
    print("|---" * (5 + len(variants)) + "|")
    for key in sorted(ms):
        a = min(ms[key]["A"]) if ms[key].get("A") else None
        cells = []
        for v in variants:
            if not ms[key].get(v):
                cells.append("–")
                continue
            best = min(ms[key][v])
            cells.append(f"{best:.3f}" + (f" ({best / a:.3f})" if a and v != "A" else ""))
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {min(sdpa[key]):.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
