"""The short road of matmul, on torch CPU tensors without a GPU: what its key holds, what it keeps."""

from types import SimpleNamespace

import pytest

from autotune.dispatch import shortcut

torch = pytest.importorskip("torch")


def _key(a, b, out=None, beta=0.0, **kw):
    trans_a, trans_b = kw.get("trans_a", False), kw.get("trans_b", False)
    return shortcut.key(a, b, out, beta, trans_a, trans_b, kw.get("precision", "highest"), 0)


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
        _key(a, b, torch.empty(64, 16)),  # into an out
        _key(a, b, torch.empty(64, 16), beta=0.5),  # reading it
        _key(a, b, torch.empty(64, 17)[:, :16]),  # another pitch of out
        _key(a, b, torch.empty(64, 16).requires_grad_(True)),
    ]
    assert base not in others and len(set(others)) == len(others)
    assert _key(a, b, torch.empty(64, 16), beta=2) == _key(a, b, torch.empty(64, 16), beta=-1.5)


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
    cut = shortcut.made(a, b, None, SimpleNamespace(_kernel=SimpleNamespace(launch=print)), ops)
    assert isinstance(cut, shortcut.TorchShortcut)
    assert (cut.shape, cut.batch, cut.strides, cut.pitches) == ((3, 8, 6), 3, (32, 0, 48), ops.pitches)


def test_a_table_keeps_at_most_max_shortcuts_dropping_the_oldest(monkeypatch):
    monkeypatch.setattr(shortcut, "_MAX", 3)
    table = SimpleNamespace(shortcuts={})
    for i in range(5):
        shortcut.remember(table, (i,), f"cut{i}")
    assert list(table.shortcuts) == [(2,), (3,), (4,)]


def _cut_into(a, b, out, launches):
    """A TorchShortcut made from a call into `out`, whose launches are recorded in `launches`."""
    ops = _ops(a, b, out)
    assert shortcut.fits(a, b, ops, out=out)
    cut = shortcut.made(a, b, out, SimpleNamespace(_kernel=SimpleNamespace(launch=lambda *x: launches.append(x))), ops)
    cut.stream = lambda device: "stream"
    return cut


def test_a_call_into_an_out_goes_the_short_road_only_while_out_lies_apart_from_a_and_b():
    buf = torch.empty(200)
    a, b = buf[:32].view(8, 4), buf[40:64].view(4, 6)
    out, launches = torch.empty(8, 6), []
    cut = _cut_into(a, b, out, launches)
    assert cut(a, b, 0.5, out, 2.0) is out
    assert launches[-1][3:9] == (a.data_ptr(), b.data_ptr(), out.data_ptr(), 0.5, 2.0, "stream")
    for c in (buf[16:64].view(8, 6), buf[30:78].view(8, 6), buf[63:111].view(8, 6)):  # over A, A and B, B's last
        assert cut(a, b, 1.0, c, 0.0) is None
    assert len(launches) == 1
    c = buf[64:112].view(8, 6)  # just past B
    assert cut(a, b, 1.0, c, 0.0) is c and len(launches) == 2
    again = shortcut.made(a, b, out, SimpleNamespace(_kernel=SimpleNamespace(launch=print)), _ops(a, b, out))
    assert again.spans == ((0, 128), (0, 96), (0, 192))


def test_an_out_of_another_kind_or_not_whole_is_not_kept():
    a, b = torch.rand(8, 4), torch.rand(4, 6)
    for out in (torch.empty(8, 7)[:, :6], torch.empty(6, 8).t()):
        assert not shortcut.fits(a, b, _ops(a, b, out), out=out)
    other = SimpleNamespace()  # neither CuPy nor torch: no kind of A's
    assert not shortcut.fits(a, b, _ops(a, b, torch.empty(8, 6)), out=other)


def test_spans_count_negative_and_broadcast_strides():
    x = torch.rand(5, 7)
    bytes_of = lambda t: tuple(4 * s for s in t.stride())  # noqa: E731 - torch's strides are in elements
    assert shortcut.span(x.shape, bytes_of(x), 4) == (0, 4 * 35)
    assert shortcut.span((3, 5, 7), bytes_of(x.expand(3, 5, 7)), 4) == (0, 4 * 35)
    assert shortcut.span((7, 5), bytes_of(x.t()), 4) == (0, 4 * 35)
    assert shortcut.span((3, 4), (-16, 4), 4) == (-32, 16)  # a CuPy view with a negative stride
