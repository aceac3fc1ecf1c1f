"""What a simulation assumed, said: the offered load of its trace."""

from __future__ import annotations

from stash_core.sched import TraceJob
from stash_core.sched.assumptions import offered_load_line


def job(job_id: str, gpus: int, submit_s: float, duration_s: float) -> TraceJob:
    return TraceJob(job_id, gpus, submit_s, duration_s, None, 1.5, "trace", None, None)


def test_the_offered_load_is_the_work_over_the_clusters_gpu_time_while_jobs_arrive():
    """A trace that asks more than the cluster has keeps growing its queue, and its JCTs with its length: the
    output said nothing of it (the default synthetic trace asks about 170%)."""
    half = [job("a", 4, 0.0, 3600.0), job("b", 4, 7200.0, 3600.0)]  # 8 GPU-h over 2 h of 8 GPUs
    assert offered_load_line(half, 8) == ("offered load: the jobs ask 50% of the cluster's GPU-time between "
                                          "the first and last arrival")  # fmt: skip
    over = [job("a", 8, 0.0, 7200.0), job("b", 8, 3600.0, 7200.0)]  # 32 GPU-h over 1 h of 8 GPUs
    assert offered_load_line(over, 8).endswith("ask 400% of the cluster's GPU-time between the first and "
                                               "last arrival: the queue grows while jobs arrive (overloaded)")
    at_once = [job("a", 8, 0.0, 3600.0), job("b", 4, 0.0, 3600.0)]
    assert offered_load_line(at_once, 8) == ("offered load: every job arrives at once; their work fills the "
                                             "whole cluster 1.5 h")  # fmt: skip
