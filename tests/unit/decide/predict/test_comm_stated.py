"""The stated communication error: a percentile of the held-out errors chosen so that a job never seen (a
source's model) is covered 80% of the time on average, each counted once, and each figure checked against its
scope's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stash_core.decide.predict.comm_stated import (
    LEVELS,
    UNVALIDATED_FACTOR,
    class_errors,
    codebase_level,
    coverage,
    coverage_by_codebase,
    covered,
    stated_at,
    stated_errors,
)


def _frame(errors_by_source: dict[str, list[float]], nodes: int = 1, model: str = "m") -> pd.DataFrame:
    rows = [
        {"source_id": source, "model": model, "framework": "pytorch", "nodes": nodes, "step_error": error}
        for source, errors in errors_by_source.items() for error in errors
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_each_figure_is_checked_against_its_scopes_error_and_none_stated_covers_nothing():
    frame = pd.DataFrame({"nodes": [1, 1, 2, 2], "step_error": [0.04, -0.06, 0.07, 0.09]})
    stated = {"one machine": 0.05, "several machines": 0.08}
    assert covered(frame, stated).tolist() == [True, False, True, False]
    assert coverage(frame, stated) == {"one machine": 0.5, "several machines": 0.5}
    assert not covered(frame, {"one machine": None, "several machines": None}).any()
    # as a prediction shows it: a class's own error where wider, never narrower than its scope's
    frame["link_class"] = ["pcie_gen3", "pcie_gen3", "nvswitch", "pcie_gen3"]
    by_class = {"pcie_gen3": 0.37, "nvswitch": 0.01}
    assert covered(frame, stated, by_class).tolist() == [True, True, True, True]
    assert coverage(frame, stated, by_class) == {"one machine": 1.0, "several machines": 1.0}
    # where its scope states none, a class states none either (as a prediction shows it: unvalidated)
    assert not covered(frame, {"one machine": None, "several machines": None}, by_class).any()


def test_a_scope_with_too_few_figures_takes_one_machines_error_wider():
    frame = pd.concat([_frame({"a": [0.01 * k for k in range(1, 11)]}), _frame({"a": [0.5]}, nodes=2)])
    stated, counts = stated_at(frame, 0.8)
    assert counts == {"one machine": 10, "several machines": 1}
    assert stated["one machine"] == pytest.approx(0.09)  # the 80th percentile, a figure that exists
    assert stated["several machines"] == pytest.approx(0.09 * UNVALIDATED_FACTOR)


def test_the_percentile_is_the_lowest_at_which_jobs_never_seen_are_covered_80_percent_on_average():
    rng = np.random.default_rng(3)
    tight = {f"t{k}": list(rng.normal(0, 0.02, 200)) for k in range(3)}  # many figures, small errors
    wide = {"w": list(rng.normal(0, 0.08, 20))}  # few figures, large errors
    frame = _frame({**tight, **wide})
    pooled_80 = float(np.quantile(np.abs(frame["step_error"]), 0.8))
    assert coverage(_frame(wide), {"one machine": pooled_80})["one machine"] < 0.5  # pooled 80th misses it
    stated, _, level = stated_errors(frame)
    assert level == codebase_level(frame) and level in LEVELS
    assert coverage_by_codebase(frame, level)["covered"].mean() >= 0.8
    if level > LEVELS[0]:
        lower = LEVELS[LEVELS.index(level) - 1]
        assert coverage_by_codebase(frame, lower)["covered"].mean() < 0.8
    assert stated["one machine"] > pooled_80


def test_a_codebase_is_one_sources_one_model_and_each_counts_once():
    frame = pd.concat([
        _frame({"s": [0.01] * 50}, model="resnet"), _frame({"s": [0.3] * 2}, model="bart"),
        _frame({"t": [0.02] * 5}, model="resnet"),
    ])  # fmt: skip
    by = coverage_by_codebase(frame, 0.8).set_index("codebase")
    assert list(by.index) == ["s/bart", "s/resnet", "t/resnet"]
    assert by.loc["s/bart", "covered"] == 0.0 and by.loc["s/bart", "figures"] == 2
    assert by.loc["s/resnet", "covered"] == 1.0


def test_a_class_whose_own_figures_run_wider_states_its_own_error_on_one_machine():
    wide = _frame({"a": [0.3] * 5, "b": [0.3] * 5}).assign(link_class="pcie_gen3")
    narrow = _frame({"c": [0.01] * 20, "d": [0.01] * 20}).assign(link_class="nvswitch_h100")
    lone = _frame({"e": [0.5] * 9}).assign(link_class="pcie_gen5")  # one codebase: no class error of its own
    across = _frame({"f": [0.9] * 6}, nodes=2).assign(link_class="nvswitch_a100")  # across machines: scope's
    frame = pd.concat([wide, narrow, lone, across])
    stated = {"one machine": 0.05, "several machines": 0.2}
    assert class_errors(frame, 0.8, stated) == {"pcie_gen3": 0.3}


def test_a_prediction_states_its_classs_wider_error_and_says_so(monkeypatch):
    from stash_core.decide.predict import comm_fit, network

    summary = {
        "stated_error": {"one machine": 0.08, "several machines": 0.2}, "validated": {"one machine": True},
        "stated_error_by_class": {"pcie_gen3": 0.37},
    }  # fmt: skip
    monkeypatch.setattr(comm_fit, "load_comm_summary", lambda: summary)
    wider = "wider for pcie_gen3: from its own held-out figures on one machine"
    assert comm_fit.comm_stated_error(1, "pcie_gen3") == (0.37, True, wider)
    assert comm_fit.comm_stated_error(1, "nvswitch_h100") == (0.08, True, "")
    assert comm_fit.comm_stated_error(2, "nvswitch_h100")[0] == 0.2  # across machines: the scope's
    assert comm_fit.comm_stated_error(2, "pcie_gen3")[0] == 0.37  # never narrower than one machine's class
    note = network.comm_note("PCIe Gen3 (pcie_gen3)", 1, "pcie_gen3")
    assert "±37.0%" in note and "wider for pcie_gen3" in note


def test_a_prediction_knows_its_link_class_and_the_shipped_class_errors_are_classes_it_can_name():
    from stash_core.catalog.accelerators import find_accelerator
    from stash_core.decide.predict.collectives import load_rows
    from stash_core.decide.predict.comm_fit import load_comm_summary
    from stash_core.decide.predict.network import CommTime, comm_time

    v100, t4 = find_accelerator("V100"), find_accelerator("T4")
    nvlink = comm_time(1e8, 8, 1, "NVLink", None, v100, 0.3, 0.2)
    pcie = comm_time(1e8, 4, 1, "PCIe", None, t4, 0.3, 0.2)
    alone = comm_time(1e8, 1, 1, "PCIe", None, t4, 0.3, 0.2)
    assert isinstance(nvlink, CommTime) and nvlink.link_class == "nvlink2_cubemesh"
    assert isinstance(pcie, CommTime) and pcie.link_class == "pcie_gen3"
    assert isinstance(alone, CommTime) and alone.link_class is None
    classes = {row["interconnect_class"] for row in load_rows()}
    assert set((load_comm_summary() or {}).get("stated_error_by_class") or {}) <= classes
