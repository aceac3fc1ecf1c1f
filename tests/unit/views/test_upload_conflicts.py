"""Upload: a file passes the check only when it also stores. A run stored with other content, and one that
two uploaded files hold with other content, are refused at the check with what differs, said as such."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

from result_docs import result_doc

from stash_core import store, views

RUN_ID = "20261122T080000Z-eeee0006"
STARTED = datetime(2026, 11, 22, 8, tzinfo=UTC)
TABLES = ("runs", "phases", "stalls")  # what an export's upload needs


def _file(seed: int, iterations: int = 40, samples: bool = False) -> bytes:
    doc = result_doc("mobilenet_v2", run_id=RUN_ID, started_at=STARTED, seed=seed, iterations=iterations,
                     samples=samples)  # fmt: skip
    return json.dumps(doc).encode()


def _exported(tmp_path, doc, fmt: str, folder: str = "export") -> list[tuple[str, bytes]]:
    """`doc` stored in a.duckdb, exported in `fmt`: the files an upload of its runs needs."""
    store.ingest_result(tmp_path / "a.duckdb", doc)
    written = store.export(tmp_path / "a.duckdb", fmt, tmp_path / folder)
    return [(path.name, path.read_bytes()) for path in written if path.stem in TABLES]


def test_a_run_stored_with_other_content_is_refused_at_the_check(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, json.loads(_file(1)))
    same = views.upload.check_uploads(db, [("same.json", _file(1))])
    assert same.checks[0].ok and RUN_ID in same.already_stored  # the same content: already stored, a no-op
    report = views.upload.check_uploads(db, [("other.json", _file(1, iterations=41))])
    other = report.checks[0]
    assert not other.ok and f"run {RUN_ID} is stored with other content" in other.reason
    assert "already stored" not in other.reason and report.storable_docs == []


def test_two_uploaded_files_with_one_run_id_and_other_content_are_named_as_such(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"  # nothing stored
    report = views.upload.check_uploads(db, [("a.json", _file(1)), ("b.json", _file(1, iterations=41))])
    first, second = report.checks
    assert first.ok and not second.ok
    assert f"run {RUN_ID} is also in a.json with other content" in second.reason
    assert "stored" not in second.reason
    twice = views.upload.check_uploads(db, [("a.json", _file(1)), ("copy.json", _file(1))])
    assert all(check.ok for check in twice.checks)  # the same content twice stores once


def test_a_full_temporary_folder_is_said_so_and_no_file_is_blamed(tmp_path: Path, monkeypatch) -> None:
    """With the temporary folder full, a valid result file was refused: 'cannot use database
    .../scratch.duckdb: ... No space left on device'."""
    import pytest

    from stash_core.errors import StashError, UsageError

    def no_room(db_path, doc, source_file=None):
        raise UsageError(f"cannot use database {db_path}: IO Error: No space left on device")

    monkeypatch.setattr(store, "ingest_result", no_room)
    upload = json.dumps(result_doc("resnet18")).encode()
    with pytest.raises(StashError, match=r"^the temporary folder .* is full \(No space left on device\)"):
        views.upload.check_uploads(None, [("run.json", upload)])


def test_a_file_refused_for_its_stored_conflict_is_not_previewed_and_blocks_no_other(tmp_path: Path) -> None:
    """The refused file was still previewed as in the database, with its own label, and a file with the
    stored content uploaded beside it was refused as 'also in other.json with other content'."""
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, json.loads(_file(1)))
    files = [("other.json", _file(1, iterations=41)), ("same.json", _file(1))]
    report = views.upload.check_uploads(db, files)
    other, same = report.checks
    assert not other.ok and same.ok  # the stored content: already stored, a no-op
    assert len(report.preview) == 1  # the stored run once, as same.json has it


def _other_samples() -> bytes:
    """The run of _file(1) with one iteration time changed: the same figures, other samples."""
    doc = json.loads(_file(1, samples=True))
    doc["phases"][0]["samples"]["iteration_s"][0] *= 1.5
    return json.dumps(doc).encode()


def test_other_samples_are_other_content_at_the_check_as_at_store(tmp_path: Path) -> None:
    """Store refuses a run whose samples differ from the stored one's; the check passed it, and two such
    uploaded files were said to clash with the database rather than with each other."""
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, json.loads(_file(1, samples=True)))
    (check,) = views.upload.check_uploads(db, [("other.json", _other_samples())]).checks
    said = f"run {RUN_ID} is stored with other content (iterations R0 iteration_s)"
    assert not check.ok and said in check.reason
    empty = tmp_path / "empty.duckdb"
    files = [("a.json", _file(1, samples=True)), ("b.json", _other_samples())]
    report = views.upload.check_uploads(empty, files)
    said = f"run {RUN_ID} is also in a.json with other content (iterations R0 iteration_s)"
    assert said in report.checks[1].reason


def test_a_stored_run_without_samples_is_completed_not_called_already_stored(tmp_path: Path) -> None:
    """A run uploaded from an export without its samples, then its result file: the page said "already
    stored" and disabled Store, where `stash ingest` of the same file adds the samples."""
    import pandas as pd

    from stash_core.store.import_export import docs_from_export

    source, db = tmp_path / "source.duckdb", tmp_path / "r.duckdb"
    full = json.loads(_file(1, samples=True))
    store.ingest_result(source, full)
    read = {Path(p).stem: pd.read_parquet(p) for p in store.export(source, "parquet", tmp_path / "out")}
    (bare,) = docs_from_export({name: read[name] for name in ("runs", "phases", "stalls")})
    store.ingest_result(db, bare)
    report = views.upload.check_uploads(db, [("run.json", _file(1, samples=True))])
    (check,) = report.checks
    assert check.ok and RUN_ID not in report.already_stored
    assert "stored without the samples this file holds: Store adds them" in check.reason
    assert views.upload.store_uploads(db, report) == [("run.json", RUN_ID, True)]


def test_a_probe_or_simulation_file_is_sent_to_stash_ingest(tmp_path: Path) -> None:
    probe = json.dumps({"schema_version": 1, "kind": "stash-probe", "probe_id": "p1"}).encode()
    simulation = json.dumps({"kind": "stash-simulation", "simulation_id": "s1"}).encode()
    report = views.upload.check_uploads(None, [("probe.json", probe), ("sim.json", simulation)])
    reasons = [check.reason for check in report.checks]
    assert reasons[0].startswith("a `stash probe` file: store it with `stash ingest FILE`")
    assert reasons[1].startswith("a `stash schedule` simulation file: store it with `stash ingest FILE`")


def test_a_json_export_with_a_unicode_line_separator_in_a_text_cell_uploads(tmp_path):
    """U+2028 in a stall's note split the line it was in: "not valid JSON (... Extra data)"."""
    doc = json.loads(_file(1))
    doc["breakdown"]["stalls"]["compute"]["note"] = "a\u2028b"
    files = _exported(tmp_path, doc, "json")
    report = views.upload.check_uploads(tmp_path / "b.duckdb", files)
    assert all(check.ok for check in report.checks), report.checks
    assert any(RUN_ID in check.run_ids for check in report.checks)


def test_a_result_file_with_a_byte_order_mark_uploads(tmp_path):
    report = views.upload.check_uploads(tmp_path / "u.duckdb", [("bom.json", b"\xef\xbb\xbf" + _file(1))])
    assert report.checks[0].ok, report.checks[0]


def test_two_exports_of_one_database_uploaded_together_store_each_run_once(tmp_path):
    """A CSV and a JSON export of one database (or one export dropped twice) were refused: "phase R0 appears
    twice", the second runs table counted every run again."""
    doc = json.loads(_file(1))
    files = [file for fmt in ("csv", "json", "csv") for file in _exported(tmp_path, doc, fmt, folder=fmt)]
    report = views.upload.check_uploads(tmp_path / "b.duckdb", files)
    assert all(check.ok for check in report.checks), [check.reason for check in report.checks]
    assert [len(check.docs) for check in report.checks if check.kind == "export:runs"] == [1, 0, 0]
    assert views.upload.store_uploads(tmp_path / "b.duckdb", report) == [("runs.csv", RUN_ID, True)]


def test_a_csv_export_keeps_text_that_pandas_would_read_as_missing(tmp_path):
    """An error "NA" came back NULL and a note "N/A" empty: the run's own file was then refused as other
    content beside its upload."""
    doc = json.loads(_file(1))
    doc["breakdown"]["stalls"]["compute"]["note"] = "N/A"
    files = _exported(tmp_path, doc, "csv")
    report = views.upload.check_uploads(tmp_path / "b.duckdb", files)
    assert views.upload.store_uploads(tmp_path / "b.duckdb", report) == [("runs.csv", RUN_ID, True)]
    assert store.ingest_result(tmp_path / "b.duckdb", doc) is False  # the same run: stored, not refused
    with store.connect(tmp_path / "b.duckdb", read_only=True) as con:
        note = con.execute("SELECT note FROM stalls WHERE stall = 'compute'").fetchall()[0][0]
    assert note == "N/A"


def test_two_exports_that_disagree_on_a_run_store_neither(tmp_path):
    """The first of two runs tables with one run_id and other figures was kept, the other dropped unsaid."""
    files = _exported(tmp_path, json.loads(_file(1)), "csv")
    header, row = csv.reader(io.StringIO(next(data for name, data in files if name == "runs.csv").decode()))
    row[header.index("iteration_s")] = "9.5"
    other = io.StringIO()
    csv.writer(other).writerows([header, row])
    files.append(("runs_other.csv", other.getvalue().encode()))
    report = views.upload.check_uploads(tmp_path / "b.duckdb", files)
    assert not any(check.ok for check in report.checks if check.kind.startswith("export:runs"))
    assert any("runs tables give run_id" in check.reason and "with other iteration_s" in check.reason
               for check in report.checks)  # fmt: skip
    assert views.upload.store_uploads(tmp_path / "b.duckdb", report) == []


def test_an_edited_number_cell_of_a_csv_export_is_named_by_its_row_and_run(tmp_path):
    """One cell "abc" made the whole column text, and the refusal quoted another run's valid value as
    'breakdown.iteration_s must be a number, got 0.67'."""
    first = json.loads(_file(1))
    second = result_doc("resnet18", run_id="20261122T090000Z-eeee0007", started_at=datetime(2026, 11, 22, 9,
                        tzinfo=UTC), seed=2)  # fmt: skip
    store.ingest_result(tmp_path / "a.duckdb", first)
    files = _exported(tmp_path, second, "csv")
    edited = []
    for name, data in files:
        if name == "runs.csv":
            rows = list(csv.DictReader(io.StringIO(data.decode())))
            rows[1]["iteration_s"] = "abc"
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
            data = out.getvalue().encode()
        edited.append((name, data))
    report = views.upload.check_uploads(tmp_path / "b.duckdb", edited)
    runs = next(check for check in report.checks if check.name == "runs.csv")
    assert not runs.ok and runs.reason == (
        "runs table: row 2 (run 20261122T090000Z-eeee0007): iteration_s 'abc' is not a number"
    )


def test_a_database_that_stays_locked_is_waited_for_once_not_once_per_run(tmp_path: Path, monkeypatch):
    """Six files with the database held by another process waited 10 s each (a minute) before the page said
    anything; the first lock given up on refuses the rest with the same reason."""
    from stash_core.store.connection import DatabaseLocked

    files = []
    for index in range(3):
        doc = result_doc("mobilenet_v2", run_id=f"20261122T08000{index}Z-eeee000{index}", started_at=STARTED)
        files.append((f"run{index}.json", json.dumps(doc).encode()))
    db = tmp_path / "r.duckdb"
    report = views.upload.check_uploads(db, files)
    assert all(check.ok for check in report.checks)
    tries = []

    def locked(*args, **kwargs):
        tries.append(args)
        raise DatabaseLocked(f"database {db} is locked by another process (PID 1) - gave up after 10 s")

    monkeypatch.setattr(store, "ingest_result", locked)
    outcomes = views.upload.store_uploads(db, report)
    assert len(tries) == 1 and list(outcomes) == []
    assert [name for name, _, _ in outcomes.refused] == ["run0.json", "run1.json", "run2.json"]
    assert all("locked by another process" in reason for _, _, reason in outcomes.refused)


def test_a_csv_export_gives_back_every_text_as_stored(tmp_path):
    """A terminal escape came back as its written form (\\x1b), a text that looks like a number as a number
    ("0.10" as "0.1"): each run's own file was then refused beside its upload, and one such run refused the
    whole runs table."""
    doc = json.loads(_file(1))
    doc["stash_version"] = "0.10"
    doc["phases"][1]["description"] = "1e3"
    stalls = doc["breakdown"]["stalls"]
    stalls["compute"]["note"] = "\x1b[31mred\x1b[0m\r\nthen \\x1b typed, C:\\runs\\x and \\\\ and \u202e"
    stalls["interconnect"]["note"] = "0.50"
    files = _exported(tmp_path, doc, "csv")
    runs_csv = next(data for name, data in files if name == "runs.csv") + next(
        data for name, data in files if name == "stalls.csv")
    assert b"\x1b" not in runs_csv and "\u202e".encode() not in runs_csv  # still no escape in the file
    report = views.upload.check_uploads(tmp_path / "b.duckdb", files)
    assert all(check.ok for check in report.checks), [check.reason for check in report.checks]
    assert views.upload.store_uploads(tmp_path / "b.duckdb", report) == [("runs.csv", RUN_ID, True)]
    assert store.ingest_result(tmp_path / "b.duckdb", doc) is False  # the same run: stored, not refused
    tables = {"runs": "run_id", "phases": "run_id, phase", "stalls": "run_id, stall"}
    for table, order in tables.items():
        read = []
        for db in ("a", "b"):
            with store.connect(tmp_path / f"{db}.duckdb", read_only=True) as con:
                described = con.execute(f"DESCRIBE {table}").fetchall()
                columns = ", ".join(c for c, *_ in described if c not in ("ingested_at", "source_file"))
                read.append(con.execute(f"SELECT {columns} FROM {table} ORDER BY {order}").fetchall())
        assert read[0] == read[1], table


def _with_probe(run_id: str) -> dict:
    doc = result_doc("mobilenet_v2", run_id=run_id, started_at=STARTED, seed=1)
    measure = {"size_bytes": 4096, "repetitions": 4, "time_s": 0.001, "time_min_s": 0.00095,
               "algbw_gbps": 0.03, "busbw_gbps": 0.03}  # fmt: skip
    doc["probes"] = [{"probe_id": "probe-shared", "run_id": run_id, "phase": "R1", "started_at": None,
                      "hostname": "box1", "instance": None, "backend": "gloo", "device": "cpu",
                      "world_size": 2, "nodes": 1, "workers_per_node": 2, "link_gbps": None,
                      "allreduce": [measure], "p2p": []}]  # fmt: skip
    return doc


def test_a_new_run_whose_probe_set_another_run_holds_is_refused_at_the_check(tmp_path: Path) -> None:
    """The check said "Store 1 new run(s)"; Store then refused the file: its probe set's id was stored with
    another run."""
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, _with_probe(RUN_ID))
    copy = _with_probe("20261122T090000Z-ffff0007")
    report = views.upload.check_uploads(db, [("copy.json", json.dumps(copy).encode())])
    assert not report.checks[0].ok, report.checks[0].reason
    assert "probe set probe-shared belongs to run " + RUN_ID in report.checks[0].reason
    assert report.storable_docs == []


def test_the_check_reads_a_database_from_before_the_hosts_column_as_it_is(tmp_path):
    """The dashboard takes a version-7 database as it is (readers never migrate): the Upload check read
    runs.hosts from it and failed on the missing column."""
    import duckdb

    db = tmp_path / "v7.duckdb"
    store.ingest_result(db, json.loads(_file(1)))
    with duckdb.connect(str(db)) as con:  # the runs table as version 7 had it
        con.execute("ALTER TABLE runs DROP COLUMN hosts")
        con.execute("UPDATE schema_meta SET value = '7' WHERE key = 'schema_version'")
    same = views.upload.check_uploads(db, [("same.json", _file(1))])
    assert same.checks[0].ok and RUN_ID in same.already_stored
    other = views.upload.check_uploads(db, [("other.json", _file(1, iterations=41))]).checks[0]
    assert not other.ok and f"run {RUN_ID} is stored with other content" in other.reason


def test_an_export_made_before_the_hosts_column_is_the_same_run_as_its_result_file(tmp_path):
    """A run stored from its result file keeps what its hosts reported; an export made before the column
    existed has none, and was refused as "other content (hosts)" (or not, by the files' order)."""
    from stash_core.store.ingest_conflicts import differences

    doc = json.loads(_file(1))
    doc["hosts"] = [{"host": "a", "hostname": "a", "cpu_count": 2}]
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, doc)
    older = [(name, body) for name, body in _exported(tmp_path, json.loads(_file(1)), "csv")]
    report = views.upload.check_uploads(db, older)
    assert all(check.ok for check in report.checks), [check.reason for check in report.checks]
    assert differences({"hosts": doc["hosts"]}, {"hosts": None}) == []
    assert differences({"hosts": None}, {"hosts": doc["hosts"]}) == []
    assert differences({"hosts": doc["hosts"]}, {"hosts": [{"host": "b"}]}) == ["hosts"]
