"""What a user's script's run measured, summarised in this process (no process group)."""

from __future__ import annotations

from stash_core.measure.script_hooks import StepClock
from stash_core.measure.script_stop import summarise


def _clock(iterations: int) -> StepClock:
    clock = StepClock()
    clock.iteration_s = [0.01] * iterations
    clock.parts = {part: [0.0] * iterations for part in clock.parts}
    clock.iterations, clock.first_step_at = iterations, 0.0
    return clock


def test_one_rank_of_several_alone_has_no_rank_skew(monkeypatch) -> None:
    """A script that ended its process group leaves rank 0 alone: its skew was 0.0, as if the ranks agreed."""
    job = {"phase": "R1"}
    monkeypatch.setenv("WORLD_SIZE", "2")
    alone = summarise(job, _clock(20), [0.01] * 20, "script_ended", gather=False)
    assert alone["rank_skew_s"] is None and alone["script"]["ranks_gathered"] is False
    monkeypatch.setenv("WORLD_SIZE", "1")
    single = summarise(job, _clock(20), [0.01] * 20, "script_ended", gather=False)
    assert single["rank_skew_s"] == 0.0 and single["script"]["ranks_gathered"] is True
