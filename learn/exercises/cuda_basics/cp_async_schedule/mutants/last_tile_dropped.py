"""Mutant: the main loop runs to T - 1: the last tile is loaded but never computed."""


def schedule(T, S):
    steps = [((s, s), None, None) for s in range(S - 1) if s < T]
    steps += [(None, None, None)] * (S - 1 - len(steps))
    issued = min(T, S - 1)
    for k in range(T - 1):
        nxt = k + S - 1
        load = (nxt, nxt % S) if nxt < T else None
        issued += load is not None
        steps.append((load, issued - (k + 1), (k, k % S)))
    return steps
