"""The API's keyword options are `stash profile`'s arguments: written as the command would get them and read
by the same parser, so the same values are refused with the same line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stash_core.api.options import as_text, checked, database, names, parse_profile, profile_argv
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec
from stash_core.spec_parse import BATCH_SIZE, count


def test_flag_names_and_field_names_give_the_same_arguments():
    common = {"model": "resnet10", "batch_size": 8}
    by_flag = profile_argv(None, {**common, "workers": 2, "max_phase_seconds": 4})
    by_field = profile_argv(None, {**common, "workers_per_node": 2, "max_phase_s": 4})
    expected = ["--model=resnet10", "--batch-size=8", "--workers=2", "--max-phase-seconds=4"]
    assert by_flag == by_field == expected


def test_python_values_are_written_as_the_command_line_writes_them():
    argv = profile_argv(None, {"input_shape": (3, 32, 32), "stalls": ["compute", "cpu"], "target_ci": 0.05,
                               "out": Path("/tmp/r.json"), "seed": None})  # fmt: skip
    assert argv == ["--input-shape=3,32,32", "--stalls=compute,cpu", "--target-ci=0.05", "--out=/tmp/r.json"]
    assert as_text(0.1 + 0.2) == repr(0.1 + 0.2)  # no digit lost
    # a whole float is a whole number: 1e6 images read "1e+06", which a count refused
    assert (as_text(1000000.0), as_text(64.0), as_text(2.5e-7)) == ("1000000", "64", "2.5e-07")
    import numpy as np

    # numpy's numbers as Python's: np.float32(8) was "8.0", refused as a batch size
    assert (as_text(np.float32(8)), as_text(np.int32(8)), as_text(np.float64(0.5))) == ("8", "8", "0.5")
    assert as_text(np.float32(0.1)) == repr(float(np.float32(0.1)))  # its own value, no digit lost
    assert checked("dataset_images", 1e6, count(10**12)) == 1_000_000


def test_switches_by_flag_and_by_field():
    assert profile_argv(None, {"no_store": True, "no_probes": False}) == ["--no-store"]
    assert profile_argv(None, {"probes": False}) == ["--no-probes"]  # the field away from its default
    assert profile_argv(None, {"probes": True}) == []


def test_a_spec_is_the_start_and_options_override_it():
    spec = ProfileSpec(model="resnet10", batch_size=8, workers_per_node=2)
    args, _ = parse_profile(profile_argv(spec, {"batch_size": 16, "db": "x.duckdb"}))
    assert (args.model, args.batch_size, args.workers) == ("resnet10", 16, 2)
    assert args.db == Path("x.duckdb")


def test_an_option_switches_a_specs_setting_back_on():
    spec = ProfileSpec(model="resnet10", batch_size=8, workers_per_node=2, probes=False, pin_workers=False)
    assert profile_argv(spec, {}) == ["--model=resnet10", "--batch-size=8", "--workers=2", "--no-pin",
                                      "--no-probes"]  # fmt: skip
    for options in ({"probes": True, "pin_workers": True}, {"no_probes": False, "no_pin": False}):
        args, _ = parse_profile(profile_argv(spec, options))
        assert (args.no_probes, args.no_pin, args.workers) == (False, False, 2)
    args, _ = parse_profile(profile_argv(spec, {"workers": 3, "seed": None}))  # None: not given
    assert (args.no_probes, args.workers, args.seed) == (True, 3, 0)
    with pytest.raises(UsageError, match="probes: expected True or False, got 'yes'"):
        profile_argv(spec, {"probes": "yes"})


def test_script_arguments_come_after_the_separator():
    argv = profile_argv(None, {"script": "train.py", "script_args": ["--epochs", "1"], "workers": 2})
    assert argv == ["--script=train.py", "--workers=2", "--", "--epochs", "1"]
    args, _ = parse_profile(argv)
    assert args.script_args == ["--epochs", "1"]


def test_an_unknown_option_names_the_closest_one():
    with pytest.raises(UsageError, match=r"unknown option 'batch_sise' \(did you mean 'batch_size'\?\)"):
        profile_argv(None, {"batch_sise": 8})
    with pytest.raises(UsageError, match="spec must be a ProfileSpec, not dict"):
        profile_argv({"model": "resnet10"}, {})  # type: ignore[arg-type]


def test_a_bad_value_is_the_commands_own_line():
    line = "^profile: argument --batch-size: must be a positive integer, got 0$"
    with pytest.raises(UsageError, match=line):
        parse_profile(profile_argv(None, {"model": "resnet10", "batch_size": 0}))
    with pytest.raises(UsageError, match="--out .* is the database"):
        parse_profile(["--model=resnet10", "--batch-size=8", "--db=x.duckdb", "--out=x.duckdb"])


def test_a_value_starting_with_a_dash_stays_a_value():
    with pytest.raises(UsageError, match="--seed: .*-1"):
        parse_profile(profile_argv(None, {"model": "resnet10", "batch_size": 8, "seed": -1}))


def test_checked_values_and_names(monkeypatch, tmp_path):
    assert checked("batch_size", 8, BATCH_SIZE) == 8 and checked("batch_size", None, BATCH_SIZE) is None
    with pytest.raises(UsageError, match="^batch_size: must be a positive integer, got 0$"):
        checked("batch_size", 0, BATCH_SIZE)
    assert names("gpu", "A100, H100", 5) == ["A100", "H100"] and names("gpu", ["T4"], 5) == ["T4"]
    with pytest.raises(UsageError, match="gpu: expected a list of 1 to 2 names"):
        names("gpu", ["a", "b", "c"], 2)
    monkeypatch.setenv("STASH_DB", str(tmp_path / "env.duckdb"))
    assert database(None) == tmp_path / "env.duckdb" and database("~/x.duckdb") == Path.home() / "x.duckdb"
    with pytest.raises(UsageError, match="db: expected a path"):
        database("  ")


def test_true_and_false_are_checked_as_the_other_functions_check_them():
    # a choice of on and off takes True and False as those: False no longer leaves pairing to auto
    assert profile_argv(None, {"paired": False}) == ["--paired=off"]
    assert profile_argv(None, {"paired": True}) == ["--paired=on"]
    assert profile_argv(None, {"no_store": False}) == []
    with pytest.raises(UsageError, match="no_store: expected True or False, got 'false'"):
        profile_argv(None, {"no_store": "false"})  # a string is no switch: it stored nothing
    with pytest.raises(UsageError, match="profile: batch_size takes a value, not False"):
        profile_argv(None, {"batch_size": False})


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"db": 5}, "profile: db takes a path, not int 5"),  # a database file named "5" in the cwd
        ({"db": ["/tmp/x.duckdb"]}, "profile: db takes a path, not list"),
        ({"out": ["a", "b.json"]}, "profile: out takes a path, not list"),  # a file "a,b.json"
        ({"batch_size": [2]}, "profile: batch_size takes one value, not list [2]"),
        ({"model": {"name": "resnet10"}}, "profile: model takes a text, not dict"),
        ({"model": 5}, "profile: model takes a text, not int 5"),  # was the model named "5", as unknown
        ({"instance": 3.5}, "profile: instance takes a text, not float 3.5"),
    ],
)
def test_a_value_of_a_type_the_option_never_takes_is_refused(options, said):
    with pytest.raises(UsageError, match=f"^{re.escape(said)}"):
        profile_argv(None, options)


def test_numpy_numbers_are_numbers():
    import numpy as np

    assert profile_argv(None, {"batch_size": np.int64(8), "target_ci": np.float32(0.5)}) == [
        "--batch-size=8", "--target-ci=0.5"
    ]  # fmt: skip


def test_a_list_where_one_value_is_expected_is_refused_not_joined():
    with pytest.raises(UsageError, match=r"^batch_size: expected one value, not a list: \[8\]"):
        checked("batch_size", [8], BATCH_SIZE)
    assert checked("input_shape", (3, 32, 32), str, many=True) == "3,32,32"


def test_an_error_names_the_functions_arguments_not_the_commands_options():
    """predict(memory_format="nhwc") said "--memory-format must be one of ...", and precision="fp8" said
    "precision must be ...", in one function."""
    from stash_core.api.options import argument_words

    names = ["model", "batch_size", "memory_format", "script_run"]
    said = "--memory-format: for a --model job; a --script-run is scaled (--tuning given)"
    assert argument_words(said, names) == (
        "memory_format: for a model job; a script_run is scaled (--tuning given)"  # not one of predict's
    )
    # a command to run stays whole, quoted or not; a flag inside a longer word is not one
    kept = "run `stash profile --batch-size 8 --model x` or set --batch-size-x"
    assert argument_words(kept, names) == kept
    command = "no emulated cluster is up (sudo stash cluster up --nodes N --model x)"
    assert argument_words(command, [*names, "nodes"]) == command
    # a quoted value is data: a model named '--model' or a path holding one is not rewritten
    for data in ("unknown model '--model'", 'no file "/data/--model/m.py"'):
        assert argument_words(data, names) == data
    # an apostrophe is no quote: the flags of a sentence with one are still named
    assert argument_words("the script's --batch-size", names) == "the script's batch_size"
    # profile()'s keywords are its command's options: only those are named so
    from stash_core.api.options import PROFILE_OPTION_NAMES

    said = "--max-phase-seconds is spent; see --frobnicate"
    assert argument_words(said, PROFILE_OPTION_NAMES) == "max_phase_seconds is spent; see --frobnicate"
    import stash_core

    with pytest.raises(UsageError, match="^memory_format must be one of nchw, channels_last"):
        stash_core.predict(model="resnet50", batch_size=8, memory_format="nhwc", instances="g5.xlarge")


def test_a_users_own_words_in_an_error_are_left_as_they_are(tmp_path):
    """A user's factory's message is data: its --batch-size is its own, not predict's argument."""
    import stash_core

    factory = "def make(num_classes=10):\n    raise ValueError('needs --batch-size 4')\n"
    (tmp_path / "net.py").write_text(factory)
    with pytest.raises(UsageError, match="needs --batch-size 4"):
        stash_core.predict(model=f"{tmp_path / 'net.py'}:make", batch_size=8, instances="g5.xlarge",
                           db=tmp_path / "x.duckdb")  # fmt: skip


def test_a_specs_derived_fields_are_taken_where_they_agree_and_refused_where_not(tmp_path):
    """A spec's backend and script_sha256 (no flag sets them; a stored run's spec holds them) were dropped
    unsaid: backend="mpi" profiled on gloo."""
    tiny = {"model": "resnet10", "batch_size": 4}
    assert profile_argv(ProfileSpec(**tiny, backend="gloo"), {}) == ["--model=resnet10", "--batch-size=4",
                                                                      "--device=cpu"]  # fmt: skip
    assert "--device=cuda" in profile_argv(ProfileSpec(**tiny, backend="nccl"), {})
    ran = ProfileSpec(**tiny, device="cpu", backend="gloo")  # a stored run's spec
    assert "--device=cpu" in profile_argv(ran, {})
    with pytest.raises(UsageError, match=r"^profile: spec.backend 'mpi' is not one Stash runs: gloo on the"):
        profile_argv(ProfileSpec(**tiny, backend="mpi"), {})
    with pytest.raises(UsageError, match=r"^profile: spec.backend 'nccl' does not run on device 'cpu'"):
        profile_argv(ProfileSpec(**tiny, backend="nccl"), {"device": "cpu"})  # the option against the spec
    script = tmp_path / "train.py"
    script.write_text("print('v1')\n")
    from stash_core.spec import script_sha256

    made = ProfileSpec(model="script:train.py", batch_size=None, script=str(script),
                       script_sha256=script_sha256(str(script)))  # fmt: skip
    assert f"--script={script}" in profile_argv(made, {})
    script.write_text("print('v2')\n")
    with pytest.raises(UsageError, match=r"^profile: the script .*train.py changed since the spec was made"):
        profile_argv(made, {})
    with pytest.raises(UsageError, match=r"^profile: spec.script_sha256 is a script's: the spec names no"):
        profile_argv(ProfileSpec(**tiny, script_sha256="ab" * 32), {})


def test_none_is_the_default_for_how_the_job_trains():
    """predict(precision=None) and recommend(memory_format=None) were refused ("must be one of ..., got
    None"), where every other option with a default takes None as not given."""
    import stash_core

    by_none = stash_core.predict(model="resnet50", batch_size=8, instances="g5.xlarge", precision=None,
                                 memory_format=None, optimizer=None, optimizer_impl=None, attention=None)
    by_default = stash_core.predict(model="resnet50", batch_size=8, instances="g5.xlarge")
    assert by_none.to_dict() == by_default.to_dict()
