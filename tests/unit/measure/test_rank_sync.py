"""The job's step time of a multi-worker run (measure/rank_sync.py): the mean over the ranks of each step,
whose mean is every rank's own (their steps add up to the same wall time), not the mean of each step's
slowest rank, which counts the ranks' jitter as time the job never spent."""

from __future__ import annotations

import pytest
import torch

from stash_core.analysis.stats import mser_truncation
from stash_core.measure.rank_sync import agree, by_step, warmup_count
from stash_core.measure.timed_loop import PARTS


def _gathered(iterations: list[list[float]]) -> torch.Tensor:
    """(ranks, 5, steps): each rank's iteration times, its data wait a tenth of them, the rest forward."""
    per_rank = torch.zeros(len(iterations), 1 + len(PARTS), len(iterations[0]), dtype=torch.float64)
    for rank, times in enumerate(iterations):
        step = torch.tensor(times, dtype=torch.float64)
        per_rank[rank, 0], per_rank[rank, 1], per_rank[rank, 2] = step, step / 10, step * 9 / 10
    return per_rank


def test_ranks_whose_steps_alternate_give_the_job_their_common_mean_not_the_slowest_per_step():
    # rank 0 long where rank 1 is short, then the other way round: both take 44 ms over 4 steps
    steps = by_step(_gathered([[10e-3, 12e-3, 10e-3, 12e-3], [12e-3, 10e-3, 12e-3, 10e-3]]))
    assert sum(steps["iteration_s"]) / 4 == pytest.approx(11e-3)  # the mean of the slowest was 12 ms
    assert steps["slowest_rank"] == [1, 0, 1, 0]
    assert steps["skew_s"] == pytest.approx([2e-3] * 4)
    parts = [sum(steps[part][i] for part in PARTS) for i in range(4)]
    assert parts == pytest.approx(steps["iteration_s"])  # the parts still add up to the step


def test_one_rank_agrees_with_itself():
    assert agree([0.1, 0.2], True, torch.device("cpu")) == ([0.1, 0.2], True)
    assert by_step(_gathered([[0.1, 0.3]]))["iteration_s"] == pytest.approx([0.1, 0.3])


def _two_rank_sync(rank: int, store_path: str, results) -> None:
    import torch.distributed as dist

    from stash_core.measure.rank_sync import gathered_steps
    from stash_core.measure.timed_loop import StepTimes

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    try:
        own_s = [[10e-3, 12e-3], [12e-3, 10e-3]][rank]
        agreed = agree(own_s, rank == 1, torch.device("cpu"))
        times = StepTimes()
        times.iteration_s.extend(own_s)
        for part in PARTS:
            getattr(times, part).extend(value / len(PARTS) for value in own_s)
        per_rank, steps = gathered_steps(times, 2, torch.device("cpu"))
        results[rank] = (agreed, per_rank.shape, steps["iteration_s"], steps["slowest_rank"])
    finally:
        dist.destroy_process_group()


def test_two_ranks_agree_on_each_steps_mean_and_on_a_flag_either_raised(tmp_path):
    """The collective path (a SUM over the ranks divided by the world size, a flag any rank raised), run by
    two gloo ranks: only a launch exercised it before."""
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Manager().dict()
    ranks = [context.Process(target=_two_rank_sync, args=(rank, str(tmp_path / "store"), results))
             for rank in range(2)]  # fmt: skip
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=60)
        if process.is_alive():
            process.kill()
            process.join()
    assert sorted(results) == [0, 1]
    for rank in range(2):
        (agreed_s, raised), shape, iteration_s, slowest = results[rank]
        assert agreed_s == pytest.approx([11e-3, 11e-3]) and raised is True
        assert tuple(shape) == (2, 1 + len(PARTS), 2)
        assert iteration_s == pytest.approx([11e-3, 11e-3]) and slowest == [1, 0]


def test_warm_up_is_mser_cut_and_a_fixed_count_keeps_only_the_last_steps():
    slow_start = [1.0, 0.9, 0.5, 0.5, 0.1, *([0.1] * 40)]
    assert warmup_count(slow_start) == 2 + mser_truncation(slow_start[2:])
    assert warmup_count(slow_start, fixed=10) == len(slow_start) - 10
    assert warmup_count(slow_start, fixed=100) == warmup_count(slow_start)  # never fewer dropped than MSER's
    assert warmup_count([0.1]) == 1  # never more dropped than there are
