"""autotune.pytorch.route on the CPU: which road a linear layer's step takes, and its timing.

The timing runs on CPU tensors with the device's synchronize made a no-op; the roads are made
slow on purpose (a sleep far longer than a small product), so no result hangs on the machine's speed.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from autotune.dispatch import measure  # noqa: E402
from autotune.pytorch import route  # noqa: E402


@pytest.fixture(autouse=True)
def _cpu_route(monkeypatch):
    """The route as on a CUDA device without a capture, TF32 off, and no layer timed yet."""
    monkeypatch.setattr(route, "_sync", lambda device: None)
    monkeypatch.setattr(route, "_capturing", lambda: False)
    monkeypatch.setattr(route, "_tf32", lambda: False)
    monkeypatch.delenv(measure.ENV, raising=False)
    route.forget()
    yield
    route.forget()


def _layer(rows=8, grad=False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 6, generator=g).requires_grad_(grad)
    w = torch.randn(4, 6, generator=g).requires_grad_(grad)
    b = torch.randn(4, generator=g).requires_grad_(grad)
    return x, w, b, (grad, grad, grad)


def _slow(seconds, road):
    def slow(*tensors):
        time.sleep(seconds)
        return road(*tensors)

    return slow


def test_a_layer_is_timed_once_per_key_and_the_answer_kept(monkeypatch):
    timed = []
    monkeypatch.setattr(route, "_time_both", lambda *args: timed.append(args[0].shape) or True)
    x, w, b, grads = _layer()
    ours = torch.nn.functional.linear
    assert route.torch_is_faster(x, w, b, grads, ours)
    assert route.torch_is_faster(x.clone(), w, b, grads, ours)  # the same key: no second timing
    assert len(timed) == 1
    assert route.torch_is_faster(x[:5], w, b, grads, ours)  # other rows: a key of its own
    assert route.torch_is_faster(x, w, None, grads, ours)  # no bias: another
    assert route.torch_is_faster(x.t().contiguous().t(), w, b, grads, ours)  # x not contiguous: another
    assert route.torch_is_faster(x, w, b, (False, True, True), ours)  # other gradients: another
    assert len(timed) == 5


def test_tf32_a_capture_or_untimed_first_calls_keep_autotunes_road_and_time_nothing(monkeypatch):
    def refuse(*args):
        raise AssertionError("timed")

    monkeypatch.setattr(route, "_time_both", refuse)
    x, w, b, grads = _layer()
    ours = torch.nn.functional.linear
    monkeypatch.setattr(route, "_tf32", lambda: True)  # torch's product would be TF32
    assert not route.torch_is_faster(x, w, b, grads, ours)

    def mixed():
        raise RuntimeError("mix of the legacy and new APIs")

    monkeypatch.setattr(route, "_tf32", mixed)  # torch cannot say: not strict FP32 for sure
    assert not route.torch_is_faster(x, w, b, grads, ours)
    monkeypatch.setattr(route, "_tf32", lambda: False)
    monkeypatch.setattr(route, "_capturing", lambda: True)
    assert not route.torch_is_faster(x, w, b, grads, ours)
    monkeypatch.setattr(route, "_capturing", lambda: False)
    monkeypatch.setenv(measure.ENV, "0")
    assert not route.torch_is_faster(x, w, b, grads, ours)
    monkeypatch.setenv(measure.ENV, "1")
    monkeypatch.setattr(route, "_time_both", lambda *args: True)
    assert route.torch_is_faster(x, w, b, grads, ours)  # nothing above was kept as the answer


@pytest.mark.parametrize("grad", [False, True])
def test_the_faster_road_wins_and_the_callers_tensors_keep_no_grad(monkeypatch, grad):
    monkeypatch.setattr(route, "LONG_MS", 1e6)  # every step short: repeats after the first round
    linear = torch.nn.functional.linear
    x, w, b, grads = _layer(grad=grad)
    assert route._time_both(x, w, b, grads, _slow(0.02, linear))
    monkeypatch.setattr(route, "_torch_road", _slow(0.02, linear))
    assert not route._time_both(x, w, b, grads, linear)
    assert x.grad is None and w.grad is None and b.grad is None


@pytest.mark.parametrize("torch_slow", [False, True])
def test_a_long_step_is_timed_one_step_a_round_and_the_faster_road_still_wins(monkeypatch, torch_slow):
    steps = []

    def ours(*tensors):
        steps.append(1)
        time.sleep(0.003)  # longer than LONG_MS here
        return torch.nn.functional.linear(*tensors)

    monkeypatch.setattr(route, "LONG_MS", 1.0)
    if torch_slow:
        monkeypatch.setattr(route, "_torch_road", _slow(0.02, torch.nn.functional.linear))
    x, w, b, grads = _layer()
    assert route._time_both(x, w, b, grads, ours) is not torch_slow
    assert len(steps) == 1 + route.ROUNDS  # the first call's, then one step a round: no repeats


def test_short_steps_are_timed_in_repeats_after_the_first_round(monkeypatch):
    steps = []

    def ours(*tensors):
        steps.append(1)
        return torch.nn.functional.linear(*tensors)

    monkeypatch.setattr(route, "LONG_MS", 1e6)
    x, w, b, grads = _layer()
    route._time_both(x, w, b, grads, ours)
    assert len(steps) == 1 + 1 + (route.ROUNDS - 1) * route.REPS


def test_a_torch_road_that_fails_keeps_autotunes_and_a_refusal_of_ours_reaches_the_caller(monkeypatch):
    def broken(*tensors):
        raise RuntimeError("CUDA out of memory")

    x, w, b, grads = _layer(grad=True)
    monkeypatch.setattr(route, "_torch_road", broken)
    assert not route._time_both(x, w, b, grads, torch.nn.functional.linear)
    monkeypatch.setattr(route, "_torch_road", torch.nn.functional.linear)

    def refusing(*tensors):
        raise TypeError("float16 refused")

    with pytest.raises(TypeError, match="float16"):
        route._time_both(x, w, b, grads, refusing)
