"""A workload file's fields: each a JSON number, refused by name and shown short when it is not."""

from __future__ import annotations

import json

import pytest
from support import REPO

from stash_core.errors import UsageError
from stash_core.spot.inputs import load_workload, update_workload

DOC = {"param_mb": 1, "solo_bandwidth_mbps": 1, "a1": 0.1, "b1": 0.1, "g": [1, 2, 3, 4, 5]}


def _load(tmp_path, **fields):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**DOC, **fields}))
    return load_workload(path)[0]


def test_the_contention_margin_is_a_number_like_the_other_fields(tmp_path):
    assert _load(tmp_path).contention_margin == 0.0
    assert _load(tmp_path, contention_margin=0.03).contention_margin == 0.03
    with pytest.raises(UsageError, match=r'^workload file: contention_margin must be a number, got "abc"$'):
        _load(tmp_path, contention_margin="abc")
    with pytest.raises(UsageError, match=r'^workload file: contention_margin must be a number, got "0.1"$'):
        _load(tmp_path, contention_margin="0.1")
    with pytest.raises(UsageError, match="contention_margin must be a number, got null"):
        _load(tmp_path, contention_margin=None)


def test_a_misspelt_field_is_refused_and_a_note_kept(tmp_path):
    """`contention_margn` planned without its margin, silently; a note of the file's own (`source`, as the
    shipped example has) is kept."""
    with pytest.raises(UsageError, match=r'^workload file: unknown field "contention_margn": did you mean '
                                         r"contention_margin\?$"):
        _load(tmp_path, contention_margn=0.03)
    assert _load(tmp_path, source="measured on the lab's cluster").contention_margin == 0.0


def test_a_400_digit_number_is_shown_short(tmp_path):
    with pytest.raises(UsageError) as raised:
        _load(tmp_path, a1=10**400)
    message = str(raised.value)
    assert message.startswith("workload file: a1 must be a number, got 1000") and message.endswith("...")
    assert len(message) < 100


@pytest.mark.parametrize("what", ["database", "simulation"])
def test_a_workload_path_that_holds_another_kind_of_file_is_refused_and_left_as_it_is(tmp_path, what):
    """spot-fit-loss --workload given the database said "not UTF-8 text (byte 2)"; given a stored
    simulation's result file, it merged g and loss_fit into it."""
    from stash_core.spot.inputs import check_writable

    path = tmp_path / ("r.duckdb" if what == "database" else "sim-1.json")
    if what == "database":
        import duckdb

        duckdb.connect(str(path)).close()
    else:
        path.write_text(json.dumps({"kind": "stash-simulation", "simulation_id": "sim-1"}))
    before = path.read_bytes()
    with pytest.raises(UsageError, match="not a workload file: choose another path"):
        check_writable(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(("field", "value"), [("solo_bandwidth_mbps", -5), ("a1", -1), ("param_mb", 0)])
def test_a_field_that_must_be_positive_is_named_as_the_file_has_it(tmp_path, field, value):
    """'workload solo_bandwidth_Bps must be a positive number, got -5000000.0' named the model's field in
    another unit than the file's."""
    with pytest.raises(UsageError, match=rf"^workload file: {field} must be a positive number, got {value}$"):
        _load(tmp_path, **{field: value})


@pytest.mark.parametrize("field", ["param_mb", "solo_bandwidth_mbps"])
def test_a_figure_in_mb_past_a_double_in_bytes_is_named_as_the_file_has_it(tmp_path, field):
    """param_mb 1e308 said "param_bytes must be a positive number, got inf": neither the field nor the value
    the file gives."""
    said = rf"^workload file: {field} must be a finite number of MB, got 1e\+308$"
    with pytest.raises(UsageError, match=said):
        _load(tmp_path, **{field: 1e308})


def test_a_model_size_given_twice_is_one_size_or_refused(tmp_path):
    """A profile writes param_bytes; a param_mb left beside it by an older model was ignored unsaid."""
    assert _load(tmp_path, param_bytes=1_004_000).param_bytes == 1_004_000  # 1 MB as written, rounded
    with pytest.raises(UsageError, match=r"^workload file: param_bytes 22056 and param_mb 1 give two model"):
        _load(tmp_path, param_bytes=22056)


def test_a_measured_model_size_replaces_the_files_rounded_one(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**DOC, "param_mb": 11.54, "note": "kept"}))
    doc = update_workload(path, {"param_bytes": 22056})
    assert "param_mb" not in doc and json.loads(path.read_text()) == {**doc, "note": "kept"}
    assert load_workload(path)[0].param_bytes == 22056


def test_another_tools_json_is_not_written_into(tmp_path):
    """spot-fit-loss --workload package.json wrote g and loss_fit into it, exit 0."""
    path = tmp_path / "package.json"
    path.write_text('{"name": "my-pkg", "version": "1.0"}')
    with pytest.raises(UsageError, match="holds none of a workload's fields"):
        update_workload(path, {"g": [1, 2, 3, 4, 5]})
    assert json.loads(path.read_text()) == {"name": "my-pkg", "version": "1.0"}
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert update_workload(empty, {"g": [1, 2, 3, 4, 5]}) == {"g": [1, 2, 3, 4, 5]}


def _offers(tmp_path, **fields):
    from stash_core.spot.inputs import build_offers

    doc = {**DOC, "compute_s": {"g3.8xlarge": 0.8, "g4dn.4xlarge": 0.5}, **fields}
    return build_offers(tmp_path / "r.duckdb", [("g3.8xlarge", 2), ("g4dn.4xlarge", 2)], doc, "spot")


def test_eq_10_gives_the_batch_per_gpu_the_workload_leaves_to_it(tmp_path):
    """The planner read batch_per_gpu alone: a2, b2 written by spot-memory (eq. 10) were never used."""
    # 64 samples per GiB less 10: an M60 (8 GiB) holds 502 -> 256, a T4 (16 GiB) 1014 -> 512 per GPU
    offers = _offers(tmp_path, a2=64.0, b2=-10.0)
    assert [(o.worker.instance, o.worker.batch) for o in offers] == [
        ("g3.8xlarge", 2 * 256),  # two M60s
        ("g4dn.4xlarge", 512),
    ]
    given = _offers(tmp_path, a2=64.0, b2=-10.0, batch_per_gpu={"g3.8xlarge": 128})  # a type's own stays
    assert [o.worker.batch for o in given] == [2 * 128, 512]
    with pytest.raises(UsageError, match="g3.8xlarge must be a positive whole number \\(or a2, b2"):
        _offers(tmp_path)


def test_a_batch_that_a_gpu_fit_says_does_not_fit_is_refused(tmp_path):
    fit = {"a2": 64.0, "b2": -10.0, "batch_per_gpu": 512}
    with pytest.raises(UsageError, match="g3.8xlarge: batch_per_gpu 512 does not fit its GPU's 8 GiB .* 256"):
        _offers(tmp_path, **fit, memory_fit={"device": "cuda"})
    # a fit of the CPU's resident set stands in for a GPU's: not a reason to refuse
    assert [o.worker.batch for o in _offers(tmp_path, **fit, memory_fit={"device": "cpu"})] == [1024, 512]


def test_a_given_compute_time_paired_with_eq_10s_batch_is_said(tmp_path):
    """A file with compute_s and a2, b2 but no batch_per_gpu planned each worker at eq. 10's batch with a time
    the file does not say was taken there, without a word (a plan's cost almost halved)."""
    from stash_core.spot.inputs import eq10_pairing_notes

    doc = {**DOC, "compute_s": {"g3.8xlarge": 0.8, "g4dn.4xlarge": 0.5}, "a2": 64.0, "b2": -10.0,
           "batch_per_gpu": {"g4dn.4xlarge": 128}}  # fmt: skip
    notes = eq10_pairing_notes(doc, _offers(tmp_path, **{k: doc[k] for k in ("a2", "b2", "batch_per_gpu")}))
    assert notes == ["compute_s is taken as each type's time at eq. 10's batch (the workload gives no "
                     "batch_per_gpu for it): g3.8xlarge 256 per GPU; if one was timed at another batch, give "
                     "that batch_per_gpu"]  # fmt: skip
    assert eq10_pairing_notes({**doc, "batch_per_gpu": 64}, _offers(tmp_path, batch_per_gpu=64)) == []
    # and the plan says it, beside its other notes
    from stash_core.api import plan_spot

    workload = json.loads((REPO / "examples" / "workload.json").read_text())
    workload.pop("batch_per_gpu")
    path = tmp_path / "w10.json"
    path.write_text(json.dumps({**workload, "a2": 200.0, "b2": -50.0}))
    plan = plan_spot(path, {"g3.8xlarge": 5}, 0.8, 2600, db=tmp_path / "r.duckdb")
    assert [note for note in plan.notes if note.startswith("compute_s is taken as each type's time at eq")]


def test_all_among_the_offers_is_refused_for_what_it_is():
    """It was 'not in the catalog (stash instances add all ...)', a command that refuses the name."""
    from stash_core.spot.inputs import parse_offers

    with pytest.raises(UsageError, match="'all' is not taken here: a spot plan needs each instance type"):
        parse_offers("g3.8xlarge:2,all")


def test_every_spot_answer_says_a_compute_time_taken_at_eq_10s_batch_once(tmp_path, capsys):
    """The page said it twice (its spot and on-demand plans each gave it); re-plans and simulations never."""
    from stash_core.cli.main import main
    from stash_core.views import spot

    workload = json.loads((REPO / "examples" / "workload.json").read_text())
    workload.pop("batch_per_gpu")
    text = json.dumps({**workload, "a2": 200.0, "b2": -50.0})
    path = tmp_path / "w10.json"
    path.write_text(text)
    db = tmp_path / "r.duckdb"
    answer = spot.plan(db, text, (("g3.8xlarge", 5),), 0.8, 2600)
    assert len([note for note in answer.notes if "eq. 10's batch" in note]) == 1
    common = ["--workload", str(path), "--instances", "g3.8xlarge:5", "--target-loss", "0.8", "--db", str(db)]
    assert main(["spot-replan", *common, "--running", "g3.8xlarge:2", "--current-loss", "1.5",
                 "--budget-s", "2600"]) in (0, 1)  # fmt: skip
    simulate = ["spot-simulate", *common, "--deadline-s", "2600", "--rate-per-h", "0.5", "--runs", "5"]
    assert main(simulate) == 1  # no strategy's plan meets 2,600 s at eq. 10's batch; its notes are said alike
    assert capsys.readouterr().out.count("eq. 10's batch") == 2
