"""launcher.Workspaces: what a loaded kernel keeps between launches is right for the next launch of
any shape. Simulated in host memory: each launch needs its first `zeroed` bytes zero, leaves them
zero and writes scratch (partial sums) over the rest of what it uses, as fewrows' and fewcols'
split sums and warptile's stream-K do."""

from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.gpu.launcher import Workspaces


class _Buffer:
    def __init__(self, nbytes: int):
        self.mem = bytearray(nbytes)  # zeroed, as cp.zeros
        self.nbytes = nbytes


def _pool(budget: int = 1 << 30):
    made = []

    def alloc(nbytes, stream):
        made.append(_Buffer(nbytes))
        return made[-1]

    def zero(buf, start, stop, stream):
        buf.mem[start:stop] = bytes(stop - start)

    return Workspaces(alloc, zero, budget), made


def _launch(pool, key, nbytes, zeroed):
    """One kernel launch: checks what it needs, then leaves its counters zero and its scratch dirty."""
    buf = pool.get(key, nbytes, zeroed, stream=None)
    assert buf.nbytes >= nbytes
    assert not any(buf.mem[:zeroed]), "a launch found its counters set by an earlier one"
    buf.mem[zeroed:nbytes] = b"\xff" * (nbytes - zeroed)


def test_counters_where_an_earlier_shape_left_partial_sums_are_zeroed():
    # fewrows with REDUCE last_block: 3 x 5120 x 2560 has more tiles (counters) than 3 x 4096 x 4096,
    # whose partial sums then lie where the first shape's extra counters go.
    pool, made = _pool()
    _launch(pool, ("k",), nbytes=4096, zeroed=64)  # a new buffer, large enough for both shapes
    _launch(pool, ("k",), nbytes=4000, zeroed=48)  # fewer counters; partial sums from byte 48
    _launch(pool, ("k",), nbytes=4096, zeroed=64)  # bytes 48-64 must be counters again
    assert len(made) == 1  # no reallocation: the difference was zeroed in place


def test_each_key_has_its_own_buffer():
    pool, made = _pool()
    _launch(pool, ("k", 0, 1), 256, 16)
    _launch(pool, ("k", 0, 2), 256, 16)  # another stream: another buffer
    assert len(made) == 2 and pool.held(("k", 0, 1)) is not pool.held(("k", 0, 2))


def test_a_larger_need_gets_a_new_zeroed_buffer_and_the_budget_drops_the_oldest():
    pool, made = _pool(budget=1000)
    _launch(pool, ("a",), 600, 16)
    _launch(pool, ("b",), 600, 16)  # over the budget: a's buffer goes
    assert pool.held(("a",)) is None and len(pool) == 1
    _launch(pool, ("a",), 600, 600)  # a gets a new one, all zero
    _launch(pool, ("b",), 900, 900)
    assert [b.nbytes for b in made] == [600, 600, 600, 900]


def test_a_buffer_a_cuda_graph_captured_is_kept_once_dropped():
    pool, made = _pool(budget=1000)
    pool.get(("g",), 600, 16, None, captured=True)
    pool.get(("e",), 600, 16, None)  # over the budget: the graph's buffer leaves the pool, kept
    pool.get(("g",), 900, 16, None)  # the larger buffer: the eager one goes, nothing kept
    pool.get(("c",), 100, 16, None, captured=True)
    pool.clear()
    assert [b.nbytes for b in pool.kept] == [600, 100] and pool.kept[0] is made[0]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["k1", "k2", "k3"]),
            st.integers(1, 64).map(lambda n: 16 * n),
            st.integers(0, 64),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([1, 2048, 1 << 30]),
)
def test_any_sequence_of_shapes_and_kernels_finds_its_counters_zero(calls, budget):
    pool, _ = _pool(budget)
    for key, nbytes, zeroed_words in calls:
        _launch(pool, (key,), nbytes, min(nbytes, 16 * zeroed_words))
