"""What a catalog row stored as given may get wrong later, said wherever a row is written."""

from __future__ import annotations

import pandas as pd
import pytest

from stash_core.catalog import COLUMNS, apply_catalog_edits, list_instances
from stash_core.catalog.accelerators import match_accelerator
from stash_core.catalog.row_warnings import row_problems, row_warnings, unknown_accelerator

BOX = {"name": "box", "accelerator": "NVIDIA T4 16 GB", "accelerator_count": 1, "interconnect": "none",
       "on_demand_usd_per_h": 1.0, "spot_usd_per_h": 0.3}  # fmt: skip


def test_a_sound_row_has_no_warning():
    assert row_warnings(BOX) == []


def test_each_kind_of_problem_is_named():
    row = {**BOX, "accelerator": "V10O", "accelerator_count": 4, "on_demand_usd_per_h": 0.0,
           "spot_usd_per_h": 0.5}  # fmt: skip
    said = row_problems(row)
    assert set(said) == {"spot_above_on_demand", "free", "unknown_gpu", "no_gpu_link"}
    assert said["free"].startswith("box's on-demand price is $0/h: recommend and spot will take it as free")
    assert "'V10O' is not in Stash's accelerator table (did you mean" in said["unknown_gpu"]
    assert said["no_gpu_link"].startswith("box has 4 GPUs and no GPU link between them")


def test_both_prices_free_are_said_in_one_line():
    said = row_warnings({**BOX, "on_demand_usd_per_h": 0, "spot_usd_per_h": 0})
    assert said == ["box's on-demand and spot prices are $0/h: recommend and spot will take it as free and "
                    "rank it first"]  # fmt: skip


def test_only_the_fields_given_repeat_what_they_said():
    row = {**BOX, "on_demand_usd_per_h": 0, "spot_usd_per_h": 0, "accelerator_count": 8}
    assert row_warnings(row, {"vcpus"}) == []  # an edit of another field says nothing again
    assert [kind for kind in row_problems(row, {"interconnect"})] == ["no_gpu_link"]


def test_the_dashboard_editor_says_the_warnings_of_what_it_stored(tmp_path):
    """The Recommend page's catalog editor stored a $0 price and an unknown GPU without a word."""
    db = tmp_path / "cat.duckdb"
    before = list_instances(db)[list(COLUMNS)]
    after = before.copy()
    after.loc[after["name"] == "g5.xlarge", "spot_usd_per_h"] = 0.0
    new_row = {"name": "lab-box", "accelerator": "H100 PCIe 80GB", "accelerator_count": 2,
               "on_demand_usd_per_h": 1.5}  # fmt: skip
    after = pd.concat([after, pd.DataFrame([new_row])], ignore_index=True)
    saved = apply_catalog_edits(db, before, after)
    assert (saved.changed, saved.added) == (["g5.xlarge"], ["lab-box"])
    assert saved.warnings[0].startswith("g5.xlarge's spot price is $0/h")
    assert any("lab-box has 2 GPUs and no GPU link" in said for said in saved.warnings)
    assert len(saved.warnings) == 2  # the name 'H100 PCIe 80GB' is the table's: no unknown GPU


def test_a_price_above_any_instance_s_is_said():
    """A price of $1e15/h was stored by the catalog editor without a word (a $0 one was warned of)."""
    said = row_problems({**BOX, "on_demand_usd_per_h": 1e15})
    assert set(said) == {"dear"}
    assert said["dear"] == ("box's on-demand price $1e+15/h is above $1,000/h, more than any "
                            "cloud instance costs: give it in USD per hour")  # fmt: skip
    assert row_problems({**BOX, "on_demand_usd_per_h": 98.32}) == {}
    assert row_problems({**BOX, "on_demand_usd_per_h": 5000.0}, {"vcpus"}) == {}  # said when it was written


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("Tesla V10", "did you mean V100"), ("NVIDIA A1000", "did you mean A100"), ("rtx 4080", "RTX4090")],
)
def test_an_unknown_gpu_is_compared_without_the_vendors_words(typed, meant):
    """"Tesla V10" got no suggestion: every name beside the vendor's words was too far from "V100"; and one
    GPU's spellings (RTX4090, RTX-4090) filled the suggestions of another."""
    said = unknown_accelerator({"accelerator": typed, "name": "box"})
    assert said is not None and meant in said, said
    suggested = said.split("(did you mean ", 1)[1].split("?)", 1)[0].split(", ")
    rows = {found.accelerator.name for name in suggested if (found := match_accelerator(name))}
    assert len(rows) == len(suggested), said
