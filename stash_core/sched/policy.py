"""The scheduling policies: in which order the queue is looked at, where a job may go, whom to preempt.

  fifo             strict arrival order: a job that cannot start blocks every later one (head of line)
  sjf              shortest ESTIMATED job first (the estimate the scheduler has at arrival, estimate.py),
                   non-preemptive; a job that does not fit is passed by later, smaller ones
  las              Tiresias-style discretised 2D least-attained-service: attained service = GPUs x seconds
                   held; queue k holds the jobs whose service lies between las_limits_gpu_s[k-1] and [k]
                   (default LAS_THRESHOLDS_GPU_S); lower queues first, arrival order within a queue; a
                   waiting job preempts running jobs of higher queues (the latest of the highest queue
                   first) when that frees enough GPUs; a preempted job waiting longer than starve_factor x
                   the seconds it has run goes back to queue 0 (las.py)
  fifo-consolidate strict arrival order, each job waits for its tightest placement and nobody passes it (head
                   of line): the consolidation-based scheduling that network-sensitive scheduling is
                   measured against
  consolidate      arrival order, wait for the tightest placement; later jobs that fit pass a waiting one
                   (backfilling)
  spread           arrival order, start anywhere as soon as enough GPUs are free
  delay            delay scheduling: wait `delay_s` for the tightest placement, then take the tightest free
                   one (the timer is the break-even point: waiting longer costs more than spreading); with
                   `online`, the timer is the wait for a first start observed so far (an exponentially
                   weighted mean), not a constant; an infinite timer waits for consolidation
  by_busy          (delay, network-delay, network-preempt) the timer is multiplied by 2 x the observed GPU
                   busy share (time-weighted, exponentially, over BUSY_TAU_S): a half-used cluster keeps the
                   timer, an idle one starts jobs anywhere at once (GPUs would idle, links are free), a full
                   one waits up to twice as long (spreading would crowd busy links)
  network-delay    delay scheduling with each job's timer = scale x (slowdown - 1) x ESTIMATED duration:
                   what spreading would cost it, the break-even point; insensitive jobs start at once; an
                   infinite scale waits for consolidation
  network-preempt  network-delay, plus network-sensitive preemption: when GPUs free up, running spread jobs
                   are ranked by (slowdown now - 1) x estimated remaining work (the seconds consolidation
                   would save them); one whose saving exceeds the checkpoint cost is stopped and restarted in
                   its tightest placement, if one is free now
Every preempted job pays `checkpoint_s` (save and restore) on restart, holding its GPUs. Against thrashing a
job is preempted only after `min_run_s` of running since its last start, and at most `max_preemptions` times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stash_core.errors import UsageError
from stash_core.sched_names import POLICIES

# one line each, for --help, the page and docs/scheduling.md
DEFINITIONS = {
    "fifo": "arrival order, start anywhere; the head of the queue blocks everyone behind it",
    "sjf": "shortest estimated job first, start anywhere; a job that does not fit is passed",
    "las": "least attained service (Tiresias): queues by GPU-hours held, preempts jobs of lower queues",
    "fifo-consolidate": "arrival order, each job waits for its tightest placement; nobody passes it",
    "consolidate": "arrival order, each job waits for its tightest placement; later jobs that fit pass it",
    "spread": "arrival order, start anywhere as soon as enough GPUs are free; later jobs that fit pass",
    "delay": "delay scheduling: wait up to --delay-s for the tightest placement, then the tightest free one",
    "network-delay": "delay scheduling with each job's timer = scale x what spreading would cost it",
    "network-preempt": "network-delay, plus moving spread jobs to a freed tightest placement when it pays",
}
PREEMPTIVE = ("las", "network-preempt")
TIMED = ("delay", "network-delay", "network-preempt")
# Tiresias' discretised LAS queues: limits of attained service (GPU-seconds) between queues
LAS_THRESHOLDS_GPU_S = (3600.0, 36000.0)
# LAS starvation: promoted after waiting this many times the seconds it has run (a choice of this
# simulator, not a figure from Tiresias)
STARVE_FACTOR = 10.0
WAIT_WEIGHT = 0.1  # online delay timer: weight of the latest observed queueing delay
BUSY_TAU_S = 3600.0  # by_busy: time constant of the observed GPU busy share


@dataclass(frozen=True)
class Policy:
    name: str
    delay_s: float = 0.0  # delay: the timer (unless online)
    scale: float = 1.0  # network-delay, network-preempt: timer = scale x (slowdown - 1) x estimate
    online: bool = False  # delay: timer = observed wait for a first start (exponentially weighted mean)
    by_busy: bool = False  # timed policies: timer x 2 x observed GPU busy share
    checkpoint_s: float = 30.0  # preemption: save + restore, paid on restart
    min_run_s: float = 600.0  # preemption guard: running time since the last start
    max_preemptions: int = 3  # preemption guard: per job
    las_limits_gpu_s: tuple[float, ...] = LAS_THRESHOLDS_GPU_S  # las: service limits between its queues
    starve_factor: float = STARVE_FACTOR  # las: promotion after waiting this x its run time; 0: never

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise UsageError(f"unknown policy {self.name!r}: choose {', '.join(POLICIES)}")
        for what, value in (("delay", self.delay_s), ("scale", self.scale)):  # infinite: wait to consolidate
            if math.isnan(value) or value < 0:
                raise UsageError(f"{what} must be a non-negative number, got {value}")
        for what, value in (("checkpoint", self.checkpoint_s), ("minimum run", self.min_run_s)):
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"{what} must be a non-negative number, got {value}")
        limits = self.las_limits_gpu_s
        if not (
            limits and all(math.isfinite(v) and v > 0 for v in limits) and list(limits) == sorted(set(limits))
        ):
            raise UsageError(
                f"LAS queue limits must be positive and increasing, got {', '.join(map(str, limits))}"
            )
        if not (math.isfinite(self.starve_factor) and self.starve_factor >= 0):
            raise UsageError(f"starvation factor must be a non-negative number, got {self.starve_factor}")
        if self.max_preemptions < 0:
            raise UsageError(f"maximum preemptions must be >= 0, got {self.max_preemptions}")

    @property
    def preemptive(self) -> bool:
        return self.name in PREEMPTIVE

    def timer_s(self, slowdown: float, estimate_s: float, observed_wait_s: float, busy: float = 0.5) -> float:
        """How long a skipped job waits for its tightest placement before relaxing to its fewest switches;
        `busy`: the observed GPU busy share (by_busy)."""
        if self.name in ("consolidate", "fifo-consolidate"):
            return math.inf
        if self.name == "delay":
            timer = observed_wait_s if self.online else self.delay_s
        elif self.name in ("network-delay", "network-preempt"):
            if math.isinf(self.scale):
                return math.inf
            timer = self.scale * (slowdown - 1.0) * estimate_s
        else:
            return 0.0
        return timer * 2.0 * busy if self.by_busy else timer

    def label(self) -> str:
        busy = " x busy" if self.by_busy and self.name in TIMED else ""
        if self.name == "delay":
            if not self.online and math.isinf(self.delay_s):
                return "delay (waits to consolidate)"
            return ("delay online" if self.online else f"delay {self.delay_s:g} s") + busy
        if self.name in ("network-delay", "network-preempt"):
            if math.isinf(self.scale):
                return f"{self.name} (waits to consolidate)"
            return f"{self.name} x{self.scale:g}{busy}"
        return self.name

    def settings(self) -> dict[str, object]:
        """What a result file records of the policy."""
        out: dict[str, object] = {"label": self.label()}
        if self.name == "delay":
            out.update(delay_s=None if self.online else _finite(self.delay_s), online=self.online)
        if self.name in ("network-delay", "network-preempt"):
            out["scale"] = _finite(self.scale)
        if self.name in TIMED:
            out["by_busy"] = self.by_busy
        if self.name == "las":
            out.update(las_thresholds_gpu_s=list(self.las_limits_gpu_s), starve_factor=self.starve_factor)
        if self.preemptive:
            out.update(checkpoint_s=self.checkpoint_s, min_run_s=self.min_run_s,
                       max_preemptions=self.max_preemptions)  # fmt: skip
        return out


def _finite(value: float) -> float | str:
    """A timer for a JSON file: infinity (wait for consolidation) as the word, JSON has no number for it."""
    return value if math.isfinite(value) else "infinite"
