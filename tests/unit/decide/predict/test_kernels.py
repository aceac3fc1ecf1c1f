"""The per-kernel model on NeuSight's measured kernels: shape formulas, the fit, the held-out split."""

import numpy as np
import pandas as pd
import pytest

import stash_core.decide.predict.kernel_table as T
import stash_core.decide.predict.kernels as K
from stash_core.catalog.accelerators import find_accelerator

DEVICES = ("Tesla T4", "NVIDIA L4", "NVIDIA A100-PCIE-40GB", "Tesla V100-PCIE-32GB")


def test_shape_formulas_on_hand_counted_shapes():
    rows = pd.DataFrame([
        {"op": "bmm", "B": 2, "M": 130, "N": 64, "K": 256},
        {"op": "linear", "B": 1, "M": 300, "N": 512, "K": 1000},
        {"op": "conv", "B": 2, "ci": 3, "co": 64, "ks": 3, "s": 32, "stride": 1, "pad": 1},
        {"op": "add", "B": 10, "H": 100},
        {"op": "relu", "B": 10, "H": 100},
        {"op": "ln", "B": 4, "H": 8},
        {"op": "softmax", "B": 4, "H": 8},
    ])  # fmt: skip
    cost = T.shape_cost(rows)
    # bmm A[2,130,64] x B[2,64,256]: 2*2*130*64*256; 4*2*(130*64 + 64*256 + 130*256); 2 * 2 * 2 tiles
    assert cost.loc[0].tolist()[:3] == [8_519_680, 463_872, 8]
    # Linear(512, 1000) on [1,300,512]: matmul + bias; input, weight, bias, output; 3 x 8 tiles
    assert cost.loc[1].tolist()[:3] == [307_500_000, 3_866_400, 24]
    # Conv2d(3, 64, 3, pad 1) on [2,3,32,32]: output 32x32; implicit GEMM 2048 x 64 -> 16 x 1 tiles
    assert cost.loc[2].tolist()[:3] == [7_077_888, 555_776, 16]
    assert cost.loc[3, "bytes"] == 4 * 1000 * 3 and cost.loc[4, "bytes"] == 4 * 1000 * 2
    assert cost.loc[5, "bytes"] == 4 * (2 * 32 + 2 * 8 + 2 * 4) and cost.loc[6, "bytes"] == 4 * 2 * 32
    assert cost.loc[3:, "tiles"].eq(0).all()


def test_every_device_maps_to_an_accelerator_row():
    for device in K.NEUSIGHT_TRAIN + K.NEUSIGHT_TEST:
        accelerator = K.accelerator_for(device)
        assert accelerator is not None and accelerator.sm_count and accelerator.boost_mhz
    assert K.accelerator_for("Tesla P4").sm_count == 20


def _synthetic(op_class: str, theta: dict, n: int = 250, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for device in DEVICES:
        g = K._gpu_features([K.accelerator_for(device)] * n)
        if op_class in K.GEMM_CLASSES:
            m, nn, k = (rng.integers(16, 4096, n).astype(float) for _ in range(3))
            frame = pd.DataFrame({"op": "linear", "B": 1.0, "M": m, "N": nn, "K": k})
        else:
            frame = pd.DataFrame(
                {"op": "add", "B": rng.integers(1, 20000, n) * 1.0, "H": rng.integers(1, 4096, n) * 1.0}
            )
        frame = pd.concat([frame, T.shape_cost(frame)], axis=1)
        seconds = K._seconds(op_class, theta, frame["flops"].to_numpy(), frame["bytes"].to_numpy(),
                             frame["tiles"].to_numpy(), g, frame["outputs"].to_numpy())  # fmt: skip
        parts.append(frame.assign(device=device, gpu=K.accelerator_for(device).name, latency_s=seconds,
                                  op_class=op_class, split="train"))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def test_fit_recovers_the_parameters_synthetic_kernels_were_made_with():
    truth = {"m_max": 0.7, "b_half": 5e4, "launch_s": 8e-6}
    fitted = K._fit_class("elementwise", _synthetic("elementwise", truth))
    for name, value in truth.items():
        assert fitted[name] == pytest.approx(value, rel=0.02)


def test_gemm_fit_reproduces_synthetic_gemm_times():
    truth = dict(K.START, c_max=0.85, w=0.4, fill=0.5, f_half=5e6, boost_share=0.3, m_max=0.6, launch_s=6e-6)
    truth.update(K.FIXED)
    frame = _synthetic("linear", truth, n=150)
    params = K.KernelParams({"linear": K._fit_class("linear", frame)})
    ratio = K.predict_frame(frame.assign(op_class="linear"), params) / frame["latency_s"]
    assert np.abs(np.log(ratio)).max() < 0.02
    assert params.values["linear"]["c_max"] == pytest.approx(0.85, rel=0.05)


def test_the_held_out_gpu_never_trains_its_own_fit(monkeypatch):
    frame = _synthetic("elementwise", {"m_max": 0.7, "b_half": 5e4, "launch_s": 8e-6}, n=30)
    seen = []
    real_fit = K.fit

    def spy(train, classes=K.CLASSES):
        seen.append(set(train["gpu"]))
        return real_fit(train, classes)

    monkeypatch.setattr(K, "fit", spy)
    held = K.leave_one_gpu_out(frame)
    assert len(seen) == len(DEVICES)
    for gpu, trained_on in zip(sorted(frame["gpu"].unique()), seen, strict=True):
        assert gpu not in trained_on and len(trained_on) == len(DEVICES) - 1
        assert set(held[held["held_out"] == gpu]["gpu"]) == {gpu}
    assert held["ape"].max() < 0.05  # one rule made every GPU's kernels: the held-out GPU is predicted


def test_predictions_are_positive_and_grow_with_flops():
    theta = dict(K.START, **K.FIXED)
    params = K.KernelParams({"bmm": theta, "elementwise": {"m_max": 0.7, "b_half": 5e4, "launch_s": 8e-6}})
    h100 = find_accelerator("H100")
    times = [K.predict_kernel_s("bmm", f, 1e6, 64, h100, params) for f in np.logspace(6, 13, 30)]
    assert min(times) > 0 and np.all(np.diff(times) >= 0) and times[-1] > 10 * times[0]
    assert K.predict_kernel_s("elementwise", 1e3, 1e9, 0, h100, params) > 1e9 / (h100.memory_gbs * 1e9)
    again = K.KernelParams.from_json(params.to_json())
    assert again == params


def test_the_compact_copy_loads_with_its_derived_columns():
    frame = T.load_kernels()
    assert {"op_class", "gpu", "flops", "bytes", "tiles", "latency_s"} <= set(frame.columns)
    assert frame["latency_s"].gt(0).all() and frame["gpu"].nunique() == 8
