"""Result documents with noisy phase times, for the tests that check that a breakdown adds up whatever the
noise did (see noisy_result_doc). Built on result_docs.result_doc."""

from __future__ import annotations

from typing import Any

import numpy as np
import result_docs

from stash_core.analysis import stalls as stall_analysis


def noisy_result_doc(seed: int, *, legacy: bool = False, **options: Any) -> dict[str, Any]:
    """A completed run (result_docs.result_doc) whose phase times are noisy and whose breakdown is
    analysis.stalls.breakdown of them, as the profiler makes it.

    True stalls are drawn at random (some tiny); each phase's mean is off by noise of its interval (0.5% to
    20% of the mean), so some differences come out negative within the noise (clamped to 0) and some
    intervals dwarf their stall; now and then a run is missing (a gap in the chain) or CPU and disk are not
    separable.
    legacy=True removes what the remainder added (`unattributed`, `unattributed_s`, `unattributed_ci95_s`,
    `raw_s`), as in a file written before it. Options go to result_doc.
    """
    rng = np.random.default_rng(seed)
    compute_s = float(rng.uniform(0.002, 0.5))
    stalls = {"compute": compute_s}
    for stall, chance in (("interconnect", 0.8), ("network", 0.3), ("cpu", 0.7)):
        if rng.random() < chance:
            stalls[stall] = float(compute_s * rng.choice([rng.uniform(0, 0.01), rng.uniform(0, 0.5)]))
    if "cpu" in stalls:
        stalls["disk"] = float(compute_s * rng.choice([rng.uniform(0, 0.01), rng.uniform(0, 0.5)]))
    doc = result_docs.result_doc(stalls=stalls, nodes=2 if "network" in stalls else 1, seed=seed, **options)
    if len(doc["phases"]) > 2 and rng.random() < 0.1:
        del doc["phases"][int(rng.integers(1, len(doc["phases"]) - 1))]  # a gap in the chain
    times = {}
    for phase in doc["phases"]:
        ci95 = phase["iteration_s"]["mean"] * float(rng.choice([0.005, 0.02, 0.2]))
        mean = phase["iteration_s"]["mean"] + float(rng.normal(0, ci95 / 1.96))
        samples = (phase.get("samples") or {}).get("iteration_s")
        # the noise moves the mean (the launches' pooled mean); a median is its samples' where it has them
        median = float(np.median(samples)) if samples else mean
        phase["iteration_s"].update(mean=mean, ci95=ci95, median=median)
        times[phase["name"]] = stall_analysis.PhaseTime(mean, ci95)
    not_separable = {"cpu": "too big", "disk": "too big"} if "cpu" in stalls and rng.random() < 0.1 else None
    chain = [phase for phase in stall_analysis.CHAIN if stall_analysis.STALL_OF_PHASE[phase] in stalls]
    per_epoch = doc["breakdown"]["iterations_per_epoch"]
    doc["breakdown"] = stall_analysis.breakdown(times, chain, per_epoch, not_separable)
    if legacy:
        for key in (stall_analysis.REMAINDER, "unattributed_ci95_s", "unattributed_s"):
            doc["breakdown"].pop(key)
        for entry in doc["breakdown"]["stalls"].values():
            entry.pop("raw_s")
    return doc
