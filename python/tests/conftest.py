"""pytest set-up for the flashlab package tests: a header saying what this run can test.

The tests import the INSTALLED flashlab (pip install ./python), not python/flashlab: this folder
has no __init__.py, so pytest puts python/tests (for attention_reference) on sys.path, not python/.
"""

import os

if os.environ.get("FLASHLAB_TEST_TORCH_FIRST"):
    # python/run_gpu.sh's fallback order: torch loads and initializes CUDA before flashlab does.
    import torch

    try:
        torch.cuda.get_device_name()
    except Exception:  # no GPU: nothing to initialize
        pass

import flashlab  # noqa: E402


def pytest_report_header(config):
    info = flashlab.build_info()
    lines = [
        f"flashlab {flashlab.__version__} from {flashlab.__file__}",
        f"libflashlab: cuda_compiled={info['cuda_compiled']} devices={info['cuda_devices'] or 'none'}",
    ]
    try:
        import torch

        lines.append(f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
    except ImportError:
        lines.append("torch: not installed (torch tests are skipped)")
    return lines
