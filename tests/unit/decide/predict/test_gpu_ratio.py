"""The GPU ratio for unknown operators: matrix-peak and bandwidth ratios blended by a fitted share."""

import pytest

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.calibration import Point
from stash_core.decide.predict.gpu_ratio import fit_share, gpu_ratio, ratio_errors

V100, A100 = find_accelerator("V100"), find_accelerator("A100")


def test_the_ratio_blends_peaks_and_bandwidths_geometrically():
    peaks = V100.fp32_tflops / A100.fp32_tflops
    bandwidths = V100.memory_gbs / A100.memory_gbs
    assert gpu_ratio(V100.name, A100.name, "fp32", 1.0) == pytest.approx(peaks)
    assert gpu_ratio(V100.name, A100.name, "fp32", 0.0) == pytest.approx(bandwidths)
    assert gpu_ratio(V100.name, A100.name, "fp32", 0.5) == pytest.approx((peaks * bandwidths) ** 0.5)
    with pytest.raises(ValueError, match="no accelerator table entry"):
        gpu_ratio("no such gpu", A100.name, "fp32", 0.5)


def test_the_fit_finds_the_share_the_pairs_were_made_with():
    def pair(model: str, share: float) -> tuple[Point, Point]:
        base = Point(model, 32, V100.name, "fp32", 0.1, "s")
        target_s = 0.1 * gpu_ratio(V100.name, A100.name, "fp32", share)
        return base, Point(model, 32, A100.name, "fp32", target_s, "s")

    pairs = [pair("resnet50", 0.3), pair("bert_base", 0.3)]
    assert fit_share(pairs) == pytest.approx(0.3)
    assert max(ratio_errors(pairs, 0.3)) == pytest.approx(0.0, abs=1e-12)
    assert min(ratio_errors(pairs, 1.0)) > 0.01  # the peak ratio alone misses them
