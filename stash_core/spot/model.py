"""The spotDNN performance and loss model (Shang et al., IWQoS 2023), as the paper states it.

Asynchronous parameter-server training on a heterogeneous set of workers (one worker = one instance with
its GPUs). Equation numbers are the paper's:

  (6, 7) T_i = T_comp,i + 2 S / B_wk,i + 2 g_i S / B_pcie       worker iteration: compute, push + pull, PCIe
  (8, 9) B_wk = P B_ps / n + (1 - P) B_req if B_req > B_ps / n, else B_req;  P = min(a1 sqrt(n) + b1, 1)
  (2)    T_exp = 1 / sum_i 1 / T_i                                cluster (normalised) iteration time
  (4)    b_w = v T_exp, v = sum_i b_i / T_i                       weighted-average batch size
  (5)    R = sqrt((w_1 - 1)^2 + w_2^2 + ... + w_n^2), w_i = v_i / v, w_1 the largest share
  (3)    j = (g2 b_w + g3) sqrt((R + g4) n) / (L_obj - g5) - g1   iterations to reach the target loss
  (1)    T = j T_exp (+ a revocation overhead)
  (15)   n_upper = floor(((1 / (1 + margin) - b1) / a1)^2)         keeps P < 1, with the contention margin
  (16)   n_lower = ceil(min_b b ((g2 b + g3) sqrt(g4) / (L_obj - g5) - g1) / (v_max T_obj)), b over the
         batches on offer (the paper takes b = b_min, which is no lower bound where g2 < 0: see worker_bounds)

Units: bytes, bytes per second, seconds. The public spotDNN code differs from the paper (no R in the loss,
a sign slip in the PCIe term, no bounds); this follows the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stash_core.errors import UsageError


@dataclass(frozen=True)
class Workload:
    """What a training job brings to the model, from profiling it (spotDNN's workload inputs)."""

    param_bytes: float  # S_parm: model bytes pushed and pulled per iteration
    solo_bandwidth_Bps: float  # B_req: bandwidth one worker uses alone with the parameter server
    contention_a1: float  # a1, b1 of P = min(a1 sqrt(n) + b1, 1), fitted on 2, 4 and 7 workers
    contention_b1: float
    loss_g: tuple[float, float, float, float, float]  # g1..g5 of the loss model, fitted on a few epochs
    contention_margin: float = 0.0  # over-predict P by this share (the paper: 1-5%) to absorb model error

    def __post_init__(self) -> None:
        for name in ("param_bytes", "solo_bandwidth_Bps", "contention_a1"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UsageError(f"workload {name} must be a positive number, got {value!r}")
        if len(self.loss_g) != 5 or not all(math.isfinite(float(g)) for g in self.loss_g):
            raise UsageError("workload loss_g must be five numbers g1..g5")
        if self.loss_g[3] < 0:
            # sqrt((R + g4) n) of eq. 3 at R = 0 (one worker) and sqrt(g4) of eq. 16 need g4 >= 0
            raise UsageError(f"workload g4 = {self.loss_g[3]:g} is negative: the loss model (eq. 3) takes "
                             "sqrt(R + g4) with R = 0 for one worker; refit g1..g5")  # fmt: skip
        if self.loss_g[0] < 0:  # the domain spot-fit-loss keeps to
            raise UsageError(f"workload g1 = {self.loss_g[0]:g} is negative: the loss model (eq. 3) divides "
                             "by j + g1, which would pass through 0 in training; refit g1..g5")  # fmt: skip
        if not 0 <= self.contention_margin < 1:
            raise UsageError(f"contention margin must be in [0, 1), got {self.contention_margin!r}")


@dataclass(frozen=True)
class Worker:
    """One instance used as one worker: its compute time per iteration and its batch."""

    instance: str
    gpus: int  # g_i
    compute_s: float  # T_comp,i: one iteration's computation at batch b_i (profiled)
    batch: int  # b_i = g_i x b_k, samples per iteration of this worker
    usd_per_h: float  # price of the instance (spot or on-demand)


def ps_bottleneck_probability(workers: int, workload: Workload) -> float:
    """Eq. 9: the chance that the parameter server's bandwidth limits a worker, with the safety margin."""
    raw = workload.contention_a1 * math.sqrt(workers) + workload.contention_b1
    return min(max(raw * (1 + workload.contention_margin), 0.0), 1.0)


def worker_bandwidth_Bps(workers: int, workload: Workload, ps_Bps: float) -> float:
    """Eq. 8: bandwidth a worker gets when `workers` share a parameter server of `ps_Bps`; never more than
    the server's own (eq. 8's unshared term, (1 - P) B_req, kept a worker at 40% of B_req over a server of
    1 kbit/s: a day's push planned as seconds)."""
    fair_share = ps_Bps / workers
    if workload.solo_bandwidth_Bps <= fair_share:
        return workload.solo_bandwidth_Bps
    p = ps_bottleneck_probability(workers, workload)
    return min(p * fair_share + (1 - p) * workload.solo_bandwidth_Bps, ps_Bps)


def worker_iteration_s(
    worker: Worker, workers: int, workload: Workload, ps_Bps: float, pcie_Bps: float
) -> float:
    """Eqs. 6-7: compute plus push and pull over the network plus aggregation over PCIe."""
    network_s = 2 * workload.param_bytes / worker_bandwidth_Bps(workers, workload, ps_Bps)
    pcie_s = 2 * worker.gpus * workload.param_bytes / pcie_Bps
    return worker.compute_s + network_s + pcie_s


def cluster_iteration_s(iteration_s: list[float]) -> float:
    """Eq. 2: the normalised iteration time of asynchronous workers, 1 / sum(1 / T_i)."""
    return 1.0 / sum(1.0 / t for t in iteration_s)


def weighted_batch(batches: list[int], iteration_s: list[float]) -> float:
    """Eq. 4: b_w = v x T_exp with cluster speed v = sum b_i / T_i (samples per second)."""
    speed = sum(b / t for b, t in zip(batches, iteration_s, strict=True))
    return speed * cluster_iteration_s(iteration_s)


def convergence_coefficient(batches: list[int], iteration_s: list[float]) -> float:
    """Eq. 5: R from each worker's share w_i = v_i / v of the cluster speed; w_1 is the largest."""
    speeds = [b / t for b, t in zip(batches, iteration_s, strict=True)]
    total = sum(speeds)
    shares = sorted((s / total for s in speeds), reverse=True)
    return math.sqrt((shares[0] - 1) ** 2 + sum(w * w for w in shares[1:]))


def loss_scale(weighted_batch_size: float, loss_g: tuple[float, ...]) -> float:
    """g2 b_w + g3 of eq. 3: how far the loss starts above its floor. The model holds only where it is
    positive; at larger batches (g2 < 0) it turns negative and would predict that no training is needed."""
    return loss_g[1] * weighted_batch_size + loss_g[2]


def check_loss_model(loss_g: tuple[float, ...], target_loss: float, smallest_batch: float,
                     largest_batch: float) -> None:  # fmt: skip
    """Refuse g1..g5 that cannot predict reaching `target_loss` at any batch between the two given: a target
    at or below the floor g5, or a loss scale g2 b + g3 that is not positive anywhere in that range (it is
    linear in b, so its ends decide)."""
    g5 = loss_g[4]
    if target_loss <= g5:
        raise UsageError(f"target loss {target_loss:g} is at or below the loss model's floor g5 = {g5:g}")
    ends = (loss_scale(smallest_batch, loss_g), loss_scale(largest_batch, loss_g))
    if max(ends) <= 0:
        where = f"{ends[0]:g} at batch {smallest_batch:g}"
        if largest_batch != smallest_batch:
            where += f" and {ends[1]:g} at batch {largest_batch:g}"
        raise UsageError(
            f"the loss model does not hold at any batch on offer: g2 x batch + g3 is {where} (it must be "
            "positive); refit g1..g5 over these batch sizes"
        )


def iterations_to_loss(weighted_batch_size: float, r: float, workers: int, target_loss: float,
                       loss_g: tuple[float, ...]) -> float:  # fmt: skip
    """Eq. 3 inverted: normalised iterations j for the loss to reach `target_loss`."""
    g1, g2, g3, g4, g5 = loss_g
    if target_loss <= g5:
        raise UsageError(f"target loss {target_loss:g} is at or below the loss model's floor g5 = {g5:g}")
    return (g2 * weighted_batch_size + g3) * math.sqrt((r + g4) * workers) / (target_loss - g5) - g1


def predicted_loss(weighted_batch_size: float, r: float, workers: int, iterations: float,
                   loss_g: tuple[float, ...]) -> float:  # fmt: skip
    """Eq. 3: the loss after `iterations` normalised iterations."""
    g1, g2, g3, g4, g5 = loss_g
    return (g2 * weighted_batch_size + g3) * math.sqrt((r + g4) * workers) / (iterations + g1) + g5


def worker_bounds(workload: Workload, target_loss: float, budget_s: float, smallest_batch: int,
                  fastest_speed: float, largest_batch: int | None = None) -> tuple[int, int]:  # fmt: skip
    """Eqs. 15-16: the fewest workers that can meet the budget and the most before the PS saturates.

    `fastest_speed` is v_max, the largest cluster speed (samples per second) of one worker. A cluster of n
    workers trains T = j b_w / v >= b_w j1(b_w) / (n v_max) with j1 eq. 3's iterations at R = 0, n = 1, so
    n >= b_w j1(b_w) / (v_max T_obj). Its weighted batch b_w lies between the smallest and the largest batch
    on offer, so the bound takes the least samples b j1(b) over that range. The paper's eq. 16 takes b_min
    alone: with g2 < 0, b j1(b) can be larger there than at the batch a plan uses, and that bound would
    exclude a feasible plan.
    """
    upper = most_workers(workload)
    g5 = workload.loss_g[4]
    if target_loss <= g5:
        raise UsageError(f"target loss {target_loss:g} is at or below the loss model's floor g5 = {g5:g}")
    samples = least_samples(workload.loss_g, target_loss, smallest_batch,
                            smallest_batch if largest_batch is None else largest_batch)  # fmt: skip
    lower = max(1, _whole_bounded(samples / (fastest_speed * budget_s), math.ceil))
    return lower, upper


def least_samples(loss_g: tuple[float, ...], target_loss: float, smallest_batch: float,
                  largest_batch: float) -> float:  # fmt: skip
    """The least of b j1(b) = b ((g2 b + g3) sqrt(g4) / (L_obj - g5) - g1) for b between the two batches:
    a quadratic in b, so its least is at an end, or at its vertex where it curves upwards (g2 > 0)."""
    g1, g2, g3, g4, g5 = loss_g
    scale = math.sqrt(g4) / (target_loss - g5)

    def samples(b: float) -> float:
        return b * ((g2 * b + g3) * scale - g1)

    batches = [smallest_batch, largest_batch]
    if g2 * scale > 0:
        vertex = (g1 - g3 * scale) / (2 * g2 * scale)
        if smallest_batch < vertex < largest_batch:
            batches.append(vertex)
    return min(samples(b) for b in batches)


def most_workers(workload: Workload) -> int:
    """Eq. 15: the most workers before the PS saturates, P = (a1 sqrt(n) + b1)(1 + margin) < 1; the margin
    that over-predicts contention lowers the bound too. At most MAX_WORKER_BOUND."""
    a1, b1 = workload.contention_a1, workload.contention_b1
    ceiling = 1 / (1 + workload.contention_margin)
    root = (ceiling - b1) / a1
    return _whole_bounded(root * root, math.floor) if b1 < ceiling else 0  # x * x is inf, never an error


MAX_WORKER_BOUND = 10**9  # beyond any quota: a1 = 1e-300 or b1 = -1e308 gives a bound of "unlimited"


def _whole_bounded(value: float, rounding) -> int:
    """A worker bound as a whole number at most MAX_WORKER_BOUND (an infinite or NaN quotient is the cap)."""
    if not math.isfinite(value) or value > MAX_WORKER_BOUND:
        return MAX_WORKER_BOUND
    return rounding(value)
