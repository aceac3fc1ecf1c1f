"""The instance catalog: seeded from the CSV, edits persist across connections, seeding never overwrites."""

from __future__ import annotations

import datetime

import pandas as pd
import pytest

from stash_core.catalog import (
    CATALOG_CSV,
    COLUMNS,
    add_instance,
    apply_catalog_edits,
    builtin_instances,
    get_instance,
    list_instances,
    seed_catalog,
    set_instance,
)
from stash_core.errors import UsageError
from stash_core.store import connect


def test_builtin_catalog_has_every_reference_row_with_date_and_source():
    frame = builtin_instances()
    expected = {
        "p2.xlarge",
        "p2.8xlarge",
        "p2.16xlarge",
        "p3.2xlarge",
        "p3.8xlarge",
        "p3.16xlarge",
        "g3.4xlarge",
        "g3.8xlarge",
        "g3.16xlarge",
        "g4dn.4xlarge",
        "g4dn.12xlarge",
        "g4dn.xlarge",
        "g5.xlarge",
        "p4d.24xlarge",
        "p5.48xlarge",
    }
    assert expected <= set(frame["name"])  # the hand-checked rows stay beside the generated ones
    assert frame["price_date"].notna().all() and frame["source"].notna().all()
    p3 = frame.set_index("name").loc["p3.16xlarge"]
    assert (p3["accelerator_count"], p3["vcpus"], p3["on_demand_usd_per_h"]) == (8, 64, 24.48)
    assert pd.isna(p3["spot_usd_per_h"])
    assert frame.set_index("name").loc["p2.8xlarge", "spot_usd_per_h"] == 2.16
    assert frame.set_index("name").loc["p3.2xlarge", "interconnect"] == "none"
    assert CATALOG_CSV.name == "instances.csv"


def test_every_catalog_gpu_is_a_variant_of_the_accelerator_table_and_generated_rows_say_their_catalog():
    from stash_core.catalog.accelerators import accelerator_table

    frame = builtin_instances()
    gpus = frame[frame["accelerator_count"] > 0]
    assert set(gpus["accelerator"]) <= set(accelerator_table())  # the table's own names, not look-alikes
    by_name = frame.set_index("name")
    assert by_name.loc["p5.48xlarge", "accelerator"] == "NVIDIA H100 SXM 80 GB"
    assert by_name.loc["p4d.24xlarge", "accelerator"] == "NVIDIA A100 SXM4 40 GB"
    generated = frame[frame["source"].str.startswith("SkyPilot catalog")]
    assert len(generated) > 0 and generated["source"].str.contains("region ").all()
    assert generated["source"].str.contains(r"catalog v\d+ \w+/vms.csv").all()


def test_every_builtin_gpu_instance_names_its_gpu_link_and_a_missing_network_says_why():
    """Ten Azure instances of several GPUs could never be predicted: the catalog named no GPU link for them,
    and their network was left blank where Azure's size tables give it."""
    frame = builtin_instances()
    gpus = frame[frame["accelerator_count"].fillna(0) > 0]
    assert not gpus[gpus["interconnect"].fillna("") == ""]["name"].tolist()
    several = gpus[gpus["accelerator_count"] > 1]
    assert (several["interconnect"] != "none").all()
    unknown = frame[frame["network_gbps"].isna()]
    assert all("not known to Stash" in source for source in unknown["source"]), unknown["name"].tolist()


def test_fresh_database_lists_builtin_rows_without_writing(tmp_path):
    db = tmp_path / "fresh.duckdb"
    frame = list_instances(db)
    assert len(frame) == len(builtin_instances())
    assert not frame["stored"].any()
    assert not db.exists()
    assert get_instance(db, "g5.xlarge")["on_demand_usd_per_h"] == pytest.approx(1.006)
    assert get_instance(db, "no-such-box") is None


def test_an_empty_duckdb_file_stores_no_row_of_the_catalog(tmp_path):
    """A DuckDB file without any table (a first writer that stopped before the schema) reads as a missing
    one: the built-in rows are listed, none of them stored (they were all `stored True`)."""
    import duckdb

    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    frame = list_instances(db)
    assert len(frame) == len(builtin_instances()) and not frame["stored"].any()
    assert get_instance(db, "g5.xlarge")["on_demand_usd_per_h"] == pytest.approx(1.006)


def test_seed_inserts_once_and_never_overwrites_edits(tmp_path):
    db = tmp_path / "cat.duckdb"
    assert seed_catalog(db) == len(builtin_instances())
    assert seed_catalog(db) == 0
    set_instance(db, "p3.8xlarge", on_demand_usd_per_h=11.0, spot_usd_per_h="3.5")
    assert seed_catalog(db) == 0
    row = get_instance(db, "p3.8xlarge")
    assert row["on_demand_usd_per_h"] == 11.0 and row["spot_usd_per_h"] == 3.5
    # A price edit is stamped with today's date and "user edit" unless told otherwise.
    assert row["price_date"] == datetime.date.today()  # the user's day
    assert row["source"] == "user edit"
    assert list_instances(db)["stored"].all()


def test_edits_persist_across_connections(tmp_path):
    db = tmp_path / "cat.duckdb"
    add_instance(
        db,
        name="lab-a100",
        provider="on-prem",
        accelerator="NVIDIA A100",
        accelerator_count=4,
        vcpus=64,
        memory_gib=512,
        network_gbps=100,
        on_demand_usd_per_h=8.0,
        source="our lab",
    )
    set_instance(db, "lab-a100", spot_usd_per_h=2.5, price_date="2026-01-31", source="internal rate card")
    with connect(db, read_only=True) as con:
        stored = con.execute(
            "SELECT accelerator_count, on_demand_usd_per_h, spot_usd_per_h, price_date, source FROM instances"
            " WHERE name = 'lab-a100'"
        ).fetchall()
    assert stored == [(4, 8.0, 2.5, datetime.date(2026, 1, 31), "internal rate card")]
    frame = list_instances(db).set_index("name")
    assert frame.loc["lab-a100", "stored"]
    assert len(frame) == len(builtin_instances()) + 1  # adding seeded the built-in rows too


def test_clearing_a_price(tmp_path):
    db = tmp_path / "cat.duckdb"
    set_instance(db, "p2.8xlarge", spot_usd_per_h="none")
    assert get_instance(db, "p2.8xlarge")["spot_usd_per_h"] is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"on_demand_usd_per_h": -1}, "must not be negative"),
        ({"spot_usd_per_h": "cheap"}, "must be a number"),
        ({"spot_usd_per_h": "inf"}, "must be a finite number"),
        ({"vcpus": "many"}, "vcpus must be a whole number, got 'many'"),
        ({"vcpus": 0}, "vcpus must be a whole number >= 1"),
        ({"accelerator_count": 1.5}, "whole number"),
        ({"network_gbps": 0}, "must be positive"),
        ({"price_date": "last week"}, "price_date"),
        # a typo in the year kept the price from ever being called old; import refused it, set did not
        ({"price_date": "2099-01-01"}, "price date 2099-01-01 is in the future"),
        # predict then took the V100 instance for a CPU machine, "no GPU and no profile of this job on it"
        ({"accelerator_count": 0}, "accelerator_count 0 beside the accelerator NVIDIA V100"),
        ({"colour": "red"}, "unknown instance field colour"),
        # accepted, then predict said "communication not predictable - interconnect foo" of every row
        ({"interconnect": "foo"}, "interconnect 'foo' is no GPU link predict knows; give NVSwitch, NVLink"),
        # a text holding a link's name was read as that link: predict priced NVSwitch for "PCIe only"
        ({"interconnect": "no NVSwitch, PCIe only"}, "interconnect 'no NVSwitch, PCIe only' is no GPU link"),
        ({"interconnect": "banana pcie"}, "interconnect 'banana pcie' is no GPU link"),
        ({}, "nothing to change"),
    ],
)
def test_bad_edits_are_usage_errors_and_change_nothing(tmp_path, fields, message):
    db = tmp_path / "cat.duckdb"
    before = get_instance(db, "p3.2xlarge")
    with pytest.raises(UsageError, match=message):
        set_instance(db, "p3.2xlarge", **fields)
    assert get_instance(db, "p3.2xlarge") == before


def test_a_name_with_a_comma_is_refused_as_no_command_could_select_it(tmp_path):
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match="holds a comma"):
        add_instance(db, name='=HYPERLINK("http://x","y")', vcpus=8)
    assert not db.exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("g:4", "holds a colon, which separates a name from its quota"),  # spot --instances g:4 is a quota
        ("all", "--instances all means every instance"),
        ("ALL", "--instances all means every instance"),
        ("zw\u200bx", "invisible character U\\+200B"),  # looked exactly like "zwx"
        ("line\u2028break", "invisible character U\\+2028"),
        # each was added beside the name it looks like, and shown as it
        ("nb\u00a0sp", "space character U\\+00A0, which looks like a plain space"),
        ("e\u0301", "not in Unicode's composed form"),
    ],
)
def test_a_name_no_command_could_select_or_tell_apart_is_refused(tmp_path, name, message):
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match=message):
        add_instance(db, name=name, vcpus=8)
    assert not db.exists()


def test_a_name_that_differs_from_one_in_the_catalog_only_in_case_is_refused(tmp_path):
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match="G5.XLARGE differs from g5.xlarge, already in the catalog, only in"):
        add_instance(db, name="G5.XLARGE", vcpus=8)
    assert "G5.XLARGE" not in set(list_instances(db)["name"])
    before = list_instances(db)[list(COLUMNS)]  # nor through the dashboard's editor
    after = pd.concat([before, pd.DataFrame([{"name": "P3.2XLARGE", "vcpus": 8}])], ignore_index=True)
    with pytest.raises(UsageError, match="P3.2XLARGE differs from p3.2xlarge"):
        apply_catalog_edits(db, before, after)


def test_a_gpu_count_without_a_gpu_is_refused(tmp_path):
    """`predict` read the missing accelerator as a GPU named "no accelerator"."""
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match="accelerator_count 4 and no accelerator named"):
        add_instance(db, name="lab-cpu", vcpus=8, accelerator_count=4)


def test_the_link_names_are_taken_in_any_case(tmp_path):
    db = tmp_path / "cat.duckdb"
    set_instance(db, "p3.2xlarge", interconnect="pcie peer-to-peer")
    assert get_instance(db, "p3.2xlarge")["interconnect"] == "pcie peer-to-peer"


def test_unknown_and_duplicate_instances(tmp_path):
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match="unknown instance 'p9.huge'"):
        set_instance(db, "p9.huge", vcpus=4)
    with pytest.raises(UsageError, match="already in the catalog"):
        add_instance(db, name="p3.2xlarge", vcpus=8)
    with pytest.raises(UsageError, match="needs a name"):
        add_instance(db, vcpus=8)


def test_dashboard_edits_are_applied_as_differences(tmp_path):
    db = tmp_path / "cat.duckdb"
    before = list_instances(db)[list(COLUMNS)]
    after = before.copy()
    after["price_date"] = after["price_date"].astype(str)  # an editor may hand dates back as text
    after.loc[after["name"] == "g5.xlarge", "spot_usd_per_h"] = 0.35
    new_row = {"name": "lab-box", "vcpus": 16, "accelerator": "NVIDIA A10G 24 GB", "accelerator_count": 2,
               "on_demand_usd_per_h": 1.5}  # fmt: skip
    after = pd.concat([after, pd.DataFrame([new_row])], ignore_index=True)
    edited, added, _ = apply_catalog_edits(db, before, after)
    assert edited == ["g5.xlarge"] and added == ["lab-box"]
    assert get_instance(db, "g5.xlarge")["spot_usd_per_h"] == 0.35
    assert get_instance(db, "lab-box")["accelerator_count"] == 2
    bad = list_instances(db)[list(COLUMNS)]
    broken = bad.copy()
    broken.loc[broken["name"] == "p3.2xlarge", "on_demand_usd_per_h"] = -2.0
    broken.loc[broken["name"] == "g5.xlarge", "spot_usd_per_h"] = 0.1
    with pytest.raises(UsageError, match="instance p3.2xlarge: on_demand_usd_per_h must not be negative"):
        apply_catalog_edits(db, bad, broken)
    assert get_instance(db, "g5.xlarge")["spot_usd_per_h"] == 0.35  # nothing stored


def test_a_shipped_row_priced_from_a_providers_catalog_has_the_region_its_source_names(tmp_path):
    """instances list showed '-' and recommend's JSON a null price_region beside 'region us-east-1 (default
    region)' in the price's source."""
    from stash_core.catalog import get_instance

    db = tmp_path / "c.duckdb"
    row = get_instance(db, "g6.12xlarge")
    assert "region us-east-1" in row["source"] and row["region"] == "us-east-1"
    assert get_instance(db, "p2.xlarge")["region"] is None  # its source names no region


def test_a_price_the_user_sets_is_not_said_to_be_for_the_old_prices_region(tmp_path):
    from stash_core.catalog import get_instance

    db = tmp_path / "c.duckdb"
    set_instance(db, "g6.12xlarge", on_demand_usd_per_h=4.0)
    assert get_instance(db, "g6.12xlarge")["region"] is None
    set_instance(db, "g6.16xlarge", on_demand_usd_per_h=3.0, region="eu-west-1")
    assert get_instance(db, "g6.16xlarge")["region"] == "eu-west-1"
    set_instance(db, "g6.24xlarge", vcpus=96)  # no price changed: its region stays
    assert get_instance(db, "g6.24xlarge")["region"] == "us-east-1"


def test_the_interconnects_predict_reads_are_taken():
    from stash_core.catalog.fields import INTERCONNECTS, clean

    for text in (*INTERCONNECTS, "NVSwitch (NVLink 4)", "PCIe Gen4", "PCIe, 8-peer limit", "None", None):
        assert clean({"interconnect": text}, partial=True)["interconnect"] == (text.strip() if text else None)
    assert clean({"interconnect": "xgmi"}, partial=True, stored=True)  # a row stored before is read as it is


def test_a_row_an_older_version_stored_blocks_no_other_edit_and_keeps_its_link(tmp_path):
    """'8x NVSwitch' (taken before the link had to come first) and a source holding U+200B: every edit of
    the dashboard's catalog editor was refused by them, and predict lost the row's NVSwitch."""
    from stash_core.catalog.accelerators import find_accelerator
    from stash_core.decide.predict.collectives import intra_class

    db = tmp_path / "cat.duckdb"
    add_instance(db, name="my-h100", vcpus=8, accelerator="NVIDIA H100 SXM5 80 GB", accelerator_count=8,
                 interconnect="NVSwitch")  # fmt: skip
    with connect(db) as con:  # as the older version stored it
        con.execute("UPDATE instances SET interconnect = '8x NVSwitch', source = 'vendor\u200bquote' "
                    "WHERE name = 'my-h100'")  # fmt: skip
    before = list_instances(db)[list(COLUMNS)]
    after = before.copy()
    after.loc[after["name"] == "g5.xlarge", "spot_usd_per_h"] = 0.35
    assert apply_catalog_edits(db, before, after) == (["g5.xlarge"], [], [])
    changed = after.copy()
    changed.loc[changed["name"] == "my-h100", "interconnect"] = "no NVSwitch, PCIe only"  # new: checked
    with pytest.raises(UsageError, match="instance my-h100: interconnect 'no NVSwitch, PCIe only' is no GPU"):
        apply_catalog_edits(db, after, changed)
    h100 = find_accelerator("NVIDIA H100 SXM5 80 GB")
    assert intra_class("8x NVSwitch", h100)[0] == "nvswitch_h100"


@pytest.mark.parametrize("text", ["NVLink3", "PCIe4", "NVLink4 (NVSwitch)", "pcie gen5"])
def test_a_link_named_first_with_its_generation_is_taken(tmp_path, text):
    from stash_core.catalog.fields import clean

    assert clean({"interconnect": text}, partial=True)["interconnect"] == text


def test_a_stored_interconnect_is_read_by_the_link_it_names_first():
    from stash_core.catalog.accelerators import find_accelerator
    from stash_core.decide.predict.collectives import intra_class

    a100 = find_accelerator("NVIDIA A100 SXM4 40 GB")
    assert intra_class("Gen4 PCIe (no NVSwitch)", a100)[0] == "pcie_gen4"  # a fixed order read NVSwitch
    assert intra_class("8x NVSwitch", a100)[0] == "nvswitch_a100"


def test_an_invisible_character_is_refused_in_a_name_given_on_the_command_line():
    import argparse

    from stash_core.spec_parse import identifier

    with pytest.raises(argparse.ArgumentTypeError, match="invisible character U\\+200B"):
        identifier("p4d\u200b.24xlarge")  # a run label that looks like a catalog name and is not it
    assert identifier("p4d.24xlarge") == "p4d.24xlarge"


def test_a_gpu_named_without_a_count_is_refused_not_kept_as_a_cpu_machine(tmp_path):
    """`instances add lab --accelerator H100` was stored with no GPU count, and predict then said "no GPU"."""
    db = tmp_path / "cat.duckdb"
    with pytest.raises(UsageError, match="no accelerator_count beside the accelerator H100: give its GPU"):
        add_instance(db, name="lab4", accelerator="H100")
    add_instance(db, name="lab4", accelerator="H100", accelerator_count=1)
    assert get_instance(db, "lab4")["accelerator_count"] == 1


def test_an_unknown_gpu_is_warned_of_with_the_short_names_it_is_close_to(tmp_path, capsys):
    """The closest names were looked for among the table's full names ("NVIDIA V100 SXM2 16 GB"): a typed
    V100X or H10O named none."""
    from stash_core.cli.main import main

    for typed, meant in (("V100X", "V100"), ("H10O", "H100")):
        assert main(["instances", "add", f"lab-{typed}", "--accelerator", typed, "--accelerator-count", "1",
                     "--db", str(tmp_path / "cat.duckdb")]) == 0  # fmt: skip
        err = capsys.readouterr().err
        assert f"'{typed}' is not in Stash's accelerator table (did you mean {meant}" in err, err


def test_a_name_with_surrounding_blanks_is_the_name_add_stored(tmp_path):
    """`instances add " lead"` stored "lead", and `instances show " lead"` or `set " lead"` then found no
    instance ' lead'."""
    db = tmp_path / "blanks.duckdb"
    add_instance(db, name=" lead", accelerator_count=0, vcpus=2)
    assert get_instance(db, " lead ")["name"] == "lead"
    assert set_instance(db, "lead  ", vcpus=4)["vcpus"] == 4 and get_instance(db, "lead")["vcpus"] == 4


@pytest.mark.parametrize(("field", "value", "said"), [
    ("network_gbps", 1e-9, "network_gbps must be at least 0.001"),  # a 1-bit/s network: a step of 22 days
    ("memory_gib", 1e-300, "memory_gib must be at least 0.01"),  # listed as 0.0
])  # fmt: skip
def test_a_positive_value_too_small_to_be_a_machines_is_refused(tmp_path, field, value, said):
    db = tmp_path / "small.duckdb"
    with pytest.raises(UsageError, match=said):
        add_instance(db, name="tiny", accelerator_count=0, **{field: value})
    assert get_instance(db, "tiny") is None
