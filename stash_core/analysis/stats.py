"""Summary statistics of iteration-time samples: warm-up truncation and confidence intervals.

Iteration times are a short, possibly autocorrelated series with a warm-up transient at the
start (allocator growth, loader start-up, cache effects). We

* cut the warm-up with MSER-5 (White 1997, the standard truncation rule in simulation output
  analysis): drop the prefix that minimises the standard error of the remaining mean;
* give the 95% interval of the mean with Student's t and an effective sample size corrected
  for lag-1 autocorrelation, n_eff = n (1 - r1) / (1 + r1), so correlated samples do not make
  the interval look tighter than it is.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

MSER_BATCH = 5
MIN_KEPT_SAMPLES = 8


# Two-sided 95% Student-t quantiles for 1..30 degrees of freedom (standard tables).
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile_975(dof: float) -> float:
    """Two-sided 95% Student-t quantile: the table at whole degrees of freedom up to 30, the quantile itself
    between them (an autocorrelation-corrected sample size is fractional: taken at the whole number below,
    2.8 effective samples read t = 12.7 where 4.8 is right), Cornish-Fisher expansion beyond 30."""
    dof = max(dof, 1.0)
    if dof < 30:
        return T_975[int(dof) - 1] if dof == int(dof) else t_quantile(0.05, dof)
    z = NormalDist().inv_cdf(0.975)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / dof + g2 / dof**2 + g3 / dof**3


@functools.lru_cache(maxsize=4096)
def t_quantile(two_sided_p: float, dof: float) -> float:
    """x with P(|T| > x) = two_sided_p for Student's t of `dof` degrees of freedom, by bisection."""
    low, high = 0.0, 1.0
    while _t_two_sided_p(high, dof) > two_sided_p:
        low, high = high, high * 2
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_two_sided_p(middle, dof) > two_sided_p else (low, middle)
    return (low + high) / 2


def _t_two_sided_p(x: float, dof: float) -> float:
    """P(|T| > x): the regularized incomplete beta I_{dof / (dof + x^2)}(dof / 2, 1 / 2)."""
    return _incomplete_beta(dof / (dof + x * x), dof / 2, 0.5)


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1.0 - front * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):  # fmt: skip
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return fraction


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def lag1_autocorrelation(values: list[float]) -> float:
    n = len(values)
    if n < 3:
        return 0.0
    m = mean(values)
    var = sum((v - m) ** 2 for v in values)
    if var == 0:
        return 0.0
    cov = sum((values[i] - m) * (values[i + 1] - m) for i in range(n - 1))
    return cov / var


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% confidence interval (autocorrelation-corrected)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    m = mean(values)
    if n == 1:
        return m, math.inf
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    # Only positive correlation widens the interval; negative is treated as independent.
    r1 = min(max(lag1_autocorrelation(values), 0.0), 0.9)
    n_eff = max(n * (1 - r1) / (1 + r1), 2.0)
    return m, t_quantile_975(n_eff - 1) * math.sqrt(var / n_eff)


def mser_truncation(values: list[float], batch: int = MSER_BATCH) -> int:
    """Number of leading samples to discard as warm-up (MSER-5 on batch means; on fewer than four batches,
    MSER-1 on the samples, so a fixed count of ten steps does not keep a slow start).

    The search is limited to the first half so that a late slow-down is never 'cut away'. Each cut's score
    comes from suffix sums, so the search is linear in the samples: the stopping rule runs it at every check
    of a run that may reach tens of thousands of iterations."""
    n_batches = len(values) // batch
    if n_batches < 4:
        return 0 if batch == 1 else mser_truncation(values, 1)
    means = [mean(values[i * batch : (i + 1) * batch]) for i in range(n_batches)]
    centre = mean(means)  # centred, the sums of squares keep their precision (a constant series scores 0)
    deviations = [x - centre for x in means]
    suffix_sum, suffix_squares = [0.0] * (n_batches + 1), [0.0] * (n_batches + 1)
    for i in range(n_batches - 1, -1, -1):
        suffix_sum[i] = suffix_sum[i + 1] + deviations[i]
        suffix_squares[i] = suffix_squares[i + 1] + deviations[i] ** 2
    best_d, best_score = 0, math.inf
    for d in range(n_batches // 2 + 1):
        k = n_batches - d
        spread = max(suffix_squares[d] - suffix_sum[d] ** 2 / k, 0.0)  # sum of (x - mean)^2 over the rest
        score = spread / k**2
        if score < best_score:
            best_d, best_score = d, score
    return best_d * batch


@dataclass(frozen=True)
class SampleSummary:
    mean: float
    ci95: float
    std: float
    median: float
    p5: float
    p95: float
    n: int

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def relative_ci(self) -> float:
        return self.ci95 / self.mean if self.mean > 0 else math.inf


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarise(values: list[float]) -> SampleSummary:
    m, ci = mean_ci95(values)
    n = len(values)
    std = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    ordered = sorted(values)
    return SampleSummary(
        mean=m,
        ci95=ci,
        std=std,
        median=percentile(ordered, 0.5),
        p5=percentile(ordered, 0.05),
        p95=percentile(ordered, 0.95),
        n=n,
    )


def converged(values: list[float], target_relative_ci: float, min_kept: int = MIN_KEPT_SAMPLES) -> bool:
    """True when, after warm-up truncation, the 95% CI of the mean is within the target."""
    kept = values[mser_truncation(values) :]
    if len(kept) < min_kept:
        return False
    m, ci = mean_ci95(kept)
    return m > 0 and ci / m <= target_relative_ci


def difference_ci95(ci_a: float, ci_b: float) -> float:
    """Half-width of the 95% interval of a difference of two independent means."""
    return math.sqrt(ci_a**2 + ci_b**2)


def run_difference(
    later: tuple[float, float | None], earlier: tuple[float, float | None]
) -> tuple[float, float]:
    """later - earlier of two independent (mean_s, ci95_s), with the difference's 95% half-width."""
    return later[0] - earlier[0], difference_ci95(later[1] or 0.0, earlier[1] or 0.0)


def linear_combination_ci95(coefficients: dict[str, float], ci95: dict[str, float]) -> float:
    """Half-width of the 95% interval of sum(c_k * mean_k) over independent means with intervals ci95[k]."""
    return math.sqrt(math.fsum((c * ci95[key]) ** 2 for key, c in coefficients.items() if c))


def share_ci95(successes: int, trials: int) -> tuple[float, float]:
    """The 95% interval (Wilson's score interval) of a share of `successes` in `trials` independent trials:
    it stays inside 0..1 and is not empty at 0 or all (as the normal one is); (0, 1) without trials."""
    if trials <= 0:
        return 0.0, 1.0
    z = 1.959963984540054
    share, spread = successes / trials, z * z / trials
    centre = (share + spread / 2) / (1 + spread)
    half = z * math.sqrt(share * (1 - share) / trials + spread / (4 * trials)) / (1 + spread)
    return max(0.0, centre - half), min(1.0, centre + half)


def resolved(value: float, ci95: float | None) -> bool:
    """Whether an estimate is resolved: its 95% interval is no wider than its magnitude, so the interval
    does not reach past zero. An unknown interval (None) is taken as resolved; an infinite one never is."""
    if ci95 is None:
        return True
    if math.isnan(ci95) or math.isinf(ci95) or math.isnan(value):
        return False
    return abs(value) >= ci95


def sign_verdict(value: float, ci95: float | None) -> str:
    """Where a signed estimate stands against zero: "positive" or "negative" (beyond its 95% interval), or
    "within_noise" (the interval reaches past zero). Without an interval, the sign alone decides."""
    if ci95 is not None and not resolved(value, ci95):
        return "within_noise"
    return "positive" if value >= 0 else "negative"


# ---------------------------------------------------------------------------------------------------------
# Several launches of each run, in rounds (see engine/plan.py round_order and docs/profiling.md).
#
# Each run is launched once per round. A figure (a run's time, or a stall = a difference of two runs) has one
# estimate per round, x_r, each with its within-launch 95% half-width w_r (for a difference: the two launches'
# half-widths in quadrature). The figure is the plain mean of the rounds, and its 95% half-width is
#
#     max( t(R-1) * s_x / sqrt(R),  sqrt(sum w_r^2) / R )
#
# The first term is Student's t over the R round estimates: it holds the launch-to-launch variation (and the
# within-launch noise, which is part of the spread of the x_r). The second is the interval the iterations
# alone give for the same mean: it is the floor, so that rounds that happen to agree never claim more than
# their iterations support (the truncated Knapp-Hartung interval of random-effects meta-analysis). With one
# round only the second term is left: one launch per run gives the interval of its iterations, as before.
# A stall's rounds are paired: both of its runs ran in the same round, so drift of the machine from one round
# to the next cancels in x_r and only the drift within a round is left in the spread.


@dataclass(frozen=True)
class Pooled:
    mean: float
    ci95: float
    between_ci95: float | None  # Student t over the rounds (None with one round)
    within_ci95: float  # the iterations' own interval of the same mean
    rounds: int

    def to_dict(self) -> dict:
        return asdict(self)


# From this many rounds on (in time order), a positive lag-1 autocorrelation counts them fewer, as it does the
# iterations within a launch (mean_ci95): many rounds are groups of blocks of a few launches
# (engine/paired.py), and groups of one launch share its level. Fewer rounds would make the lag-1 estimate
# itself too noisy to correct by.
AUTOCORRELATED_ROUNDS = 16


# A launch that times two runs in groups of blocks (engine/paired.py) gives each group a round of its own,
# keyed (launch round + 1) x GROUP_ROUND_KEY + group: every group's key is at least GROUP_ROUND_KEY and every
# plain round's below it, so a run's groups are told from another run's rounds even in the first launch.
GROUP_ROUND_KEY = 100_000


def runs_mean_ci95(means: list[float], ci95s: list[float]) -> float:
    """The 95% interval of the mean of several runs' means: Student's t over the runs where they disagree
    more than their own intervals say (runs of 122 and 244 ms are no "183 ± 14 ms"), else their own
    intervals combined (sqrt of the sum of squares, over the count); NaN with nothing to go on."""
    within = math.sqrt(sum(ci**2 for ci in ci95s)) / len(ci95s) if ci95s else math.nan
    if len(means) < 2:
        return within
    spread = math.sqrt(sum((value - mean(means)) ** 2 for value in means) / (len(means) - 1))
    between = t_quantile_975(len(means) - 1) * spread / math.sqrt(len(means))
    return between if math.isnan(within) else max(between, within)


def group_round_key(round_index: int, group: int) -> int:
    return (round_index + 1) * GROUP_ROUND_KEY + group


def launch_of_rounds(keys: list[int]) -> list[int] | None:
    """The launch round of each round key, where the keys are groups of blocks (None where they are not)."""
    if not any(key >= GROUP_ROUND_KEY for key in keys):
        return None
    return [key // GROUP_ROUND_KEY - 1 for key in keys]


def paired_rounds(
    rounds: dict | None, used: list[str]
) -> tuple[list[int], dict[str, list[tuple[float, float]]]] | None:
    """(round keys, each run's (mean_s, ci95_s) in them) where every run in `used` was measured in the same
    rounds (a list is rounds 0, 1, ...), so that their difference can be taken round by round; else None.
    Runs timed in groups of blocks beside runs of launches of their own (R1 beside R3) are taken launch by
    launch, each launch's groups pooled: their rounds are still the same launches."""
    if not rounds or not all(rounds.get(key) for key in used):
        return None
    by_run = {key: _as_dict(rounds[key]) for key in used}
    return _aligned(by_run) or _aligned({key: _per_launch(each) for key, each in by_run.items()})


def _aligned(by_run: dict[str, dict]) -> tuple[list[int], dict[str, list[tuple[float, float]]]] | None:
    """(round keys, each run's figures in them) where every run has the same round keys, else None."""
    keys = sorted(next(iter(by_run.values())))
    if any(sorted(each) != keys for each in by_run.values()):
        return None
    return keys, {key: [each[r] for r in keys] for key, each in by_run.items()}


def _as_dict(figures) -> dict:
    return dict(enumerate(figures)) if isinstance(figures, list) else figures


def _per_launch(figures: dict[int, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    """A run's figures launch by launch: the groups of blocks of each launch pooled into one figure."""
    keys = sorted(figures)
    launches = launch_of_rounds(keys)
    if launches is None:
        return figures
    pooled = {}
    for launch in dict.fromkeys(launches):
        mine = [figures[key] for key, at in zip(keys, launches, strict=True) if at == launch]
        each = pool_rounds([mean_s for mean_s, _ in mine], [ci95_s for _, ci95_s in mine])
        pooled[launch] = (each.mean, each.ci95)
    return pooled


def pool_rounds(values: list[float], within_ci95s: list[float], launches: list[int] | None = None) -> Pooled:
    """The mean of per-round estimates (in time order) and its 95% half-width, from the rounds and from the
    iterations. launches: where the rounds are groups of blocks, the launch of each; the mean is then the
    launches' own means' mean (their rounds pooled), and its interval never narrower than Student's t over
    them, so that it holds from one launch to the next as the rounds of separate launches do. One round with
    no interval of its own has an infinite one (never resolved: stats.resolved)."""
    if not values or len(values) != len(within_ci95s):
        raise ValueError("one within-launch interval per round is needed")
    if launches is not None and len(set(launches)) > 1:
        pooled = pool_rounds(values, within_ci95s)
        means = [mean([v for v, at in zip(values, launches, strict=True) if at == launch])
                 for launch in dict.fromkeys(launches)]  # fmt: skip
        across = pool_rounds(means, [0.0] * len(means)).between_ci95 or 0.0
        between = max(pooled.between_ci95 or 0.0, across)
        # The mean of the launches' means, whose spread the interval is: launches of unequal length weigh
        # alike, as they vary alike around the true value when what launches disagree by dominates.
        return Pooled(mean(means), max(pooled.ci95, across), between, pooled.within_ci95, pooled.rounds)
    rounds = len(values)
    m = mean(values)
    within = math.sqrt(math.fsum(ci**2 for ci in within_ci95s)) / rounds
    if rounds == 1:  # one value and no interval of its own: its spread is unknown, never 0
        return Pooled(m, math.inf if within == 0 else within, None, within, 1)
    var = math.fsum((v - m) ** 2 for v in values) / (rounds - 1)
    n_eff = float(rounds)
    if rounds >= AUTOCORRELATED_ROUNDS:
        r1 = min(max(lag1_autocorrelation(values), 0.0), 0.9)
        n_eff = max(rounds * (1 - r1) / (1 + r1), 2.0)
    between = t_quantile_975(n_eff - 1) * math.sqrt(var / n_eff)
    return Pooled(m, max(between, within), between, within, rounds)


def combination_by_round(
    coefficients: dict[str, float], rounds: dict[str, list[tuple[float, float]]]
) -> tuple[list[float], list[float]]:
    """sum(c_k * t_k) in each round, and its within-launch half-width, from each run's (mean_s, ci95_s) per
    round (the runs' launches in one round are independent processes)."""
    used = {key: c for key, c in coefficients.items() if c}
    counts = {len(rounds[key]) for key in used}
    if len(counts) != 1:
        raise ValueError("every run of a combination needs the same rounds")
    count = counts.pop()
    values = [math.fsum(c * rounds[key][r][0] for key, c in used.items()) for r in range(count)]
    cis = [
        math.sqrt(math.fsum((c * rounds[key][r][1]) ** 2 for key, c in used.items())) for r in range(count)
    ]
    return values, cis
