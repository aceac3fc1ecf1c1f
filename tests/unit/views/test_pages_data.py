"""The dashboard's data layer: queries over a real store, upload checks, chart shaping, the run form."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from result_docs import populate_dashboard_db, result_doc

from stash_core import store, views
from stash_core.errors import UsageError


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dashboard") / "results.duckdb"
    populate_dashboard_db(path)
    return path


def test_overview_counts_and_lists_newest_first(db: Path) -> None:
    info = views.overview.overview(db, latest=2, recent=10)
    assert (info["runs"], info["completed_runs"], info["models"], info["instances"]) == (5, 4, 2, 2)
    assert info["iterations"] == 4 * 4 * 30 + 30  # 4 completed runs x 4 phases x 30 samples + the failed R0
    assert list(info["latest"]["run_id"]) == ["20261121T090000Z-cccc0004", "20261120T110000Z-bbbb0003"]
    assert info["recent"]["run_id"].iloc[0] == "20261121T100000Z-dddd0005"  # failed runs are listed too
    assert info["latest"]["run_label"].iloc[0] == "vgg11 · b16 · 2w · big-vm · cccc0004"


def test_an_empty_or_missing_database_reads_as_empty(tmp_path: Path) -> None:
    info = views.overview.overview(tmp_path / "none.duckdb")
    assert info["runs"] == 0 and info["latest"].empty and info["recent"].empty
    page = views.breakdown.breakdown_page(tmp_path / "none.duckdb", views.breakdown.RunFilter())
    assert page["runs"].empty and page["detail"] is None and page["options"]["models"] == []
    assert not (tmp_path / "none.duckdb").exists()


def test_filters_narrow_the_runs_and_count_all_matches(db: Path) -> None:
    runs, total = views.breakdown.find_runs(db, views.breakdown.RunFilter(limit=1))
    assert total == 4 and len(runs) == 1
    runs, total = views.breakdown.find_runs(
        db, views.breakdown.RunFilter(instances=["small-vm"], statuses=[])
    )
    assert total == 3 and set(runs["status"]) == {"completed", "failed"}
    runs, total = views.breakdown.find_runs(db, views.breakdown.RunFilter(models=["vgg11"], batch_sizes=[16]))
    assert list(runs["run_id"]) == ["20261121T090000Z-cccc0004"]
    from datetime import date

    runs, total = views.breakdown.find_runs(
        db, views.breakdown.RunFilter(date_from=date(2026, 11, 21), date_to=date(2026, 11, 21))
    )
    assert list(runs["run_id"]) == ["20261121T090000Z-cccc0004"]


def test_breakdown_page_shows_a_linked_run_even_outside_the_filter(db: Path) -> None:
    failed = "20261121T100000Z-dddd0005"
    page = views.breakdown.breakdown_page(db, views.breakdown.RunFilter(), linked_run=failed)
    assert page["detail"]["run_id"] == failed and page["detail"]["status"] == "failed"
    assert failed not in set(page["runs"]["run_id"])
    page = views.breakdown.breakdown_page(
        db, views.breakdown.RunFilter(models=["vgg11"]), previous_run="20261120T090000Z-aaaa0001"
    )
    assert page["detail"]["run_id"] == "20261121T090000Z-cccc0004"  # the previous run no longer matches
    page = views.breakdown.breakdown_page(db, views.breakdown.RunFilter(), linked_run="nope")
    assert page["missing"] == "No run nope in this database" and page["detail"] is not None


def test_a_link_with_a_part_of_a_run_id_opens_that_run_as_stash_show_does(db: Path) -> None:
    """?run=<the suffix every chart label shows> said "No run ..." and showed the newest run instead."""
    page = views.breakdown.breakdown_page(db, views.breakdown.RunFilter(), linked_run="dddd0005")
    assert page["detail"]["run_id"] == page["linked"] == "20261121T100000Z-dddd0005" and not page["missing"]
    page = views.breakdown.breakdown_page(db, views.breakdown.RunFilter(), linked_run="20261121T")
    assert page["linked"] is None and "matches several runs" in page["missing"]


def test_run_detail_has_samples_and_telemetry_on_one_time_axis(db: Path) -> None:
    run = views.breakdown.run_detail(db, "20261120T110000Z-bbbb0003")
    assert [p["phase"] for p in run["phases"]] == ["R0", "R1", "R3", "R2"]
    assert [s["stall"] for s in run["stalls"]] == ["compute", "interconnect", "network", "cpu", "disk"]
    assert list(dict.fromkeys(run["samples"]["phase"])) == ["R0", "R1", "R3", "R2"]
    assert len(run["samples"]) == 120
    telemetry = run["telemetry"]
    spans = views.breakdown.phase_spans(run["phases"])
    r1 = telemetry[telemetry["phase"] == "R1"]
    # R1's samples sit after R0's wall time on the run axis.
    assert (r1["run_t_s"] >= spans.set_index("phase").loc["R1", "start_s"]).all()
    assert set(telemetry["group"]) >= {"CPU utilisation (%)", "Memory used (GB)", "Disk (MB/s)"}
    memory = telemetry[telemetry["metric"] == "mem_used_gb"]["value"]
    assert memory.between(1.5, 3.5).all()  # bytes became GB
    assert views.breakdown.run_detail(db, "missing") is None


def test_stall_bars_are_laid_end_to_end_with_intervals() -> None:
    breakdown = pd.DataFrame(
        [
            {
                "run_id": "r1",
                "run_label": "r1",
                "iteration_s": 0.5,
                "iterations_per_epoch": 10,
                "compute_s": 0.3,
                "compute_ci95_s": 0.01,
                "compute_share": 0.6,
                "compute_epoch_s": 3.0,
                "compute_status": "measured",
                "interconnect_s": None,
                "interconnect_ci95_s": None,
                "interconnect_share": None,
                "interconnect_epoch_s": None,
                "interconnect_status": "not_measured",
                "network_s": None,
                "network_ci95_s": None,
                "network_share": None,
                "network_epoch_s": None,
                "network_status": "not_measured",
                "cpu_s": 0.15,
                "cpu_ci95_s": 0.02,
                "cpu_share": 0.3,
                "cpu_epoch_s": None,
                "cpu_status": "measured",
                "disk_s": 0.05,
                "disk_ci95_s": 0.05,
                "disk_share": 0.1,
                "disk_epoch_s": 0.5,
                "disk_status": "measured",
            }
        ]
    )
    bars = views.breakdown.stall_long_frame(breakdown, "seconds")
    assert list(bars["stall"]) == ["compute", "cpu", "disk"]
    assert list(bars["bar_start"]) == pytest.approx([0.0, 0.3, 0.45])
    assert bars["bar_end"].iloc[-1] == pytest.approx(0.5)
    assert (bars["error_high"] - bars["error_low"]).tolist() == pytest.approx([0.02, 0.04, 0.1])
    epoch = views.breakdown.stall_long_frame(breakdown, "epoch_s")
    assert epoch.set_index("stall").loc["cpu", "value"] == pytest.approx(1.5)  # filled in from seconds x 10
    shares = views.breakdown.stall_long_frame(breakdown, "share")
    assert shares["bar_end"].iloc[-1] == pytest.approx(1.0)
    assert shares.set_index("stall").loc["cpu", "ci95"] == pytest.approx(0.04)  # 0.02 s of 0.5 s
    with pytest.raises(UsageError):
        views.breakdown.stall_long_frame(breakdown, "minutes")


def test_compare_ranks_speed_and_cost(db: Path) -> None:
    frame = views.compare.compare_configurations(db, "resnet18", 32)
    by_name = frame.set_index("instance")
    assert by_name.loc["small-vm", "runs"] == 2 and by_name.loc["big-vm", "runs"] == 1
    assert by_name.loc["big-vm", "samples_per_s"] == pytest.approx(64 / 0.22, rel=1e-6)
    assert by_name.loc["big-vm", "usd_per_million_samples"] == pytest.approx(1e6 / (64 / 0.22) / 3600 * 0.40)
    verdict = views.compare.compare_verdict(frame)
    assert verdict["fastest"].startswith("big-vm") and verdict["cheapest"].startswith("small-vm")
    assert verdict["speedup"] > 1.5 and 0 < verdict["saving"] < 1
    assert views.compare.compare_choices(db).iloc[0][["model", "batch_size", "configurations"]].tolist() == [
        "resnet18",
        32,
        2,
    ]


def test_compare_without_prices_names_no_cheapest(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    store.ingest_result(path, result_doc(run_id="20261120T090000Z-aaaa0001", instance="unpriced"))
    verdict = views.compare.compare_verdict(views.compare.compare_configurations(path, "resnet18", 32))
    assert verdict["fastest"] == "unpriced · 2w" and verdict["cheapest"] is None and verdict["priced"] == 0


def test_upload_checks_each_file_and_changes_nothing(db: Path, tmp_path: Path) -> None:
    good = result_doc(run_id="20261122T080000Z-eeee0006", samples=True, telemetry=True, seed=6)
    stored = populate_dashboard_db(tmp_path / "same.duckdb")[0]  # the stored run, the same content again
    bad_sample = result_doc(run_id="20261122T090000Z-ffff0007", samples=True, telemetry=True, seed=7)
    bad_sample["phases"][0]["samples"]["iteration_s"][3] = "fast"
    files = [
        ("good.json", json.dumps(good).encode()),
        ("again.json", json.dumps(stored).encode()),
        ("bad-sample.json", json.dumps(bad_sample).encode()),
        ("empty.json", b""),
        ("binary.parquet", b"PAR1 not really"),
        ("notes.txt", b"hello"),
    ]
    before = store.database_summary(db)["runs"]
    report = views.upload.check_uploads(db, files)
    verdicts = {check.name: check for check in report.checks}
    assert verdicts["good.json"].ok and verdicts["again.json"].ok
    assert report.already_stored == {"20261120T090000Z-aaaa0001"}
    assert "non-numeric" in verdicts["bad-sample.json"].reason and not verdicts["bad-sample.json"].ok
    assert verdicts["empty.json"].reason == "the file is empty"
    assert verdicts["binary.parquet"].reason.startswith("cannot read it as parquet")
    assert "unsupported file type .txt" in verdicts["notes.txt"].reason
    assert set(report.preview["run_id"]) == {"20261122T080000Z-eeee0006", "20261120T090000Z-aaaa0001"}
    assert store.database_summary(db)["runs"] == before  # checking stores nothing


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_an_export_uploads_back_into_an_empty_database(db: Path, tmp_path: Path, fmt: str) -> None:
    paths = store.export(db, fmt, tmp_path / "export")
    report = views.upload.check_uploads(None, [(path.name, path.read_bytes()) for path in paths])
    assert not report.bad, [(c.name, c.reason) for c in report.bad]
    kinds = {check.kind for check in report.checks}
    assert {"export:runs", "export:iterations", "export:stall_breakdown", "export:models"} <= kinds
    target = tmp_path / "copy.duckdb"
    outcomes = views.upload.store_uploads(target, report)
    assert sorted(run_id for _, run_id, added in outcomes if added) == sorted(
        store.list_runs(db)["run_id"].tolist()
    )
    original = views.breakdown.run_detail(db, "20261120T110000Z-bbbb0003")
    copy = views.breakdown.run_detail(target, "20261120T110000Z-bbbb0003")
    assert copy["iteration_s"] == pytest.approx(original["iteration_s"])
    assert len(copy["samples"]) == len(original["samples"])
    assert len(copy["telemetry"]) == len(original["telemetry"])
    assert [s["seconds"] for s in copy["stalls"]] == [s["seconds"] for s in original["stalls"]]


def test_a_companion_table_alone_is_refused(db: Path, tmp_path: Path) -> None:
    paths = {p.stem: p for p in store.export(db, "parquet", tmp_path / "export")}
    report = views.upload.check_uploads(None, [("phases.parquet", paths["phases"].read_bytes())])
    assert not report.checks[0].ok and "together with the runs table" in report.checks[0].reason


def test_a_runs_table_without_its_phases_and_stalls_is_refused_and_stores_nothing(
    db: Path, tmp_path: Path
) -> None:
    paths = {p.stem: p for p in store.export(db, "csv", tmp_path / "export")}
    report = views.upload.check_uploads(None, [("runs.csv", paths["runs"].read_bytes())])
    (check,) = report.checks
    assert not check.ok and "needs its phases and stalls" in check.reason, check.reason
    assert report.storable_docs == []
    files = [(f"{name}.csv", paths[name].read_bytes()) for name in ("runs", "phases", "stalls")]
    runs = next(c for c in views.upload.check_uploads(None, files).checks if c.kind == "export:runs")
    assert runs.ok and "no iterations or telemetry: stored without those samples" in runs.reason


def _form(**changes) -> views.run_form.RunForm:
    form = views.run_form.RunForm(
        model="resnet18", batch_size=32, workers=2, stalls=["compute", "interconnect", "cpu"]
    )
    for key, value in changes.items():
        setattr(form, key, value)
    return form


def test_the_run_form_becomes_profile_arguments(tmp_path: Path) -> None:
    args = views.run_form.profile_args(_form(input_shape="3, 64,64", instance="p3.8xlarge", iterations="40"))
    assert args[:8] == [
        "--model",
        "resnet18",
        "--batch-size",
        "32",
        "--workers",
        "2",
        "--stalls",
        "compute,interconnect,cpu",
    ]
    assert "--synthetic-images" in args and "--input-shape" in args
    assert args[args.index("--input-shape") + 1] == "3,64,64"
    assert args[args.index("--iterations") + 1] == "40"
    model = tmp_path / "net.py"
    model.write_text("def make(num_classes=10): ...\n")
    args = views.run_form.profile_args(
        _form(model="net.py:make", data_source="dataset", dataset=str(tmp_path)), base_dir=tmp_path
    )
    assert args[1] == f"{model}:make" and args[args.index("--dataset") + 1] == str(tmp_path)
    args = views.run_form.profile_args(
        _form(where="cluster", nodes=2, stalls=["network"], data_source="none"), supported_flags={"--cluster"}
    )
    assert args[-2:] == ["--cluster", "emulated"] and "--nodes" in args


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model": " "}, "Model:"),
        ({"model": "missing.py:make"}, "Model: no file"),
        ({"batch_size": 0}, "Batch size"),
        ({"stalls": []}, "Stalls"),
        ({"data_source": "dataset", "dataset": "/no/such/dir"}, "Data set: no folder"),
        ({"data_source": "none"}, "CPU and disk stalls need real data"),
        ({"input_shape": "3x64x64"}, "Input shape"),
        ({"iterations": "1"}, "Iterations"),
        ({"instance": "a b"}, "Instance label"),
        ({"nodes": 2}, r"Machines \(nodes\) > 1 needs remote hosts"),
        ({"where": "hosts", "hosts": ""}, "Remote hosts: give at least one"),
        ({"where": "hosts", "hosts": "a;touch /tmp/x"}, "is not a host name"),
        ({"where": "cluster", "nodes": 2}, "no --cluster option"),
    ],
)
def test_the_run_form_names_the_field_that_is_wrong(changes: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace(">", ".")):
        views.run_form.profile_args(_form(**changes), supported_flags={"--model"})


def test_schema_browser_lists_every_table_with_rows_and_meanings(db: Path) -> None:
    browser = views.sql.schema_browser(db)
    assert set(browser) == {*store.TABLES, *store.VIEWS}
    assert browser["runs"]["rows"] == 5 and browser["stall_breakdown"]["kind"] == "view"
    columns = {c["column"]: c for c in browser["runs"]["columns"]}
    assert columns["iteration_s"]["type"] == "DOUBLE"


def test_a_chart_label_shortens_a_model_files_path_and_nothing_else() -> None:
    """Every name with a '/' lost what came before it: '[link](http://x)' showed as 'x)'."""
    short = views.breakdown.short_model
    assert short("/home/me/models/net.py:make") == "net.py:make"
    assert short("<b>x</b> [link](http://x) $m$") == "<b>x</b> [link](http://x) $m$"
    assert short('=HYPERLINK("http://evil","x")') == '=HYPERLINK("http://evil","x")'
    assert short("resnet18") == "resnet18" and short(None) == "?"


def test_the_sql_page_refuses_a_result_larger_than_a_browser_table_takes(db: Path) -> None:
    """One cell of 100 MB passed the console's 256 MiB and crashed the browser tab that drew it."""
    with pytest.raises(UsageError, match="more than the 8 MiB the console returns"):
        views.sql.run_query(db, "SELECT repeat('x', 10000000) AS big")
    assert len(views.sql.run_query(db, "SELECT repeat('x', 1000) AS small").frame) == 1


def test_database_path_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_DB", str(tmp_path / "env.duckdb"))
    assert views.common.resolve_db_path("") == tmp_path / "env.duckdb"
    assert views.common.resolve_db_path(str(tmp_path / "x.duckdb")) == tmp_path / "x.duckdb"
    with pytest.raises(UsageError, match="is a folder"):
        views.common.resolve_db_path(str(tmp_path))
    first = views.common.db_signature(tmp_path / "x.duckdb")
    store.ingest_result(tmp_path / "x.duckdb", result_doc(run_id="20261120T090000Z-aaaa0001"))
    assert views.common.db_signature(tmp_path / "x.duckdb") != first  # a write changes the cache key


def test_formula_leading_names_come_back_whole_through_a_csv_export(tmp_path: Path) -> None:
    from result_docs import result_doc

    from stash_core.terminal import formula_unquoted

    db, target = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    names = {"model": "@SUM(A1)", "instance": "'=HYPERLINK(1)"}  # the second one holds a quote of its own
    doc = result_doc(run_id="20261122T080000Z-ffff0001", instance=names["instance"])
    doc["spec"]["model"] = doc["model"]["name"] = names["model"]
    store.ingest_result(db, doc)
    paths = store.export(db, "csv", tmp_path / "export")
    report = views.upload.check_uploads(None, [(path.name, path.read_bytes()) for path in paths])
    views.upload.store_uploads(target, report)
    row = store.list_runs(target).iloc[0]
    assert (row["model"], row["instance"]) == (names["model"], names["instance"])  # '@SUM(A1) before
    assert [formula_unquoted(formula_safe) for formula_safe in ("'=x", "''=x", "'plain", "=x")] == [
        "=x", "'=x", "'plain", "=x"]  # fmt: skip


def test_backslashes_in_json_columns_come_back_whole_through_a_csv_export(tmp_path: Path) -> None:
    """JSON text (spec, fingerprint, ...) is written to a CSV as it is; the upload took the escapes of text
    columns back in it too: "lab\\u0041" came back "labA", others were refused as invalid JSON."""
    import json

    from result_docs import result_doc

    db, target = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    # (no colon: an instance label holds none)
    for n, label in enumerate(("lab\\u0041", "lab\\runs\\x41\\u0042", "\\\\data\\n")):
        store.ingest_result(db, result_doc(run_id=f"20261122T08000{n}Z-ffff000{n}", instance=label))
    paths = store.export(db, "csv", tmp_path / "export")
    report = views.upload.check_uploads(None, [(path.name, path.read_bytes()) for path in paths])
    assert all(check.ok for check in report.checks), [check.reason for check in report.checks]
    views.upload.store_uploads(target, report)
    query = "SELECT instance, spec FROM runs ORDER BY run_id"
    before, after = store.query_readonly(db, query), store.query_readonly(target, query)
    assert list(after["instance"]) == list(before["instance"])
    assert [json.loads(spec)["instance"] for spec in after["spec"]] == list(before["instance"])


def test_a_commands_message_is_put_in_a_pages_words() -> None:
    from stash_core.views.common import in_page_words

    words = {"--tuning": "the timers", "use --tuning online": "choose timers online"}
    assert in_page_words("x: use --tuning online or --tuning given", words) == (
        "x: choose timers online or the timers given"
    )  # the longest first
    assert in_page_words("no option here", None) == "no option here"
    said = "database x.duckdb is not Stash's: it holds other tables (t) and no schema_meta; give another --db"
    assert in_page_words(said, None).endswith("; choose another Database file in the sidebar")  # every page
    # a run's check of --db names the flag the page does not have; a command to copy keeps its own --db
    assert (
        in_page_words("--db /d/r.duckdb: cannot create it", None)
        == "Database file /d/r.duckdb: cannot create it"
    )
    assert in_page_words("--db: database /d/r.duckdb is not writable", None) == (
        "Database file: database /d/r.duckdb is not writable"
    )
    command = "store it later with `stash ingest f.json --db r.duckdb`"
    assert in_page_words(command, None) == command


def test_an_export_made_before_later_columns_uploads_back(db: Path, tmp_path: Path) -> None:
    """An export of an older Stash lacks the columns later schema versions added (stalls.raw_s,
    instances.region and origin, the view's <stall>_resolved): its tables are still recognised and its runs
    stored."""
    import pandas as pd

    paths = {p.stem: p for p in store.export(db, "csv", tmp_path / "export")}
    files = []
    for name in ("runs", "phases", "stalls", "instances", "stall_breakdown"):
        frame = pd.read_csv(paths[name])
        later = [c for c in frame.columns if c in ("raw_s", "region", "origin") or "epoch_ci95" in c
                 or c.startswith("unattributed") or c.endswith("_resolved")]  # fmt: skip
        files.append((f"{name}.csv", frame.drop(columns=later).to_csv(index=False).encode()))
    report = views.upload.check_uploads(None, files)
    assert not report.bad, [(c.name, c.reason) for c in report.bad]
    assert {c.kind for c in report.checks} >= {"export:stalls", "export:instances", "export:stall_breakdown"}
    assert {doc["run_id"] for _, doc in report.storable_docs} == set(store.list_runs(db)["run_id"])


def test_a_one_row_json_table_of_any_kind_is_read_as_a_table(db: Path, tmp_path: Path) -> None:
    """`stash export --format json` writes a table of one row as one line: a phases (or stalls, models) table
    of one row was refused as "not a Stash result file" and the samples uploaded with it were lost."""
    paths = {p.stem: p for p in store.export(db, "json", tmp_path / "export")}
    first_phase = paths["phases"].read_text().splitlines()[0]
    report = views.upload.check_uploads(None, [("phases.json", first_phase.encode())])
    (check,) = report.checks
    assert check.kind == "export:phases", check.reason


def test_a_runs_iterations_past_the_limit_are_thinned_evenly_within_each_phase(db: Path) -> None:
    """Cut at the limit in phase order, the first phases filled it and the last ones were not drawn at all,
    without a word on the page."""
    run = views.breakdown.run_detail(db, "20261120T110000Z-bbbb0003", max_iterations=40)
    samples = run["samples"]
    assert run["samples_stored"] == 120 and len(samples) < 120
    per_phase = samples.groupby("phase", sort=False)["iteration"]
    assert list(per_phase.size().index) == ["R0", "R1", "R3", "R2"] and set(per_phase.size()) == {10}
    assert all(sorted(kept) == list(range(0, 30, 3)) for _, kept in per_phase)  # every 3rd of 30
    whole = views.breakdown.run_detail(db, "20261120T110000Z-bbbb0003")
    assert len(whole["samples"]) == whole["samples_stored"] == 120
