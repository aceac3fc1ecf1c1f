"""A hostile user of the dashboard's pages, through their data layer (stash_core/views): uploads with odd
names and contents, workloads and offers out of range, database settings that are no path, catalog edits
with values the command line refuses. Each gets one clear UsageError (or a refused upload with its reason),
never another exception, and a refused edit stores nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest
from result_docs import result_doc

from stash_core import store, views
from stash_core.errors import UsageError

WORKLOAD = json.dumps({"param_mb": 100, "solo_bandwidth_mbps": 900, "a1": 0.1, "b1": 0.2,
                       "g": [1, 2, 3, 4, 5], "batch_per_gpu": 32,
                       "compute_s": {"g4dn.xlarge": 0.2}})  # fmt: skip
TRACE = b"job_id,num_gpu,submit_time,duration\nj1,4,0,100\nj2,2,10,50\nj3,1,20,30\n"
OFFER = (("g4dn.xlarge", 2),)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile-views")
    db = root / "r.duckdb"
    store.ingest_result(db, result_doc("resnet18", run_id="20261124T100000Z-aaaa0001"))
    (root / "t.csv").write_text("a,b\n1,2\n")
    os.mkfifo(root / "fifo")
    return {"db": str(db), "tmp": str(root), "t": str(root / "t.csv"), "fifo": str(root / "fifo")}


def _schedule(**kw):
    return lambda w: views.schedule.simulate(w["db"], **{"files": None, "out_dir": f"{w['tmp']}/sim", **kw})


def _plan(text=WORKLOAD, offers=OFFER, loss=1.0, budget=100.0, **kw):
    return lambda w: views.spot.plan(w["db"], text, offers, loss, budget, **kw)


def _edit(column, value):
    def change(w):
        before = views.recommend.instance_catalog(w["db"])
        after = before.copy()
        after[column] = after[column].astype(object)
        after.loc[after.index[0], column] = value
        return views.recommend.save_catalog_edits(w["db"], before, after)

    return change


def _edit_and_add_twice(w):
    """A price change and two new rows of one name: refused whole, the price change too."""
    before = views.recommend.instance_catalog(w["db"])
    after = before.copy().astype(object)
    after.loc[after.index[0], "on_demand_usd_per_h"] = 2.0
    twice = pd.DataFrame([{"name": "x1", "vcpus": 4}, {"name": "x1", "vcpus": 8}])
    twice = twice.reindex(columns=before.columns)
    after = pd.concat([after, twice.astype(object)], ignore_index=True)
    return views.recommend.save_catalog_edits(w["db"], before, after)


def _add(**values):
    def change(w):
        before = views.recommend.instance_catalog(w["db"])
        after = pd.concat([before, pd.DataFrame([values]).reindex(columns=before.columns)], ignore_index=True)
        return views.recommend.save_catalog_edits(w["db"], before, after)

    return change


def _upload(name: str, content: bytes):
    return lambda w: views.upload.check_uploads(w["db"], [(name, content)])


ONE_RUN = json.dumps(result_doc("resnet18", run_id="20261124T100000Z-aaaa0009")).encode()

# (id, call, what the UsageError says)
REFUSED = [
    ("trace-upload-named-dotdot", _schedule(files=[("..", b"x")]), "cannot tell the format"),
    ("trace-upload-named-empty", _schedule(files=[("", b"x")]), "cannot tell the format"),
    ("trace-upload-named-dot", _schedule(files=[(".", b"x")]), "cannot tell the format"),
    ("trace-upload-same-name-twice", _schedule(files=[("t.csv", TRACE), ("t.csv", b"x")]), "named t.csv"),
    ("trace-upload-binary", _schedule(files=[("t.csv", b"\x00\xff" * 100)]), "t.csv"),
    ("trace-upload-empty", _schedule(files=[("t.csv", b"")]), "empty"),
    ("schedule-cluster-zero", _schedule(cluster=(0, 4, 8)), "cluster"),
    ("schedule-jobs-zero", _schedule(synthetic_jobs=0), "1 to"),
    ("schedule-gap-nan", _schedule(mean_gap_s=math.nan), "mean gap"),
    ("schedule-delay-negative", _schedule(tuning="given", delay_s=-5), "delay_s"),
    ("schedule-out-is-db", lambda w: _schedule(out_dir=w["db"])(w), "is the database"),
    ("schedule-policy-unknown", _schedule(policies=["x"]), "unknown policy"),
    ("spot-workload-empty", _plan(text=""), "the workload is empty"),  # "not valid JSON" before
    ("spot-workload-list", _plan(text="[1, 2]"), "JSON object"),
    ("spot-workload-nan", _plan(text=WORKLOAD.replace('"a1": 0.1', '"a1": NaN')), "a1"),
    ("spot-workload-deep", _plan(text="[" * 100_000 + "]" * 100_000), "workload"),
    ("spot-offers-none", _plan(offers=()), "at least one"),
    ("spot-offers-zero", _plan(offers=(("g4dn.xlarge", 0),)), "at least one"),
    ("spot-offer-escape", _plan(offers=(("g4\x1b", 2),)), "U+001B"),
    ("spot-loss-nan", _plan(loss=math.nan), "target_loss"),
    ("spot-budget-negative", _plan(budget=-100.0), "budget_s"),
    ("spot-pcie-zero", _plan(pcie_gbps=0), "pcie_gbps"),
    ("spot-workload-upload-binary", lambda w: views.spot.workload_text(b"\xff\xfe", "w.json"), "not a text"),
    ("spot-workload-names-garbage", lambda w: views.spot.workload_names("{not json"), "not valid JSON"),
    ("db-setting-tilde-of-no-user", lambda w: views.common.resolve_db_path("~nosuchuser-stash/x.duckdb"),
     "nosuchuser-stash"),
    ("db-setting-escape", lambda w: views.common.resolve_db_path("a\x1b.duckdb"), "control character"),
    ("db-setting-nul", lambda w: views.common.resolve_db_path("a\x00.duckdb"), "control character"),
    ("db-setting-name-too-long", lambda w: views.common.resolve_db_path("x" * 5000), "too long"),
    ("db-setting-folder", lambda w: views.common.resolve_db_path(w["tmp"]), "folder"),
    ("overview-db-is-a-csv", lambda w: views.overview.overview(w["t"]), "not a DuckDB database"),
    ("overview-db-fifo", lambda w: views.overview.overview(w["fifo"]), "FIFO"),
    ("catalog-vcpus-negative", _edit("vcpus", -4), "vcpus"),
    ("catalog-memory-inf", _edit("memory_gib", math.inf), "memory_gib"),
    ("catalog-price-formula", _edit("on_demand_usd_per_h", "=1+1"), "on_demand_usd_per_h"),
    ("catalog-price-negative", _edit("on_demand_usd_per_h", -1.0), "on_demand_usd_per_h"),
    ("catalog-region-escape", _edit("region", "us\x1b[31m"), "U+001B"),
    ("catalog-date-month-13", _edit("price_date", "2025-13-45"), "price_date"),
    ("catalog-date-year-1", _edit("price_date", "0001-01-01"), "price_date"),
    ("catalog-accelerator-10000", _edit("accelerator", "A" * 10_000), "at most 200"),
    ("catalog-gpus-fraction", _edit("accelerator_count", 1.5), "accelerator_count"),
    ("catalog-gpus-huge", _edit("accelerator_count", 10**12), "accelerator_count"),
    ("catalog-new-name-escape", _add(name="bad\x1bname", vcpus=4), "U+001B"),
    ("catalog-new-row-without-name", _add(vcpus=4), "a new row needs a name"),
    ("catalog-rename-onto-another", _edit("name", "g3.4xlarge"), "a name cannot be changed here"),
    ("catalog-name-emptied", _edit("name", None), "its name cannot be emptied"),
    ("catalog-edit-and-a-name-added-twice", _edit_and_add_twice, "instance x1: added twice"),
    ("catalog-new-name-100000", _add(name="n" * 100_000, vcpus=4), "at most 200"),
    ("catalog-new-gpus-fraction", _add(name="box", accelerator="T4", accelerator_count=2.5),
     "accelerator_count"),
]  # fmt: skip

# (id, call, what must hold of the answer): odd but usable, answered.
ANSWERED = [
    ("upload-without-name", lambda w: views.upload.check_uploads(w["db"], [("", b"{}")]),
     lambda r: not r.checks[0].ok and "unsupported" in r.checks[0].reason),
    ("upload-exe", lambda w: views.upload.check_uploads(w["db"], [("x.exe", b"MZ")]),
     lambda r: not r.checks[0].ok),
    ("upload-binary-json", lambda w: views.upload.check_uploads(w["db"], [("x.json", b"\xff\xfe")]),
     lambda r: "UTF-8" in r.checks[0].reason),
    ("upload-csv-column-twice", _upload("runs.csv", b"run_id,run_id\na,b\n"),
     lambda r: not r.checks[0].ok),
    ("upload-csv-formula", lambda w: views.upload.check_uploads(w["db"], [("runs.csv", b"run_id\n=1+1\n")]),
     lambda r: not r.checks[0].ok),
    ("upload-csv-empty", lambda w: views.upload.check_uploads(w["db"], [("runs.csv", b"")]),
     lambda r: "empty" in r.checks[0].reason),
    ("upload-parquet-garbage", _upload("runs.parquet", b"PAR1xxPAR1"),
     lambda r: not r.checks[0].ok),
    ("upload-json-lines-broken", _upload("runs.json", b'{"a": 1}\n{bad\n'),
     lambda r: not r.checks[0].ok),
    # said as the command says it, not in Python's words ("maximum recursion depth exceeded ...")
    ("upload-json-deep", _upload("deep.json", b"[" * 100_000 + b"]" * 100_000),
     lambda r: r.checks[0].reason == "JSON nested too deeply (at most 32 levels)"),
    # Stash's own printed JSON said only "no kind"; another tool's JSON is told what the page takes
    ("upload-show-output", _upload("show.json", b'{"run": {"run_id": "x"}, "breakdown": null}'),
     lambda r: r.checks[0].reason.startswith("what `stash show --format json` printed, not a result file")),
    ("upload-runs-output", _upload("runs.json", b'{"runs": [], "stored": 0}'),
     lambda r: r.checks[0].reason.startswith("what `stash runs --format json` printed")),
    ("upload-other-json", _upload("x.json", b'{"a": 1}'),
     lambda r: r.checks[0].reason.endswith("this page stores the result file `stash profile --out` writes, "
                                           "or a `stash export` of the database")),
    # the same file dropped twice: listed twice beside "Store 1 new run(s)", with no word of why one
    ("upload-one-run-twice", lambda w: views.upload.check_uploads(w["db"], [("a.json", ONE_RUN),
                                                                           ("b.json", ONE_RUN)]),
     lambda r: r.checks[1].reason.endswith(" - the same run as a.json above: stored once")
     and "same run" not in r.checks[0].reason),
    ("upload-json-huge-number", _upload("big.json", b'{"a": ' + b"9" * 5000 + b"}"),
     lambda r: r.checks[0].reason.startswith("a number in the file is too long")),
    ("catalog-source-formula-kept-as-text", _edit("source", "=HYPERLINK(1)"), lambda r: len(r[0]) == 1),
    ("catalog-sql-like-name-is-a-name", _add(name="x'); DROP TABLE instances; --", vcpus=4),
     lambda r: r[1] == ["x'); DROP TABLE instances; --"]),
    ("catalog-empty-new-row-ignored", _add(), lambda r: r == ([], [], [])),
]  # fmt: skip


def test_the_cases_are_named_once():
    ids = [case[0] for case in REFUSED + ANSWERED]
    assert len(ids) == len(set(ids)) >= 50


def _db_digest(world) -> str:
    return hashlib.sha256(Path(world["db"]).read_bytes()).hexdigest()


@pytest.mark.parametrize(("case_id", "call", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_hostile_page_input_gets_one_clear_usage_error(case_id, call, says, world, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = _db_digest(world)
    with pytest.raises(UsageError) as raised:
        call(world)
    message = str(raised.value)
    assert says in message and len(message.splitlines()) == 1, message
    assert _db_digest(world) == before
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("case_id", "call", "holds"), ANSWERED, ids=[case[0] for case in ANSWERED])
def test_an_odd_page_input_is_answered(case_id, call, holds, world, tmp_path):
    own = {**world, "db": str(tmp_path / "own.duckdb")}
    Path(own["db"]).write_bytes(Path(world["db"]).read_bytes())
    assert holds(call(own))
