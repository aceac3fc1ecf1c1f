"""The signed remainder in the store: in stall_breakdown the five stalls and `unattributed_s` add up to
`iteration_s` and the shares to 1 for every run, over a real database of many noisy runs
(noisy_docs.noisy_result_doc), current and written before the remainder existed; runs holds the remainder of
analysis.stalls.remainder_of; an export read back gives the same remainder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import result_docs
from noisy_docs import noisy_result_doc

from stash_core import store
from stash_core.analysis.stalls import REMAINDER, STALLS, remainder_of, stall_resolved
from stash_core.results import upgrade_result
from stash_core.store.import_export import COMPANION_TABLES, docs_from_export

SEEDS = range(80)
FORMATS = ("csv", "json", "parquet")


def _docs() -> list[dict]:
    docs = [
        noisy_result_doc(seed, legacy=seed % 3 == 0, run_id=f"20261201T{seed:06d}Z-{seed:08x}")
        for seed in SEEDS
    ]
    docs.append(result_docs.result_doc(run_id="20261202T000000Z-plain000"))  # adds up: no remainder
    docs.append(result_docs.result_doc(run_id="20261202T000001Z-failed00", status="failed"))
    stale = noisy_result_doc(7, run_id="20261202T000002Z-stale000")
    stale["breakdown"]["unattributed_s"] = 123.0  # a figure that does not close the breakdown
    stale["breakdown"][REMAINDER]["seconds"] = 123.0
    docs.append(stale)
    return docs


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    folder = tmp_path_factory.mktemp("remainder")
    docs = _docs()
    paths = []
    for doc in docs:
        paths.append(folder / f"{doc['run_id']}.json")
        paths[-1].write_text(json.dumps(doc), encoding="utf-8")
    db = folder / "results.duckdb"
    assert all(inserted for _, _, inserted in store.ingest_files(db, paths))
    return db, {doc["run_id"]: doc for doc in docs}


def _view(db: Path) -> pd.DataFrame:
    return store.query_readonly(db, "SELECT * FROM stall_breakdown ORDER BY run_id")


@pytest.mark.slow  # its module's stored runs take seconds to make
def test_the_stalls_and_the_remainder_add_up_to_the_iteration_time(stored) -> None:
    db, docs = stored
    view = _view(db)
    completed = view[view["status"] == "completed"]
    assert len(completed) == len(docs) - 1
    stalls = completed[[f"{stall}_s" for stall in STALLS]].fillna(0.0).sum(axis=1)
    assert (stalls + completed["unattributed_s"]).tolist() == pytest.approx(
        completed["iteration_s"].tolist(), rel=1e-12, abs=1e-15
    )
    shares = completed[[f"{stall}_share" for stall in STALLS]].fillna(0.0).sum(axis=1)
    assert (shares + completed["unattributed_share"]).tolist() == pytest.approx(
        [1.0] * len(completed), abs=1e-9
    )
    per_epoch = completed["unattributed_s"] * completed["iterations_per_epoch"]
    assert completed["unattributed_epoch_s"].tolist() == pytest.approx(per_epoch.tolist(), rel=1e-12)
    assert (completed["unattributed_s"] < 0).sum() > 5 and (completed["unattributed_s"] > 0).sum() > 5
    failed = view[view["status"] == "failed"].iloc[0]
    assert pd.isna(failed["unattributed_s"]) and pd.isna(failed["unattributed_share"])


def test_runs_hold_the_remainder_of_the_result_file(stored) -> None:
    db, docs = stored
    runs = store.query_readonly(db, "SELECT run_id, unattributed_s, unattributed_ci95_s FROM runs").to_dict(
        orient="records"
    )
    view = _view(db).set_index("run_id")
    for run in runs:
        breakdown = docs[run["run_id"]]["breakdown"]
        if breakdown is None:
            assert pd.isna(run["unattributed_s"]) and pd.isna(run["unattributed_ci95_s"])
            continue
        remainder = remainder_of(breakdown)
        assert run["unattributed_s"] == remainder["seconds"]
        assert run["unattributed_ci95_s"] == remainder["ci95_s"] and remainder["ci95_s"] >= 0
        assert view.loc[run["run_id"], "unattributed_ci95_s"] == remainder["ci95_s"]
        assert view.loc[run["run_id"], "unattributed_s"] == pytest.approx(remainder["seconds"], abs=1e-12)
    stale = next(run for run in runs if run["run_id"].endswith("stale000"))
    assert abs(stale["unattributed_s"]) < 1.0  # recomputed from the stalls, not the stale 123 s
    plain = next(run for run in runs if run["run_id"].endswith("plain000"))
    assert plain["unattributed_s"] == 0.0 and plain["unattributed_ci95_s"] == 0.0


def test_the_remainder_has_no_row_in_stalls(stored) -> None:
    db, _ = stored
    stalls = store.query_readonly(db, "SELECT DISTINCT stall FROM stalls")["stall"]
    assert set(stalls) == set(STALLS)


def test_each_stall_is_resolved_in_the_view_as_stash_show_says_it(stored) -> None:
    """A stall whose interval was wider than its value read `measured` in the view, with nothing to tell a
    query it was not resolved; `<stall>_resolved` says it as analysis.stalls.stall_resolved does."""
    db, _ = stored
    rows = store.query_readonly(db, "SELECT run_id, stall, seconds, ci95_s, status FROM stalls")
    view = _view(db).set_index("run_id")
    said = {True: 0, False: 0, None: 0}
    for row in rows.to_dict(orient="records"):
        expected = stall_resolved({key: row[key] for key in ("seconds", "ci95_s", "status")})
        got = view.loc[row["run_id"], f"{row['stall']}_resolved"]
        assert (None if pd.isna(got) else bool(got)) == expected, row
        said[expected] += 1
    assert min(said.values()) > 0, said  # the noisy runs hold each case


def _read_export(folder: Path, fmt: str) -> dict[str, pd.DataFrame]:
    """The exported tables as the upload page reads them (views/upload.py)."""
    tables = {}
    for name in ("runs", *COMPANION_TABLES):
        path = folder / f"{name}.{fmt}"
        if fmt == "json":
            lines = path.read_text(encoding="utf-8").splitlines()
            tables[name] = pd.DataFrame([json.loads(line) for line in lines if line.strip()])
        else:
            tables[name] = pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)
    return tables


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_read_back_gives_the_same_remainder(stored, tmp_path, fmt) -> None:
    db, docs = stored
    store.export(db, fmt, tmp_path / "export")
    tables = _read_export(tmp_path / "export", fmt)
    assert "unattributed_ci95_s" in tables["runs"].columns
    imported = {doc["run_id"]: upgrade_result(doc) for doc in docs_from_export(tables)}
    assert set(imported) == set(docs)
    for run_id, doc in imported.items():
        if docs[run_id]["breakdown"] is None:
            continue
        original, again = remainder_of(docs[run_id]["breakdown"]), remainder_of(doc["breakdown"])
        for key in ("seconds", "ci95_s", "share", "epoch_s", "status"):
            expected = original[key]
            assert again[key] == (
                pytest.approx(expected, rel=1e-12, abs=1e-15) if key != "status" else expected
            )
        assert again["estimated"] is False or original["estimated"] is True
    again_db = tmp_path / "again.duckdb"
    chosen = sorted(imported)[:12]
    for run_id in chosen:
        assert store.ingest_result(again_db, imported[run_id])
    columns = "run_id, unattributed_s, unattributed_ci95_s, unattributed_share"
    sql = f"SELECT {columns} FROM stall_breakdown WHERE list_contains(?, run_id) ORDER BY run_id"
    before = store.query_readonly(db, sql.replace("?", _list(chosen)))
    after = store.query_readonly(again_db, sql.replace("?", _list(chosen)))
    assert len(after) == len(chosen)
    for left, right in zip(before.to_dict(orient="records"), after.to_dict(orient="records"), strict=True):
        assert left["run_id"] == right["run_id"]
        for key in ("unattributed_s", "unattributed_ci95_s", "unattributed_share"):
            assert math.isclose(left[key], right[key], rel_tol=1e-12, abs_tol=1e-15), key


def _list(run_ids: list[str]) -> str:
    return "[" + ", ".join(f"'{run_id}'" for run_id in run_ids) + "]"


@pytest.mark.slow  # its module's stored runs take seconds to make
def test_the_exported_epoch_figures_have_their_intervals(stored) -> None:
    """stall_breakdown had `*_epoch_s` columns and no interval for them."""
    view = _view(stored[0])
    rows = view[view["iterations_per_epoch"].notna()]
    assert len(rows) > 0
    per_epoch = rows["iterations_per_epoch"]
    pairs = [("epoch_ci95_s", "iteration_ci95_s"), ("unattributed_epoch_ci95_s", "unattributed_ci95_s")]
    pairs += [(f"{stall}_epoch_ci95_s", f"{stall}_ci95_s") for stall in STALLS]
    for epoch_column, column in pairs:
        expected = rows[column] * per_epoch
        assert (rows[epoch_column].isna() == expected.isna()).all(), epoch_column
        known = expected.notna()
        assert rows.loc[known, epoch_column].to_numpy() == pytest.approx(expected[known].to_numpy())


def test_the_view_s_remainder_is_zero_where_the_stalls_add_up_but_for_rounding(tmp_path) -> None:
    """The stalls 0.1 + 0.2 + 0.3 of an iteration of 0.6 s: the view subtracted them in its own order and said
    -1.1e-16 s left over, where the result file, `stash show` and the runs table say 0."""
    db = tmp_path / "r.duckdb"
    doc = result_docs.result_doc(stalls={"compute": 0.1, "interconnect": 0.2, "cpu": 0.3})
    doc["breakdown"]["iteration_s"] = 0.6
    store.ingest_result(db, doc)
    [(view_s, share)] = store.query_readonly(
        db, "SELECT unattributed_s, unattributed_share FROM stall_breakdown"
    ).itertuples(index=False)
    assert (view_s, share) == (0.0, 0.0)


def test_a_stall_edited_by_hand_reads_alike_in_its_share_and_epoch_and_the_shares_add_up(tmp_path) -> None:
    """The view took the stored share and epoch figure: after an UPDATE of stalls.seconds it disagreed with
    `stash show` and its shares added up to 1.16."""
    import duckdb

    doc = result_docs.result_doc(run_id="20261202T000003Z-edited00")
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, doc)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE stalls SET seconds = seconds / 2 WHERE stall = 'compute'")
    row = _view(db).iloc[0]
    assert row["compute_share"] == pytest.approx(row["compute_s"] / row["iteration_s"])
    assert row["compute_epoch_s"] == pytest.approx(row["compute_s"] * row["iterations_per_epoch"])
    shares = [row[f"{stall}_share"] for stall in (*STALLS, REMAINDER) if not pd.isna(row[f"{stall}_share"])]
    assert sum(shares) == pytest.approx(1.0)


@pytest.mark.parametrize("ci95", ["'-inf'::DOUBLE", "'nan'::DOUBLE", "NULL", "'inf'::DOUBLE"])
def test_a_stall_whose_interval_was_edited_to_no_number_is_not_resolved_in_the_view(tmp_path, ci95) -> None:
    """An interval of -inf read as resolved in the view (|x| >= -inf) where stash show says it is not."""
    import duckdb

    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_docs.result_doc(run_id="20261202T000004Z-edited01"))
    with duckdb.connect(str(db)) as con:
        con.execute(f"UPDATE stalls SET ci95_s = {ci95} WHERE stall = 'compute'")
    assert not _view(db).iloc[0]["compute_resolved"]
    assert stall_resolved({"seconds": 0.3, "ci95_s": float("-inf"), "status": "measured"}) is False
