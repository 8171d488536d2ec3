"""Spec of reading/hopper_mainloop: questions on upstream FlashAttention's hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp: CollectiveMainloopFwdSm90: TMA pipelines, warp-group ping-pong, intra-warp-group overlap"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp"

EXPECTED = {
    "q1": "2d0c982892f49cb6",
    "q2": "de540ee28044616b",
    "q3": "4857a1bea16ed397",
    "q4": "03dc058fd89aa0e7",
}


def check(mod, rng):
    check_answers("reading/hopper_mainloop", mod, EXPECTED)
