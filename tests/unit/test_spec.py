"""ProfileSpec: one definition of `stash profile`'s options, read from and written back to a command line."""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from pathlib import Path

import pytest

from stash_core.cli.main import build_parser
from stash_core.errors import UsageError
from stash_core.spec import OPTIONS, ProfileSpec, script_sha256
from stash_core.spec_argparse import add_machine_arguments, add_profile_arguments
from stash_core.spec_checks import check_fields, check_label
from stash_core.spec_parse import FieldError, parse_input_shape, parse_stalls


def parsed(argv: list[str]) -> ProfileSpec:
    return ProfileSpec.from_args(build_parser().parse_args(["profile", *argv]))


@pytest.fixture()
def folders(tmp_path: Path) -> dict[str, str]:
    data = tmp_path.resolve() / "images"
    (data / "cat").mkdir(parents=True)
    key = tmp_path.resolve() / "id_ed25519"
    key.write_text("not a real key\n")
    script = tmp_path.resolve() / "train.py"
    script.write_text("print('training')\n")
    config = tmp_path.resolve() / "ssh_config"
    config.write_text("Host a\n  HostName 127.0.0.1\n")
    return {"dataset": str(data), "ssh_key": str(key), "script": str(script), "ssh_config": str(config)}


def every_option(folders: dict[str, str]) -> ProfileSpec:
    """A spec with every field that has an option away from its default (but --image-px, which goes with
    --synthetic-images only, and --dataset-images, which goes without a data set: the "synthetic images" and
    "no data set" specs have them)."""
    return ProfileSpec(
        model="examples/models/tiny_cnn.py:make", batch_size=48, workers_per_node=3, nodes=2,
        stalls=["compute", "network", "disk"], dataset=folders["dataset"],
        loader_workers=0, iterations="40", device="cpu", instance="p3.8xlarge", threads_per_worker=2,
        pin_workers=False, paired="off",
        input_shape=[3, 64, 48], num_classes=7, find_unused_parameters=True, target_relative_ci=0.05,
        max_iterations=300, max_phase_s=12.5, hosts=["gpu-a", "ubuntu@10.0.0.2:2222"], seed=7,
        ssh_user="ubuntu", ssh_key=folders["ssh_key"], remote_python="/opt/venv/bin/python",
        remote_workdir="/srv/stash", master_addr="10.0.0.1", master_port=29555, comm_timeout_s=120,
        probes=False,
    )  # fmt: skip


def specs(folders: dict[str, str]) -> dict[str, ProfileSpec]:
    base = ProfileSpec(model="resnet18", batch_size=32)
    return {
        "defaults": base,
        "every option": every_option(folders),
        "synthetic images": replace(base, synthetic_images=256, image_px=32, stalls=["cpu"]),
        "data set": replace(base, dataset=folders["dataset"], disk_read_mbps=35.5),
        "no data set": replace(base, dataset_images=5000),
        "emulated cluster": replace(
            base, nodes=2, cluster="emulated", cluster_bandwidth="200mbit", cluster_name="bench"
        ),
        "hosts": replace(base, nodes=2, hosts=["a", "b"], ssh_key=folders["ssh_key"], probes=False,
                         ssh_config=folders["ssh_config"]),
        "image shape": replace(base, input_shape=[3, 224, 224]),
        "token shape": replace(base, model="bert_tiny", input_shape=[128], num_classes=2),
        "awkward float": replace(base, target_relative_ci=0.1 + 0.2, max_phase_s=1e-3),
        "zeros": replace(base, loader_workers=0, seed=0, iterations="2"),
        "launches": replace(base, launches=4),
        "script": ProfileSpec(
            model="script:train.py",
            batch_size=None,
            workers_per_node=2,
            script=folders["script"],
            script_args=["--epochs", "1", "--", "--lr=3e-4"],
            data_dir=folders["dataset"],
            script_start_timeout_s=30.0,
            script_sha256=script_sha256(folders["script"]),
        ),  # fmt: skip
    }


@pytest.mark.parametrize(
    "name",
    ["defaults", "every option", "synthetic images", "data set", "no data set", "emulated cluster", "hosts",
     "image shape", "token shape", "awkward float", "zeros", "launches", "script"],
)  # fmt: skip
def test_a_spec_survives_its_command_line(folders: dict[str, str], name: str) -> None:
    spec = specs(folders)[name]
    check_fields(spec)  # each of them is a valid profile
    assert parsed(spec.to_argv()) == spec


def options_of(argv: list[str]) -> list[str]:
    """The arguments up to `--` (and it): after it come the script's own."""
    return argv[: argv.index("--") + 1] if "--" in argv else argv


def test_the_specs_cover_every_option_and_every_option_sets_a_field(folders: dict[str, str]) -> None:
    argvs = [options_of(spec.to_argv()) for spec in specs(folders).values()]
    given = {arg for argv in argvs for arg in argv if arg.startswith("--")}
    assert given == {option.flag for option in OPTIONS if option.attr}
    assert {option.attr for option in OPTIONS if option.attr} == {f.name for f in fields(ProfileSpec)} - {
        "backend",  # chosen from the device, not an option
        "script_sha256",  # of the script's contents, not an option
    }


def test_defaults_are_left_out() -> None:
    assert ProfileSpec(model="resnet18", batch_size=32).to_argv() == [
        "--model",
        "resnet18",
        "--batch-size",
        "32",
    ]
    spec = ProfileSpec(model="m", batch_size=1, workers_per_node=1, iterations="auto", comm_timeout_s=60,
                       stalls=parse_stalls("disk,cpu,network,interconnect,compute"), probes=True)  # fmt: skip
    assert spec.to_argv() == ["--model", "m", "--batch-size", "1"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "resnet18", "--batch-size", "32", "--workers", "2", "--synthetic-images", "2000",
         "--instance", "my-laptop"],
        ["--model", "resnet18", "--batch-size", "8", "--workers", "2", "--nodes", "2", "--stalls",
         "compute,interconnect,network", "--iterations", "30", "--cluster", "emulated",
         "--cluster-bandwidth", "1gbit", "--no-probes"],
        ["--model", "bert_tiny", "--batch-size", "4", "--target-ci", "0.05", "--max-phase-seconds", "60",
         "--input-shape", "64", "--num-classes", "2", "--seed", "3"],
    ],
)  # fmt: skip
def test_to_argv_of_a_parsed_command_line_reproduces_it(argv: list[str]) -> None:
    assert parsed(argv).to_argv() == argv


def test_another_spelling_of_the_same_profile_comes_back_in_the_one_spelling(tmp_path: Path) -> None:
    (tmp_path / "data" / "cls").mkdir(parents=True)
    spec = parsed(["--stalls", "prep,compute", "--batch-size", "8", "--workers", "1", "--input-shape",
                   "3x64x64", "--model", "resnet18", "--dataset", str(tmp_path / "data" / ".." / "data"),
                   "--iterations", "auto", "--max-phase-seconds", "60.0"])  # fmt: skip
    assert spec.to_argv() == ["--model", "resnet18", "--batch-size", "8", "--stalls", "compute,cpu",
                              "--dataset", str((tmp_path / "data").resolve()), "--max-phase-seconds", "60",
                              "--input-shape", "3,64,64"]  # fmt: skip
    assert parsed(spec.to_argv()) == spec


def test_profile_has_the_machine_options_and_probe_keeps_its_own() -> None:
    spec = parsed(["--model", "m", "--batch-size", "2", "--nodes", "2", "--hosts", "a,b", "--python",
                   "python3.12", "--workdir", "/w", "--comm-timeout", "30"])  # fmt: skip
    assert (spec.hosts, spec.remote_python, spec.remote_workdir, spec.comm_timeout_s) == (
        ["a", "b"], "python3.12", "/w", 30,
    )  # fmt: skip
    probe = build_parser().parse_args(["probe", "--nodes", "2", "--hosts", "a,b", "--cluster-state", "/s"])
    assert (probe.hosts, probe.python, probe.comm_timeout, probe.cluster_state) == ("a,b", None, 60, "/s")
    with pytest.raises(UsageError, match="--no-probes"):
        build_parser().parse_args(["probe", "--no-probes"])  # a profile's option only
    parser = argparse.ArgumentParser()
    add_machine_arguments(parser)
    assert "--cluster-bandwidth" not in parser.format_help() and "--master-port" in parser.format_help()


def test_the_run_options_are_not_part_of_the_spec(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_profile_arguments(parser)
    run_options = ["--out", str(tmp_path / "r.json"), "--no-store", "--progress", "json", "--db", "r.duckdb"]
    args = parser.parse_args(["--model", "m", "--batch-size", "2", *run_options])
    assert (args.out, args.no_store, args.progress) == (tmp_path / "r.json", True, "json")
    assert ProfileSpec.from_args(args).to_argv() == ["--model", "m", "--batch-size", "2"]
    with pytest.raises(SystemExit):  # argparse: one data source or the other
        parser.parse_args(["--model", "m", "--batch-size", "2", "--dataset", "d", "--synthetic-images", "4"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stalls", "gpu"], "--stalls: unknown stall gpu"),
        (["--stalls", " , "], r"--stalls: unknown stall \(empty\)"),
        (["--stalls", "compute,,network"], "--stalls: an empty item in 'compute,,network'"),
        (["--stalls", "compute,"], "--stalls: an empty item"),
        (["--iterations", "1"], "--iterations must be 'auto' or an integer >= 2"),
        (["--iterations", "²"], "--iterations must be 'auto'"),
        (["--input-shape", "3,0,4"], "--input-shape must be positive integers"),
        (["--input-shape", "-3"], "--input-shape must be positive integers"),
        (["--hosts", "a,,b"], "--hosts 'a,,b': an empty host name"),
    ],
)
def test_texts_that_cannot_be_read_name_their_flag(argv: list[str], message: str) -> None:
    with pytest.raises(FieldError, match=message):
        parsed(["--model", "m", "--batch-size", "2", *argv])


def test_input_shapes_read_like_the_zoo_reads_them() -> None:
    assert parse_input_shape("3,224,224") == parse_input_shape("3x224x224") == [3, 224, 224]
    assert parse_input_shape("(3, 32, 32)") == [3, 32, 32] and parse_input_shape("128") == [128]


@pytest.mark.parametrize(
    ("changes", "attr", "message"),
    [
        ({"model": " "}, "model", "--model: give a zoo name"),
        ({"batch_size": 0}, "batch_size", "--batch-size must be a positive integer, got 0"),
        ({"workers_per_node": "2"}, "workers_per_node", "--workers must be a positive integer"),
        ({"num_classes": 0}, "num_classes", "--num-classes must be a positive integer"),
        ({"synthetic_images": 0}, "synthetic_images", "--synthetic-images must be a positive integer"),
        ({"loader_workers": -1}, "loader_workers", "--loader-workers must be >= 0"),
        ({"stalls": []}, "stalls", "--stalls"),
        ({"stalls": ["compute", "gpu"]}, "stalls", "unknown stall gpu"),
        ({"iterations": "1"}, "iterations", "--iterations"),
        ({"input_shape": [3, 0]}, "input_shape", "--input-shape"),
        ({"input_shape": []}, "input_shape", "--input-shape"),
        ({"device": "tpu"}, "device", "--device must be auto, cpu or cuda"),
        ({"dataset": "/no/such/dir"}, "dataset", "--dataset /no/such/dir: no such directory"),
        ({"disk_read_mbps": 0.0}, "disk_read_mbps", r"--disk-read-mbps must be from 0.1 to 1e6 \(MB/s\)"),
        ({"disk_read_mbps": 1e-9}, "disk_read_mbps", "--disk-read-mbps must be from 0.1"),  # a byte a second
        ({"nodes": 2}, "nodes", "say which machines"),
        ({"nodes": 2, "hosts": ["a;touch x", "b"]}, "hosts", "invalid host name 'a;touch x'"),
        ({"nodes": 2, "hosts": ["-oProxyCommand=x", "b"]}, "hosts", "invalid host name"),
        ({"nodes": 2, "hosts": ["a"]}, "hosts", r"1 host\(s\) for --nodes 2"),
        # one machine however spelled: its port written otherwise, a user added, its name's case
        ({"nodes": 2, "hosts": ["root@h:22922", "h:022922"]}, "hosts", "names h:022922 twice"),
        ({"nodes": 2, "hosts": ["h", "root@H:22"]}, "hosts", "names root@H:22 twice"),
        ({"nodes": 2, "hosts": ["[::1]:22", "u@[::1]"]}, "hosts", r"names u@\[::1\] twice"),
        ({"nodes": 2, "hosts": ["2001:db8::1", "2001:DB8:0:0::1"]}, "hosts", "names 2001:DB8:0:0::1 twice"),
        ({"hosts": ["a"], "ssh_user": "root;id"}, "ssh_user", "--ssh-user: invalid user name"),
        (
            {"hosts": ["a"], "ssh_key": "/no/such/key"},
            "ssh_key",
            "--ssh-key: ssh key '/no/such/key' does not",
        ),
        ({"ssh_user": "ubuntu"}, "ssh_user", "need --hosts"),
        ({"target_relative_ci": 1.5}, "target_relative_ci", "--target-ci must be a fraction"),
        ({"max_phase_s": 0.0}, "max_phase_s", "--max-phase-seconds must be positive"),
        ({"max_iterations": 1}, "max_iterations", "--max-iterations at least 2"),
    ],
)
def test_a_wrong_value_is_one_line_naming_the_flag_and_the_field(
    changes: dict, attr: str, message: str
) -> None:
    with pytest.raises(FieldError, match=message) as caught:
        check_fields(replace(ProfileSpec(model="resnet18", batch_size=32), **changes))
    assert caught.value.attr == attr and "\n" not in str(caught.value)
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2


def test_hosts_the_launcher_takes_pass_the_first_look() -> None:
    hosts = ["gpu-a", "ubuntu@10.0.0.2", "node.example.com:2222", "[fe80::1]:22", "fe80::2", "u_1@h"]
    check_fields(ProfileSpec(model="m", batch_size=1, nodes=len(hosts), hosts=hosts))


def test_instance_labels_of_the_dashboard() -> None:
    check_label("p3.8xlarge")
    check_label("lab@1gbit")
    check_label(None)
    with pytest.raises(FieldError, match="--instance 'a b'"):
        check_label("a b")


@pytest.mark.parametrize(
    ("label", "says"),
    [
        ("a,b", "holds a comma"),
        ("gcp:a2", "holds a colon"),
        ("All", "is taken: --instances all"),
        ("zw\u200bx", "invisible character U\\+200B"),
    ],
)
def test_an_instance_label_no_catalog_name_can_be_is_refused(label, says):
    """`profile --instance a,b` stored a run that `predict --instances` and `instances add` cannot name."""
    with pytest.raises(FieldError, match=f"--instance .* {says}"):
        check_fields(ProfileSpec(model="resnet18", batch_size=8, instance=label))
    if label != "All":
        with pytest.raises(FieldError, match="--instance"):
            check_label(label)
    check_fields(ProfileSpec(model="resnet18", batch_size=8, instance="my-laptop_2.0@lab+1"))


@pytest.mark.parametrize("host", [":22", "127.0.0.1:99999", "h:0", "-F@127.0.0.1", "-oProxyCommand=x", "a:b"])
def test_hosts_that_ssh_would_misread_or_refuse_are_refused(host):
    with pytest.raises(FieldError, match="--hosts"):
        check_fields(ProfileSpec(model="resnet18", batch_size=8, hosts=[host]))


@pytest.mark.parametrize("host", ["gpu-a", "ubuntu@gpu-b:2222", "::1", "[::1]:22", "10.0.0.2:65535"])
def test_hosts_ssh_takes_pass(host):
    check_fields(ProfileSpec(model="resnet18", batch_size=8, hosts=[host]))


def test_a_value_that_starts_with_a_dash_is_joined_to_its_flag():
    argv = ProfileSpec(model="resnet18", batch_size=8, instance="--no-store").to_argv()
    assert argv == ["--model", "resnet18", "--batch-size", "8", "--instance=--no-store"]
    with pytest.raises(FieldError, match="not starting with -"):
        check_label("--no-store")


def test_profile_help_says_the_default_of_threads_per_worker() -> None:
    """--threads-per-worker showed no default, though one is chosen: the machine's cores per worker."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    help_text = " ".join(commands["profile"].format_help().split())
    assert "torch threads per CPU worker (default: the machine's CPU cores / workers per machine" in help_text


@pytest.mark.parametrize(
    ("argv", "said"),
    [(["--model", "m", "--batch-size", "2", "--dataset", "loop1"], "--dataset loop1: cannot be resolved"),
     (["--script", "loop1"], "--script loop1: cannot be resolved"),
     (["--script", "s.py", "--data-dir", "loop1"], "--data-dir loop1: cannot be resolved")],
)  # fmt: skip
def test_a_symlink_loop_given_as_a_path_is_one_line(tmp_path, monkeypatch, argv, said) -> None:
    """It was a RuntimeError's traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "s.py").write_text("print(1)\n")
    with pytest.raises(FieldError, match=f"^{said} \\(a symlink loop\\)$"):
        parsed(argv)


def test_a_data_set_that_is_a_file_is_said_to_be_one(tmp_path) -> None:
    (tmp_path / "afile").write_text("x")
    spec = parsed(["--model", "m", "--batch-size", "2", "--dataset", str(tmp_path / "afile")])
    with pytest.raises(FieldError, match="afile: a file, not a folder$"):
        check_fields(spec)


def test_cluster_bandwidth_takes_unlimited_as_the_cluster_does() -> None:
    """`stash cluster up --bandwidth unlimited` works; a profile's --cluster-bandwidth unlimited was not."""
    spec = parsed(["--model", "m", "--batch-size", "2", "--cluster", "emulated", "--nodes", "2",
                   "--cluster-bandwidth", "Unlimited"])  # fmt: skip
    assert spec.cluster_bandwidth == "unlimited"


@pytest.mark.parametrize("flag", ["--hosts", "--ssh-user", "--python", "--workdir", "--cluster-name",
                                  "--master-addr"])  # fmt: skip
def test_an_empty_machine_option_is_refused_not_read_as_left_out(flag: str, capsys) -> None:
    """--hosts '' (a variable that expanded to nothing) profiled this machine alone, exit 0."""
    from stash_core.cli.main import main

    assert main(["profile", "--model", "resnet10", "--batch-size", "2", flag, ""]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"stash: profile: argument {flag}: an empty value: leave the option out for its default"


def test_an_empty_catalog_value_is_refused_and_none_clears_it(tmp_path: Path, capsys) -> None:
    """instances set --vcpus '' cleared the catalog's vCPUs without a word; only 'none' clears now."""
    from stash_core.cli.main import main

    db = str(tmp_path / "c.duckdb")
    for flag in ("--vcpus", "--memory-gib", "--network-gbps", "--price-date", "--on-demand-usd-per-h",
                 "--provider", "--region", "--source"):
        assert main(["instances", "set", "g5.xlarge", flag, "", "--db", db]) == 2
        assert "an empty value: give one, or 'none' to clear it" in capsys.readouterr().err
    assert not Path(db).exists()
    assert main(["instances", "set", "g5.xlarge", "--vcpus", "none", "--db", db]) == 0
    assert "vcpus=none" in capsys.readouterr().out  # as typed


def test_a_limit_is_written_as_the_value_is() -> None:
    """'must be at most 1e+06, got 1e+300': the limit in figures, as every other message gives it."""
    from stash_core.spec_parse import Number

    assert Number(0, 1e6, whole=False).problem(1e300) == "must be at most 1,000,000, got 1e+300"
    assert Number(0, 0.5, whole=False).problem(0.7) == "must be at most 0.5, got 0.7"
