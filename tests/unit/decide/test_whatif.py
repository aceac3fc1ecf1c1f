"""What-if answers derived from a run's differential phases."""

from __future__ import annotations

import json

import duckdb
import pytest
from result_docs import result_doc, without_iteration_time
from support import TINY_CNN, stash_main

from stash_core.cli.whatif import format_whatif
from stash_core.decide.whatif import cpu_stall_elsewhere, whatif
from stash_core.errors import UsageError
from stash_core.store import connect, get_run, ingest_result

DATA_STALLS = {"compute": 0.2, "interconnect": 0.05, "cpu": 0.25, "disk": 0.2}


def _store(db, **kwargs):
    doc = result_doc(**kwargs)
    ingest_result(db, doc)
    return doc["run_id"]


def test_cpu_cores_needed_follow_from_r3_and_the_loader_workers(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(db, loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    cpu = whatif(db, run_id)["cpu"]
    # R3 = 0.5 s with one loader process: 0.5 core-s per 32 samples; R1 = 0.25 s, so 2 cores per worker.
    assert cpu["status"] == "answered"
    assert cpu["per_sample_cpu_ms"] == pytest.approx(0.5 / 32 * 1e3)
    assert cpu["cores_per_worker_needed"] == 2
    # the loader's time per sample is taken as CPU work, and said so: a sleep in a loader read as CPU
    said = "15.62 ms of loading per sample, taken as CPU work: a loader that waits on storage"
    assert said in cpu["summary"]
    assert cpu["predicted_iteration_s"] == pytest.approx(0.25 + 0.2)
    by_cores = {row["cores_per_worker"]: row["iteration_s"] for row in cpu["predictions"]}
    assert by_cores[1] == pytest.approx(0.7)  # one core: what was measured
    assert by_cores[1] > by_cores[2] == by_cores[3]
    lines = format_whatif(whatif(db, run_id)).splitlines()  # the table under the CPU answer
    at = next(i for i, line in enumerate(lines) if line.startswith("  CPU cores"))
    assert "cores/worker" in lines[at + 1] and lines.index(next(x for x in lines if "network" in x)) > at + 1


def test_cpu_what_if_agrees_in_direction_with_a_run_that_had_more_loader_workers(tmp_path):
    db = tmp_path / "w.duckdb"
    one = _store(db, loader_workers=1, cpu_cores=8, stalls=DATA_STALLS)
    # The same job measured with 2 loader workers per worker: the CPU stall is gone.
    two = _store(db, loader_workers=2, cpu_cores=8, stalls={**DATA_STALLS, "cpu": 0.004})
    predicted = {row["cores_per_worker"]: row["iteration_s"] for row in whatif(db, one)["cpu"]["predictions"]}
    measured_one = whatif(db, one)["iteration_s"]
    measured_two = whatif(db, two)["iteration_s"]
    assert (predicted[2] < measured_one) == (measured_two < measured_one)
    assert whatif(db, two)["cpu"]["status"] == "hidden already"


def test_main_process_loading_is_serial(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(db, loader_workers=0, batch_size=10, stalls=DATA_STALLS)
    cpu = whatif(db, run_id)["cpu"]
    assert cpu["per_sample_cpu_ms"] == pytest.approx(25.0)  # 0.25 s of loading for 10 samples
    assert cpu["cores_per_worker_needed"] == 1  # one loader process overlaps 0.25 s with the 0.25 s step


def test_cache_needed_to_hide_the_disk_stall(tmp_path):
    db = tmp_path / "w.duckdb"
    # R2 read 50 MB/s for 10 s (20 samples at 0.5 s) while loading (5 + 40) x 32 x 2 = 2880 samples.
    run_id = _store(
        db, stalls=DATA_STALLS, dataset_images=2000, telemetry={"R2": {"disk_read_mbps": [50.0] * 20}}
    )
    disk = whatif(db, run_id)["disk"]
    assert disk["status"] == "answered"
    assert disk["cache_fraction_needed"] == pytest.approx(0.2 / 0.7)
    sample_bytes = 500e6 / 2880
    assert disk["sample_bytes"] == pytest.approx(sample_bytes)
    assert disk["cache_bytes_needed"] == pytest.approx(0.2 / 0.7 * sample_bytes * 2000)
    assert disk["predicted_iteration_s"] == pytest.approx(0.5)
    assert disk["read_mbps_needed_without_cache"] > disk["read_mbps_measured"]
    # 0.2 / 0.7 x 173,611 B x 2000 = 99.2 MB: said as such, not "0.09 GiB" (a small set read "0.00 GiB")
    assert "caching 94.6 MiB (29% of the data set)" in disk["summary"]


def test_cache_size_from_the_dataset_folder(tmp_path):
    folder = tmp_path / "data" / "cls"
    folder.mkdir(parents=True)
    for index in range(4):
        (folder / f"{index}.jpg").write_bytes(b"x" * 1000)
    db = tmp_path / "w.duckdb"
    run_id = _store(db, stalls=DATA_STALLS, dataset_images=4, spec_extra={"dataset": str(tmp_path / "data")})
    disk = whatif(db, run_id)["disk"]
    assert disk["sample_bytes"] == 1000
    assert disk["cache_bytes_needed"] == pytest.approx(0.2 / 0.7 * 4000)


def test_network_bandwidth_needed(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(
        db, nodes=2, instance="lab@1gbit", stalls={"compute": 0.2, "interconnect": 0.05, "network": 0.3}
    )
    network = whatif(db, run_id, target_share=0.1)["network"]
    # 0.3 s now; 10% of the other 0.25 s is 0.025 s: 12x the bandwidth.
    assert network["bandwidth_gbps_now"] == 1.0
    assert network["bandwidth_factor_needed"] == pytest.approx(12.0)
    assert network["bandwidth_gbps_needed"] == pytest.approx(12.0)
    assert network["predicted_iteration_s"] == pytest.approx(0.275)


def test_a_bandwidth_from_an_up_to_instances_baseline_says_the_profile_may_have_burst(tmp_path):
    """A g4dn.xlarge is sold as "up to 25 Gbit/s": the catalog holds its 5 Gbit/s baseline, which a profile
    of minutes, inside the burst window, may have run above."""
    db = tmp_path / "w.duckdb"
    run_id = _store(db, nodes=2, instance="g4dn.xlarge",
                    stalls={"compute": 0.2, "interconnect": 0.05, "network": 0.3})  # fmt: skip
    network = whatif(db, run_id, target_share=0.1)["network"]
    assert network["bandwidth_gbps_now"] == 5.0 and "its baseline" in network["bandwidth_from"]
    assert network["summary"].endswith("a profile of minutes may have run at its burst rate)")


def test_unmeasured_and_single_machine_answers(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(db, stalls={"compute": 0.2, "interconnect": 0.05})
    answer = whatif(db, run_id)
    assert answer["cpu"]["status"].startswith("not measured")
    assert answer["disk"]["status"].startswith("not measured")
    assert answer["network"]["status"].startswith("not applicable")
    assert "CPU cores" in format_whatif(answer)
    failed = _store(db, status="failed")
    with pytest.raises(UsageError, match="did not complete"):
        whatif(db, failed)
    with pytest.raises(UsageError, match="no run"):
        whatif(db, "missing")
    unknown = without_iteration_time(result_doc(run_id="no-iteration-time"))  # a file's "unknown"
    ingest_result(db, unknown)
    with pytest.raises(UsageError, match="has no iteration time: nothing to ask of it"):
        whatif(db, "no-iteration-time")


@pytest.mark.quiet
@pytest.mark.launches
@pytest.mark.slow
def test_cpu_what_if_of_a_measured_run_agrees_with_a_measured_run_with_more_loader_workers(tmp_path):
    """Two real profiles of a tiny model on large JPEGs (pre-processing bound): with 1 loader worker, then 2.
    The what-if of the first must predict the second's direction: more cores per worker, shorter step.
    One torch thread for the training worker in both, so that only the loaders change: with the default (both
    cores) its threads competed with the second loader, and beside CI's other tiers the second loader gained
    nothing twice (0.0358 / 0.0360 s, 0.0427 / 0.0446 s at 384 px). At 512 px the loader's share is larger:
    alone 0.066 -> 0.047 s and 0.088 -> 0.058 s, beside two busy loops at idle priority 0.082 -> 0.053 s."""
    db = tmp_path / "w.duckdb"
    common = [
        "profile", "--model", TINY_CNN, "--input-shape", "3,32,32", "--batch-size", "16", "--workers", "1",
        "--synthetic-images", "160", "--image-px", "512", "--stalls", "compute,cpu", "--iterations", "40",
        "--threads-per-worker", "1",
        "--instance", "whatif-box", "--db", str(db),
    ]  # fmt: skip
    env = {"STASH_CACHE_DIR": str(tmp_path / "cache")}
    run_ids = {}
    for loaders in (1, 2):
        out = tmp_path / f"loaders{loaders}.json"
        # main() in this process; its launches are real processes
        result = stash_main(*common, "--loader-workers", str(loaders), "--out", str(out), env_extra=env)
        assert result.returncode == 0, result.stderr
        run_ids[loaders] = json.loads(out.read_text())["run_id"]
    one, two = whatif(db, run_ids[1]), whatif(db, run_ids[2])
    assert one["cpu"]["status"] == "answered", one["cpu"]
    predicted = {row["cores_per_worker"]: row["iteration_s"] for row in one["cpu"]["predictions"]}
    print(
        f"1 loader worker: measured {one['iteration_s']:.4f} s; what-if with 2 cores per worker "
        f"{predicted[2]:.4f} s; measured with 2 loader workers {two['iteration_s']:.4f} s"
    )
    assert predicted[2] < one["iteration_s"]
    assert two["iteration_s"] < one["iteration_s"]


def test_a_cpu_stall_within_the_noise_predicts_no_cores_and_no_slower_step(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(db, loader_workers=1, cpu_cores=8, stalls={**DATA_STALLS, "cpu": 0.0})
    answer = whatif(db, run_id)
    cpu = answer["cpu"]
    assert cpu["status"] == "within the noise" and cpu["predicted_iteration_s"] is None
    assert cpu["predictions"] == [] and "within the noise" in cpu["summary"]
    assert cpu["per_sample_cpu_ms"] is None  # R3 is not the loaders' time: a figure from it meant nothing
    # the table says what would resolve it, as the JSON's summary does (it said "within the noise" alone)
    assert "smaller --target-ci" in format_whatif(answer).splitlines()[1]


def test_as_many_cores_as_ran_or_more_never_predict_a_slower_step(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(db, loader_workers=2, cpu_cores=8, stalls=DATA_STALLS)
    answer = whatif(db, run_id)
    measured_s = answer["iteration_s"]
    for row in answer["cpu"]["predictions"]:
        if row["cores_per_worker"] >= 2:
            assert row["iteration_s"] <= measured_s + 1e-12, row
    assert answer["cpu"]["predicted_iteration_s"] <= measured_s + 1e-12


def test_a_cpu_stall_elsewhere_only_from_loader_workers_that_bound_the_step(tmp_path):
    """R3 = 0.5 s with one loader worker on 8 cores (R1 0.25 s): 0.5 / 32 s of CPU a sample, and one loader
    uses one core however many there are. Serial loading in the main process, or a stall hidden in the noise,
    says nothing of other cores: None."""
    db = tmp_path / "w.duckdb"
    loader = get_run(db, _store(db, loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS))
    stall_s, sample_s = cpu_stall_elsewhere(loader, cores_per_worker=2, sync_s=0.2)
    assert sample_s == pytest.approx(0.5 / 32) and stall_s == pytest.approx(0.5 - 0.2)
    serial = get_run(db, _store(db, loader_workers=0, stalls=DATA_STALLS))
    assert cpu_stall_elsewhere(serial, cores_per_worker=8, sync_s=0.2) is None
    hidden = get_run(db, _store(db, loader_workers=1, cpu_cores=8, stalls={**DATA_STALLS, "cpu": 0.0}))
    assert cpu_stall_elsewhere(hidden, cores_per_worker=1, sync_s=0.2) is None


def test_a_run_that_does_not_record_its_loader_workers_gets_no_cpu_answer(tmp_path):
    """A script's runs that disagree on their DataLoader workers leave the count unknown: no core count and no
    stall elsewhere is derived from a guess."""
    db = tmp_path / "w.duckdb"
    known = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    unknown = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    unknown["spec"]["loader_workers"] = None
    for doc in (known, unknown):
        ingest_result(db, doc)
    assert whatif(db, known["run_id"])["cpu"]["status"] == "answered"
    assert cpu_stall_elsewhere(get_run(db, known["run_id"]), cores_per_worker=2, sync_s=0.2) is not None
    cpu = whatif(db, unknown["run_id"])["cpu"]
    assert cpu["status"] != "answered" and "loader workers or batch are unknown" in cpu["summary"]
    assert cpu_stall_elsewhere(get_run(db, unknown["run_id"]), cores_per_worker=2, sync_s=0.2) is None


def test_a_run_whose_runs_read_different_batches_gets_no_cpu_answer_and_a_disk_answer_without_read_rates(
    tmp_path,
):
    """A script's runs that read different batches leave the batch unknown (null): no per-sample figure is
    derived from it, and nothing fails on it."""
    db = tmp_path / "w.duckdb"
    doc = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    doc["spec"]["batch_size"] = None
    ingest_result(db, doc)
    answer = whatif(db, doc["run_id"])
    assert answer["cpu"]["status"] != "answered" and "batch are unknown" in answer["cpu"]["summary"]
    assert answer["disk"]["status"] == "answered" and answer["disk"].get("read_mbps_measured") is None
    assert cpu_stall_elsewhere(get_run(db, doc["run_id"]), cores_per_worker=2, sync_s=0.2) is None
    format_whatif(answer)


def test_the_cores_that_ran_predict_no_slower_step_than_the_runs_own_where_r3_came_out_slower(tmp_path):
    """R3 slower than R2 by noise (the disk stall then clamped to 0): the step with the cores that ran is
    the run's own iteration (R2), not R3 (1 core a worker was 0.3369 s beside a measured 0.3258 s)."""
    db = tmp_path / "w.duckdb"
    doc = result_doc(loader_workers=1, cpu_cores=2, stalls={**DATA_STALLS, "disk": 0.0})
    phases = {phase["name"]: phase for phase in doc["phases"]}
    phases["R3"]["iteration_s"]["mean"] = phases["R2"]["iteration_s"]["mean"] + 0.011
    cpu = doc["breakdown"]["stalls"]["cpu"]  # R3 - R1, as a file has it
    cpu["seconds"] += 0.011
    cpu["share"] = cpu["seconds"] / doc["breakdown"]["iteration_s"]
    cpu["epoch_s"] = cpu["seconds"] * doc["breakdown"]["iterations_per_epoch"]
    ingest_result(db, doc)
    answer = whatif(db, doc["run_id"])
    assert answer["cpu"]["status"] == "answered"
    ran = next(row for row in answer["cpu"]["predictions"] if row["cores_per_worker"] == 1)
    assert ran["iteration_s"] <= answer["iteration_s"] + 1e-12


def test_a_stored_network_stall_as_long_as_the_iteration_is_no_answer_not_a_division_by_zero(tmp_path):
    db = tmp_path / "w.duckdb"
    doc = result_doc(nodes=2, instance="lab@1gbit", stalls={"compute": 0.2, "network": 0.3})
    ingest_result(db, doc)
    # as a database of an older Stash may hold it (a file that says so is refused at ingest now)
    with connect(db) as con:
        con.execute("UPDATE stalls SET seconds = (SELECT iteration_s FROM runs) WHERE stall = 'network'")
    answer = whatif(db, doc["run_id"])["network"]
    assert answer["predicted_iteration_s"] is None and "not less than the iteration" in answer["summary"]


def _with_disk(db, seconds, ci95_s, status, note=""):
    doc = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls={**DATA_STALLS, "disk": seconds})
    doc["breakdown"]["stalls"]["disk"].update(ci95_s=ci95_s, status=status, note=note)
    ingest_result(db, doc)
    return doc["run_id"]


def test_a_negative_disk_stall_is_no_time_to_add_and_its_own_reason(tmp_path):
    """R2 faster than R3 beyond the noise: the CPU answer added the negative stall (a step faster than the
    synthetic one), and the cache answer said the run had no R2."""
    db = tmp_path / "w.duckdb"
    note = "negative beyond the noise: -0.0500 s ± 0.0100 s"
    answers = whatif(db, _with_disk(db, -0.05, 0.01, "negative", note))
    assert answers["cpu"]["predicted_iteration_s"] >= 0.25  # never faster than the step with the data ready
    said = answers["disk"]["summary"]
    assert "negative beyond the noise" in said and "no cold" not in said


def test_a_disk_stall_within_the_noise_is_not_called_hidden(tmp_path):
    db = tmp_path / "w.duckdb"
    disk = whatif(db, _with_disk(db, 0.2, 0.3, "measured"))["disk"]
    assert disk["status"] == "within the noise" and disk["predicted_iteration_s"] is None
    assert "hidden" not in disk["summary"]


def test_a_disk_stall_clamped_to_zero_within_a_wide_interval_is_within_the_noise_not_hidden(tmp_path):
    """R2 came out 0.0136 s faster than R3, within ± 0.031 s: `stash show` says the disk stall is not
    resolved, so what-if says it is within the noise, not that it is already hidden (cache fraction 0)."""
    db = tmp_path / "w.duckdb"
    disk = whatif(db, _with_disk(db, 0.0, 0.031, "clamped_zero", "within the noise"))["disk"]
    assert disk["status"] == "within the noise" and disk["cache_fraction_needed"] is None
    assert disk["predicted_iteration_s"] is None and "hidden" not in disk["summary"]
    narrow = whatif(db, _with_disk(db, 0.0, 0.001, "clamped_zero", "within the noise"))["disk"]
    assert narrow["status"] == "hidden already" and narrow["cache_fraction_needed"] == 0.0


def test_a_network_stall_within_the_noise_is_not_called_hidden(tmp_path):
    """0.91 s ± 1.43 s, 82% of the iteration, read "network stall is already hidden" (factor 1.0)."""
    db = tmp_path / "w.duckdb"
    doc = result_doc(nodes=2, instance="lab@1gbit", stalls={"compute": 0.2, "network": 0.91})
    doc["breakdown"]["stalls"]["network"]["ci95_s"] = 1.43
    ingest_result(db, doc)
    network = whatif(db, doc["run_id"])["network"]
    assert network["status"] == "within the noise" and network["bandwidth_factor_needed"] is None
    assert network["predicted_iteration_s"] is None and "hidden" not in network["summary"]
    assert "within the noise" in format_whatif(whatif(db, doc["run_id"]))


def test_an_impossible_breakdown_is_no_ground_for_an_answer_and_an_interrupted_ones_is(tmp_path):
    """CPU at 141% of the iteration gave "27 CPU cores per worker hide the CPU stall"; an interrupted run
    whose first round completed, which `stash show` breaks down, was refused as not completed."""
    db = tmp_path / "w.duckdb"
    data = dict(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    said = "impossible differential run: cpu is 141% of the iteration. Cause: load. To do: rerun"
    impossible = _store(db, **data, warnings=[said])
    with pytest.raises(UsageError, match=r": impossible differential run: cpu is 141% of the iteration; wha"):
        whatif(db, impossible)
    interrupted = result_doc(**data)
    interrupted["status"] = "interrupted"
    ingest_result(db, interrupted)
    assert whatif(db, interrupted["run_id"])["cpu"]["status"] == "answered"


def test_a_run_without_a_status_or_model_is_said_with_a_dash_not_none(tmp_path):
    db = tmp_path / "w.duckdb"
    run_id = _store(db, loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    answer = whatif(db, run_id)
    text = format_whatif({**answer, "model": None})
    assert "(-)" in text and "None" not in text
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET status = NULL")
    with pytest.raises(UsageError, match=r"did not complete \(-\)"):
        whatif(db, run_id)


def test_the_command_keeps_a_stored_model_name_on_its_line(tmp_path, capsys):
    import argparse

    from stash_core.cli.whatif import cmd_whatif

    db = tmp_path / "w.duckdb"
    run_id = _store(db, loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET model = 'm' || chr(10) || 'FAKE line'")
    cmd_whatif(argparse.Namespace(db=str(db), run_id=run_id, target_share=0.05, json=False))
    out = capsys.readouterr().out
    assert "m\\nFAKE line" in out and not any(line.startswith("FAKE") for line in out.splitlines())


def test_a_script_run_without_its_data_folder_is_told_why_cpu_and_disk_are_not_answered(tmp_path):
    """A script profiled without --data-dir runs R2 but no R3: the answers said it had no cold and cached
    real-data phases, where R2 did run; the reason is that CPU and disk could not be told apart."""
    db = tmp_path / "w.duckdb"
    doc = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    doc["phases"] = [phase for phase in doc["phases"] if phase["name"] != "R3"]
    note = "without --data-dir Stash cannot set the page-cache state of the files the script reads"
    for stall in ("cpu", "disk"):
        doc["breakdown"]["stalls"][stall] = {"seconds": None, "status": "not_separable", "note": note}
    ingest_result(db, doc)
    answers = whatif(db, doc["run_id"])
    for stall in ("cpu", "disk"):
        assert answers[stall]["status"] == f"not separable: {note}"


def test_a_target_share_too_small_to_mean_a_link_is_refused(tmp_path):
    """--target-share 1e-300 asked for 7.75e+299 Gbit/s per machine; 0.001 is said as 0.1%, not 0%."""
    db = tmp_path / "w.duckdb"
    run_id = _store(db, nodes=2, stalls={"compute": 0.2, "network": 0.3})
    assert stash_main("whatif", run_id, "--target-share", "1e-300", "--db", str(db)).returncode == 2
    with pytest.raises(UsageError, match="from 0.001 to below 1"):
        whatif(db, run_id, 1e-300)
    assert "0.1% of the rest of the iteration" in whatif(db, run_id, 0.001)["network"]["summary"]


def test_cores_over_a_step_within_its_noise_are_not_told(tmp_path):
    """27 CPU cores per worker, worked out over an R0 of 0.63 ms ± 1.8 ms: a figure from noise."""
    db = tmp_path / "w.duckdb"
    doc = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    synthetic = [phase for phase in doc["phases"] if phase["name"] in ("R0", "R1", "R1n")][-1]
    synthetic["iteration_s"]["ci95"] = synthetic["iteration_s"]["mean"] * 1.5
    ingest_result(db, doc)
    cpu = whatif(db, doc["run_id"])["cpu"]
    assert cpu["status"] == "within the noise" and cpu["cores_per_worker_needed"] is None
    assert cpu["summary"].startswith(f"the step with the data ready ({synthetic['name']} ")
    assert "cannot be told" in cpu["summary"]


def test_a_run_stopped_before_the_jobs_own_phase_says_whose_time_it_answers_from(tmp_path, capsys):
    """A run interrupted in R2 printed "iteration 0.1768 s" as if it were the job's, where `stash show` and
    `stash runs` say it is an earlier phase's."""
    db = tmp_path / "w.duckdb"
    doc = result_doc(loader_workers=1, cpu_cores=8, batch_size=32, stalls=DATA_STALLS)
    doc["status"] = "interrupted"
    doc["breakdown"]["reference_phase"] = "R3"
    for phase in doc["phases"]:
        if phase["name"] == "R2":
            phase["status"] = "interrupted"
        if phase["name"] == "R3":  # the time it holds, the last phase that completed
            doc["breakdown"]["iteration_s"] = phase["iteration_s"]["mean"]
            doc["breakdown"]["epoch_s"] = None
    ingest_result(db, doc)
    answer = whatif(db, doc["run_id"])
    assert answer["partial"].startswith("interrupted in R2; its time is R3's")
    assert format_whatif(answer).splitlines()[1].startswith("  partial: interrupted in R2; its time is R3's")
    assert whatif(db, _store(db, loader_workers=1, cpu_cores=8, batch_size=32))["partial"] is None
