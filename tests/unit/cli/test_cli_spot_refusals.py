"""The spot commands refuse bad input with one line on stderr and exit 2: no traceback, nothing written."""

from __future__ import annotations

import json

import pytest

from stash_core.cli.main import main

WORKLOAD = {
    "param_mb": 11.54, "solo_bandwidth_mbps": 142, "a1": 0.1, "b1": 0.2,
    "g": [100.0, -1.0, 1000.0, 1.0, 0.3], "batch_per_gpu": 128,
    "compute_s": {"g3.4xlarge": 0.9, "g3.8xlarge": 0.95, "g3.16xlarge": 1.0},
}  # fmt: skip
OFFERS = "g3.4xlarge:4,g3.8xlarge:5"
REPLAN = ["spot-replan", "--running", "g3.4xlarge:1", "--current-loss", "2", "--budget-s", "3000"]
SPOT = ["spot", "--budget-s", "3000"]


def _stash(tmp_path, capsys, command, *extra, workload=WORKLOAD, instances=OFFERS):
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload))
    status = main([command[0], "--workload", str(path), "--instances", instances, "--target-loss", "0.8",
                   "--db", str(tmp_path / "r.duckdb"), *command[1:], *extra])  # fmt: skip
    return status, capsys.readouterr()


def _one_line(status, out, message):
    assert status == 2, out.err
    assert message in out.err and len(out.err.strip().splitlines()) == 1
    assert "Traceback" not in out.err and "Error:" not in out.err


@pytest.mark.parametrize("command", [SPOT, REPLAN], ids=["spot", "spot-replan"])
@pytest.mark.parametrize(
    "change, message",
    [
        ({"compute_s": [1, 2]}, "compute_s must be an object of instance name -> seconds per iteration"),
        ({"compute_s": 0.9}, "compute_s must be an object of instance name -> seconds per iteration"),
        ({"g": [-1, -1, -1, -1, -1]}, "g4 = -1 is negative"),
        ({"g": [-876.5, -0.2, 1903.6, 1, 0.5]}, "g1 = -876.5 is negative: the loss model (eq. 3) divides"),
        ({"g": [100, -1, -200, 1, 0.3]}, "does not hold at any batch on offer: g2 x batch + g3 is -328"),
        ({"g": [100, -1, 1000, 1, 0.9]}, "target loss 0.8 is at or below the loss model's floor g5 = 0.9"),
        ({"ps_bandwidth_mbps": -5}, "ps_bandwidth_mbps must be a positive number of MB/s, got -5"),
        ({"ps_bandwidth_mbps": 0}, "ps_bandwidth_mbps must be a positive number"),
        ({"ps_bandwidth_mbps": "fast"}, "ps_bandwidth_mbps must be a positive number"),
    ],
)
def test_a_bad_workload_is_refused_alike_by_spot_and_replan(tmp_path, capsys, command, change, message):
    status, out = _stash(tmp_path, capsys, command, workload={**WORKLOAD, **change})
    _one_line(status, out, message)


@pytest.mark.parametrize("command", [SPOT, REPLAN], ids=["spot", "spot-replan"])
def test_an_empty_item_of_the_offers_is_refused_not_dropped(tmp_path, capsys, command):
    status, out = _stash(tmp_path, capsys, command, instances="g3.4xlarge:4,,g3.8xlarge:5")
    _one_line(status, out, "an empty item in 'g3.4xlarge:4,,g3.8xlarge:5': two commas in a row")


def test_a_non_finite_ps_bandwidth_is_refused(tmp_path, capsys):
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(WORKLOAD)[:-1] + ', "ps_bandwidth_mbps": NaN}')
    status = main(["spot", "--workload", str(path), "--instances", OFFERS, "--target-loss", "0.8",
                   "--budget-s", "3000", "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    _one_line(status, capsys.readouterr(), "ps_bandwidth_mbps must be a positive number of MB/s, got nan")


def test_running_counts_of_a_repeated_name_add_up_against_the_quota(tmp_path, capsys):
    over = [
        "spot-replan",
        "--running",
        "g3.4xlarge:1,g3.4xlarge:4",
        "--current-loss",
        "2",
        "--budget-s",
        "3000",
    ]
    status, out = _stash(tmp_path, capsys, over, instances="g3.4xlarge:4")
    _one_line(status, out, "--running names g3.4xlarge 2 times, 5 together: more than its quota of 4")
    # quotas of a repeated name add up too: 2 + 3 offered, 5 running
    fits = ["spot-replan", "--running", "g3.4xlarge:2,g3.4xlarge:3", "--current-loss", "2",
            "--budget-s", "3000", "--json"]  # fmt: skip
    status, out = _stash(tmp_path, capsys, fits, instances="g3.4xlarge:2,g3.4xlarge:3")
    assert status == 0, out.err
    assert json.loads(out.out)["running"] == 5


@pytest.mark.slow
def test_a_quota_far_above_the_upper_bound_plans_as_the_bound_does(tmp_path, capsys):
    """n_upper is 64 here ((1 - b1) / a1)^2: a quota of 10,000 gives the same candidates as one of 64."""
    status, out = _stash(tmp_path, capsys, [*SPOT, "--json", "--top", "10000"], instances="g3.4xlarge:10000")
    assert status == 0, out.err
    huge = json.loads(out.out)
    status, out = _stash(tmp_path, capsys, [*SPOT, "--json", "--top", "10000"], instances="g3.4xlarge:64")
    assert huge["bounds"][1] == 64 and huge["candidates"] == json.loads(out.out)["candidates"]


SIMULATE = ["spot-simulate", "--deadline-s", "3000"]


@pytest.mark.parametrize(
    "trace, extra, message",
    [
        ("time_s,instance\n10\n", [], "line 2: needs time_s (a number >= 0) and an instance name"),
        ("time_s,instance\n10,\n", [], "line 2: needs time_s (a number >= 0) and an instance name"),
        ("", [], "needs a header line time_s,instance"),
        ("time_s,instance\n", [], "no revocations"),
        ("time_s,instance\n10,g3.4xlarge\n20,p9.huge\n", [], "instance(s) p9.huge not among the instances"),
        ("time_s,instance\n10,g3.4xlarge\n", ["--runs", "50"], "--runs and --seed apply to --rate-per-h"),
        ("time_s,instance\n10,g3.4xlarge\n", ["--seed", "3"], "--runs and --seed apply to --rate-per-h"),
    ],
)
def test_a_bad_trace_is_refused(tmp_path, capsys, trace, extra, message):
    path = tmp_path / "trace.csv"
    path.write_text(trace)
    status, out = _stash(tmp_path, capsys, [*SIMULATE, "--trace", str(path), *extra])
    _one_line(status, out, message)


def test_a_trace_that_never_lets_training_finish_says_so(tmp_path, capsys):
    path = tmp_path / "trace.csv"
    # a revocation of each type every second: 500 revocations leave 500 s of the 1,751 s needed
    rows = [f"{k},{name}" for k in range(1, 1200) for name in ("g3.4xlarge", "g3.8xlarge")]
    path.write_text("time_s,instance\n" + "\n".join(rows) + "\n")
    status, out = _stash(tmp_path, capsys, [*SIMULATE, "--trace", str(path), "--revocation-s", "0"])
    assert status == 0 and out.err == ""  # no numpy warning
    spot = next(line for line in out.out.splitlines() if line.strip().startswith("spotDNN "))
    assert "0%" in spot and spot.split()[-5:-3] == ["never", "never"]  # mean and p90 time
    assert "spotDNN: the training never finishes in 1 of 1 run(s)" in out.out
    status, out = _stash(tmp_path, capsys, [*SIMULATE, "--trace", str(path), "--revocation-s", "0", "--json"])
    spot = json.loads(out.out)["strategies"][0]  # valid JSON: no Infinity, no NaN
    assert spot["never_finishes"] == 1 and spot["mean_time_s"] is None and spot["p_deadline"] == 0


def test_a_deadline_that_needs_more_workers_than_the_quotas_hold_trains_the_fastest_cluster(tmp_path, capsys):
    """Eq. 16's bound above the quotas left no cluster evaluated, and the simulation answered "no plan"
    (exit 1), where a deadline every cluster evaluated misses trained the fastest: the two are one case,
    whose runs train the fastest cluster, and an answer that no plan meets (exit 1, as `stash spot`)."""
    status, out = _stash(tmp_path, capsys, ["spot-simulate", "--deadline-s", "30", "--rate-per-h", "1",
                                            "--json"])  # fmt: skip
    assert status == 1, out.err
    spot = json.loads(out.out)["strategies"][0]
    assert spot["p_deadline"] == 0 and spot["first_plan"] == "4 x g3.4xlarge + 5 x g3.8xlarge"
    status, out = _stash(tmp_path, capsys, ["spot-simulate", "--deadline-s", "30", "--rate-per-h", "1"])
    note = "spotDNN: no plan meets the deadline even without revocations (training within 30 s needs at"
    assert note in out.out


def test_a_server_that_saturates_before_one_worker_is_no_plan_as_spot_says_it(tmp_path, capsys):
    """It exited 2 (bad usage), where `stash spot` answers the same case "no plan" with exit status 1."""
    simulate = ["spot-simulate", "--deadline-s", "3000", "--rate-per-h", "1"]
    saturated = {**WORKLOAD, "b1": 1.0}
    status, out = _stash(tmp_path, capsys, simulate, workload=saturated)
    assert status == 1 and out.out.startswith("no plan: no cluster to start training with")
    assert out.err.startswith("stash: no plan: no cluster to start training with")  # as recommend says one
    status, out = _stash(tmp_path, capsys, [*simulate, "--json"], workload=saturated)
    answer = json.loads(out.out)
    assert status == 1 and answer["exit_status"] == 1 and answer["error"].startswith("no plan: ")
    assert out.err == f"stash: {answer['error']}\n"


def test_the_json_of_a_simulation_states_its_scenario(tmp_path, capsys):
    status, out = _stash(tmp_path, capsys, [*SIMULATE, "--rate-per-h", "0.5", "--runs", "5", "--json"])
    answer = json.loads(out.out)
    assert status == 0 and answer["rate_per_h"] == 0.5 and answer["runs"] == 5 and "seed" in answer
    assert answer["revocation_s"] > 0 and answer["target_loss"] > 0 and answer["strategies"]


def _loss_csv(path, iteration_scale=1.0, batch_scale=1.0):
    g = (876.5, -0.2, 300.0, 1.0, 0.5)
    lines = ["iteration,loss,batch_size,workers"]
    for b in (64, 128, 256):
        for n in (1, 2, 4):
            r = ((n - 1) / n) ** 0.5
            for j in range(0, 6001, 500):
                loss = (g[1] * b + g[2]) * ((r + g[3]) * n) ** 0.5 / (j + g[0]) + g[4]
                lines.append(f"{j * iteration_scale},{loss},{b * batch_scale},{n}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "scales, message",
    [((1e296, 1.0), "iteration up to 1,000,000,000"), ((1.0, 1e297), "batch up to 1,048,576")],
)
def test_fit_loss_refuses_values_beyond_sane_bounds(tmp_path, capsys, scales, message):
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(WORKLOAD))
    csv_path = _loss_csv(tmp_path / "loss.csv", *scales)
    status = main(["spot-fit-loss", "--csv", str(csv_path), "--workload", str(workload)])
    _one_line(status, capsys.readouterr(), message)
    assert json.loads(workload.read_text()) == WORKLOAD


@pytest.mark.parametrize(
    "argv",
    [
        ["spot-fit-loss", "--csv", "{csv}"],
        ["spot-memory", "--model", "resnet10", "--batches", "8,32,128", "--db", "{tmp}/r.duckdb"],
    ],
    ids=["spot-fit-loss", "spot-memory"],
)
@pytest.mark.parametrize("where", ["{tmp}/no-such-folder/w.json", "{tmp}"], ids=["no-folder", "a-folder"])
def test_a_workload_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, argv, where):
    csv_path = _loss_csv(tmp_path / "loss.csv")
    target = where.format(tmp=tmp_path)
    args = [part.format(tmp=tmp_path, csv=csv_path) for part in argv]
    status = main([*args, "--workload", target])
    _one_line(status, capsys.readouterr(), f"workload file {target}")
    assert not list(tmp_path.rglob("*.partial"))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model", "resnet10", "--batches", "2,4"], "--batches: give 3 or more different batch sizes"),
        (["--model", "resnet10", "--batches", "4,4,8"], "--batches: give 3 or more different batch sizes"),
        (["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
        (["--model", "resnet10", "--input-shape", "7"], "resnet10 takes images: input shape must be C,H,W"),
        (["--model", "resnet10", "--device", "cudaXYZ"], "device 'cudaXYZ': give cpu or cuda[:N]"),
        (["--model", "resnet10", "--device", "cuda:99"], "device cuda:99: this machine has"),
    ],
)
def test_spot_memory_refuses_before_a_probe_starts(tmp_path, capsys, monkeypatch, extra, message):
    import stash_core.spot.batch_memory as batch_memory

    def no_probe(*_args, **_kwargs):
        raise AssertionError("a probe process was started")

    monkeypatch.setattr(batch_memory, "measure_peak_bytes", no_probe)
    status = main(["spot-memory", *extra, "--db", str(tmp_path / "r.duckdb")])
    _one_line(status, capsys.readouterr(), message)


def test_spot_memory_refuses_a_workload_of_another_model_before_a_probe_starts(tmp_path, capsys, monkeypatch):
    import stash_core.spot.batch_memory as batch_memory

    monkeypatch.setattr(batch_memory, "measure_peak_bytes", lambda *_a, **_k: pytest.fail("a probe started"))
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"model": "resnet18", "batch_per_gpu": 32}))
    status = main(["spot-memory", "--model", "resnet10", "--workload", str(workload)])
    _one_line(status, capsys.readouterr(), f"--workload {workload} is of model resnet18, not resnet10")
    assert json.loads(workload.read_text()) == {"model": "resnet18", "batch_per_gpu": 32}


def test_spot_memory_writes_its_fit_with_the_model_it_measured(tmp_path, capsys, monkeypatch):
    import stash_core.spot.batch_memory as batch_memory

    monkeypatch.setattr(batch_memory, "measure_peak_bytes", lambda _m, batch, *_a: 2**28 + batch * 2**26)
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"model": "resnet10", "batch_per_gpu": 32}))
    argv = ["spot-memory", "--model", "ResNet10", "--batches", "2,4,8", "--workload", str(workload)]
    assert main(argv) == 0
    written = json.loads(workload.read_text())
    assert written["memory_fit"]["model"] == "resnet10" and written["model"] == "resnet10"
    # the file changed, and it is said (as spot-fit-loss says it), in the text and the JSON
    assert capsys.readouterr().out.endswith(f"a2, b2 and memory_fit written to {workload}\n")
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written_to"] == str(workload)


def _fit_refused(tmp_path, capsys, g, workers, iterations, message):
    """Loss curves of eq. 3 with coefficients `g` fitted: refused with `message`, the workload kept."""
    lines = ["iteration,loss,batch_size,workers"]
    for b in (64, 128, 256):
        for n in workers:
            r = ((n - 1) / n) ** 0.5
            lines += [f"{j},{(g[1] * b + g[2]) * ((r + g[3]) * n) ** 0.5 / (j + g[0]) + g[4]},{b},{n}"
                      for j in iterations]  # fmt: skip
    (tmp_path / "loss.csv").write_text("\n".join(lines) + "\n")
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(WORKLOAD))
    status = main(["spot-fit-loss", "--csv", str(tmp_path / "loss.csv"), "--workload", str(workload)])
    _one_line(status, capsys.readouterr(), message)
    assert json.loads(workload.read_text()) == WORKLOAD


def test_fit_loss_does_not_write_a_negative_g4_the_planner_would_refuse(tmp_path, capsys):
    g = (876.5, -0.2, 300.0, -0.5, 0.5)  # fits curves of 2, 4 and 8 workers (R >= 0.71), not of one
    _fit_refused(tmp_path, capsys, g, (2, 4, 8), range(0, 6001, 500), "record curves with 1 worker too")


def test_spot_and_spot_simulate_take_the_same_revocation_rates():
    """`spot --rate-per-h` stopped at 3600 an hour and `spot-simulate`'s at 10,000."""
    from stash_core.cli.main import build_parser
    from stash_core.errors import UsageError

    parser = build_parser()
    for command, rest in (("spot", ["--budget-s", "1"]), ("spot-simulate", ["--deadline-s", "1"])):
        argv = [command, "--workload", "w.json", "--instances", "a:1", "--target-loss", "1", *rest]
        assert parser.parse_args([*argv, "--rate-per-h", "3600"]).rate_per_h == 3600.0
        with pytest.raises(UsageError, match="--rate-per-h"):
            parser.parse_args([*argv, "--rate-per-h", "3601"])


def test_a_replan_after_every_instance_was_revoked_takes_a_running_count_of_zero(tmp_path, capsys):
    """--running g3.8xlarge:0 was refused as "the quota must be a positive integer": a count, not a quota,
    and 0 is what is left after every one was revoked."""
    status, out = _stash(tmp_path, capsys, [*REPLAN[:1], "--running", "g3.8xlarge:0", *REPLAN[3:]])
    assert status == 0 and out.out.startswith("keep 0 running, add "), out.err
    status, out = _stash(tmp_path, capsys, [*REPLAN[:1], "--running", "g3.8xlarge:-1", *REPLAN[3:]])
    assert status == 2 and "the count running must be a whole number from 0" in out.err


def test_a_workload_file_is_not_written_over_a_databases_write_ahead_log(tmp_path, capsys):
    """--workload r.duckdb was refused as a database, while r.duckdb.wal, its write-ahead log, was written."""
    import duckdb

    database = tmp_path / "r.duckdb"
    duckdb.connect(str(database)).close()
    log = tmp_path / "r.duckdb.wal"
    loss_csv = _loss_csv(tmp_path / "loss.csv")
    assert main(["spot-fit-loss", "--csv", str(loss_csv), "--workload", str(log)]) == 2
    assert "is the write-ahead log of the database" in capsys.readouterr().err and not log.exists()


def test_fit_loss_does_not_write_a_negative_g1_the_planner_would_refuse(tmp_path, capsys):
    """Curves logged from iteration 1,000 on fit g1 = -285 (j + g1 > 0 wherever they were measured): it was
    written, and `stash spot` then refused the workload."""
    g = (-285.0, -0.2, 300.0, 1.0, 0.5)
    message = "record the curves from the training's start"
    _fit_refused(tmp_path, capsys, g, (1, 2, 4), range(1000, 7001, 500), message)
