#!/usr/bin/env python3
"""tools/grid_ratios.py RESULTS.{jsonl,csv} — a grid of python -m flashlab.bench (one pass: fwd or bwd) as the
markdown table of docs/perf.md ("Hopper forward", "Hopper backward"): flashlab:auto beside cuda_sm80, SDPA flash,
SDPA cuDNN and FA4 (where measured), with the ratios to cuDNN and FA4 per point and their medians."""
import csv, json, statistics, sys

path = sys.argv[1]
if path.endswith(".csv"):
    rows = [dict(r, hdim=int(r["hdim"]), causal=r["causal"] == "True", seqlen=int(r["seqlen"]),
                 tflops=float(r["tflops"]) if r["tflops"] else None) for r in csv.DictReader(open(path))]
else:
    rows = [json.loads(l) for l in open(path)]
pts = {}
for r in rows:
    pts.setdefault((r['hdim'], r['causal'], r['seqlen']), {})[r['impl']] = r.get('tflops')
ra_c, ra_f, ra_80 = [], [], []
print("| hdim | causal | seqlen | flashlab auto | cuda_sm80 | SDPA flash | SDPA cuDNN | FA4 | auto / cuDNN | auto / FA4 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(pts):
    p = pts[k]
    a, c, f, s8 = p.get('flashlab:auto'), p.get('sdpa_cudnn'), p.get('fa4'), p.get('flashlab:cuda_sm80')
    ra_c.append(a / c)
    ra_80.append(a / s8)
    if f:
        ra_f.append(a / f)
    print("| %d | %s | %d | %.0f | %.0f | %.0f | %.0f | %s | %.2f | %s |" % (
        k[0], "yes" if k[1] else "no", k[2], a, s8, p.get('sdpa_flash'), c, "%.0f" % f if f else '-', a / c,
        "%.2f" % (a / f) if f else '-'))
fa4 = ("median auto/FA4 %.3f (min %.2f, max %.2f)" % (statistics.median(ra_f), min(ra_f), max(ra_f))
       if ra_f else "FA4 not measured")
print("\nmedian auto/cuDNN %.3f (min %.2f, max %.2f); %s; auto/cuda_sm80 min %.2f, median %.2f, max %.2f" % (
    statistics.median(ra_c), min(ra_c), max(ra_c), fa4, min(ra_80), statistics.median(ra_80), max(ra_80)))
