"""A profile's progress read back from its protocol lines (engine/job_state.py): each run in its place, with
its launches counted, where R0 is timed in R1's launch (paired) and never announced on its own."""

from __future__ import annotations

from pathlib import Path

from stash_core.engine.job_state import JobState, apply_phase_event


def _state() -> JobState:
    return JobState(job_id="j", job_dir=Path("/nonexistent"), argv=[], started_at=None, pid=None,
                    status="running")  # fmt: skip


def _finished(name: str, description: str, mean_s: float, iterations: int) -> dict:
    return {"event": "finished", "name": name, "description": description, "status": "completed",
            "mean_s": mean_s, "ci95_s": 0.001, "iterations": iterations}  # fmt: skip


def test_a_run_timed_beside_another_takes_its_launchs_place_and_counts_its_launches() -> None:
    """R0 read "(2/2) - warming up" with no description, numbered beside R3, after a paired launch."""
    phases, state = {}, _state()
    for _ in range(2):  # two rounds: R1's launch times R0 too, then R3's launch
        apply_phase_event(phases, state, {"event": "started", "index": 0, "total": 2, "name": "R1",
                                          "description": "2 workers on one machine"})  # fmt: skip
        apply_phase_event(phases, state, _finished("R0", "1 worker", 0.030, 50))
        apply_phase_event(phases, state, _finished("R1", "2 workers on one machine", 0.060, 50))
        apply_phase_event(phases, state, {"event": "started", "index": 1, "total": 2, "name": "R3",
                                          "description": "real data, cached"})  # fmt: skip
        apply_phase_event(phases, state, _finished("R3", "real data, cached", 0.080, 40))
    r0, r1, r3 = phases["R0"], phases["R1"], phases["R3"]
    assert (r0.index, r0.total, r0.description) == (0, 2, "1 worker")
    assert (r0.launches, r1.launches, r3.launches) == (2, 2, 2)
    assert r0.kept == 50 and r0.status == "completed" and (r3.index, r3.total) == (1, 2)
    # every launch's iterations count, as the database counts them (the page read the last launch's alone)
    assert (r0.earlier_kept + r0.kept, r1.earlier_kept + r1.kept, r3.earlier_kept + r3.kept) == (100, 100, 80)


def test_the_runs_are_listed_in_their_places_r0_before_r1_of_its_launch() -> None:
    from stash_core.engine.job_state import parse_output

    lines = [
        'STASH-PHASE {"event": "started", "index": 0, "total": 2, "name": "R1", "description": "2 workers"}',
        'STASH-PHASE {"event": "finished", "name": "R0", "status": "completed", "iterations": 5}',
        'STASH-PHASE {"event": "finished", "name": "R1", "status": "completed", "iterations": 5}',
    ]
    state = _state()
    parse_output(state, "\n".join(lines) + "\n")
    assert [phase.name for phase in state.phases] == ["R0", "R1"]
