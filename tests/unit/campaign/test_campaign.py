"""Campaign planning, resume (skip what is stored), progress lines, and the subprocess runner's protocol."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest
from result_docs import result_doc

from stash_core.api.options import parse_profile
from stash_core.campaign.local import eta_text, run_campaign, subprocess_runner
from stash_core.campaign.plan import (
    CampaignItem,
    CampaignSettings,
    check_measurable_plan,
    family_models,
    instance_label,
    plan_campaign,
    profile_args,
    profile_argv,
    profile_spec,
    split_done,
)
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec
from stash_core.store import ingest_result
from stash_core.zoo_names import model_file_sha256


class FakeRunner:
    """Stands in for `stash profile`: stores a hand-made result for the item, or a failed one."""

    def __init__(self, fail: set[str] | None = None, exit_code: int = 1, error: str = "boom") -> None:
        self.calls = []
        self.fail = fail or set()
        self.exit_code = exit_code
        self.error = error

    def __call__(self, item, settings, on_event):
        self.calls.append(item)
        on_event({"kind": "PHASE", "event": "started", "index": 0, "total": 2})
        failed = item.model in self.fail
        doc = result_doc(
            item.model,
            batch_size=item.batch_size,
            workers=item.workers_per_node,
            nodes=item.nodes,
            instance=item.instance,
            status="failed" if failed else "completed",
        )
        ingest_result(settings.db_path, doc)
        if failed:
            failure = {"status": "failed", "error": self.error, "exit_code": self.exit_code}
            return {**failure, "run_id": doc["run_id"]}
        return {"status": "completed", "run_id": doc["run_id"], "error": None, "exit_code": 0}


def test_family_models():
    assert family_models("resnet", [10, 18, 50]) == ["resnet10", "resnet18", "resnet50"]
    assert family_models("vgg") == ["vgg11", "vgg13", "vgg16", "vgg19"]
    with pytest.raises(UsageError, match="no zoo model resnet20"):
        family_models("resnet", [18, 20])
    with pytest.raises(UsageError, match="unknown model family"):
        family_models("mlp", [2])


def test_one_rate_typed_several_ways_is_one_bandwidth_as_first_typed():
    """200mbit, 200Mbit, 0.2gbit and 200000kbit were three labels: three bandwidths to resume and to fit."""
    rates = ["200mbit", "200Mbit", "0.2gbit", "200000kbit", "1gbit"]
    plan = plan_campaign(["resnet10"], [8], [1], [2], rates, instance="lab")
    assert [item.instance for item in plan] == ["lab@200mbit", "lab@1gbit"]


def test_plan_sweeps_bandwidths_only_on_several_nodes():
    plan = plan_campaign(
        ["resnet10", "resnet18"], [16, 32], [2], [1, 2], ["1gbit", "200mbit"], instance="lab"
    )
    single = [item for item in plan if item.nodes == 1]
    multi = [item for item in plan if item.nodes == 2]
    assert len(single) == 2 * 2 and all(item.bandwidth is None and item.instance == "lab" for item in single)
    assert len(multi) == 2 * 2 * 2
    assert {item.instance for item in multi} == {"lab@1gbit", "lab@200mbit"}
    assert len({item.key for item in plan}) == len(plan)
    with pytest.raises(UsageError, match="batch sizes"):
        plan_campaign(["resnet10"], [0], [2], [1])
    assert instance_label(None, None)  # the host name


def test_profile_command_line(tmp_path):
    settings = CampaignSettings(
        db_path=tmp_path / "c.duckdb",
        iterations="20",
        input_shape="3,32,32",
        num_classes=10,
        python="python3",
    )
    single, multi = plan_campaign(["resnet10"], [8], [2], [1, 2], ["1gbit"], instance="lab")
    argv = profile_argv(single, settings)
    assert argv[:4] == ["python3", "-P", "-m", "stash_core.api.child"]  # the profile child
    joined = " ".join(argv)
    assert "--batch-size 8 --workers 2 --stalls compute,interconnect --iterations 20" in joined
    assert "--nodes" not in argv and "--device" not in argv  # defaults are left out
    assert "--instance lab " in joined and "--progress json" in joined and "--input-shape 3,32,32" in joined
    assert "--cluster" not in argv
    multi_argv = " ".join(profile_argv(multi, settings))
    assert "--stalls compute,interconnect,network" in multi_argv
    assert "--cluster emulated --cluster-bandwidth 1gbit" in multi_argv
    assert "--instance lab@1gbit" in multi_argv
    args, _ = parse_profile(profile_argv(multi, settings)[4:])  # what the child process reads
    assert ProfileSpec.from_args(args) == profile_spec(multi, settings)
    assert (args.db, args.progress) == (settings.db_path, "json")
    with pytest.raises(UsageError, match="unknown stall gpu"):
        profile_argv(single, replace(settings, stalls=["compute", "gpu"]))
    # a cluster of another name (`stash cluster up --name lab2`): the profiles over nodes run on it
    named = replace(settings, cluster_name="lab2")
    assert "--cluster-name lab2" in " ".join(profile_argv(multi, named))
    assert "--cluster" not in profile_argv(single, named)
    args, _ = parse_profile(profile_argv(multi, named)[4:])
    assert ProfileSpec.from_args(args).cluster_name == "lab2"


def test_a_cluster_name_without_bandwidths_is_refused(tmp_path, capsys):
    from stash_core.cli.main import main

    common = ["campaign", "--family", "resnet", "--depths", "10", "--batch-sizes", "8", "--workers", "1",
              "--dry-run", "--db", str(tmp_path / "c.duckdb")]  # fmt: skip
    assert main([*common, "--cluster-name", "lab2"]) == 2
    assert "--cluster-name goes with --bandwidths" in capsys.readouterr().err
    assert main([*common, "--cluster-name", "lab2", "--nodes", "2", "--bandwidths", "1gbit"]) == 0


def test_one_worker_goes_without_an_interconnect_and_what_cannot_be_measured_is_refused_first(tmp_path):
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    one, two = plan_campaign(["resnet10"], [8], [1, 2], [1])
    # The default asks each configuration what it has (a profile of 1 worker refused --stalls interconnect,
    # and the refusal stopped the campaign before its 2-worker configuration).
    assert profile_spec(one, settings).stalls == ["compute"]
    assert profile_spec(two, settings).stalls == ["compute", "interconnect"]
    check_measurable_plan([one, two], settings)
    asked = replace(settings, stalls=["compute", "interconnect"])
    with pytest.raises(UsageError, match=r"^resnet10 batch 8, 1 worker\(s\).*interconnect needs --workers 2"):
        check_measurable_plan([one, two], asked)
    with pytest.raises(UsageError, match="cpu needs real data"):
        check_measurable_plan([two], replace(settings, stalls=["cpu"]))


def test_resume_skips_stored_configurations_and_retries_failures(tmp_path):
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10", "resnet12", "resnet16"], [8], [2], [1], instance="lab")
    runner = FakeRunner(fail={"resnet12"})
    lines = []
    events = []
    first = run_campaign(plan, settings, runner=runner, report=lines.append, on_event=events.append)
    assert [item.model for item in runner.calls] == ["resnet10", "resnet12", "resnet16"]
    assert len(first.completed) == 2 and [item.model for item, _ in first.failed] == ["resnet12"]
    assert events and events[0]["kind"] == "PHASE"
    assert lines[0].startswith("[1/3] resnet10") and "time left unknown" in lines[0]
    assert "left)" in lines[2]  # an estimate once one profile has finished
    # Run again: only the failed configuration is profiled.
    again = FakeRunner()
    second = run_campaign(plan, settings, runner=again, report=lines.append)
    assert [item.model for item in again.calls] == ["resnet12"]
    assert len(second.skipped) == 2
    # A third time: nothing left.
    third = FakeRunner()
    run_campaign(plan, settings, runner=third)
    assert third.calls == []
    todo, stored = split_done(plan, settings)
    assert todo == [] and len(stored) == 3


def test_resume_tells_configurations_apart(tmp_path):
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    run_campaign(plan_campaign(["resnet10"], [8], [2], [1], instance="lab"), settings, runner=FakeRunner())
    wider = plan_campaign(["resnet10"], [8, 16], [1, 2], [1], instance="lab")
    todo, stored = split_done(wider, settings)
    assert len(stored) == 1 and len(todo) == 3
    other_box = plan_campaign(["resnet10"], [8], [2], [1], instance="other")
    assert len(split_done(other_box, settings)[0]) == 1


def test_a_refused_profile_stops_the_campaign(tmp_path):
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10", "resnet12"], [8], [2], [1], instance="lab")
    runner = FakeRunner(fail={"resnet10"}, exit_code=2)
    with pytest.raises(UsageError, match="campaign stopped"):
        run_campaign(plan, settings, runner=runner)
    assert len(runner.calls) == 1


def test_a_profile_refused_for_a_full_disk_stops_the_campaign(tmp_path, monkeypatch):
    """A full disk exits 1 (the machine's, not the input's): the campaign went on to refuse every profile."""
    from types import SimpleNamespace

    from stash_core.api import profile_flow
    from stash_core.errors import DiskFull

    full = SimpleNamespace(free=1024, total=1 << 40)
    monkeypatch.setattr(profile_flow.shutil, "disk_usage", lambda folder: full)
    with pytest.raises(DiskFull) as refused:
        profile_flow.refuse_full_disk(tmp_path)
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10", "resnet12"], [8], [2], [1], instance="lab")
    runner = FakeRunner(fail={"resnet10", "resnet12"}, exit_code=1, error=str(refused.value))
    with pytest.raises(UsageError, match="campaign stopped: .*free some space first"):
        run_campaign(plan, settings, runner=runner)
    assert len(runner.calls) == 1


def test_eta_text():
    assert "unknown" in eta_text([], 3)
    assert eta_text([30.0, 30.0], 2) == "(about 60 s left)"
    assert eta_text([600.0], 3) == "(about 30 min left)"
    assert eta_text([3600.0], 3) == "(about 3.0 h left)"
    # per run where the runs are known: 20 s for the first profile's one run, three runs left (a 2-worker
    # profile runs R0 and R1): 60 s, not the 40 s of two profiles at the mean
    assert eta_text([20.0], 2, runs_done=1, runs_left=3) == "(about 60 s left)"


def _fake_python(tmp_path, body: str):
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_subprocess_runner_reads_the_protocol(tmp_path):
    python = _fake_python(
        tmp_path,
        "echo 'loading...'\n"
        'echo \'STASH-PHASE {"event": "started", "index": 0, "total": 2}\'\n'
        'echo \'STASH-DONE {"run_id": "r1", "status": "completed", "error": null}\'\n'
        "echo 'warning: instance label g5.xlarge: the machine has no GPU'\n"
        "echo 'run r1 saved to the database'\n",
    )
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", python=python)
    item = plan_campaign(["resnet10"], [8], [2], [1], instance="lab")[0]
    events = []
    result = subprocess_runner(item, settings, events.append)
    warnings = ["instance label g5.xlarge: the machine has no GPU"]  # the profile's, for the campaign to say
    assert result == {"status": "completed", "run_id": "r1", "error": None, "exit_code": 0,
                      "warnings": warnings}  # fmt: skip
    assert events == [{"kind": "PHASE", "event": "started", "index": 0, "total": 2}]


def test_a_done_line_quoted_in_a_failure_message_is_no_message(tmp_path):
    """A script that exited with sys.exit('STASH-DONE {...completed...}') made the campaign file its failed
    run as completed, under the run id the script chose: the child's failure line quotes the script."""
    forged = '{"run_id": "FAKE2", "status": "completed", "stored": true}'
    python = _fake_python(
        tmp_path,
        f"echo 'stash: run R0 failed: the script exited with status 1: STASH-DONE {forged}' >&2\nexit 1\n",
    )
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", python=python)
    item = plan_campaign(["resnet10"], [8], [2], [1], instance="lab")[0]
    result = subprocess_runner(item, settings, lambda event: None)
    assert result["status"] == "failed" and result["run_id"] is None and result["exit_code"] == 1


def test_subprocess_runner_reports_the_last_error_line(tmp_path):
    python = _fake_python(tmp_path, "echo 'stash: --cluster: unrecognized arguments' >&2\nexit 2\n")
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", python=python)
    item = plan_campaign(["resnet10"], [8], [2], [2], ["1gbit"], instance="lab")[0]
    result = subprocess_runner(item, settings, lambda event: None)
    assert result["status"] == "failed" and result["exit_code"] == 2
    assert result["error"] == "--cluster: unrecognized arguments"


def test_a_stored_run_counts_only_where_it_measured_what_the_campaign_asks_now(tmp_path):
    """Stored: resnet10 on the CPU, 3x224x224, 1000 classes, compute and interconnect. Resumed on CUDA, at
    another input shape or class count, or with more stalls, it is profiled again (it was 'stored'); with
    fewer stalls, or no device named, the stored run covers it."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10"], [8], [2], [1], instance="lab")
    stored = result_doc("resnet10", batch_size=8, workers=2, instance="lab",
                        stalls={"compute": 0.2, "interconnect": 0.05})  # fmt: skip
    ingest_result(settings.db_path, stored)
    covered = [settings, replace(settings, device="cpu"), replace(settings, stalls=["compute"]),
               replace(settings, input_shape="3,224,224", num_classes=1000)]  # fmt: skip
    for same in covered:
        assert split_done(plan, same) == ([], plan), same
    more_stalls = replace(settings, stalls=["compute", "interconnect", "cpu"])
    asks_more = [replace(settings, device="cuda"), replace(settings, input_shape="3,32,32"),
                 replace(settings, num_classes=10), more_stalls]  # fmt: skip
    for other in asks_more:
        assert split_done(plan, other) == (plan, []), other


def test_names_and_rates_that_differ_only_in_case_are_one_configuration():
    """`--models resnet10,RESNET10` profiled one model twice, and `--bandwidths 1gbit,1GBIT` planned two
    configurations labelled lab@1gbit; ResNet10 was stored under that spelling, which a resume of resnet10
    did not find."""
    models = ["resnet10", "RESNET10", "ResNet10"]
    plan = plan_campaign(models, [8], [2], [2], ["1gbit", "1GBIT"], instance="lab")
    assert [(item.model, item.instance) for item in plan] == [("resnet10", "lab@1gbit")]


# a profile without --input-shape or --num-classes stores null: the model's own, whatever they are
OWN_SHAPE = {"input_shape": None, "num_classes": None}


def test_a_model_file_s_stored_run_counts_under_either_spelling_and_only_while_the_file_is_the_same(
    tmp_path, monkeypatch
):
    """A run of ./m.py:make is stored as m.py:make: a resume of ./m.py:make profiled it again; and a run of
    the file before an edit counted as done, although it measured other code."""
    (tmp_path / "m.py").write_text("def make():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["./m.py:make"], [8], [2], [1], instance="lab")
    stored = result_doc("./m.py:make", batch_size=8, workers=2, instance="lab", spec_extra={
        "model_sha256": model_file_sha256("m.py:make"), **OWN_SHAPE})  # fmt: skip
    stored["model"]["name"] = "./m.py:make"
    ingest_result(settings.db_path, stored)
    assert split_done(plan, settings) == ([], plan)
    # the same file typed by its absolute path, or from its own folder's parent: counted stored as well
    spellings = ((f"{tmp_path}/m.py:make", tmp_path), (f"{tmp_path.name}/m.py:make", tmp_path.parent))
    for typed, folder in spellings:
        monkeypatch.chdir(folder)
        again = plan_campaign([typed], [8], [2], [1], instance="lab")
        assert split_done(again, settings) == ([], again), typed
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text("def make():\n    return 1\n")
    assert split_done(plan, settings) == (plan, [])


def test_a_model_file_s_run_stored_without_its_contents_hash_still_counts(tmp_path, monkeypatch):
    """A run stored before profiles kept the file's sha256 (or from a file without it) was profiled again once
    model files were matched by their contents: it counts by its stored name, as it did."""
    (tmp_path / "m.py").write_text("def make():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["m.py:make"], [8], [2], [1], instance="lab")
    stored = result_doc("m.py:make", batch_size=8, workers=2, instance="lab", spec_extra=OWN_SHAPE)
    stored["model"]["name"] = "m.py:make"
    stored["spec"].pop("model_sha256", None)
    ingest_result(settings.db_path, stored)
    assert split_done(plan, settings) == ([], plan)


@pytest.mark.parametrize("model", ["./m.py:make", "/tmp/x/m.py:make", "../a/m.py:make"])
def test_a_result_file_is_named_neither_hidden_nor_like_an_option(tmp_path, model):
    settings = CampaignSettings(db_path=tmp_path / "r.duckdb", results_dir=tmp_path / "res")
    args = profile_args(CampaignItem(model, 8, 1, 1, "box"), settings)
    (out,) = [arg.removeprefix("--out=") for arg in args if arg.startswith("--out=")]
    name = Path(out).name
    assert name[0] not in ".-" and "m.py-make_8_1_1_box-" in name and name.endswith(".json")


def test_a_results_folder_named_like_an_option_is_still_the_result_file_s(tmp_path, monkeypatch):
    """--results-dir=-r: `--out -r/....json` made every profile fail ("--out: expected one argument")."""
    from stash_core.api.options import parse_profile

    monkeypatch.chdir(tmp_path)
    settings = CampaignSettings(db_path=tmp_path / "r.duckdb", results_dir=Path("-r"))
    args = profile_args(CampaignItem("resnet10", 8, 1, 1, "box"), settings)
    parsed, _ = parse_profile(args)
    assert str(parsed.out).startswith("-r/") and str(parsed.out).endswith(".json")


def test_a_run_whose_machine_contradicts_its_label_is_not_a_stored_measurement_of_it(tmp_path):
    """A g5.xlarge run made on a machine without a GPU stands for no g5.xlarge (catalog/labels.py): a campaign
    over g5.xlarge profiles it (a cloud plan rents it), unless the user confirmed the label."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10"], [8], [1], [1], instance="g5.xlarge")
    doc = result_doc("resnet10", batch_size=8, workers=1, nodes=1, instance="g5.xlarge")
    ingest_result(settings.db_path, doc)
    assert split_done(plan, settings) == (plan, [])
    doc = result_doc("resnet10", batch_size=8, workers=1, nodes=1, instance="g5.xlarge", run_id="confirmed")
    doc["spec"]["instance_confirmed"] = True
    ingest_result(settings.db_path, doc)
    assert split_done(plan, settings) == ([], plan)


def test_a_cloud_campaigns_run_counts_for_the_instance_type_it_rented(tmp_path):
    """Stash labelled it as what it rented: another rental of the type would give the same machine."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10"], [8], [1], [1], instance="g5.xlarge")
    doc = result_doc("resnet10", batch_size=8, workers=1, nodes=1, instance="g5.xlarge")
    doc["spec"]["cloud"] = {"provider": "aws", "region": "us-east-1", "instance_type": "g5.xlarge"}
    ingest_result(settings.db_path, doc)
    assert split_done(plan, settings) == ([], plan)


def test_a_profiles_warning_is_said_in_the_campaigns_lines(tmp_path):
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10"], [8], [1], [1], instance="lab")

    def runner(item, settings, on_event):
        done = FakeRunner()(item, settings, on_event)
        return {**done, "warnings": ["instance label lab does not fit the machine"]}

    lines: list[str] = []
    run_campaign(plan, settings, runner=runner, report=lines.append)
    assert "      warning: instance label lab does not fit the machine" in lines


def test_a_stored_run_of_the_models_own_shape_and_classes_covers_a_campaign_that_names_them(tmp_path):
    """A profile without --input-shape or --num-classes stores null for them: resnet10's 3x224x224 and
    1000 classes. `--num-classes 1000` profiled it again."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10"], [8], [2], [1], instance="lab")
    stored = result_doc("resnet10", batch_size=8, workers=2, instance="lab",
                        spec_extra={"input_shape": None, "num_classes": None})  # fmt: skip
    ingest_result(settings.db_path, stored)
    for same in (replace(settings, num_classes=1000), replace(settings, input_shape="3,224,224")):
        assert split_done(plan, same) == ([], plan), same
    for other in (replace(settings, num_classes=10), replace(settings, input_shape="3,32,32")):
        assert split_done(plan, other) == (plan, []), other


def test_a_stored_run_of_another_shape_does_not_cover_a_campaign_of_the_models_own(tmp_path):
    """A run of 3,64,64 and 10 classes was "stored" for a campaign that names neither, which profiles
    resnet10's own 3,224,224 and 1000 classes."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10"], [8], [2], [1], instance="lab")
    for extra in ({"input_shape": [3, 64, 64]}, {"num_classes": 10}):
        stored = result_doc("resnet10", batch_size=8, workers=2, instance="lab",
                            spec_extra={"input_shape": None, "num_classes": None, **extra})  # fmt: skip
        db = tmp_path / f"{next(iter(extra))}.duckdb"
        ingest_result(db, stored)
        assert split_done(plan, replace(settings, db_path=db)) == (plan, []), extra
    for own in ({"input_shape": [3, 224, 224]}, {"num_classes": 1000}):  # the defaults, stored as given
        stored = result_doc("resnet10", batch_size=8, workers=2, instance="lab",
                            spec_extra={"input_shape": None, "num_classes": None, **own})  # fmt: skip
        db = tmp_path / f"own-{next(iter(own))}.duckdb"
        ingest_result(db, stored)
        assert split_done(plan, replace(settings, db_path=db)) == ([], plan), own


def test_stalls_given_are_the_ones_measured_on_several_nodes_too(tmp_path):
    """--stalls compute on 2 nodes measured the network too: an extra run over the nodes nobody asked for."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    _, multi = plan_campaign(["resnet10"], [8], [2], [1, 2], ["1gbit"])
    assert profile_spec(multi, settings).stalls == ["compute", "interconnect", "network"]  # the default
    assert profile_spec(multi, replace(settings, stalls=["compute"])).stalls == ["compute"]
    # ... and a node count they measure nothing across is refused before anything runs or is rented
    with pytest.raises(UsageError, match="--stalls compute measures nothing across 2 machines"):
        check_measurable_plan([multi], replace(settings, stalls=["compute"]))
    check_measurable_plan([multi], replace(settings, stalls=["compute", "network"]))


def test_a_local_campaign_refuses_a_model_file_no_profile_could_build_before_its_plan(
    capsys, monkeypatch, tmp_path
):
    """Its dry run approved a syntax error and a factory the file lacks; the real run profiled the models
    before it, then stopped at it."""
    from support import stash_here

    (tmp_path / "broken.py").write_text("def make(:\n")
    (tmp_path / "net.py").write_text("from torch import nn\ndef make(num_classes=10):\n    return nn.Tanh()")
    db = ["--db", str(tmp_path / "c.duckdb")]
    for models, says in (("resnet10,broken.py:make", "cannot import model file broken.py: SyntaxError"),
                         ("net.py:nosuch", "no factory named 'nosuch'")):  # fmt: skip
        args = ["campaign", "--models", models, "--batch-sizes", "4", "--input-shape", "3,32,32", "--dry-run"]
        done = stash_here(capsys, monkeypatch, *args, *db, cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr and done.stdout == "", done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_campaign_gives_each_profile_the_time_and_precision_asked(capsys, monkeypatch, tmp_path):
    """Only a fixed --iterations capped a campaign's profiles: each took stash profile's 120 s a run."""
    from support import stash_here

    settings = CampaignSettings(db_path=tmp_path / "c.duckdb", max_phase_s=12.0, launches=1,
                                target_relative_ci=0.1)  # fmt: skip
    args = profile_args(CampaignItem("resnet10", 8, 2, 1, "box"), settings)
    assert args[args.index("--max-phase-seconds") + 1] == "12" and args[args.index("--launches") + 1] == "1"
    assert args[args.index("--target-ci") + 1] == "0.1"
    assert "--max-phase-seconds" not in profile_args(CampaignItem("resnet10", 8, 2, 1, "box"),
                                                     CampaignSettings(db_path=tmp_path / "c.duckdb"))
    bad = ["campaign", "--models", "resnet10", "--max-phase-seconds", "0", "--dry-run", "--db", str(tmp_path)]
    done = stash_here(capsys, monkeypatch, *bad, cwd=tmp_path)
    assert done.returncode == 2 and "--max-phase-seconds: must be positive" in done.stderr


def test_a_fixed_iteration_count_with_a_target_is_refused_before_the_first_profile(tmp_path, capsys):
    """--iterations 20 --target-ci 0.1 passed --dry-run; the campaign then stopped at its first profile."""
    from stash_core.cli.main import main

    args = ["campaign", "--models", "bert_tiny", "--batch-sizes", "3", "--workers", "1", "--iterations", "20",
            "--target-ci", "0.1", "--db", str(tmp_path / "c.duckdb")]  # fmt: skip
    for dry in (["--dry-run"], []):
        assert main([*args, *dry]) == 2
        assert "--target-ci steers --iterations auto" in capsys.readouterr().err
    assert not (tmp_path / "c.duckdb").exists()


def test_a_label_this_machine_contradicts_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    """--instance g5.xlarge on a machine without a GPU ran, was set aside as contradicted, and every rerun
    showed it "to run" again, adding another mislabelled run each time."""
    from stash_core.cli.main import main
    from stash_core.measure import nvml

    monkeypatch.setattr(nvml, "gpu_status", lambda: (False, "no GPU: NVML library not found"))
    args = ["campaign", "--models", "bert_tiny", "--batch-sizes", "2", "--workers", "1", "--iterations", "20",
            "--dry-run", "--db", str(tmp_path / "c.duckdb")]  # fmt: skip
    assert main([*args, "--instance", "g5.xlarge"]) == 2
    err = capsys.readouterr().err
    assert "--instance g5.xlarge: the machine has no GPU" in err and "g5.xlarge has 1 NVIDIA A10G" in err
    for fitting in ("mylab", "c5.2xlarge"):  # a name of its own; a CPU instance type
        assert main([*args, "--instance", fitting]) == 0


def test_an_interrupted_campaign_says_what_it_did_and_that_the_same_command_goes_on(tmp_path):
    """Ctrl-C in the third profile printed "stash: interrupted" alone: nothing of the two profiled."""
    settings = CampaignSettings(db_path=tmp_path / "c.duckdb")
    plan = plan_campaign(["resnet10", "resnet18", "resnet34"], [8], [2], [1], instance="lab")
    stored = FakeRunner()

    def interrupted_third(item, settings_, on_event):
        if len(stored.calls) == 2:
            raise KeyboardInterrupt
        return stored(item, settings_, on_event)

    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_campaign(plan, settings, runner=interrupted_third, report=lines.append)
    assert lines[-1].startswith("interrupted in [3/3] resnet34 batch 8, 2 worker(s)")
    assert lines[-1].endswith(": 2 profiled before it; the same command again runs what is left")
    # a profile may have ended as the signal came (stored completed): not said to be marked interrupted
    assert "marked interrupted unless it had just ended: `stash runs` says" in lines[-1]


def test_a_script_s_result_file_names_no_batch_and_a_model_file_s_no_hash(tmp_path):
    """A script's file was named "script-train.py_None_2_1_..." and each name ended in Unix seconds."""
    import re

    from stash_core.campaign.result_names import result_file

    script = result_file(tmp_path, "script:train.py", None, 2, 1, "vm", "95bdf97c7569aaaa")
    assert re.fullmatch(r"script-train\.py_2_1_vm_s95bdf97c7569-\d{8}T\d{6}Z\.json", script.name), script.name
    model = result_file(tmp_path, "./m.py:make", 8, 1, 1, "box@1gbit")
    assert re.fullmatch(r"m\.py-make_8_1_1_box_at_1gbit-\d{8}T\d{6}Z\.json", model.name), model.name


def test_a_campaign_on_a_database_that_does_not_exist_says_so_at_its_start(tmp_path, capsys, monkeypatch):
    """A mistyped --db profiled every configuration again without a word."""
    from stash_core.campaign import local
    from stash_core.campaign.local import CampaignOutcome
    from stash_core.cli.main import main

    monkeypatch.setattr(local, "run_campaign", lambda plan, settings, **_: CampaignOutcome(planned=plan))
    db = tmp_path / "typo.duckdb"
    args = ["campaign", "--models", "resnet10", "--batch-sizes", "2", "--workers", "1", "--db", str(db)]
    assert main(args) == 0
    assert f"note: {db} does not exist yet: this campaign starts a new database" in capsys.readouterr().err
    ingest_result(db, result_doc())
    assert main(args) == 0
    assert "does not exist" not in capsys.readouterr().err


def test_an_unknown_stall_is_told_the_campaign_s_three(tmp_path, capsys):
    """--stalls foo was told "choose from compute, interconnect, network, cpu, disk", and cpu then refused."""
    from stash_core.cli.main import main

    assert main(["campaign", "--models", "resnet10", "--stalls", "foo", "--dry-run"]) == 2
    assert "expected a comma list of compute, interconnect, network, got 'foo'" in capsys.readouterr().err


@pytest.mark.parametrize("models", ["resnet10,,bert_tiny", "resnet10,"])
def test_an_empty_item_of_a_list_is_refused_not_dropped(models, capsys):
    """--models resnet10,,bert_tiny was taken as two models without a word about the one left out."""
    from stash_core.cli.main import main

    assert main(["campaign", "--models", models, "--dry-run"]) == 2
    assert "an empty item in" in capsys.readouterr().err


def test_a_profile_s_rounds_and_launches_are_said_as_they_go():
    """A campaign said nothing between a profile's start and its end, minutes apart."""
    from stash_core.campaign.local import progress_line

    assert progress_line({"kind": "PHASE", "event": "round", "text": "round 2 of 3: R1 R0"}) == (
        "      round 2 of 3: R1 R0"
    )
    finished = {"kind": "PHASE", "event": "finished", "name": "R1", "status": "completed", "mean_s": 0.1234}
    assert progress_line(finished) == "      R1 completed: 0.123 s per iteration"
    assert progress_line({**finished, "mean_s": None, "status": "failed"}) == "      R1 failed"
    assert progress_line({"kind": "PROGRESS", "fraction_done": 0.5}) is None
    assert progress_line({"kind": "PHASE", "event": "started", "name": "R0"}) is None
