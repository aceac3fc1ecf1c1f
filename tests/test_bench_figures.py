"""The benchmarks' printed figures say what their data allow: a verdict only where the interval decides it, a
median of an even count, the pairs needed as the interval beside it counts them, labels from the data they
describe, and a step cache of their own for a timing. Nothing is timed here."""

from __future__ import annotations

import os
import statistics
import sys

import pytest
from support import REPO

sys.path.insert(0, str(REPO / "bench"))


def test_the_ratio_verdict_is_undecided_where_the_interval_straddles_the_goal() -> None:
    from script_input_cost import ratio_ci95, verdict

    ratio, half = ratio_ci95(9.61e-3, 7.27e-3, 9.52e-3, 3.94e-3)  # a run that printed "within the ±15% goal"
    assert ratio == pytest.approx(1.0095, abs=1e-3) and half == pytest.approx(0.87, abs=0.01)
    assert verdict(ratio, half).startswith("undecided")
    assert verdict(*ratio_ci95(10.0, 0.1, 10.0, 0.1)).startswith("within")
    assert verdict(*ratio_ci95(20.0, 0.1, 10.0, 0.1)).startswith("outside")
    assert verdict(*ratio_ci95(10.0, 0.1, 10.0, float("inf"))).startswith("undecided")  # one round


def test_the_median_ratio_of_an_even_count_is_the_middle_two_averaged(capsys) -> None:
    from interleaved import print_comparison

    plain = [1.0, 1.0, 1.0, 1.0]
    timed = [1.0, 1.1, 1.2, 1.3]
    print_comparison("plain", "timed", plain, timed, [t / p for t, p in zip(timed, plain, strict=True)])
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("median ratio"))
    assert "1.1500" in line


def test_the_pairs_needed_count_them_as_the_interval_does() -> None:
    from paired_blocks import pairs_needed

    from stash_core.analysis.stats import mean_ci95

    drifting = [1.0 + 0.05 * index + 0.02 * (-1) ** index for index in range(12)]  # correlated pairs
    mean, half = mean_ci95(drifting)
    assert pairs_needed(12, half, mean, half / mean) == pytest.approx(12)  # the target it already reached
    independent = (2.0 * statistics.stdev(drifting) / (0.1 * mean)) ** 2  # what it printed before
    assert pairs_needed(12, half, mean, 0.1) > independent


def test_the_pooled_test_sets_are_counted_from_the_list() -> None:
    from comm_factors import _test_sets

    from stash_core.decide.predict.comm_validation import TEST_CSVS

    label = _test_sets()
    assert f"the {len(TEST_CSVS)} test sets" in label
    assert all(path.stem.removeprefix("published_multi_gpu_") in label for path in TEST_CSVS)


def test_a_timing_has_a_step_cache_of_its_own(monkeypatch) -> None:
    from predict_catalog import fresh_step_cache

    from stash_core.decide.predict.step_cache import cache_dir

    monkeypatch.setenv("STASH_CACHE_DIR", "/somewhere/the/users")
    with fresh_step_cache() as folder:
        assert cache_dir() == folder and folder.is_dir()
    assert not folder.exists() and os.environ["STASH_CACHE_DIR"] == "/somewhere/the/users"


def test_the_paper_takes_its_options_written_with_an_equals_sign(monkeypatch) -> None:
    from schedule import parse_args

    monkeypatch.setattr(sys, "argv", ["schedule.py", "--paper", "--jobs=100", "--cluster=2x2x8"])
    args = parse_args()
    assert (args.jobs, args.cluster, args.load) == (100, "2x2x8", None)  # load: the paper's own default
    monkeypatch.setattr(sys, "argv", ["schedule.py", "--jobs=300"])
    args = parse_args()
    assert (args.jobs, args.cluster, args.node_gbps) == (300, "16x8x8", 100.0)


def _workbook(sheet: str, rows: list[list[object]]) -> bytes:
    """A minimal .xlsx of one sheet: numbers as values, text as shared strings (as Excel writes them)."""
    import io
    import zipfile

    strings: list[str] = []
    cells = []
    for number, row in enumerate(rows, 1):
        parts = []
        for value in row:
            if isinstance(value, str):
                strings.append(value)
                parts.append(f'<c t="s"><v>{len(strings) - 1}</v></c>')
            elif value is not None:
                parts.append(f"<c><v>{value}</v></c>")
        cells.append(f'<row r="{number}">{"".join(parts)}</row>')
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    book = io.BytesIO()
    with zipfile.ZipFile(book, "w") as archive:
        archive.writestr(
            "xl/workbook.xml", f'<workbook {ns}><sheets><sheet name="{sheet}"/></sheets></workbook>'
        )
        shared = "".join(f"<si><t>{text}</t></si>" for text in strings)
        archive.writestr("xl/sharedStrings.xml", f"<sst {ns}>{shared}</sst>")
        archive.writestr(
            "xl/worksheets/sheet1.xml", f"<worksheet {ns}><sheetData>{''.join(cells)}</sheetData></worksheet>"
        )
    return book.getvalue()


def test_deepbench_layers_are_read_by_section_and_the_rest_left_out() -> None:
    from rnn_kernels import _layer_rows, _sheet_rows

    book = _workbook("Results FP32", [
        ["Recurrent Layers - LSTM", "Source", "Hidden Units", "N", "Timesteps", "Time Forward (msec)"],
        ["Machine Translation", 512, 16, 25, 1.095, 0.937, 0.165, 0.77],
        [None],
        ["Recurrent Layers - GRU", "Source", "Hidden units"],
        ["DeepSpeech", 2816, 32, 1500, 223.3, 328.9, 154.9],
        ["DeepSpeech", 1760, 16, 50, "#DIV/0!"],  # no times: left out
        ["All-Reduce", "Size # floats"],
        [100000, 2, 3, 4, 5, 6],  # an all-reduce row: no layer
    ])  # fmt: skip
    assert _layer_rows(_sheet_rows(book, "Results FP32")) == [
        ("lstm", [512.0, 16.0, 25.0, 1.095, 0.937, 0.165]),
        ("gru", [2816.0, 32.0, 1500.0, 223.3, 328.9, 154.9]),
    ]


def test_deepbench_rebuild_refuses_a_snapshot_it_cannot_read_and_writes_nothing(tmp_path, capsys) -> None:
    from rnn_kernels import DATA_FILE, rebuild

    before = DATA_FILE.read_bytes()
    assert rebuild(str(tmp_path / "no-such-snapshot")) == 1
    out = capsys.readouterr().out
    assert out.startswith("rnn_kernels.py: cannot read results/train/") and len(out.splitlines()) == 1
    assert DATA_FILE.read_bytes() == before


def test_deepbench_rebuild_refuses_a_workbook_it_does_not_know_and_writes_nothing(tmp_path, capsys) -> None:
    import subprocess

    from rnn_kernels import DATA_FILE, rebuild

    repo = tmp_path / "deepbench"
    (repo / "results/train").mkdir(parents=True)
    (repo / "results/train/DeepBench_NV_V100.xlsx").write_bytes(_workbook("Renamed", [["x"]]))
    for command in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", "-C", str(repo), *command], check=True, capture_output=True)
    before = DATA_FILE.read_bytes()
    assert rebuild(str(repo)) == 1
    out = capsys.readouterr().out
    assert out.startswith("rnn_kernels.py: cannot read sheet 'Results FP32'") and len(out.splitlines()) == 1
    assert DATA_FILE.read_bytes() == before


def test_the_recurrent_gpu_bench_predicts_every_deepbench_shape_and_times_nothing_when_told(tmp_path) -> None:
    import csv

    from gpu_rnn import LAYER_HEADER, PRECISIONS, _write, layer_rows, layer_shapes

    from stash_core.decide.predict.stated_error import fitted_params

    class Args:
        quick, predict_only, budget_s = False, True, 0.1

    rows = layer_rows(Args(), "NVIDIA H200 SXM 141 GB", fitted_params(), "cpu")
    assert len(rows) == len(layer_shapes()) * len(PRECISIONS) == 53 * 3
    predicted = {name: LAYER_HEADER.index(name) for name in LAYER_HEADER if name.startswith("predicted")}
    assert all(float(row[index]) > 0 for row in rows for index in predicted.values())
    measured = [LAYER_HEADER.index(name) for name in ("inference_ms", "forward_ms", "backward_ms")]
    assert all(row[index] == "-" for row in rows for index in measured)
    # the training forward writes the gates for the backward: slower than the inference one, each predicted
    # on its own (a features cache keyed without bytes once gave both the same numbers)
    forward, inference = predicted["predicted_forward_ms"], predicted["predicted_inference_ms"]
    assert all(float(row[forward]) >= float(row[inference]) for row in rows)
    assert sum(float(row[forward]) > float(row[inference]) for row in rows) > len(rows) // 2
    kept = tmp_path / "layers.csv"
    _write(kept, LAYER_HEADER, rows)
    assert len(list(csv.DictReader(kept.open()))) == 159


def test_the_multi_gpu_bench_predicts_bus_bandwidth_and_data_parallel_steps_for_its_instance() -> None:
    from gpu_multi import SIZES_BYTES, catalog_instance, predicted_bus, predicted_step

    bus = {gpus: predicted_bus(catalog_instance("p5en.48xlarge"), gpus) for gpus in (2, 8)}
    for curve in bus.values():
        values = [curve[size] for size in SIZES_BYTES]
        assert values == sorted(values) and 100 < values[-1] < 1000  # GB/s, rising with the message
    steps = [predicted_step("p5en.48xlarge", "resnet18", 8, (3, 32, 32), "tf32", gpus) for gpus in (2, 8)]
    assert all(0 < step["efficiency"] <= 1 for step in steps)
    assert steps[0]["compute"] == steps[1]["compute"] and steps[1]["interconnect"] >= steps[0]["interconnect"]


def test_a_multi_gpu_measurement_past_its_time_fails_instead_of_ending_the_bench() -> None:
    from gpu_multi import _stash

    done = _stash("profile", "--model", "resnet18", "--batch-size", "2", "--device", "cpu", "--no-store",
                  "--input-shape", "3,32,32", timeout_s=1)  # fmt: skip
    assert done.returncode == 124 and "timed out" in done.stderr


def test_a_source_of_many_figures_weighs_as_one_in_the_source_coverage() -> None:
    from single_gpu_holdout import source_coverage

    many = [{"source": "big", "covered": False}] * 9 + [{"source": "big", "covered": True}]
    found = [*many, {"source": "small", "covered": True}]
    assert source_coverage(found) == pytest.approx((0.1 + 1.0) / 2)  # by figures it would be 2 of 11
