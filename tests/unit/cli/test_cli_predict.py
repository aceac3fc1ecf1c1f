"""`stash predict`: the JSON answer, the workers column, and bad input refused in one line (exit 2) with
nothing half-printed on stdout."""

from __future__ import annotations

import json
import textwrap

import pytest

from stash_core.cli.main import main

FIELDS = {
    "instance", "accelerator", "gpus", "workers", "path", "step_s", "samples_per_s", "expected_error",
    "memory_gb", "compute_s", "interconnect_s", "network_s", "unvalidated", "comm_expected_error",
}  # fmt: skip


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_json_answers_the_job_with_every_figure(tmp_path, capsys):
    db = str(tmp_path / "x.duckdb")
    status, out, _ = run(
        capsys, "predict", "--model", "gpt2", "--batch-size", "4", "--input-shape", "128", "--precision",
        "amp", "--instances", "g5.xlarge,p3.8xlarge", "--format", "json", "--db", db,
    )  # fmt: skip
    assert status == 0
    answer = json.loads(out)
    assert set(answer) == {"job", "predictions", "not_predicted", "profiles_set_aside", "warnings"}
    job = answer["job"]
    assert (job["model"], job["batch_size"], job["input_shape"], job["precision"]) == (
        "gpt2",
        4,
        [128],
        "amp",
    )
    by_instance = {row["instance"]: row for row in answer["predictions"]}
    assert set(by_instance) == {"g5.xlarge", "p3.8xlarge"} and answer["not_predicted"] == []
    for row in answer["predictions"]:
        assert FIELDS <= set(row)
        assert row["step_s"] == pytest.approx(row["compute_s"] + row["interconnect_s"] + row["network_s"])
        assert row["samples_per_s"] == pytest.approx(4 * row["workers"] / row["step_s"])
        assert 0 < row["expected_error"] < 2  # a fraction, not a percentage
    assert (by_instance["p3.8xlarge"]["gpus"], by_instance["p3.8xlarge"]["workers"]) == (4, 4)
    assert by_instance["p3.8xlarge"]["interconnect_s"] > 0 == by_instance["g5.xlarge"]["interconnect_s"]
    # the communication's own held-out error: on several GPUs only, a fraction of the step
    assert by_instance["g5.xlarge"]["comm_expected_error"] is None
    assert 0 < by_instance["p3.8xlarge"]["comm_expected_error"] < 1


def test_a_row_across_machines_states_its_communications_error_beside_the_computes(tmp_path, capsys):
    db = str(tmp_path / "x.duckdb")
    status, out, _ = run(capsys, "predict", "--model", "resnet50", "--batch-size", "8", "--instances",
                         "p3.16xlarge", "--max-instances", "2", "--format", "json", "--db", db)  # fmt: skip
    rows = {row["instance_count"]: row for row in json.loads(out)["predictions"]}
    assert status == 0 and rows[2]["comm_expected_error"] > rows[1]["comm_expected_error"]  # several machines
    status, out, _ = run(capsys, "predict", "--model", "resnet50", "--batch-size", "8", "--instances",
                         "p3.16xlarge", "--max-instances", "2", "--db", db)  # fmt: skip
    assert "±comm" in out
    two = next(line for line in out.splitlines() if "2 x p3.16xlarge" in line)
    assert f"{rows[2]['comm_expected_error']:.1%}" in two


def test_a_refusal_names_every_machine_count_it_stops(tmp_path, capsys):
    """Standard_NC6s_v3 has no network bandwidth in the catalog: 2, 3 and 4 machines cannot be predicted, and
    only "2 x" was said (3 and 4 machines were left out without a word)."""
    status, out, _ = run(capsys, "predict", "--model", "resnet50", "--batch-size", "64", "--instances",
                         "Standard_NC6s_v3", "--max-instances", "4", "--format", "json",
                         "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
    answer = json.loads(out)
    assert status == 0 and [row["instance_count"] for row in answer["predictions"]] == [1]
    assert [row["configuration"] for row in answer["not_predicted"]] == ["2-4 x Standard_NC6s_v3"]
    assert [row["instance"] for row in answer["not_predicted"]] == ["Standard_NC6s_v3"]


def test_a_refusal_keeps_a_label_that_holds_an_x_whole():
    """'box x 2' was named as instance '2' in not_predicted's JSON."""
    from stash_core.decide.predict.refusals import refusal_json

    assert refusal_json("box x 2: not predicted - no GPU")["instance"] == "box x 2"
    assert refusal_json("2-4 x box x 2: no network bandwidth")["instance"] == "box x 2"
    assert refusal_json("3 x p3.2xlarge: no network")["instance"] == "p3.2xlarge"


def test_the_table_says_how_many_of_the_instances_gpus_are_used(tmp_path, capsys):
    db = str(tmp_path / "x.duckdb")
    ask = ["predict", "--model", "resnet18", "--batch-size", "8", "--instances", "p3.8xlarge", "--db", db]
    status, out, _ = run(capsys, *ask)
    assert status == 0
    row = next(line for line in out.splitlines() if "1 x p3.8xlarge" in line)
    assert " 4/4 " in row and "workers" in out.splitlines()[2]
    status, out, _ = run(capsys, *ask, "--workers-per-instance", "1", "--max-instances", "2")
    rows = [line for line in out.splitlines() if "x p3.8xlarge" in line]
    assert status == 0 and any(" 1/4 " in line for line in rows) and any(" 2x1/4 " in line for line in rows)
    # the note under the table restates the option given (it offered "--workers-per-instance for fewer")
    assert "one worker each (--workers-per-instance 1)" in out and "for fewer" not in out


def test_recommend_writes_the_gpus_used_as_predict_does(tmp_path, capsys):
    """Two instances of 8 GPUs read '8/8' in recommend's table (8 GPUs in all, to a reader), '2x8/8' in
    predict's."""
    status, out, _ = run(capsys, "recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1",
                         "--dataset-images", "100000", "--budget-hours", "100", "--instances", "p3.16xlarge",
                         "--max-instances", "2",
                         "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
    ranked = [line.split() for line in out.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    rows = {words[1]: " ".join(words) for words in ranked if words[2:4] == ["x", "p3.16xlarge"]}
    assert status == 0 and " 8/8 " in rows["1"] and " 2x8/8 " in rows["2"], rows


def test_recommend_says_once_what_stops_every_larger_count(tmp_path, capsys):
    """Without a network figure 2, 3 and 4 machines are refused for one reason: three lines each (67 in all
    over the catalog) buried the other reasons."""
    status, out, _ = run(capsys, "recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1",
                         "--dataset-images", "100000", "--budget-hours", "100", "--instances",
                         "Standard_NC12s_v3", "--max-instances", "4", "--format", "json",
                         "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
    refused = [entry["configuration"] for entry in json.loads(out)["not_predicted"]]
    assert status == 0 and refused == ["2-4 x Standard_NC12s_v3"]


def test_recommend_sums_up_a_refusal_of_every_instance_as_predict_does(tmp_path, capsys):
    """A batch no GPU holds: predict says so in a few words; recommend repeated every instance's reason in
    its answer, three times over (answer, list, stderr). One instance's reason still says itself."""
    job = ("--model", "resnet50", "--batch-size", "2048", "--db", str(tmp_path / "x.duckdb"))
    rental = ("--epochs", "1", "--dataset-images", "100000", "--max-usd", "100")
    status, _, err = run(capsys, "predict", *job, "--instances", "g5.xlarge,p3.2xlarge")
    assert status == 2 and "the batch does not fit the memory of any GPU considered" in one_line(err)
    status, out, err = run(capsys, "recommend", *job, *rental, "--instances", "g5.xlarge,p3.2xlarge")
    said = one_line(err)
    assert status == 1 and "the batch does not fit the memory of any GPU considered" in said
    assert "A10G" not in said and out.count("A10G") == 1  # the reason once, in the list of those refused
    status, _, err = run(capsys, "recommend", *job, *rental, "--instances", "g5.xlarge")
    assert status == 1 and "g5.xlarge: does not fit - batch 2048" in one_line(err)


def test_recommend_says_what_the_cost_of_a_short_training_leaves_out(tmp_path, capsys):
    """A 12-second training ranked by its cost alone: its start-up and the provider's minimum charge may be
    most of the bill. A training of hours is not told so."""
    job = ("recommend", "--model", "resnet18", "--batch-size", "32", "--epochs", "1", "--max-usd", "1000",
           "--instances", "g5.xlarge", "--format", "json", "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
    status, out, _ = run(capsys, *job, "--dataset-images", "10000")
    answer = json.loads(out)
    assert status == 0 and answer["recommended"]["training_h"] * 3600 < 600
    assert "not an instance's start-up" in answer["explanations"][1]
    status, out, _ = run(capsys, *job, "--dataset-images", "10000000")
    answer = json.loads(out)
    assert status == 0 and answer["recommended"]["training_h"] > 1
    assert not any("start-up" in line for line in answer["explanations"])


def test_a_batch_near_a_gpus_memory_is_marked_in_the_table_not_only_in_the_json(tmp_path, capsys):
    """ResNet-50 at 280 needs 22.7 of a g5.xlarge's 24 GiB: its JSON row said "near the limit", its table row
    nothing."""
    ask = ["predict", "--model", "resnet50", "--batch-size", "280", "--instances", "g5.xlarge,p4d.24xlarge",
           "--db", str(tmp_path / "x.duckdb")]  # fmt: skip
    status, out, _ = run(capsys, *ask)
    rows = {line.split()[2]: line for line in out.splitlines() if line.startswith("  1 x ")}
    assert status == 0 and "22.7/24!" in rows["g5.xlarge"] and "22.7/40 " in rows["p4d.24xlarge"]
    assert "  ! near the GPU's memory (over 90% of it)" in out
    status, out, _ = run(capsys, *ask[:4], "64", *ask[5:])
    assert status == 0 and "!" not in out


def test_columns_stay_under_their_headings_when_a_cell_is_wider_than_its_column(tmp_path, capsys):
    """A 1024-GPU instance's workers cell (3x1024/1024) pushed every later column right of its heading."""
    from stash_core.catalog import add_instance

    db = str(tmp_path / "x.duckdb")
    add_instance(db, name="big", accelerator="NVIDIA A100 SXM4 80 GB", accelerator_count=1024, vcpus=4096,
                 network_gbps=400, interconnect="nvswitch_a100", on_demand_usd_per_h=1000.0)  # fmt: skip
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--instances", "big",
                         "--max-instances", "3", "--db", db)  # fmt: skip
    lines = out.splitlines()
    heading = next(line for line in lines if line.lstrip().startswith("configuration"))
    rows = [line for line in lines if " x big " in line]
    assert status == 0 and len(rows) == 3, out
    for row in rows:  # each cell ends where its right-aligned heading ends
        for cell, name in ((row.split()[3], "workers"), (row.split()[-3], "samples/s")):
            assert row.index(cell) + len(cell) == heading.index(name) + len(name), (row, heading)


def test_a_seven_billion_model_in_fp32_is_refused_on_a_24_gb_gpu_with_the_reason(tmp_path, capsys):
    db = str(tmp_path / "x.duckdb")
    ask = ["predict", "--model", "llama2_7b", "--batch-size", "1", "--input-shape", "128", "--db", db]
    status, out, err = run(capsys, *ask, "--gpu", "A10G", "--format", "json")
    assert status == 2
    answer = json.loads(out)  # valid JSON although nothing could be predicted
    assert answer["predictions"] == [] and answer["not_predicted"]
    assert answer["exit_status"] == 2 and answer["error"].startswith("no configuration could be predicted")
    reason = answer["not_predicted"][0]["reason"]
    assert "does not fit" in reason and "weights 25.1" in reason and "has 24 GiB" in reason
    assert "does not fit" in one_line(err)
    status, out, err = run(capsys, *ask, "--gpu", "A10G")
    assert status == 2 and "weights 25.1 + gradients 25.1" in out and "does not fit" in one_line(err)
    assert "step ms" not in out  # no table header over no rows


def _refusal_on_stdout(out: str, form: str) -> bool:
    """No table for a refusal; asked for JSON, the refusal as a JSON object (cli/main.asks_for_json)."""
    return out == "" if form == "table" else json.loads(out)["exit_status"] == 2


def test_an_unknown_gpu_is_one_line_and_no_table(tmp_path, capsys):
    db = str(tmp_path / "x.duckdb")
    for form in ("table", "json"):
        status, out, err = run(
            capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--gpu", "H900", "--format", form,
            "--db", db,
        )  # fmt: skip
        assert status == 2 and _refusal_on_stdout(out, form)
        assert "unknown GPU 'H900'" in one_line(err)


def test_a_model_that_builds_neither_on_meta_nor_on_the_cpu_is_one_line(tmp_path, capsys):
    model = tmp_path / "broken.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch

            def make(num_classes=10):
                raise RuntimeError("needs the weights file weights.pt")
            """
        )
    )
    status, out, err = run(
        capsys, "predict", "--model", f"{model}:make", "--batch-size", "8", "--format", "json",
        "--db", str(tmp_path / "x.duckdb"),
    )  # fmt: skip
    assert status == 2 and _refusal_on_stdout(out, "json")
    assert "weights.pt" in one_line(err)


def test_recommend_json_restates_the_job_and_ranks_its_options(tmp_path, capsys):
    db = str(tmp_path / "x.duckdb")
    ask = [
        "recommend", "--model", "gpt2", "--batch-size", "4", "--input-shape", "128", "--precision", "amp",
        "--epochs", "1", "--dataset-samples", "100000", "--instances", "g5.xlarge,p3.8xlarge", "--db", db,
    ]  # fmt: skip
    status, out, _ = run(capsys, *ask, "--budget-hours", "1000", "--format", "json")
    assert status == 0
    answer = json.loads(out)
    assert answer["job"]["model"] == "gpt2" and answer["job"]["input_shape"] == [128]
    assert answer["job"]["precision"] == "amp" and answer["recommended"] == answer["options"][0]
    assert FIELDS <= set(answer["options"][0]) and answer["options"][0]["cpu_s"] is None
    # what the API's frame holds for a row, the JSON holds too: which constraint a row meets, its profile
    option = answer["options"][0]
    assert option["meets_time"] is True and option["meets_cost"] is True and option["run_id"] is None
    assert option["iterations_per_epoch"] == 100000 // (4 * option["workers"])
    status, out, err = run(capsys, *ask, "--budget-hours", "0.000001", "--format", "json")
    answer = json.loads(out)  # no configuration meets the budget: still one JSON object, with the reason
    assert {row["meets_time"] for row in answer["predictions"]} == {False}
    assert status == 1 and answer["recommended"] is None and answer["options"] == []
    assert "within 1e-06 h" in answer["infeasible_reason"] and "no recommendation" in one_line(err)
    assert answer["error"] == f"no recommendation: {answer['infeasible_reason']}"
    assert answer["exit_status"] == 1
    status, out, _ = run(capsys, *ask, "--budget-hours", "1000")
    headline = out.splitlines()[0]
    assert headline.startswith(
        "gpt2, batch 4 per worker, input 128, amp, adamw (foreach), fused attention, one worker per GPU, "
        "1 epoch of"
    )
    assert "?/?" in out  # CPU and disk not predicted, not 0


def test_recommend_refuses_a_shape_the_model_cannot_take_in_one_line(tmp_path, capsys):
    status, out, err = run(
        capsys, "recommend", "--model", "gpt2", "--batch-size", "4", "--input-shape", "3,32,32", "--epochs",
        "1", "--dataset-samples", "1000", "--budget-hours", "1", "--format", "json",
        "--db", str(tmp_path / "x.duckdb"),
    )  # fmt: skip
    assert status == 2 and _refusal_on_stdout(out, "json") and "one sequence length" in one_line(err)


def test_a_gpu_family_means_every_variant_and_the_answer_lists_them(tmp_path, capsys):
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--gpu", "A100,H100",
                         "--format", "json", "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
    assert status == 0
    answer = json.loads(out)
    gpus = set(answer["job"]["gpus"])
    assert {"NVIDIA A100 SXM4 80 GB", "NVIDIA A100 PCIe 40 GB", "NVIDIA H100 NVL 94 GB"} <= gpus
    predicted = {row["accelerator"] for row in answer["predictions"]}
    assert "NVIDIA A100 SXM4 80 GB" in predicted and "NVIDIA A100 SXM4 40 GB" in predicted


def test_a_large_catalog_prints_its_first_rows_and_says_how_many_more(tmp_path, capsys):
    db = str(tmp_path / "r.duckdb")
    assert main(["predict", "--model", "resnet50", "--batch-size", "64", "--rows", "3", "--db", db]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("  1 x ") and " ms" not in line]
    assert "more rows (--rows all, or --format json)" in table
    assert main(["predict", "--model", "resnet50", "--batch-size", "64", "--rows", "all", "--db", db]) == 0
    everything = capsys.readouterr().out
    assert main(["predict", "--model", "resnet50", "--batch-size", "64", "--rows", "0", "--db", db]) == 2
    assert "at least 1, or 'all', got '0'" in capsys.readouterr().err
    assert "more rows" not in everything and len(everything.splitlines()) > len(table.splitlines())
    shown = int(table.split("  ... ")[1].split(" more rows")[0].replace(",", ""))
    listed = [
        line for line in everything.splitlines() if line.startswith("  1 x ") and "predictable" not in line
    ]
    assert shown + 3 == len(listed) and rows  # the first 3 and the rest add up to every predicted row
    # the mark's footnote only where a row shown carries the mark (the first rows are validated GPUs)
    assert "*" not in "".join(rows) and "* unvalidated" not in table and "* unvalidated" in everything
    assert main(["predict", "--model", "resnet50", "--batch-size", "64", "--rows", "none", "--db", db]) == 2
    said = capsys.readouterr().err
    assert "--rows: expected a whole number of rows, at least 1, or 'all', got 'none'" in said


def test_a_profiled_configuration_is_measured_whole_and_the_others_are_predictions(tmp_path, capsys):
    """The profiled 4-GPU machine showed the model's interconnect, not its own 15 ms, and two machines (their
    network predicted) were labelled measured."""
    from result_docs import result_doc

    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    doc = result_doc("resnet50", instance="p3.8xlarge", workers=4, device="cuda", batch_size=64,
                     stalls={"compute": 0.20, "interconnect": 0.015})  # fmt: skip
    gpus = [{"index": index, "name": "Tesla V100-SXM2-16GB"} for index in range(4)]  # the machine fits its label
    doc["fingerprint"].update(gpu_count=4, gpus=gpus, gpu_status="4 GPU(s)")
    ingest_result(db, doc)
    assert main(["predict", "--model", "resnet50", "--batch-size", "64", "--instances", "p3.8xlarge",
                 "--max-instances", "2", "--format", "json", "--db", str(db)]) == 0  # fmt: skip
    rows = {row["instance_count"]: row for row in json.loads(capsys.readouterr().out)["predictions"]}
    one, two = rows[1], rows[2]
    assert one["source"] == "measured" and one["interconnect_s"] == pytest.approx(0.015)
    assert two["source"] == "predicted" and two["path"] == "measured" and two["network_s"] > 0
    # the profiled configuration's all-reduce is measured: no note of the published bandwidth it would use
    assert not [note for note in one["notes"] if "published NCCL bus bandwidth" in note], one["notes"]
    assert [note for note in two["notes"] if "published NCCL bus bandwidth" in note]  # its network predicted


def test_a_cpu_machines_profiled_row_shows_its_worker_processes_and_no_gpu_memory(tmp_path, capsys):
    from result_docs import result_doc

    from stash_core.catalog import add_instance
    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    add_instance(db, name="cpu4", accelerator_count=0, vcpus=4, network_gbps=10, on_demand_usd_per_h=0.2)
    ingest_result(db, result_doc("resnet18", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 stalls={"compute": 0.30, "interconnect": 0.12}))  # fmt: skip
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--instances",
                         "cpu4,g5.xlarge", "--db", str(db))  # fmt: skip
    assert status == 0
    row = next(line for line in out.splitlines() if "1 x cpu4" in line).split()
    assert row[3:9] == ["2", "CPU", "CPU", "measured", "measured", "420.0"]
    assert row[-2:] == ["-", "300.0/120.0/0.0"]  # no GPU memory; compute/interconnect/network as profiled
    # measured whole: its ±err is its profile's 95% interval (result_doc stores 1% of the iteration), as
    # recommend gives it; it was "-"
    assert row[9] == "1.0%"
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--instances",
                         "cpu4,g5.xlarge", "--format", "json", "--db", str(db))  # fmt: skip
    rows = {row["instance"]: row for row in json.loads(out)["predictions"]}
    assert rows["cpu4"]["step_ci95_s"] == pytest.approx(0.01 * rows["cpu4"]["step_s"])
    assert rows["g5.xlarge"]["step_ci95_s"] is None  # predicted: its error is its expected_error


def test_a_cpu_profiles_measured_row_says_its_step_leaves_the_data_stalls_out(tmp_path, capsys):
    """The row was labelled "measured" at 262 ms where `stash show` says the run's iteration took 326 ms: the
    step of every row is compute, interconnect and network; the table now says so for such a row."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[3] / "examples" / "results"
    db = str(tmp_path / "r.duckdb")
    assert run(capsys, "ingest", *map(str, sorted(example.glob("*.json"))), "--db", db)[0] == 0
    assert run(capsys, "instances", "add", "vm-2vcpu", "--accelerator-count", "0", "--on-demand-usd-per-h",
               "0.10", "--db", db)[0] == 0  # fmt: skip
    status, out, err = run(capsys, "predict", "--model", "shufflenet_v2_x0_5", "--batch-size", "16",
                           "--input-shape", "3,64,64", "--instances", "vm-2vcpu", "--db", db)  # fmt: skip
    assert status == 0, err
    row = next(line for line in out.splitlines() if line.startswith("  1 x vm-2vcpu"))
    assert " measured " in row
    assert ("  measured on a CPU machine: the profile's compute, interconnect and network; its CPU and disk "
            "stalls are in no step here (its whole iteration: `stash show RUN`)") in out.splitlines()
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--gpu", "T4",
                         "--db", db)  # fmt: skip
    assert status == 0 and "measured on a CPU machine" not in out


def test_the_table_says_which_rows_run_bfloat16_on_fp32_cores(tmp_path, capsys):
    """The note was in the JSON only: the table's V100 rows read as if on BF16 units."""
    model = tmp_path / "lm.py"
    model.write_text(
        "import torch\n\n\ndef make(num_classes=10):\n"
        "    body = torch.nn.Sequential(torch.nn.Embedding(100, 32), torch.nn.Flatten(), "
        "torch.nn.Linear(512, num_classes))\n"
        "    return body.to(torch.bfloat16)\n"
    )
    status, out, _ = run(capsys, "predict", "--model", f"{model}:make", "--batch-size", "8", "--input-shape",
                         "16", "--instances", "p3.2xlarge,a2-highgpu-1g",
                         "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
    assert status == 0
    [line] = [line for line in out.splitlines() if line.startswith("  bfloat16 on a GPU without BF16")]
    assert line.endswith("(1 x p3.2xlarge)")


def test_tf32_asked_of_a_gpu_without_tf32_units_says_it_runs_fp32(tmp_path, capsys):
    """--precision tf32 on a V100 was predicted as FP32 without a word (its rows read as TF32 units')."""
    db = str(tmp_path / "x.duckdb")
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--precision", "tf32",
                         "--instances", "p3.2xlarge,a2-highgpu-1g", "--db", db)  # fmt: skip
    assert status == 0
    [line] = [line for line in out.splitlines() if line.startswith("  TF32 asked on a GPU without TF32")]
    assert line.endswith("(1 x p3.2xlarge)")
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--instances",
                         "p3.2xlarge", "--db", db)  # fmt: skip
    assert status == 0 and "TF32 asked" not in out  # PyTorch's own arithmetic: nothing was asked


def test_a_cpu_profile_of_another_input_shape_is_named_as_set_aside(tmp_path, capsys):
    """predict named GPU profiles set aside for their input shape and dropped CPU ones without a word, where
    recommend named both: the CPU instance read as never profiled."""
    from result_docs import result_doc

    from stash_core.catalog import add_instance
    from stash_core.store import ingest_result

    db = tmp_path / "r.duckdb"
    add_instance(db, name="cpu4", accelerator_count=0, vcpus=4, network_gbps=10, on_demand_usd_per_h=0.2)
    doc = result_doc("resnet18", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                     spec_extra={"input_shape": [3, 32, 32]}, stalls={"compute": 0.30, "interconnect": 0.12})
    ingest_result(db, doc)  # fmt: skip
    status, out, _ = run(capsys, "predict", "--model", "resnet18", "--batch-size", "8", "--instances",
                         "cpu4,g5.xlarge", "--format", "json", "--db", str(db))  # fmt: skip
    assert status == 0
    aside = json.loads(out)["profiles_set_aside"]
    assert aside == [f"profile {doc['run_id']} on cpu4: set aside, it ran with input 3x32x32, the job's is "
                     "3x224x224"]  # fmt: skip
