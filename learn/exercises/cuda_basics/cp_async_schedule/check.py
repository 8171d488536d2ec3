"""Spec of cuda_basics/cp_async_schedule: the exact schedule, then a replay of its hazards."""

from grading import Fail

CONCEPT = "cp.async multi-stage pipeline: prologue, load t+S-1 while computing t, wait_group N, buffer t % S"
NEEDS_GPU = False


def ref(T, S):
    steps = [((s, s), None, None) for s in range(min(T, S - 1))]
    steps += [(None, None, None)] * (S - 1 - len(steps))
    for k in range(T):
        nxt = k + S - 1
        issued = min(T, nxt + 1)
        steps.append(((nxt, nxt % S) if nxt < T else None, issued - k - 1, (k, k % S)))
    return steps


def replay(name, steps, T, S):
    """Simulate the buffers and the in-flight groups; raise on a hazard."""
    buf, inflight, done = {}, [], []
    for i, step in enumerate(steps):
        try:
            load, wait, comp = step
        except Exception:
            raise Fail(name, f"step {i}: expected a tuple (load, wait, compute), got {step!r}")
        if load is not None:
            t, b = load
            if b in buf and buf[b] not in done:
                raise Fail(name, f"step {i}: tile {t} loaded into buffer {b}, which still holds tile {buf[b]} "
                                 "not yet computed (overwritten while in use)")
            buf[b] = t
            inflight.append(t)
        if wait is not None:
            del inflight[:max(0, len(inflight) - wait)]
        if comp is not None:
            t, b = comp
            if buf.get(b) != t:
                raise Fail(name, f"step {i}: computes tile {t} from buffer {b}, which holds {buf.get(b)}")
            if t in inflight:
                raise Fail(name, f"step {i}: computes tile {t} while its cp.async group may still be in flight "
                                 f"(wait_group {wait} leaves {len(inflight)} pending)")
            done.append(t)
    if done != list(range(T)):
        raise Fail(name, f"tiles computed {done}, expected 0 .. {T - 1} in order")


def check(mod, rng):
    for T, S in ((1, 2), (3, 2), (5, 3), (2, 4), (8, 4), (int(rng.integers(1, 12)), int(rng.integers(2, 6)))):
        name = f"T {T}, S {S}"
        got = [tuple(s) if isinstance(s, list) else s for s in mod.schedule(T, S)]
        replay(name, got, T, S)
        exp = ref(T, S)
        for i, (g, e) in enumerate(zip(got, exp)):
            if tuple(g) != e:
                raise Fail(name, f"step {i}: got {g}, expected {e} (wait = tiles issued - (k + 1): no "
                                 "tighter wait than needed, or the pipeline does not overlap)")
        if len(got) != len(exp):
            raise Fail(name, f"{len(got)} steps, expected {len(exp)}")
