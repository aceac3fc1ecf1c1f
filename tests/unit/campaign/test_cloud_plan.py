"""The plan of a cloud campaign: prices, regions and dates from the catalog, the predicted time of each
profile against a hand computation, resume, the budget, and the refusals (one line each)."""

from __future__ import annotations

import re

import pytest
from result_docs import result_doc
from support import REPO

from stash_core.campaign import cloud_plan
from stash_core.campaign.cloud_plan import check_budget, cluster_name, offer_of, plan_cloud
from stash_core.campaign.cloud_workdir import workdir_models
from stash_core.campaign.plan import CampaignSettings
from stash_core.errors import UsageError
from stash_core.store import ingest_result

STEP_S, COMPUTE_S = 0.5, 0.4


def fixed_steps(model, batch_size, workers, names):
    """A stand-in step model: the same iteration time everywhere."""
    return {name: (STEP_S, COMPUTE_S) for name in names}, []


def no_steps(model, batch_size, workers, names):
    return {}, [f"{model}: no prediction"]


@pytest.fixture
def settings(tmp_path):
    return CampaignSettings(db_path=tmp_path / "c.duckdb", iterations="20", stalls=["compute"])


def test_prices_regions_and_dates_come_from_the_catalog(settings):
    offer = offer_of(settings.db_path, "g6.xlarge")
    assert (offer.provider, offer.region, offer.price_region, offer.gpus) == (
        "aws",
        "us-east-1",
        "us-east-1",
        1,
    )
    assert (offer.usd_per_h, offer.price_date, offer.pricing) == (0.8048, "2026-11-25", "on-demand")
    spot = offer_of(settings.db_path, "g6.xlarge", spot=True, region="us-west-2")
    assert (spot.usd_per_h, spot.region, spot.price_region, spot.pricing) == (
        0.3879,
        "us-west-2",
        "us-east-1",
        "spot",
    )
    # a hand-checked row without a region: the cloud's default region
    assert offer_of(settings.db_path, "g4dn.xlarge").region == "us-east-1"
    assert offer_of(settings.db_path, "a2-highgpu-1g").region == "us-central1"


@pytest.mark.parametrize(("name", "region"), [("g6.xlarge", "mars-1"), ("g6.xlarge", "europe-west4"),
                                              ("a2-highgpu-1g", "us-east-1")])  # fmt: skip
def test_a_region_that_is_not_of_the_instances_cloud_is_refused(settings, name, region):
    # every region was taken and written into the task (aws/mars-1), with the catalog's prices beside it
    with pytest.raises(UsageError, match=f"--region {region}: not a region of"):
        offer_of(settings.db_path, name, region=region)


def test_plan_time_and_cost_by_hand(settings):
    plan = plan_cloud(
        ["g4dn.xlarge", "p3.2xlarge"], ["resnet18"], [32, 64], None, settings, predict=fixed_steps
    )
    g4dn, p3 = plan.instances
    # one worker, stalls compute, --iterations 20: one run (R0), one launch of 20 iterations at compute_s
    profile_s = 30.0 + (8.0 + 20 * COMPUTE_S)
    assert [estimate.seconds for estimate in g4dn.todo] == [pytest.approx(profile_s)] * 2
    assert {estimate.basis for estimate in g4dn.todo} == {"step model"}
    start_s = 300.0 + 300.0 + 60.0
    assert g4dn.seconds == pytest.approx(start_s + 2 * profile_s)  # 736 s
    assert g4dn.cost_usd == pytest.approx((660 + 2 * 46) / 3600 * 0.526)
    assert p3.cost_usd == pytest.approx((660 + 2 * 46) / 3600 * 3.06)
    assert plan.cost_usd == pytest.approx(752 / 3600 * (0.526 + 3.06))
    assert plan.machine_s == pytest.approx(2 * 752) and plan.wall_s == pytest.approx(2 * 752)
    plan.parallel = 2
    assert plan.wall_s == pytest.approx(752)
    assert plan.price_dates == ["2022-01-01", "2025-01-01"]
    # the plan spends money at these prices: it says they are old, as recommend does (it said nothing)
    assert plan.price_warning.startswith("prices dated 2022-01-01, 2025-01-01 are older than 90 days")
    # a run of --iterations auto counts at its cap: --max-iterations 2000 x 0.4 s = 800 s > 120 s
    auto = plan_cloud(
        ["g4dn.xlarge"],
        ["resnet18"],
        [32],
        None,
        CampaignSettings(settings.db_path, stalls=["compute"]),
        predict=fixed_steps,
    )
    assert auto.instances[0].todo[0].seconds == pytest.approx(30.0 + 120.0)
    capped = plan_cloud(["g4dn.xlarge"], ["resnet18"], [32], None, settings, predict=no_steps)
    assert capped.instances[0].todo[0].seconds == pytest.approx(30.0 + 120.0)
    assert capped.instances[0].todo[0].basis == "time cap" and capped.notes == ["resnet18: no prediction"]


def test_several_gpus_and_workers(settings):
    plan = plan_cloud(
        ["g5.12xlarge"],
        ["resnet18"],
        [32],
        None,
        CampaignSettings(settings.db_path, iterations="20"),
        predict=fixed_steps,
    )
    (estimate,) = plan.instances[0].todo
    assert estimate.item.workers_per_node == 4  # every GPU of the instance type by default
    # R0 (1 worker) and R1 (4 workers, with its probe)
    assert estimate.seconds == pytest.approx(30 + (8 + 20 * COMPUTE_S) + (8 + 20 * STEP_S) + 10)
    with pytest.raises(UsageError, match=r"--workers 8: g5.12xlarge has 4 GPU\(s\)"):
        plan_cloud(["g5.12xlarge"], ["resnet18"], [32], [2, 8], settings, predict=fixed_steps)


def test_stored_configurations_are_not_planned(settings):
    doc = result_doc("resnet18", batch_size=32, workers=1, nodes=1, instance="g4dn.xlarge", device="cuda")
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "Tesla T4"}])  # a g4dn's machine
    ingest_result(settings.db_path, doc)
    plan = plan_cloud(["g4dn.xlarge", "g5.xlarge"], ["resnet18"], [32], None, settings, predict=fixed_steps)
    g4dn, g5 = plan.instances
    assert g4dn.todo == [] and len(g4dn.stored) == 1 and g4dn.cost_usd == 0.0  # not launched
    assert len(g5.todo) == 1


def test_refusals_are_one_line(settings):
    cases = {
        r"instance type m9.huge is not in the catalog": dict(instances=["m9.huge"]),
        r"--spot: no spot price for instance g5.xlarge": dict(instances=["g5.xlarge"], spot=True),
        r"--cloud needs --instances": dict(instances=[" "]),
    }
    for message, kwargs in cases.items():
        with pytest.raises(UsageError, match=message) as error:
            plan_cloud(
                models=["resnet18"],
                batch_sizes=[32],
                workers=None,
                settings=settings,
                predict=fixed_steps,
                **kwargs,
            )
        assert "\n" not in str(error.value)
    plan = plan_cloud(["g4dn.xlarge"], ["resnet18"], [32], None, settings, predict=fixed_steps)
    check_budget(plan, 1.0)
    with pytest.raises(
        UsageError, match=r"the plan costs up to \$0\.11 at catalog prices, above --budget-usd 0.05"
    ) as refused:
        check_budget(plan, 0.05)
    # its one profile is the least these instance types allow: fewer of anything was no way under the budget
    assert str(refused.value).endswith(
        ": raise --budget-usd to 0.11, or plan less: fewer instance types, models or batch sizes, a fixed "
        "--iterations or a shorter --max-phase-seconds (one profile alone on the cheapest, g4dn.xlarge, "
        "costs up to $0.11 with its start-up)"
    ), str(refused.value)
    check_budget(plan, 0.11)  # the advice followed
    two = plan_cloud(["g4dn.xlarge"], ["resnet18", "resnet50"], [32], None, settings, predict=fixed_steps)
    # below the least profile too: the figure to raise it to is this plan's, which then passes
    for budget in (two.cost_usd - 0.001, 0.01):
        with pytest.raises(UsageError, match=r"raise --budget-usd to (\d+\.\d\d), or plan less") as refused:
            check_budget(two, budget)
        check_budget(two, float(refused.value.args[0].split("raise --budget-usd to ")[1].split(",")[0]))


def test_model_files_are_named_inside_the_workdir(tmp_path):
    inside = f"{REPO}/examples/models/tiny_cnn.py:make"
    assert workdir_models(["resnet18", inside]) == ["resnet18", "examples/models/tiny_cnn.py:make"]
    outside = tmp_path / "model.py"
    outside.write_text("def make():\n    pass\n")
    with pytest.raises(UsageError, match="with --cloud a model file must lie in"):
        workdir_models([f"{outside}:make"])


def test_cluster_names_are_stable_and_valid(tmp_path):
    name = cluster_name("Standard_NC24ads_A100_v4", tmp_path / "a.duckdb")
    assert name == cluster_name("Standard_NC24ads_A100_v4", tmp_path / "a.duckdb")
    assert name != cluster_name("Standard_NC24ads_A100_v4", tmp_path / "b.duckdb")
    assert re.fullmatch(r"stash-[a-z0-9-]+-[0-9a-f]{6}", name) and len(name) <= 40
    assert cluster_name("g5.xlarge", tmp_path / "a.duckdb").startswith("stash-g5-xlarge-")
    # two campaigns of one database in another region or pricing: two clusters, not one taken from the other
    names = {cluster_name("g6.xlarge", tmp_path / "a.duckdb", spot, region)
             for spot in (False, True) for region in ("us-east-1", "us-west-2")}  # fmt: skip
    assert len(names) == 4


def test_the_step_model_predicts_the_plan(settings):
    """The real step model (a zoo model whose step is counted and cached): a time per instance type."""
    plan = plan_cloud(["g4dn.xlarge", "p3.2xlarge"], ["resnet50"], [64], None, settings)
    times = [item.todo[0].seconds for item in plan.instances]
    assert all(item.todo[0].basis == "step model" for item in plan.instances)
    assert times[0] > times[1] > 30 + 8  # a T4 is slower than a V100
    assert cloud_plan.PROVISION_S + cloud_plan.SETUP_S + cloud_plan.FINISH_S == plan.instances[0].overhead_s


def test_a_catalog_region_that_is_not_of_the_instances_cloud_is_refused_as_a_given_one_is(settings):
    """`--region us-central1` was refused for g5.xlarge, but the same region set in its catalog row was
    planned and written into the task (infra: aws/us-central1)."""
    from stash_core.catalog import set_instance

    set_instance(settings.db_path, "g5.xlarge", region="us-central1")
    with pytest.raises(UsageError, match="g5.xlarge's catalog region 'us-central1' is not a region of aws"):
        offer_of(settings.db_path, "g5.xlarge")
    assert offer_of(settings.db_path, "g5.xlarge", region="us-east-1").region == "us-east-1"


def test_every_shipped_cloud_instance_has_a_region_its_cloud_names(settings):
    from stash_core.catalog import list_instances

    for name, provider in list_instances(settings.db_path)[["name", "provider"]].itertuples(index=False):
        if str(provider).lower() in cloud_plan.CLOUDS:
            offer_of(settings.db_path, name)  # no refusal of a shipped row


def test_stash_installed_as_a_package_is_refused_before_anything_is_rented(settings, tmp_path, monkeypatch):
    """Installed from a wheel, the folder holding stash_core is site-packages: the task copied all of it
    (torch included) to the machine and its setup's `pip install -r requirements.txt` failed there."""
    import stash_core

    monkeypatch.setattr(stash_core, "PACKAGE_PARENT", str(tmp_path / "site-packages"))
    said = r"^--cloud copies a Stash checkout to each machine, and Stash here is installed as a package"
    with pytest.raises(UsageError, match=said):
        plan_cloud(["g4dn.xlarge"], ["resnet18"], [32], None, settings, predict=fixed_steps)


def test_a_cloud_campaign_times_its_profiles_as_they_run_in_pytorchs_default(tmp_path):
    """It predicted a CNN's profile on an A100 in FP32 throughout (141 ms a ResNet-50 step against 78 ms),
    where the profile runs cuDNN's TF32: its time and cost, and so --budget-usd, were overstated."""
    from stash_core.decide.predict import predict_instances

    predict = cloud_plan.predict_steps(CampaignSettings(db_path=tmp_path / "x.duckdb"))
    steps, _ = predict("resnet50", 64, 1, ["a2-highgpu-1g"])
    as_run = predict_instances(tmp_path / "x.duckdb", "resnet50", 64, instances=["a2-highgpu-1g"],
                               workers_per_instance=1, precision="pytorch")  # fmt: skip
    assert steps["a2-highgpu-1g"][0] == pytest.approx(float(as_run.frame["iteration_s"].iloc[0]))


def test_the_total_said_is_the_sum_of_the_rows_said():
    """Rows of $1.28 and $0.19 stood above a total of $1.46: each figure was rounded up to the cent apart."""
    from types import SimpleNamespace

    from stash_core.campaign.cloud_plan import CloudPlan, cents_up

    rows = [SimpleNamespace(cost_usd=1.2745), SimpleNamespace(cost_usd=0.1851)]
    plan = CloudPlan.__new__(CloudPlan)
    plan.instances = rows
    assert [cents_up(row.cost_usd) for row in rows] == [1.28, 0.19]
    assert plan.cost_said_usd == 1.47 and cents_up(plan.cost_usd) == 1.46
    # the budget is checked against the total said: "$1.47 ...; budget $1.46" was taken
    plan.parallel, plan.spot = 1, False
    item = SimpleNamespace(overhead_s=0.0, todo=[SimpleNamespace(seconds=60.0)],
                           offer=SimpleNamespace(usd_per_h=0.01, name="tiny"))  # fmt: skip
    plan.instances = [SimpleNamespace(cost_usd=cost, **vars(item)) for cost in (1.2745, 0.1851)]
    with pytest.raises(UsageError, match=r"costs up to \$1\.47 at catalog prices, above --budget-usd 1\.46"):
        check_budget(plan, 1.46)
    check_budget(plan, 1.47)


def test_the_plan_names_catalog_rows_an_older_stash_seeded(settings):
    """A plan that spends money at a catalog's prices says, as predict and recommend do, which of its rows an
    older Stash stored (`stash instances seed` gives them this Stash's)."""
    from stash_core import store
    from stash_core.catalog import seed_catalog

    seed_catalog(settings.db_path)
    with store.connect(settings.db_path) as con:
        con.execute("UPDATE instances SET network_gbps = NULL WHERE name = 'g4dn.xlarge'")
    plan = plan_cloud(["g4dn.xlarge", "g5.xlarge"], ["resnet18"], [8], None, settings)
    warned = [note for note in plan.notes if "older Stash" in note]
    assert len(warned) == 1 and "g4dn.xlarge (network_gbps)" in warned[0] and "instances seed" in warned[0]


@pytest.mark.parametrize("same_contents", [True, False], ids=["unchanged", "edited since"])
def test_a_stored_model_file_is_matched_by_its_contents_from_any_folder(settings, monkeypatch, tmp_path,
                                                                         same_contents):  # fmt: skip
    """The machines name a model file by its path in the checkout; its contents were read by that path from
    the folder the campaign started in, so from any other an edited model counted as stored."""
    from stash_core.zoo_names import model_file_sha256

    model = "examples/models/tiny_cnn.py:make"
    sha256 = model_file_sha256(f"{REPO}/{model}") if same_contents else "0" * 64
    doc = result_doc(model, batch_size=32, workers=1, nodes=1, instance="g4dn.xlarge", device="cuda",
                     spec_extra={"model_sha256": sha256, "num_classes": 10})  # the model's own  # fmt: skip
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "Tesla T4"}])
    ingest_result(settings.db_path, doc)
    for folder in (REPO, tmp_path):
        monkeypatch.chdir(folder)
        plan = plan_cloud(["g4dn.xlarge"], [f"{REPO}/{model}"], [32], None, settings, predict=fixed_steps)
        assert len(plan.instances[0].stored) == (1 if same_contents else 0), folder
