"""Timers: tuned on the first part of a trace and reported on the rest, set online, or given; the output
says which."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from stash_core.analysis.stats import mean_ci95
from stash_core.errors import UsageError
from stash_core.sched import Cluster, Policy, TraceJob, plan_policies, schedule_metrics, simulate, tune, tuner
from stash_core.sched.estimate import PRIOR_S, Estimator
from stash_core.sched.report import run_simulation
from stash_core.sched.tuner import busy_periods, gain_interval_s


def job(job_id, gpus, submit_s, duration_s, slowdown=3.0, model=None, estimate_s=None):
    return TraceJob(job_id, gpus, submit_s, duration_s, model, slowdown, "trace", None, estimate_s)


# Copies of the case of test_simulator.py: X and Z hold 3 GPUs per node for 100 s, Y (2 GPUs, 100 s,
# 3 times slower spread) arrives 1 s later. Delay 0: Y spreads, JCT 300; 60 s: 360; 300 s and up: waits
# for a node at 100, JCT 199. The grid's first best value is 300 s.
FIRST = [job("X1", 3, 0.0, 100.0), job("Z1", 3, 0.0, 100.0), job("Y1", 2, 1.0, 100.0)]
REST = [job("X2", 3, 5000.0, 100.0), job("Z2", 3, 5000.0, 100.0), job("Y2", 2, 5001.0, 100.0, slowdown=1.0)]


def repeated(jobs: list, times: int, gap_s: float = 400.0) -> list:
    """`times` copies of `jobs`, each `gap_s` after the last (every copy meets an empty cluster)."""
    return [replace(j, job_id=f"{j.job_id}-{k}", submit_s=j.submit_s + k * gap_s)
            for k in range(times) for j in jobs]  # fmt: skip


# twelve Y jobs that each gain 101 s by waiting: beyond the noise of twelve busy periods, each alike
TWELVE_FIRST = repeated(FIRST, 12)


def test_split_tunes_on_the_first_part_and_reports_on_the_rest():
    policies, reported, how = plan_policies([Policy("delay"), Policy("fifo")], REST + TWELVE_FIRST,
                                            Cluster(1, 2, 4), "split", fraction=36 / 39)  # fmt: skip
    assert policies == [Policy("delay", delay_s=300.0), Policy("fifo")]
    assert [j.job_id for j in reported] == ["X2", "Z2", "Y2"]
    assert "tuned on the 36 of the first 36 jobs (92% by arrival" in how and "reported on the other 3" in how
    assert "delay 300 s (-34 s ± " in how and "a job against delay 0 s)" in how


def test_the_gain_is_judged_over_busy_periods_at_a_level_shared_by_the_grid():
    """Differences in arrival order were taken as independent (a lag-1 correction, then batches of
    neighbours): a stretch of queued jobs that one placement delays read as many pieces of evidence, and the
    best of seven values was tested as if it were the only one."""
    alike = [-10.0, -20.0, -30.0, -40.0] * 4  # four busy periods of four jobs, each averaging -25
    assert gain_interval_s(alike, [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4, 7) == (-25.0, 0.0)
    one_stretch = [-100.0] * 100 + [0.0] * 100  # one busy period gained, another not
    gain_s, half_s = gain_interval_s(one_stretch, [0] * 100 + [1] * 100, 7)
    assert gain_s == -50.0 and half_s > 50.0  # two pieces of evidence: within the noise
    assert mean_ci95(one_stretch)[1] < 35.0  # the lag-1 interval had called it a finding
    assert gain_interval_s(one_stretch, [0] * 200, 7)[1] == math.inf  # one busy period: nothing to judge by


def test_a_busy_period_ends_when_every_earlier_job_has_finished_under_both_schedules():
    ordered = [job("a", 1, 0.0, 10.0), job("b", 1, 5.0, 10.0), job("c", 1, 30.0, 10.0),
               job("d", 1, 41.0, 1.0)]  # fmt: skip
    given, best = [10.0, 15.0, 40.0, 42.0], [10.0, 15.0, 45.0, 42.0]  # c ends at 45 under the best
    assert busy_periods(ordered, given) == [0, 0, 1, 2]
    assert busy_periods(ordered, given, best) == [0, 0, 1, 1]


def test_a_given_timer_that_beats_the_grid_is_said_to(monkeypatch):
    """It was said to be "within the noise" of the grid's best, 50 s slower on every job."""
    def finishes_s(ordered, cluster, policy, *rest):
        return [job.submit_s + (100.0 if policy.delay_s == 600 else 150.0) for job in ordered]

    monkeypatch.setattr(tuner, "_finishes_s", finishes_s)
    chosen = tuner.tuned(TWELVE_FIRST, Cluster(1, 2, 4), Policy("delay", delay_s=600.0))
    assert chosen.policy == Policy("delay", delay_s=600.0)
    assert chosen.said == ("delay 600 s kept: it beats every value of the grid, the best delay 0 s "
                           "(+50 s ± 0 s a job against delay 600 s)")  # fmt: skip


def test_the_given_timer_stays_where_the_tuning_jobs_cannot_tell_the_timers_apart():
    """Every value of the grid gave 24 tuning jobs the same JCTs, and the first, 0 ("spread at once"), was
    reported as tuned; and a gain on one job of three is within the noise."""
    alone = repeated([job("A", 2, 0.0, 100.0)], 8)  # each meets an empty cluster: no timer changes anything
    assert tune(alone, Cluster(1, 2, 4), Policy("delay", delay_s=600.0)) == Policy("delay", delay_s=600.0)
    assert tune(alone, Cluster(1, 2, 4), Policy("network-delay")) == Policy("network-delay")
    _, _, how = plan_policies([Policy("delay", delay_s=600.0)], [*alone, *REST], Cluster(1, 2, 4), "split",
                              fraction=8 / 11)  # fmt: skip
    assert "delay 600 s kept: no value of the grid did better on these jobs" in how
    _, _, how = plan_policies([Policy("delay")], [*FIRST, *REST], Cluster(1, 2, 4), "split", fraction=0.5)
    assert "delay 0 s kept: the 3 job(s) keep the cluster busy in one stretch, too few to judge the " in how
    # six jobs: Y1 gains 101 s by waiting, Y2 (not slowed when spread) loses 99 s: two busy periods
    later = [replace(j, job_id=f"{j.job_id}b", submit_s=j.submit_s + 5000.0) for j in REST]
    _, _, how = plan_policies([Policy("delay")], [*FIRST, *REST, *later], Cluster(1, 2, 4), "split",
                              fraction=6 / 9)  # fmt: skip
    assert "delay 0 s kept: the best of the grid, delay 300 s, is within the noise (-0 s ± 2,971 s a " in how


def test_split_tunes_only_on_the_jobs_that_had_finished_when_the_reported_ones_arrive():
    # L (4 GPUs) arrives at 4800 and runs 100,000 s: still running at 5000, when X2 arrives; its duration is
    # not known then, so the tuning sees the 36 jobs of TWELVE_FIRST only
    long = job("L", 4, 4800.0, 100_000.0)
    policies, reported, how = plan_policies([Policy("delay")], [*REST, *TWELVE_FIRST, long],
                                            Cluster(1, 2, 4), "split", fraction=37 / 40)  # fmt: skip
    assert [j.job_id for j in reported] == ["X2", "Z2", "Y2"]
    assert "tuned on the 36 of the first 37 jobs" in how
    assert policies == [tune(TWELVE_FIRST, Cluster(1, 2, 4), Policy("delay"))]
    assert policies == [Policy("delay", delay_s=300.0)]


def test_the_grid_holds_waiting_for_consolidation():
    # Y (2 GPUs, 10,000 s, 3 times slower spread) waits for X and Z (3 GPUs each) to end at 5000: JCT 15,000.
    # Every finite timer of the grid spreads it first (3600 s: 3601 + 30,000); the grid's infinite timer waits
    jobs = repeated([job("X", 3, 0.0, 5000.0), job("Z", 3, 0.0, 5000.0), job("Y", 2, 1.0, 10_000.0)], 12,
                    100_000.0)  # fmt: skip
    tuned = tune(jobs, Cluster(1, 2, 4), Policy("delay"))
    assert tuned == Policy("delay", delay_s=math.inf) and tuned.label() == "delay (waits to consolidate)"
    jct = schedule_metrics(simulate(jobs, Cluster(1, 2, 4), tuned), Cluster(1, 2, 4))["avg_jct_s"]
    waiting = schedule_metrics(simulate(jobs, Cluster(1, 2, 4), Policy("consolidate")), Cluster(1, 2, 4))
    assert jct == waiting["avg_jct_s"]
    assert tune(jobs, Cluster(1, 2, 4), Policy("network-delay")).scale >= 0.25


def test_online_and_given_say_so():
    policies, reported, how = plan_policies([Policy("delay"), Policy("network-delay", scale=4.0)],
                                            FIRST, Cluster(1, 2, 4), "online")  # fmt: skip
    assert policies == [Policy("delay", online=True, by_busy=True),
                        Policy("network-delay", scale=1.0, by_busy=True)]  # fmt: skip
    assert "busy share" in how
    assert len(reported) == 3 and how.startswith("timers set online")
    assert plan_policies([Policy("delay")], FIRST, Cluster(1, 2, 4), "given")[2] == "timers as given"
    with pytest.raises(UsageError, match="both parts need a job"):
        plan_policies([Policy("delay")], FIRST[:1], Cluster(1, 2, 4), "split")


def test_estimates_come_from_the_user_then_the_history_never_the_truth():
    estimator = Estimator()
    new = job("n", 2, 0.0, 999.0, model="resnet50")
    assert estimator.estimate_s(new) == PRIOR_S
    assert estimator.estimate_s(job("u", 2, 0.0, 999.0, estimate_s=50.0)) == 50.0
    estimator.finished(job("a", 2, 0.0, 100.0, model="resnet50"))
    estimator.finished(job("b", 2, 0.0, 300.0, model="resnet50"))
    estimator.finished(job("c", 4, 0.0, 1000.0, model="resnet50"))
    assert estimator.estimate_s(new) == 200.0  # same model and GPU count
    assert estimator.estimate_s(job("m", 8, 0.0, 1.0, model="resnet50")) == pytest.approx(1400 / 3)
    assert estimator.estimate_s(job("o", 1, 0.0, 1.0, model="vgg16")) == pytest.approx(1400 / 3)


def test_network_delay_uses_the_estimate_not_the_duration():
    # Y is estimated at 20 s (it takes 100): timer = 1 x (3 - 1) x 20 = 40 s, it spreads at 41 (JCT 300 + 40)
    jobs = [*FIRST[:2], job("Y1", 2, 1.0, 100.0, estimate_s=20.0)]
    doc, outcomes = run_simulation(jobs, Cluster(1, 2, 4), [Policy("network-delay")], tuning="given")
    y = outcomes["network-delay"][2]
    assert (y.start_s, y.finish_s) == (41.0, 341.0)
    entry = doc["policies"][0]
    assert entry["metrics"]["avg_jct_s"] == pytest.approx((100 + 100 + 340) / 3)
    assert entry["jct_cdf"][-1] == [341.0 - 1.0, 1.0] and doc["tuning"] == "timers as given"
    assert entry["timeline"][0][1:] == [0, 6 / 8]  # at 0: nobody waits, 6 of 8 GPUs busy


@pytest.mark.parametrize(
    "arrival_s, by_busy, wait_s",
    [
        # one switch, two nodes of 4 GPUs: A and B (3 GPUs each) busy 6 of 8 GPUs from 0. Y (2 GPUs) arrives
        # at 3600 ln 2, when the busy share, time-weighted over an hour since the start, is 0.75: its timer
        # of 100 s becomes 100 x 2 x 0.75 = 150 s, then it spreads over the two nodes
        (3600 * math.log(2), True, 150.0),
        # no cold start: 10 s after the start the cluster has been 75% busy all along, not 0.2% (the weight
        # of 10 s in an hour's average)
        (10.0, True, 150.0),
        # the timer as given
        (3600 * math.log(2), False, 100.0),
    ],
)
def test_busy_timers_follow_the_observed_gpu_utilisation(arrival_s, by_busy, wait_s):
    jobs = [job("A", 3, 0.0, 10000.0, slowdown=1.5), job("B", 3, 0.0, 10000.0, slowdown=1.5),
            job("Y", 2, arrival_s, 100.0, slowdown=1.5)]  # fmt: skip
    y = simulate(jobs, Cluster(1, 2, 4), Policy("delay", delay_s=100.0, by_busy=by_busy))[2]
    start_s = arrival_s + wait_s
    assert (y.start_s, y.finish_s) == (pytest.approx(start_s), pytest.approx(start_s + 150.0))
    assert y.level == "switch"


def test_split_reports_the_rest_on_a_cluster_the_first_part_still_holds():
    """A job of the tuning part that holds every GPU when the rest arrive kept them waiting: simulated alone,
    the reported jobs met an empty cluster (queue 0 h where they waited a day)."""
    first = [job("a", 1, 0.0, 10.0), job("b", 1, 1.0, 10.0), job("hog", 8, 50.0, 100_000.0)]
    rest = [job(f"r{i}", 4, 104.0 + i, 100.0) for i in range(7)]
    policies = [Policy("delay"), Policy("fifo")]  # a timer to tune: the split applies
    doc, outcomes = run_simulation(first + rest, Cluster(1, 2, 4), policies, fraction=0.3)
    assert [o.job.job_id for o in outcomes["fifo"]] == [f"r{i}" for i in range(7)]  # the rest reported
    assert min(o.start_s for o in outcomes["fifo"]) >= 100_050.0  # after the hog, not at their arrival
    assert doc["jobs"] == 7 and doc["trace_jobs"] == 10
    fifo = doc["policies"][1]
    assert fifo["metrics"]["avg_queue_s"] > 99_000.0
    # the charts cover the span the figures do: from the first reported arrival to the last reported finish
    assert fifo["timeline"][-1][0] == pytest.approx(fifo["metrics"]["makespan_s"])
    assert fifo["timeline"][0][1:] == [1, 1.0]  # at 104 s the hog holds all 8 GPUs and r0 waits


def test_one_job_before_the_split_is_said_in_the_singular() -> None:
    """'none of the first 1 jobs had finished'."""
    from stash_core.sched.tuner import _none_finished

    assert _none_finished(1) == "the first job had not finished"
    assert _none_finished(1200) == "none of the first 1,200 jobs had finished"


def test_timers_tuned_on_too_few_jobs_are_said_to_be_a_guess() -> None:
    """Tuned on 1 of the first 12 jobs, network-preempt came out "x0" as if that were a finding."""
    from stash_core.sched.tuner import FEWEST_TUNING_JOBS

    _, _, how = plan_policies([Policy("delay")], REST + FIRST, Cluster(1, 2, 4), "split", fraction=0.5)
    assert len(FIRST) < FEWEST_TUNING_JOBS
    assert "3 finished job(s) are too few to tune on" in how and "use --tuning online or given" in how
    many = [job(f"E{index}", 1, 10.0 * index, 5.0) for index in range(12)]
    later = [job(f"R{index}", 1, 1000.0 + index, 5.0) for index in range(6)]
    _, _, how = plan_policies([Policy("delay")], many + later, Cluster(1, 2, 4), "split", fraction=12 / 18)
    assert "tuned on the 12 of the first 12 jobs" in how and "too few" not in how
