"""engine/machine.py: the note that says a worker's threads are not this environment's OMP_NUM_THREADS."""

from __future__ import annotations

from stash_core.engine.machine import threads_note
from stash_core.spec import ProfileSpec


def test_an_environments_thread_count_that_the_workers_do_not_get_is_said(monkeypatch) -> None:
    """A script read OMP_NUM_THREADS=2 as 1 (the default on 2 cores and 2 workers), and nothing said so."""
    spec = ProfileSpec(model="script:train.py", batch_size=None, script="train.py", workers_per_node=2,
                       threads_per_worker=1)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads_note(spec) == (
        "note: OMP_NUM_THREADS=2 of this environment is 1 in each worker (--threads-per-worker sets it)"
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "\x1b[31m4")  # the environment's text is shown as text
    assert "\x1b" not in threads_note(spec)
    for same in ("1", " 1 ", ""):
        monkeypatch.setenv("OMP_NUM_THREADS", same)
        assert threads_note(spec) is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads_note(spec) is None
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads_note(ProfileSpec(model="script:train.py", batch_size=None, script="train.py",
                                        hosts="a:22,b:22", threads_per_worker=1)) is None
