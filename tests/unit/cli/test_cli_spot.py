"""`stash spot`: a plan from a workload file and the catalog's spot prices; clear refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stash_core.cli.main import main

WORKLOAD = {
    "param_mb": 11.54, "solo_bandwidth_mbps": 142, "a1": 0.1, "b1": 0.2,
    "g": [100.0, -1.0, 1000.0, 1.0, 0.3], "batch_per_gpu": 128,
    "compute_s": {"g3.4xlarge": 0.9, "g3.8xlarge": 0.95, "g3.16xlarge": 1.0},
}  # fmt: skip


def _spot(tmp_path, capsys, *extra, workload=WORKLOAD):
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload))
    status = main(["spot", "--workload", str(path), "--instances", "g3.4xlarge:4,g3.8xlarge:5,g3.16xlarge:3",
                   "--target-loss", "0.8", "--db", str(tmp_path / "r.duckdb"), *extra])  # fmt: skip
    return status, capsys.readouterr()


def test_a_plan_with_spot_prices_and_the_same_on_demand(tmp_path, capsys):
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--json")
    assert status == 0, out.err
    spot = json.loads(out.out)
    assert spot["pricing"] == "spot" and spot["best"]["within_budget"]
    assert spot["best"]["training_s"] <= 3000
    assert spot["search"] == "exact"  # 12 instances of 3 types: every mix of counts was tried
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--json", "--on-demand")
    on_demand = json.loads(out.out)
    # on-demand costs 3.3 times spot for every g3 type in the catalog (spotDNN Table III)
    assert on_demand["best"]["cost_usd"] > 3 * spot["best"]["cost_usd"]


def test_the_json_restates_what_was_asked_and_that_it_is_a_prediction(tmp_path, capsys):
    """The plan's JSON lacked the target and budget it answers, and the text's "not a measurement"."""
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--revocation-s", "20", "--json")
    plan = json.loads(out.out)
    assert plan["request"] == {"target_loss": 0.8, "budget_s": 3000.0, "ps_gbps": pytest.approx(9.6),
                               "pcie_gbps": 80.0, "revocation_s": 20.0, "rate_per_h": 0.5}  # fmt: skip
    assert plan["basis"].endswith("not a measurement")
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--json", "--on-demand")
    assert json.loads(out.out)["request"]["rate_per_h"] is None  # never revoked


def test_a_type_without_the_plans_kind_of_price_is_left_out_and_said(tmp_path, capsys):
    """`spot --on-demand` refused the whole offer for one type with a spot price alone, where spot-simulate
    planned on-demand without it; a type with neither price is still refused when it is all there is."""
    db = str(tmp_path / "r.duckdb")
    assert main(["instances", "add", "spotonly", "--accelerator", "NVIDIA V100 16 GB", "--accelerator-count",
                 "1", "--spot-usd-per-h", "0.9", "--db", db]) == 0  # fmt: skip
    capsys.readouterr()
    workload = {**WORKLOAD, "compute_s": {**WORKLOAD["compute_s"], "spotonly": 0.9}}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    ask = ["spot", "--workload", str(path), "--target-loss", "0.8", "--budget-s", "3000", "--db", db]
    assert main([*ask, "--instances", "spotonly:4,g3.8xlarge:5", "--on-demand"]) == 0
    out = capsys.readouterr().out
    said = ("note: on-demand: planned without spotonly: no on-demand price in the catalog (`stash instances "
            "set`)")  # fmt: skip
    assert said in out.splitlines() and "spotonly" not in out.split("note:")[0], out
    assert main([*ask, "--instances", "spotonly:4,g3.8xlarge:5", "--on-demand", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [said.removeprefix("note: ")]
    assert main([*ask, "--instances", "spotonly:4", "--on-demand"]) == 2
    assert "no on-demand price for instance spotonly" in capsys.readouterr().err


@pytest.mark.parametrize("spot_only", [["--revocation-s", "60"], ["--rate-per-h", "2"]])
def test_revocation_options_with_on_demand_are_refused_not_ignored(tmp_path, capsys, spot_only):
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--on-demand", *spot_only)
    assert status == 2 and out.out == ""
    assert out.err.strip() == (
        "stash: --revocation-s and --rate-per-h are for spot plans: an on-demand instance is never revoked"
    )


def test_the_text_plan_names_the_cluster(tmp_path, capsys):
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000")
    assert status == 0
    assert "cheapest:" in out.out and " x g3." in out.out and "not a measurement" in out.out


def test_an_impossible_budget_exits_1_with_the_reason(tmp_path, capsys):
    status, out = _spot(tmp_path, capsys, "--budget-s", "60")
    assert status == 1
    assert "no plan:" in out.out and "workers" in out.out
    assert out.err.startswith("stash: no plan: ")  # on stderr as every failing command's line (it had none)
    status, out = _spot(tmp_path, capsys, "--budget-s", "60", "--json")  # a failure's keys, as any command's
    answer = json.loads(out.out)
    assert status == 1 and answer["exit_status"] == 1 and answer["best"] is None
    assert answer["error"] == f"no plan: {answer['infeasible_reason']}"
    assert out.err == f"stash: {answer['error']}\n"


def test_a_target_one_worker_reaches_untrained_is_planned_on_the_clusters_that_train(tmp_path, capsys):
    """One worker reaches the target untrained, so the whole workload was refused; eq. 3 asks more iterations
    of more workers and a larger R, so larger clusters train (spot-replan planned the same workload)."""
    status, out = _spot(
        tmp_path, capsys, "--budget-s", "3000", "--json", workload={**WORKLOAD, "g": [5000, -1, 1000, 1, 0.3]}
    )
    answer = json.loads(out.out)
    assert status == 0 and answer["best"]["workers"] > 1 and answer["best"]["iterations"] > 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"g": [1, 2]}, "five numbers"),
        ({"param_mb": "big"}, "param_mb must be a number"),
        # "or a model" read as an option: spot has no --model, the workload file's "model" was meant
        ({"compute_s": {}}, 'g3.4xlarge: give "compute_s" in the workload file, or its "model"'),
        ({"batch_per_gpu": 0}, "batch_per_gpu"),
    ],
)
def test_a_bad_workload_is_one_line_and_exit_2(tmp_path, capsys, change, message):
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", workload={**WORKLOAD, **change})
    assert status == 2
    assert message in out.err and len(out.err.strip().splitlines()) == 1


def test_an_unknown_instance_is_refused(tmp_path, capsys):
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(WORKLOAD))
    status = main(["spot", "--workload", str(path), "--instances", "nope.large", "--target-loss", "0.8",
                   "--budget-s", "10", "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    assert status == 2
    assert "not in the catalog" in capsys.readouterr().err
    assert not (tmp_path / "r.duckdb").exists()  # nothing written


def test_compute_times_come_from_stored_profiles(tmp_path, capsys):
    from result_docs import result_doc

    from stash_core.spot.inputs import stored_compute_s
    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    profiles = (("g3.4xlarge", 128, 1, 0.9), ("g3.8xlarge", 128, 2, 0.95), ("g3.16xlarge", 512, 1, 0.7))
    for instance, batch, workers, compute_s in profiles:
        stalls = {"compute": compute_s, "interconnect": 0.01}
        doc = result_doc("resnet50", instance=instance, batch_size=batch, workers=workers, stalls=stalls)
        ingest_result(db, doc)
    # batch per worker against batch per GPU, and the worker count against the GPUs of a worker
    assert stored_compute_s(db, "resnet50", "g3.4xlarge", 128, 1) == pytest.approx(0.9)
    assert stored_compute_s(db, "resnet50", "g3.8xlarge", 128, 2) == pytest.approx(0.95)
    assert stored_compute_s(db, "resnet50", "g3.8xlarge", 256, 1) is None
    assert stored_compute_s(db, "resnet50", "g3.16xlarge", 128, 4) is None  # its profile is 1 x 512
    workload = {key: value for key, value in WORKLOAD.items() if key != "compute_s"}
    path = tmp_path / "workload.json"
    path.write_text(json.dumps({**workload, "model": "resnet50"}))
    status = main(["spot", "--workload", str(path), "--instances", "g3.4xlarge:2,g3.8xlarge:2",
                   "--target-loss", "0.8", "--budget-s", "3000", "--db", str(db), "--json"])  # fmt: skip
    assert status == 0
    # the one without a profile at its batch is named
    status = main(["spot", "--workload", str(path), "--instances", "g3.16xlarge:1", "--target-loss", "0.8",
                   "--budget-s", "3000", "--db", str(db)])  # fmt: skip
    assert status == 2
    said = capsys.readouterr().err
    assert "no completed profile of resnet50 at batch 128 per worker with 4 worker(s) on g3.16xlarge" in said
    # the command that measures it names the model (it had left --model out)
    assert "`stash profile --model resnet50 --instance g3.16xlarge --workers 4 --batch-size 128`" in said
    # a model no profile could ever be of was sent to profile it
    path.write_text(json.dumps({**workload, "model": "resnet5O"}))
    status = main(["spot", "--workload", str(path), "--instances", "g3.16xlarge:1", "--target-loss", "0.8",
                   "--budget-s", "3000", "--db", str(db)])  # fmt: skip
    said = capsys.readouterr().err
    assert status == 2 and "\"model\" 'resnet5O' is neither a zoo model nor" in said and "resnet50" in said


def _loss_csv(path, g=(876.5, -0.2, 300.0, 1.0, 0.5), wild=False):
    import math

    lines = ["iteration,loss,batch_size,workers"]
    for b in (64, 128, 256):
        for n in (1, 2, 4):
            r = math.sqrt((n - 1) / n)
            for j in range(0, 6001, 500):
                loss = (g[1] * b + g[2]) * math.sqrt((r + g[3]) * n) / (j + g[0]) + g[4]
                if wild:
                    loss = 1 + 0.8 * math.sin(j / 300.0) ** 2 + 0.5 * (b == 128)
                lines.append(f"{j},{loss},{b},{n}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_missing_database_is_said_as_such_not_as_a_missing_profile(tmp_path, capsys):
    workload = {key: value for key, value in WORKLOAD.items() if key != "compute_s"}
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", workload={**workload, "model": "resnet18"})
    assert status == 2
    assert f"no database at {tmp_path / 'r.duckdb'}" in out.err and "no completed profile" not in out.err
    assert len(out.err.strip().splitlines()) == 1


def test_fit_loss_writes_g_into_the_workload_and_it_plans(tmp_path, capsys):
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({**WORKLOAD, "g": [0, 0, 1, 1, 0]}))
    csv_path = _loss_csv(tmp_path / "loss.csv")
    assert main(["spot-fit-loss", "--csv", str(csv_path), "--workload", str(workload)]) == 0
    out = capsys.readouterr().out
    assert "g1 = 876.5" in out and "mean error" in out
    doc = json.loads(workload.read_text())
    assert doc["g"] == pytest.approx([876.5, -0.2, 300.0, 1.0, 0.5], rel=1e-3)
    assert doc["loss_fit"]["mean_rel_error"] < 0.01 and doc["param_mb"] == 11.54  # the rest is kept
    status = main(["spot", "--workload", str(workload), "--instances", "g3.4xlarge:4,g3.8xlarge:5",
                   "--target-loss", "0.6", "--budget-s", "30000",
                   "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    assert status == 0, capsys.readouterr().err
    fresh = tmp_path / "fresh.json"  # made by the fit: spot then said "param_mb is missing" and no more
    assert main(["spot-fit-loss", "--csv", str(csv_path), "--workload", str(fresh)]) == 0
    said = capsys.readouterr().out
    assert "within the 12% a fit's mean may reach" in said
    assert f"written to {fresh} (a new file: it holds the loss fit alone; `stash spot` also needs" in said
    assert main(["spot-fit-loss", "--csv", str(csv_path), "--workload", str(fresh), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["new_file"] is False  # the file it made the first time


def test_a_fit_beyond_the_bound_is_refused_and_not_written(tmp_path, capsys):
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD))
    csv_path = _loss_csv(tmp_path / "loss.csv", wild=True)
    assert main(["spot-fit-loss", "--csv", str(csv_path), "--workload", str(workload)]) == 2
    assert "beyond" in capsys.readouterr().err
    assert json.loads(workload.read_text()) == WORKLOAD
    new = tmp_path / "new.json"  # a workload that was never there was said to be "left as it was"
    assert main(["spot-fit-loss", "--csv", str(csv_path), "--workload", str(new)]) == 2
    assert capsys.readouterr().err.rstrip().endswith(f"{new} is not made") and not new.exists()


def test_a_plan_at_the_edge_of_its_budget_is_called_fragile(tmp_path, capsys):
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--json")
    best = json.loads(out.out)["best"]
    # the same plan with 1% to spare: g3 5% higher needs more than 1% more iterations
    status, out = _spot(tmp_path, capsys, "--budget-s", str(best["training_s"] * 1.01), "--json")
    assert status == 0 and json.loads(out.out)["best"]["cluster"] == best["cluster"]
    assert "g3 +5%" in json.loads(out.out)["fragile"]
    status, out = _spot(tmp_path, capsys, "--budget-s", str(best["training_s"] * 1.01))
    assert "fragile plan: it changes when the loss model's loss-scale constant g3 is 5% higher" in out.out


OFFERS = "g3.4xlarge:4,g3.8xlarge:5,g3.16xlarge:3"


def _run(tmp_path, capsys, command, *extra, workload=WORKLOAD):
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload))
    status = main([command, "--workload", str(path), "--instances", OFFERS, "--target-loss", "0.8",
                   "--db", str(tmp_path / "r.duckdb"), *extra])  # fmt: skip
    return status, capsys.readouterr()


def test_replan_keeps_the_running_instances_and_the_loss_reached(tmp_path, capsys):
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.8xlarge:2", "--current-loss", "1.5",
                       "--budget-s", "2000", "--json")  # fmt: skip
    assert status == 0, out.err
    answer = json.loads(out.out)
    assert answer["running"] == 2 and answer["best"]["workers"] >= 2
    assert "g3.8xlarge" in answer["best"]["cluster"] and answer["best"]["training_s"] <= 2000
    assert answer["search"] == "exact"  # every mix of the offered kinds beside the running ones was tried
    status, text = _run(tmp_path, capsys, "spot-replan", "--running", "g3.8xlarge:2", "--current-loss", "1.5",
                        "--budget-s", "2000")  # fmt: skip
    assert status == 0 and "keep 2 running" in text.out
    # the time it needs within the budget left (it was "N s left of 2000 s")
    assert f"trains in {answer['best']['training_s']:.0f} s of the 2000 s left" in text.out
    # the whole cluster's cost from now on (it read "$X more": the same whether 2 or 0 still ran)
    assert re.search(r"\$[\d.]+ from now for the whole cluster", text.out), text.out


def test_replan_without_enough_time_left_exits_1(tmp_path, capsys):
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.4xlarge:1", "--current-loss", "5",
                       "--budget-s", "10")  # fmt: skip
    assert status == 1 and "no plan:" in out.out and out.err.startswith("stash: no plan: ")
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.4xlarge:1", "--current-loss", "5",
                       "--budget-s", "10", "--json")  # fmt: skip
    answer = json.loads(out.out)
    assert status == 1 and answer["exit_status"] == 1 and answer["best"] is None
    assert answer["error"] == f"no plan: {answer['infeasible_reason']}" and "no plan: " in out.err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--running", "p3.2xlarge:1", "--current-loss", "2", "--budget-s", "100"], "not among --instances"),
        (["--running", "g3.4xlarge:9", "--current-loss", "2", "--budget-s", "100"], "more than its quota"),
        # the parts of one name are added: the line said "--running g3.4xlarge:9", which nobody typed
        (["--running", "g3.4xlarge:5,g3.4xlarge:4", "--current-loss", "2", "--budget-s", "100"],
         "--running names g3.4xlarge 2 times, 9 together: more than its quota"),
        (["--running", "g3.4xlarge:1", "--current-loss", "0.5", "--budget-s", "100"], "already reaches"),
    ],
)
def test_replan_refuses_bad_running_sets(tmp_path, capsys, extra, message):
    status, out = _run(tmp_path, capsys, "spot-replan", *extra)
    assert status == 2 and message in out.err and len(out.err.strip().splitlines()) == 1


def test_simulate_compares_the_three_strategies(tmp_path, capsys):
    status, out = _run(tmp_path, capsys, "spot-simulate", "--deadline-s", "3000", "--rate-per-h", "2",
                       "--runs", "30", "--json")  # fmt: skip
    assert status == 0, out.err
    rows = {row["strategy"]: row for row in json.loads(out.out)["strategies"]}
    assert set(rows) == {"spotDNN", "no contention", "on-demand"}
    assert rows["spotDNN"]["runs"] == 30 and rows["spotDNN"]["mean_revocations"] > 0
    assert rows["on-demand"]["mean_revocations"] == 0
    assert rows["on-demand"]["mean_cost_usd"] > rows["spotDNN"]["mean_cost_usd"]
    assert all(0 <= row["p_deadline"] <= 1 for row in rows.values())


def test_strategies_that_plan_and_train_alike_meet_the_same_revocations(tmp_path, capsys):
    """The strategies drew their revocations from one generator in turn: the example workload has no
    parameter-server contention at these sizes, so 'no contention' plans and trains as spotDNN does, yet it
    met the deadline 6.5 points apart (seed 4)."""
    example = str(Path(__file__).resolve().parents[3] / "examples" / "workload.json")
    status = main(["spot-simulate", "--workload", example, "--instances", "g3.8xlarge:5,g3.16xlarge:3",
                   "--target-loss", "0.8", "--deadline-s", "2600", "--rate-per-h", "0.5", "--seed", "4",
                   "--runs", "100", "--json", "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    out = capsys.readouterr()
    assert status == 0, out.err
    rows = {row["strategy"]: row for row in json.loads(out.out)["strategies"]}
    spotdnn, free = rows["spotDNN"], rows["no contention"]
    assert spotdnn["first_plan"] == free["first_plan"]
    assert (spotdnn["p_deadline"], spotdnn["mean_cost_usd"]) == (free["p_deadline"], free["mean_cost_usd"])


def test_simulating_a_deadline_no_plan_meets_says_so_and_what_it_trains(tmp_path, capsys):
    """Every strategy started from the fastest cluster and the table showed 0% without a word; then it said
    so and exited 0, where `stash spot` (and docs/commands.md) exit 1 for a deadline nothing meets."""
    status, out = _run(tmp_path, capsys, "spot-simulate", "--deadline-s", "100", "--rate-per-h", "2",
                       "--runs", "5", "--json")  # fmt: skip
    assert status == 1, out.err
    answer = json.loads(out.out)
    said = r"no cluster of \d+ (to \d+ )?workers? trains within 100 s"
    assert all(re.search(said, row["infeasible_reason"]) for row in answer["strategies"])
    assert answer["exit_status"] == 1 and re.match(f"no plan meets the deadline: {said}", answer["error"])
    status, out = _run(tmp_path, capsys, "spot-simulate", "--deadline-s", "100", "--rate-per-h", "2",
                       "--runs", "5")  # fmt: skip
    assert status == 1
    assert "spotDNN: no plan meets the deadline even without revocations (no cluster of " in out.out
    assert "its runs train the fastest cluster" in out.out
    status, out = _run(tmp_path, capsys, "spot-simulate", "--deadline-s", "3000", "--rate-per-h", "2",
                       "--runs", "5", "--json")  # fmt: skip
    answer = json.loads(out.out)
    assert status == 0 and "error" not in answer
    assert all(row["infeasible_reason"] is None for row in answer["strategies"])


def test_simulate_over_a_trace_prints_a_table(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,instance\n200,g3.4xlarge\n400,g3.8xlarge\n")
    status, out = _run(tmp_path, capsys, "spot-simulate", "--deadline-s", "3000", "--trace", str(trace))
    assert status == 0, out.err
    assert "P(deadline)" in out.out and "no contention" in out.out and "on-demand" in out.out


def test_a_measured_ps_bandwidth_is_the_default(tmp_path, capsys):
    slow = {**WORKLOAD, "ps_bandwidth_mbps": 20}  # below B_req: contention on every count
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", "--json", workload=slow)
    given = _spot(tmp_path, capsys, "--budget-s", "3000", "--json", "--ps-gbps", "0.16", workload=slow)[1]
    fast = _spot(tmp_path, capsys, "--budget-s", "3000", "--json")[1]
    assert json.loads(out.out)["candidates"] == json.loads(given.out)["candidates"]  # 20 MB/s = 0.16 Gbit/s
    assert json.loads(out.out)["candidates"] != json.loads(fast.out)["candidates"]


def _example_spot(tmp_path, capsys, batch_per_gpu: dict, instances: str, target_loss: str, *extra) -> str:
    """`stash spot` on the example workload with its batches per instance type changed; its stdout."""
    from support import REPO

    example = json.loads((REPO / "examples" / "workload.json").read_text())
    workload = {**example, "batch_per_gpu": batch_per_gpu}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    main(["spot", "--workload", str(path), "--instances", instances, "--target-loss", target_loss,
          "--budget-s", "2600", "--rate-per-h", "0", "--db", str(tmp_path / "r.duckdb"), *extra])  # fmt: skip
    return capsys.readouterr().out


def test_the_json_of_a_plan_with_candidates_that_never_reach_the_target_is_strict_json(tmp_path, capsys):
    """A batch the loss model never trains to the target gives infinite iterations, time and cost: printed
    as Infinity (not JSON) by --json; null now, as every other command prints them."""
    batches = {"g3.8xlarge": 8000, "g3.16xlarge": 64}
    out = _example_spot(tmp_path, capsys, batches, "g3.8xlarge:2,g3.16xlarge:1", "0.8", "--json")
    json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


def test_a_batch_at_which_the_loss_model_needs_no_training_is_never_a_plan(tmp_path, capsys):
    """g3.16xlarge at batch 2000 reaches loss 1.5 'before any training': it was offered as the cheapest plan,
    0 s and $0.00, beside a refusal of the same case when it is the only type."""
    batches = {"g3.8xlarge": 64, "g3.16xlarge": 2000}
    out = _example_spot(tmp_path, capsys, batches, "g3.8xlarge:5,g3.16xlarge:3", "1.5")
    cheapest = next(line for line in out.splitlines() if line.startswith("cheapest:"))
    assert "g3.16xlarge" not in cheapest and "- 0 s, $0.00" not in cheapest, cheapest


def test_replan_says_when_the_running_workers_saturate_the_parameter_server(tmp_path, capsys):
    saturating = {**WORKLOAD, "a1": 0.5}  # P = 0.5 sqrt(n) + 0.2 < 1 up to n = 2 (eq. 15)
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.8xlarge:4", "--current-loss", "1.5",
                       "--budget-s", "100000", workload=saturating)  # fmt: skip
    assert status == 0, out.err
    assert "the 4 running workers are more than the 2 the parameter server serves" in out.err
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.8xlarge:4", "--current-loss", "1.5",
                       "--budget-s", "100000", "--json", workload=saturating)  # fmt: skip
    assert json.loads(out.out)["most_workers"] == 2
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.8xlarge:2", "--current-loss", "1.5",
                       "--budget-s", "100000", workload=saturating)  # fmt: skip
    assert status == 0 and "warning" not in out.err


# g2 b + g3 = 1000 - 0.2 b: it holds at a g3.4xlarge's batch (2048) but not a g3.16xlarge's (8192)
OUTSIDE = {**WORKLOAD, "g": [876.5, -0.2, 1000, 1.0, 0.5], "batch_per_gpu": 2048,
           "compute_s": {"g3.4xlarge": 1.0, "g3.16xlarge": 0.5}}  # fmt: skip


def test_clusters_outside_the_loss_model_are_said_in_words_not_as_inf(tmp_path, capsys):
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(OUTSIDE))
    status = main(["spot", "--workload", str(path), "--instances", "g3.4xlarge:4,g3.16xlarge:4",
                   "--target-loss", "0.8", "--budget-s", "2600", "--rate-per-h", "0", "--top", "20",
                   "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    outside = [line for line in out.splitlines() if line.startswith("  1 x g3.16xlarge  ")]
    assert outside and outside[0].split()[4:] == ["-", "-", "1.37", "no:", "outside", "the", "loss", "model"]
    assert "inf" not in out and "nan" not in out


def test_a_speed_the_model_cannot_compute_with_is_refused_in_one_line(tmp_path, capsys):
    # 1 / T overflows: T_exp = 0 and b_w = 0 x inf, NaN ("needs nan s")
    seconds = {name: 1e-320 for name in ("g3.4xlarge", "g3.8xlarge", "g3.16xlarge")}
    tiny = {**WORKLOAD, "param_mb": 1e-320, "compute_s": seconds}
    status, out = _spot(tmp_path, capsys, "--budget-s", "3000", workload=tiny)
    assert status == 2 and "beyond what the model can compute with" in out.err and "nan" not in out.out
    assert len(out.err.strip().splitlines()) == 1


def test_replan_counts_the_distinct_clusters_tried(tmp_path, capsys):
    """2 g3.8xlarge running, 3 more on offer: 7 windows (0, 1, 2 or 3 added) but 4 distinct clusters."""
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(WORKLOAD))
    argv = ["spot-replan", "--workload", str(path), "--instances", "g3.8xlarge:5", "--running",
            "g3.8xlarge:2", "--current-loss", "1.5", "--target-loss", "0.8", "--budget-s", "20000",
            "--db", str(tmp_path / "r")]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tried"] == 4
    assert main(argv) == 0
    assert "(4 clusters tried)" in capsys.readouterr().out


def test_the_batch_table_keeps_long_names_apart():
    from stash_core.cli.spot import batch_lines

    rows = [{"instance": "Standard_NC24ads_A100_v4", "accelerator": "A100-PCIE-80GB-long-name",
             "gpu_memory_gib": 80.0, "batch_per_gpu": 512},
            {"instance": "g3.4xlarge", "accelerator": "M60", "gpu_memory_gib": 8.0, "batch_per_gpu": None},
            {"instance": "x", "accelerator": None, "gpu_memory_gib": None,
             "batch_per_gpu": None}]  # fmt: skip
    lines = batch_lines(rows)
    assert lines[0].split() == ["Standard_NC24ads_A100_v4", "A100-PCIE-80GB-long-name", "80", "GiB", "512"]
    assert lines[1].split() == ["g3.4xlarge", "M60", "8", "GiB", "none", "fits"]
    assert lines[2].split() == ["x", "?", "unknown", "memory"]
    assert len({line.index("GiB") for line in lines[:2]}) == 1  # the columns line up
    rows[0]["extrapolated"] = True  # past the largest batch measured
    assert batch_lines(rows)[0].split()[-1] == "512*"


@pytest.mark.parametrize(
    "command, shown",
    [("spot-replan", "(default: 30.0)"), ("spot-simulate", "(default: 30.0)"),
     ("spot-memory", "(default: 8,32,128)"), ("spot-profile", "(default: 1,2,4,7)")],
)  # fmt: skip
def test_help_says_each_default_once(capsys, command, shown):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert shown in text and "(30)" not in text and "(default 32)" not in text and "(default cpu)" not in text
    assert "(default: [" not in text  # a list as it is typed; none where it is empty


def _simulate_with_one_price(tmp_path, capsys, name: str, price_flag: str) -> list[str]:
    """A spot-simulate command line on a database holding `name`, a V100 instance with one price alone
    (`price_flag`), and a workload that gives it the compute time of a g3.8xlarge."""
    db = str(tmp_path / "r.duckdb")
    assert main(["instances", "add", name, "--accelerator", "NVIDIA V100 16 GB", "--accelerator-count", "1",
                 price_flag, "0.9", "--db", db]) == 0  # fmt: skip
    example = json.loads((Path(__file__).resolve().parents[3] / "examples" / "workload.json").read_text())
    example["compute_s"][name] = example["compute_s"]["g3.8xlarge"]
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(example))
    capsys.readouterr()
    return ["spot-simulate", "--workload", str(workload), "--target-loss", "0.8", "--deadline-s", "3000",
            "--rate-per-h", "1", "--runs", "5", "--db", db]  # fmt: skip


def test_simulate_leaves_an_instance_with_a_spot_price_alone_out_of_on_demand(tmp_path, capsys):
    """An instance with only a spot price in the catalog: `spot` planned with it, `spot-simulate` refused the
    whole comparison ("no on-demand price for instance spotonly")."""
    common = _simulate_with_one_price(tmp_path, capsys, "spotonly", "--spot-usd-per-h")
    assert main([*common, "--instances", "g3.8xlarge:3,spotonly:4", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    rows = {row["strategy"]: row for row in answer["strategies"]}
    assert "spotonly" in rows["spotDNN"]["first_plan"] and rows["on-demand"]["first_plan"] == "3 x g3.8xlarge"
    assert answer["no_on_demand_price"] == ["spotonly"]
    assert main([*common, "--instances", "spotonly:4"]) == 1  # 4 of them need 3,895 s: no plan meets 3,000 s
    out = capsys.readouterr().out
    assert "on-demand: not simulated: no instance offered has an on-demand price" in out
    assert "\n  on-demand " not in out  # no row


def test_simulate_leaves_an_instance_without_a_spot_price_out_of_the_spot_plans(tmp_path, capsys):
    """An instance with an on-demand price alone: `spot` planned without it, `spot-simulate` refused the
    whole comparison ("no spot price for instance demandonly"); with no type spot-priced it still refuses."""
    common = _simulate_with_one_price(tmp_path, capsys, "demandonly", "--on-demand-usd-per-h")
    assert main([*common, "--instances", "g3.8xlarge:3,demandonly:4", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    rows = {row["strategy"]: row for row in answer["strategies"]}
    assert "demandonly" not in rows["spotDNN"]["first_plan"]
    assert "demandonly" in rows["on-demand"]["first_plan"]
    assert answer["no_spot_price"] == ["demandonly"] and answer["no_on_demand_price"] == []
    assert main([*common, "--instances", "g3.8xlarge:3,demandonly:4"]) == 0
    assert "spot: planned without demandonly: no spot price" in capsys.readouterr().out
    assert main([*common, "--instances", "demandonly:4"]) == 2
    # the name said once ("instance demandonly: no spot price for instance demandonly" before)
    assert capsys.readouterr().err.startswith("stash: no spot price for instance demandonly (set one")


def test_replan_leaves_out_a_type_without_a_spot_price_as_spot_does(tmp_path, capsys):
    """spot left g4dn.xlarge (no spot price) out with a note; spot-replan refused the whole re-plan."""
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(WORKLOAD))
    common = ["--workload", str(path), "--instances", "g3.8xlarge:5,g4dn.xlarge:2", "--target-loss", "0.8",
              "--current-loss", "1.5", "--budget-s", "2600", "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
    assert main(["spot-replan", *common, "--running", "g3.8xlarge:2"]) == 0
    out = capsys.readouterr().out
    assert "keep 2 running" in out and "note: spot: planned without g4dn.xlarge: no spot price" in out
    assert main(["spot-replan", *common, "--running", "g4dn.xlarge:1"]) == 2
    err = capsys.readouterr().err
    said = "it has no spot price in the catalog to re-plan with (set one with `stash instances set`)"
    assert err.strip() == f"stash: --running g4dn.xlarge: {said}"


def test_replan_without_a_plan_says_what_the_fastest_cluster_needs(tmp_path, capsys):
    """`spot` said what the fastest cluster needs; spot-replan only that none reaches the target."""
    status, out = _run(tmp_path, capsys, "spot-replan", "--running", "g3.4xlarge:1", "--current-loss", "5",
                       "--budget-s", "10")  # fmt: skip
    needs = r"within the 10 s left: the fastest, .+, needs [\d,]+ s$"
    assert status == 1 and re.search(needs, out.out.strip())
