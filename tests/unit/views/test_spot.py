"""The Spot page's frames: the window search per worker count, whatever the bounds of eqs. 15-16."""

from __future__ import annotations

import pytest
from support import REPO

from stash_core.spot import InstanceOffer, Worker, Workload, plan_spot_cluster, plan_table
from stash_core.spot.model import MAX_WORKER_BOUND
from stash_core.views.spot import candidates_frame, window_search

# eq. 9 with a1 = 1e-6, b1 = -1: the parameter server never saturates, eq. 15 is capped at MAX_WORKER_BOUND
UNCONTENDED = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=1e-6, contention_b1=-1.0,
                       loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
A = Worker("A", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)


class _Candidates(list):
    """The planner's candidates, counting the passes over them (the search must not scan them per count)."""

    passes = 0

    def __iter__(self):
        type(self).passes += 1
        assert type(self).passes <= 3, "the candidates scanned once per worker count up to the bound"
        return super().__iter__()


def test_the_window_search_of_an_uncapped_bound_lists_the_counts_with_candidates_in_one_pass():
    result = plan_spot_cluster([InstanceOffer(A, 3)], UNCONTENDED, 0.1, 1e6, ps_Bps=1e9, pcie_Bps=1e10)
    assert result.bounds == (1, MAX_WORKER_BOUND)
    result.candidates = _Candidates(result.candidates)
    frame = window_search(result)
    assert list(frame["workers"]) == [1, 2, 3] and list(frame["windows"]) == [3, 2, 1]


def test_candidates_outside_the_loss_model_have_blank_time_and_cost_not_inf():
    shrinking = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                         loss_g=(0.0, -0.1, 10.0, 1.0, 0.0))  # fmt: skip
    big = Worker("BIG", gpus=1, compute_s=1.0, batch=200, usd_per_h=1.0)  # g2 b + g3 = -10: outside
    result = plan_spot_cluster([InstanceOffer(A, 1), InstanceOffer(big, 1)], shrinking, 0.1, 1e6, ps_Bps=1e9,
                               pcie_Bps=1e10)  # fmt: skip
    frame = candidates_frame(plan_table(result))
    outside = frame[frame["outside_loss_model"]]
    assert len(outside) and outside[["training_s", "cost_usd", "iterations"]].isna().all().all()
    assert frame["workers"].dtype.kind == "i" and frame["usd_per_h"].notna().all()
    inside = frame[~frame["outside_loss_model"]]
    assert len(inside) and inside["training_s"].notna().all()
    windows = window_search(result).set_index("workers")  # A + BIG, b_w 116: outside too, no fastest
    assert windows.loc[1, "fastest"] == "1 x A"
    assert windows.loc[2, "fastest"] == "none: outside the loss model"


def test_a_workload_file_with_a_byte_order_mark_is_read_as_stash_spot_reads_it():
    from stash_core.views.spot import workload_names, workload_text

    text = workload_text(b"\xef\xbb\xbf" + (REPO / "examples" / "workload.json").read_bytes(), "w.json")
    assert "g3.8xlarge" in workload_names(text)


def test_a_huge_workload_is_refused_by_its_name_not_a_temporary_files():
    """A 150 MB upload was refused as "/tmp/stash-spot-l5rykhst/workload.json: workload file is ..."."""
    from stash_core.errors import UsageError
    from stash_core.views.spot import workload_names, workload_text

    huge = b'{"pad": "' + b"x" * (17 * 2**20) + b'"}'
    with pytest.raises(UsageError, match=r"^big\.json is 17,825,803 bytes; at most 16,777,216 are read"):
        workload_text(huge, "big.json")
    with pytest.raises(UsageError, match=r"^the workload is 17,825,803 bytes; at most 16,777,216 are read$"):
        workload_names(huge.decode())


def test_the_pages_simulation_leaves_an_instance_with_a_spot_price_alone_out_of_on_demand(tmp_path):
    """The Spot page's Simulate refused the comparison for an instance with only a spot price."""
    import json

    from stash_core.cli.main import main
    from stash_core.views.spot import simulation

    db = tmp_path / "r.duckdb"
    assert main(["instances", "add", "spotonly", "--accelerator", "NVIDIA V100 16 GB",
                 "--accelerator-count", "1", "--spot-usd-per-h", "0.9", "--db", str(db)]) == 0  # fmt: skip
    workload = json.loads((REPO / "examples" / "workload.json").read_text())
    workload["compute_s"]["spotonly"] = workload["compute_s"]["g3.8xlarge"]
    frame = simulation(db, json.dumps(workload), (("g3.8xlarge", 3), ("spotonly", 4)), 0.8, 3000.0, 1.0, 5)
    assert list(frame["strategy"]) == ["spotDNN", "no contention", "on-demand"]
    assert "spotonly" not in frame.set_index("strategy").loc["on-demand", "first_plan"]
    assert "on-demand: planned without spotonly: no on-demand price" in frame.attrs["notes"][-1]


def test_the_on_demand_plan_beside_a_spot_plan_with_a_revocation_overhead_is_made(tmp_path):
    """The page plans on-demand beside spot with the same options: a revocation overhead, which an on-demand
    plan refuses, is for the spot plan only."""
    from stash_core.views.spot import plan

    text = (REPO / "examples" / "workload.json").read_text()
    answer = plan(tmp_path / "r.duckdb", text, (("g3.8xlarge", 5), ("g3.16xlarge", 3)), 0.8, 3000,
                  revocation_s=60.0)  # fmt: skip
    assert answer.spot is not None and answer.on_demand is not None, answer.on_demand_reason
    assert answer.on_demand.best.cost_usd > answer.spot.best.cost_usd


def test_an_uploaded_workload_of_another_type_is_refused_by_name() -> None:
    """A .csv read as "the workload is not valid JSON (line 1: ...)", naming neither the file nor its type."""
    from stash_core.errors import UsageError
    from stash_core.views.spot import workload_text

    said = r"^losses\.csv: unsupported file type \.csv; a workload file is \.json$"
    with pytest.raises(UsageError, match=said):
        workload_text(b"iteration,loss\n1,2.0\n", "losses.csv")
