"""Exercise cute/coalesce — the simplest layout with the same 1-D function.

coalesce(L) flattens L and merges neighbouring modes while the function i -> L(i) is unchanged:
  * a mode of shape 1 is dropped (it contributes nothing);
  * modes s0:d0 followed by s1:d1 merge into (s0 * s1):d0 when d1 == s0 * d0 (mode 1 continues
    exactly where mode 0 stops);
  * otherwise both are kept.
Examples: (2, 4):(1, 2) -> 8:1; (2, (1, 6)):(1, (6, 2)) -> 12:1; (4, 2):(2, 1) stays; (1, 1):(3, 5) -> 1:0.

Write coalesce(shape, stride) -> (shape, stride): a single mode as two ints (8, 1), several as two
flat tuples ((4, 2), (2, 1)). No pycute.
"""


def coalesce(shape, stride):
    raise NotImplementedError
