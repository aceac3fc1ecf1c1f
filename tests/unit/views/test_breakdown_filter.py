"""The breakdown filter as queried: values the database offers no option for are dropped, as the page's
widgets drop them when drawn."""

from __future__ import annotations

from stash_core.views.breakdown import RunFilter, status_choices, within_options

OPTIONS = {
    "models": ["mlp", "vgg11"],
    "batch_sizes": [32],
    "instances": ["box"],
    "workers": [1, 2],
    "nodes": [1],
    "statuses": ["failed"],
}


def test_values_without_an_option_are_dropped_and_the_rest_kept() -> None:
    chosen = RunFilter(
        models=["resnet18", "vgg11"], batch_sizes=[64], instances=["box", "gone"], workers=[2], nodes=[2],
        statuses=["completed", "failed", "interrupted"], limit=7,
    )  # fmt: skip
    kept = within_options(chosen, OPTIONS)
    assert kept == RunFilter(
        models=["vgg11"], batch_sizes=[], instances=["box"], workers=[2], nodes=[],
        statuses=["completed", "failed"], limit=7,
    )  # fmt: skip


def test_completed_is_always_a_status_choice() -> None:
    assert status_choices(OPTIONS) == ["completed", "failed"]
    assert status_choices({**OPTIONS, "statuses": ["completed", "abandoned"]}) == ["abandoned", "completed"]


def test_a_charts_rows_say_what_their_figures_are_in(tmp_path) -> None:
    """The chart data downloaded had the same header for seconds, shares and seconds per epoch: only the file
    name told 0.89 s from 0.89 of the iteration."""
    from result_docs import result_doc

    from stash_core import store
    from stash_core.views.breakdown import RunFilter, find_runs, stall_long_frame

    db = tmp_path / "r.duckdb"
    store.ingest_result(db, result_doc(stalls={"compute": 0.2, "cpu": 0.05}))
    runs, _ = find_runs(db, RunFilter())
    expected = {"seconds": "s per iteration", "share": "share of the iteration", "epoch_s": "s per epoch"}
    for measure, unit in expected.items():
        assert set(stall_long_frame(runs, measure)["unit"]) == {unit}, measure


def test_a_run_without_an_instance_label_is_named_so_beside_labelled_ones() -> None:
    """A database of labelled runs and one profiled without --instance: the charts' bars read "· nan ·"
    (the frame holds NaN, not None, where other rows have a label)."""
    import pandas as pd

    from stash_core.views.breakdown import add_run_labels
    from stash_core.views.common import NO_INSTANCE

    frame = pd.DataFrame({"model": ["resnet10", "resnet10"], "batch_size": [8, 8], "workers_per_node": [2, 2],
                          "nodes": [1, 1], "instance": ["lab", float("nan")],
                          "run_id": ["20261204T230004Z-aaaa0003", "20261204T230005Z-aaaa0004"]})  # fmt: skip
    labels = list(add_run_labels(frame)["run_label"])
    assert "· lab ·" in labels[0] and f"· {NO_INSTANCE} ·" in labels[1] and "nan" not in labels[1]
