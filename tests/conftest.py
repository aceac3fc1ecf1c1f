"""How the suite is collected: the files that hold a long test first; pytest's rewritten test modules kept.

CI runs most of the suite in two pytest-xdist processes that take a whole file at a time, in collection order
(scripts/test_tiers.sh: --dist loadfile --no-loadscope-reorder; xdist_schedule.py hands the files out). A
long file taken last runs alone while the other process idles; taken first, the many short files fill in
beside it. The longest files start real measuring processes (`launches`) or a browser (`e2e`); then those
with a test marked `slow`.

pytest rewrites the asserts of every test module it imports and keeps the result in __pycache__, unless
bytecode is not to be written (PYTHONDONTWRITEBYTECODE, set where CI runs): then each pytest process rewrote
every module again, about half the CPU time of a collection (6.6 of 13.5 s). Collection writes bytecode
whatever the environment says (into the git-ignored __pycache__ folders of tests/ and stash_core/); the tests
themselves, and every process they start, run as the environment says.

`measured_launch`: one real launch per pytest process for the tests that check what a profile does with what
it measured (where its files go, a full disk), which replay it (support.replay_launches).
"""

from __future__ import annotations

import copy
import functools
import signal
import sys
from pathlib import Path

import pytest
from xdist_schedule import pytest_xdist_make_scheduler  # noqa: F401 - the hook, registered here

RANKS = (("launches", "e2e"), ("slow",))  # the first rank runs first; files with none of these marks last
# CI's cluster and browser tiers collect only their folder, and tier 1 leaves those folders out
# (scripts/test_tiers.sh: a collection of the whole suite costs some 9 CPU-s): a test with one of these marks
# elsewhere, or without its folder's mark there, would run in no tier, so it is refused.
FOLDER_OF_MARK = {"cluster": "tests/cluster/", "e2e": "tests/e2e/"}
# The quiet tier collects only the files that hold this text (scripts/test_tiers.sh greps for it); a test
# marked `quiet` and `launches` outside the cluster in a file without it would run in no tier: refused.
QUIET_TEXT = "mark.quiet"


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background by a non-interactive shell (`cmd &`) has SIGINT ignored, as POSIX
    # says, and so would every process it starts: the tests of what Ctrl-C does need it delivered, as at a
    # terminal (a Python handler, unlike an ignored signal, is not inherited: the children get the default).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


def pytest_itemcollected(item: pytest.Item) -> None:
    where = Path(str(item.path)).relative_to(Path(str(item.config.rootpath))).as_posix()
    for mark, folder in FOLDER_OF_MARK.items():
        if bool(item.get_closest_marker(mark)) != where.startswith(folder):
            raise pytest.UsageError(
                f"{item.nodeid}: a test marked {mark} belongs in {folder}, and every test there is marked"
                f" {mark} (CI's tier)"
            )
    quiet_launch = item.get_closest_marker("quiet") and item.get_closest_marker("launches")
    if quiet_launch and not item.get_closest_marker("cluster") and QUIET_TEXT not in _text(item.path):
        raise pytest.UsageError(
            f"{item.nodeid} is marked quiet but its file does not say {QUIET_TEXT} (CI's quiet tier finds"
            " its files by that text)"
        )


@functools.cache
def _text(path: Path) -> str:
    return path.read_text()


@pytest.hookimpl(trylast=True)  # after -m has deselected: rank what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank_of: dict = {}
    for item in items:
        for rank, marks in enumerate(RANKS):
            if any(item.get_closest_marker(mark) for mark in marks):
                rank_of[item.path] = min(rank, rank_of.get(item.path, rank))
    items.sort(key=lambda item: rank_of.get(item.path, len(RANKS)))  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def measured_launch(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The outcome of a real profile's one launch (support.ONE_RUN: R0 of tiny_cnn, started by main() in this
    process, its worker a real process), as the engine's run_phase returned it; replay it with
    support.replay_launches. One per session: the tests that replay it only read it."""
    from support import ONE_RUN, stash_main

    from stash_core.engine import profiler

    tmp = tmp_path_factory.mktemp("measured-launch")
    outcomes: list[dict] = []
    real = profiler.run_phase

    def recording(*args, **kwargs) -> dict:
        outcome = real(*args, **kwargs)
        outcomes.append(copy.deepcopy(outcome))
        return outcome

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profiler, "run_phase", recording)
        done = stash_main("profile", *ONE_RUN, "--progress", "none", "--no-store",
                          "--out", str(tmp / "run.json"), cwd=tmp,
                          env_extra={"STASH_CACHE_DIR": str(tmp / "cache")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [outcome["status"] for outcome in outcomes] == ["completed"]
    return outcomes


# Signals whose default action ends a process without a word: a test that leaves one of them changed in the
# pytest process (or a real-time timer armed) ends that process later, in a test of another file, and xdist
# says only "worker crashed".
SILENT_ENDINGS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGHUP", "SIGTERM")
    if hasattr(signal, name)
)  # fmt: skip


@pytest.fixture(autouse=True)
def _signals_left_as_found():
    """Each test leaves this process's handlers of SILENT_ENDINGS, and its real-time timer, as it found them:
    one that does not fails here, and they are put back for the tests after it."""
    before = {sig: signal.getsignal(sig) for sig in SILENT_ENDINGS}
    timer_armed = signal.getitimer(signal.ITIMER_REAL)[0] > 0
    yield
    left_armed = not timer_armed and signal.getitimer(signal.ITIMER_REAL)[0] > 0
    if left_armed:  # first: an alarm between the default handler's return and this would end the process
        signal.setitimer(signal.ITIMER_REAL, 0)
    changed = [sig for sig, handler in before.items() if signal.getsignal(sig) != handler]
    for sig in changed:
        if before[sig] is not None:  # None: set outside Python, and Python cannot set it back
            signal.signal(sig, before[sig])
    if changed or left_armed:
        names = [signal.Signals(sig).name for sig in changed] + (["ITIMER_REAL armed"] if left_armed else [])
        pytest.fail(f"the test left this process's {', '.join(names)} changed (put back now)", pytrace=False)
