"""Share PyTorch's CUDA libraries when flashlab is imported before torch (Linux).

libflashlab.so (a CUDA build) needs libcudart.so.13, libcublas.so.13 and libgomp.so.1. The
dynamic loader binds each such name to the first library of that name loaded into the process.
Imported first, flashlab would bind them to the CUDA toolkit's and the system's copies (found
through RUNPATH / LD_LIBRARY_PATH), and a later ``import torch`` would then bind torch's libraries
(which link by name) to those copies instead of the ones its pip wheels ship.

So when torch is installed but not yet imported, this loads the libraries torch's own import
loads first — its OpenMP runtime (torch/lib/libgomp.so.1), torch/lib/libtorch_global_deps.so,
then the wheels' cuBLAS(Lt) and CUDA runtime, in torch's order — without importing torch. Torch's import later finds them loaded; flashlab
binds to the same copies. Set FLASHLAB_NO_TORCH_LIBS=1 to skip this.

History (2026-11, H100 machine): processes with both flashlab and torch loaded crashed, with or
without this preload. The cause was not the CUDA libraries but an exported static copy of
libstdc++ inside the extension module (docs/python.md, section 6); python/CMakeLists.txt now
exports PyInit__core alone. This preload stays: sharing torch's CUDA libraries is still right.
"""

import ctypes
import glob
import importlib.util
import os
import sys

# Torch's own preload order (torch/__init__.py, _preload_cuda_deps): cuBLASLt before cuBLAS.
_WHEEL_LIBS = ("libcublasLt.so.*[0-9]", "libcublas.so.*[0-9]", "libcudart.so.*[0-9]")


def _locations(package: str):
    try:
        spec = importlib.util.find_spec(package)  # locates the package; does not import it
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _load(path: str) -> None:
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass  # not loadable here (e.g. no driver): libflashlab.so falls back to the loader's search


def preload_torch_cuda_libs() -> None:
    if not sys.platform.startswith("linux") or "torch" in sys.modules or os.environ.get("FLASHLAB_NO_TORCH_LIBS"):
        return
    torch_dirs = _locations("torch")
    if not torch_dirs:
        return
    torch_lib = os.path.join(torch_dirs[0], "lib")
    # torch's OpenMP runtime first: libtorch_global_deps.so names libgomp.so.1 without a path.
    for path in sorted(glob.glob(os.path.join(torch_lib, "libgomp*.so*"))):
        _load(path)
    deps = os.path.join(torch_lib, "libtorch_global_deps.so")
    if os.path.exists(deps):
        _load(deps)
    for root in _locations("nvidia"):  # nvidia/cu13/lib (CUDA 13 wheels), nvidia/<lib>/lib (CUDA 12)
        for pattern in _WHEEL_LIBS:
            for path in sorted(glob.glob(os.path.join(root, "*", "lib", pattern))):
                _load(path)
