"""The Recommend page in Streamlit's AppTest: empty database, a recommendation, and an infeasible budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc as _cpu_machine_doc
from streamlit.testing.v1 import AppTest

from stash_core.store import ingest_result
from stash_core.views.common import plain


def result_doc(*args, **kwargs):
    """result_docs.result_doc on a machine that fits its device: a CUDA run's machine has a GPU per worker
    (result_doc's fingerprint has none, which would contradict a GPU instance label)."""
    doc = _cpu_machine_doc(*args, **kwargs)
    if doc["spec"]["device"] == "cuda":
        count = doc["spec"]["workers_per_node"]
        gpus = [{"index": index, "name": "Tesla V100-SXM2-16GB"} for index in range(count)]
        doc["fingerprint"].update(gpu_count=count, gpus=gpus, gpu_status=f"{count} GPU(s)")
    return doc


REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "pages" / "recommend.py"


def _page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("STASH_DB", str(db))
    monkeypatch.setenv("STASH_VALIDATE_CHARTS", "1")
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def _submit(app: AppTest, budget_hours: float) -> AppTest:
    app.number_input(key="rec-budget").set_value(budget_hours)
    app.multiselect(key="rec-inst").set_value(["p3.8xlarge", "p3.16xlarge"])
    next(button for button in app.button if button.label == "Recommend").click()
    return app.run()


@pytest.fixture
def populated(tmp_path):
    db = tmp_path / "rec.duckdb"
    ingest_result(
        db,
        result_doc(
            "resnet50",
            instance="p3.16xlarge",
            workers=8,
            device="cuda",
            batch_size=64,
            stalls={"compute": 0.20, "interconnect": 0.03, "cpu": 0.01, "disk": 0.01},
        ),
    )
    ingest_result(
        db,
        result_doc(
            "resnet50",
            instance="p3.8xlarge",
            workers=4,
            nodes=2,
            device="cuda",
            batch_size=64,
            stalls={"compute": 0.20, "interconnect": 0.02, "network": 0.10, "cpu": 0.01, "disk": 0.01},
        ),
    )
    return db


def test_empty_database_shows_the_form(tmp_path, monkeypatch):
    app = _page(tmp_path / "empty.duckdb", monkeypatch)
    assert not app.exception
    catalog = app.dataframe[0].value  # the editable instance catalog, built-in rows
    assert "p3.16xlarge" in set(catalog["name"])
    assert any("press Recommend" in info.value for info in app.info)
    app = _submit(app, 24.0)
    assert not app.exception
    # No profile at all: every GPU instance is predicted from its specs, and the page says so.
    assert not any("No recommendation" in error.value for error in app.error)
    iteration = next(metric for metric in app.metric if metric.label == "Iteration time")
    assert iteration.value.endswith(" ms")
    assert any("Iteration time predicted, ±" in caption.value for caption in app.caption)
    table = app.dataframe[-1].value
    assert table["source"].str.startswith("◇ predicted ±").all()


def test_recommendation_with_pareto_chart_and_explanation(populated, monkeypatch):
    app = _page(populated, monkeypatch)
    assert app.selectbox(key="rec-model").value == "resnet50"
    assert app.number_input(key="rec-batch-resnet50").value == 64
    app = _submit(app, 24.0)
    assert not app.exception
    assert any(markdown.value == "### 1 x p3.16xlarge" for markdown in app.markdown)
    text = " ".join(markdown.value for markdown in app.markdown)
    assert "network stall makes 2 x p3.8xlarge 36% slower than 1 x p3.16xlarge" in text
    # measured: the time and cost carry the run's 95% interval, as a predicted one its expected error
    deltas = {card.label: card.delta for card in app.metric if card.label in ("Training time", "Cost")}
    assert len(deltas) == 2 and all(str(delta).startswith("±") and str(delta).endswith("% (95%)")
                                    for delta in deltas.values()), deltas  # fmt: skip
    # its epoch as PyTorch's defaults count it, which Breakdown's (the profiled loop's full batches) is not
    training = next(card for card in app.metric if card.label == "Training time")
    assert "steps an epoch: every sample, the last batch partial" in training.proto.help, training.proto.help
    assert "on-demand prices, within 24 h" in text  # the job line states the budget, as the command line does
    ranked = next(frame.value for frame in app.dataframe if "config" in frame.value.columns)
    assert ranked.iloc[0]["config"] == "1 x p3.16xlarge"
    assert list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    # the table scrolls inside itself: the page counts its rows (ten on view looked like all of them)
    captions = " ".join(caption.value for caption in app.caption)
    assert f"{len(ranked):,} configuration(s) in the table (it scrolls)." in captions
    # time and cost stay numbers (a column of words sorted "9.9 h" above "292 h")
    assert ranked["training_h"].dtype.kind == "f" and ranked["training_usd"].dtype.kind == "f"
    # each price's date beside it, as `stash recommend` prints it ("price of")
    assert ranked["price_date"].notna().all() and str(ranked["price_date"].iloc[0]).startswith("20")
    # what is rented, and a predicted row's ± as the card states it: compute's and communication's added
    # (the table said the compute path's alone, ±41% under a card's ±49%, with no ±comm or GPU)
    assert {"accelerator", "gpus", "comm_error"} <= set(ranked.columns)
    assert ranked.set_index("config").loc["1 x p3.16xlarge", "gpus"] == "8/8"
    # a basis is a column where rows differ, else said once under the table; the notes are listed once each,
    # with the ranks that carry them (in a column they made every row nine lines tall)
    said = " ".join(c.value for c in app.caption)
    assert ("basis" in ranked.columns) != ("Every configuration's basis: " in said)
    assert "note" not in ranked.columns
    notes = next(e for e in app.expander if e.label.startswith("The configurations' notes"))
    assert "- **rank" in notes.markdown[0].value
    # the catalog's old prices are said with the command that refreshes them as code (shown as `...` text)
    old = [w.value for w in app.warning if "older than 90 days" in w.value]
    assert old and "`stash instances import --skypilot` refreshes them" in old[0], old


def test_the_gpus_used_of_each_instance_can_be_fewer_than_it_has(populated, monkeypatch):
    app = _page(populated, monkeypatch)
    app.number_input(key="rec-workers").set_value(4)
    app = _submit(app, 1000.0)
    assert not app.exception
    text = " ".join(markdown.value for markdown in app.markdown)
    assert "4 worker(s) per instance, one per GPU" in text
    ranked = next(frame.value for frame in app.dataframe if "config" in frame.value.columns)
    assert {gpus.rsplit("x", 1)[-1] for gpus in ranked["gpus"]} == {"4/4", "4/8"}  # "2x4/8": 2 x (4 of 8)
    assert "2 x p3.8xlarge" in set(ranked["config"])


def test_budget_that_cannot_be_met_is_explained(populated, monkeypatch):
    app = _submit(_page(populated, monkeypatch), 1.0)
    assert not app.exception
    errors = " ".join(error.value for error in app.error)
    assert "no configuration finishes 90 epochs of 1,281,167 samples within 1 h" in errors
    # in the page's words: it has no --budget-hours or --max-instances to raise
    assert "raise the time budget or the most instances of one type" in errors and "--" not in errors


def test_configurations_left_out_say_why(tmp_path, monkeypatch):
    from stash_core.store import connect

    db = tmp_path / "fresh.duckdb"
    with connect(db) as con:  # a fresh database and one GPU box whose accelerator Stash's table lacks
        con.execute(
            "INSERT INTO instances (name, provider, accelerator, accelerator_count, vcpus, memory_gib, "
            "on_demand_usd_per_h) VALUES ('tpu-box', 'test', 'Google TPU v9', 4, 8, 32, 1.0)"
        )
    app = _page(db, monkeypatch)
    app.selectbox(key="rec-model").set_value("resnet50")
    # ~22 GB of activations: not on a 16 GB T4 or V100
    app.number_input(key="rec-batch-resnet50").set_value(256)
    app.multiselect(key="rec-inst").set_value(["g4dn.xlarge", "p3.2xlarge", "p5.48xlarge", "tpu-box"])
    next(button for button in app.button if button.label == "Recommend").click()
    app = app.run()
    assert not app.exception
    warning = " ".join(w.value for w in app.warning)
    # names and reasons are shown as data (views.common.plain): the page's Markdown escapes them
    summary = "batch does not fit the GPU's memory: 2, accelerator not in Stash's table: 1"
    assert f"not evaluated or not ranked: {plain(summary)}" in warning
    listed = " ".join(m.value for m in app.expander[-1].markdown)
    # a CNN trains in PyTorch's default, tf32 (on a T4 its FP32 cores)
    assert plain("g4dn.xlarge: does not fit - batch 256 in tf32 (FP32 here) needs") in listed
    assert "has 16 GiB" in listed
    assert plain("tpu-box: not predictable - Google TPU v9 has no entry in the accelerator table") in listed
    headings = [m.value for m in app.markdown if m.value.startswith("### ")]
    assert headings and "p5.48xlarge" in headings[0]  # the instance that can be predicted is recommended


def test_the_page_keeps_the_users_model_and_answers_its_job(populated, monkeypatch):
    """A token model gets its own input shape and epoch size, the answer restates the job, and a new profile
    of another model never replaces the model chosen."""
    app = _page(populated, monkeypatch)
    app.selectbox(key="rec-model").set_value("gpt2")
    app = app.run()
    assert not app.exception
    assert app.text_input(key="rec-shape-gpt2").value == "1024"  # not 3,224,224
    samples = app.number_input(key="rec-samples-tokens")
    assert samples.label == "Sequences in one epoch" and samples.value != 1_281_167
    app.text_input(key="rec-shape-gpt2").set_value("256")
    app.selectbox(key="rec-precision").set_value("amp")
    app.number_input(key="rec-batch-gpt2").set_value(8)
    app.number_input(key="rec-epochs").set_value(1.0)
    app.multiselect(key="rec-inst").set_value(["g5.xlarge", "p3.8xlarge"])
    next(button for button in app.button if button.label == "Recommend").click()
    app = app.run()
    assert not app.exception
    text = " ".join(markdown.value for markdown in app.markdown)
    job = "gpt2, batch 8 per worker, input 256, amp, adamw (foreach), fused attention, one worker per GPU"
    assert job in text
    captions = " ".join(caption.value for caption in app.caption)
    assert "Not predicted, so not in the time: CPU pre-processing and Disk fetch." in captions
    # the headline time and cost carry the step's expected error, as the caption does
    deltas = [metric.delta for metric in app.metric if metric.label in ("Training time", "Cost")]
    assert len(deltas) == 2 and all(delta and delta.endswith("% expected error") for delta in deltas), deltas
    ingest_result(populated, result_doc("resnet18", instance="p3.2xlarge", device="cuda", batch_size=32))
    app = app.run()
    assert app.selectbox(key="rec-model").value == "gpt2"
    page_text = " ".join(markdown.value for markdown in app.markdown) + " ".join(c.value for c in app.caption)
    assert "validated stall models" not in page_text


def test_the_jobs_training_habits_change_the_answer_and_a_habit_it_cannot_have_is_a_message(
    tmp_path, monkeypatch
):
    app = _page(tmp_path / "habits.duckdb", monkeypatch)
    app.selectbox(key="rec-precision").set_value("amp")
    app = _submit(app, 1000)
    nchw = " ".join(markdown.value for markdown in app.markdown)
    app.selectbox(key="rec-memory-format").set_value("channels_last")
    app = _submit(app, 1000)
    assert not app.exception
    text = " ".join(markdown.value for markdown in app.markdown)
    assert plain("amp, channels_last, sgd (foreach)") in text and "amp, nchw, sgd (foreach)" in nchw
    app.selectbox(key="rec-optimizer").set_value("rmsprop")
    app.selectbox(key="rec-optimizer-impl").set_value("fused")
    app = _submit(app, 1000)
    assert not app.exception
    assert any("rmsprop has no fused implementation" in error.value for error in app.error)
    assert not any("--optimizer" in error.value for error in app.error)  # the form's field, not the flag


def test_a_free_instance_is_named_beside_the_chart_not_drawn_at_zero_on_its_log_axis(tmp_path, monkeypatch):
    from stash_core.catalog import add_instance

    db = tmp_path / "free.duckdb"
    add_instance(db, name="owned", accelerator="NVIDIA A10G 24 GB", accelerator_count=1, vcpus=4,
                 network_gbps=10, interconnect="none", on_demand_usd_per_h=0.0)  # fmt: skip
    app = _page(db, monkeypatch)
    app.selectbox(key="rec-model").set_value("resnet18")
    app.number_input(key="rec-budget").set_value(1000.0)
    app.multiselect(key="rec-inst").set_value(["owned", "g5.xlarge"])
    next(button for button in app.button if button.label == "Recommend").click()
    app = app.run()
    assert not app.exception
    captions = " ".join(caption.value for caption in app.caption)
    assert "configuration(s) cost $0" in captions and "has no 0" in captions


MEASUREMENTS = REPO / "docs" / "measurements"


@pytest.fixture
def h200(tmp_path):
    """ResNet-18 at batch 64 and the example DDP script, both profiled on an H200 (docs/measurements)."""
    from stash_core.store import ingest_files

    db = tmp_path / "h200.duckdb"
    names = ("h200-resnet18-profile-2026-11-30.json", "h200-script-profile-2026-11-30.json")
    ingest_files(db, [MEASUREMENTS / name for name in names])
    return db


def test_a_profiled_script_is_not_offered_as_a_model_and_typed_is_one_line(h200, monkeypatch):
    app = _page(h200, monkeypatch)
    options = app.selectbox(key="rec-model").options
    assert "resnet18" in options and not any(option.startswith("script:") for option in options)
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    app.session_state["stash_db_path"] = str(h200)
    app.session_state["rec-model"] = "script:train_ddp.py"  # typed: the select accepts new names
    app = _submit(app.run(), 24.0)
    assert not app.exception
    errors = [error.value for error in app.error]
    assert len(errors) == 1 and "stash predict --script-run RUN" in errors[0] and "import" not in errors[0]


def test_the_batch_follows_the_model_chosen_and_keeps_one_typed_for_it(h200, monkeypatch):
    app = _page(h200, monkeypatch)
    assert app.number_input(key="rec-batch-resnet50").value == 32  # no profile of resnet50
    app.selectbox(key="rec-model").set_value("resnet18")
    app = app.run()
    assert app.number_input(key="rec-batch-resnet18").value == 64  # its only profile's batch
    app.number_input(key="rec-batch-resnet18").set_value(48)
    app = _submit(app, 24.0)
    assert app.number_input(key="rec-batch-resnet18").value == 48
    assert "resnet18, batch 48 per worker" in " ".join(markdown.value for markdown in app.markdown)


def test_a_profile_set_aside_is_listed_apart_not_counted_as_an_instance(h200, monkeypatch):
    """The H200 profile ran in TF32 (PyTorch's default there); the job asked is fp32, so it is set aside."""
    app = _page(h200, monkeypatch)
    app.selectbox(key="rec-model").set_value("resnet18")
    app = app.run()
    app.selectbox(key="rec-precision").set_value("fp32")
    app.number_input(key="rec-budget").set_value(24.0)
    app.multiselect(key="rec-inst").set_value(["g5.xlarge"])
    next(button for button in app.button if button.label == "Recommend").click()
    app = app.run()
    assert not app.exception
    [set_aside] = [e for e in app.expander if e.label.startswith("Stored profiles of this job set aside")]
    assert set_aside.label.endswith("(1)")
    assert "set aside, it ran in tf32" in " ".join(markdown.value for markdown in set_aside.markdown)
    assert not any("not evaluated or not ranked" in warning.value for warning in app.warning)


def test_a_value_beyond_a_limit_is_named_by_the_forms_field(populated, monkeypatch):
    """The page said "batch_size: must be at most 1,048,576", the API's name for its field."""
    app = _page(populated, monkeypatch)
    app.number_input(key="rec-batch-resnet50").set_value(10_000_000)
    app = _submit(app, 24.0)
    errors = " ".join(error.value for error in app.error)
    assert "Batch size per worker\\: must be at most" in errors and "batch\\_size" not in errors


@pytest.mark.parametrize(("key", "field"), [("rec-batch-resnet50", "Batch size per worker"),
                                            ("rec-max-instances", "Most instances of one type"),
                                            ("rec-workers", "GPUs used per instance"),
                                            # said "the samples in one epoch" of an image model's field
                                            ("rec-samples-image", "Images in one epoch")])  # fmt: skip
def test_a_fraction_in_a_whole_number_field_is_named_not_cut(populated, monkeypatch, key, field):
    """The browser's whole-number inputs read 2.5 as 2 without a word; the fields take any number now, and
    the request names the one that is not whole."""
    app = _page(populated, monkeypatch)
    app.number_input(key=key).set_value(2.5)
    app = _submit(app, 24.0)
    errors = " ".join(error.value for error in app.error)
    assert f"{field}\\: expected a whole number" in errors, errors


def test_a_bad_input_shape_shows_its_error_alone(populated, monkeypatch):
    """A batch over its limit, then a good batch with a bad input shape: the page showed the input shape's
    error beside the earlier job's batch error, for a value no longer in its field."""
    app = _page(populated, monkeypatch)
    app.number_input(key="rec-batch-resnet50").set_value(10_000_000)
    app = _submit(app, 24.0)
    assert "Batch size per worker" in " ".join(error.value for error in app.error)
    app.number_input(key="rec-batch-resnet50").set_value(64)
    app.text_input(key="rec-shape-resnet50").set_value("0,0,0")
    next(button for button in app.button if button.label == "Recommend").click()
    errors = [error.value for error in app.run().error]
    assert len(errors) == 1 and errors[0].startswith("Input shape"), errors
    # and no invitation to describe the job beside it, as if nothing had been pressed
    assert not [info.value for info in app.info if "press Recommend" in info.value]


@pytest.mark.parametrize(("key", "field"), [("rec-budget", "Time budget"), ("rec-max-usd", "Cost limit")])
def test_a_budget_beyond_its_limit_is_named_by_the_forms_field(populated, monkeypatch, key, field):
    """The page said "budget_hours: must be at most 1e+06" and "max_usd: ...", the API's names."""
    app = _page(populated, monkeypatch)
    app.number_input(key=key).set_value(1e300)
    app.multiselect(key="rec-inst").set_value(["p3.8xlarge"])
    next(button for button in app.button if button.label == "Recommend").click()
    errors = " ".join(error.value for error in app.run().error)
    assert f"{field}\\: must be at most" in errors
    assert "budget\\_hours" not in errors and "max\\_usd" not in errors


def test_a_small_budget_is_shown_as_typed(populated, monkeypatch):
    """0.004 h was shown as 0.00, which reads as no budget, while the answer used 0.004."""
    app = _page(populated, monkeypatch)
    for key in ("rec-budget", "rec-max-usd"):
        assert app.number_input(key=key).proto.format == "%g", key


def test_the_form_proposes_the_profiled_input_shape_beside_the_profiled_batch(tmp_path, monkeypatch):
    """The profiled batch (8) beside the zoo's 3,224,224: the profile of 3x32x32 was set aside."""
    db = tmp_path / "rec.duckdb"
    ingest_result(db, result_doc("resnet10", batch_size=8, spec_extra={"input_shape": [3, 32, 32]}))
    app = _page(db, monkeypatch)
    app.selectbox(key="rec-model").set_value("resnet10")
    app = app.run()
    assert app.number_input(key="rec-batch-resnet10").value == 8
    assert app.text_input(key="rec-shape-resnet10").value == "3,32,32"


def test_no_budget_and_no_cost_limit_is_said_in_the_pages_words(tmp_path, monkeypatch):
    """It said "give budget_hours (a time budget), max_usd (a cost limit) or both": the API's names."""
    app = _submit(_page(tmp_path / "r.duckdb", monkeypatch), 0.0)
    said = " ".join(error.value for error in app.error)
    assert "give a time budget, a cost limit or both" in said and "budget_hours" not in said


def test_a_request_is_not_run_again_on_another_database(populated, tmp_path, monkeypatch):
    """After a switch of database, the last request (made on the other one's catalog and profiles) was run
    there at once; now the page waits for Recommend, and the first database's answer is back on return."""
    app = _submit(_page(populated, monkeypatch), 24.0)
    assert any(markdown.value == "### 1 x p3.16xlarge" for markdown in app.markdown)
    app.session_state["stash_db_path"] = str(tmp_path / "other.duckdb")
    app = app.run()
    assert not app.exception
    assert not any(markdown.value.startswith("### ") for markdown in app.markdown)
    assert any("press Recommend" in info.value for info in app.info)
    app.session_state["stash_db_path"] = str(populated)
    app = app.run()
    assert any(markdown.value == "### 1 x p3.16xlarge" for markdown in app.markdown)


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [("rec-batch-resnet50", 0, "Batch size per worker"), ("rec-epochs", 0.0, "Epochs"),
     ("rec-budget", -5.0, "Time budget"), ("rec-max-instances", 0, "Most instances of one type"),
     ("rec-workers", -1, "GPUs used per instance")],
)  # fmt: skip
def test_a_value_below_a_fields_bound_is_named_on_recommend_not_kept_out_in_the_browser(
    populated, monkeypatch, key, value, field
):
    """The browser kept a number past a field's bound out of the form (a small red mark) and Recommend then
    did nothing with no word; a negative budget would have been read as none."""
    app = _page(populated, monkeypatch)
    app.number_input(key=key).set_value(value)
    app.multiselect(key="rec-inst").set_value(["p3.8xlarge"])
    next(button for button in app.button if button.label == "Recommend").click()
    errors = " ".join(error.value for error in app.run().error)
    assert f"{field}\\: must be" in errors, errors


def test_an_answer_for_another_model_says_so(populated, monkeypatch):
    app = _submit(_page(populated, monkeypatch), 24)
    assert not [warning for warning in app.warning if "the model chosen when" in warning.value]
    app.selectbox(key="rec-model").set_value("resnet18").run()
    said = [warning.value for warning in app.warning if "the model chosen when" in warning.value]
    assert said and said[0].startswith("The answer below is for resnet50")


def test_rows_an_older_stash_seeded_are_named_and_refreshed_from_the_page(tmp_path, monkeypatch):
    """The command's way out (`stash instances seed`) is a button here: pressed, the rows take this Stash's
    values, the answer is evaluated again on them, and the warning is gone."""
    from stash_core import store
    from stash_core.catalog import get_instance, seed_catalog

    db = tmp_path / "older.duckdb"
    seed_catalog(db)
    with store.connect(db) as con:  # as an older Stash left them: no network figure, origin still builtin
        con.execute("UPDATE instances SET network_gbps = NULL WHERE name IN ('p3.8xlarge', 'p3.16xlarge')")
    app = _submit(_page(db, monkeypatch), 24.0)
    assert not app.exception
    warned = [warning.value for warning in app.warning if "older Stash" in warning.value]
    assert len(warned) == 1 and "2 built-in instance(s)" in warned[0] and "the button below" in warned[0]
    assert "stash instances seed" not in warned[0]
    next(button for button in app.button if button.key == "rec-catalog-refresh").click()
    app = app.run()
    assert not app.exception
    assert not any("older Stash" in warning.value for warning in app.warning)
    assert any("2 built-in instance(s) of the catalog now hold" in note.value for note in app.success)
    assert get_instance(db, "p3.8xlarge")["network_gbps"] is not None


def test_each_bar_of_where_the_time_goes_has_its_spread_across_its_end(populated, monkeypatch):
    """The page gave the chart the table's words for each option's source ("◇ predicted ±49%"), in which no
    option read as predicted: no bar had its spread, though the caption says each has."""
    import pandas as pd
    import pyarrow as pa

    app = _submit(_page(populated, monkeypatch), 24.0)
    assert not app.exception
    frames = [
        pa.ipc.open_stream(dataset.data.data).read_all().to_pandas()
        for chart in app.get("vega_lite_chart") if "step_low" in chart.proto.spec
        for dataset in chart.proto.datasets
    ]  # fmt: skip
    drawn = pd.concat([frame for frame in frames if "step_low" in frame])
    predicted = drawn[drawn["source"].astype(str).str.contains("predicted")]
    # one line a bar (on its last part): every predicted bar has one, from below its step to above it
    bars = predicted.groupby("run_label")[["step_low", "step_high"]].max()
    assert len(bars) and bars.notna().all().all() and (bars["step_low"] < bars["step_high"]).all()


def test_an_unknown_model_is_said_in_the_pages_words(tmp_path, monkeypatch):
    """The command's advice ("see `stash models`") showed on the page with its backticks, naming a command
    where the page has a list to choose from."""
    db = tmp_path / "empty.duckdb"
    monkeypatch.setenv("STASH_DB", str(db))
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    app.session_state["stash_db_path"] = str(db)
    app.session_state["rec-model"] = "nosuchmodel"  # typed: the list takes new names
    app = _submit(app.run(), 24.0)
    said = " ".join(error.value for error in app.error)
    assert "not in the zoo" in said and "choose one from the Model list" in said and "`" not in said
