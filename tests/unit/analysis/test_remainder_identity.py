"""compute + interconnect + network + cpu + disk + remainder = t2, whatever the noise did.

Over hundreds of noisy result documents (noisy_docs.noisy_result_doc: random true stalls, phase means off by
their noise, some differences negative within the noise and clamped to 0, some gaps and not separable data
sets): in the breakdown dict, for documents written before the remainder existed (computed on the fly), and
in the figures format_breakdown prints.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from noisy_docs import noisy_result_doc

from stash_core.analysis.stalls import (
    REMAINDER,
    STALLS,
    PhaseTime,
    breakdown,
    remainder_of,
    stall_resolved,
    with_remainder,
)
from stash_core.cli.report import LABELS, format_breakdown

SEEDS = range(400)
HEAD = re.compile(r"^iteration (?P<seconds>\d+\.(?P<decimals>\d+)) s")
FIGURE = re.compile(r"^  (?P<label>\S.*?)\s+(?P<seconds>-?\d+\.\d+) s\s+(?P<share>[<>]?-?\d+\.\d+)%")
# A share within 0.05 points of an end is printed as the side of it it is on (report.figure): its value here.
AT_AN_END = {"<0.1": 0.0, ">-0.1": 0.0, ">99.9": 100.0, "<100.1": 100.0}


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return [noisy_result_doc(seed) for seed in SEEDS]


@pytest.fixture(scope="module")
def legacy_docs() -> list[dict]:
    return [noisy_result_doc(seed, legacy=True) for seed in SEEDS]


def named_seconds(breakdown_dict: dict) -> list[float]:
    return [s["seconds"] for s in breakdown_dict["stalls"].values() if s["seconds"] is not None]


def test_stalls_and_remainder_add_up_to_t2_and_shares_to_one(docs: list[dict]) -> None:
    seen: Counter[str] = Counter()
    for doc in docs:
        result = doc["breakdown"]
        remainder = result[REMAINDER]
        iteration_s = result["iteration_s"]
        assert math.fsum([*named_seconds(result), remainder["seconds"]]) == pytest.approx(
            iteration_s, rel=1e-12
        )
        shares = [s["share"] for s in result["stalls"].values() if s["share"] is not None]
        assert math.fsum([*shares, remainder["share"]]) == pytest.approx(1.0, abs=1e-12)
        assert result["unattributed_s"] == remainder["seconds"]
        assert result["unattributed_ci95_s"] == remainder["ci95_s"] >= 0
        # The parts say what the remainder holds, and add up to it.
        assert math.fsum(p["seconds"] for p in remainder["parts"]) == pytest.approx(
            remainder["seconds"], abs=1e-12 * iteration_s
        )
        if not remainder["parts"]:
            assert remainder["seconds"] == 0.0 and remainder["status"] == "none"
        statuses = {s["status"] for s in result["stalls"].values()}
        seen.update(statuses | {p["kind"] for p in remainder["parts"]})
        seen["negative remainder"] += remainder["seconds"] < 0
        seen["not resolved"] += any(stall_resolved(s) is False for s in result["stalls"].values())
    # The documents reach every case the identity must survive.
    for case, least in [("clamped_zero", 40), ("within_noise", 40), ("negative remainder", 40), ("gap", 5),
                        ("not_separable", 5), ("not resolved", 100), ("measured", 300)]:  # fmt: skip
        assert seen[case] >= least, (case, seen)


def test_documents_from_before_the_remainder_get_it_on_the_fly(
    docs: list[dict], legacy_docs: list[dict]
) -> None:
    for doc, legacy in zip(docs, legacy_docs, strict=True):
        old = legacy["breakdown"]
        assert REMAINDER not in old and "unattributed_s" not in old
        remainder = remainder_of(old)
        filled = with_remainder(old)
        assert math.fsum([*named_seconds(old), remainder["seconds"]]) == pytest.approx(
            old["iteration_s"], rel=1e-12
        )
        assert remainder["seconds"] == pytest.approx(doc["breakdown"][REMAINDER]["seconds"], abs=1e-12)
        assert filled["unattributed_s"] == remainder["seconds"] and REMAINDER not in old
        if remainder["seconds"] != 0.0:
            assert remainder["estimated"] and remainder["ci95_s"] is not None and remainder["ci95_s"] > 0
        # A current document's remainder is its own, not an estimate.
        assert remainder_of(doc["breakdown"])["estimated"] is False


def printed(text: str) -> tuple[float, int, list[re.Match]]:
    lines = text.splitlines()
    head = HEAD.match(lines[0])
    assert head, lines[0]
    figures = [match for line in lines[1:] if (match := FIGURE.match(line))]
    return float(head["seconds"]), len(head["decimals"]), figures


@pytest.mark.parametrize("legacy", [False, True], ids=["current", "legacy"])
def test_printed_figures_add_up_to_the_printed_iteration_time(legacy: bool) -> None:
    for seed in SEEDS:
        result = noisy_result_doc(seed, legacy=legacy)["breakdown"]
        text = format_breakdown(result, 2000)
        iteration_s, decimals, figures = printed(text)
        # Each printed figure is rounded to `decimals` (so is the head) and each share to 0.1%.
        seconds = math.fsum(float(m["seconds"]) for m in figures)
        assert abs(seconds - iteration_s) <= (len(figures) + 1) * 0.5 * 10**-decimals + 1e-12, text
        shares = math.fsum(AT_AN_END[m["share"]] if m["share"][0] in "<>" else float(m["share"])
                           for m in figures)  # fmt: skip
        assert abs(shares - 100.0) <= len(figures) * 0.05 + 1e-9, text
        remainder = remainder_of(result)
        labels = [m["label"] for m in figures]
        assert ("not separated" in labels) == (remainder["status"] != "none"), text
        for name in STALLS:
            stall = result["stalls"][name]
            line = next((line for line in text.splitlines() if line.startswith(f"  {LABELS[name]} ")), None)
            if stall["status"] == "not_measured":
                assert line is None
            elif stall_resolved(stall) is False:
                assert "not resolved" in line, text
            elif stall["seconds"] is not None:
                assert "not resolved" not in line, text
        assert ("to resolve:" in text) == any(stall_resolved(s) is False for s in result["stalls"].values())


def test_a_within_noise_stall_says_not_resolved_instead_of_zero_plus_minus() -> None:
    times = {"R0": PhaseTime(0.200, 0.002), "R1": PhaseTime(0.199, 2.0), "R3": PhaseTime(0.26, 0.003)}
    text = format_breakdown(breakdown(times, ["R0", "R1", "R3"], None))
    interconnect = next(line for line in text.splitlines() if line.startswith("  interconnect"))
    assert "not resolved" in interconnect and "within the noise" in interconnect
    assert "0.000 s" not in interconnect and not FIGURE.match(interconnect)
    # CPU against R1 is 0.061 s with an interval of 2 s: printed, counted, and marked as not resolved.
    cpu = next(line for line in text.splitlines() if line.startswith("  CPU prep"))
    assert FIGURE.match(cpu) and "not resolved: ± 2.000 s is wider than the value" in cpu
    hint = text.splitlines()[-1]
    assert hint.startswith("not resolved: interconnect, CPU prep")
    assert "--iterations" in hint and "--target-ci" in hint and "quieter machine" in hint
    assert "not resolved" not in next(line for line in text.splitlines() if line.startswith("  compute"))


def test_the_remainder_interval_is_that_of_its_combination_of_runs() -> None:
    """Monte Carlo: redraw every run's mean with its own noise; the remainder's 95% interval must match."""
    times = {"R0": PhaseTime(0.2, 0.01), "R1": PhaseTime(0.199, 0.02), "R1n": PhaseTime(0.3, 0.01),
             "R3": PhaseTime(0.29, 0.03), "R2": PhaseTime(0.4, 0.03)}  # fmt: skip
    chain = ["R0", "R1", "R1n", "R3", "R2"]
    result = breakdown(times, chain, None)
    assert [result["stalls"][s]["status"] for s in ("interconnect", "cpu")] == ["clamped_zero"] * 2
    rng = np.random.default_rng(7)
    draws = {p: rng.normal(t.mean_s, t.ci95_s / 1.96, 20_000) for p, t in times.items()}
    # Remainder = t2 - compute - network - disk = (t1 - t0) + (t3 - t1n) with these stalls clamped.
    remainder = draws["R1"] - draws["R0"] + draws["R3"] - draws["R1n"]
    assert result[REMAINDER]["seconds"] == pytest.approx(0.199 - 0.2 + 0.29 - 0.3)
    assert result[REMAINDER]["ci95_s"] == pytest.approx(1.96 * remainder.std(), rel=0.03)


def test_a_stored_run_s_remainder_names_the_stall_that_could_not_be_separated() -> None:
    """The profile said "disk +0.0797 s (not separable)"; stash show and the page, which rebuild the
    remainder from the stored rows, said "+0.0797 s of runs that were not split into named stalls"."""
    from stash_core.analysis.stalls import remainder_of

    stored = {
        "iteration_s": 0.3,
        "stalls": {"compute": {"seconds": 0.2, "ci95_s": 0.01, "status": "measured"},
                   "cpu": {"seconds": 0.05, "ci95_s": 0.01, "status": "measured"},
                   "disk": {"seconds": None, "ci95_s": None, "status": "not_separable"}},
    }  # fmt: skip
    remainder = remainder_of(stored)
    assert remainder["seconds"] == pytest.approx(0.05)
    assert ": disk +0.0500 s (not separable)" in remainder["note"]


def test_a_remainder_part_under_a_millisecond_keeps_two_significant_figures() -> None:
    """A script's CPU and disk of -34 us were said as "cpu and disk -0.0000 s (not separable)"."""
    from stash_core.analysis.stalls import remainder_of

    stored = {
        "iteration_s": 0.000918,
        "stalls": {"compute": {"seconds": 0.000952, "ci95_s": 0.00003, "status": "measured"},
                   "disk": {"seconds": None, "ci95_s": None, "status": "not_separable"}},
    }  # fmt: skip
    assert ": disk -0.000034 s (not separable)" in remainder_of(stored)["note"]


def test_seconds_under_a_millisecond_keep_two_figures_down_to_a_nanosecond() -> None:
    from stash_core.analysis.stalls import signed_seconds

    assert [signed_seconds(s) for s in (0.0123, -0.000034, 0.0)] == ["+0.0123", "-0.000034", "+0.0000"]
    assert signed_seconds(0.00003, "") == "0.000030"  # an interval: no sign
    assert signed_seconds(1e-17) == signed_seconds(5e-324) == "+0.000000000"  # not hundreds of zeros


def test_a_stored_run_without_r0_says_its_remainder_is_the_first_run_measured() -> None:
    """The profile said "R1 +0.3000 s (the first run measured, with no R0 to split it)"; `stash show` and the
    page, rebuilding the remainder from the stored rows, said "runs that were not split into named stalls"."""
    from stash_core.analysis.stalls import remainder_of

    stored = {
        "iteration_s": 0.4,
        "stalls": {"compute": {"seconds": None, "ci95_s": None, "status": "not_measured"},
                   "interconnect": {"seconds": None, "ci95_s": None, "status": "not_measured"},
                   "cpu": {"seconds": 0.1, "ci95_s": 0.01, "status": "measured"}},
    }  # fmt: skip
    remainder = remainder_of(stored)
    assert remainder["seconds"] == pytest.approx(0.3)
    assert ": +0.3000 s of the first run measured, with no R0 to split it" in remainder["note"]


def test_a_stored_script_run_names_its_not_separable_parts_as_the_profile_did() -> None:
    """A script without a process group or a DataLoader: the profile said "cpu and disk +0.00059 s (not
    separable); interconnect +0.0011 s (not separable)", and `stash show`, from the stored rows, "interconnect
    and cpu and disk +0.0017 s". Each not-separable stall now keeps its runs' difference as its raw_s."""
    from stash_core.analysis.stalls import PhaseTime, breakdown, remainder_of

    means_s = {"R0": 0.0018, "R1": 0.0029, "R2": 0.0035}
    times = {run: PhaseTime(mean_s, 0.0001) for run, mean_s in means_s.items()}
    apart = {"interconnect": "the script starts no process group", "cpu": "no DataLoader",
             "disk": "no DataLoader"}  # fmt: skip
    profiled = breakdown(times, ["R0", "R1", "R3", "R2"], None, apart)  # no R3: the script has no loader
    said = profiled[REMAINDER]["note"]
    assert "cpu and disk +0.00060 s (not separable); interconnect +0.0011 s (not separable)" in said
    # the store keeps the stall rows (their raw_s), not the remainder's parts
    stored = {"iteration_s": profiled["iteration_s"], "unattributed_ci95_s": profiled[REMAINDER]["ci95_s"],
              "stalls": {name: {key: entry[key] for key in ("seconds", "ci95_s", "status", "note", "raw_s")}
                         for name, entry in profiled["stalls"].items()}}  # fmt: skip
    assert remainder_of(stored)["note"] == said
    assert profiled["stalls"]["disk"]["raw_s"] == pytest.approx(0.0006)  # the gap's last stall holds it
    assert profiled["stalls"]["cpu"]["raw_s"] is None and profiled["stalls"]["cpu"]["seconds"] is None
