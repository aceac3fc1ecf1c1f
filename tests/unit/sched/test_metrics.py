"""The metrics a simulation reports, on outcomes worked by hand."""

from __future__ import annotations

from stash_core.sched.metrics import jct_cdf
from stash_core.sched.outcome import JobOutcome
from stash_core.sched.trace import TraceJob


def _outcome(job_id: str, jct_s: float) -> JobOutcome:
    job = TraceJob(job_id, 1, 0.0, jct_s, None, 1.0, "trace")
    return JobOutcome(job, start_s=0.0, finish_s=jct_s, level="node", nodes=1)


def test_the_jct_cdf_never_claims_a_fraction_of_jobs_that_had_not_finished():
    """JCTs of 1000, 1000 and 1500 s: interpolated, the CDF said 98% of jobs finished within 1480 s, where
    two of three (67%) had."""
    cdf = jct_cdf([_outcome("A", 1000.0), _outcome("B", 1000.0), _outcome("C", 1500.0)], points=50)
    for seconds, fraction in cdf:
        finished = sum(jct <= seconds for jct in (1000.0, 1000.0, 1500.0)) / 3
        assert finished >= fraction - 1e-9, (seconds, fraction)
        assert seconds in (1000.0, 1500.0)
    assert cdf[-1] == [1500.0, 1.0] and [1000.0, 0.66] in cdf


def test_a_job_run_as_long_as_it_takes_lost_no_time_even_through_float_rounding():
    """A consolidated job started at 2522.1 s held its GPUs 1e-12 s beyond its duration (the sum of the
    simulator's steps): the policy reported 7.3e-12 s of communication overhead where none was lost."""
    from stash_core.sched.metrics import schedule_metrics
    from stash_core.sched.topology import Cluster

    job = TraceJob("A", 1, 2522.1, 300.0, None, 1.0, "trace")
    rounded = JobOutcome(job, start_s=2522.1, finish_s=2522.1 + 300.0, level="node", nodes=1,
                         held_s=300.0 + 7.275958e-12)  # fmt: skip
    spread = JobOutcome(job, start_s=2522.1, finish_s=2822.1, level="rack", nodes=2, held_s=330.0)
    cluster = Cluster(1, 4, 8)
    assert schedule_metrics([rounded], cluster)["comm_overhead_s"] == 0.0
    assert schedule_metrics([rounded, spread], cluster)["comm_overhead_s"] == 30.0
