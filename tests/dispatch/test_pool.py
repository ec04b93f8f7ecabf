"""The model's candidate pool: every layout and batching weighs the others' records too, surcharged."""

from __future__ import annotations

from pathlib import Path

from autotune.core.types import Problem
from autotune.dispatch import model
from autotune.dispatch.table import table_for
from autotune.kernels.limits import profile_for_arch

ROOT = Path(__file__).resolve().parents[2]
SLUG = "nvidia-h100-80gb-hbm3"


def test_a_layout_tuned_at_two_big_shapes_weighs_the_other_layouts_records():
    # The H100 folder has nt records at 4096^3 and 8192 x 8192 x 1024 only; nn at some fifty shapes.
    table = table_for(ROOT / "results", SLUG)
    nt = table._pool(Problem(3509, 4, 3322, "nt"))
    own = [s for s, _ in nt if s.layout == "nt" and s.batch == 1]
    assert len({(s.M, s.N, s.K) for s in own}) == 2
    assert nt[: len(own)] == [(s, f) for s, f in nt if s.layout == "nt" and s.batch == 1]  # its own first
    assert {"nn", "tn", "tt"} <= {s.layout for s, _ in nt} and any(s.batch > 1 for s, _ in nt)
    assert any(s.layout == "nn" and min(s.M, s.N) <= 64 for s, _ in nt)  # shapes of few rows or columns
    # nn, with some fifty shapes of its own, weighs the others too, after its own.
    nn = table._pool(Problem(3509, 4, 3322))
    own_nn = [(s, f) for s, f in nn if s.layout == "nn" and s.batch == 1]
    assert nn[: len(own_nn)] == own_nn and len(own_nn) > 40 and len(nn) == len(table.records)
    # A batch of the nn layout (three batched records) borrows too.
    assert any(s.batch == 1 for s, _ in table._pool(Problem(384, 384, 64, batch=96)))


def test_a_few_rows_call_in_a_transposed_layout_gets_a_small_tile():
    # Before, the nt pool held the two big shapes' 128 x 256 tiles, chosen even for 4 columns.
    table = table_for(ROOT / "results", SLUG)
    shape, _, cfg, ms = table.choose(Problem(3509, 4, 3322, "tn"), None, profile_for_arch("sm_90"))
    assert ms is not None and cfg["BN"] < 256 and (cfg["TRANS_A"], cfg["TRANS_B"]) == (1, 0)
    assert shape.layout != "tn"  # measured elsewhere, built for tn


def test_a_measurement_of_another_layout_or_batching_is_surcharged():
    at = Problem(1024, 1024, 1024)
    assert model.foreign(at, Problem(50, 60, 70)) == 1.0
    assert model.foreign(at, Problem(50, 60, 70, "nt")) == 1.0 + model.FOREIGN_WEIGHT
    assert model.foreign(at, Problem(50, 60, 70, "nt", 8)) == 1.0 + 2 * model.FOREIGN_WEIGHT
    assert model.foreign(Problem(8, 8, 8, batch=4), Problem(50, 60, 70, batch=9)) == 1.0
