"""What a recommendation says besides its ranking: each price with its date, region and source, prices older
than 90 days named, options within the stated error of the best called a tie, durations in readable units."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd

from stash_core.decide.recommend.explain import PRICE_AGE_DAYS, _thin_margin, _tie, stale_prices
from stash_core.units import duration_words


def test_durations_read_in_their_own_unit():
    assert [duration_words(s) for s in (0.5, 42, 180, 4680, 2 * 86400)] == ["0.50 s", "42 s", "3.0 min", "1.3 h", "2.0 d"]
    assert duration_words(None) == "-" and duration_words(float("nan")) == "-"


def _options(**columns) -> pd.DataFrame:
    base = {"config": ["1 x a", "1 x b", "1 x c"], "training_usd": [10.0, 10.5, 20.0], "usd_per_h": [1.0, 1.0, 2.0],
            "feasible": [True, True, True], "expected_error": [0.2, 0.2, 0.2],
            "price_date": [date.today()] * 3}  # fmt: skip
    return pd.DataFrame({**base, **columns})


def test_options_within_the_stated_error_of_the_best_are_a_tie_and_others_are_not():
    options = _options()
    line = _tie(options, options.iloc[0].to_dict())
    assert line.startswith("a tie: 1 x b cost") and "1 x c" not in line and "±20%" in line
    assert _tie(_options(expected_error=[0.01] * 3), _options(expected_error=[0.01] * 3).iloc[0].to_dict()) == ""
    # measured compute, predicted communication: the communication's error makes the tie
    comm_only = _options(expected_error=[None] * 3, comm_error=[0.08] * 3)
    assert _tie(comm_only, comm_only.iloc[0].to_dict()).startswith("a tie: 1 x b cost")


def test_a_best_within_the_budget_by_less_than_its_stated_error_is_said_to_be_so():
    """16.3 h of a 16.4 h budget at ±49% read "meets the constraints" and nothing more."""
    best = {"config": "1 x a2-ultragpu-2g", "training_h": 16.3, "expected_error": 0.41, "comm_error": 0.08}
    line = _thin_margin(best, {"budget_hours": 16.4})
    said = "at +49% it takes 24.3 h, over the 16.4 h; a profile of the job on a2-ultragpu-2g measures it"
    assert line == f"its time is under the budget by less than its stated error (±49%): {said}"
    assert _thin_margin(best, {"budget_hours": 48.0}) == ""  # 24.3 h: within it even at +49%
    assert _thin_margin(best, {"budget_hours": None, "max_usd": 500.0}) == ""  # no time budget
    assert _thin_margin({**best, "expected_error": None, "comm_error": None}, {"budget_hours": 16.4}) == ""


def test_old_and_undated_prices_are_named():
    old = date.today() - timedelta(days=PRICE_AGE_DAYS + 1)
    line = stale_prices(_options(price_date=[old, date.today(), None]))
    assert old.isoformat() in line and "1 price(s) have no date" in line
    assert stale_prices(_options()) == ""


def test_every_option_carries_its_prices_date_region_and_source(tmp_path):
    from stash_core.decide.recommend import recommend

    result = recommend(tmp_path / "x.duckdb", "resnet18", 32, 1, 10_000, budget_hours=10, instances=["g5.xlarge"])
    option = result.to_json()["options"][0]
    assert option["price_date"] and option["price_source"] and "price_region" in option
    # a price from a provider's catalog: the region its source names (it was null beside "region us-east-1")
    result = recommend(tmp_path / "x.duckdb", "resnet18", 32, 1, 10_000, budget_hours=10,
                       instances=["g6.12xlarge"])  # fmt: skip
    option = result.to_json()["options"][0]
    assert "region us-east-1" in option["price_source"] and option["price_region"] == "us-east-1"


def test_an_instance_without_a_spot_price_is_named_not_dropped(tmp_path):
    """With --spot, instances asked for that had no spot price vanished from the table and from
    not_predicted without a word."""
    from stash_core.catalog import add_instance
    from stash_core.decide.recommend import recommend

    db = tmp_path / "x.duckdb"
    for name, spot in (("priced", 0.5), ("unpriced", None)):
        add_instance(db, name=name, accelerator="NVIDIA A10G 24 GB", accelerator_count=1, vcpus=4,
                     network_gbps=10, on_demand_usd_per_h=1.0, spot_usd_per_h=spot)  # fmt: skip
    both = ["priced", "unpriced"]
    result = recommend(db, "resnet18", 32, 1, 10_000, budget_hours=10, spot=True, instances=both,
                       max_instances=2)  # fmt: skip
    assert set(result.ranked["instance"]) == {"priced"}
    assert result.excluded == [
        "unpriced: no spot price in the catalog (set one with `stash instances set`), so its 2 "
        "configuration(s) have no cost and are not ranked (listed with --all)"
    ]
    refused = result.to_json()["not_predicted"]
    assert [row["instance"] for row in refused] == ["unpriced"]
    on_demand = recommend(db, "resnet18", 32, 1, 10_000, budget_hours=10, instances=both)
    assert on_demand.excluded == []


def test_a_data_set_of_less_than_one_batch_is_refused_and_too_many_workers_for_it_are_named(tmp_path):
    """90 epochs of 10 samples at batch 64 were costed as one 64-sample step each (0.07 s an epoch on 32
    workers): the drop_last rule of an epoch gives no step at all."""
    import pytest

    from stash_core.decide.recommend import recommend
    from stash_core.errors import UsageError

    with pytest.raises(UsageError, match="an epoch of 10 samples holds no full batch of 64"):
        recommend(tmp_path / "x.duckdb", "resnet18", 64, 90, 10, budget_hours=1, instances=["g5.xlarge"])
    # 100 samples: one GPU gets a batch of 64, each of 4 GPUs 25 samples
    result = recommend(tmp_path / "x.duckdb", "resnet18", 64, 1, 100, budget_hours=1,
                       instances=["g5.xlarge", "g5.12xlarge"], max_instances=2)  # fmt: skip
    options = result.options
    assert set(zip(options["instance"], options["instance_count"], strict=True)) == {("g5.xlarge", 1)}
    said = "1 x g5.12xlarge: an epoch of 100 samples over 4 workers"
    assert any(line.startswith(said) for line in result.excluded)


def test_why_a_dearer_option_loses_never_names_two_costs_alike():
    from stash_core.decide.recommend.explain import _why_not

    best = {"config": "1 x a", "usd_per_h": 1.0, "training_usd": 0.1791, "epoch_s": 10.0, "training_h": 0.18,
            "workers_total": 1}  # fmt: skip
    option = {**best, "config": "1 x b", "usd_per_h": 0.9, "training_usd": 0.1794, "epoch_s": 10.0,
              "training_h": 0.2, "meets_time": True, "meets_cost": True, "source": "measured"}  # fmt: skip
    line = _why_not(option, best, {"budget_hours": 1.0})
    assert "the training costs $0.1794 against $0.1791" in line


def test_old_prices_are_a_warning_with_a_recommendation_or_without_one(tmp_path):
    """The line on old prices was among the explanations (JSON `warnings` stayed empty, and a script that
    read them never saw that a price was years old), and was not said at all when nothing met the
    constraints."""
    from stash_core.catalog import add_instance
    from stash_core.decide.recommend import recommend

    db = tmp_path / "x.duckdb"
    old = (date.today() - timedelta(days=PRICE_AGE_DAYS + 30)).isoformat()
    add_instance(db, name="old", accelerator="NVIDIA A10G 24 GB", accelerator_count=1, vcpus=4,
                 network_gbps=10, on_demand_usd_per_h=1.0, price_date=old)  # fmt: skip
    for budget_hours, recommended in ((100.0, True), (1e-6, False)):
        answer = recommend(db, "resnet18", 32, 1, 10_000, budget_hours=budget_hours, instances=["old"])
        said = answer.to_json()
        assert (said["recommended"] is not None) == recommended
        warned = [line for line in said["warnings"] if f"prices dated {old} are older than" in line]
        assert warned, said["warnings"]
        assert not [line for line in said["explanations"] if "prices dated" in line]


def test_an_old_price_an_explanation_quotes_is_warned_of_too(tmp_path):
    """An explanation quoted "old costs $0.50/h" for an option over the budget, and the warning named only
    the feasible options' price dates."""
    from stash_core.catalog import add_instance
    from stash_core.decide.recommend import recommend

    db = tmp_path / "x.duckdb"
    old = (date.today() - timedelta(days=PRICE_AGE_DAYS + 30)).isoformat()
    gpu = dict(accelerator="NVIDIA A10G 24 GB", accelerator_count=1, vcpus=4, network_gbps=10)
    add_instance(db, name="old", **gpu, on_demand_usd_per_h=0.5, price_date=old)
    add_instance(db, name="new", accelerator="NVIDIA H100 SXM 80 GB", accelerator_count=1, vcpus=26,
                 network_gbps=100, on_demand_usd_per_h=3.0, price_date=date.today().isoformat())  # fmt: skip
    asked = dict(instances=["old", "new"], max_instances=1)
    hours = recommend(db, "resnet18", 32, 1, 1_000_000, budget_hours=1e6, **asked).options
    budget = float(hours["training_h"].mean())  # between the two: only new meets it
    said = recommend(db, "resnet18", 32, 1, 1_000_000, budget_hours=budget, **asked).to_json()
    assert said["recommended"]["instance"] == "new"
    assert any("1 x old costs $" in line for line in said["explanations"]), said["explanations"]
    assert any(f"prices dated {old} are older than" in line for line in said["warnings"]), said["warnings"]


def test_profiles_on_machines_the_catalog_lacks_are_named_one_instance_an_entry(tmp_path):
    """not_predicted held {"instance": "profiles on lab-a, lab-b", ...}: not an instance's name."""
    from result_docs import result_doc

    from stash_core.decide.recommend import recommend
    from stash_core.store import ingest_result

    db = tmp_path / "x.duckdb"
    for label in ("lab-a", "lab b"):
        ingest_result(db, result_doc("resnet18", instance=label, workers=1, batch_size=16))
    answer = recommend(db, "resnet18", 16, 1, 10_000, budget_hours=10).to_json()
    named = {entry["instance"]: entry["reason"] for entry in answer["not_predicted"]}
    assert "profiled, but not in the instance catalog" in named["lab-a"]
    assert "`stash instances add 'lab b' --on-demand-usd-per-h ...`" in named["lab b"]
    assert not any(name.startswith("profiles on") for name in named)
