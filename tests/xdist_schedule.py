"""How CI's pytest-xdist processes share the suite: `--dist loadfile`, with two changes (a pytest plugin,
loaded by tests/conftest.py).

1. The emulated-cluster files that compare measured times (a test marked `quiet`) make one unit: CI's cluster
   tier (scripts/test_tiers.sh) then runs them in one process, one after the other, never two at once beside
   each other, while the other process takes the rest. (pytest-xdist's own `loadgroup` groups by a suffix it
   adds to the test ids, which this pytest no longer keeps.)
2. A worker that dies mid-file costs the test it died in, not the run. pytest-xdist 3.8.0 puts a dead
   worker's whole file back on the queue, its finished tests and the one it died in included, and a worker
   given a file with a single test left waits for a second one that never comes (a worker runs a test once
   it knows the next, or is told to stop): the run hung until CI's limit. Here the test it died in is
   reported failed (pytest-xdist's "worker crashed" report) and not run again, only the tests not yet run go
   back on the queue, and a worker holding fewer than two tests is given more, or told to stop. Work sent to a
   worker that has died but whose end has not been seen yet goes back with the rest (pytest-xdist's own
   scheduling stopped the run on the broken pipe, an INTERNALERROR).
3. How a dead worker ended is said (its exit status or the signal, and the memory the machine had left): a
   SIGKILL with little memory left is the kernel's OOM killer, an exit status a test's own doing.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psutil
import pytest

MIN_HELD = 2  # a worker runs a test once it holds the next one, or has been told to stop


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: a run without it has none
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    root = Path(str(config.rootpath))
    quiet: dict[str, bool] = {}

    def compares_times(path: str) -> bool:
        if path not in quiet:
            source = root / path
            quiet[path] = source.is_file() and "pytest.mark.quiet" in source.read_text()
        return quiet[path]

    class SuiteScheduling(LoadFileScheduling):
        def __init__(self, config: pytest.Config, log) -> None:
            super().__init__(config, log)
            self._unsent: dict = {}  # by worker: the files whose sending failed (it had died)

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            in_cluster = path.startswith("tests/cluster/")
            return "tests/cluster: quiet" if in_cluster and compares_times(path) else path

        def remove_node(self, node) -> str | None:
            """The test `node` died in (None if it held none); its other tests not yet run go back."""
            workload = self.assigned_work.pop(node)
            unsent = self._unsent.pop(node, set())
            left = [
                (scope, nodeid)
                for scope, unit in workload.items()
                for nodeid, done in unit.items()
                if not done
            ]
            # the first test not done of the files it was sent is the one it was running
            running = next((nodeid for scope, nodeid in left if scope not in unsent), None)
            for scope, nodeid in left:
                if nodeid != running:
                    self.workqueue.setdefault(scope, {})[nodeid] = False
            for other in self.assigned_work:
                self._reschedule(other)
            return running

        def _assign_work_unit(self, node) -> None:
            scope, unit = self.workqueue.popitem(last=False)
            self.assigned_work.setdefault(node, {})[scope] = unit
            collection = self.registered_collections[node]
            indexes = [collection.index(nodeid) for nodeid, done in unit.items() if not done]
            try:
                node.send_runtest_some(indexes)
            except OSError:  # the worker died after its last report: its tests go back when it is removed
                self._unsent.setdefault(node, set()).add(scope)

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if self.workqueue and self._pending_of(self.assigned_work[node]) <= MIN_HELD:
                self._assign_work_unit(node)
            while self.workqueue and self._pending_of(self.assigned_work[node]) < MIN_HELD:
                self._assign_work_unit(node)
            if not self.workqueue:
                node.shutdown()  # it runs what it holds, then stops (a dead one's pipe error is ignored)

    return SuiteScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    if error is None:  # a worker that finished its work
        return
    popen = getattr(getattr(node.gateway, "_io", None), "popen", None)  # execnet's process of the worker
    try:
        code = popen.wait(timeout=5)
    except (AttributeError, subprocess.TimeoutExpired):
        return
    try:
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    except ValueError:
        how = f"signal {-code}"
    left_mb = psutil.virtual_memory().available / 2**20
    reporter = node.config.pluginmanager.getplugin("terminalreporter")
    reporter.write_line(f"[{node.gateway.id}] ended by {how}; the machine had {left_mb:,.0f} MiB available")
