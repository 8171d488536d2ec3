"""Mutant: wait_group 0 at every step: correct but serializes the pipeline (no overlap)."""


def schedule(T, S):
    steps = [((s, s), None, None) for s in range(S - 1) if s < T]
    steps += [(None, None, None)] * (S - 1 - len(steps))
    issued = min(T, S - 1)
    for k in range(T):
        nxt = k + S - 1
        load = (nxt, nxt % S) if nxt < T else None
        issued += load is not None
        steps.append((load, 0, (k, k % S)))
    return steps
