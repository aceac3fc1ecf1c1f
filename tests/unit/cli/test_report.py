"""The breakdown table of `stash show`: a stored stall without a valid figure is said to be one, and the
remainder that holds its time is not explained away as another stall's noise."""

from __future__ import annotations

import re

import pytest

from stash_core.cli.report import format_breakdown


@pytest.mark.parametrize(
    ("compute_s", "said"),
    [
        (None, "compute        has no value stored"),
        (-0.5, "compute        is stored as -0.5000 s, not valid"),
    ],
)
def test_a_stall_without_a_valid_figure_is_said_and_its_time_is_not_put_on_the_disk(compute_s, said) -> None:
    breakdown = {
        "iteration_s": 0.205,
        "iteration_ci95_s": 0.015,
        "unattributed_ci95_s": 0.031,
        "stalls": {
            "compute": {"seconds": compute_s, "ci95_s": 0.016, "status": "measured"},
            "cpu": {"seconds": 0.039, "ci95_s": 0.032, "status": "measured"},
            "disk": {"seconds": 0.0, "ci95_s": 0.031, "status": "clamped_zero"},
        },
    }
    text = format_breakdown(breakdown)
    assert said in text and "-243" not in text
    remainder = next(line for line in text.splitlines() if line.startswith("      = "))
    assert (
        "the compute stall" in remainder and "disk" not in remainder and "within the noise" not in remainder
    )
    assert "not separated    0.166 s    81.0%" in text


def test_a_stored_note_stays_on_its_line() -> None:
    """A not-separable stall's stored note was printed as stored: a newline in it forged a line of `show`."""
    breakdown = {
        "iteration_s": 0.2,
        "stalls": {
            "compute": {"seconds": 0.2, "ci95_s": 0.01, "status": "measured"},
            "cpu": {"seconds": None, "status": "not_separable", "note": "x\n  disk  0.100 s  10.0%"},
            "disk": {"seconds": None, "status": "not_separable", "note": None},
        },
    }
    text = format_breakdown(breakdown)
    assert "x\\n  disk  0.100 s" in text
    assert not any(line.startswith("  disk  0.100") for line in text.splitlines())
    assert "None" not in text


@pytest.mark.parametrize(
    ("kind", "word"),
    [("image", "64 images"), ("tokens", "64 documents"), ("script", "64 samples"), (None, "64 samples")],
)
def test_an_epoch_is_counted_in_what_the_model_reads(kind, word) -> None:
    """A token model's epoch was said to be of images; a script's samples are neither."""
    breakdown = {"iteration_s": 0.2, "epoch_s": 3.2, "iterations_per_epoch": 16, "stalls": {}}
    assert f"(epoch of {word}: " in format_breakdown(breakdown, 64, kind)


def test_the_epoch_time_is_shown_with_its_interval() -> None:
    figures = {"iteration_s": 0.157, "iteration_ci95_s": 0.0141, "epoch_s": 1.256, "iterations_per_epoch": 8}
    breakdown = {**figures, "stalls": {}}
    assert "(epoch of 256 images: 1.26 s ± 0.113 s)" in format_breakdown(breakdown, 256, "image")
    breakdown["iteration_ci95_s"] = 0.001
    assert "(epoch of 8 iterations: 1.26 s ± 0.00800 s)" in format_breakdown(breakdown)
    # 52 images in 0.0656 s read "0.1 s ± 0.0095 s": the figure 52% off, its interval with more digits
    small = {"iteration_s": 0.0164, "iteration_ci95_s": 0.0024, "epoch_s": 0.0656, "iterations_per_epoch": 4}
    said = "(epoch of 52 images: 0.0656 s ± 0.00960 s)"
    assert said in format_breakdown({**small, "stalls": {}}, 52, "image")


def test_each_stall_is_given_per_epoch_too() -> None:
    """The table gave each stall per iteration and only the whole per epoch, where the product promises
    both; a stall within the noise (reported as 0, its time in "not separated") and one not separable have
    none."""
    stalls = {
        "compute": {"seconds": 0.1, "ci95_s": 0.01, "epoch_s": 0.8, "epoch_ci95_s": 0.08,
                    "status": "measured"},
        "interconnect": {"seconds": 0.05, "ci95_s": 0.005, "epoch_s": 0.4, "epoch_ci95_s": 0.04,
                         "status": "measured"},
        "cpu": {"seconds": 0.0, "ci95_s": 0.01, "epoch_s": 0.0, "raw_s": -0.002, "status": "clamped_zero"},
        "disk": {"seconds": None, "status": "not_separable", "note": "data set larger than memory"},
    }  # fmt: skip
    breakdown = {"iteration_s": 0.15, "epoch_s": 1.2, "iterations_per_epoch": 8, "stalls": stalls}
    [line] = [line for line in format_breakdown(breakdown).splitlines() if line.startswith("per epoch")]
    assert line == "per epoch (8 iterations): compute 0.800 s ± 0.0800 s, interconnect 0.400 s ± 0.0400 s"
    assert "per epoch" not in format_breakdown({**breakdown, "epoch_s": None})


def test_a_small_nonzero_interval_is_not_shown_as_zero() -> None:
    """compute 0.0020 s ± 0.0000, where the stored interval was 1.9e-5 s."""
    breakdown = {"iteration_s": 0.0108, "stalls": {"compute": {"seconds": 0.002, "ci95_s": 1.9e-5,
                                                               "status": "measured"}}}  # fmt: skip
    text = format_breakdown(breakdown)
    assert "± 0.000019" in text and not re.search(r"± 0\.0000(?!\d)", text)


def test_a_share_at_an_end_is_not_rounded_onto_it() -> None:
    """`stash show` printed 100.0% beside a measured 0.8 ms interconnect, and 0.0% for it, where the
    dashboard says >99.9% and <0.1%."""
    from stash_core.cli.report import figure

    assert figure(1.9992, 2.0, 3).split() == ["1.999", "s", ">99.9%"]
    assert figure(0.0008, 2.0, 3).split() == ["0.001", "s", "<0.1%"]
    assert figure(-0.0008, 2.0, 3).split() == ["-0.001", "s", ">-0.1%"]
    assert figure(0.18, 0.205, 3).split() == ["0.180", "s", "87.8%"]
    assert figure(2.0, 2.0, 3).split() == ["2.000", "s", "100.0%"]
    assert len(figure(0.0008, 2.0, 3)) == len(figure(0.18, 0.205, 3))  # the columns stay aligned


def test_a_script_that_ended_by_itself_is_not_advised_more_iterations() -> None:
    """An unresolved stall of a script whose loop ran out was told "more iterations per run (--iterations
    N ...)", which its own warning says cannot help: the script has no more steps."""
    cpu = {"seconds": 0.01, "ci95_s": 0.05, "status": "measured"}
    ended = "R3: the script ended by itself in 3 of its 3 launches (after 40 steps at most), so ..."
    breakdown = {"iteration_s": 0.2, "stalls": {"compute": {"seconds": 0.15, "ci95_s": 0.001,
                                                              "status": "measured"}, "cpu": cpu}}  # fmt: skip
    assert "to resolve: more iterations per run" in format_breakdown(breakdown)
    text = format_breakdown({**breakdown, "warnings": [ended]})
    assert "to resolve: a script with more to do (see its warning)" in text and "--iterations N" not in text


def test_a_reason_two_stalls_share_is_said_once() -> None:
    """A script without --data-dir said its long reason four times: on both stall lines and in a warning
    for each."""
    reason = "without --data-dir Stash cannot set the page-cache state of the files the script reads"
    breakdown = {
        "iteration_s": 0.2,
        "iteration_ci95_s": 0.004,
        "stalls": {
            "compute": {"seconds": 0.19, "ci95_s": 0.003, "status": "measured"},
            "cpu": {"seconds": None, "ci95_s": None, "status": "not_separable", "note": reason},
            "disk": {"seconds": None, "ci95_s": None, "status": "not_separable", "note": reason},
        },
        "warnings": [f"cpu and disk stalls not separable: {reason}", "disk stall not separable: other"],
    }
    text = format_breakdown(breakdown)
    assert text.count(reason) == 1
    assert "  disk fetch     not separable: as CPU prep" in text
    assert "warning: disk stall not separable: other" in text  # a reason the table does not give stays


def test_a_stall_over_the_whole_iteration_is_marked() -> None:
    """"CPU prep 0.0292 s 116.4%" of a 0.0250 s iteration was printed as any other share."""
    breakdown = {
        "iteration_s": 0.0250, "iteration_ci95_s": 0.0061, "unattributed_ci95_s": 0.0202,
        "stalls": {"compute": {"seconds": 0.0120, "ci95_s": 0.001, "status": "measured"},
                   "cpu": {"seconds": 0.0292, "ci95_s": 0.0194, "status": "measured"}},
    }  # fmt: skip
    lines = format_breakdown(breakdown).splitlines()
    cpu = next(line for line in lines if line.lstrip().startswith("CPU prep"))
    assert "116.8%" in cpu and cpu.endswith("(more than the whole iteration)"), cpu
    compute = next(line for line in lines if line.lstrip().startswith("compute"))
    assert "whole iteration" not in compute


def test_an_endless_interval_is_no_interval_not_plus_minus_inf() -> None:
    """A script that ended by itself after 4 steps printed "0.0201 s ± inf%" and "0.0802 s ± inf h"."""
    breakdown = {"iteration_s": 0.0201, "iteration_ci95_s": float("inf"), "epoch_s": 0.0804,
                 "iterations_per_epoch": 4, "stalls": {}}  # fmt: skip
    head = format_breakdown(breakdown).splitlines()[0]
    assert "inf" not in head and head.startswith("iteration 0.0201 s  (epoch of 4 iterations: ")


def test_a_share_past_100_percent_within_the_iterations_noise_is_not_called_impossible() -> None:
    """CPU at 141% of a 5.5 ms ± 1.7 ms iteration: the profile judged it within the noise (the stall's and
    the iteration's intervals together), but `stash show`, `stash runs` and whatif, without the
    iteration's, called the run impossible, with a cause that did not apply."""
    from stash_core.analysis.coherence import impossible_of_stored

    measured = {"status": "measured"}
    stalls = {"compute": {"seconds": 0.00063, "ci95_s": 0.00176, "share": 0.114, **measured},
              "cpu": {"seconds": 0.00782, "ci95_s": 0.00202, "share": 1.412, **measured}}  # fmt: skip
    noisy = {"iteration_s": 0.00554, "iteration_ci95_s": 0.00168, "stalls": stalls}
    assert "impossible" not in format_breakdown(noisy)
    rows = [{**stall, "stall": name} for name, stall in stalls.items()]
    assert impossible_of_stored([], rows, noisy) is None
    sure = {**noisy, "iteration_ci95_s": 0.0001}  # beyond the noise: said as before
    said = format_breakdown(sure).splitlines()[1]
    assert said.startswith("warning: impossible differential run: cpu is 141%")


def test_every_interval_of_the_table_carries_its_unit() -> None:
    """A stall's and the remainder's intervals read '± 0.005 s', as the epoch line's do: a bare '± 0.005'
    beside a share in % was read as points of share."""
    breakdown = {
        "iteration_s": 0.101,
        "iteration_ci95_s": 0.004,
        "unattributed_ci95_s": 0.009,
        "stalls": {
            "compute": {"seconds": 0.051, "ci95_s": 0.005, "status": "measured"},
            "interconnect": {"seconds": 0.033, "ci95_s": 0.001, "status": "measured"},
        },
    }
    lines = format_breakdown(breakdown).splitlines()
    compute = next(line for line in lines if line.strip().startswith("compute"))
    remainder = next(line for line in lines if line.strip().startswith("not separated"))
    assert compute.endswith("± 0.005 s") and remainder.endswith("± 0.009 s")


def test_each_stall_not_measured_is_named_with_its_reason_once() -> None:
    """One machine, no data: network, CPU prep and disk fetch had been left out of the table without a word,
    and the iteration read as the job's though it held no data loading."""
    no_data = "no data is loaded: the inputs are made on the device"
    breakdown = {
        "iteration_s": 0.2,
        "stalls": {
            "compute": {"seconds": 0.1, "ci95_s": 0.01, "status": "measured"},
            "interconnect": {"seconds": 0.1, "ci95_s": 0.01, "status": "measured"},
            "network": {"seconds": None, "status": "not_measured", "note": "one machine\x1b[2J"},
            "cpu": {"seconds": None, "status": "not_measured", "note": no_data},
            "disk": {"seconds": None, "status": "not_measured", "note": no_data},
        },
    }
    lines = format_breakdown(breakdown).splitlines()
    assert f"not measured: CPU prep and disk fetch - {no_data}" in lines
    network = next(line for line in lines if line.startswith("not measured: network - one machine"))
    assert "\x1b" not in network  # a stored note is data: no terminal escape reaches the screen
    stored_before = {**breakdown, "stalls": {**breakdown["stalls"], "network": {"status": "not_measured"}}}
    assert "not measured: network" in format_breakdown(stored_before).splitlines()


def test_a_stall_left_out_of_stalls_is_not_listed_as_not_measured() -> None:
    """The user chose it: the table names only what the setup could not measure."""
    from stash_core.analysis.unmeasured import NOT_ASKED

    breakdown = {
        "iteration_s": 0.2,
        "stalls": {
            "compute": {"seconds": 0.2, "ci95_s": 0.01, "status": "measured"},
            "cpu": {"seconds": None, "status": "not_measured", "note": NOT_ASKED},
        },
    }
    assert "CPU prep" not in format_breakdown(breakdown)
