"""`stash show` and `stash whatif` of a run id: a database that does not exist is said to be missing (a
mistyped --db), not as a run that is not there. `stash runs` writes a missing value as the others do."""

from __future__ import annotations

import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.cli.main import main


@pytest.mark.parametrize("command", [["show", "9a6e"], ["whatif", "9a6e"]])
def test_a_run_asked_of_a_database_that_does_not_exist_names_the_database(tmp_path, capsys, command) -> None:
    missing = tmp_path / "nonexist.duckdb"
    assert main([*command, "--db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no database {missing} (check --db or $STASH_DB)" in err and len(err.splitlines()) == 1
    assert not missing.exists()


def test_runs_writes_a_missing_value_as_a_dash(tmp_path, capsys) -> None:
    db = tmp_path / "r.duckdb"
    doc = result_doc(run_id="20261122T110600Z-2904421d", instance=None)
    doc["breakdown"]["epoch_s"] = None  # no epoch: a synthetic-data run
    for stall in doc["breakdown"]["stalls"].values():
        stall["epoch_s"] = None
    store.ingest_result(db, doc)
    assert main(["runs", "--db", str(db)]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    values = row.split()
    values[1:3] = [" ".join(values[1:3])]  # started_at: a date and a time
    cells = dict(zip(header.split(), values, strict=True))
    assert cells["instance"] == "-" and cells["epoch_s"] == "-" and "None" not in row


def test_show_under_an_ascii_locale_writes_what_it_cannot_encode_in_an_ascii_form(tmp_path) -> None:
    """LC_ALL=C with UTF-8 mode off: stdout is ASCII, and the breakdown's ± was a UnicodeEncodeError
    traceback; the command now ends normally, the ± written as +- (as \\xb1 it was three characters wider than
    its column)."""
    import os
    import subprocess
    import sys

    from support import REPO

    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc(run_id="20261122T110600Z-2904421d"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C", "PYTHONUTF8": "0"}
    env.pop("PYTHONIOENCODING", None)
    done = subprocess.run(
        [sys.executable, "-m", "stash_core", "show", "2904421d", "--db", str(db)],
        capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert b"+-" in done.stdout and b"\\xb1" not in done.stdout and done.stdout.isascii()


def _edited(tmp_path, sql: str):
    """A database of one run whose row was then changed by hand (`sql`)."""
    import duckdb

    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc(run_id="20261122T110600Z-2904421d", instance="vm-2vcpu"))
    with duckdb.connect(str(db)) as con:
        con.execute(sql)
    return db


FORGED = "line1' || chr(10) || 'FAKE 20261122T000000Z-deadbeef completed"


@pytest.mark.parametrize("command", [["runs"], ["show", "2904421d"]])
def test_a_newline_in_stored_text_cannot_make_a_line_of_its_own(tmp_path, capsys, command) -> None:
    db = _edited(tmp_path, f"UPDATE runs SET model = '{FORGED}', instance = 'a' || chr(9) || 'b'")
    assert main([*command, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert not any(line.startswith("FAKE") for line in out.splitlines())
    assert "line1\\nFAKE 20261122T000000Z-deadbeef completed" in out and "a\\tb" in out and "\t" not in out


def test_show_writes_a_missing_value_as_runs_does(tmp_path, capsys) -> None:
    db = _edited(
        tmp_path,
        "UPDATE runs SET status = NULL, started_at = NULL, model = NULL, batch_size = NULL, "
        "workers_per_node = NULL, nodes = NULL; UPDATE phases SET iterations = NULL WHERE phase = 'R0'",
    )
    assert main(["show", "2904421d", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "None" not in out, out
    head = out.splitlines()[:3]
    assert head[0] == "run 20261122T110600Z-2904421d  -  started -"
    assert head[1].startswith("model -, batch unknown per worker, unknown worker(s) x unknown node(s), ")
    assert head[2].startswith("  R0  ") and "iterations" not in head[2]


def test_whatif_writes_a_control_character_of_a_stored_name_as_text(tmp_path, capsys) -> None:
    db = _edited(tmp_path, "UPDATE runs SET model = 'resnet18' || chr(27) || '[2J'")
    assert main(["whatif", "2904421d", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "resnet18\\x1b[2J" in out


def test_show_names_each_stall_within_the_noise_with_its_own_difference(tmp_path, capsys) -> None:
    """The store keeps a within-noise stall's difference (stalls.raw_s), so `stash show` of a stored run
    says what the remainder holds stall by stall, as the result file does; it lumped them together."""
    db = tmp_path / "r.duckdb"
    doc = result_doc(stalls={"compute": 0.2, "interconnect": 0.05, "cpu": 0.003, "disk": 0.001})
    for name, raw_s in (("cpu", 0.003), ("disk", 0.001)):
        doc["breakdown"]["stalls"][name].update(
            seconds=0.0, share=0.0, epoch_s=0.0, status="clamped_zero", raw_s=raw_s, ci95_s=0.01
        )
    store.ingest_result(db, doc)
    assert main(["show", doc["run_id"], "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert ("cpu's difference +0.0030 s (within the noise; cpu itself is reported as 0); disk's difference "
            "+0.0010 s (within the noise") in out  # "disk +0.0010 s (..., reported as 0)": which was it?
    assert "not split into named stalls" not in out


def test_runs_says_how_many_runs_the_limit_left_out(tmp_path, capsys) -> None:
    db = tmp_path / "r.duckdb"
    for suffix in ("2904421a", "2904421b", "2904421c"):
        store.ingest_result(db, result_doc(run_id=f"20261122T110600Z-{suffix}"))
    assert main(["runs", "--db", str(db), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[-1] == "... 1 more run(s) not shown (--limit 3 lists all 3)"
    for limit in ("3", "4"):  # every run shown: no such line
        assert main(["runs", "--db", str(db), "--limit", limit]) == 0
        out = capsys.readouterr().out
        assert "not shown" not in out and len(out.splitlines()) == 4


def test_runs_and_show_print_json_when_asked(tmp_path, capsys) -> None:
    """`stash runs --format json` and `show --format json` were refused ("this command prints no JSON"): a
    script had to export every table or start Python to read one run's breakdown."""
    import json

    db = tmp_path / "r.duckdb"
    docs = [result_doc(run_id=f"20261122T11060{n}Z-2904421{n}", stalls={"compute": 0.2, "cpu": 0.05})
            for n in range(3)]  # fmt: skip
    docs[1]["breakdown"]["epoch_s"] = float("nan")  # not known: null, as a result file writes it
    for doc in docs:
        store.ingest_result(db, doc)
    assert main(["runs", "--db", str(db), "--format", "json", "--limit", "2"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [run["run_id"] for run in listed["runs"]] == [docs[2]["run_id"], docs[1]["run_id"]]
    assert listed["stored"] == 3 and listed["runs"][1]["epoch_s"] is None
    assert listed["runs"][0]["started_at"].startswith("2026-")  # a time as ISO 8601 text
    assert main(["show", "29044210", "--db", str(db), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"]["run_id"] == docs[0]["run_id"] and shown["run"]["spec"]["batch_size"] == 32
    stalls = shown["breakdown"]["stalls"]
    assert (stalls["compute"]["seconds"], stalls["cpu"]["seconds"]) == pytest.approx((0.2, 0.05))
    assert shown["breakdown"]["iteration_s"] == pytest.approx(0.25)
    assert main(["show", "nope", "--db", str(db), "--format", "json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"error": f"no run 'nope' in {db}", "exit_status": 2}
    typo = tmp_path / "typo.duckdb"  # a mistyped --db is no empty database
    assert main(["runs", "--db", str(typo), "--format", "json"]) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert said == f"no database {typo} (check --db or $STASH_DB; a first profile creates it)"
    assert not typo.exists()


def test_show_json_of_a_failed_run_is_the_run_with_no_breakdown(tmp_path, capsys) -> None:
    """A run without an iteration time ended `show --format json` in a traceback and nothing on stdout."""
    import json

    db = tmp_path / "r.duckdb"
    failed = result_doc(status="failed")
    store.ingest_result(db, failed)
    assert main(["show", failed["run_id"], "--db", str(db), "--format", "json"]) == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert shown["breakdown"] is None and shown["run"]["status"] == "failed" and not captured.err
    assert shown["run"]["error"] == failed["error"]


def test_show_json_gives_the_epoch_intervals_a_result_file_gives(tmp_path, capsys) -> None:
    import json

    db = tmp_path / "r.duckdb"
    doc = result_doc(stalls={"compute": 0.2, "cpu": 0.05})
    store.ingest_result(db, doc)
    assert main(["show", doc["run_id"], "--db", str(db), "--format", "json"]) == 0
    breakdown = json.loads(capsys.readouterr().out)["breakdown"]
    per_epoch = doc["breakdown"]["iterations_per_epoch"]
    assert per_epoch
    assert breakdown["epoch_ci95_s"] == pytest.approx(doc["breakdown"]["iteration_ci95_s"] * per_epoch)
    for stall, entry in doc["breakdown"]["stalls"].items():
        expected = None if entry["ci95_s"] is None else pytest.approx(entry["ci95_s"] * per_epoch)
        assert breakdown["stalls"][stall]["epoch_ci95_s"] == expected, stall


def test_show_of_a_probe_sets_id_prints_the_probe_set(tmp_path, capsys) -> None:
    """`stash probe` ends "probe probe-… saved to DB"; `stash show` of that id said "no run" of it."""
    import json

    from stash_core.store.ingest import ingest_probe

    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc(run_id="20261122T110600Z-2904421d"))
    probe = {
        "kind": "stash-probe", "schema_version": 1, "probe_id": "probe-20261204T215346Z-aabc5d8e",
        "run_id": None, "phase": None, "started_at": "2026-12-04T21:53:46+00:00", "hostname": "box1",
        "instance": None, "backend": "gloo", "device": "cpu", "world_size": 2, "nodes": 1,
        "workers_per_node": 2, "link_gbps": None,
        "allreduce": [{"size_bytes": 4096, "repetitions": 20, "time_s": 0.001, "time_min_s": 0.0009,
                       "algbw_gbps": 0.033, "busbw_gbps": 0.033}],
        "gradient_allreduce": {"size_bytes": 6 << 20, "time_s": 0.27, "repetitions": 2, "buckets": 2},
        "p2p": [{"scope": "intra_node", "size_bytes": 8, "time_s": 5e-4}],
    }  # fmt: skip
    assert ingest_probe(db, probe) is True
    assert main(["show", "aabc5d8e", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("probe set probe-20261204T215346Z-aabc5d8e\nprobe over 2 worker(s) on 1 machine(s)")
    assert "gradients 6 MiB: 270.0 ms" in out and "None" not in out
    # each size's mean beside its fastest repetition: the spread of its times (a mean alone had none)
    header, row = out.splitlines()[2:4]
    assert header.split() == ["all-reduce", "size", "reps", "time", "fastest", "algbw", "busbw"]
    assert row.split()[3:7] == ["1.0", "ms", "900", "us"], row
    assert main(["show", "aabc5d8e", "--db", str(db), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)["probe"]
    assert shown["probe_id"] == probe["probe_id"] and shown["allreduce"][0]["size_bytes"] == 4096
    assert main(["show", "2904421d", "--db", str(db)]) == 0  # a run still shows as a run
    assert "iteration" in capsys.readouterr().out
    assert main(["show", "zzz", "--db", str(db)]) == 2
    assert capsys.readouterr().err.strip() == f"stash: no run 'zzz' in {db}"
    # a part of both ids (each has "20261"): it was taken as the run's, unsaid; a probe set's whole id is its
    for form in ([], ["--format", "json"]):
        assert main(["show", "20261", "--db", str(db), *form]) == 2
        assert capsys.readouterr().err.strip() == (
            "stash: id '20261' is a part of run 20261122T110600Z-2904421d and of probe set "
            "probe-20261204T215346Z-aabc5d8e; give more characters"
        )
    assert main(["show", probe["probe_id"], "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("probe set ")
    # the run's own probe set (`<run_id>-R1`, as a profile of 2 workers stores it) is the run's: its suffix,
    # a part of both ids, shows the run
    own = {**probe, "probe_id": "20261122T110600Z-2904421d-R1", "run_id": "20261122T110600Z-2904421d",
           "phase": "R1"}  # fmt: skip
    assert ingest_probe(db, own) is True
    assert main(["show", "2904421d", "--db", str(db)]) == 0
    assert "iteration" in capsys.readouterr().out
    assert main(["show", "2904421d-R1", "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("probe set 20261122T110600Z-2904421d-R1")


def test_show_json_gives_a_scripts_input_pipeline_as_its_result_file_does(tmp_path, capsys) -> None:
    """The JSON's breakdown lacked `input_pipeline` (R2 minus the last synthetic run), which the result file
    of a script profiled without --data-dir holds."""
    import json

    from stash_core.analysis.pipeline import PIPELINE_WARNING
    from stash_core.engine.script_job import input_pipeline

    db = tmp_path / "r.duckdb"
    doc = result_doc(stalls={"compute": 0.2, "cpu": 0.05, "disk": 0.01})  # R0, R3 and R2
    seconds, ci95_s, reference = input_pipeline(doc)
    doc["breakdown"]["input_pipeline"] = {"seconds": seconds, "ci95_s": ci95_s, "runs": f"R2 - {reference}"}
    doc["breakdown"]["warnings"] = [f"{PIPELINE_WARNING}{seconds:.6f} s ± {ci95_s:.6f} per iteration"]
    store.ingest_result(db, doc)
    assert main(["show", doc["run_id"], "--db", str(db), "--format", "json"]) == 0
    breakdown = json.loads(capsys.readouterr().out)["breakdown"]
    assert breakdown["input_pipeline"] == pytest.approx(doc["breakdown"]["input_pipeline"])
    other = result_doc(run_id="20261122T110600Z-2904421e", stalls={"compute": 0.2, "cpu": 0.05})
    store.ingest_result(db, other)  # a run whose profile gave no such figure gets none
    assert main(["show", other["run_id"], "--db", str(db), "--format", "json"]) == 0
    assert "input_pipeline" not in json.loads(capsys.readouterr().out)["breakdown"]


def test_show_json_says_whether_the_breakdown_is_impossible_as_its_result_file_does(tmp_path, capsys) -> None:
    """The result file's `impossible` (beside its warning) was left out of the JSON's breakdown."""
    import json

    from stash_core.analysis.coherence import DIFFERENT_WORK, IMPOSSIBLE

    db = tmp_path / "r.duckdb"
    for number, warning, impossible in ((1, IMPOSSIBLE, True), (2, DIFFERENT_WORK, False), (3, None, None)):
        doc = result_doc(run_id=f"20261122T11060{number}Z-2904421d")
        if warning is not None:
            doc["breakdown"]["warnings"] = [f"{warning}: what. Cause: why. To do: this", "another warning"]
            doc["breakdown"]["impossible"] = impossible
        store.ingest_result(db, doc)
        assert main(["show", doc["run_id"], "--db", str(db), "--format", "json"]) == 0
        breakdown = json.loads(capsys.readouterr().out)["breakdown"]
        assert breakdown.get("impossible", "absent") == ("absent" if impossible is None else impossible)


def test_show_says_a_script_runs_arguments(tmp_path, capsys) -> None:
    """Two runs of one script with other arguments (two configurations) showed alike: the arguments were in
    the result file's spec only."""
    db = tmp_path / "r.duckdb"
    doc = result_doc(run_id="20261122T110600Z-2904421d")
    doc["spec"]["script_args"] = ["--epochs", "400", "--name", "my run", "--x=\x1b[2J"]
    store.ingest_result(db, doc)
    assert main(["show", "2904421d", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "script arguments: -- --epochs 400 --name 'my run' '--x=\\x1b[2J'" in out and "\x1b" not in out


def test_an_interrupted_run_without_figures_says_so_and_an_interval_has_its_unit(tmp_path, capsys):
    """An interrupt before any timing left a run of "-" figures and no word; "± 0.0058" had no unit."""
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc(run_id="20261122T110600Z-2904421d"))
    assert main(["show", "2904421d", "--db", str(db)]) == 0
    phase_line = capsys.readouterr().out.splitlines()[2]
    assert phase_line.startswith("  R0  ") and " s (95%) over " in phase_line
    doc = result_doc(run_id="20261122T120600Z-5904421e")
    doc["status"], doc["breakdown"], doc["phases"] = "interrupted", None, []
    store.ingest_result(db, doc)
    assert main(["show", "5904421e", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "no stall breakdown: the profile was interrupted before a breakdown could be made" in out
