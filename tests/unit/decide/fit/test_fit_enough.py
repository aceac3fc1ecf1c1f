"""A fit from fewer points than its parameters plus two is "not enough profiles (n of m needed)", never the
best model; the CLI and the Models page data never show None for R² or an error."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import result_doc

from stash_core import views
from stash_core.cli.fit import format_fit_report
from stash_core.decide.fit import fit_stall_models, predict_stall
from stash_core.store import ingest_result

MODELS = {  # name: (gradient bytes, gradient tensors, layers)
    "m1": (10e6, 20, 15),
    "m2": (40e6, 60, 41),
    "m3": (80e6, 100, 70),
    "m4": (120e6, 160, 110),
    "m5": (200e6, 40, 30),
}


def family_db(tmp_path: Path, names: list[str], repeats: int = 1) -> Path:
    db = tmp_path / "fits.duckdb"
    for name in names:
        grad_bytes, tensors, layers = MODELS[name]
        for _ in range(repeats):
            ingest_result(
                db,
                result_doc(
                    name,
                    grad_bytes=int(grad_bytes),
                    grad_tensor_count=tensors,
                    layer_count=layers,
                    instance="lab",
                    stalls={"compute": 0.3, "interconnect": 0.002 + 1e-9 * grad_bytes + 1e-4 * tensors},
                ),
            )
    return db


def test_two_models_give_no_best_model_but_the_profiles_still_missing(tmp_path: Path) -> None:
    # Four runs, but of two models: a line through two DNNs (or a scale from them) cannot be checked.
    report = fit_stall_models(family_db(tmp_path, ["m1", "m2"], repeats=2))
    group = report.groups("interconnect")[0]
    assert report.best("interconnect", group) is None
    assert report.shortfall("interconnect", group) == (
        "not enough profiles (2 of 4 needed, each of a different model)"
    )
    summary = report.summary()
    assert not summary["best"].any() and not summary["enough_points"].any()
    text = format_fit_report(report)
    assert "no best model: not enough profiles (2 of 4 needed" in text
    assert "None" not in text and "nan" not in text.lower()
    assert "  * " not in text  # nothing is marked best
    answer = predict_stall(
        counts={"grad_bytes": 50e6, "grad_tensor_count": 50, "layer_count": 40},
        stall="interconnect",
        workers_per_node=2,
        report=report,
    )
    assert answer["stall_s"] is None and "not enough profiles (2 of 4 needed" in answer["status"]


def test_a_fit_needs_its_parameters_plus_two_models(tmp_path: Path) -> None:
    report = fit_stall_models(family_db(tmp_path, ["m1", "m2", "m3", "m4"]))
    group = report.groups("interconnect")[0]
    by_name = {model.name: model for model in report.models_for("interconnect", group)}
    assert by_name["linear: bytes"].enough_points  # 2 parameters, 4 models
    short = by_name["linear: bytes+tensors"]  # 3 parameters: 5 models needed
    assert not short.enough_points and short.shortfall == (
        "not enough profiles (4 of 5 needed, each of a different model)"
    )
    assert not short.best and report.best("interconnect", group).name in (
        "linear: bytes",
        "linear: tensors",
        "linear: layers",
    )
    text = format_fit_report(report, all_models=True)
    assert "linear: bytes+tensors" in text and "not enough profiles (4 of 5 needed" in text
    assert "None" not in text


def test_the_models_table_shows_figures_as_text_never_none(tmp_path: Path) -> None:
    report = fit_stall_models(family_db(tmp_path, ["m1", "m2", "m3"]))
    group = report.groups("interconnect")[0]
    table = views.models.models_table(report, "interconnect", group)
    assert list(table.columns) == views.models.TABLE_COLUMNS
    for column in ("r2", "lomo_mape", "lobo_mape"):
        assert all(isinstance(value, str) and value and value != "None" for value in table[column])
    short = table[table["model"] == "linear: bytes"].iloc[0]  # 2 parameters, 3 models: one short
    # said once, first in the note; in each figure column it made every such row eight lines tall
    assert (short["r2"], short["lomo_mape"], short["lobo_mape"]) == ("–", "–", "–")
    assert short["note"].startswith("not enough profiles (3 of 4 needed, each of a different model)")
    assert short["note"].count("not enough profiles") == 1 and not short["best"]
    assert short["coefficients"] == ""  # as `stash fit` shows none: its figures were shown beside the words
    assert views.models.group_shortfall(report, "interconnect", group).startswith(
        "not enough profiles (3 of 4"
    )


@pytest.mark.parametrize("residuals", [True, False])
def test_stash_fit_prints_no_none(tmp_path: Path, capsys, residuals: bool) -> None:
    from stash_core.cli.main import main

    db = family_db(tmp_path, ["m1", "m2"])
    argv = ["fit", "--db", str(db), *(["--residuals"] if residuals else [])]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "no best model: not enough profiles (2 of 4 needed" in out and "None" not in out and "NaN" not in out
    )


def test_a_network_bandwidth_asked_for_gets_its_wire_time_where_its_profiles_are_too_few(
    tmp_path: Path,
) -> None:
    """Two network profiles at 200 Mbit/s made `fit --predict --bandwidth 200mbit` say "no model" (exit 0 by
    the interconnect line), where a database with none of them gave the link's uncalibrated wire time."""
    db = tmp_path / "net.duckdb"
    for name in ("m1", "m2"):
        grad_bytes, tensors, layers = MODELS[name]
        doc = result_doc(name, grad_bytes=int(grad_bytes), grad_tensor_count=tensors, layer_count=layers,
                         instance="lab@200mbit", workers=1, nodes=2,
                         stalls={"compute": 0.3, "network": 0.01 + 4e-8 * grad_bytes})  # fmt: skip
        ingest_result(db, doc)
    counts = {"grad_bytes": 50e6, "grad_tensor_count": 50, "layer_count": 40}
    answer = predict_stall(db, counts=counts, stall="network", workers_per_node=1, nodes=2,
                           bandwidth_gbps=0.2)  # fmt: skip
    assert answer["stall_s"] is not None and "uncalibrated" in answer["method"], answer
    assert "not enough profiles (2 of" in answer["note"]


def test_the_residuals_table_leaves_out_a_model_the_summary_calls_unfitted(tmp_path: Path, capsys) -> None:
    """`fit --all-models --residuals` listed 'bytes+tensors+layers: not enough profiles (5 of 6 needed)', then
    printed fitted and held-out figures for it."""
    from stash_core.cli.main import main

    db = family_db(tmp_path, ["m1", "m2", "m3", "m4", "m5"])
    assert main(["fit", "--db", str(db), "--all-models", "--residuals"]) == 0
    summary, _, residuals = capsys.readouterr().out.partition("residual_s")
    assert "linear: bytes+tensors+layers" in summary and "not enough profiles (5 of 6 needed" in summary
    assert "linear: bytes+tensors " in residuals and "bytes+tensors+layers" not in residuals


def test_figure_columns_without_a_figure_in_any_row_are_left_out_of_the_pages_table(tmp_path: Path) -> None:
    report = fit_stall_models(family_db(tmp_path, ["m1", "m2"]))  # every fit is short of profiles
    table = views.models.models_table(report, "interconnect", report.groups("interconnect")[0])
    shown = views.models.without_empty_figures(table)
    assert not {"r2", "lomo_mape", "lobo_mape", "coefficients"} & set(shown.columns)
    assert shown["note"].str.startswith("not enough profiles").all()
    fuller = fit_stall_models(family_db(tmp_path / "more", ["m1", "m2", "m3", "m4", "m5"]))
    table = views.models.models_table(fuller, "interconnect", fuller.groups("interconnect")[0])
    assert "r2" in views.models.without_empty_figures(table).columns
