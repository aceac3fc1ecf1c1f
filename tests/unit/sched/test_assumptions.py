"""What a simulation assumed, said: the offered load of its trace."""

from __future__ import annotations

from stash_core.sched import TraceJob
from stash_core.sched.assumptions import offered_load_line


def job(job_id: str, gpus: int, submit_s: float, duration_s: float) -> TraceJob:
    return TraceJob(job_id, gpus, submit_s, duration_s, None, 1.5, "trace", None, None)


def test_the_offered_load_is_the_work_over_the_clusters_gpu_time_while_jobs_arrive():
    """A trace that asks more than the cluster has keeps growing its queue, and its JCTs with its length: the
    output said nothing of it (the default synthetic trace asks about 170%)."""
    window = ("of the cluster's GPU-time between the first and last arrival; run as they arrive, they would "
              "hold")
    half = [job("a", 4, 0.0, 3600.0), job("b", 4, 7200.0, 3600.0)]  # 8 GPU-h over 2 h of 8 GPUs
    said = offered_load_line(half, 8)
    assert said == f"offered load: the jobs ask 50% {window} at most 4 of its 8 GPUs at once"
    over = [job("a", 8, 0.0, 7200.0), job("b", 8, 3600.0, 7200.0)]  # 32 GPU-h over 1 h of 8 GPUs
    said = offered_load_line(over, 8)
    grows = "jobs must queue, and the queue grows while jobs arrive (overloaded)"
    assert said == f"offered load: the jobs ask 400% {window} at most 16 of its 8 GPUs at once: {grows}"
    at_once = [job("a", 8, 0.0, 3600.0), job("b", 4, 0.0, 3600.0)]
    assert offered_load_line(at_once, 8) == (
        "offered load: every job arrives at once; their work fills the whole cluster 1.5 h; run as they "
        "arrive, they would hold at most 12 of its 8 GPUs at once: jobs must queue"
    )


def test_a_short_trace_whose_work_outlasts_its_arrivals_is_not_called_overloaded():
    """Three jobs arriving within 20 s on 64 GPUs asked 5633% of the GPU-time between the first and last
    arrival, and the line said "the queue grows while jobs arrive (overloaded)" where no job waited."""
    short = [job("j1", 4, 0.0, 3600.0), job("j2", 8, 10.0, 7200.0), job("j3", 1, 20.0, 100.0)]
    said = offered_load_line(short, 64)
    assert said.endswith(
        "ask 5633% of the cluster's GPU-time between the first and last arrival; run as they arrive, they "
        "would hold at most 13 of its 64 GPUs at once (their work outlasts their arrivals)"
    )
    assert "queue" not in said
    # a job that ends as another arrives hands its GPUs over: 8, not 16
    relay = [job("a", 8, 0.0, 100.0), job("b", 8, 100.0, 100.0)]
    assert "at most 8 of its 8 GPUs at once" in offered_load_line(relay, 8)
    assert "queue" not in offered_load_line(relay, 8)
