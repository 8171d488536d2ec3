"""Mutant: the next tile is loaded into buffer k % S, the one being computed."""


def schedule(T, S):
    steps = [((s, s), None, None) for s in range(S - 1) if s < T]
    steps += [(None, None, None)] * (S - 1 - len(steps))
    issued = min(T, S - 1)
    for k in range(T):
        nxt = k + S - 1
        load = (nxt, k % S) if nxt < T else None
        issued += load is not None
        steps.append((load, issued - (k + 1), (k, k % S)))
    return steps
