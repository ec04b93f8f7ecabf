"""Search strategies behind one seam: a new one is one class, and nothing else asks for one by name."""

import ast
import json
from pathlib import Path

import pytest

from autotune import cli
from autotune.core.types import UserError
from autotune.kernels.space import Space
from autotune.search import replay, strategies
from autotune.search.strategies import base

SEARCH = Path(__file__).resolve().parents[2] / "autotune" / "search"


def test_a_new_strategy_is_one_class_registered_at_run_time(tmp_path, h100, monkeypatch, capsys):
    """A strategy defined here (as a new module of search/strategies/ would define it) is a
    choice of `--sampler`, with its summary in the help, and a `--replay` search runs it: here
    every valid point once, from the top of the valid list down, through the study's queue."""
    import optuna

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # registered for this test only

    @strategies.register
    class Descending(strategies.Strategy):
        name = "descending"
        summary = "the valid points from the last down"
        queue_only = True

        def sampler(self, seed):
            return optuna.samplers.RandomSampler(seed=seed)

        def to_queue(self, plan, study, first):
            queued = {t.user_attrs.get("config") for t in study.get_trials(deepcopy=False)}
            return plan.valid[::-1][: plan.budget], queued

    valid = Space.load("coarse2d").enumerate(h100).valid
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"table": {c.name: 1000.0 + i for i, c in enumerate(valid)}}))
    measured, plain = [], replay.ReplayEvaluator.evaluate

    def evaluate(self, configs, problem, retime=False):
        if not retime:
            measured.extend(c.name for c in configs)
        return plain(self, configs, problem, retime)

    monkeypatch.setattr(replay.ReplayEvaluator, "evaluate", evaluate)
    args = ["search", "--size", "512", "--family", "coarse2d", "--trials", "6", "--replay", str(table)]
    args += ["--results", str(tmp_path / "r"), "--yes", "--quiet", "--no-seeds", "--sampler", "descending"]
    assert cli.main(args) == 0
    assert measured == [c.name for c in valid[::-1][:6]]  # in the queue's order: the window is one worker's
    record = json.loads(next((tmp_path / "r").glob("*/512x512x512.json")).read_text())
    assert record["families"]["coarse2d"]["search"]["sampler"] == "descending"
    with pytest.raises(SystemExit):
        cli.main(["search", "--help"])
    assert "descending: the valid points from the last down" in capsys.readouterr().out


def test_an_unknown_strategy_is_a_user_error_and_a_name_is_registered_once():
    with pytest.raises(UserError, match="unknown sampler 'cmaes'; choose from"):
        strategies.get("cmaes")

    class Other(strategies.Strategy):
        name = "tpe"

    with pytest.raises(ValueError, match="two strategies named 'tpe'"):
        strategies.register(Other)
    assert type(strategies.get("tpe")).__name__ == "TPE"


def test_no_search_module_outside_strategies_names_a_strategy():
    """What differs by strategy is asked of the strategy: no string of a strategy's name appears
    in the search layer outside strategies/ (its default is strategies.DEFAULT)."""
    known = set(strategies.names())
    found = []
    for path in SEARCH.rglob("*.py"):
        if "strategies" in path.relative_to(SEARCH).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in known:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not found
