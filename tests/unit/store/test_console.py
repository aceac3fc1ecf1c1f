"""The SQL console runs each query in a process of its own: it is killed at the time and memory limits, and
neither its sandboxing settings nor its memory reach the process that asked."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store import console
from stash_core.store.console import run_readonly_query

# A count over 10^15 rows: minutes of work, whatever the machine, and no memory to speak of.
ENDLESS = "SELECT count(*) FROM range(1000000000000) a, range(1000) b"
# A hash table that grows by hundreds of megabytes a second until the memory limit.
GREEDY = "SELECT count(DISTINCT range) FROM range(10000000000)"


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.duckdb"
    with store.connect(path):
        pass  # the store's schema, empty
    return path


def _workers() -> list[psutil.Process]:
    """The console processes this test process started and that are still running."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "stash_core.store.console_worker" in " ".join(child.cmdline()) and child.status() != "zombie":
                found.append(child)
        except psutil.Error:
            pass
    return found


class _PeakWorkerMemory:
    """Samples the resident memory of the console processes while a query runs."""

    def __init__(self) -> None:
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for worker in _workers():
                try:
                    self.peak_bytes = max(self.peak_bytes, worker.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.05)

    def __enter__(self) -> _PeakWorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_greedy_query_is_killed_at_the_time_limit_and_its_memory_returned(db: Path) -> None:
    own = psutil.Process()
    before_bytes = own.memory_info().rss
    limit_s = 5.0  # the snapshot's copy comes first; a busy machine leaves the query less of the limit
    started = time.monotonic()
    with _PeakWorkerMemory() as worker_memory, pytest.raises(UsageError, match="time limit"):
        run_readonly_query(db, GREEDY, timeout_s=limit_s)
    elapsed_s = time.monotonic() - started
    assert worker_memory.peak_bytes > 250 * 2**20  # it really was allocating (the idle worker: ~150 MiB)
    assert limit_s <= elapsed_s < limit_s + 10  # the limit, plus starting Python and DuckDB
    assert _workers() == []  # the process is gone, and with it all it held
    assert own.memory_info().rss - before_bytes < 100 * 2**20  # none of it came to this process


def test_an_endless_query_is_stopped_at_the_time_limit_and_the_console_still_works(db: Path) -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match=r"stopped after 1 s \(time limit\)"):
        run_readonly_query(db, ENDLESS, timeout_s=1.0)
    assert time.monotonic() - started < 1.0 + 10
    assert _workers() == []
    assert run_readonly_query(db, "SELECT 42 AS answer").frame["answer"].tolist() == [42]


def test_a_query_past_the_memory_limit_is_refused_in_one_line(db: Path) -> None:
    with pytest.raises(UsageError) as caught:
        run_readonly_query(db, GREEDY, timeout_s=60, memory_limit_bytes=128 * 2**20)
    message = str(caught.value)
    assert "128 MiB of memory" in message and "\n" not in message
    assert _workers() == []


def test_a_worker_over_its_resident_memory_is_killed(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever DuckDB's own limit misses (Python, Arrow) is caught by watching the process: with no headroom
    # above a 16 MiB limit, the worker's interpreter alone is over it.
    monkeypatch.setattr(console, "RSS_HEADROOM_BYTES", -8 * 2**20)
    with pytest.raises(UsageError, match="needs more than 16 MiB of memory"):
        run_readonly_query(db, "SELECT 1", memory_limit_bytes=16 * 2**20)
    assert _workers() == []


def test_other_connections_of_this_process_keep_their_configuration(db: Path, tmp_path: Path) -> None:
    csv = tmp_path / "numbers.csv"
    csv.write_text("n\n1\n2\n")
    outcome: dict[str, BaseException] = {}

    def query() -> None:
        try:
            run_readonly_query(db, ENDLESS, timeout_s=4.0)
        except BaseException as exc:
            outcome["error"] = exc

    console_thread = threading.Thread(target=query)
    console_thread.start()
    try:
        deadline = time.monotonic() + 20
        while not _workers() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the worker has opened the database and sandboxed its connection
        # While the console query runs: another reader of the same file in this process configures freely.
        with store.connect(db, read_only=True) as con:
            con.execute("SET threads = 1")
            settings = con.execute(
                "SELECT current_setting('enable_external_access'), current_setting('lock_configuration')"
            ).fetchone()
            assert settings == (True, False)
            assert con.execute(f"SELECT sum(n) FROM read_csv('{csv}')").fetchone() == (3,)
    finally:
        console_thread.join()
    assert "time limit" in str(outcome.get("error"))
    # After it: a writer writes and configures as ever.
    with store.connect(db) as con:
        con.execute("SET memory_limit = '1GB'")
        assert con.execute("SELECT current_setting('lock_configuration')").fetchone() == (False,)
        con.execute(f"CREATE TABLE scratch AS SELECT * FROM read_csv('{csv}')")
        assert con.execute("SELECT count(*) FROM scratch").fetchone() == (2,)


def test_the_result_is_capped_in_bytes(db: Path) -> None:
    with pytest.raises(UsageError, match="more than the 1 MiB the console returns"):
        run_readonly_query(db, "SELECT repeat('x', 10000) AS s FROM range(1000)", max_result_bytes=2**20)


def test_values_pandas_cannot_hold_come_back_as_text(db: Path) -> None:
    result = run_readonly_query(
        db,
        "SELECT union_value(k := 'x') AS u, DATE '99999-01-01' AS far, "
        "TIMESTAMPTZ '2024-01-01 12:00:00+00' AS at, 1 AS a, 2 AS a, [1, 2] AS l",
    )
    row = result.frame.iloc[0]
    assert row["u"] == "x" and row["far"] == "99999-01-01"
    assert str(result.frame["at"].dt.tz) in ("UTC", "Etc/UTC")
    assert list(result.frame.columns) == ["u", "far", "at", "a", "a_1", "l"]
    assert row["l"] == "[1, 2]"  # as DuckDB writes it


def test_values_a_page_would_show_as_something_else_come_back_as_duckdb_writes_them(db: Path) -> None:
    # An interval read as a DateOffset's fields, bytes as "97,98,99" and NaN as the page's "—" for NULL.
    result = run_readonly_query(
        db,
        "SELECT INTERVAL 90 MINUTE AS i, 'abc'::BLOB AS b, 'nan'::DOUBLE AS n, NULL::DOUBLE AS z, "
        "1.5::DOUBLE AS f UNION ALL SELECT NULL, NULL, 2.5, 1.0, NULL",
    )
    first, second = result.frame.iloc[0], result.frame.iloc[1]
    assert (first["i"], first["b"], first["n"]) == ("01:30:00", "abc", "nan")
    assert second["n"] == "2.5" and second.isna()[["i", "b"]].all()
    assert result.frame["z"].dtype.kind == "f" and result.frame["z"].isna().iloc[0]  # NULL stays missing
    assert result.frame["f"].dtype.kind == "f"  # numbers without NaN stay numbers
    both = "SELECT [1.5::DOUBLE, 2.25] AS l, {'x': 1.5::DOUBLE, 'd': DATE '2024-01-01'} AS s"
    nested = run_readonly_query(db, both).frame
    assert (nested["l"][0], nested["s"][0]) == ("[1.5, 2.25]", "{'x': 1.5, 'd': 2024-01-01}")


def test_values_arrow_would_lose_come_back_as_duckdb_writes_them(db: Path) -> None:
    # Through Arrow a TIMETZ lost its offset, a BIT string came back as its stored bytes and a BIGNUM as
    # bytes; names as any result has them (a repeated one numbered), the other columns as they were.
    sql = ("SELECT TIMETZ '12:34:56.789+02' AS t, '101'::BIT AS t, 1 AS \"a\"\"b.c\", "
           "123456789012345678901234567890::BIGNUM AS n UNION ALL SELECT NULL, NULL, 2, NULL")  # fmt: skip
    frame = run_readonly_query(db, sql).frame
    assert list(frame.columns) == ["t", "t_1", 'a"b.c', "n"]
    assert list(frame.iloc[0]) == ["12:34:56.789+02", "101", 1, "123456789012345678901234567890"]
    assert frame.iloc[1].isna().tolist() == [True, True, False, True]
    assert frame['a"b.c'].dtype.kind == "i"


def test_whole_numbers_beside_a_null_keep_every_digit(db: Path) -> None:
    # A whole-number column with a NULL came back as float64: 2^53 + 1 read 9007199254740992, a UBIGINT
    # 12345678901234567890 read 1.2345678901234567e+19.
    sql = ("SELECT 9007199254740993::BIGINT AS b, 12345678901234567890::UBIGINT AS u, 5 AS small "
           "UNION ALL SELECT NULL, NULL, NULL")  # fmt: skip
    frame = run_readonly_query(db, sql).frame
    first = [frame["b"].iloc[0], frame["u"].iloc[0], frame["small"].iloc[0]]
    assert [str(value) for value in first] == ["9007199254740993", "12345678901234567890", "5"]  # not 9.0e15
    assert frame.iloc[1].isna().all()


def test_times_with_fractions_of_a_second_keep_them_and_whole_seconds_stay_times(db: Path) -> None:
    # A table cell shows a time or timestamp to the second: 12:00:00.123456 read 12:00:00.
    sql = ("SELECT TIMESTAMP '2024-01-01 12:00:00.123456' AS ts, TIME '01:02:03.5' AS t, "
           "TIMESTAMP '2024-01-01 12:00:00' AS whole, TIMESTAMPTZ '2024-01-01 12:00:00.5+00' AS tz "
           "UNION ALL SELECT NULL, TIME '01:02:03', NULL, NULL")  # fmt: skip
    frame = run_readonly_query(db, sql).frame
    assert frame["ts"].iloc[0] == "2024-01-01 12:00:00.123456" and frame["ts"].isna().iloc[1]
    assert frame["tz"].iloc[0] == "2024-01-01 12:00:00.5+00"  # in UTC whatever TZ says
    assert list(frame["t"]) == ["01:02:03.5", "01:02:03"]
    assert pd.api.types.is_datetime64_any_dtype(frame["whole"])


def test_an_empty_result_keeps_its_columns(db: Path) -> None:
    result = run_readonly_query(db, "SELECT run_id, model FROM runs")
    assert list(result.frame.columns) == ["run_id", "model"] and result.frame.empty
    assert not result.truncated


def test_a_worker_that_dies_is_one_line(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "_WORKER_MODULE", "stash_core.store.no_such_worker")
    with pytest.raises(UsageError, match="ended unexpectedly") as caught:
        run_readonly_query(db, "SELECT 1")
    assert "no_such_worker" in str(caught.value) and "\n" not in str(caught.value)
