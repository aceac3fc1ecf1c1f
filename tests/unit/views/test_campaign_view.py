"""The data behind the Campaign page: the cloud campaign's plan as frames (the same figures `stash campaign
--cloud --dry-run` prints), the refusal above a budget, one-line errors, and the command that launches it."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from stash_core.campaign import cloud_plan
from stash_core.catalog import add_instance
from stash_core.errors import UsageError
from stash_core.views import campaign as view

THREE = ("g5.xlarge", "g4dn.xlarge", "p3.2xlarge")
# The catalog shipped in catalog/instances.csv: on-demand USD/h and the price's date.
PRICES = {"g5.xlarge": (1.006, "2025-01-01"), "g4dn.xlarge": (0.526, "2025-01-01"),
          "p3.2xlarge": (3.06, "2022-01-01")}  # fmt: skip
START_UP_MIN = (cloud_plan.PROVISION_S + cloud_plan.SETUP_S + cloud_plan.FINISH_S) / 60


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.duckdb"  # not created: the plan reads the catalog shipped with Stash


def request(**changes) -> view.CampaignRequest:
    return dataclasses.replace(view.CampaignRequest(THREE, ("resnet50",), (64,)), **changes)


def test_gpu_instances_are_the_catalogs_rentable_gpu_types(db: Path) -> None:
    assert set(THREE) <= set(view.gpu_instances(db)["name"])
    assert not db.exists()  # looking creates nothing
    add_instance(db, name="cpu.large", provider="aws", vcpus=8, memory_gib=32, on_demand_usd_per_h=0.3)
    add_instance(db, name="gpu_1x_a10", provider="lambda", accelerator="NVIDIA A10", accelerator_count=1,
                 vcpus=30, memory_gib=200, on_demand_usd_per_h=0.75)  # fmt: skip
    add_instance(db, name="my.gpu", provider="gcp", accelerator="NVIDIA L4", accelerator_count=1, vcpus=8,
                 memory_gib=32, on_demand_usd_per_h=0.7)  # fmt: skip
    frame = view.gpu_instances(db)
    names = set(frame["name"])
    assert set(THREE) | {"my.gpu"} <= names and not {"cpu.large", "gpu_1x_a10"} & names
    assert (frame["accelerator_count"] >= 1).all()
    assert set(frame["provider"].str.lower()) <= set(cloud_plan.CLOUDS)
    with pytest.raises(UsageError, match="gpu_1x_a10 is on lambda"):  # typed by name: the command's answer
        view.plan(db, request(instances=("gpu_1x_a10",)))


def test_the_plan_per_instance_type_against_a_hand_computation(db: Path) -> None:
    answer = view.plan(db, request())
    rows = answer.instances.set_index("instance")
    assert list(answer.instances.columns) == view.INSTANCE_COLUMNS
    assert list(rows.index) == list(THREE)
    for name, (usd_per_h, date) in PRICES.items():
        row = rows.loc[name]
        assert (row["usd_per_h"], row["price_date"], row["pricing"]) == (usd_per_h, date, "on-demand")
        assert (row["cloud"], row["region"], row["to_run"], row["stored"]) == ("aws", "us-east-1", 1, 0)
        assert row["startup_min"] == pytest.approx(START_UP_MIN)  # launch 5 + set-up 5 + teardown 1
        assert row["machine_min"] == pytest.approx(row["startup_min"] + row["profiling_min"])
        # in cents rounded up, as the rows and their total are said (the rows add up to the total)
        assert row["cost_usd"] == pytest.approx(cloud_plan.cents_up(row["machine_min"] / 60 * usd_per_h))
        # what the page shows of them, in words
        assert (row["where"], row["runs"]) == ("aws/us-east-1", "1 to run, 0 stored")
        assert (
            row["time_min"] == f"{row['profiling_min']:.1f} + {START_UP_MIN:.1f} = {row['machine_min']:.1f}"
        )
    # nothing stored and no profile to fit: resnet50 at batch 64 is counted at its runs' time cap
    assert set(rows["basis"]) == {"time cap"}
    assert answer.cost_usd == pytest.approx(rows["cost_usd"].sum())
    assert answer.machine_s == pytest.approx(rows["machine_min"].sum() * 60)
    assert answer.wall_s == pytest.approx(answer.machine_s)  # one instance type at a time
    assert answer.price_dates == ["2022-01-01", "2025-01-01"]
    cost = cloud_plan.cents_up(answer.cost_usd)  # as the budget check writes it
    assert f"${cost:.2f} at catalog prices (prices of 2022-01-01, 2025-01-01)" in answer.total_text
    assert answer.refusal is None and answer.launchable
    assert not db.exists()  # planning stores nothing


def test_the_page_shows_the_figures_the_command_prints(db: Path, capsys: pytest.CaptureFixture) -> None:
    from stash_core.cli.campaign_cloud import print_plan

    settings = view.settings_of(db, request())
    print_plan(cloud_plan.plan_cloud(list(THREE), ["resnet50"], [64], None, settings), None)
    printed = capsys.readouterr().out
    answer = view.plan(db, request())
    lines = [text for text in printed.splitlines() if "to run," in text]
    assert len({line.index("$") for line in lines}) == 1  # a long name pushed its row's columns on
    for row in answer.instances.itertuples():
        line = next(text for text in lines if text.strip().startswith(row.instance + " "))
        prices = answer.prices.set_index("instance")
        unstated = str(prices.loc[row.instance, "price_region"]).startswith("not stated")  # as the page says
        where = "price's region not stated, " if unstated else ""
        assert f"${row.usd_per_h:g}/h ({where}{row.price_date})" in line
        assert f"= {row.machine_min:.1f} min  ${row.cost_usd:.2f}" in line
    cost = cloud_plan.cents_up(answer.cost_usd)
    assert f"${cost:.2f} at catalog prices (prices of {', '.join(answer.price_dates)})" in printed


def test_where_each_price_comes_from(db: Path) -> None:
    prices = view.plan(db, request()).prices.set_index("instance")
    assert list(prices.index) == list(THREE)
    assert prices.loc["p3.2xlarge", "price_date"] == "2022-01-01"
    assert "Stash cost table (ICDCS 2023)" in prices.loc["p3.2xlarge", "source"]
    assert "AWS list price" in prices.loc["g5.xlarge", "source"]
    assert prices.loc["g5.xlarge", "price_region"] == "not stated (us-east-1 assumed)"


def test_each_instance_type_has_its_skypilot_task(db: Path) -> None:
    answer = view.plan(db, request(spot=False, region="us-west-2", idle_minutes=30))
    assert [task.instance for task in answer.tasks] == list(THREE)
    for task in answer.tasks:
        assert task.cluster.startswith("stash-") and f"name: {task.cluster}\n" in task.yaml
        assert f"instance_type: {task.instance}\n" in task.yaml
        assert "infra: aws/us-west-2\n" in task.yaml and "use_spot: false\n" in task.yaml
        assert "idle_minutes: 30\n" in task.yaml and "down: true\n" in task.yaml
        assert "--model resnet50 --batch-size 64" in task.yaml


def test_a_plan_above_the_budget_is_refused_with_no_task(db: Path) -> None:
    answer = view.plan(db, request(budget_usd=0.5))
    assert answer.refusal is not None and answer.refusal.startswith(
        f"Refused: the plan costs up to ${cloud_plan.cents_up(answer.cost_usd):.2f} at catalog prices, "
        "above the budget of $0.50."
    )
    assert answer.tasks == [] and not answer.launchable
    assert len(answer.instances) == 3  # the plan is still shown
    assert view.plan(db, request(budget_usd=answer.cost_usd + 0.01)).refusal is None


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"instances": ("g5.xlarge", "nope.xlarge")}, "instance type nope.xlarge is not in the catalog"),
        ({"spot": True}, "Spot: no spot price for instance g5.xlarge"),
        ({"instances": ()}, "choose at least one instance type"),
        ({"models": ()}, "choose at least one model"),
        ({"models": ("no_such_model",)}, "no_such_model"),
        ({"iterations": "1"}, "--iterations must be 'auto' or an integer >= 2"),
        ({"budget_usd": 0.0}, "the budget must be above $0"),
    ],
)
def test_bad_input_is_one_line(db: Path, changes: dict, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        view.plan(db, request(**changes))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_spot_prices_where_the_catalog_has_them(db: Path) -> None:
    answer = view.plan(db, request(instances=("p3.2xlarge",), spot=True))
    row = answer.instances.iloc[0]
    assert (row["pricing"], row["usd_per_h"]) == ("spot", 1.25)
    assert "use_spot: true\n" in answer.tasks[0].yaml


def test_batch_sizes_and_typed_instance_types() -> None:
    assert view.batch_sizes(" 32, 64,32 ") == (32, 64)
    for bad in ("", "0", "x", "64,-1", "1.5"):
        with pytest.raises(UsageError, match="batch sizes: "):
            view.batch_sizes(bad)
    # a positive integer beyond the bound is said to be too large, not "not a positive integer"
    # (its figure written as the limit is: "1,048,576, got 2000000" read as two kinds of number)
    for large, said in (("99999999999999999999", "99999999999999999999"), ("2000000", "2,000,000")):
        with pytest.raises(UsageError, match=f"batch sizes: each must be at most 1,048,576, got {said}$"):
            view.batch_sizes(large)
    assert view.instance_names(["g5.xlarge"], "p3.2xlarge, g5.xlarge") == ("g5.xlarge", "p3.2xlarge")
    # an empty item is refused, as the command refuses it (the plan was made with 32,64 from "32,,64")
    with pytest.raises(UsageError, match="batch sizes: an empty item in '32,,64': two commas in a row"):
        view.batch_sizes("32,,64")
    with pytest.raises(UsageError, match="other instance types: an empty item in 'p3.2xlarge, g5.xlarge,'"):
        view.instance_names(["g5.xlarge"], "p3.2xlarge, g5.xlarge,")
    with pytest.raises(UsageError, match="is not a name"):
        view.instance_names([], "g5.xlarge\x1b[31m")


def test_the_command_launches_the_same_campaign(db: Path) -> None:
    from stash_core.cli.main import parse_command

    asked = request(spot=True, region="us-west-2", budget_usd=12.5, iterations="200", parallel=2,
                    idle_minutes=30)  # fmt: skip
    text = view.command(db, asked)
    words = shlex.split(text)
    assert words[:3] == ["stash", "campaign", "--cloud"]
    args = parse_command(words[1:])
    assert (args.cloud, args.instances, args.models) == (True, list(THREE), ["resnet50"])
    assert args.batch_sizes == [64]
    assert (args.spot, args.region, args.budget_usd, args.iterations) == (True, "us-west-2", 12.5, "200")
    assert (args.parallel, args.idle_minutes, Path(args.db)) == (2, 30, db.resolve())
    # a budget written with :g was 1.23457e+06 in the command: $1,234,570 once pasted, not $1,234,567
    large = parse_command(shlex.split(view.command(db, request(budget_usd=1234567.0)))[1:])
    assert large.budget_usd == 1234567.0
    plain = shlex.split(view.command(db, request()))
    options = {"--spot", "--region", "--budget-usd", "--iterations", "--parallel", "--idle-minutes"}
    assert not options & set(plain)


def test_skypilot_installed_is_the_commands_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from stash_core.campaign import skypilot_task

    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)
    assert view.skypilot_installed() is False
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: True)
    assert view.skypilot_installed() is True
    assert "requirements-cloud.txt" in view.install_hint()


@pytest.mark.parametrize("bad", ["**bold**", "us-east-1; rm -rf /", "us east", "-x", "é"])
def test_a_region_that_no_cloud_names_so_is_refused_before_any_task(db: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="is not a region name"):
        view.plan(db, request(region=bad))
