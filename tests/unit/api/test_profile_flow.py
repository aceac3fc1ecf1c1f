"""The measuring step of a profile (api/profile_flow.py) without machines: what it adds to the run saved;
and the lines a profile prints to paste into a shell: the dashboard's command and the ingest that stores a
run later name the same files from any folder (absolute paths, quoted for the shell)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest
from support import REPO

from stash_core.api import profile_flow
from stash_core.api.database_notes import new_database_note
from stash_core.api.profile_flow import _save_problem
from stash_core.engine import link_watch
from stash_core.engine.progress import Reporter
from stash_core.errors import MeasurementError, ProfileEnded
from stash_core.results.file import PROBE_KIND
from stash_core.spec import ProfileSpec

CHANGED = "the emulated cluster's links changed while it ran (from ... to ...)"


class Messages(Reporter):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


@pytest.fixture
def measured(monkeypatch, tmp_path: Path):
    """_measure_and_save with the run replaced: returns (run, reporter) for a breakdown or a failed run."""
    saved: list[dict] = []
    monkeypatch.setattr(profile_flow, "remote_hosts", lambda spec, state: None)
    monkeypatch.setattr(link_watch, "link_change_warning", lambda remote, spec, state: CHANGED)
    saved_nowhere = (None, [], None, False)
    monkeypatch.setattr(
        profile_flow, "save_result", lambda doc, out, no_store, db: (saved.append(doc), saved_nowhere)[1]
    )

    def measure(breakdown: dict | None):
        def run_profile(spec, model_info, data, reporter, remote):
            doc = {"run_id": "r", "status": "completed", "breakdown": breakdown}
            if breakdown is None:
                raise ProfileEnded({**doc, "status": "failed"}, MeasurementError("lost"))
            return doc

        monkeypatch.setattr(profile_flow, "run_profile", run_profile)
        reporter = Messages()
        spec = ProfileSpec(model="resnet18", batch_size=2, nodes=2, cluster="emulated")
        args = argparse.Namespace(out=None, no_store=True)
        profile_flow._measure_and_save(spec, {}, None, args, tmp_path / "db.duckdb", None, reporter)
        return saved[-1], reporter

    return measure


def test_links_changed_during_the_profile_are_a_warning_of_its_breakdown(measured):
    doc, reporter = measured({"warnings": ["earlier"]})
    assert doc["breakdown"]["warnings"] == ["earlier", CHANGED] and not reporter.lines


def test_links_changed_and_put_back_while_the_runs_went_on_are_seen_at_a_launch_s_end(monkeypatch, tmp_path):
    """Only the links at the start and at the end were compared: a rate set to 25 Mbit/s for two launches and
    put back went unsaid, and the run was stored as measured at 200 Mbit/s."""
    links = iter([CHANGED, None, None])  # at the end of the first launch, of the second, at the end
    monkeypatch.setattr(link_watch, "link_change_warning", lambda remote, spec, state: next(links))
    monkeypatch.setattr(profile_flow, "remote_hosts", lambda spec, state: None)
    saved: list[dict] = []
    nowhere = (None, [], None, False)
    monkeypatch.setattr(profile_flow, "save_result", lambda doc, *_: (saved.append(doc), nowhere)[1])

    def run_profile(spec, model_info, data, reporter, remote):
        for _ in range(2):
            reporter.phase_finished({"name": "R1n", "status": "completed"})
        return {"run_id": "r", "status": "completed", "breakdown": {"warnings": []}}

    monkeypatch.setattr(profile_flow, "run_profile", run_profile)
    spec = ProfileSpec(model="resnet18", batch_size=2, nodes=2, cluster="emulated")
    args = argparse.Namespace(out=None, no_store=True)
    profile_flow._measure_and_save(spec, {}, None, args, tmp_path / "db.duckdb", None, Messages())
    assert saved[-1]["breakdown"]["warnings"] == [CHANGED]


def test_without_a_breakdown_the_change_is_said_as_the_run_ends(measured):
    doc, reporter = measured(None)
    assert doc["status"] == "failed" and reporter.lines == [f"warning: {CHANGED}"]


ODD = "sp ace/my $HOME.duckdb"  # a space would split the word, $HOME would be expanded


def test_the_dashboards_command_names_the_database_absolutely_and_run_sh_of_this_checkout(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for at_start, before, after in ((True, "opens it with ", ", or its sidebar)"),
                                    (False, "opened on it (", ", or its sidebar)")):  # fmt: skip
        note = new_database_note(Path(ODD), at_start=at_start)
        command = note.split(before, 1)[1].split(after, 1)[0]
        assignment, run_sh = shlex.split(command)
        assert assignment == f"STASH_DB={tmp_path / ODD}", note
        assert run_sh == str(REPO / "run.sh") and Path(run_sh).is_file(), note


def test_a_database_whose_folder_does_not_exist_says_the_folder_is_made_too(tmp_path: Path) -> None:
    """`--db /nonexistent/dir/x.duckdb` made the folders and said only that the database was new."""
    missing = tmp_path / "typo" / "x.duckdb"
    assert f"nor its folder {missing.parent} (made for it)" in new_database_note(missing, at_start=True)
    assert "nor its folder" not in new_database_note(tmp_path / "x.duckdb", at_start=True)


def test_the_ingest_that_stores_a_run_later_names_its_files_absolutely(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out, db = Path("res ults/r $x.json"), Path(ODD)
    line = _save_problem("r1", out, db, None, RuntimeError("No space left on device"), no_store=False)
    command = line.split("store it later with `", 1)[1].rstrip("`")
    assert shlex.split(command) == ["stash", "ingest", str(tmp_path / out), "--db", str(tmp_path / db)], line


def _probe_doc(probe_id: str) -> dict:
    return {"kind": "stash-probe", "schema_version": 1, "probe_id": probe_id, "run_id": None, "phase": None,
            "started_at": "2026-11-22T10:42:00+00:00", "hostname": "box1", "instance": None,
            "backend": "gloo",
            "device": "cpu", "world_size": 2, "nodes": 1, "workers_per_node": 2, "link_gbps": None,
            "allreduce": [{"size_bytes": 4096, "repetitions": 4, "time_s": 0.001, "time_min_s": 0.001,
                           "algbw_gbps": 0.03, "busbw_gbps": 0.03}]}  # fmt: skip


def test_an_output_holding_a_run_the_database_lacks_is_refused_with_nothing_written(tmp_path: Path) -> None:
    """`--out latest.json` over the file of an earlier --no-store run replaced its only copy."""
    from result_docs import result_doc

    from stash_core import store
    from stash_core.errors import UsageError

    db, out = tmp_path / "r.duckdb", tmp_path / "latest.json"
    doc = result_doc(run_id="20261201T100000Z-aaaa0001")
    out.write_text(json.dumps(doc))
    before = out.read_bytes()
    with pytest.raises(
        UsageError, match=r"holds run 20261201T100000Z-aaaa0001, which .* does not hold.*ingest"
    ):
        profile_flow.check_writable(db, out, store_db=False)
    assert out.read_bytes() == before and not db.exists()  # nothing written, no database made
    store.ingest_result(db, doc)
    profile_flow.check_writable(db, out, store_db=True)  # kept in the database: the file may be replaced


def test_an_output_holding_a_probe_the_database_lacks_is_refused(tmp_path: Path) -> None:
    from stash_core.errors import UsageError
    from stash_core.store.ingest import ingest_probe

    db, out = tmp_path / "r.duckdb", tmp_path / "probe.json"
    out.write_text(json.dumps(_probe_doc("probe-a")))
    with pytest.raises(UsageError, match="holds probe probe-a, which"):
        profile_flow.refuse_losing_output(out, db, "--out", PROBE_KIND)
    ingest_probe(db, _probe_doc("probe-a"))
    profile_flow.refuse_losing_output(out, db, "--out", PROBE_KIND)


def test_an_output_holding_the_other_kind_of_file_is_refused_though_stored(tmp_path: Path) -> None:
    """`probe --out` over a stored run's result file replaced it with a probe: the run's source file then
    named a probe's."""
    from result_docs import result_doc

    from stash_core import store
    from stash_core.errors import UsageError
    from stash_core.store.ingest import ingest_probe

    db, result, probe = tmp_path / "r.duckdb", tmp_path / "run.json", tmp_path / "probe.json"
    doc = result_doc(run_id="20261201T100000Z-aaaa0002")
    result.write_text(json.dumps(doc))
    store.ingest_result(db, doc)
    probe.write_text(json.dumps(_probe_doc("probe-b")))
    ingest_probe(db, _probe_doc("probe-b"))
    with pytest.raises(UsageError, match="holds the file of run 20261201T100000Z-aaaa0002, and a probe"):
        profile_flow.refuse_losing_output(result, db, "--out", PROBE_KIND)
    with pytest.raises(UsageError, match="holds the file of probe probe-b, and a profile's would replace it"):
        profile_flow.refuse_losing_output(probe, db, "--out")
    profile_flow.refuse_losing_output(result, db, "--out")  # the same kind, stored: replaceable


def test_an_output_whose_run_cannot_be_looked_up_is_refused_as_such(tmp_path: Path) -> None:
    """A database that cannot be read was said not to hold the run ('store it first'), which it may."""
    from result_docs import result_doc

    from stash_core.errors import UsageError

    db, out = tmp_path / "r.duckdb", tmp_path / "latest.json"
    out.write_text(json.dumps(result_doc(run_id="20261201T100000Z-aaaa0002")))
    db.write_bytes(b"not a database" * 100)
    with pytest.raises(UsageError, match="whether .* holds it could not be told") as refused:
        profile_flow.refuse_losing_output(out, db, "--out")
    assert "store it first" not in str(refused.value)


def test_a_disk_too_full_for_the_result_is_refused_before_measuring(tmp_path: Path, monkeypatch) -> None:
    """A profile on a full disk measured every run, then could keep it nowhere (the result file and the
    database both refused): the free space is checked with --db and --out."""
    import shutil

    from stash_core.errors import UsageError

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(profile_flow.shutil, "disk_usage", lambda path: usage._replace(free=1024))
    with pytest.raises(UsageError, match=r"^the disk holding .* has 0.0 MiB free: .* at least 8 MiB"):
        profile_flow.check_writable(tmp_path / "r.duckdb", None, store_db=True)
    assert list(tmp_path.iterdir()) == []


def test_a_profiles_cluster_bandwidth_keeps_a_cut_link_cut(tmp_path, monkeypatch):
    """--cluster-bandwidth set each link's rate with set_link's default down=False: a link the user had cut
    came back up for the profile and stayed up after it."""
    from stash_core.spec import ProfileSpec

    nodes = [{"index": 0, "shaping": {"rate_bps": 200_000_000}, "link_up": True},
             {"index": 1, "shaping": {"rate_bps": 200_000_000}, "link_up": False}]  # fmt: skip
    calls = []
    monkeypatch.setattr(profile_flow.cluster, "cluster_status", lambda state_dir: {"nodes": nodes})
    monkeypatch.setattr(profile_flow.cluster, "set_link", lambda index, **kw: calls.append((index, kw)))
    spec = ProfileSpec(model="m", batch_size=2, cluster="emulated", cluster_bandwidth="50mbit")
    with profile_flow.emulated_bandwidth(spec, tmp_path):
        assert [(index, kw["bandwidth"], kw["down"]) for index, kw in calls] == [
            (0, "50mbit", False), (1, "50mbit", True)
        ]  # fmt: skip
    assert [(index, kw["bandwidth"], kw["down"]) for index, kw in calls[2:]] == [
        (0, "200000000bit", False), (1, "200000000bit", True)
    ]  # fmt: skip
