"""The Models page in Streamlit's AppTest: empty database, and fits with held-out errors and a prediction."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc
from streamlit.testing.v1 import AppTest
from support import shown

from stash_core.store import ingest_result

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "pages" / "models.py"
MODELS = {
    "m1": (10e6, 20, 15),
    "m2": (40e6, 60, 41),
    "m3": (80e6, 100, 70),
    "m4": (120e6, 160, 110),
    "m5": (200e6, 40, 30),
}


def _page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("STASH_DB", str(db))
    monkeypatch.setenv("STASH_VALIDATE_CHARTS", "1")
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def test_empty_database_says_what_to_run(tmp_path, monkeypatch):
    app = _page(tmp_path / "empty.duckdb", monkeypatch)
    assert not app.exception
    assert any("stash campaign" in info.value for info in app.info)


def test_fits_errors_and_a_prediction(tmp_path, monkeypatch):
    db = tmp_path / "fits.duckdb"
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        stall_s = 0.002 + 1e-9 * grad_bytes + 1e-4 * tensors
        ingest_result(
            db,
            result_doc(
                name,
                grad_bytes=int(grad_bytes),
                grad_tensor_count=tensors,
                layer_count=layers,
                instance="lab",
                stalls={"compute": 0.3, "interconnect": stall_s},
            ),
        )
    app = _page(db, monkeypatch)
    assert not app.exception
    metrics = {metric.label: metric.value for metric in app.metric}
    assert metrics["Best model"] == "linear: bytes+tensors"
    assert metrics["Leave-one-model-out error"] == "0.0%"
    table = app.dataframe[0].value
    assert table.iloc[0]["model"] == "linear: bytes+tensors" and bool(table.iloc[0]["best"])
    assert "Published performance predictors" in " ".join(caption.value for caption in app.caption)
    # no probe stands behind the alpha-beta row: its note named `stash fit`'s flags, no field of the page
    assert not any("--beta-s-per-byte" in str(note) for note in table["note"])
    app.selectbox(key="models-feature").set_value("grad_tensor_count").run()
    assert not app.exception
    app.text_input[0].set_value("resnet18")
    app.button[0].click().run()
    assert not app.exception
    prediction = app.dataframe[-1].value
    assert list(prediction["stall"]) == ["interconnect"]
    assert list(prediction.columns)[:3] == ["stall", "configuration", "status"]  # why, before the figures
    assert prediction.iloc[0]["by"] == "linear: bytes+tensors"
    expected_s = 0.002 + 1e-9 * 46_758_048 + 1e-4 * 62
    assert prediction.iloc[0]["predicted_ms"] == pytest.approx(expected_s * 1e3, rel=5e-3)
    assert prediction.iloc[0]["predicted_ms"] == float(f"{expected_s * 1e3:.3g}")  # three figures, no more
    # another widget of the page reruns it: the prediction stays (it was lost with every rerun)
    app.selectbox(key="models-feature").set_value("layer_count").run()
    assert not app.exception
    assert app.dataframe[-1].value.iloc[0]["predicted_ms"] == pytest.approx(expected_s * 1e3, rel=5e-3)
    assert any("**resnet18**" in block.value for block in app.markdown)
    # far beyond the profiled gradients: the cell says its status, the note is said whole under the table
    app.text_input[0].set_value("vgg16")
    app.button[0].click().run()
    far = app.dataframe[-1].value.iloc[0]
    assert far["status"] == "predicted" and not app.exception
    notes = " ".join(shown(caption.value) for caption in app.caption)
    assert "extrapolated: gradient bytes 528 MiB is far outside" in notes and "inside that range" in notes
    # kept per database: another database's page does not show it
    other = tmp_path / "other.duckdb"
    ingest_result(other, result_doc("m1", instance="lab", stalls={"compute": 0.3, "interconnect": 0.01}))
    app.session_state["stash_db_path"] = str(other)
    monkeypatch.setenv("STASH_DB", str(other))
    app.run()
    assert not app.exception and any(button.label == "Predict" for button in app.button)
    assert not any("**resnet18**" in block.value for block in app.markdown)


def test_network_stall_across_bandwidths_and_a_lone_model(tmp_path, monkeypatch):
    db = tmp_path / "net.duckdb"
    ingest_result(db, result_doc("lonely", instance="solo", stalls={"compute": 0.3, "interconnect": 0.02}))
    for name, (grad_bytes, tensors, layers) in list(MODELS.items())[:4]:
        for rate, gbps in (("1gbit", 1.0), ("500mbit", 0.5)):
            network_s = 0.8 * 1.5 * grad_bytes * 8 / (gbps * 1e9)
            doc = result_doc(
                name,
                grad_bytes=int(grad_bytes),
                grad_tensor_count=tensors,
                layer_count=layers,
                instance=f"emu@{rate}",
                nodes=2,
                stalls={"compute": 0.3, "interconnect": 0.01, "network": network_s},
            )
            ingest_result(db, doc)
    app = _page(db, monkeypatch)
    assert not app.exception
    app.selectbox(key="models-group").set_value("cpu / 2 workers / solo").run()
    assert not app.exception
    assert any("too few profiled models" in info.value for info in app.info)
    app.radio(key="models-stall").set_value("network").run()
    assert not app.exception
    table = app.dataframe[0].value
    assert {"alpha-beta", "wire+buckets (all bandwidths)"} <= set(table["model"])
    assert table["lobo_mape"].notna().any()


def test_an_uploaded_model_s_error_names_the_file_as_uploaded(tmp_path, monkeypatch):
    """A factory not in the file was said of the server's kept copy ('.stash-jobs/models/tiny_b39f....py')."""
    db = tmp_path / "fits.duckdb"
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        ingest_result(db, result_doc(name, grad_bytes=int(grad_bytes), grad_tensor_count=tensors,
                                     layer_count=layers, instance="lab",
                                     stalls={"compute": 0.3, "interconnect": 0.01}))  # fmt: skip
    app = _page(db, monkeypatch)
    source = (REPO / "examples" / "models" / "tiny_cnn.py").read_bytes()
    app.file_uploader[0].set_value(("tiny.py", source, "text/x-python"))
    app.text_input[1].set_value("nosuch")
    app.button[0].click().run()
    errors = " ".join(error.value for error in app.error)
    assert "tiny.py\\:nosuch" in errors and ".stash-jobs" not in errors  # (shown as data: ':' escaped)


def test_a_group_named_by_a_label_its_machine_contradicts_says_so(tmp_path, monkeypatch):
    """The page's first configuration was "cpu / 2 workers / g4dn.xlarge", made of a CPU run that Compare and
    Recommend set aside for its label, with no word."""
    db, stalls = tmp_path / "r.duckdb", {"compute": 0.1, "interconnect": 0.02}
    doc = result_doc("resnet18", instance="g4dn.xlarge", workers=2, stalls=stalls)
    ingest_result(db, doc)
    app = _page(db, monkeypatch)
    assert not app.exception
    said = " ".join(warning.value for warning in app.warning)
    assert "g4dn.xlarge" in said and doc["run_id"] in said and "fitted in the group named" in said


def test_runs_left_out_of_the_fits_are_named_on_the_page(tmp_path, monkeypatch):
    """`stash fit` named the runs it left out (an impossible breakdown); the page, where they are among no
    configuration's points, said nothing of them."""
    from stash_core.analysis.coherence import IMPOSSIBLE

    db, stalls = tmp_path / "r.duckdb", {"compute": 0.1, "interconnect": 0.02}
    ingest_result(db, result_doc("resnet18", instance="lab", workers=2, stalls=stalls))
    left = result_doc("resnet34", instance="lab", workers=2, stalls=stalls, warnings=[f"{IMPOSSIBLE}: x"])
    ingest_result(db, left)
    app = _page(db, monkeypatch)
    assert not app.exception
    [expander] = [e for e in app.expander if e.label.startswith("Runs left out of the interconnect fits")]
    assert expander.label.endswith("(1)") and left["run_id"] in expander.markdown[0].value
