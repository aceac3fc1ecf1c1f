"""What the scheduler can know of a job's duration when it arrives: never the true one.

In order: the user's estimate (trace column estimate_s); else the mean consolidated run time of the jobs
of the same model and GPU count that finished before it arrived; else of the same model; else of every
finished job; else PRIOR_S. A finished job's consolidated run time is known to the scheduler (it saw the
job's iterations and their speed), so the history grows as the simulation runs.
"""

from __future__ import annotations

from stash_core.sched.trace import TraceJob

PRIOR_S = 3600.0  # before any job has finished and without a user estimate


class Estimator:
    def __init__(self) -> None:
        self._sums: dict[object, list[float]] = {}  # key -> [total seconds, jobs]

    def estimate_s(self, job: TraceJob) -> float:
        if job.estimate_s is not None:
            return job.estimate_s
        for key in _keys(job):
            seen = self._sums.get(key)
            if seen:
                return seen[0] / seen[1]
        return PRIOR_S

    def finished(self, job: TraceJob) -> None:
        for key in _keys(job):
            seen = self._sums.setdefault(key, [0.0, 0])
            seen[0] += job.duration_s
            seen[1] += 1


def _keys(job: TraceJob) -> tuple[object, ...]:
    return (("model, gpus", job.model, job.gpus), ("model", job.model), "all")
