import pytest


def _has_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        # The marker, not a keyword: a test's keywords hold its folders' names, and tests/gpu/
        # holds the CPU tests of the gpu layer.
        if item.get_closest_marker("gpu") is not None and not HAS_GPU:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu_evaluator():
    from autotune.search.evaluate import GPUEvaluator

    ev = GPUEvaluator(0, timeout_s=60)
    yield ev
    ev.close()
