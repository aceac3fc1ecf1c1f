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
