"""Exercise cute/composition — (A o B)(i) = A(B(i)), as a layout.

Composition is how CuTe reshapes and tiles: B picks which of A's 1-D indices you want, in which
order, and A turns them into offsets. The result R has B's shape (R's mode k has the size of B's
mode k) and R(i) = A(B(i)). The algorithm, for a single-mode B = n:r ("n indices with stride r
through A's 1-D domain"):
  1. coalesce A into flat modes s_0:d_0, s_1:d_1, ..., s_last:d_last;
  2. for each mode except the last: take new = min(max(1, s_k // r), n) elements of it; if new > 1
     emit the mode new:(r * d_k); then n //= new and r = ceil(r / s_k) (the stride left for the
     next mode);
  3. if n > 1 (or nothing was emitted) emit n:(r * d_last).
For a multi-mode B, compose each mode of B with A separately (the result has B's modes).
Example: A = (6, 2):(8, 2), B = (4, 3):(3, 1)  ->  R = ((2, 2), 3):((24, 2), 8).

Write compose(a, b) where a and b are (shape, stride) pairs (flat tuples or ints), returning R as
(shape, stride). Graded as a function: R(i) == A(B(i)) for every i, and R's modes have B's sizes.
No pycute.
"""


def compose(a, b):
    raise NotImplementedError
