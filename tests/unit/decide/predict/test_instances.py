"""Predictions over a catalog (decide/predict/instances.py): which rows a catalog's instances get, and why
the others get none."""

from __future__ import annotations

import pytest
from result_docs import result_doc

from stash_core.catalog import add_instance
from stash_core.decide.predict import predict_instances
from stash_core.store import ingest_result


def _cpu_catalog(db):
    add_instance(db, name="cpu4", accelerator_count=0, vcpus=4, network_gbps=10, on_demand_usd_per_h=0.2)
    add_instance(db, name="cpu8", accelerator_count=0, vcpus=8, network_gbps=10, on_demand_usd_per_h=0.4)


def test_a_cpu_machine_with_a_profile_of_the_job_has_its_measured_row(tmp_path):
    """A CPU instance was refused ("CPU instances need a profile") although a profile of the job was stored
    on it, one `recommend` ranked as measured."""
    db = tmp_path / "r.duckdb"
    _cpu_catalog(db)
    ingest_result(db, result_doc("resnet18", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 stalls={"compute": 0.30, "interconnect": 0.12}))  # fmt: skip
    answer = predict_instances(db, "resnet18", 8, instances=["cpu4", "cpu8"])
    rows = answer.frame.to_dict(orient="records")
    assert len(rows) == 1
    row = rows[0]
    assert (row["instance"], row["source"], row["path"]) == ("cpu4", "measured", "measured")
    assert (row["workers_per_instance"], row["gpus_per_instance"], row["instance_count"]) == (2, 0, 1)
    assert row["compute_s"] == pytest.approx(0.30) and row["interconnect_s"] == pytest.approx(0.12)
    assert row["network_s"] == 0.0 and row["iteration_s"] == pytest.approx(0.42)
    assert row["samples_per_s"] == pytest.approx(8 * 2 / 0.42)
    # the machine without a profile says what is missing, in recommend's words
    assert answer.not_predictable == [
        "cpu8: no GPU and no profile of this job on it (a CPU machine is measured, never predicted: profile "
        "the job there with --instance cpu8)"
    ]


def test_a_cpu_profile_of_another_job_or_other_workers_gives_no_row(tmp_path):
    db = tmp_path / "r.duckdb"
    _cpu_catalog(db)
    ingest_result(db, result_doc("resnet18", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 spec_extra={"input_shape": [3, 64, 64]}))  # fmt: skip
    other_shape = predict_instances(db, "resnet18", 8, instances=["cpu4"])
    assert other_shape.frame.empty and "no GPU and no profile of this job" in other_shape.not_predictable[0]
    fewer = predict_instances(db, "resnet18", 8, instances=["cpu4"], input_shape=(3, 64, 64),
                              workers_per_instance=1)  # fmt: skip
    assert fewer.frame.empty
    assert fewer.not_predictable == [
        "cpu4: not predicted - a CPU machine is measured, never predicted, and no profile of this job on it "
        "has the workers and machines asked (it ran 2 worker(s) per machine)"
    ]
    amp = predict_instances(db, "resnet18", 8, instances=["cpu4"], input_shape=(3, 64, 64), precision="amp")
    assert amp.frame.empty  # profiles run in FP32


def test_a_cpu_profile_stored_without_its_counts_gives_no_row_and_no_error(tmp_path):
    import duckdb

    db = tmp_path / "r.duckdb"
    _cpu_catalog(db)
    ingest_result(db, result_doc("resnet18", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 stalls={"compute": 0.30, "interconnect": 0.12}))  # fmt: skip
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET nodes = NULL")  # a row edited by hand
    answer = predict_instances(db, "resnet18", 8, instances=["cpu4"])
    assert answer.frame.empty and "no GPU and no profile of this job" in answer.not_predictable[0]


@pytest.mark.parametrize(
    "edit", ["DELETE FROM stalls WHERE stall = 'interconnect'", "UPDATE stalls SET seconds = 0"]
)
def test_a_cpu_profile_lacking_a_figure_is_said_so_not_said_missing(tmp_path, edit):
    """A profile of 2 workers without its interconnect stall (or with a compute of 0, which divided by
    zero) was said to be no profile at all ("profile the job there")."""
    import duckdb

    db = tmp_path / "r.duckdb"
    _cpu_catalog(db)
    ingest_result(db, result_doc("resnet18", instance="cpu4", workers=2, batch_size=8, cpu_cores=4,
                                 stalls={"compute": 0.30, "interconnect": 0.12}))  # fmt: skip
    with duckdb.connect(str(db)) as con:
        con.execute(edit)
    answer = predict_instances(db, "resnet18", 8, instances=["cpu4"])
    assert answer.frame.empty
    [line] = answer.not_predictable
    assert line.startswith("cpu4: not predicted - a CPU machine is measured") and "lack a figure" in line


def test_a_long_gpu_name_keeps_the_table_s_columns_apart(tmp_path, capsys) -> None:
    """An instance of a GPU with a long name printed "GeForce RTX 4090 24 GBpredicted"."""
    from stash_core.cli.main import main

    db = ["--db", str(tmp_path / "r.duckdb")]
    gpu = ["--accelerator", "RTX 4090", "--accelerator-count", "1"]
    assert main(["instances", "add", "z51", *gpu, *db]) == 0
    capsys.readouterr()
    job = ["--model", "resnet50", "--batch-size", "64"]
    assert main(["predict", *job, "--instances", "z51,g5.xlarge", *db]) == 0
    lines = capsys.readouterr().out.splitlines()
    heading = next(line for line in lines if line.lstrip().startswith("configuration"))
    row = next(line for line in lines if "1 x z51" in line)
    assert "24 GB  predicted" in row
    assert row.index("predicted") == heading.index("source")  # under its heading


def test_an_instance_lacking_a_link_or_network_figure_is_told_the_command_that_gives_it(tmp_path):
    """`recommend` named `stash instances set ... --interconnect`; `predict` gave the same reason bare."""
    db = tmp_path / "r.duckdb"
    add_instance(db, name="twin", accelerator="NVIDIA V100 16 GB", accelerator_count=2, vcpus=12)
    answer = predict_instances(db, "resnet18", 8, instances=["twin"], max_instances=2)
    [line] = answer.not_predictable
    assert line.startswith("1-2 x twin: communication not predictable - interconnect unknown")
    assert line.endswith("(give its GPU link: `stash instances set twin --interconnect LINK` (NVSwitch, "
                         "NVLink, PCIe, PCIe peer-to-peer or none))")  # fmt: skip
    one_gpu = dict(instances=["twin"], max_instances=2, workers_per_instance=1)
    answer = predict_instances(db, "resnet18", 8, **one_gpu)
    assert answer.not_predictable == ["2 x twin: communication not predictable - the catalog has no network "
                                      "bandwidth for this instance (give its network: `stash instances set "
                                      "twin --network-gbps GBPS`)"]  # fmt: skip
