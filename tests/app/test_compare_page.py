"""The Compare page in Streamlit's AppTest: catalog instances not measured are shown predicted, beside the
measured ones and marked apart, in the precision the measured job trained in (which, and why, is said); the
verdict stays with the measured runs."""

from __future__ import annotations

from pathlib import Path

from result_docs import result_doc
from streamlit.testing.v1 import AppTest

from stash_core.store import ingest_result
from stash_core.views.common import plain

REPO = Path(__file__).resolve().parents[2]


def _shown_page() -> AppTest:
    """The Compare page run once on the database the fixture set, shown without an exception or error."""
    app = AppTest.from_file(str(REPO / "pages" / "compare.py"), default_timeout=120)
    app.run()
    assert not app.exception and not app.error
    return app


def _captions(app: AppTest) -> str:
    return " ".join(c.value for c in app.caption)


def test_predicted_instances_sit_beside_the_measured_ones(populated_db: Path) -> None:
    app = _shown_page()
    table = app.dataframe[0].value
    sources = table["Source"].tolist()
    measured = [s for s in sources if s.startswith("● measured")]
    predicted = [s for s in sources if s.startswith("◇ predicted ±")]
    assert len(measured) == 2 and len(predicted) >= 5 and len(measured) + len(predicted) == len(sources)
    names = table["Configuration"].tolist()
    assert all(name.endswith("· predicted") for name, s in zip(names, sources, strict=True) if s in predicted)
    assert any("p4d.24xlarge" in name for name in names)  # the job has 2 workers: no 1-GPU instance
    assert not any("g4dn.xlarge" in name for name in names)
    captions = _captions(app)
    assert "◇ predicted" in captions and "Fastest predicted" in captions and "Cheapest predicted" in captions
    fastest = " ".join(m.value for m in app.markdown).split("Fastest")[1].split("Cheapest")[0]
    assert "predicted" not in fastest  # the verdict compares measurements only

    app.toggle(key="cmp-predicted").set_value(False).run()
    assert not app.exception
    assert app.dataframe[0].value["Source"].tolist() == measured


def test_instances_without_a_prediction_say_why(populated_db: Path) -> None:
    from stash_core.store import connect

    with connect(populated_db) as con:  # a GPU box whose accelerator Stash's table does not know
        con.execute(
            "INSERT INTO instances (name, provider, accelerator, accelerator_count, vcpus, memory_gib, "
            "on_demand_usd_per_h) VALUES ('tpu-box', 'test', 'Google TPU v9', 4, 8, 32, 1.0)"
        )
    app = _shown_page()
    warning = " ".join(w.value for w in app.warning)
    # The job runs 2 workers per machine: 1-GPU instances and the unknown accelerator are named, not dropped.
    assert "catalog instance(s) not predicted" in warning
    assert plain("accelerator not in Stash's table: 1") in warning
    assert "fewer GPUs than the job's workers" in warning
    listed = " ".join(m.value for m in app.expander[-1].markdown)
    assert plain("tpu-box: not predictable - Google TPU v9 has no entry in the accelerator table") in listed
    assert plain("g4dn.xlarge: not predicted - it has 1 GPU(s), the job uses 2 per machine") in listed
    assert "small-vm" not in listed  # measured for this job: not missing


def _gpu_profile(db: Path, instance: str, gpu_name: str, compute_s: float) -> str:
    doc = result_doc("resnet18", instance=instance, workers=1, device="cuda", batch_size=8,
                     spec_extra={"input_shape": [3, 64, 64]},
                     stalls={"compute": compute_s, "cpu": 0.001, "disk": 0.001})  # fmt: skip
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": gpu_name}], gpu_status="1 GPU(s)")
    assert ingest_result(db, doc)
    return doc["run_id"]


def test_predictions_say_their_precision_and_scale_a_tf32_profile(empty_db: Path) -> None:
    """A CNN profiled on an H200 ran PyTorch's default TF32 convolutions: another H200 instance is predicted
    at the profile's 50 ms of compute (an FP32 prediction set a roofline 1.6x slower beside it)."""
    _gpu_profile(empty_db, "lab-box-7", "NVIDIA H200", 0.05)
    app = _shown_page()
    captions = _captions(app)
    said = plain("Predicted for tf32: PyTorch's default for its convolutions and recurrent layers")
    assert said in captions
    table = app.dataframe[0].value.set_index("Configuration")
    assert table.loc["p5en.48xlarge · 1w · predicted", "Iteration"] == "50 ms"


def test_gpu_profiles_on_different_gpus_both_anchor_the_predictions_none_is_set_aside(
    empty_db: Path,
) -> None:
    """Both ran PyTorch's default: they were read as TF32 against FP32 and the A100's was set aside."""
    _gpu_profile(empty_db, "a2-highgpu-1g", "NVIDIA A100-SXM4-40GB", 0.05)
    _gpu_profile(empty_db, "lab-box", "Mystery GPU 9000", 0.08)
    app = _shown_page()
    captions = _captions(app)
    assert plain("Predicted for tf32: PyTorch's default") in captions and "set aside" not in captions
    table = app.dataframe[0].value.set_index("Configuration")
    assert table.loc["a2-highgpu-2g · 1w · predicted", "Iteration"] == "50 ms"


def test_times_per_epoch_keep_three_figures_in_the_chart(populated_db: Path) -> None:
    """The chart's axis and tooltip rounded to 0.1 s: an epoch of 17 ms read "0.0"."""
    import json

    app = _shown_page()
    specs = [json.loads(chart.proto.spec) for chart in app.get("vega_lite_chart")]
    timed = [spec for spec in specs if "Time per" in json.dumps(spec)]
    assert timed and all('",.1f"' not in json.dumps(spec) and '",.3r"' in json.dumps(spec) for spec in timed)


def test_a_log_axis_starts_above_zero_so_a_zero_leaves_the_other_bars_drawn() -> None:
    """Costs from $0 (a machine of no price) to dollars, on a log axis: 0 in its domain left the chart with
    no bar at all (Vega-Lite: "Log scale domain includes zero")."""
    import pandas as pd

    from pages.compare import bar

    frame = pd.DataFrame({"configuration": ["free", "a", "b"], "usd": [0.0, 0.01, 5.0],
                          "source": ["measured", "predicted", "predicted"]})  # fmt: skip
    scale = bar(frame, "usd", "Cost per epoch (USD)", ",.3r", True).to_dict(validate=False)["encoding"]["x"]
    assert scale["scale"]["type"] == "log" and scale["scale"]["clamp"] is True
    assert 0 < scale["scale"]["domain"][0] < 0.01 and scale["scale"]["domain"][1] > 5.0
    linear = bar(frame.assign(usd=[1.0, 2.0, 3.0]), "usd", "Cost", ",.3r", True).to_dict(validate=False)
    assert "scale" not in linear["encoding"]["x"]


def _shares_rows(app: AppTest) -> list[dict]:
    """The rows of the "where the time goes" chart (its stalls' data set, as drawn, not the bars' names)."""
    import pyarrow as pa

    [chart] = [chart for chart in app.get("vega_lite_chart") if "Share of the iteration" in chart.proto.spec]
    tables = [pa.ipc.open_stream(data.data.data).read_all() for data in chart.proto.datasets]
    return [row for table in tables for row in table.to_pylist() if "stall" in row]


def test_predicted_configurations_show_where_their_time_goes_beside_the_measured_ones(
    populated_db: Path,
) -> None:
    """Compare drew no stall bars for its predicted rows: the cheapest are drawn, their stalls predicted."""
    app = _shown_page()
    rows = _shares_rows(app)
    predicted = {row["configuration"] for row in rows if row["configuration"].endswith("· predicted")}
    assert 1 <= len(predicted) <= 12, predicted
    for name in predicted:
        own = [row for row in rows if row["configuration"] == name]
        assert {row["stall"] for row in own} <= {"compute", "interconnect", "network", "unattributed"}
        assert all(row["status"] == "predicted" for row in own if row["stall"] != "unattributed")
        assert abs(max(row["bar_end"] for row in own) - 1.0) < 1e-9  # closes at 100%
        assert all(row["resolved"] is None for row in own)  # not drawn faded, as a stall not resolved is
    assert any(not row["configuration"].endswith("· predicted") for row in rows)  # the measured stay
    assert "are not predicted" in _captions(app)
    app.toggle(key="cmp-predicted").set_value(False).run()
    assert not any(row["configuration"].endswith("· predicted") for row in _shares_rows(app))


def test_derived_figures_carry_the_iterations_spread(populated_db: Path) -> None:
    """Only the iteration had its ±: a measured row's epoch, throughput and cost, and the charts, had none."""
    import json

    app = _shown_page()
    table = app.dataframe[0].value
    measured = table[table["Source"].str.startswith("● measured")]
    for column in ("Epoch", "Samples/s", "USD/epoch"):
        assert measured[column].str.contains(" ± ").all(), (column, measured[column].tolist())
    predicted = table[table["Source"].str.startswith("◇ predicted")]
    assert not predicted["Samples/s"].str.contains(" ± ").any()  # its stated error is in its Source
    specs = [json.dumps(json.loads(chart.proto.spec)) for chart in app.get("vega_lite_chart")]
    timed = [spec for spec in specs if "Time per" in spec]
    assert timed and all('"rule"' in spec and "epoch_s_high" in spec for spec in timed)
    # the normalised throughput, and the shares where the time goes, with theirs too (they had none)
    assert any('"rule"' in spec and "samples_per_s_high" in spec for spec in specs)
    assert any("error_high" in spec for spec in specs if "Share of the iteration" in spec)


def test_a_throughputs_bounds_are_the_inverse_of_the_iterations() -> None:
    import math

    import pandas as pd
    import pytest

    from stash_core.views.compare_spread import drawn_ends, relative_spread, with_spread

    frame = pd.DataFrame({"source": ["measured", "predicted"], "iteration_s": [0.1, 0.2],
                          "iteration_ci95_s": [0.01, None], "expected_error": [None, 0.3],
                          "comm_error": [None, 0.1], "epoch_s": [10.0, 20.0],
                          "samples_per_s": [100.0, 50.0]})  # fmt: skip
    spread = with_spread(frame, ("epoch_s", "samples_per_s"))
    assert spread["spread"].tolist() == pytest.approx([0.1, 0.4])  # 95% interval; compute's and comm's added
    assert spread.loc[0, ["epoch_s_low", "epoch_s_high"]].tolist() == pytest.approx([9.0, 11.0])
    bounds = spread.loc[0, ["samples_per_s_low", "samples_per_s_high"]].tolist()
    assert bounds == pytest.approx([100 / 1.1, 100 / 0.9])
    # an interval reaching a step of 0 has no upper bound; one not known has none either (not a made-up one)
    wide = with_spread(frame.assign(iteration_ci95_s=[0.15, None], source="measured"), ("samples_per_s",))
    assert wide.loc[0, ["samples_per_s_low", "samples_per_s_high"]].tolist() == [40.0, math.inf]
    assert wide.loc[1, ["samples_per_s_low", "samples_per_s_high"]].isna().all()
    drawn = drawn_ends(wide, "samples_per_s")  # past the longest bar, in a chart's data
    assert drawn.loc[0, "samples_per_s_high"] == 150.0 and math.isnan(drawn.loc[1, "samples_per_s_high"])
    assert relative_spread({"source": "measured", "iteration_s": 0.1}) is None


def test_a_wide_throughput_interval_gives_its_bounds_not_a_plus_minus_below_zero() -> None:
    """'87.4 ± 154.0' samples/s: the iteration's ± 176% read as a throughput that may be negative."""
    from pages._figures import samples_text

    assert samples_text(216.2, 0.0976) == "216.2 ± 21.1"
    assert samples_text(100.0, 0.5) == "100.0 (66.7 to 200.0)"
    assert samples_text(87.4, 1.76) == "87.4 (31.7 or more)"
    assert samples_text(50.0, None) == "50.0"


def test_the_job_picked_is_said_whole_under_the_picker(populated_db: Path) -> None:
    """At 800 px the picker cut the job's text at its input shape; the caption under it says it all."""
    app = _shown_page()
    label = app.selectbox(key="cmp-pick")
    shown = label.format_func(label.value)
    assert plain(shown) in [caption.value for caption in app.caption]
    assert "per worker" in shown and "input" in shown


def test_predictions_within_the_winners_error_are_said_not_told_apart() -> None:
    """'Fastest predicted: a3-ultragpu-8g' where p5en.48xlarge had the same figure, and H100s 0.3% slower
    under a ±47% error."""
    import pandas as pd

    from stash_core.views.compare_spread import not_told_apart

    frame = pd.DataFrame({"source": "predicted", "expected_error": [0.4] * 4, "comm_error": [0.0] * 4,
                          "samples_per_s": [3764.2, 3764.2, 3753.0, 1000.0], "usd": [1.0, 1.2, 5.0, 0.5]})
    said = "; 2 more within its ±40% expected error: not told apart"
    assert not_told_apart(frame, "samples_per_s", True) == said
    assert not_told_apart(frame, "usd", False) == ""  # 1.0 is past 0.5 x 1.4: told apart
    exact = frame.assign(expected_error=None)
    assert not_told_apart(exact, "samples_per_s", True) == "; 1 more at the same figure"


def test_the_measured_figures_carry_their_interval_in_the_cards_and_the_table(populated_db: Path) -> None:
    """The cards said "876.8 samples/s" and "$0.933 per million samples" bare beside the table's interval,
    and the table's Per GPU and USD/1M samples had none where USD/epoch had one."""
    app = _shown_page()
    table = app.dataframe[0].value
    measured = table[table["Source"].str.startswith("● measured")]
    for column in ("Samples/s", "Per GPU", "USD/epoch", "USD/1M samples"):  # Per GPU: none on CPU runs
        cells = [cell for cell in measured.get(column, []) if cell not in ("–", "")]
        assert cells or column in ("Per GPU", "USD/epoch"), column
        assert all(" ± " in cell or " to " in cell or " or more)" in cell for cell in cells), column
    cards = " ".join(m.value for m in app.markdown)
    fastest = cards.split("Fastest measured")[1].split("Cheapest measured")[0]
    cheapest = cards.split("Cheapest measured")[1]
    assert " ± " in fastest.split("samples/s")[0] or " to " in fastest.split("samples/s")[0]
    assert " ± " in cheapest.split("per million samples")[0]


def test_the_side_by_side_table_is_read_whole_in_a_1280_px_window(empty_db: Path) -> None:
    """With the examples the table cut "Configurati…" and "USD/1M sa…" and broke "measure|d" and
    "overhead-bo|und": it keeps within the page at its own widths, its headings short (in full in their
    tooltips), and leaves out Per GPU where it repeats Samples/s (one GPU a worker)."""
    import json

    from stash_core.store import examples
    from stash_core.views.table_fit import TABLE_BUDGET_PX

    examples.import_examples(empty_db)
    table = _shown_page().dataframe[0]
    config = json.loads(table.proto.columns)
    shown = list(table.value.columns)
    assert "Per GPU" not in shown and {"Samples/s", "Note"} <= set(shown)
    assert sum(config[name]["width"] for name in shown) <= TABLE_BUDGET_PX
    cost = config["USD/1M samples"]
    assert cost["label"] == "USD/1M" and "million samples" in cost["help"]
