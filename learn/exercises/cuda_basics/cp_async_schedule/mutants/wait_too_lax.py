"""Mutant: wait_group S - 1 at every step: the tile being computed may still be in flight."""


def schedule(T, S):
    steps = [((s, s), None, None) for s in range(S - 1) if s < T]
    steps += [(None, None, None)] * (S - 1 - len(steps))
    issued = min(T, S - 1)
    for k in range(T):
        nxt = k + S - 1
        load = (nxt, nxt % S) if nxt < T else None
        issued += load is not None
        steps.append((load, S - 1, (k, k % S)))
    return steps
