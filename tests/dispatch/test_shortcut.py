"""The short road of matmul, on torch CPU tensors without a GPU: what its key holds, what it keeps."""

from types import SimpleNamespace

import pytest

from autotune.dispatch import shortcut

torch = pytest.importorskip("torch")


def _key(a, b, **kw):
    return shortcut.key(a, b, kw.get("trans_a", False), kw.get("trans_b", False), kw.get("precision", "highest"), 0)


def test_without_torch_imported_no_type_takes_it(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch")
    assert shortcut.torch_types() == ()


def test_the_key_tells_apart_what_changes_the_full_roads_answer():
    big = torch.rand(64, 65)
    a, b = big[:, :32], torch.rand(32, 16)
    base = _key(a, b)
    assert base == _key(big[:, :32], torch.rand(32, 16))  # other data, the same form
    others = [
        _key(big[:, 1:33], b),  # 4 bytes off: another alignment
        _key(a.contiguous(), b),  # another row pitch
        _key(a, b.t().contiguous().t()),  # B column-major
        _key(a, b, trans_b=True),
        _key(a, b, precision="high"),
        _key(a.double(), b),
        _key(a.clone().requires_grad_(True), b),
        _key(torch.nn.Parameter(a.clone()), b),
        _key(big[:, :31], torch.rand(31, 16)),
    ]
    assert base not in others and len(set(others)) == len(others)


def _ops(a, b, c, **kw):
    data = {"batch": 1, "wrap": None, "M": c.shape[0], "N": c.shape[1], "K": a.shape[1], "pitches": (4, 6, 6)}
    data |= {"strides": None} | kw
    ptr = lambda t: SimpleNamespace(data=SimpleNamespace(ptr=t.data_ptr()))  # noqa: E731 - a CuPy view's pointer
    return SimpleNamespace(a=ptr(a), b=ptr(b), c=ptr(c), result=c, **data)


def test_only_a_call_served_in_place_into_a_new_row_major_output_is_kept():
    a, b, c = torch.rand(8, 4), torch.rand(4, 6), torch.empty(8, 6)
    assert shortcut.fits(a, b, _ops(a, b, c))
    assert not shortcut.fits(a, b, _ops(a.clone(), b, c))  # A was copied
    assert not shortcut.fits(a, b, _ops(b, a, c))  # swapped
    assert not shortcut.fits(a, b, _ops(a, b, c, batch=3))
    assert not shortcut.fits(a, b, _ops(a, b, c, K=0))
    assert not shortcut.fits(a, b, _ops(a, b, torch.empty(6, 8).t()))  # a column-major output
    assert not shortcut.fits(a, b, _ops(a, b, c), kernel=SimpleNamespace(routed=True))  # the Ozaki route


def test_a_batch_is_kept_when_its_output_is_one_new_stack_of_matrices():
    a, b, c = torch.rand(3, 8, 4), torch.rand(4, 6), torch.empty(3, 8, 6)
    ops = _ops(a, b, c, M=8, N=6, K=4, batch=3, strides=(32, 0, 48))
    assert shortcut.fits(a, b, ops)
    assert not shortcut.fits(a, b, _ops(a, b, c, M=8, N=6, K=4, batch=2, strides=(32, 0, 48)))  # not every matrix
    assert not shortcut.fits(a, b, _ops(a, b, c, M=8, N=6, K=4, batch=3, strides=(32, 0, 64)))  # C's stride
    four = torch.empty(2, 3, 8, 6)
    assert shortcut.fits(a, b, _ops(a, b, four, M=8, N=6, K=4, batch=6, strides=(32, 0, 48)))
    cut = shortcut.made(a, SimpleNamespace(_kernel=SimpleNamespace(launch=print)), ops)
    assert isinstance(cut, shortcut.TorchShortcut)
    assert (cut.shape, cut.batch, cut.strides, cut.pitches) == ((3, 8, 6), 3, (32, 0, 48), ops.pitches)


def test_a_table_keeps_at_most_max_shortcuts_dropping_the_oldest(monkeypatch):
    monkeypatch.setattr(shortcut, "_MAX", 3)
    table = SimpleNamespace(shortcuts={})
    for i in range(5):
        shortcut.remember(table, (i,), f"cut{i}")
    assert list(table.shortcuts) == [(2,), (3,), (4,)]
