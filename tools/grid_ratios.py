#!/usr/bin/env python3
"""tools/grid_ratios.py RESULTS.jsonl — the forward grid of python -m flashlab.bench as the markdown table of
docs/perf.md ("Hopper forward"): flashlab:auto beside cuda_sm80, SDPA flash, SDPA cuDNN and FA4, with the
ratios to cuDNN and FA4 per point and their medians."""
import json, statistics, sys
rows=[json.loads(l) for l in open(sys.argv[1])]
pts={}
for r in rows:
    pts.setdefault((r['hdim'],r['causal'],r['seqlen']),{})[r['impl']]=r.get('tflops')
ra_c=[];ra_f=[];ra_80=[]
print("| hdim | causal | seqlen | flashlab auto (sm90) | cuda_sm80 | SDPA flash | SDPA cuDNN | FA4 | auto / cuDNN | auto / FA4 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(pts):
    p=pts[k]; a=p.get('flashlab:auto'); c=p.get('sdpa_cudnn'); f=p.get('fa4'); s8=p.get('flashlab:cuda_sm80')
    ra_c.append(a/c); ra_80.append(a/s8)
    if f: ra_f.append(a/f)
    print("| %d | %s | %d | %.0f | %.0f | %.0f | %.0f | %s | %.2f | %s |" % (k[0], "yes" if k[1] else "no", k[2], a, s8, p.get('sdpa_flash'), c, "%.0f"%f if f else '-', a/c, "%.2f"%(a/f) if f else '-'))
print("\nmedian auto/cuDNN %.3f (min %.2f, max %.2f); median auto/FA4 %.3f (min %.2f, max %.2f); min auto/cuda_sm80 %.2f" % (statistics.median(ra_c), min(ra_c), max(ra_c), statistics.median(ra_f), min(ra_f), max(ra_f), min(ra_80)))
