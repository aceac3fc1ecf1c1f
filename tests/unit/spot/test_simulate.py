"""The revocation simulation: a hand-worked trace, no revocations, and a planner blind to contention.

Hand-worked trace (negligible communication, j = 100 sqrt((R + 1) n), A: 1 s, $1/h, deadline 200 s): the
first plan is 1 x A (100 s). A is revoked at 50 s with the loss at 10 / 50 = 0.2; the re-plan rents one A
again, which restarts for 10 s (paid: it is rented while it boots and loads) and has 50 iterations left: done
at 50 + 10 + 50 = 110 s, for 110 s of one A: $110 / 3600.
"""

from __future__ import annotations

import json

import pytest
from support import REPO

from stash_core.spot import InstanceOffer, Worker, Workload
from stash_core.spot.simulate import read_trace, simulate

NEGLIGIBLE = Workload(param_bytes=1, solo_bandwidth_Bps=1e6, contention_a1=0.1, contention_b1=0.0,
                      loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
# a 100 MB model, 1 GB/s alone, a 1.2 GB/s parameter server: contention matters from 2 workers on
CONTENDED = Workload(param_bytes=100e6, solo_bandwidth_Bps=1e9, contention_a1=0.3, contention_b1=0.0,
                     loss_g=(0.0, 0.0, 10.0, 1.0, 0.0))  # fmt: skip
A = Worker("A", gpus=1, compute_s=1.0, batch=32, usd_per_h=1.0)
A_ON_DEMAND = Worker("A", gpus=1, compute_s=1.0, batch=32, usd_per_h=3.0)
LINKS = {"ps_Bps": 1e9, "pcie_Bps": 1e10}


def test_a_trace_revocation_is_replanned_from_the_loss_reached(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("time_s,instance\n50,A\n500,A\n")
    rows = simulate([InstanceOffer(A, 2)], [InstanceOffer(A_ON_DEMAND, 2)], NEGLIGIBLE, 0.1, 200.0, **LINKS,
                    revocation_s=10.0, trace=read_trace(path))  # fmt: skip
    spot = rows[0]
    assert spot["strategy"] == "spotDNN" and spot["first_plan"] == "1 x A" and spot["runs"] == 1
    assert spot["mean_revocations"] == 1
    assert spot["mean_time_s"] == pytest.approx(110.0, rel=1e-4)
    # the restart is paid by the A rented again (billed to the survivors alone, none here, it was free)
    assert spot["mean_cost_usd"] == pytest.approx(110 / 3600, rel=1e-4)
    assert spot["p_deadline"] == 1.0
    on_demand = rows[2]
    assert on_demand["mean_revocations"] == 0 and on_demand["mean_time_s"] == pytest.approx(100.0, rel=1e-4)
    assert on_demand["mean_cost_usd"] == pytest.approx(300 / 3600, rel=1e-4)


@pytest.mark.parametrize("second_s", [50, 55])
def test_a_revocation_at_the_same_time_or_during_the_restart_is_replayed_too(tmp_path, second_s):
    """The hand-worked trace with a second revocation at 50 s (the same time) or 55 s (during the 10 s
    restart): the instance rented at 60 s is revoked at once, 10 s more of restart, then 50 s: 120 s, all of
    them paid (two restarts of the instance rented again)."""
    path = tmp_path / "trace.csv"
    path.write_text(f"time_s,instance\n50,A\n{second_s},A\n")
    rows = simulate([InstanceOffer(A, 2)], [InstanceOffer(A_ON_DEMAND, 2)], NEGLIGIBLE, 0.1, 200.0, **LINKS,
                    revocation_s=10.0, trace=read_trace(path))  # fmt: skip
    spot = rows[0]
    assert spot["mean_revocations"] == 2
    assert spot["mean_time_s"] == pytest.approx(120.0, rel=1e-4)
    assert spot["mean_cost_usd"] == pytest.approx(120 / 3600, rel=1e-4)


def test_a_trace_row_passed_while_no_instance_of_its_type_ran_revokes_nothing_later():
    """1 x A first (100 s of a 105 s deadline); A is revoked at 50 s and, with 45 s left, the re-plan rents
    the faster B. The row "10,B" passed while no B ran: it must not revoke the B rented at 60 s."""
    b = Worker("B", gpus=1, compute_s=0.5, batch=32, usd_per_h=3.0)
    offers = [InstanceOffer(A, 1), InstanceOffer(b, 1)]

    def replay(trace):
        return simulate(offers, offers, NEGLIGIBLE, 0.1, 105.0, **LINKS, revocation_s=10.0, trace=trace)

    alone, with_passed_row = replay([(50.0, "A")]), replay([(10.0, "B"), (50.0, "A")])
    assert alone[0]["first_plan"] == "1 x A" and alone[0]["mean_revocations"] == 1
    assert with_passed_row == alone


def test_a_row_at_the_same_time_as_a_revocation_revokes_at_once_whatever_its_name():
    """Rows at the same time revoke at once after the re-plan (the docstring), whichever sorts first: "50,B"
    beside "50,A" revokes the B rented at 60 s, and so does the same row named so that it sorts before A."""
    outcomes = []
    for name in ("B", "0B"):  # "0B" < "A" < "B"
        other = Worker(name, gpus=1, compute_s=0.5, batch=32, usd_per_h=3.0)
        offers = [InstanceOffer(A, 1), InstanceOffer(other, 1)]
        trace = sorted([(50.0, "A"), (50.0, name)])
        rows = simulate(offers, offers, NEGLIGIBLE, 0.1, 105.0, **LINKS, revocation_s=10.0, trace=trace)
        outcomes.append((rows[0]["mean_revocations"], rows[0]["mean_time_s"]))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 2


def test_without_revocations_spot_costs_a_third_of_on_demand():
    rows = simulate([InstanceOffer(A, 2)], [InstanceOffer(A_ON_DEMAND, 2)], NEGLIGIBLE, 0.1, 200.0, **LINKS)
    assert rows[0]["mean_cost_usd"] * 3 == pytest.approx(rows[2]["mean_cost_usd"])
    assert all(row["p_deadline"] == 1.0 and row["mean_revocations"] == 0 for row in rows)


def test_a_planner_blind_to_contention_misses_a_tight_deadline():
    fast = Worker("A", gpus=1, compute_s=0.2, batch=32, usd_per_h=1.0)
    offers, on_demand = [InstanceOffer(fast, 8)], [InstanceOffer(Worker("A", 1, 0.2, 32, 3.0), 8)]
    rows = simulate(offers, on_demand, CONTENDED, 0.1, 40.0, ps_Bps=1.2e9, pcie_Bps=1e10, rate_per_h=2.0,
                    revocation_s=5.0, runs=50, seed=1)  # fmt: skip
    by_name = {row["strategy"]: row for row in rows}
    assert by_name["spotDNN"]["first_plan"] == "3 x A" and by_name["no contention"]["first_plan"] == "2 x A"
    assert by_name["no contention"]["p_deadline"] == 0.0  # 2 workers are slower than it predicts
    assert by_name["spotDNN"]["p_deadline"] > 0.5
    assert by_name["on-demand"]["mean_cost_usd"] > 2 * by_name["spotDNN"]["mean_cost_usd"]
    again = simulate(offers, on_demand, CONTENDED, 0.1, 40.0, ps_Bps=1.2e9, pcie_Bps=1e10, rate_per_h=2.0,
                     revocation_s=5.0, runs=50, seed=1)  # fmt: skip
    assert again == rows  # the same seed, the same outcome


@pytest.mark.parametrize(
    "text, message",
    [
        ("time_s,instance\nsoon,A\n", "line 2: needs time_s"),
        ("time_s,instance\n10\n", "line 2: needs time_s"),  # no instance column at all
        ("time_s,instance\n10,\n", "line 2: needs time_s"),  # an empty one
        ("time_s,instance\n-1,A\n", "line 2: needs time_s"),
        ("", "needs a header line time_s,instance"),
        ("10,A\n", "needs a header line time_s,instance"),
        ("time_s,instance\n", "no revocations"),
    ],
)
def test_a_bad_trace_is_refused(tmp_path, text, message):
    from stash_core.errors import UsageError

    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        read_trace(path)


def test_a_trace_naming_instances_not_on_offer_is_refused():
    from stash_core.errors import UsageError

    with pytest.raises(UsageError, match="instance[(]s[)] Q, Z not among the instances on offer"):
        simulate([InstanceOffer(A, 2)], [InstanceOffer(A_ON_DEMAND, 2)], NEGLIGIBLE, 0.1, 200.0, **LINKS,
                 trace=[(5.0, "Z"), (6.0, "A"), (7.0, "Q")])  # fmt: skip


def test_a_trace_that_revokes_without_end_never_finishes_and_warns_nothing():
    """Every 0.1 s one A is revoked: 500 revocations train 50 of the 100 s needed, and past MAX_REVOCATIONS
    the run never finishes: P(deadline) = 0."""
    import warnings

    from stash_core.spot.simulate import MAX_REVOCATIONS

    trace = [(0.1 * k, "A") for k in range(1, 3 * MAX_REVOCATIONS)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning fails the test
        rows = simulate([InstanceOffer(A, 2)], [InstanceOffer(A_ON_DEMAND, 2)], NEGLIGIBLE, 0.1, 200.0,
                        **LINKS, revocation_s=0.0, trace=trace)  # fmt: skip
    spot = rows[0]
    assert spot["never_finishes"] == 1 and spot["p_deadline"] == 0.0
    assert spot["mean_time_s"] is None and spot["p90_time_s"] is None
    assert rows[2]["never_finishes"] == 0 and rows[2]["mean_time_s"] == pytest.approx(100.0, rel=1e-4)


def test_the_risk_is_of_the_plan_as_printed_with_its_revocation_overhead(tmp_path):
    """--revocation-s 100 plans 3 x g3.16xlarge + 5 x g3.8xlarge; the risk simulated the plan made without
    the overhead (4 x g3.8xlarge) at 30 s a revocation. Without revocations the printed plan costs its
    training without the one expected overhead; the risk says the overhead it used."""
    import shutil

    import stash_core as stash

    shutil.copy(REPO / "examples" / "workload.json", tmp_path / "w.json")
    plan = stash.plan_spot(tmp_path / "w.json", "g3.8xlarge:5,g3.16xlarge:3", 0.8, 2700, revocation_s=100,
                           rate_per_h=0, db=tmp_path / "r.duckdb")  # fmt: skip
    best, risk = plan.best, plan.risk
    assert best["cluster"] == "3 x g3.16xlarge + 5 x g3.8xlarge" and risk["revocation_s"] == 100
    assert risk["mean_cost_usd"] == pytest.approx(best["usd_per_h"] * (best["training_s"] - 100) / 3600)


def test_the_risks_json_holds_the_interval_its_text_says(tmp_path):
    """`spot` printed "22% of runs (16% to 28%, 95%)"; its JSON had the 22% alone."""
    import shutil

    import stash_core as stash
    from stash_core.spot.simulate import PlanRisk

    shutil.copy(REPO / "examples" / "workload.json", tmp_path / "w.json")
    plan = stash.plan_spot(tmp_path / "w.json", "g3.8xlarge:5,g3.16xlarge:3", 0.8, 2700, rate_per_h=2.0,
                           db=tmp_path / "r.duckdb")  # fmt: skip
    low, high = plan.risk["p_deadline_ci95"]
    assert low <= plan.risk["p_deadline"] <= high and 0 < high - low < 1
    assert f"({low:.0%} to {high:.0%}, 95%)" in PlanRisk(**plan.risk).text()
    assert json.loads(json.dumps(plan.to_dict()))["risk"]["p_deadline_ci95"] == [low, high]


def test_one_simulated_run_is_said_in_the_singular():
    from stash_core.spot.simulate import PlanRisk

    text = PlanRisk(rate_per_h=0.5, runs=1, p_deadline=1.0, mean_cost_usd=1.0, mean_revocations=0.0).text()
    assert "(1 simulated run, " in text
    assert "(2 simulated runs, " in PlanRisk(0.5, 2, 1.0, 1.0, 0.0).text()


def test_at_rate_zero_the_risk_says_never_revoked_not_a_simulation_or_its_overhead():
    from stash_core.spot.simulate import PlanRisk

    met = PlanRisk(rate_per_h=0.0, runs=1, p_deadline=1.0, mean_cost_usd=5.35, mean_revocations=0.0,
                   revocation_s=30.0, runs_asked=1).text()  # fmt: skip
    assert met == "never revoked (0 revocations per hour): meets the deadline, cost $5.35"
    assert "misses the deadline" in PlanRisk(0.0, 1, 0.0, 5.35, 0.0, 30.0, runs_asked=1).text()


# Quotas of 12 of six kinds: some 400 candidate clusters a re-plan, as large quotas of the catalog give.
KINDS = [Worker(f"K{k}", gpus=1, compute_s=1.0 + 0.1 * k, batch=32, usd_per_h=1.0 + 0.2 * k) for k in range(6)]


def test_the_risk_stops_at_its_candidate_cluster_limit_and_says_so(monkeypatch):
    """A re-plan over large quotas evaluates hundreds of clusters (a tenth of a second and more): the re-plan
    limit alone let `stash spot` simulate for most of a minute. The runs done within the cluster limit are
    the risk's; the first run is always done."""
    from stash_core.spot import simulate as module

    offers = [InstanceOffer(kind, 12) for kind in KINDS]
    monkeypatch.setattr(module, "MAX_RISK_CLUSTERS", 2_000)
    risk = module.plan_risk(offers, NEGLIGIBLE, 0.1, 1e4, **LINKS, rate_per_h=20.0, revocation_s=1.0)
    assert 1 <= risk.runs < risk.runs_asked == 200
    assert "at the work limit of 1,000 re-plans or 2,000 candidate clusters" in risk.text()


def test_a_simulation_stops_at_its_candidate_cluster_limit_and_says_so(monkeypatch):
    from stash_core.spot import simulate as module

    offers = [InstanceOffer(kind, 12) for kind in KINDS]
    monkeypatch.setattr(module, "MAX_SIMULATED_CLUSTERS", 2_000)
    rows = simulate(offers, offers, NEGLIGIBLE, 0.1, 1e4, **LINKS, rate_per_h=20.0, revocation_s=1.0)
    assert 1 <= rows[0]["runs"] < rows[0]["runs_asked"] == 200
    assert "2,000 candidate clusters re-planned" in module.simulation_notes(rows)[0]


def test_a_trace_row_with_more_fields_than_its_header_is_refused(tmp_path):
    """csv.DictReader kept the extra field under the key None and the row was read as a revocation."""
    path = tmp_path / "t.csv"
    path.write_text("time_s,instance\n5,g3.8xlarge,extra\n")
    from stash_core.errors import UsageError

    with pytest.raises(UsageError, match=r"line 2: 3 fields, expected 2"):
        read_trace(path)


def test_a_cost_below_a_cent_is_said_to_its_figures_not_as_zero():
    """The Spot page's card said $0.000919 and the risk line under it "expected cost $0.00"."""
    from stash_core.spot.simulate import PlanRisk

    risky = PlanRisk(rate_per_h=0.5, runs=200, p_deadline=0.9, mean_cost_usd=0.000919, mean_revocations=0.1)
    assert "expected cost $0.000919 with revocations" in risky.text()
    calm = PlanRisk(rate_per_h=0, runs=1, p_deadline=1.0, mean_cost_usd=0.000919, mean_revocations=0)
    assert calm.text().endswith("meets the deadline, cost $0.000919")


def test_an_expected_cost_below_the_plan_says_why(tmp_path):
    """"expected cost $0.738 with revocations (as planned: $0.739)" read as revocations saving money."""
    import shutil

    import stash_core as stash
    from stash_core.cli.spot import format_plan
    from stash_core.spot.simulate import PlanRisk

    shutil.copy(REPO / "examples" / "workload.json", tmp_path / "w.json")
    plan = stash.plan_spot(tmp_path / "w.json", "g3.8xlarge:5,g3.16xlarge:3", 0.8, 2700, rate_per_h=0,
                           db=tmp_path / "r.duckdb")  # fmt: skip
    cheaper = PlanRisk(0.5, 200, 0.9, plan.plan.best.cost_usd * 0.98, 1.0, 30.0)
    text = format_plan(plan.plan, plan.candidates, plan.pricing, 0.8, 2700, cheaper)
    assert "below it because a re-plan after a revocation may finish on cheaper, slower instances" in text
    dearer = PlanRisk(0.5, 200, 0.9, plan.plan.best.cost_usd * 1.02, 1.0, 30.0)
    assert "below it" not in format_plan(plan.plan, plan.candidates, plan.pricing, 0.8, 2700, dearer)


def test_the_mean_cost_carries_its_interval_where_runs_are_random(tmp_path):
    """The share of runs meeting the deadline had its 95% interval; the mean cost beside it had none."""
    offers = [InstanceOffer(A, 3)]
    rows = simulate(offers, offers, NEGLIGIBLE, 0.1, 400.0, **LINKS, rate_per_h=20.0, runs=40,
                    revocation_s=10.0)  # fmt: skip
    spot = rows[0]
    assert spot["runs"] == 40 and 0 < spot["mean_cost_ci95_usd"] < spot["mean_cost_usd"]
    path = tmp_path / "trace.csv"
    path.write_text("time_s,instance\n50,A\n")
    replayed = simulate(offers, offers, NEGLIGIBLE, 0.1, 400.0, **LINKS, revocation_s=10.0,
                        trace=read_trace(path))  # fmt: skip
    assert replayed[0]["mean_cost_ci95_usd"] is None  # one run is the whole answer
