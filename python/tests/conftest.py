"""pytest set-up for the flashlab package tests: a header saying what this run can test.

The tests import the INSTALLED flashlab (pip install ./python), not python/flashlab: this folder
has no __init__.py, so pytest puts python/tests (for attention_reference) on sys.path, not python/.
"""

import os

# Import order (FLASHLAB_TEST_IMPORT_ORDER): "torch" (default) imports torch first and lets torch
# initialize CUDA before flashlab's first CUDA call; "flashlab" imports flashlab first. Both must
# work (an exported libstdc++ copy in _core once crashed one of them: docs/python.md, section 6);
# python/run_gpu.sh runs the torch tests in both orders.
if os.environ.get("FLASHLAB_TEST_IMPORT_ORDER", "torch") == "torch":
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        try:
            torch.cuda.get_device_name()
        except Exception:  # no GPU (or no CUDA build of torch): nothing to initialize
            pass

import flashlab  # noqa: E402


def pytest_report_header(config):
    info = flashlab.build_info()
    lines = [
        f"flashlab {flashlab.__version__} from {flashlab.__file__}",
        f"libflashlab: cuda_compiled={info['cuda_compiled']} devices={info['cuda_devices'] or 'none'}",
    ]
    try:  # the version only: importing torch here would change the import order under test
        from importlib.metadata import version

        lines.append(f"torch {version('torch')} (installed)")
    except Exception:
        lines.append("torch: not installed (torch tests are skipped)")
    return lines


# FLASHLAB_TEST_PARTIAL_BUILD=1 (tools/gpu_sm90.sh's python phase, whose device builds compile a
# few head dims and dtypes to save time): a test that fails only because flashlab raised
# UnsupportedError for a head dim or dtype this build did not compile is reported as skipped, with
# the message. Off by default: with a full build such an error is a failure.
if os.environ.get("FLASHLAB_TEST_PARTIAL_BUILD") == "1":
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        rep = outcome.get_result()
        exc = call.excinfo.value if call.excinfo is not None else None
        if (call.when == "call" and rep.failed and isinstance(exc, flashlab.UnsupportedError)
                and "is not compiled into this build" in str(exc)):
            rep.outcome = "skipped"
            reason = str(exc).split(";")[0]
            rep.longrepr = (str(item.path), item.location[1] or 0, "Skipped: partial build: " + reason)
