"""Exercise cuda_basics/cp_async_schedule — the step-by-step schedule of a multi-stage cp.async pipeline.

A kernel that walks T tiles (K/V blocks in FlashAttention) hides the load latency by loading tile
t + S - 1 while it computes tile t, with S shared-memory buffers (S = 2: double buffering). On
Ampere+ the loads are cp.async: each step issues one load GROUP (cp.async.commit_group), and
cp.async.wait_group N waits until at most N of the issued groups are still in flight; the oldest
complete first. Tile t lives in buffer t % S.

The schedule, as a list of steps; each step is a tuple (load, wait, compute):
* prologue, steps 0 .. S-2: load tile s into buffer s (if s < T); wait and compute are None;
* then for k = 0 .. T-1, one step: load = (k + S - 1, its buffer) if that tile exists else None;
  wait = the largest N that still guarantees tile k has arrived = (tiles issued so far) - (k + 1);
  compute = (k, k % S).
(After computing tile k the kernel does __syncthreads() before buffer k % S is reloaded; in this
order the buffer loaded at a step is never the one computed at that step, because S >= 2.)
E.g. T = 3, S = 2: [((0, 0), None, None), ((1, 1), 1, (0, 0)), ((2, 0), 1, (1, 1)), (None, 0, (2, 0))].

Write `schedule(T, S)` -> that list (load and compute as (tile, buffer) tuples or None).
"""


def schedule(T, S):
    raise NotImplementedError
