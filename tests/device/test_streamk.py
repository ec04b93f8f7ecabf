"""On the GPU: stream-K (a persistent grid; partial tiles meet in a workspace) is correct where
its schedule splits tiles over many blocks, where split and whole tiles mix, and at awkward
edges; and it is bit-for-bit repeatable: its partial sums are added in a fixed order, so any
difference between two launches on the same inputs is a race in the hand-over."""

import pytest

from autotune.kernels.space import Space

pytestmark = pytest.mark.gpu

SK_SEEDS = [c for c in Space.load("warptile").seeds if c["SCHEDULE"] == "stream_k"]

# (M, N, K): one tile over every block (deep K); few tiles, each split over several blocks;
# more tiles than two waves (split tiles first, then whole ones); tails in every dimension.
SHAPES = [(64, 64, 8192), (300, 520, 2000), (2500, 4100, 100), (4097, 4097, 64), (1, 1, 1), (129, 257, 17)]


def _problem(M, N, K, seed):
    """Random A, B, C in [-1, 1) and A @ B in float64."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    a = rng.random((M, K), dtype=cp.float32) * 2 - 1
    b = rng.random((K, N), dtype=cp.float32) * 2 - 1
    c0 = rng.random((M, N), dtype=cp.float32) * 2 - 1
    return a, b, c0, a.astype(cp.float64) @ b.astype(cp.float64)


def _assert_c_not_read_at_beta_zero(k, a, b, ab):
    import cupy as cp

    poisoned = cp.full(ab.shape, cp.nan, dtype=cp.float32)  # beta = 0: C is never read
    k(a, b, poisoned, 1.0, 0.0)
    assert float(cp.linalg.norm(poisoned - ab) / cp.linalg.norm(ab)) < 1e-5


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", SK_SEEDS, ids=lambda c: c.name)
def test_stream_k_correct_and_repeatable(config, shape):
    import cupy as cp

    from autotune.dispatch.kernel import Kernel

    M, N, K = shape
    k = Kernel(config, f"sm_{cp.cuda.Device().compute_capability}")
    geo = k._kernel.geometry(M, N, K)
    assert 1 <= geo.grid[0] <= k._kernel.slots  # never more blocks than the device holds at once
    a, b, c0, ab = _problem(M, N, K, 3)
    ref = 1.5 * ab - 0.5 * c0.astype(cp.float64)
    first = None
    for _ in range(8):
        out = c0.copy()
        k(a, b, out, 1.5, -0.5)
        if first is None:
            first = out
            err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
            assert err < 1e-5, err
        else:
            assert bool(cp.array_equal(out, first)), "two launches on the same inputs differ: a race"
    _assert_c_not_read_at_beta_zero(k, a, b, ab)


def _split_configs():
    from autotune.core.types import Config

    base = Space.load("warptile").seeds[0].as_dict()
    return [
        Config.make("warptile", {**base, **v, "SCHEDULE": s})
        for s in ("split_launch", "split_persistent", "split_fused")
        for v in ({}, {"PACKB": 0}, {"GROUP_M": 1, "BK": 8, "STAGES": 4})
    ]


# (M, N, K) with 128 x 256 tiles on 132 slots: fewer tiles than a wave (all in the tail); whole
# waves plus more than half a wave (only the rest in the tail); plus less (one more wave in the
# tail); 4096^3's split with 3 k-tiles per tile; one tile; tails in every dimension; N % 4 != 0
# (packed B, and C written through a packed copy where the tail is large).
SPLIT_SHAPES = [
    (300, 520, 2000),
    (2500, 4100, 100),
    (4097, 4097, 64),
    (4096, 4096, 48),
    (1, 1, 1),
    (129, 257, 17),
    (700, 1001, 900),
]


@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", _split_configs(), ids=lambda c: c.name)
def test_split_launch_correct(config, shape):
    """Split launch: whole waves of whole tiles, then a tail kernel adding its partial sums into
    C (atomics: not bit-repeatable, so only the error is checked), with beta and with a
    NaN-poisoned C at beta = 0 (the tail's tiles must be zeroed, not scaled). In one kernel
    (split_persistent: a grid of at most the resident blocks; split_fused: a row of them, then a row per whole
    wave), whose counters every launch leaves zero for the next (a launch that found them set
    would add into tiles not yet scaled)."""
    import cupy as cp

    from autotune.dispatch.kernel import Kernel
    from autotune.gpu import launcher

    M, N, K = shape
    k = Kernel(config, f"sm_{cp.cuda.Device().compute_capability}")
    geo = k._kernel.geometry(M, N, K)
    tiles = -(-M // 128) * -(-N // 256)
    schedule = config["SCHEDULE"]
    one_kernel = schedule != "split_launch"
    # Unaligned rows of C with a sixth of the tiles or more in the tail: C through a copy, the
    # copy back last.
    slots, rem = k._kernel.slots, tiles % k._kernel.slots
    tail = 0 if rem == 0 else (tiles if tiles < slots else (rem if 2 * rem >= slots else rem + slots))
    packs = config.as_dict().get("PACKB", 1) == 1 and N % 4 != 0
    assert geo.pack_c == (packs and tail > 0 and 6 * tail >= tiles)
    assert (geo.kernels[-1] == "_unpack_c") == geo.pack_c
    sgemm = [kern for kern in geo.kernels if kern not in ("_pack_c", "_unpack_c")]
    if one_kernel:
        assert 1 <= geo.grid[0] <= k._kernel.slots and sgemm[-1] == "" and geo.ws_zeroed == 16
        if schedule == "split_fused":  # whole waves below the tail row
            assert geo.grid[0] == k._kernel.slots and (geo.grid[1] - 1) * k._kernel.slots <= tiles
    else:
        assert geo.grid[0] + geo.tail_tiles == tiles and geo.tail_first == geo.grid[0]
        assert geo.tail_grid <= k._kernel.slots
    a, b, c0, ab = _problem(M, N, K, 4)
    ref = 1.5 * ab - 0.5 * c0.astype(cp.float64)
    for _ in range(3):  # three launches, each on a fresh copy of C
        out = c0.copy()
        k(a, b, out, 1.5, -0.5)
        assert float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref)) < 1e-5
        if one_kernel:
            ws = launcher.WORKSPACES.held(k._kernel.workspace_key())
            assert not bool(ws[:16].any()), "counters left set for the next launch"
    _assert_c_not_read_at_beta_zero(k, a, b, ab)


def test_kernels_keep_their_own_workspaces_under_a_small_budget(monkeypatch):
    """A whole-tile kernel packs B at the start of its workspace, where a stream-K kernel keeps
    the flags and a one-kernel split launch its counters, which must stay zero: alternating them
    on one stream, with a budget so small that every launch frees the others' buffers, must stay
    correct."""
    import cupy as cp

    from autotune.core.types import Config
    from autotune.dispatch.kernel import Kernel
    from autotune.gpu import launcher

    monkeypatch.setattr(launcher.WORKSPACES, "budget", 1)
    base = Space.load("warptile").seeds[0].as_dict()
    arch = f"sm_{cp.cuda.Device().compute_capability}"
    packed = Kernel(Config.make("warptile", {**base, "SCHEDULE": "data_parallel", "PACKB": 1}), arch)
    streamk = Kernel(SK_SEEDS[0], arch)
    one_kernel = [
        Kernel(Config.make("warptile", {**base, "SCHEDULE": s}), arch)  # counters, then B
        for s in ("split_persistent", "split_fused")
    ]
    M, N, K = 700, 1001, 900  # N % 4 != 0: all pack B; 6 x 4 tiles split over many blocks
    rng = cp.random.default_rng(5)
    a = rng.random((M, K), dtype=cp.float32) * 2 - 1
    b = rng.random((K, N), dtype=cp.float32) * 2 - 1
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    for _ in range(3):
        for k in (packed, streamk, *one_kernel):
            out = k(a, b)
            assert float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref)) < 1e-5, k
