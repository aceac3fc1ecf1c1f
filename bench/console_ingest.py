"""A writer during a long SQL console query: `stash ingest` (a real process) while a console query runs for
its whole 60 s time limit. The console reads a snapshot, so the ingest should not wait for the query.
Prints the ingest's wall time and whether the query was still running when it finished.
Run: PYTHONPATH=. .venv/bin/python bench/console_ingest.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_args import bench_parser

from stash_core import store
from stash_core.store.console import run_readonly_query

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))
ENDLESS = "SELECT count(*) FROM range(1000000000000) a, range(1000) b"
QUERY_LIMIT_S = 60.0


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "results.duckdb"
        store.ingest_files(db, [EXAMPLES[0]])
        outcome: dict[str, str] = {}

        def query() -> None:
            started = time.monotonic()
            try:
                run_readonly_query(db, ENDLESS, timeout_s=QUERY_LIMIT_S)
            except Exception as exc:  # noqa: BLE001 - the time limit ends it
                outcome["query"] = f"{exc} after {time.monotonic() - started:.1f} s"

        env = {**os.environ, "PYTHONPATH": str(REPO)}
        baseline_db = Path(folder) / "baseline.duckdb"
        store.ingest_files(baseline_db, [EXAMPLES[0]])
        command = [sys.executable, "-m", "stash_core", "ingest", str(EXAMPLES[1]), "--db", str(baseline_db)]
        started = time.monotonic()
        subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        print(f"stash ingest alone: {time.monotonic() - started:.2f} s (Python start included)")
        thread = threading.Thread(target=query)
        thread.start()
        time.sleep(5.0)  # the console's process is up and counting
        started = time.monotonic()
        command = [sys.executable, "-m", "stash_core", "ingest", str(EXAMPLES[1]), "--db", str(db)]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        ingest_s = time.monotonic() - started
        running = thread.is_alive()
        print(f"stash ingest during a {QUERY_LIMIT_S:.0f} s console query: exit {done.returncode} after "
              f"{ingest_s:.2f} s (Python start included); query still running then: {running}")  # fmt: skip
        thread.join()
        print(f"the console query: {outcome.get('query', 'finished')}")


if __name__ == "__main__":
    bench_parser(__doc__).parse_args()  # no options: --help, or a refusal of any argument
    main()
