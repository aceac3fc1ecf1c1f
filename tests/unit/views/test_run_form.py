"""The Run page's form: a ProfileSpec checked by stash_core.spec_checks, worded for the form's fields."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from stash_core.cli.main import build_parser
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec, option_rule
from stash_core.spec_checks import check_fields
from stash_core.spec_parse import BATCH_SIZE, WORKERS, FieldError
from stash_core.views.run_form import FIELD_MESSAGES, RunForm, form_message, number_range, profile_args


def form(**changes) -> RunForm:
    values = {
        "model": "resnet18",
        "batch_size": 32,
        "workers": 2,
        "stalls": ["compute", "interconnect", "cpu"],
    }
    return RunForm(**{**values, **changes})


def command_spec(args: list[str]) -> ProfileSpec:
    """What `stash profile ARGS` would run (the job starts in another folder, so paths must be absolute)."""
    spec = ProfileSpec.from_args(build_parser().parse_args(["profile", *args]))
    check_fields(spec)
    return spec


def test_the_command_runs_what_the_form_says(tmp_path: Path) -> None:
    spec = command_spec(
        profile_args(form(input_shape=" 3, 64,64 ", instance=" p3.8xlarge ", iterations="40"))
    )
    assert spec == ProfileSpec(
        model="resnet18", batch_size=32, workers_per_node=2, stalls=["compute", "interconnect", "cpu"],
        synthetic_images=512, input_shape=[3, 64, 64], iterations="40", instance="p3.8xlarge",
    )  # fmt: skip
    assert command_spec(profile_args(form(find_unused_parameters=True))).find_unused_parameters


def test_the_target_interval_is_a_field_in_percent() -> None:
    """The Run page could not change the ±2% target its own warnings asked to widen."""
    assert command_spec(profile_args(form(target_ci_pct=10))).target_relative_ci == pytest.approx(0.1)
    assert "--target-ci" not in profile_args(form())  # the default, left out
    # with a fixed count the target steers nothing: refused here, not by the job (the command refuses it too)
    with pytest.raises(UsageError, match=r"Target interval: it steers Iterations per phase 'auto'; with 100"):
        profile_args(form(target_ci_pct=5, iterations="100"))
    assert "--iterations" in profile_args(form(iterations="100"))  # the default target: nothing to refuse
    for wrong in (0, 100, -5, float("nan"), None):
        with pytest.raises(UsageError, match=r"Target interval \(± %\): a percentage above 0 and below 100"):
            profile_args(form(target_ci_pct=wrong))


def test_relative_files_and_folders_are_made_absolute_against_the_dashboards_folder(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("def make(num_classes=10): ...\n")
    (tmp_path / "data" / "cls").mkdir(parents=True)
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("key\n")
    args = profile_args(
        form(model="net.py:make", data_source="dataset", dataset="data", where="hosts", nodes=2,
             hosts="gpu-a, ubuntu@gpu-b:2222", ssh_user="ubuntu", ssh_key="keys/id"),
        base_dir=tmp_path,
    )  # fmt: skip
    spec = command_spec(args)
    assert spec.model == f"{tmp_path / 'net.py'}:make" and spec.dataset == str((tmp_path / "data").resolve())
    assert spec.hosts == ["gpu-a", "ubuntu@gpu-b:2222"] and spec.nodes == 2
    assert (spec.ssh_user, spec.ssh_key) == ("ubuntu", str(tmp_path / "keys" / "id"))


def test_the_emulated_cluster_and_ssh_fields_of_other_places() -> None:
    spec = command_spec(
        profile_args(form(where="cluster", nodes=2, data_source="none", stalls=["network"], ssh_user="x;y"))
    )
    assert (spec.cluster, spec.nodes, spec.ssh_user, spec.real_data) == ("emulated", 2, None, False)


def test_options_at_their_default_are_left_out() -> None:
    """The form's defaults are the spec's: a form left at them says only what the spec has no default for."""
    args = profile_args(
        RunForm(model="resnet18", batch_size=32, stalls=["disk", "cpu", "network", "interconnect", "compute"])
    )
    assert args == ["--model", "resnet18", "--batch-size", "32", "--synthetic-images", "512"]
    args = profile_args(form(max_phase_s=60.0))
    assert args[args.index("--max-phase-seconds") + 1] == "60"


def test_the_forms_numbers_are_bounded_by_the_spec() -> None:
    """The Run page offers the spec's ranges: the batch sizes and worker counts the command takes, and a
    time limit in whole seconds above zero."""
    assert number_range("batch_size") == (1, int(BATCH_SIZE.high))
    assert number_range("workers_per_node") == number_range("nodes") == (1, int(WORKERS.high))
    assert number_range("max_phase_s") == (1, int(option_rule("max_phase_s").high))
    for attr in ("batch_size", "workers_per_node", "nodes", "synthetic_images", "max_phase_s"):
        low, high = number_range(attr)
        for value in (low, high):
            assert option_rule(attr).problem(value) is None, (attr, value)
        assert option_rule(attr).problem(high + 1) is not None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"workers": 0}, "Workers per machine must be a whole number of at least 1"),
        ({"nodes": 0}, r"Machines \(nodes\) must be a whole number of at least 1"),
        ({"batch_size": "32"}, r"Batch size \(per worker\) must be a whole number of at least 1"),
        ({"stalls": ["compute", "gpu"]}, "Stalls: unknown gpu"),
        ({"stalls": []}, "Stalls: pick at least one stall to measure"),
        ({"synthetic_images": 0}, "Number of images must be a whole number of at least 1"),
        ({"data_source": "dataset", "dataset": " "}, "Data set: give the folder of the data set"),
        ({"data_source": "tape"}, "unknown data source 'tape'"),
        ({"input_shape": "0,64"}, "Input shape: must be positive integers like 3,224,224"),
        ({"input_shape": "(3, 64, 64)"}, "Input shape: give C,H,W"),
        # the command's own reason under the field's name ("give C,H,W" and "letters, digits" before)
        ({"input_shape": "3,100000,100000"},
         "Input shape: must be .* at most 4 dimensions and 268,435,456 elements"),
        ({"instance": "all"}, "Instance label: 'all' is taken"),
        ({"instance": "a b"}, "Instance label: letters, digits and"),
        ({"num_classes": 0}, "Classes must be a whole number of at least 1"),
        ({"max_phase_s": 0.0}, "Time limit per phase must be positive"),
        # beyond a limit: the limit, under the field's name ("must be positive" and "--batch-size" before)
        ({"max_phase_s": 700000.0}, "Time limit per phase \\(s\\): must be at most 604,800"),
        ({"iterations": "20000000"},
         "Iterations per phase: must be 'auto' or an integer >= 2 \\(at most 10,000,000"),
        ({"batch_size": 2000000}, r"Batch size \(per worker\): must be at most 1,048,576"),
        ({"model": "net.py:not-a-name"}, "Model: no file"),
        ({"where": "moon"}, "unknown place to run 'moon'"),
        ({"where": "cluster", "nodes": 1}, r"The emulated cluster needs Machines \(nodes\) 2 or more"),
        ({"where": "hosts", "hosts": "gpu-a", "nodes": 2}, r"Remote hosts: 1 host\(s\) for 2 node\(s\)"),
        ({"where": "hosts", "hosts": "a", "ssh_user": "root;id"}, "SSH user: 'root;id' is not a user name"),
        ({"where": "hosts", "hosts": "a", "ssh_key": "/no/such/key"}, "SSH key: no file /no/such/key"),
        ({"where": "hosts", "hosts": "-oProxyCommand=x"}, "Remote hosts: '-oProxyCommand=x' is not a host"),
    ],
)
def test_each_wrong_field_has_the_forms_own_words(changes: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        profile_args(form(**changes))
    assert str(caught.value).startswith(message.split(":")[0].replace("\\", ""))


def test_a_check_the_form_does_not_word_keeps_the_commands_message() -> None:
    error = FieldError("--max-iterations must be at least 2", "max_iterations", 1)
    assert form_message(error, form()) == "--max-iterations must be at least 2"
    spec_fields = {spec_field.name for spec_field in fields(ProfileSpec)}
    assert {key.split("/")[0] for key in FIELD_MESSAGES} <= spec_fields


def test_the_form_can_name_a_command_without_remote_options() -> None:
    with pytest.raises(UsageError, match="no --hosts option"):
        profile_args(form(where="hosts", hosts="a"), supported_flags={"--model"})
    assert "--hosts" in profile_args(form(where="hosts", hosts="a"))


def test_a_training_script_with_its_arguments_and_data_folder(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('training')\n")
    (tmp_path / "data").mkdir()
    typed = "--epochs 1 --name 'a b' # one epoch"  # a shell's comment is no argument: read as a shell does
    args = profile_args(
        form(use_script=True, script="train.py", script_args=typed, data_dir="data"), base_dir=tmp_path
    )
    assert args[-5:] == ["--", "--epochs", "1", "--name", "a b"]
    spec = command_spec(args)
    assert (spec.script, spec.model, spec.batch_size) == (str(tmp_path / "train.py"), "script:train.py", None)
    assert spec.data_dir == str((tmp_path / "data").resolve()) and spec.script_sha256
    assert spec.stalls == ["compute", "interconnect", "cpu"] and spec.workers_per_node == 2


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"script": ""}, "Script: give the path of your training script"),
        ({"script": "missing.py"}, "Script: no file"),
        ({"script": "train.py", "data_dir": "nowhere"}, "Folder of the data it reads: no folder"),
        ({"script": "train.py", "script_args": "--name 'unclosed"}, "Script arguments:"),
        ({"script": "broken.py"}, "^Script: /.*/broken.py does not parse"),  # not "--script ..."
    ],
)
def test_a_wrong_script_field_is_named(tmp_path: Path, changes: dict, message: str) -> None:
    (tmp_path / "train.py").write_text("print('training')\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    with pytest.raises(UsageError, match=message):
        profile_args(form(use_script=True, **changes), base_dir=tmp_path)


def test_cuda_on_a_machine_without_a_gpu_is_refused_in_the_form(monkeypatch) -> None:
    """The form started a job that failed at once ("--device cuda: no CUDA device is visible"), where the
    command refuses it before anything starts. The hosts' devices are theirs: checked once they answer."""
    from stash_core.measure import nvml

    monkeypatch.setattr(nvml, "gpu_status", lambda: (False, "no GPU: NVML library not found"))
    with pytest.raises(UsageError, match=r"^Device: cuda, but no NVIDIA GPU is visible on this machine"):
        profile_args(form(device="cuda"))
    assert "--device" in profile_args(form(device="cuda", where="hosts", hosts="10.0.0.1"))
    monkeypatch.setattr(nvml, "gpu_status", lambda: (True, "1 GPU via NVML"))
    assert "cuda" in profile_args(form(device="cuda"))


def test_a_zoo_models_input_of_the_other_kind_is_refused_in_the_form_before_any_job() -> None:
    """resnet18 with input shape 3,32 started a job that then failed, and stayed in the profiles' list."""
    with pytest.raises(UsageError, match=r"^Input shape: resnet18 takes images: input shape must be C,H,W"):
        profile_args(form(input_shape="3,32"))
    with pytest.raises(UsageError, match=r"^Input shape: bert_tiny takes token ids"):
        profile_args(form(model="bert_tiny", input_shape="3,32,32", stalls=["compute", "interconnect"]))


def test_a_profiles_messages_name_the_run_pages_fields_and_say_where_the_others_are() -> None:
    """The Run page advised --launches and --iterations N, and said '--workers 500: ...', to a user whose form
    has no flags: the fields it has are named as the form names them, the others said to be the command's."""
    from stash_core.views.common import in_page_words
    from stash_core.views.run_form import RUN_PAGE_WORDS, options_not_on_the_page

    said = "more iterations per run (--iterations N, or a smaller --target-ci); a larger --max-phase-seconds"
    assert in_page_words(said, RUN_PAGE_WORDS) == (
        "more iterations per run (Iterations per phase, or a smaller Target interval); a larger Time limit "
        "per phase"
    )
    assert in_page_words("--workers 500: too many", RUN_PAGE_WORDS) == "Workers per machine 500: too many"
    assert in_page_words("stopped at --max-iterations", RUN_PAGE_WORDS) == "stopped at --max-iterations"
    assert options_not_on_the_page([said, "fewer --launches"]) == (
        "--launches: options of `stash profile` that this page leaves at their defaults; run "
        "the command to set them"
    )
    assert options_not_on_the_page(["a stall not resolved"]) is None
    threads = options_not_on_the_page(["fewer threads per worker (--threads-per-worker 1, now 2)"])
    assert threads is not None and threads.startswith("--threads-per-worker: options of `stash profile`")
