"""pages._shared.load: the one cached way pages read the database (outside a running app: bare Streamlit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc

from pages import _shared
from stash_core import store, views


@pytest.fixture()
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "results.duckdb"
    store.ingest_result(path, result_doc("resnet18", instance="box"))
    monkeypatch.setattr(_shared, "current_db", lambda: path)
    _shared.forget_cached_queries()
    yield path
    _shared.forget_cached_queries()


def test_load_calls_once_per_arguments_until_the_database_changes(db: Path) -> None:
    calls: list[tuple[Path, int]] = []

    def doubled(db_path: Path, number: int) -> int:
        calls.append((db_path, number))
        return 2 * number

    assert _shared.load(doubled, 3) == 6
    assert _shared.load(doubled, 3) == 6
    assert _shared.load(doubled, number=4) == 8
    assert calls == [(db, 3), (db, 4)]  # the second call came from the cache
    store.ingest_result(db, result_doc("vgg11", instance="box"))  # a write changes the file's signature
    assert _shared.load(doubled, 3) == 6
    assert len(calls) == 3
    _shared.forget_cached_queries()
    _shared.load(doubled, 3)
    assert len(calls) == 4


def test_functions_with_the_same_arguments_have_their_own_entries(db: Path) -> None:
    overview = _shared.load(views.overview.overview)
    choices = _shared.load(views.compare.compare_choices)
    assert overview["runs"] == 1
    assert choices[["model", "batch_size"]].values.tolist() == [["resnet18", 32]]
    assert _shared.load(views.breakdown.model_names) == ["resnet18"]
