"""Eq. 10: the largest batch per GPU from peak memory against batch size, fitted and measured."""

from __future__ import annotations

import json

import pytest

from stash_core.errors import UsageError
from stash_core.spot.batch_memory import GIB, batch_table, fit_memory, gpu_memory_gib

# peak(b) = 1 GiB + b / 64 GiB: a2 = 64 samples per GiB, b2 = -64
BATCHES = [8, 32, 128]
PEAKS = [GIB + b * GIB // 64 for b in BATCHES]


def test_hand_worked_line_gives_a2_b2_and_powers_of_two():
    fit = fit_memory(BATCHES, PEAKS)
    assert fit.a2 == pytest.approx(64.0) and fit.b2 == pytest.approx(-64.0)
    assert fit.max_rel_error < 1e-9
    assert fit.largest_batch(16) == 512  # 64 x 16 - 64 = 960 -> 2^9
    assert fit.largest_batch(8) == 256  # 448 -> 2^8
    assert fit.largest_batch(1) is None  # 0 samples fit beside the weights


@pytest.mark.parametrize(
    "batches, peaks, message",
    [
        ([8, 32, 128], [2 * GIB, GIB + GIB // 2, GIB], "does not grow"),
        ([8, 32, 128], [GIB, GIB, GIB], "grows by 0.0 MiB from batch 8 to 128, not clearly above the noise"),
        # two points always fit a line: the 10% linearity check could never fire
        ([8, 32], [GIB, 2 * GIB], "3 or more different batch sizes"),
        ([8, 8, 32], [GIB, GIB, 2 * GIB], "3 or more different batch sizes"),
        # a rise of 2 MiB over 1 GiB is the allocator's noise: a2 = 1 / slope would follow it
        ([2, 3, 4], [GIB, GIB + 2**20, GIB + 2 * 2**20], "not clearly above the noise"),
    ],
)
def test_peaks_that_cannot_give_a2_are_refused(batches, peaks, message):
    with pytest.raises(UsageError, match=message):
        fit_memory(batches, peaks)


@pytest.mark.parametrize(
    "name, gib",
    [("NVIDIA V100 16 GB", 16), ("NVIDIA A100 40 GB", 40), ("NVIDIA M60", 8), ("NVIDIA K80", 12),
     ("NVIDIA T4", 16), ("Mystery X1", None), (None, None),
     # the table's variants, NVML and SkyPilot names: an 80 GB A100 is no longer taken for the 40 GB one
     ("NVIDIA A100 SXM4 80 GB", 80), ("NVIDIA A100-SXM4-80GB", 80), ("A100-80GB", 80), ("A100", 40),
     ("NVIDIA H100 NVL", 94), ("NVIDIA H200", 141), ("NVIDIA GH200 480GB", 96), ("Tesla V100-SXM2-32GB", 32),
     ("NVIDIA A10G", 24), ("NVIDIA L4 22 GB", 24), ("Mystery 48 GB", None)],
)  # fmt: skip
def test_gpu_memory_in_gib_comes_from_the_accelerator_table(name, gib):
    assert gpu_memory_gib(name) == gib


def test_batch_table_skips_instances_without_gpus():
    fit = fit_memory(BATCHES, PEAKS)
    rows = batch_table(fit, [
        {"name": "g3.4xlarge", "accelerator": "NVIDIA M60", "accelerator_count": 1},
        {"name": "c5.large", "accelerator": None, "accelerator_count": 0},
        {"name": "x.odd", "accelerator": "Mystery X1", "accelerator_count": 2},
    ])  # fmt: skip
    assert rows == [
        # 256 is outside the batches measured (8 to 128): the fit extrapolated, and the row says so
        {"instance": "g3.4xlarge", "accelerator": "NVIDIA M60", "gpu_memory_gib": 8.0, "batch_per_gpu": 256,
         "extrapolated": True},
        {"instance": "x.odd", "accelerator": "Mystery X1", "gpu_memory_gib": None, "batch_per_gpu": None,
         "extrapolated": False},
    ]


@pytest.mark.launches
def test_a_real_tiny_model_on_the_cpu(tmp_path, capsys):
    """Three processes, one per batch: the peak grows with the batch and every catalog GPU gets a batch."""
    from stash_core.cli.main import main

    workload = tmp_path / "w.json"
    # Batches 16x apart at 64x64 (about 2.5 MiB of activations a sample: the peak grows by some 300 MiB over
    # about 200 MiB), so that activations, not the allocator's noise, set the peaks.
    status = main(["spot-memory", "--model", "resnet10", "--batches", "8,32,128", "--num-classes", "10",
                   "--input-shape", "3,64,64", "--db", str(tmp_path / "r.duckdb"),
                   "--workload", str(workload), "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 0, captured.err
    out = json.loads(captured.out)
    assert out["peak_bytes"][0] < out["peak_bytes"][-1] and out["a2"] > 0
    m60 = next(row for row in out["batch_per_gpu"] if row["instance"] == "g3.4xlarge")
    assert m60["gpu_memory_gib"] == 8 and m60["batch_per_gpu"] >= 128  # 128 fit in far less than 8 GiB
    assert json.loads(workload.read_text())["a2"] == pytest.approx(out["a2"])


CHATTY_MODEL = """
import atexit
import os

from torch import nn

atexit.register(lambda: print("bye"))


class Chatty(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))

    def forward(self, x):
        print("forward", tuple(x.shape))
        if os.environ.get("CHATTY_EXIT") and x.shape[0] == 4:
            os._exit(0)  # ends the probe before it can reply, with a success status
        return self.body(x)


def make(num_classes=10):
    return Chatty(num_classes)
"""


@pytest.mark.launches
def test_a_model_that_prints_does_not_break_the_probes_reply(tmp_path):
    """The model prints from forward and at exit, in the probe's process: the peak still comes back."""
    from stash_core.spot.batch_memory import measure_peak_bytes

    (tmp_path / "chatty.py").write_text(CHATTY_MODEL)
    peak = measure_peak_bytes(f"{tmp_path}/chatty.py:make", 4, "cpu", 10, (3, 8, 8))
    assert isinstance(peak, int) and peak >= 0


@pytest.mark.launches
def test_a_probe_without_a_reply_is_one_line_naming_model_and_batch(tmp_path, monkeypatch):
    from stash_core.spot.batch_memory import measure_peak_bytes

    (tmp_path / "chatty.py").write_text(CHATTY_MODEL)
    monkeypatch.setenv("CHATTY_EXIT", "1")
    model = f"{tmp_path}/chatty.py:make"
    with pytest.raises(UsageError) as caught:
        measure_peak_bytes(model, 4, "cpu", 10, (3, 8, 8))
    message = str(caught.value)
    assert "\n" not in message and model in message and "batch 4" in message
    assert "without a readable result" in message


@pytest.mark.launches
def test_a_json_py_in_the_current_folder_is_not_the_probes_json(tmp_path, monkeypatch):
    """The probe runs from the user's folder; a user model file is still found by its path."""
    from stash_core.spot.batch_memory import measure_peak_bytes

    ran = tmp_path / "stray-ran.txt"
    (tmp_path / "json.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nraise SystemExit(7)\n")
    (tmp_path / "chatty.py").write_text(CHATTY_MODEL)
    monkeypatch.chdir(tmp_path)
    assert measure_peak_bytes("chatty.py:make", 4, "cpu", 10, (3, 8, 8)) >= 0
    assert not ran.exists()


def test_a_batch_below_those_measured_is_flagged_too():
    batches = [64, 128, 256]
    fit = fit_memory(batches, [GIB + b * GIB // 4 for b in batches])  # a quarter GiB a sample
    [row] = batch_table(fit, [{"name": "g3.4xlarge", "accelerator": "NVIDIA M60", "accelerator_count": 1}])
    assert row["batch_per_gpu"] < min(batches) and row["extrapolated"] is True
