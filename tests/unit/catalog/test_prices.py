"""The hourly price of a catalog instance: a missing price is a status line, never a guess."""

from __future__ import annotations

import pytest

from stash_core.catalog.prices import hourly_price
from stash_core.errors import UsageError


def test_a_catalog_price_is_read_for_each_pricing():
    instance = {"name": "p2.8xlarge", "on_demand_usd_per_h": 7.20, "spot_usd_per_h": 2.16}
    assert hourly_price(instance, "p2.8xlarge") == (pytest.approx(7.20), "ok")
    assert hourly_price(instance, "p2.8xlarge", "spot") == (pytest.approx(2.16), "ok")


def test_missing_prices_are_reported_not_invented():
    no_spot = {"name": "p3.8xlarge", "on_demand_usd_per_h": 12.24}
    assert hourly_price(no_spot, "p3.8xlarge", "spot") == (
        None,
        "no spot price for instance p3.8xlarge (set one with `stash instances set`)",
    )
    price, status = hourly_price(None, "my-laptop")
    assert price is None and "no price for instance my-laptop" in status
    assert hourly_price(None, None)[1].startswith("no price")


def test_an_unknown_pricing_is_refused():
    with pytest.raises(UsageError, match="pricing must be one of"):
        hourly_price({"on_demand_usd_per_h": 1.0}, "x", "reserved")


def test_a_spot_price_above_on_demand_is_kept_and_warned_about(tmp_path, capsys):
    from stash_core.cli.main import main

    db = str(tmp_path / "r.duckdb")
    box = ["--provider", "local", "--accelerator-count", "0", "--vcpus", "2", "--memory-gib", "8", "--db", db]
    prices = ["--on-demand-usd-per-h", "30", "--spot-usd-per-h", "50"]
    assert main(["instances", "add", "box", *box, *prices]) == 0
    assert "warning: box's spot price $50/h is above its on-demand $30/h" in capsys.readouterr().err
    assert main(["instances", "set", "box", "--spot-usd-per-h", "10", "--db", db]) == 0
    assert "warning" not in capsys.readouterr().err


def test_an_instance_left_without_prices_keeps_no_price_date(tmp_path):
    from stash_core.catalog import get_instance, set_instance

    db = tmp_path / "r.duckdb"
    row = set_instance(db, "g5.xlarge", on_demand_usd_per_h=None, spot_usd_per_h=None)
    assert row["price_date"] is None and get_instance(db, "g5.xlarge")["price_date"] is None
    assert set_instance(db, "g5.xlarge", on_demand_usd_per_h=1.0)["price_date"] is not None


def test_a_price_of_zero_is_kept_and_warned_about(tmp_path, capsys):
    """A free instance was taken silently, and recommend then named it the cheapest at $0.00."""
    from stash_core.cli.main import main

    db = str(tmp_path / "r.duckdb")
    box = ["--provider", "local", "--accelerator-count", "0", "--vcpus", "2", "--memory-gib", "8", "--db", db]
    assert main(["instances", "add", "free", *box, "--on-demand-usd-per-h", "0"]) == 0
    said = capsys.readouterr().err
    assert "warning: free's on-demand price is $0/h: recommend and spot will take it as free" in said
    assert "spot price" not in said  # none was given
    assert main(["instances", "set", "free", "--spot-usd-per-h", "0", "--db", db]) == 0
    assert capsys.readouterr().err.startswith("warning: free's spot price is $0/h")


def test_several_gpus_without_a_link_between_them_are_warned_about(tmp_path, capsys):
    """Set to 4 GPUs with no GPU link, the row was taken silently and predict refused it later."""
    from stash_core.cli.main import main

    db = str(tmp_path / "r.duckdb")
    assert main(["instances", "set", "g5.xlarge", "--accelerator-count", "4", "--db", db]) == 0
    assert "warning: g5.xlarge has 4 GPUs and no GPU link between them" in capsys.readouterr().err
    assert main(["instances", "set", "g5.xlarge", "--interconnect", "PCIe", "--db", db]) == 0
    assert "warning" not in capsys.readouterr().err
