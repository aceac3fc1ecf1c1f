"""Result files: atomic writing, loading with clear errors, migration hook and validation; probe documents;
the one SCHEMA_VERSION of stash_core.results."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from stash_core import results
from stash_core.errors import UsageError
from stash_core.results import (
    PROBE_KIND,
    SCHEMA_VERSION,
    check_probe,
    default_result_path,
    load_document,
    load_result,
    upgrade_result,
    validate_result,
    write_result_atomic,
)
from stash_core.results import file as resultfile


def small_doc(run_id: str = "20261122T104100Z-0000abcd") -> dict[str, Any]:
    """A minimal valid document: one phase of 3 iterations from 2 ranks, plus telemetry."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "stash-profile",
        "run_id": run_id,
        "status": "completed",
        "error": None,
        "started_at": "2026-11-22T10:41:00+00:00",
        "finished_at": "2026-11-22T10:42:10+00:00",
        "stash_version": "0.1.0",
        "spec": {"model": "resnet18", "batch_size": 32, "workers_per_node": 2, "nodes": 1},
        "model": {"name": "resnet18", "kind": "image", "param_count": 11689512},
        "fingerprint": {"hostname": "box1"},
        "phases": [
            {
                "name": "R1",
                "workers": 2,
                "status": "completed",
                "iteration_s": {"mean": 0.21, "ci95": 0.01, "n": 3},
                "samples": {"iteration_s": [0.2, 0.21, 0.22], "slowest_rank": [0, 1, 1]},
                "telemetry": {
                    "interval_s": 0.5,
                    "t_s": [0.0, 0.5],
                    "metrics": {"cpu_util_pct": [50.0, 60.0]},
                },
            }
        ],
        "breakdown": None,
    }


def test_write_then_load_round_trips_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "results" / "run.json"  # parent folders do not exist yet
    doc = small_doc()
    assert write_result_atomic(target, doc) == target
    assert load_result(target) == doc
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]


def test_write_turns_non_finite_numbers_into_null(tmp_path: Path) -> None:
    doc = small_doc()
    doc["phases"][0]["iteration_s"]["ci95"] = math.nan
    doc["phases"][0]["samples"]["iteration_s"][1] = math.inf
    path = write_result_atomic(tmp_path / "run.json", doc)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = load_result(path)
    assert loaded["phases"][0]["iteration_s"]["ci95"] is None
    assert loaded["phases"][0]["samples"]["iteration_s"] == [0.2, None, 0.22]


def test_failed_write_keeps_the_old_file_whole(tmp_path: Path) -> None:
    path = write_result_atomic(tmp_path / "run.json", small_doc())
    before = path.read_bytes()
    broken = small_doc()
    broken["spec"]["not_json"] = object()
    with pytest.raises(TypeError):
        write_result_atomic(path, broken)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_write_to_unwritable_path_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="cannot write result file"):
        write_result_atomic(blocker / "sub" / "run.json", small_doc())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "result file is empty"),
        (b"this is not json", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (json.dumps([1, 2, 3]).encode(), "not a Stash result file"),
        (
            json.dumps({"kind": "something-else", "schema_version": SCHEMA_VERSION}).encode(),
            "not a Stash result",
        ),
        (json.dumps({"schema_version": SCHEMA_VERSION, "run_id": "x"}).encode(), "not a Stash result file"),
    ],
)
def test_load_rejects_files_that_are_not_results(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=message) as caught:
        load_result(path)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_load_rejects_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    text = json.dumps(small_doc())
    path.write_text(text[: len(text) // 2])
    with pytest.raises(UsageError, match="not valid JSON \\(truncated or corrupt"):
        load_result(path)


def test_load_reports_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_result(tmp_path / "nope.json")
    with pytest.raises(UsageError, match="is a directory"):
        load_result(tmp_path)


def test_load_refuses_a_newer_schema_version(tmp_path: Path) -> None:
    doc = small_doc()
    doc["schema_version"] = 3
    path = tmp_path / "new.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError) as caught:
        load_result(path)
    expected = f"result file has schema_version 3; this Stash reads up to {SCHEMA_VERSION} - upgrade Stash"
    assert expected in str(caught.value)


@pytest.mark.parametrize("version", [0, "1", True, None])
def test_load_refuses_impossible_schema_versions(tmp_path: Path, version: Any) -> None:
    doc = small_doc()
    doc["schema_version"] = version
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="schema_version"):
        load_result(path)


@pytest.mark.parametrize("key", ["run_id", "status", "started_at", "spec", "phases"])
def test_load_names_a_missing_required_key(tmp_path: Path, key: str) -> None:
    doc = small_doc()
    del doc[key]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=f"missing required key\\(s\\): {key}"):
        load_result(path)


def test_older_documents_are_migrated_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend this Stash reads version 2 and knows how to lift version 1 to it.
    def v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
        doc = dict(doc)
        doc["spec"] = {**doc["spec"], "added_in_v2": True}
        return doc

    monkeypatch.setattr(resultfile, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(resultfile.MIGRATIONS, 1, v1_to_v2)
    upgraded = upgrade_result({**small_doc(), "schema_version": 1})
    assert upgraded["schema_version"] == 2
    assert upgraded["spec"]["added_in_v2"] is True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(status="done"), "status is 'done'"),
        (lambda d: d.update(started_at="yesterday"), "started_at is not an ISO 8601 time"),
        (lambda d: d.update(run_id="  "), "run_id"),
        (lambda d: d["phases"].append(dict(d["phases"][0])), "phase R1 appears twice"),
        (lambda d: d["phases"][0]["samples"].update(data_s=[0.1]), "sample lists differ in length"),
        (lambda d: d["phases"][0]["telemetry"]["metrics"].update(x=[1.0]), "telemetry metric x"),
        (lambda d: d.update(breakdown={"stalls": {"cpu": {"status": "guessed"}}}), "stall cpu status"),
        (lambda d: d.update(phases={"R0": {}}), "phases must be a list"),
    ],
)
def test_validate_rejects_inconsistent_documents(change: Any, message: str) -> None:
    doc = small_doc()
    change(doc)
    with pytest.raises(UsageError, match=message):
        validate_result(doc)


def test_validate_accepts_empty_sample_lists_and_null_breakdown() -> None:
    doc = small_doc()
    doc["status"] = "failed"
    doc["phases"][0]["samples"] = {"iteration_s": [], "data_s": [], "slowest_rank": []}
    validate_result(doc)  # must not raise


def test_default_result_path() -> None:
    assert default_result_path("20261122T104100Z-3f2a9c1b") == Path("results/20261122T104100Z-3f2a9c1b.json")
    assert default_result_path("abc", Path("/tmp/r")) == Path("/tmp/r/abc.json")
    with pytest.raises(UsageError):
        default_result_path("../escape")


def test_result_files_go_beside_their_database_and_never_onto_it() -> None:
    assert resultfile.results_dir_of(Path("/data/runs.duckdb")) == Path("/data/results")
    # A database itself named `results` cannot also be the folder of its result files.
    assert resultfile.results_dir_of(Path("/data/results")) == Path("/data/results-files")
    assert resultfile.results_dir_of("results") == Path("results-files")


def probe_doc(probe_id: str = "probe-20261122T104100Z-0a1b2c3d") -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "kind": PROBE_KIND, "probe_id": probe_id, "allreduce": []}


def test_load_document_reads_results_and_probes(tmp_path: Path) -> None:
    result = write_result_atomic(tmp_path / "run.json", small_doc())
    probe = write_result_atomic(tmp_path / "probe.json", probe_doc())
    assert load_document(result) == small_doc()
    assert load_document(probe) == probe_doc()
    newer = write_result_atomic(
        tmp_path / "newer.json", {**probe_doc(), "schema_version": SCHEMA_VERSION + 1}
    )
    with pytest.raises(UsageError, match=f"{newer}: probe has schema_version {SCHEMA_VERSION + 1}"):
        load_document(newer)
    foreign = write_result_atomic(tmp_path / "foreign.json", {"kind": "other"})
    with pytest.raises(UsageError, match="not a Stash result file"):
        load_document(foreign)
    # every kind it takes is named: `stash spot --json`'s output said only `no "kind": "stash-profile"`,
    # though a simulation file is taken too
    kindless = write_result_atomic(tmp_path / "spot.json", {"pricing": "spot"})
    with pytest.raises(UsageError) as said:
        load_document(kindless, other_kinds=("stash-simulation",))
    assert str(said.value) == (f'{kindless}: not a Stash result file (no "kind"; the files Stash stores have '
                               '"kind" stash-profile, stash-probe, stash-simulation)')  # fmt: skip
    # Stash's own printed JSON is said to be that, with what to store instead
    printed = write_result_atomic(tmp_path / "show.json", {"run": {"run_id": "x"}, "breakdown": None})
    with pytest.raises(UsageError, match=r"show.json: what `stash show --format json` printed, not a result "
                                         r"file: store the result file `stash profile --out` writes \(the "
                                         r"tables of a `stash export` are stored by the dashboard's Upload"):
        load_document(printed)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "stash-profile"}, "not a Stash probe"),
        ({"schema_version": True}, "schema_version True"),
        ({"probe_id": " "}, "empty or non-text probe_id"),
        ({"schema_version": 0}, "schema_version 0, which never existed"),
        ({"allreduce": [5]}, r"probe: allreduce\[0\] must be an object"),
        ({"allreduce": [{"a": 1}]}, r"allreduce\[0\] has no size_bytes or no time_s"),
        ({"allreduce": {"a": 1}}, "allreduce must be a list of objects or null"),
        ({"gradient_allreduce": [1, 2]}, "gradient_allreduce must be an object"),
        ({"p2p": [{"size_bytes": 8, "time_s": 1e-4, "scope": "x\x1b[2J"}]}, "scope holds the control"),
        ({"hostname": "x"}, None),
        ({"started_at": "0001-01-01T00:00:00+01:00"}, "started_at .* outside the representable range"),
        ({"started_at": "9999-12-31T23:00:00-05:00"}, "started_at .* outside the representable range"),
        ({"started_at": "soon"}, "started_at is not an ISO 8601 time"),
        ({"probe_id": "p\x1b[2J"}, "probe_id holds the control character U\\+001B"),
        ({"probe_id": " p1"}, "probe_id ' p1' is empty or starts or ends with a space"),
        ({"device": "tpu"}, "probe: device is 'tpu'; expected one of cpu, cuda"),
        ({"backend": "mpi"}, "probe: backend is 'mpi'; expected one of gloo, nccl"),
        ({"hostname": "vm\x1b[2J"}, "hostname holds the control character U\\+001B"),
        ({"hostname": 5}, "hostname must be text"),
        ({"world_size": 0}, "world_size is 0; expected a whole number from 1"),
        ({"link_gbps": -1.0}, "link_gbps is -1.0; a time or a rate is not negative"),
        ({"allreduce": [{"size_bytes": 1024, "time_s": -0.001}]}, r"allreduce\[0\].time_s is -0.001"),
        ({"allreduce": [{"size_bytes": 8, "time_s": 0.001, "busbw_gbps": -0.008}]}, "busbw_gbps is -0.008"),
        ({"allreduce": [{"size_bytes": 1024, "time_s": "fast"}]}, "time_s must be a number"),
        ({"allreduce": [{"size_bytes": 1.5, "time_s": 0.1}]}, "size_bytes is 1.5; expected a whole number"),
    ],
)
def test_check_probe_refuses_what_it_cannot_read(change: dict[str, Any], message: str | None) -> None:
    """A probe file gets the checks a result file gets (a bad entry was an AttributeError in ingest, a deep
    or out-of-range value a RecursionError or OverflowError, an escape sequence stored and printed raw)."""
    check_probe(probe_doc())  # must not raise
    if message is None:
        check_probe({**probe_doc(), **change})
        return
    with pytest.raises(UsageError, match=message) as caught:
        check_probe({**probe_doc(), **change})
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_a_probe_nested_too_deep_is_refused_without_recursing() -> None:
    hostname: Any = "vm"
    for _ in range(5000):
        hostname = [hostname]
    with pytest.raises(UsageError, match="probe: hostname.* nests deeper than 32 levels"):
        check_probe({**probe_doc(), "hostname": hostname})


def test_a_results_probe_sets_get_the_checks_of_a_probe_file() -> None:
    doc = small_doc()
    doc["probes"] = [{"allreduce": [{"size_bytes": 8, "time_s": 0.1}]}]
    upgrade_result(doc)  # must not raise
    doc["probes"] = [{"allreduce": [5]}]
    with pytest.raises(UsageError, match=r"probes\[0\].allreduce\[0\] must be an object"):
        upgrade_result(doc)
    doc["probes"] = [{"hostname": "vm\x1b[2J", "allreduce": []}]
    with pytest.raises(UsageError, match=r"probes\[0\].hostname holds the control character"):
        upgrade_result(doc)


def test_the_package_is_the_api_with_one_schema_version() -> None:
    assert results.SCHEMA_VERSION is resultfile.SCHEMA_VERSION
    assert set(results.__all__) >= {"SCHEMA_VERSION", "write_result_atomic", "load_result", "upgrade_result"}
    assert all(hasattr(results, name) for name in results.__all__)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        ('{"kind": "stash-profile", "run_id": ' + "7" * 5000 + "}", "too long"),
    ],
)
def test_hostile_json_is_one_line_not_a_crash(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "hostile.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message) as caught:
        load_document(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: doc["spec"].update(deep=json.loads("[" * 40 + "]" * 40)), "spec.deep"),
        (lambda doc: doc["spec"].update(big=10**30), "spec.big is an integer beyond 64 bits"),
        # 180 MB in one field was stored whole, and printed by `stash show`
        (lambda doc: doc["spec"].update(pad="x" * 1_000_001), "spec.pad is a text of 1,000,001 characters"),
        (lambda doc: doc["spec"].update({"k" * 1_000_001: 1}), "spec has a key of 1,000,001 characters"),
        (lambda doc: doc["spec"].update(far=float("inf")), "spec.far is a number too large"),
        (lambda doc: doc.update(run_id="x\x1b[2J"), "run_id holds the control character U\\+001B"),
        (lambda doc: doc["fingerprint"].update(hostname="\u2067box"), "fingerprint.hostname"),
        (
            lambda doc: doc["phases"][0]["samples"].update(iteration_s=[0.2, [0.21], 0.22]),
            "samples.iteration_s",
        ),
        (
            lambda doc: doc["phases"][0]["telemetry"]["metrics"].update(cpu_util_pct=[50.0, "x"]),
            "cpu_util_pct",
        ),
        (lambda doc: doc.update(started_at="0001-01-01T00:00:00"), "started_at .* representable range"),
        (lambda doc: doc.update(finished_at="2500-01-01T00:00:00+00:00"), "finished_at"),
        # stored without a word; what-if then divided the text by 2**30 (a traceback)
        (lambda doc: doc["fingerprint"].update(memory_bytes="x"), "fingerprint.memory_bytes must be a"),
        (lambda doc: doc["fingerprint"].update(memory_bytes=-1), "fingerprint.memory_bytes is -1"),
        (lambda doc: doc["spec"].update(max_phase_s=[1]), "spec.max_phase_s must be a number"),
        (lambda doc: doc["spec"].update(stalls=["compute\x1b[31m"]), "spec.stalls holds 'compute"),
        (lambda doc: doc.update(breakdown={"stalls": []}), "breakdown.stalls must be an object"),  # "none"
        # shown as vm-2vcpu, resnet10, and other names than those: stored, then told apart by no one
        (lambda doc: doc["spec"].update(instance="vm\u200b-2vcpu"), "spec.instance holds the invisible "),
        (lambda doc: doc["spec"].update(model="resnet10\u200b"), "spec.model holds the invisible character"),
        (lambda doc: doc.update(run_id=doc["run_id"] + "\u200b"), "run_id holds the invisible character"),
        # labels `stash profile --instance` refuses: no --instances could name them
        (lambda doc: doc["spec"].update(instance="all"), "spec.instance 'all' is taken"),
        (lambda doc: doc["spec"].update(instance="a:b"), "spec.instance 'a:b' holds a colon"),
        (lambda doc: doc["spec"].update(instance="g5.xlarge\u00a0"), "spec.instance .* U\\+00A0"),
    ],
)
def test_values_no_store_or_screen_can_take_are_refused_naming_the_field(change: Any, message: str) -> None:
    doc = small_doc()
    change(doc)
    with pytest.raises(UsageError, match=message):
        validate_result(doc)


def test_nan_stays_unknown_and_is_not_refused() -> None:
    doc = small_doc()
    doc["phases"][0]["samples"]["iteration_s"][1] = math.nan
    validate_result(doc)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda doc: doc["phases"][0]["samples"].update(iteration_s=[0.2, -0.21, 0.22]), "negative time"),
        (lambda doc: doc.update(finished_at="2026-11-22T10:40:00+00:00"), "before started_at"),
        (lambda doc: doc["spec"].update(workers_per_node=1_000_000), "spec.workers_per_node is 1000000"),
        (lambda doc: doc["spec"].update(nodes=0), "spec.nodes is 0"),
    ],
)
def test_values_no_run_can_have_are_refused(change, says) -> None:
    doc = small_doc()
    change(doc)
    with pytest.raises(UsageError, match=says):
        resultfile.validate_result(doc)


def test_an_output_may_replace_a_result_file_but_not_one_named_after_its_run(tmp_path: Path) -> None:
    """`--out results/<another run>.json` replaced that run's own file with this one's (a file whose name lied
    about its run); a result file of the user's own naming may be written over, as before."""
    mine = tmp_path / "result.json"
    mine.write_text(json.dumps({"kind": "stash-profile", "run_id": "20261130T010000Z-aaaa0001"}))
    resultfile.check_replaceable(mine, "--out")
    theirs = tmp_path / "20261130T010000Z-aaaa0001.json"
    theirs.write_text(mine.read_text())
    with pytest.raises(UsageError, match="is the result file of run 20261130T010000Z-aaaa0001"):
        resultfile.check_replaceable(theirs, "--out")
    link = tmp_path / "link.json"  # a link to that file was taken as a file of the user's naming
    link.symlink_to(theirs)
    with pytest.raises(UsageError, match="is the result file of run 20261130T010000Z-aaaa0001"):
        resultfile.check_replaceable(link, "--out")
    named = tmp_path / "results" / "20261130T010000Z-aaaa0001.json"  # a link named after the run, to a file
    named.parent.mkdir()  # of the user's naming: written through, the name would lie
    named.symlink_to(mine)
    with pytest.raises(UsageError, match="is the result file of run 20261130T010000Z-aaaa0001"):
        resultfile.check_replaceable(named, "--out")


def test_a_byte_order_mark_is_no_content(tmp_path: Path) -> None:
    """An editor's UTF-8 BOM made a result file "not valid JSON (truncated or corrupt ...)"."""
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(small_doc()).encode())
    assert load_result(path)["run_id"] == small_doc()["run_id"]


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [("runs.json", b'{"run_id": "a"}\n{"run_id": "b"}\n', "one JSON object per line"),
     ("runs.csv", b"run_id,model\na,resnet10\n", "a CSV file"),
     ("runs.parquet", b"PAR1" + bytes(range(200)) + b"PAR1", "a Parquet file")],
)  # fmt: skip
def test_a_table_of_an_export_is_said_to_be_one(tmp_path: Path, name: str, content: bytes, said: str) -> None:
    """Was "not valid JSON (truncated or corrupt ...)" or "not UTF-8 text"."""
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UsageError, match=f"^{path}: {said}") as caught:
        load_result(path)
    assert "the dashboard's Upload page stores an export's tables" in str(caught.value)


@pytest.mark.parametrize("started, finished", [
    ("1900-01-01T00:30:00+01:00", None),  # 1899-12-31 23:30 in UTC, as the store holds it
    ("2026-12-01T00:00:00+00:00", "2262-04-10T23:59:59-23:59"),  # 2262-04-11 23:58:59 in UTC
])  # fmt: skip
def test_times_are_held_to_the_range_in_utc_as_stored(started, finished):
    """The range was checked on the clock time, its offset ignored: both were stored, and refused when their
    export was uploaded again ("outside the representable range")."""
    doc = {**small_doc(), "started_at": started, "finished_at": finished}
    with pytest.raises(UsageError, match="outside the representable range"):
        validate_result(doc)
