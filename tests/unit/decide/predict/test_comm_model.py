"""The communication model: achieved bus bandwidth by interconnect class, DDP's bucket schedule, the fit of
its two factors held out by source, and what a prediction says when a link has no figure."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from stash_core.analysis.comm import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, ring_factor
from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.collectives import (
    BusCurve,
    Fabric,
    fabric,
    intra_class,
    load_rows,
    network_curve,
    network_family,
)
from stash_core.decide.predict.comm_fit import comm_summary_is_stale, load_comm_summary
from stash_core.decide.predict.comm_validation import (
    Case,
    build_case,
    fit_params,
    leave_one_source_out,
    network_of,
    predict_case,
    skip_reason,
)
from stash_core.decide.predict.ddp_overlap import CommParams, ddp_overlap, straggler_factor
from stash_core.decide.predict.network import comm_time

MIB = 2**20
A100, H200, V100, A10G, K80 = (find_accelerator(name) for name in ("A100", "H200", "V100", "A10G", "K80"))


def test_a_curve_interpolates_in_log_size_and_keeps_the_smallest_messages_time_below_it():
    curve = BusCurve("x", (1 * MIB, 16 * MIB), (10.0, 50.0), ("s",))
    assert curve.at(4 * MIB) == pytest.approx(30.0)  # halfway in log size
    assert curve.at(64 * MIB) == 50.0
    # below 1 MiB the 1 MiB message's time: half the bytes, half the bandwidth
    assert curve.at(0.5 * MIB) == pytest.approx(5.0)


def test_every_intra_class_the_catalog_names_has_a_curve_at_ddps_bucket_sizes():
    for accelerator, link in ((A100, "NVSwitch"), (H200, "NVSwitch"), (V100, "NVLink"), (A10G, "PCIe"), (K80, "PCIe")):
        links = fabric(8, 1, link, accelerator, {})
        assert isinstance(links, Fabric), links
        assert links.intra.sizes[0] <= DDP_BUCKET_BYTES
        assert 1 < links.busbw_gbs(DDP_BUCKET_BYTES) < 500  # GB/s, what NCCL reaches, not a nominal link rate


def test_the_classes_of_the_catalogs_links():
    assert intra_class("NVSwitch", A100)[0] == "nvswitch_a100"
    assert intra_class("NVSwitch", H200)[0] == "nvswitch_h200"
    assert intra_class("NVLink", V100)[0] == "nvlink2_cubemesh"
    assert intra_class("PCIe", A10G)[0] == "pcie_gen4"
    klass, why = intra_class("", A100)
    assert klass is None and "names no GPU link" in why
    assert network_family({"network_gbps": 400, "provider": "aws"})[0] == "efa"
    assert network_family({"network_gbps": 1600, "provider": "azure"})[0] == "infiniband"
    assert network_family({"network_gbps": 25, "provider": "aws"})[0] == "tcp"


def test_across_machines_the_slower_of_the_links_and_the_nics_sets_the_rate():
    one = fabric(8, 1, "NVSwitch", A100, {"network_gbps": 400, "provider": "aws"})
    two = fabric(8, 2, "NVSwitch", A100, {"network_gbps": 400, "provider": "aws"})
    size = 25 * MIB
    efa = network_curve("efa")
    # the NICs carry the 2 machines' all-reduce (2(2-1)/2 of the bytes), the ranks' bus bandwidth 2(16-1)/16
    nics = efa.at(size) * 400 / 8 * ring_factor(16) / ring_factor(2)
    assert two.busbw_gbs(size) == pytest.approx(min(one.busbw_gbs(size), nics))
    assert two.allreduce_s(size) == pytest.approx(size * ring_factor(16) / (two.busbw_gbs(size) * 1e9))
    assert two.allreduce_s(size) > one.allreduce_s(size)


def test_more_machines_put_more_of_the_bytes_through_each_nic():
    """2(N-1)/N of the bytes cross each machine's NICs: 1 on 2 machines, 1.75 on 8, so 8 machines of one GPU
    each (the NICs alone) take 1.75 times as long as 2 for the same bytes, where the ranks' ring factor alone
    would give 1.75 / 1."""
    instance = {"network_gbps": 400, "provider": "aws"}
    size = 25 * MIB
    two, eight = fabric(1, 2, "", A100, instance), fabric(1, 8, "", A100, instance)
    assert eight.allreduce_s(size) / two.allreduce_s(size) == pytest.approx(1.75)
    two_full, eight_full = fabric(8, 2, "NVSwitch", A100, instance), fabric(8, 8, "NVSwitch", A100, instance)
    # 8 GPUs a machine: the ranks' factor barely moves (1.875 to 1.969); the NICs' moves 1 to 1.75
    assert eight_full.allreduce_s(size) / two_full.allreduce_s(size) == pytest.approx(1.75, rel=0.01)


def test_the_nic_fraction_is_of_the_machines_all_reduce():
    """A published 2-machine run whose bus bandwidth tops the NICs' line rate is not capped at the line rate:
    its NICs carried half of what a ring of the ranks would put through them."""
    for family in ("infiniband", "gpudirect-tcp", "efa"):
        curve = network_curve(family)
        assert curve is not None and max(curve.values) <= 1.0
    assert max(network_curve("infiniband").values) < 0.95  # 156 GB/s over 4 x 200 Gb/s of 2 x 4 GPUs: 0.89


def test_a_link_with_no_figure_at_ddps_message_sizes_is_refused_with_its_reason():
    b200 = replace(A100, name="NVIDIA B200 180 GB")
    refused = fabric(8, 1, "NVSwitch", b200, {})
    assert isinstance(refused, str) and "no published all-reduce figure" in refused
    missing = fabric(8, 2, "NVSwitch", A100, {"network_gbps": None})
    assert missing == "the catalog has no network bandwidth for this instance"


def test_every_bandwidth_row_names_its_source():
    rows = load_rows()
    assert len(rows) >= 100
    for row in rows:
        assert row["source_id"] and row["source"] and row["interconnect_class"]
        assert float(row["busbw_gbs"]) > 0 and float(row["message_bytes"]) > 0


def _constant(seconds_per_mib: float):
    return lambda size: seconds_per_mib * size / MIB


def test_buckets_start_when_backward_has_made_them_and_the_last_is_never_hidden():
    grad = DDP_FIRST_BUCKET_BYTES + 2 * DDP_BUCKET_BYTES  # 51 MiB: buckets of 1, 25, 25 MiB
    # 1 s of backward, 10 ms per MiB: bucket 1 ready at 1/51 s, bucket 2 at 26/51 s, bucket 3 at 1 s.
    overlap = ddp_overlap(grad, 2.0, 1.0, _constant(0.01), 8, CommParams(), 0)
    assert overlap.allreduce_s == pytest.approx(0.51)
    assert overlap.exposed_s == pytest.approx(0.25)  # the last bucket, all after backward
    assert overlap.overlapped_s == pytest.approx(0.26)
    # a slow link: the collectives queue behind each other, and more of them is left after backward
    slow = ddp_overlap(grad, 2.0, 1.0, _constant(0.05), 8, CommParams(), 0)
    # bucket 2 starts when ready (26/51 s), bucket 3 waits for it: 2 x 1.25 s after 26/51 s
    assert slow.exposed_s == pytest.approx(26 / 51 + 2.5 - 1.0)


def test_contention_and_the_slowest_rank_add_what_their_factors_say():
    grad = DDP_FIRST_BUCKET_BYTES + 2 * DDP_BUCKET_BYTES
    base = ddp_overlap(grad, 2.0, 1.0, _constant(0.01), 8, CommParams(), 900)
    loaded = ddp_overlap(grad, 2.0, 1.0, _constant(0.01), 8, CommParams(0.5, 0.02), 900)
    assert loaded.slowdown_s == pytest.approx(0.5 * base.overlapped_s)
    assert loaded.straggler_s == pytest.approx(0.02 * 2.0 * math.sqrt(2 * math.log(8)))
    assert base.copies_s == pytest.approx(4 * grad / 900e9)
    assert straggler_factor(1) == 0.0
    assert ddp_overlap(grad, 2.0, 1.0, _constant(0.01), 1, CommParams(0.5, 0.02), 900).added_s == 0.0


def test_the_network_stall_is_what_the_machines_add_to_one_machines_interconnect_stall():
    params = CommParams(0.4, 0.01)
    one = comm_time(400e6, 8, 1, "NVSwitch", 400, A100, 0.2, 0.14, "aws", params)
    two = comm_time(400e6, 8, 2, "NVSwitch", 400, A100, 0.2, 0.14, "aws", params)
    assert one.network_s == 0.0 and one.interconnect_s > 0
    assert two.interconnect_s == pytest.approx(one.interconnect_s)
    assert two.network_s > 0
    tcp = comm_time(400e6, 8, 2, "NVSwitch", 25, A100, 0.2, 0.14, "aws", params)
    assert tcp.network_s > 5 * two.network_s  # 25 Gbit/s of TCP against 400 of EFA
    single = comm_time(400e6, 1, 1, None, None, A100, 0.2, 0.14)
    assert (single.interconnect_s, single.network_s) == (0.0, 0.0)


def _row(**values) -> dict:
    row = {
        "model": "resnet50", "input_shape": "", "accelerator": "NVIDIA A100 SXM4 40 GB", "precision": "amp",
        "batch_size": "64", "gpus": "8", "nodes": "1", "samples_per_s": "8000", "samples_per_s_1gpu": "1100",
        "intra_node": "nvswitch_a100", "inter_node": "", "framework": "pytorch", "source_id": "a", "measured": "",
    }  # fmt: skip
    return {**row, **values}


def test_rows_the_allreduce_model_does_not_describe_are_left_out_with_their_reason():
    assert skip_reason(_row(measured="gradient exchange: parameter_server on the CPU")) == "parameter server"
    assert "accumulation" in skip_reason(_row(measured="pre-training, printed accumulation steps"))
    # a row that says it has none is described (one all-reduce per optimizer step)
    assert skip_reason(_row(measured="DDP over NCCL, no gradient accumulation; AdamW")) is None
    assert build_case(_row(model="not_a_zoo_model")) == "a model outside the zoo without its parameter count"
    assert "no all-reduce figure" in build_case(_row(intra_node="nvlink9_unknown"))
    assert network_of("infiniband_hdr x8") == ("infiniband", 200.0)
    assert network_of("ethernet_10g x1") == ("tcp", 10.0 / 8)


def test_a_model_outside_the_zoo_is_sized_by_its_stated_parameters_and_tokens_make_a_longer_step():
    case = build_case(_row(model="efficientnet_b0", measured="params=5288548", samples_per_s_1gpu="1000"))
    assert isinstance(case, Case)
    assert case.grad_bytes == 4 * 5288548 and case.step_1_s == pytest.approx(0.064)
    tokens = build_case(_row(model="xl", input_shape="192", measured="tokens/s; params=191700000"))
    assert tokens.step_1_s == pytest.approx(64 * 192 / 1100)


def _synthetic(source: str, params: CommParams, rows: list[dict]) -> list[Case]:
    """Cases whose published efficiency is what the model gives with `params`."""
    made = []
    for row in rows:
        case = build_case({**row, "source_id": source, "model": "m", "measured": "params=300000000"})
        published = predict_case(case, params)["predicted_efficiency"]
        throughput = published * 8 * float(row["samples_per_s_1gpu"])
        made.append(replace(case, row={**case.row, "samples_per_s": str(throughput)}))
    return made


def test_the_fit_finds_the_factors_that_made_the_figures_and_holds_each_source_out():
    shapes = [_row(samples_per_s_1gpu=str(rate), intra_node=link) for rate in (300, 1100, 4000)
              for link in ("nvswitch_a100", "pcie_gen4", "nvlink2_cubemesh")]  # fmt: skip
    made = _synthetic("a", CommParams(0.7, 0.02), shapes)
    assert fit_params(made) == CommParams(0.7, 0.02)
    other = _synthetic("b", CommParams(0.0, 0.0), shapes)
    frame, factors = leave_one_source_out(made + other, {"a", "b"})
    assert factors == {"a": CommParams(0.0, 0.0), "b": CommParams(0.7, 0.02)}
    assert (frame[frame["source_id"] == "a"]["error_points"] > 0).all()  # predicted with b's smaller factors


def test_every_source_weighs_alike_in_the_fit_whatever_its_number_of_figures():
    shapes = [_row(samples_per_s_1gpu=str(rate), intra_node=link) for rate in (300, 1100, 4000)
              for link in ("nvswitch_a100", "pcie_gen4", "nvlink2_cubemesh")]  # fmt: skip
    many = _synthetic("many", CommParams(0.0, 0.0), shapes * 5)  # 45 figures of one stack
    few = _synthetic("a", CommParams(0.7, 0.02), shapes) + _synthetic("b", CommParams(0.7, 0.02), shapes)
    assert fit_params(many + few) == CommParams(0.7, 0.02)  # two sources of three, though 18 figures of 63


def test_the_shipped_summary_is_current_and_its_stated_error_covers_most_held_out_figures():
    summary = load_comm_summary()
    assert summary is not None and not comm_summary_is_stale(), "rerun bench/comm_report.py --write"
    assert summary["stated_error"]["one machine"] is not None
    assert summary["coverage"]["one machine"] >= 0.8 and summary["validated"]["one machine"]
    assert set(summary["fitted_on"]) >= {"lambda-pytorch", "nvidia-dle-pytorch"}
    json.dumps(summary)
