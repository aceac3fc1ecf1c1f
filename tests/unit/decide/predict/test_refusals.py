"""The lines of configurations not predicted, summed up when none was: by the reason they share, else by the
instances refused (not the lines: recommend writes one per count) with the first line's reason."""

from __future__ import annotations

from stash_core.decide.predict.refusals import nothing_predicted, refusal_json


def test_lines_of_one_reason_are_said_by_that_reason() -> None:
    lines = [f"{count} x p3.8xlarge: an epoch of 40 samples over {4 * count} workers gives each fewer than "
             "one batch of 32: no full step" for count in (1, 2)]  # fmt: skip
    assert nothing_predicted(lines).endswith(": no full step")
    fits = ["g5.xlarge: does not fit - batch 2048 needs 164 GiB", "p3.2xlarge: does not fit - batch 2048"]
    assert nothing_predicted(fits) == "the batch does not fit the memory of any GPU considered"


def test_mixed_reasons_count_instances_not_lines_and_give_the_first() -> None:
    lines = ["1 x box: no network bandwidth", "2 x box: no network bandwidth", "gpuless: no entry for a GPU"]
    said = nothing_predicted(lines)
    assert said == "2 instance(s) refused in 3 configurations; the first: 1 x box: no network bandwidth"
    assert nothing_predicted(["box: no price"]) == "1 instance(s) refused; the first: box: no price"


def test_a_refusal_in_json_names_its_instance_and_configuration() -> None:
    assert refusal_json("2-4 x box: no network") == {
        "instance": "box", "configuration": "2-4 x box", "reason": "no network",
    }  # fmt: skip
