"""Exercise cute/right_inverse — from offsets back to coordinates.

A right inverse R of a layout L satisfies L(R(i)) == i for every i in R's domain: R(i) is the
1-D coordinate of L that lands on offset i. CuTe builds the largest such R that is itself a layout:
sort L's flat modes by stride; walk them while each stride equals cur (starting at cur = 1; stop at
the first gap, skip shape-1 modes); a mode s:d at flat position k contributes the mode s:p_k where
p_k is the 1-D (colexicographic) stride of position k, p_k = s_0 * ... * s_(k-1); then cur = s * d.
Example: (4, 8):(8, 1) (row-major) -> (8, 4):(4, 1); (4, 2):(1, 8) -> 4:1 (a gap after 4).
This is how CuTe turns "thread layout -> offset" into "offset -> thread" (make_tiled_copy).

Write right_inverse(shape, stride) -> (shape, stride) (graded as a function, same size). No pycute.
"""


def right_inverse(shape, stride):
    raise NotImplementedError
