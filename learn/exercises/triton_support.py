"""Helpers of the triton checks (learn/exercises/triton/): the device, guarded tensors, float64 copies.

require() is called by learn/check.py before a triton stub is loaded (check.py's optional `require`
hook). It raises grading.Skip when torch or triton is not installed (run tools/setup.sh), so every
triton exercise is then reported as skip and --solutions / --mutants still exit 0. Without a CUDA
GPU (or with FLASHLAB_LEARN_GPU=0) it sets TRITON_INTERPRET=1 before triton is imported: the
kernels then run in Triton's interpreter on the CPU (NumPy underneath, slow, so the problems are
small); with a GPU they are compiled and run for real.

This file sits next to grading.py rather than in the triton/ folder: a module there would be
imported as `triton.<name>`, which is the real Triton package.
"""

import importlib.util
import os

import numpy as np
from grading import Fail, Skip

GUARD = 1024  # guard elements before and after every tensor: catch reads and writes past its end
_state = {"guards": 0}


def require():
    """The torch device the kernels run on ("cuda" or "cpu"); Skip when torch or triton is missing."""
    if "device" in _state:
        return _state["device"]
    for name in ("torch", "triton"):
        spec = importlib.util.find_spec(name)
        # A spec without an origin is a namespace package: learn/exercises/triton itself, not Triton.
        if spec is None or spec.origin in (None, "namespace"):
            raise Skip(f"needs torch and triton ({name} is not installed): run tools/setup.sh")
    try:
        import torch

        gpu = os.environ.get("FLASHLAB_LEARN_GPU") != "0" and torch.cuda.is_available()
        if not gpu:
            os.environ["TRITON_INTERPRET"] = "1"  # read when a @triton.jit decorator runs
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        if not gpu:
            _fix_interpreter_index()
    except Exception as e:  # a broken install: skip with the reason rather than fail every exercise
        raise Skip(f"torch/triton do not import ({type(e).__name__}: {e})")
    _state["device"] = "cuda" if gpu else "cpu"
    return _state["device"]


def _fix_interpreter_index():
    """Triton 3.6's interpreter turns a scalar into a Python int (a runtime loop bound such as
    `range(0, n_cols, BLOCK)`) with int() of a one-element array: an error from NumPy 2.3 on, a
    DeprecationWarning before. Patch that one conversion to take the element; left alone when the
    interpreter's internals differ (a newer Triton, where the fix is presumably upstream)."""
    try:
        from triton.runtime import interpreter as it
    except Exception:
        return
    orig = getattr(it, "_patch_lang_tensor", None)
    if orig is None or getattr(orig, "_flashlab", False):
        return

    def patched(tensor, scope):
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    patched._flashlab = True
    it._patch_lang_tensor = patched


def on_gpu():
    return require() == "cuda"


class Guarded:
    """A float32 tensor of `shape` inside a buffer with GUARD guard elements on each side.

    The guards hold a huge value (about 1e30) that differs from one tensor to the next: an unmasked
    load past the end reads it (the result is far off), and an unmasked store past the end changes a
    guard element, which intact() reports (also when it copies another tensor's guard). A bug can run
    at most about one block past the end, far less than GUARD, so nothing outside the buffer is
    touched, even on the CPU.
    """

    def __init__(self, shape, values=None):
        import torch

        self.shape = tuple(shape)
        self.n = int(np.prod(self.shape))
        _state["guards"] += 1
        self.fill = float(np.float32(1e30 * (1 + (_state["guards"] % 64) / 64)))
        self.buf = torch.full((self.n + 2 * GUARD,), self.fill, dtype=torch.float32, device=require())
        self.t = self.buf[GUARD:GUARD + self.n].view(self.shape)
        if values is not None:
            self.t.copy_(torch.as_tensor(np.asarray(values, np.float32)).view(self.shape))

    def numpy(self):
        return self.t.detach().cpu().double().numpy()

    def intact(self, check, what, fix="mask the ragged tail"):
        b = self.buf.detach().cpu()
        outside = np.concatenate([b[:GUARD].numpy(), b[GUARD + self.n:].numpy()])
        if not (outside == self.fill).all():
            i = int(np.argwhere(outside != self.fill)[0][0])
            off = i - GUARD if i < GUARD else i - GUARD + self.n
            where = f"{-off} element(s) before its start" if off < 0 else f"element {off} (its size is {self.n})"
            raise Fail(check, f"{what}: a store went past the tensor, at {where}: {fix}")


def f32(rng, *shape, scale=1.0):
    """Normal values, never zero, rounded to float32 and returned as float64 (the exact inputs)."""
    x = rng.standard_normal(shape)
    x[x == 0] = 0.5
    return (scale * x).astype(np.float32).astype(np.float64)


def launch(check, fn, *args, **kw):
    """Call the learner's launcher; an error from Triton (compile or interpreter) becomes a Fail."""
    try:
        return fn(*args, **kw)
    except NotImplementedError:
        raise
    except Fail:
        raise
    except Exception as e:
        msg = str(e).strip().splitlines()
        raise Fail(check, f"{type(e).__name__}: {' '.join(msg[-3:]) if msg else ''}"[:400])
