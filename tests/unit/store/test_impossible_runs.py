"""Which stored runs every list marks: a breakdown that cannot be (its warning, or a share beyond 100% stored
before the warning existed) and runs that did different work; a possible breakdown is not marked."""

from __future__ import annotations

from pathlib import Path

from result_docs import result_doc

from stash_core import store
from stash_core.analysis.coherence import DIFFERENT_WORK, IMPOSSIBLE
from stash_core.store.impossible_runs import IMPOSSIBLE_MARK, NOT_COMPARABLE_MARK, breakdown_marks

WARNED = f"{IMPOSSIBLE}: R0 took 0.92 s per iteration and R1 0.22 s. Cause: threads. To do: fix them"
MIXED = f"{DIFFERENT_WORK}: the runs did different work per process: threads 2 in R0, 1 in R1"


def test_impossible_and_not_comparable_runs_are_marked_and_possible_ones_are_not(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    docs = {
        "warned": result_doc(stalls={"compute": 0.92, "interconnect": -0.70}, warnings=[WARNED]),
        "share": result_doc(stalls={"compute": 0.92, "interconnect": -0.70}),  # 418%, no warning stored
        "mixed": result_doc(stalls={"compute": 0.30, "interconnect": 0.08}, warnings=[MIXED]),
        "fine": result_doc(stalls={"compute": 0.30, "interconnect": 0.08}),
    }
    for doc in docs.values():
        store.ingest_result(db, doc)
    ids = {name: doc["run_id"] for name, doc in docs.items()}
    marks = breakdown_marks(db, [ids["fine"], ids["mixed"], ids["share"], ids["warned"], "no-such-run"])
    assert marks == {
        ids["mixed"]: NOT_COMPARABLE_MARK,
        ids["share"]: IMPOSSIBLE_MARK,
        ids["warned"]: IMPOSSIBLE_MARK,
    }
    assert list(marks) == [ids["mixed"], ids["share"], ids["warned"]]  # in the order asked
    assert breakdown_marks(db, []) == {}
