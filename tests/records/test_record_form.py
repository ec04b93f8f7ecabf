"""A record's forms on disk: schema 1 (each entry whole), schema 2 (the fields every entry shares
once) and schema 3 (what the store writes: schema 2 with each config's name left to its
parameters) read to the same record, checked as strictly."""

import json

import pytest
from helpers import GPU
from helpers import record_entry as _entry

from autotune.core.types import Problem, UserError
from autotune.records.results import load_record, record_path
from autotune.records.store import update_record
from autotune.records.validate import fastest

P = Problem(1000, 1000, 1000)


def _old_form(tmp_path, h100):
    """A record as a schema 1 file holds it (indented, each entry whole), and its path.

    Its entries differ in versions (searched with two autotune versions), and one leaves its
    problem's layout unnamed where the record's names it: each keeps its own.
    """
    families = {
        "coarse1d": _entry("coarse1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8}, 15000.0, h100),
        "tiled": _entry("tiled", {"TILE": 32}, 8000.0, h100),
        "coarse2d": _entry("coarse2d", {"BK": 16, "BM": 64, "BN": 128, "TM": 8, "TN": 4}, 12000.0, h100),
    }
    families["tiled"]["versions"] = {"cupy": "x", "autotune": "0.0.9"}  # the others': {"cupy": "x"}
    families["coarse2d"]["problem"] = {"M": 1000, "N": 1000, "K": 1000}  # the record's names its layout
    data = {"schema": 1, "gpu": GPU, "problem": P.as_dict(), "families": families, "best": fastest(families)}
    path = record_path(tmp_path, GPU["slug"], P)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _rewrite(tmp_path, path):
    """Load then save through the store, as the committed records were rewritten."""
    before = load_record(path)
    assert update_record(tmp_path, before["gpu"], Problem(**before["problem"]), {}) == (path, [])
    return before


def test_an_old_form_record_is_rewritten_without_loss(tmp_path, h100):
    path = _old_form(tmp_path, h100)
    old_size = path.stat().st_size
    before = _rewrite(tmp_path, path)
    after = load_record(path)
    assert after == before and json.dumps(after) == json.dumps(before)  # key order too
    assert after["schema"] == 1 and "shared" not in after  # the record every reader got before
    assert path.stat().st_size < 0.6 * old_size
    # Its entries do not share one object: an edit of one is not an edit of all.
    after["families"]["tiled"]["limits"]["sm_count"] = 1
    assert after["families"]["coarse1d"]["limits"]["sm_count"] == h100.to_dict()["sm_count"]


def test_the_new_form_holds_what_entries_share_once(tmp_path, h100):
    path = _old_form(tmp_path, h100)
    _rewrite(tmp_path, path)
    text = path.read_text()
    stored = json.loads(text)
    assert stored["schema"] == 3 and list(stored) == ["schema", "gpu", "problem", "shared", "families", "best"]
    shared, fams = stored["shared"], stored["families"]
    assert shared["limits"] == h100.to_dict() and shared["command"] == "autotune search --size 1000"
    assert "versions" not in shared  # two autotune versions: each entry keeps its own
    assert [f["versions"].get("autotune") for f in fams.values()] == [None, "0.0.9", None]
    assert "problem" not in fams["coarse1d"] and fams["coarse2d"]["problem"] == {"M": 1000, "N": 1000, "K": 1000}
    assert all("limits" not in e and "command" not in e for e in fams.values())
    assert all(list(e["config"]) == ["family", "params"] for e in fams.values())  # no names
    # A line for each field of the record and each entry: a diff names the entries that changed.
    lines = text.splitlines()
    assert len(lines) == 9 + len(fams) and lines[6].startswith('    "coarse1d": {"config":')


def test_save_then_load_gives_the_entries_saved(tmp_path, h100):
    fast = _entry("coarse1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8}, 15000.0, h100)
    slow = _entry("tiled", {"TILE": 32}, 8000.0, h100)
    path, changed = update_record(tmp_path, GPU, P, {"tiled": slow})
    assert changed == ["tiled"] and "shared" not in json.loads(path.read_text())  # one entry shares with none
    assert load_record(path)["families"]["tiled"] == json.loads(json.dumps(slow))
    update_record(tmp_path, GPU, P, {"coarse1d": fast})
    rec = load_record(path)
    assert rec["families"] == json.loads(json.dumps({"coarse1d": fast, "tiled": slow})) and rec["best"] == "coarse1d"
    assert "limits" in json.loads(path.read_text())["shared"]


def test_a_schema_1_record_loads_as_before(tmp_path, h100):
    path = _old_form(tmp_path, h100)
    stored = json.loads(path.read_text())
    rec = load_record(path)
    assert rec == stored and list(rec["families"]) == ["coarse1d", "tiled", "coarse2d"]


def _edited(tmp_path, h100, change):
    path = _old_form(tmp_path, h100)
    _rewrite(tmp_path, path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def _set_shared(key, value):
    def change(data):
        data["shared"][key] = value

    return change


def _both(data):
    data["families"]["tiled"]["limits"] = data["shared"]["limits"]


@pytest.mark.parametrize(
    "change, fragment",
    [
        (_set_shared("limits", {"sm_count": 0}), "entry coarse1d: limits.sm_count is 0, not an integer from 1 to 4096"),
        (_set_shared("command", 7), "entry coarse1d: command is 7, not text"),
        (_set_shared("spill_bytes", -1), "entry coarse1d: spill_bytes is -1, not an integer from 0 to 2147483647"),
        (_set_shared("date", "\x1b[2J"), "date is '\\x1b[2J': holds '\\x1b', not printable text"),
        (lambda d: d.update(shared=[1]), "'shared' is not an object"),
        (_both, "entry tiled: 'limits' is both its own and shared"),
        (lambda d: d.update(families={}, best=None), "'shared' holds fields but there are no families"),
        (lambda d: d["families"].update(tiled=[]), "entry 'tiled' is not an object"),
        (lambda d: d["families"]["tiled"].update(problem={"M": 1, "N": 1, "K": 1}), "tiled was measured at 1x1x1"),
        (lambda d: d.update(schema=4), "results schema 4, this autotune reads 1"),
        (lambda d: d["families"]["tiled"]["config"].update(name="tiled_TILE16"), "config name 'tiled_TILE16'"),
        (lambda d: d["families"]["tiled"]["config"]["params"].update(TILE=1.5), "tiled"),
    ],
)
def test_a_bad_new_form_record_is_one_clear_error(tmp_path, h100, change, fragment):
    path = _edited(tmp_path, h100, change)
    with pytest.raises(UserError) as exc:
        load_record(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and fragment in msg and "\n" not in msg
    assert "schema 4" in msg or "corrupted results file" in msg


def test_a_schema_2_record_with_its_names_loads_as_the_schema_3_one(tmp_path, h100):
    path = _old_form(tmp_path, h100)
    _rewrite(tmp_path, path)
    new = load_record(path)
    data = json.loads(path.read_text())
    for fam, e in data["families"].items():  # the names written out, as schema 2 files hold them
        e["config"]["name"] = new["families"][fam]["config"]["name"]
    data["schema"] = 2
    path.write_text(json.dumps(data))
    old = load_record(path)
    assert old == new and json.dumps(old) == json.dumps(new)  # key order too
    assert old["families"]["tiled"]["config"] == {"family": "tiled", "params": {"TILE": 32}, "name": "tiled_TILE32"}
