"""The measures of one asynchronous parameter-server training from its records (spot/workload_profile.py
runs it).

Per worker count (spotDNN, Shang et al., IWQoS 2023):
  bandwidth      per worker, 2 S_parm / (push + pull time), queueing at the PS included (B_wk of eq. 8)
  p_bottleneck   the share of exchanges whose push began while the PS was serving another worker (P of
                 eq. 9, observed)
  ps_Bps         bytes the PS moved per second it spent serving (receive, update, reply): B_ps, over the
                 same exchanges as the bandwidth (each worker's warm-up services left out)
  compute_s      a worker's forward and backward at its batch (T_comp)
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

from stash_core.errors import MeasurementError

WARMUP = 3  # exchanges per worker left out: the first pushes meet a cold PS and lazy allocations
BYTES_PER_PARAM = 4  # float32 parameters and gradients


@dataclass
class CountMeasure:
    """What one PS training with `workers` workers measured."""

    workers: int
    exchanges: int  # pushes and pulls counted (after the warm-up)
    bandwidth_Bps: float  # mean over workers of each worker's 2 S / mean exchange time
    bandwidth_spread_Bps: tuple[float, float]  # slowest and fastest worker
    p_bottleneck: float
    ps_Bps: float
    compute_s: float
    loss_rows: list[tuple[float, float, int, int]] = field(default_factory=list)  # updates, loss, batch, n

    def as_dict(self) -> dict:
        return {
            "workers": self.workers, "exchanges": self.exchanges,
            "bandwidth_mbps": self.bandwidth_Bps / 1e6,
            "bandwidth_spread_mbps": [v / 1e6 for v in self.bandwidth_spread_Bps],
            "p_bottleneck": self.p_bottleneck, "ps_mbps": self.ps_Bps / 1e6, "compute_s": self.compute_s,
        }  # fmt: skip


def summarise_ps_training(results: list[dict], warmup: int = WARMUP) -> tuple[int, CountMeasure]:
    """(param count, the measures) of one run's RESULT payloads."""
    ps = next(r for r in results if r.get("role") == "ps")
    workers = sorted((r for r in results if r.get("role") == "worker"), key=lambda r: r["rank"])
    param_bytes = int(ps["param_count"]) * BYTES_PER_PARAM
    # Match the PS's services of a worker, in order, to that worker's exchanges: the service started when
    # both the push began and the PS was listening.
    pushes = {w["rank"]: [rec[1] for rec in w["records"]] for w in workers}
    served: dict[int, int] = {}
    busy = []  # (start, end, worker) of every service, in time order (the PS serves one at a time)
    warm_s = []  # the services after each worker's warm-up: B_ps over the exchanges B_wk and B_req count
    for src, posted, _received, sent in ps["services"]:
        index = served.get(src, 0)
        served[src] = index + 1
        start = max(posted, pushes[src][index]) if index < len(pushes.get(src, [])) else posted
        busy.append((start, sent, src))
        if index >= warmup:
            warm_s.append(sent - start)
    busy.sort()
    starts = [b[0] for b in busy]
    per_worker_Bps, contended, total, compute = [], 0, 0, []
    for w in workers:
        records = w["records"][warmup:]
        if not records:
            continue
        exchange_s = statistics.fmean(rec[2] for rec in records)
        per_worker_Bps.append(2 * param_bytes / exchange_s)
        compute += [rec[0] for rec in records]
        for rec in records:
            total += 1
            contended += _busy_with_other(busy, starts, rec[1], w["rank"])
    if not per_worker_Bps:
        raise MeasurementError(_too_short(workers, warmup))
    serving_s = sum(warm_s)
    loss_rows = [(rec[4], rec[3], int(w["batch"]), len(workers)) for w in workers for rec in w["records"]]
    return int(ps["param_count"]), CountMeasure(
        workers=len(workers), exchanges=total,
        bandwidth_Bps=statistics.fmean(per_worker_Bps),
        bandwidth_spread_Bps=(min(per_worker_Bps), max(per_worker_Bps)),
        p_bottleneck=contended / total,
        ps_Bps=2 * param_bytes * len(warm_s) / serving_s if serving_s > 0 else 0.0,
        compute_s=statistics.fmean(compute), loss_rows=sorted(loss_rows),
    )  # fmt: skip


def _busy_with_other(busy: list, starts: list[float], push_s: float, rank: int) -> bool:
    """Whether the PS was serving another worker when this push began."""
    index = bisect.bisect_right(starts, push_s) - 1
    if index < 0:
        return False
    start, end, src = busy[index]
    return src != rank and start <= push_s < end


def _too_short(workers: list[dict], warmup: int) -> str:
    """Why a worker count measured nothing: its workers made no exchange past their warm-up; with the time a
    step took, about how long a few more would need."""
    made = max((len(w["records"]) for w in workers), default=0)
    said = f"with {len(workers)} worker(s), no exchange past the first {warmup} of each (at most {made} made)"
    steps = [rec[0] + rec[2] for w in workers for rec in w["records"]]  # compute + exchange, seconds
    if not steps:
        return f"{said}: give a longer --duration-s"
    needed_s = (warmup + 5) * max(steps)  # five exchanges past the warm-up, at the slowest step seen
    return f"{said}: a step took up to {max(steps):.2g} s, so give --duration-s well above {needed_s:.0f}"
