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


def test_a_run_stopped_at_a_fixed_count_keeps_exactly_that_many_steps() -> None:
    """MSER-5's cut can shrink between checks, so the run steps past --iterations N before a check finds N
    kept: 35 steps with no warm-up to cut kept 33 where 30 were asked."""
    job = {"phase": "R0", "iterations": 30}
    fixed = summarise(job, _clock(35), [0.01] * 35, "fixed", gather=False)
    assert len(fixed["samples"]["iteration_s"]) == 30 and fixed["warmup_iterations"] == 5
    capped = summarise(job, _clock(35), [0.01] * 35, "max_time", gather=False)  # short of N: all it has
    assert len(capped["samples"]["iteration_s"]) == 33
