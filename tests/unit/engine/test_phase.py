"""One launch's record: what the worker's result says goes into the record and the warnings."""

from __future__ import annotations

from stash_core.engine.phase import fill_record
from stash_core.spec import ProfileSpec


def _result(bad_files: int | None) -> dict:
    samples = {"iteration_s": [0.1, 0.11, 0.1, 0.12], "data_s": [0.01] * 4}
    return {"samples": samples, "warmup_iterations": 2, "rank_skew_s": 0.0, "stop_reason": "fixed",
            "bad_files": bad_files}  # fmt: skip


def test_reads_of_images_that_could_not_be_decoded_in_the_run_are_said() -> None:
    spec = ProfileSpec(model="resnet10", batch_size=4, iterations="4")
    warnings: list[str] = []
    fill_record({"name": "R2", "nodes": 1}, _result(3), spec, warnings)
    assert warnings == [
        "R2: 3 read(s) of images that could not be decoded were replaced by other samples (files changed "
        "or unreadable since the data set was checked)"
    ]
    for clean in (0, None):
        warnings = []
        fill_record({"name": "R3", "nodes": 1}, _result(clean), spec, warnings)
        assert warnings == []
