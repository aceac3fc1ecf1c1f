"""The Campaign page in Streamlit's AppTest: the plan of three instance types with its total and price dates,
a budget below the plan refused, an unknown instance type or a missing spot price as one message, and the
launch disabled with the install line where SkyPilot is not installed; where it is, the launch starts the
campaign in the background and the page shows its last lines.

Launching on a real cloud is not tested: nothing here rents a machine (a stand-in SkyPilot finds no
capacity)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fake_skypilot import install_fake_skypilot
from streamlit.testing.v1 import AppTest
from support import shown

from stash_core.campaign import skypilot_task
from stash_core.campaign.cloud_plan import cents_up
from stash_core.engine import jobs
from stash_core.views import campaign as view

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "pages" / "campaign.py"
THREE = ["g5.xlarge", "g4dn.xlarge", "p3.2xlarge"]


@pytest.fixture()
def without_skypilot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skypilot_task, "skypilot_installed", lambda: False)


def _page(db: Path) -> AppTest:
    app = AppTest.from_file(str(PAGE), default_timeout=90)
    app.session_state["stash_db_path"] = str(db)
    return app.run()


def _plan(app: AppTest, instances: tuple[str, ...] = tuple(THREE), models: tuple[str, ...] = ("resnet50",),
          batch: str = "64", **fields) -> AppTest:  # fmt: skip
    app.multiselect(key="campaign-instances").set_value(list(instances))
    app.multiselect(key="campaign-models").set_value(list(models))
    app.text_input(key="campaign-batch").set_value(batch)
    for key, value in fields.items():
        widget = app.number_input if key == "budget" else app.radio if key == "pricing" else app.text_input
        widget(key=f"campaign-{key}").set_value(value)
    return app.button(key="campaign-plan").click().run()


def _plan_table(app: AppTest):
    return next(frame.value for frame in app.dataframe if "machine_min" in frame.value.columns)


def _texts(app: AppTest) -> str:
    return "\n".join(e.value for kind in ("markdown", "caption", "info") for e in getattr(app, kind))


def test_the_plan_of_three_instance_types_with_its_total_and_price_dates(empty_db: Path, without_skypilot):
    app = _page(empty_db)
    assert not app.exception and not app.error
    assert app.multiselect(key="campaign-instances").value == THREE  # the page opens on this plan
    app = _plan(app)
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]
    table = _plan_table(app).set_index("instance")
    assert list(table.index) == THREE
    assert dict(table["price_date"]) == {"g5.xlarge": "2025-01-01", "g4dn.xlarge": "2025-01-01",
                                         "p3.2xlarge": "2022-01-01"}  # fmt: skip
    assert dict(table["usd_per_h"]) == {"g5.xlarge": 1.006, "g4dn.xlarge": 0.526, "p3.2xlarge": 3.06}
    total = table["cost_usd"].sum()
    hours = table["machine_min"] / 60  # each row in cents rounded up: the rows add up to the total said
    assert total == pytest.approx(sum(cents_up(cost) for cost in hours * table["usd_per_h"]))
    metrics = {metric.label: metric.value for metric in app.metric}
    total = cents_up(total)  # shown as the budget check writes it: a budget of that figure passes
    assert metrics["Cost at catalog prices"] == f"${total:.2f}"
    assert metrics["Machine time"] == f"{table['machine_min'].sum():.1f} min"
    # the oldest whole ("2022-01-01, ..." was cut), and the others counted in words ("+1" read as a typo)
    assert metrics["Oldest price dated"] == "2022-01-01"
    assert {metric.label: metric.delta for metric in app.metric}["Oldest price dated"] == "1 later date(s)"
    assert f"Total: {table['machine_min'].sum():.1f} min of machine time, ${total:.2f} at catalog prices " \
           "(prices of 2022-01-01, 2025-01-01)" in _texts(app)  # fmt: skip
    # the page that spends money warns of old prices, as Recommend does (it said nothing)
    old = "prices dated 2022-01-01, 2025-01-01 are older than 90 days"
    assert any(warning.value.startswith(old) for warning in app.warning)
    prices = next(frame.value for frame in app.dataframe if "source" in frame.value.columns)
    assert list(prices["instance"]) == THREE and prices["source"].str.len().min() > 10
    tasks = [e for e in app.expander if e.label.startswith("SkyPilot task of ")]
    assert [e.label.split()[3] for e in tasks] == THREE
    yaml = [code.value for code in app.code if code.language == "yaml"]
    shown = [next(line for line in text.splitlines() if "instance_type:" in line) for text in yaml]
    assert [line.split()[-1] for line in shown] == THREE
    command = next(code.value for code in app.code if code.language == "bash")
    assert command.startswith("stash campaign --cloud --instances g5.xlarge,g4dn.xlarge,p3.2xlarge --models "
                              "resnet50 --batch-sizes 64 --db ")  # fmt: skip
    assert not empty_db.exists()  # a plan stores nothing


def test_a_budget_below_the_plan_is_refused(empty_db: Path, without_skypilot):
    app = _plan(_page(empty_db), budget=0.5)
    assert not app.exception
    assert len(app.error) == 1, [e.value for e in app.error]
    refusal = shown(app.error[0].value)
    total = _plan_table(app)["cost_usd"].sum()
    said = f"Refused: the plan costs up to ${cents_up(total):.2f} at catalog prices, above the"
    assert refusal.startswith(said)
    assert "above the budget of $0.50." in refusal
    assert not [e for e in app.expander if e.label.startswith("SkyPilot task of ")]  # nothing to launch
    assert app.button(key="campaign-launch").disabled
    assert "--budget-usd 0.5" in next(code.value for code in app.code if code.language == "bash")
    # a budget above the plan: no refusal
    app = _plan(app, budget=round(total + 1, 2))
    assert not app.error and len([e for e in app.expander if e.label.startswith("SkyPilot task of ")]) == 3


def test_an_unknown_instance_type_is_one_message(empty_db: Path, without_skypilot):
    app = _plan(_page(empty_db), other="nope.xlarge")
    assert not app.exception
    assert [shown(e.value) for e in app.error] == [
        # in the dashboard's words: the catalog a page edits, not `stash instances list` and `add`
        "instance type nope.xlarge is not in the catalog (add it in the Recommend page's instance catalog, "
        "or import SkyPilot's prices with `stash instances import --skypilot`)"
    ]
    assert not app.dataframe or not any("machine_min" in f.value.columns for f in app.dataframe)
    assert not app.get("button") or not [b for b in app.button if b.key == "campaign-launch"]


def test_no_spot_price_and_a_bad_batch_size_are_one_message_each(empty_db: Path, without_skypilot):
    app = _plan(_page(empty_db), pricing="spot")
    assert not app.exception
    # the way out said too: the default types have no spot price in the shipped catalog
    said = ("Spot: no spot price for instance g5.xlarge (set one in the Recommend page's instance catalog, "
            "or import SkyPilot's prices with `stash instances import --skypilot`; or choose On-demand)")
    assert [shown(e.value) for e in app.error] == [said]
    app = _plan(app, batch="64,zero")
    assert not app.exception
    assert [shown(e.value) for e in app.error] == ["batch sizes: each must be a positive integer, got 'zero'"]


def test_without_skypilot_the_launch_is_disabled_with_the_install_line(empty_db: Path, without_skypilot):
    app = _plan(_page(empty_db))
    assert not app.exception and not app.error
    launch = app.button(key="campaign-launch")
    assert launch.disabled
    assert [info.value for info in app.info] == [skypilot_task.INSTALL_HINT]
    assert "pip install -r requirements-cloud.txt" in app.info[0].value
    assert "Launching on a real cloud cannot be tested here" in _texts(app)


def test_with_skypilot_the_launch_starts_the_campaign_in_the_background(
    empty_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    site = install_fake_skypilot(tmp_path / "site")  # a SkyPilot whose launches find no capacity
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    app = _plan(_page(empty_db), instances=("g5.xlarge",), models=("resnet18",), batch="32")
    assert not app.exception and not app.error
    assert not app.button(key="campaign-launch").disabled
    assert skypilot_task.INSTALL_HINT not in _texts(app)
    app = app.button(key="campaign-launch").click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert any("Started in the background" in item.value for item in app.success)
    job_id = view.campaign_jobs(empty_db).iloc[0]["job_id"]
    deadline = time.monotonic() + 120
    while jobs.read_job(empty_db, job_id).status in ("starting", "running") and time.monotonic() < deadline:
        time.sleep(0.3)
    app = app.run()  # the page reloaded: the campaign's last lines under "Campaigns started here"
    assert any(e.label.startswith("g5.xlarge · resnet18 · failed") for e in app.expander)
    assert "launch failed: ResourcesUnavailableError" in "\n".join(code.value for code in app.code)
    assert jobs.list_jobs(empty_db) == []  # the Run page's list of profiles does not hold it


def test_a_populated_database_offers_only_rentable_gpu_types(populated_db: Path, without_skypilot):
    app = _page(populated_db)
    assert not app.exception and not app.error
    options = app.multiselect(key="campaign-instances").options
    assert set(THREE) <= set(options)
    assert not {"big-vm", "small-vm"} & set(options)  # the fixture's own instance types, on no cloud
    app = _plan(app, other="big-vm")
    assert not app.exception
    assert [shown(e.value) for e in app.error] == [
        "instance type big-vm is on test: --cloud launches on aws, gcp, azure"
    ]


def test_the_page_is_in_the_navigation(empty_db: Path):
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90).run()
    app.switch_page("pages/campaign.py").run()
    assert not app.exception and not app.error
    assert app.title[0].value == "Campaign"


def test_the_pages_batch_size_is_the_commands(empty_db: Path, without_skypilot):
    """The page offered 64 per worker where `stash campaign` takes 32 when none is given."""
    from stash_core.cli.campaign import check_script_options
    from stash_core.cli.main import build_parser

    args = build_parser().parse_args(["campaign", "--models", "resnet18", "--instance", "x"])
    check_script_options(args)
    assert _page(empty_db).text_input(key="campaign-batch").value == ",".join(map(str, args.batch_sizes))


def test_a_budget_below_its_bound_is_named_on_plan_not_planned_without_one(empty_db: Path, without_skypilot):
    """The browser kept a budget of -3 out of the form and Plan then planned with no budget."""
    app = _page(empty_db)
    app.number_input(key="campaign-budget").set_value(-3.0)
    app = _plan(app)
    errors = " ".join(error.value for error in app.error)
    assert "Budget (USD, optional): must be from 0.01 to 10,000,000, got -3" in errors
    assert not [metric for metric in app.metric if metric.label == "Cost at catalog prices"]


def test_rows_an_older_stash_seeded_are_warned_of_with_the_button_that_refreshes_them(
    tmp_path: Path, without_skypilot
):
    """The plan's note named `stash instances seed` in code among its captions; Recommend had the button.
    Pressed here too, the rows take this Stash's values and the plan is made again on them."""
    from stash_core import store
    from stash_core.catalog import get_instance, seed_catalog

    db = tmp_path / "older.duckdb"
    seed_catalog(db)
    with store.connect(db) as con:  # as an older Stash left it: origin still builtin, another GPU link
        con.execute("UPDATE instances SET interconnect = NULL WHERE name = 'p3.8xlarge'")
    app = _plan(_page(db), instances=("g5.xlarge", "p3.8xlarge"))
    assert not app.exception, [e.value for e in app.exception]
    warned = [warning.value for warning in app.warning if "older Stash" in warning.value]
    assert len(warned) == 1 and "p3.8xlarge (interconnect)" in warned[0] and "the button below" in warned[0]
    assert "older Stash" not in _texts(app)  # not a caption as well
    app.button(key="campaign-catalog-refresh").click()
    app = app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert not any("older Stash" in warning.value for warning in app.warning)
    assert any("now hold this Stash's values" in note.value for note in app.success)
    assert get_instance(db, "p3.8xlarge")["interconnect"] is not None
    assert "machine_min" in _plan_table(app).columns  # the plan is shown again, made on the refreshed rows
