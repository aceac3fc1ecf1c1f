"""Compare compares like with like: runs are one job only when model, batch per worker, input shape, data,
workers, machines and device agree; a contradicted instance label gets no price; a fresh database has the
catalog's prices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from result_docs import result_doc

from stash_core import store, views
from stash_core.catalog import confirm_label

SYNTHETIC_64 = {"synthetic_images": None, "dataset_images": None, "input_shape": [3, 64, 64]}
REAL_32 = {"synthetic_images": 512, "image_px": 32, "input_shape": [3, 32, 32]}
REAL_64 = {"synthetic_images": 512, "image_px": 64, "input_shape": [3, 64, 64]}
ON_DEVICE = {"compute": 0.10, "interconnect": 0.02}  # R0, R1: the iteration is R1's, synthetic data
WITH_DATA = {"compute": 0.10, "interconnect": 0.02, "cpu": 0.05, "disk": 0.03}  # ... R3, R2: real data, cold


def run(instance: str, spec: dict, stalls: dict, **options) -> dict:
    return result_doc("resnet18", batch_size=32, instance=instance, stalls=stalls, spec_extra=spec, **options)


@pytest.fixture()
def mixed_db(tmp_path: Path) -> Path:
    """resnet18 b32: a synthetic 64x64 job on a fast box, a real-data 32x32 job on a slow one, the same
    synthetic job with one worker, and the real-data job at 64 px on a third box."""
    db = tmp_path / "results.duckdb"
    for doc in (
        run("fast-box", SYNTHETIC_64, ON_DEVICE),
        run("fast-box", SYNTHETIC_64, {"compute": 0.11, "interconnect": 0.02}),
        run("slow-box", REAL_32, {key: value * 3 for key, value in WITH_DATA.items()}),
        run("fast-box", SYNTHETIC_64, {"compute": 0.10}, workers=1),
        run("third-box", REAL_64, WITH_DATA),
    ):
        assert store.ingest_result(db, doc)
    return db


def test_runs_of_different_jobs_are_never_ranked_together(mixed_db: Path) -> None:
    choices = views.compare.compare_choices(mixed_db)
    jobs = choices[list(views.compare.JOB_COLUMNS)].to_dict(orient="records")
    assert len(jobs) == 4  # the same model and batch size, four different jobs
    synthetic = {"input_shape": "3x64x64", "data": "synthetic (made on the device)", "workers_per_node": 2}
    real_32 = {
        "input_shape": "3x32x32",
        "data": "real data, cold · generated images: 512, 32 px",
        "workers_per_node": 2,
    }
    assert any(synthetic.items() <= job.items() for job in jobs)
    assert any(real_32.items() <= job.items() for job in jobs)
    assert choices.iloc[0]["runs"] == 2  # the synthetic 2-worker job: its two runs averaged in one row

    frame = views.compare.compare_configurations(mixed_db, "resnet18", 32, **synthetic)
    assert list(frame["instance"]) == ["fast-box"] and frame.iloc[0]["runs"] == 2
    assert frame.attrs["job"]["data"] == "synthetic (made on the device)"
    assert views.compare.compare_verdict(frame).get("slowest") is None  # nothing else to rank it against

    frame = views.compare.compare_configurations(mixed_db, "resnet18", 32, **real_32)
    assert list(frame["instance"]) == ["slow-box"]
    frame = views.compare.compare_configurations(
        mixed_db, "resnet18", 32, input_shape="3x64x64", workers_per_node=1
    )
    assert list(frame["instance"]) == ["fast-box"] and list(frame["workers_per_node"]) == [1]
    # Without the rest of the job, the most-run job is taken: still one job only.
    frame = views.compare.compare_configurations(mixed_db, "resnet18", 32)
    assert (
        frame.attrs["job"]
        == views.compare.compare_choices(mixed_db).iloc[0][list(views.compare.JOB_COLUMNS)].to_dict()
    )
    assert views.compare.compare_configurations(mixed_db, "resnet18", 32, device="cuda").empty


def test_the_same_job_on_two_instances_is_compared_and_priced_from_the_catalog(tmp_path: Path) -> None:
    db = tmp_path / "fresh.duckdb"  # no `stash instances seed`: the catalog is there from the start
    fast = run("p3.2xlarge", SYNTHETIC_64, ON_DEVICE, workers=1, device="cuda")
    slow = run("g4dn.xlarge", SYNTHETIC_64, {"compute": 0.28, "interconnect": 0.02}, workers=1, device="cuda")
    for doc, gpu in ((fast, "Tesla V100-SXM2-16GB"), (slow, "Tesla T4")):
        doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": gpu}], gpu_status="1 GPU")
        store.ingest_result(db, doc)
    frame = views.compare.compare_configurations(db, "resnet18", 32).set_index("instance")
    assert frame.loc["p3.2xlarge", "usd_per_h"] == pytest.approx(3.06)
    assert frame.loc["g4dn.xlarge", "usd_per_h"] == pytest.approx(0.526)
    assert frame.attrs["label_warnings"] == []
    verdict = views.compare.compare_verdict(frame.reset_index())
    assert verdict["fastest"].startswith("p3.2xlarge") and verdict["priced"] == 2


def test_a_contradicted_label_gets_its_own_row_without_a_price_until_confirmed(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    laptop = run("g4dn.xlarge", SYNTHETIC_64, ON_DEVICE)  # result_doc's machine: CPU only, no GPU
    store.ingest_result(db, laptop)
    frame = views.compare.compare_configurations(db, "resnet18", 32)
    row = frame.iloc[0]
    assert row["configuration"] == "g4dn.xlarge · 2w · label contradicted"
    assert not row["label_ok"] and row["usd_per_h"] != row["usd_per_h"]  # NaN: no price
    verdict = views.compare.compare_verdict(frame)
    # set aside: no machine to choose, neither fastest nor cheapest, and counted for the page to say why
    assert verdict["cheapest"] is None and verdict["fastest"] is None and verdict["contradicted"] == 1
    assert "the machine has no GPU" in frame.attrs["label_warnings"][0]
    confirm_label(db, laptop["run_id"])
    confirmed = views.compare.compare_configurations(db, "resnet18", 32).iloc[0]
    assert confirmed["label_ok"] and confirmed["usd_per_h"] == pytest.approx(0.526)


def test_instances_not_measured_are_predicted_and_a_measurement_wins(tmp_path: Path) -> None:
    db = tmp_path / "fresh.duckdb"
    doc = run("p3.2xlarge", {"synthetic_images": None, "dataset_images": None}, ON_DEVICE, workers=1,
              device="cuda")  # fmt: skip
    doc["fingerprint"].update(
        gpu_count=1, gpus=[{"index": 0, "name": "Tesla V100-SXM2-16GB"}], gpu_status="1"
    )
    store.ingest_result(db, doc)
    frame = views.compare.compare_with_predictions(db, "resnet18", 32)
    measured = frame[frame["source"] == "measured"]
    predicted = frame[frame["source"] == "predicted"].set_index("instance")
    assert measured["instance"].tolist() == ["p3.2xlarge"] and measured["expected_error"].isna().all()
    assert "p3.2xlarge" not in predicted.index and {"p4d.24xlarge", "g4dn.xlarge"} <= set(predicted.index)
    assert (predicted["runs"] == 0).all()
    # the profiled GPU's other instances take its compute as measured (no model error), the others state one
    same_gpu = predicted["accelerator"] == "NVIDIA V100 SXM2 16 GB"
    assert set(predicted.index[same_gpu]) == {"p3.8xlarge", "p3.16xlarge"}
    assert predicted.loc[same_gpu, "expected_error"].isna().all()
    assert (predicted.loc[~same_gpu, "expected_error"] > 0).all()
    assert predicted.loc["g4dn.xlarge", "usd_per_h"] == pytest.approx(0.526)
    assert predicted.loc["p4d.24xlarge", "iteration_s"] < measured["iteration_s"].iloc[0]
    assert frame.attrs["prediction_note"].startswith(
        f"{len(predicted)} instance(s) predicted for 1 GPU(s) x 1"
    )


def test_a_cpu_machine_with_a_profile_of_the_model_is_said_when_a_gpu_job_is_compared(tmp_path: Path) -> None:
    """Its profile is another job (another device): its row was dropped and the machine named nowhere."""
    from stash_core.catalog import add_instance

    db = tmp_path / "fresh.duckdb"
    add_instance(db, name="cpu-box", accelerator_count=0, vcpus=8, network_gbps=10, on_demand_usd_per_h=0.3)
    gpu = run("p3.2xlarge", {"synthetic_images": None, "dataset_images": None}, ON_DEVICE, workers=1,
              device="cuda")  # fmt: skip
    gpus = [{"index": 0, "name": "Tesla V100-SXM2-16GB"}]
    gpu["fingerprint"].update(gpu_count=1, gpus=gpus, gpu_status="1")
    cpu = run("cpu-box", {"synthetic_images": None, "dataset_images": None}, {"compute": 0.9}, workers=1,
              cpu_cores=8)  # fmt: skip
    for doc in (gpu, cpu):
        store.ingest_result(db, doc)
    frame = views.compare.compare_with_predictions(db, "resnet18", 32, device="cuda")
    assert "cpu-box" not in set(frame["instance"])
    [line] = [line for line in frame.attrs["not_predictable"] if line.startswith("cpu-box")]
    assert "a CPU machine is measured, never predicted" in line and cpu["run_id"] in line


def test_a_token_model_s_generated_data_is_documents_without_a_pixel_size(tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    doc = result_doc("gpt2_tiny", batch_size=8, instance="box", stalls=WITH_DATA,
                     spec_extra={"synthetic_images": 64, "image_px": 256, "input_shape": [128]})  # fmt: skip
    doc["model"]["kind"] = "tokens"
    assert store.ingest_result(db, doc)
    [data] = views.compare.compare_choices(db)["data"]
    assert data.endswith("generated documents: 64"), data


def test_two_scripts_of_one_name_are_two_jobs_never_averaged(tmp_path: Path) -> None:
    db = tmp_path / "scripts.duckdb"
    for sha, compute_s in (("a" * 64, 0.5), ("b" * 64, 0.07)):
        spec = {"script": "train.py", "script_sha256": sha, "input_shape": [3, 64, 64]}
        doc = result_doc("script:train.py", batch_size=32, instance="box", stalls={"compute": compute_s},
                         spec_extra=spec)  # fmt: skip
        assert store.ingest_result(db, doc)
    choices = views.compare.compare_choices(db)
    assert sorted(choices["code"]) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"] and set(choices["runs"]) == {1}
    assert f" · script {choices.iloc[0]['code']} · " in choices.iloc[0]["job_label"]
    job = views.compare.job_of(choices.iloc[0])
    frame = views.compare.compare_configurations(db, job.pop("model"), job.pop("batch_size"), **job)
    assert frame.iloc[0]["runs"] == 1


def test_a_run_is_compared_as_the_run_its_iteration_is_of_and_with_runs_split_alike(tmp_path: Path) -> None:
    """A two-worker profile asked for compute alone times R0 (one worker): it was averaged into the two-worker
    job (0.452, 0.403 and 0.136 s shown as 0.330 s); runs split into other stalls were averaged into one
    breakdown whose shares and remainder no run had."""
    db = tmp_path / "r.duckdb"
    for stalls in ({"compute": 0.30, "interconnect": 0.15}, {"compute": 0.31, "interconnect": 0.09},
                   {"compute": 0.136}):  # fmt: skip
        assert store.ingest_result(db, run("lab", SYNTHETIC_64, stalls, workers=2))
    choices = views.compare.compare_choices(db).set_index("stalls")
    assert choices.loc["compute,interconnect", "workers_per_node"] == 2
    assert choices.loc["compute,interconnect", "runs"] == 2
    assert choices.loc["compute", "workers_per_node"] == 1 and choices.loc["compute", "runs"] == 1
    label = choices.loc["compute", "job_label"]  # the stalls by the page's names, not their keys
    assert label.endswith(" · 1 worker(s) · cpu · input 3x64x64 · synthetic (made on the device) "
                          "· split into Compute")
    two = views.compare.compare_configurations(db, "resnet18", 32, workers_per_node=2)
    assert two["iteration_s"].tolist() == [pytest.approx((0.45 + 0.40) / 2)]


def test_runs_split_into_the_same_stalls_are_one_job_whatever_their_stalls_asked(tmp_path: Path) -> None:
    """A profile without data asks for all five stalls and measures compute and interconnect; the Run page
    asks for those two. The same breakdown was two jobs ("stalls compute,cpu,disk,interconnect,network")."""
    db = tmp_path / "r.duckdb"
    for asked in (["compute", "interconnect", "network", "cpu", "disk"], ["compute", "interconnect"]):
        split = {"compute": 0.30, "interconnect": 0.15}
        assert store.ingest_result(db, run("lab", {**SYNTHETIC_64, "stalls": asked}, split, workers=2))
    choices = views.compare.compare_choices(db)
    assert choices["stalls"].tolist() == ["compute,interconnect"] and choices["runs"].tolist() == [2]


def test_one_model_file_given_by_two_paths_is_one_job(tmp_path: Path) -> None:
    """`./m.py:make` at the command line and `/home/u/work/m.py:make` from the Run page, the same contents:
    Compare showed two rows of one job; now one, named by the newest run's path. Another file's contents of
    that name stay a job of their own."""
    db = tmp_path / "files.duckdb"
    files = (("m.py:make", "a" * 64), ("/home/u/work/m.py:make", "a" * 64), ("m.py:make", "b" * 64))
    for model, sha in files:
        spec = {"model_sha256": sha, "input_shape": [3, 64, 64]}
        doc = result_doc(model, batch_size=32, instance="box", stalls={"compute": 0.2}, spec_extra=spec)
        assert store.ingest_result(db, doc)
    choices = views.compare.compare_choices(db).set_index("code")
    assert len(choices) == 2 and choices.loc["aaaaaaaaaaaa", "runs"] == 2
    assert choices.loc["aaaaaaaaaaaa", "model"] == "/home/u/work/m.py:make"  # the newer run's path
    job = views.compare.job_of(choices.reset_index().iloc[0])
    frame = views.compare.compare_configurations(db, job.pop("model"), job.pop("batch_size"), **job)
    assert frame["runs"].sum() == choices.reset_index().iloc[0]["runs"]


def test_two_runs_that_disagree_are_no_narrow_interval_of_their_mean(tmp_path: Path) -> None:
    """Runs of 0.12 and 0.24 s on one instance read "0.18 s ± 1%" (the mean of their own intervals)."""
    db = tmp_path / "results.duckdb"
    for stalls in ({"compute": 0.10, "interconnect": 0.02}, {"compute": 0.20, "interconnect": 0.04}):
        assert store.ingest_result(db, run("fast-box", SYNTHETIC_64, stalls))
    row = views.compare.compare_configurations(db, "resnet18", 32).iloc[0]
    assert row["runs"] == 2 and row["iteration_s"] == pytest.approx(0.18)
    assert row["iteration_ci95_s"] > 0.06  # both runs inside the mean's interval
    assert row["compute_ci95_s"] > 0.05


def test_jobs_past_the_listed_number_are_counted_and_the_newest_kept(mixed_db: Path, monkeypatch) -> None:
    """500 jobs were listed, most-compared first, and the rest left out without a word: the newest
    single-instance jobs were the ones a user could not reach."""
    from stash_core.store import queries_compare

    monkeypatch.setattr(queries_compare, "JOBS_LISTED", 2)
    choices = views.compare.compare_choices(mixed_db)
    assert len(choices) == 2 and choices.attrs["jobs_stored"] == 4
    assert choices.iloc[0]["runs"] == 2  # the job of two runs, then the newest of those of one
    assert choices.iloc[1]["input_shape"] == "3x64x64" and choices.iloc[1]["data"].startswith("real data")
    assert views.compare.compare_choices(mixed_db.with_name("none.duckdb")).attrs["jobs_stored"] == 0


@pytest.mark.parametrize("named", ["{tmp}/evil.py:make", "this:x"])
def test_a_model_file_a_stored_run_names_is_never_imported_to_predict_it(tmp_path: Path, named: str) -> None:
    """An uploaded result whose model named a file (or a module) had its code run when Compare predicted the
    job's other instances, which it does by default: a stored name is data."""
    evil = tmp_path / "evil.py"
    marker = tmp_path / "ran"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\ndef make():\n    raise SystemExit\n")
    model = named.format(tmp=tmp_path)
    db = tmp_path / "x.duckdb"
    doc = run("p3.2xlarge", {"synthetic_images": None, "dataset_images": None}, ON_DEVICE, workers=1,
              device="cuda")  # fmt: skip
    doc["spec"]["model"] = doc["model"]["name"] = model
    doc["fingerprint"].update(gpu_count=1, gpus=[{"index": 0, "name": "Tesla V100-SXM2-16GB"}])
    store.ingest_result(db, doc)
    frame = views.compare.compare_with_predictions(db, model, 32)
    assert not marker.exists() and set(frame["source"]) == {"measured"}
    assert frame.attrs["prediction_note"].startswith(f"no predictions: {model} is no zoo model")


def test_a_predicted_row_of_several_gpus_states_its_communications_error_beside_its_computes(
    tmp_path: Path,
) -> None:
    """Compare showed the compute path's error alone where `stash predict` states ±comm too."""
    db = tmp_path / "x.duckdb"
    store.ingest_result(db, run("vm-a", SYNTHETIC_64, ON_DEVICE, workers=2))
    frame = views.compare.compare_with_predictions(db, "resnet18", 32)
    predicted = frame[frame["source"] == "predicted"]
    assert len(predicted) and (predicted["comm_error"] > 0).all() and (predicted["expected_error"] > 0).all()
    assert frame.loc[frame["source"] == "measured", "comm_error"].isna().all()


def test_the_verdict_says_when_two_throughputs_are_within_their_intervals() -> None:
    """"1.04x the runner-up" was said of 70.6 ms +- 1.3 against 73.6 ms +- 8.3, and "1.67x the slowest" of a
    run of 118 ms +- 142: ratios that the runs' own intervals do not tell apart."""
    frame = pd.DataFrame({
        "configuration": ["a", "b", "c", "d"], "iteration_s": [0.0706, 0.0736, 0.118, 0.2],
        "iteration_ci95_s": [0.0013, 0.0083, 0.142, np.nan], "samples_per_iteration": [16] * 4,
    })  # fmt: skip
    frame["samples_per_s"] = frame["samples_per_iteration"] / frame["iteration_s"]
    frame["usd_per_million_samples"] = np.nan
    verdict = views.compare.compare_verdict(frame.iloc[:3])
    assert verdict["runner_up_apart"] is False and verdict["slowest_apart"] is False
    tight = frame.iloc[:3].assign(iteration_ci95_s=[0.0013, 0.0013, 0.002])
    verdict = views.compare.compare_verdict(tight)
    assert verdict["runner_up_apart"] is True and verdict["slowest_apart"] is True
    assert views.compare.compare_verdict(frame)["slowest_apart"] is None  # d's interval is unknown


def test_a_blank_instance_label_is_no_label_as_a_missing_one_is(tmp_path: Path) -> None:
    """A result file whose label is "" was compared as " · 2w", where Upload and Breakdown say (no label)."""
    db = tmp_path / "results.duckdb"
    for label in ("", " "):
        doc = run(label, SYNTHETIC_64, ON_DEVICE)
        doc["fingerprint"]["instance"] = None
        store.ingest_result(db, doc)
    frame = views.compare.compare_configurations(db, "resnet18", 32)
    assert list(frame["configuration"]) == [f"{views.common.NO_INSTANCE} · 2w"], list(frame["configuration"])
    assert set(views.overview.overview(db)["recent"]["instance"]) == {views.common.NO_INSTANCE}
