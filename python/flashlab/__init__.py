"""flashlab: FlashAttention library and learning lab, from Python.

Three layers (docs/python.md):

* ``flashlab._core``: ``forward`` / ``backward`` on any DLPack tensors (NumPy, torch, CuPy, JAX)
  with caller-provided outputs and an explicit CUDA stream. Errors raise :class:`FlashlabError`
  (a ``ValueError``) or its subclass :class:`UnsupportedError`, carrying the C++ Status message.
* :func:`attention` / :func:`attention_backward` here: NumPy conveniences that allocate the outputs
  (CPU backends). :func:`attention_flops`: the mask-aware FLOP count every benchmark uses.
* :func:`attention_with_kvcache` / :func:`kvcache_append` / :func:`attention_combine`: inference
  against a K/V cache (contiguous or paged, in-place append, rotary, split-KV; docs/kvcache.md).
* ``flashlab.torch``: PyTorch custom ops with autograd, ``torch.compile`` and CUDA-graph support;
  ``flashlab.flash_attn_interface``: the flash-attn 2.x functions.

Importing ``flashlab`` imports neither torch nor Triton (where torch is installed, it loads the CUDA
libraries torch would load first, so that both share them: see ``_preload.py``).
"""

from ._preload import preload_torch_cuda_libs

preload_torch_cuda_libs()  # before _core loads libflashlab.so: see _preload.py

from . import _core  # noqa: E402
from ._core import (  # noqa: E402
    FlashlabError,
    UnsupportedError,
    attention_flops,
    backward,
    build_info,
    forward,
    implementations,
)
from ._numpy import attention, attention_backward  # noqa: E402
from .kvcache import attention_combine, attention_with_kvcache, kvcache_append  # noqa: E402

__version__ = _core.__version__

__all__ = [
    "FlashlabError",
    "UnsupportedError",
    "attention",
    "attention_backward",
    "attention_combine",
    "attention_flops",
    "attention_with_kvcache",
    "backward",
    "build_info",
    "forward",
    "implementations",
    "kvcache_append",
]
