"""Two factors across machines the communication model does not have, each held out by source.

Tried after the fourth and fifth multi-GPU test sets were evaluated (docs/validation.md, "not kept"):
  network share   training reaches only a share (0.2 to 1) of the network curve's bandwidth
  extra jitter    the slowest rank lags more across machines: jitter + extra (0 to 0.06) on several machines
For each PyTorch source, contention and jitter are fitted on the other sources as comm_validation.py does,
then the factor is chosen on the grid by the same loss over those other sources, and the source is predicted
with it. Printed over the fitted sets alone, then with every test set pooled in (comm_validation.TEST_CSVS:
fresh4 to fresh9; PyTorch figures only).

    PYTHONPATH=. .venv/bin/python bench/comm_factors.py
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd
from bench_args import bench_parser

from stash_core.decide.predict.comm_validation import (
    PYTORCH,
    TEST_CSVS,
    cases,
    components,
    fit_params,
    fitted_figures,
    load_figures,
    source_weights,
)

SHARES = (1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2)
EXTRA_JITTER = tuple(np.round(np.arange(0.0, 0.0601, 0.005), 4))


def with_share(case, share: float):
    """The case with its network curve at `share` of its bandwidth (one machine: unchanged)."""
    if case.links.nodes <= 1 or case.links.network is None:
        return case
    return dataclasses.replace(
        case, links=dataclasses.replace(case.links, network=case.links.network.scaled(share))
    )


def error_points(built, params, extra_jitter: float = 0.0) -> np.ndarray:
    """Predicted minus published scaling efficiency, in points, of every case."""
    found = []
    for case in built:
        fixed, per_contention, per_jitter = components(case)
        jitter = params.jitter + (extra_jitter if case.links.nodes > 1 else 0.0)
        comm_s = fixed + params.contention * per_contention + jitter * per_jitter
        found.append(100.0 * (case.step_1_s / (case.step_1_s + comm_s) - case.published_efficiency))
    return np.array(found)


def held_out(built, variants: dict, extra: tuple[float, ...]) -> pd.DataFrame:
    """Each source predicted with the grid value (a case list each) and extra jitter chosen on the others."""
    rows = []
    for source in sorted({case.row["source_id"] for case in built}):
        best = None
        for value, variant in variants.items():
            train = [case for case in variant if case.row["source_id"] != source]
            params = fit_params(train)
            weights = source_weights(train)
            for extra_jitter in extra:
                loss = float((np.abs(error_points(train, params, extra_jitter)) * weights).sum())
                if best is None or loss < best[0]:
                    best = (loss, value, extra_jitter, params)
        _, value, extra_jitter, params = best
        test = [case for case in variants[value] if case.row["source_id"] == source]
        for case, error in zip(test, error_points(test, params, extra_jitter), strict=True):
            rows.append({"source": source, "nodes": case.links.nodes, "error": error, "grid": value,
                         "extra_jitter": extra_jitter})  # fmt: skip
    return pd.DataFrame(rows)


def summary(label: str, frame: pd.DataFrame) -> None:
    for scope, part in (("one machine", frame[frame["nodes"] == 1]), ("several", frame[frame["nodes"] > 1])):
        errors = part["error"]
        print(f"  {label}, {scope}: {len(part)} figures, mean abs. error {errors.abs().mean():.2f} points, "
              f"mean {errors.mean():+.2f}, optimistic {(errors > 0).mean():.0%}")  # fmt: skip


def _test_sets() -> str:
    """The test sets pooled in, as many as TEST_CSVS holds: "the 6 test sets (fresh4, ..., fresh9)"."""
    names = [path.stem.removeprefix("published_multi_gpu_") for path in TEST_CSVS]
    return f"the {len(names)} test sets ({', '.join(names)})"


def main() -> int:
    started = time.monotonic()
    base = fitted_figures()
    tests = [row for path in TEST_CSVS for row in load_figures(path)]
    for title, figures in (("the fitted sets", base), (f"the fitted sets and {_test_sets()}", base + tests)):
        built = [case for case in cases(figures)[0] if case.row.get("framework") == PYTORCH]
        print(f"\n== {title}: {len(built)} PyTorch figures, each source held out")
        summary("as shipped", held_out(built, {1.0: built}, (0.0,)))
        shared = held_out(
            built, {share: [with_share(case, share) for case in built] for share in SHARES}, (0.0,)
        )
        summary("network share", shared)
        print(f"    share chosen per held-out source: {shared.groupby('source')['grid'].first().to_dict()}")
        jitter = held_out(built, {1.0: built}, EXTRA_JITTER)
        summary("extra jitter", jitter)
        chosen = jitter.groupby("source")["extra_jitter"].first().to_dict()
        print(f"    extra chosen per held-out source: {chosen}")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    bench_parser(__doc__).parse_args()  # no options: --help, or a refusal of any argument
    raise SystemExit(main())
