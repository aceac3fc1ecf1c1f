"""A hostile user of the Run page's form (views/run_form): paths with `~user` of no user, NUL or names too
long, hosts named twice, numbers far beyond their range, unknown choices. Each is one UsageError whose line
says the real reason, never another exception; odd but usable values give `stash profile` arguments."""

from __future__ import annotations

import pytest

from stash_core.errors import UsageError
from stash_core.views import run_form

SCRIPT = {"model": "", "batch_size": 8, "use_script": True}
HOSTS = {"model": "resnet10", "batch_size": 8, "where": "hosts", "nodes": 2}
ZOO = {"model": "resnet10", "batch_size": 8}

# (id, the form's fields, what the UsageError says)
REFUSED = [
    ("model-file-of-no-users-home", {**ZOO, "model": "~nosuchuser-stash/m.py:make"}, "nosuchuser-stash"),
    ("model-file-with-nul", {**ZOO, "model": "m\x00.py:make"}, "control character"),
    ("model-file-name-too-long", {**ZOO, "model": "x" * 5000 + ".py:make"}, "too long"),
    ("model-escape", {**ZOO, "model": "resnet\x1b[2J"}, "Model"),
    ("model-factory-with-dash", {**ZOO, "model": "{script}:make-it"}, "function name"),
    # each started a job that failed a moment later (unknown model; model file not found: "<b>x</b> [l](http")
    ("model-unknown", {**ZOO, "model": "resnet5O"}, "unknown model 'resnet5O' (did you mean resnet50"),
    ("model-markup-with-a-colon", {**ZOO, "model": "<b>x</b> [l](http://x) $m$"},
     "is no zoo name, FILE.py:FACTORY or package.module:FACTORY"),
    ("dataset-of-no-users-home", {**ZOO, "data_source": "dataset", "dataset": "~nosuchuser-stash/d"},
     "nosuchuser-stash"),
    ("dataset-with-nul", {**ZOO, "data_source": "dataset", "dataset": "d\x00"}, "control character"),
    ("data-source-unknown", {**ZOO, "data_source": "s3"}, "data source"),
    ("script-of-no-users-home", {**SCRIPT, "script": "~nosuchuser-stash/train.py"}, "nosuchuser-stash"),
    ("script-with-nul", {**SCRIPT, "script": "t\x00.py"}, "control character"),
    ("script-args-unbalanced-quote", {**SCRIPT, "script": "{script}", "script_args": "--name 'open"}, "quot"),
    ("data-dir-of-no-users-home", {**SCRIPT, "script": "{script}", "data_dir": "~nosuchuser-stash/d"},
     "nosuchuser-stash"),
    ("hosts-shell", {**HOSTS, "hosts": "a;id,b"}, "not a host name"),
    ("hosts-one-machine-twice", {**HOSTS, "hosts": "a,a"}, "twice"),
    ("ssh-key-of-no-users-home", {**HOSTS, "hosts": "a,b", "ssh_key": "~nosuchuser-stash/k"}, "nosuchuser"),
    ("ssh-user-option", {**HOSTS, "hosts": "a,b", "ssh_user": "-oProxyCommand=x"}, "SSH user"),
    ("where-unknown", {**ZOO, "where": "moon"}, "moon"),
    ("batch-zero", {**ZOO, "batch_size": 0}, "Batch size"),
    ("batch-nan", {**ZOO, "batch_size": float("nan")}, "Batch size"),
    ("batch-true", {**ZOO, "batch_size": True}, "Batch size"),
    ("workers-a-billion", {**ZOO, "workers": 10**9}, "at most"),
    ("synthetic-a-trillion", {**ZOO, "synthetic_images": 10**12}, "at most"),
    ("batch-a-billion", {**ZOO, "batch_size": 10**9}, "at most"),
    ("time-limit-inf", {**ZOO, "max_phase_s": float("inf")}, "Time limit"),
    ("iterations-text", {**ZOO, "iterations": "lots"}, "Iterations"),
    ("stalls-unknown", {**ZOO, "stalls": ["gpu"]}, "unknown gpu"),
    ("stalls-none", {**ZOO, "stalls": []}, "at least one"),
    ("shape-with-x", {**ZOO, "input_shape": "3x32x32"}, "Input shape"),
    ("instance-300", {**ZOO, "instance": "i" * 300}, "300 characters"),
    ("instance-escape", {**ZOO, "instance": "a\x1b"}, "Instance label"),
    ("device-tpu", {**ZOO, "device": "tpu"}, "--device"),
    ("classes-zero", {**ZOO, "num_classes": 0}, "Classes"),
    ("hosts-5000-characters", {**HOSTS, "nodes": 1, "hosts": "a" * 5000}, "(5000 characters)"),
    ("hosts-6000-bad-characters", {**HOSTS, "nodes": 1, "hosts": "x!" * 3000}, "(6000 characters)"),
    ("ssh-user-5000-characters", {**HOSTS, "hosts": "a,b", "ssh_user": "u" * 5000}, "(5000 characters)"),
    ("hosts-port-not-a-number", {**HOSTS, "nodes": 1, "hosts": "h:abc"}, "'h:abc'"),
]  # fmt: skip

ACCEPTED = [
    ("zoo-model", ZOO),
    ("own-script-with-arguments", {**SCRIPT, "script": "{script}", "script_args": "--epochs 1 --name 'a b'"}),
    ("model-file-relative", {**ZOO, "model": "train.py:make"}),
    ("two-hosts-with-ports", {**HOSTS, "hosts": "u@a:2222,u@a:2223"}),
]


@pytest.fixture()
def base(tmp_path):
    (tmp_path / "train.py").write_text("def make():\n    pass\n")
    return tmp_path


def _form(fields: dict, base) -> run_form.RunForm:
    return run_form.RunForm(**{k: v.format(script=base / "train.py") if isinstance(v, str) else v
                               for k, v in fields.items()})  # fmt: skip


def test_the_cases_are_named_once():
    ids = [case[0] for case in REFUSED + ACCEPTED]
    assert len(ids) == len(set(ids)) >= 36


@pytest.mark.parametrize(("case_id", "fields", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_hostile_form_is_one_clear_usage_error(case_id, fields, says, base):
    with pytest.raises(UsageError) as raised:
        run_form.profile_args(_form(fields, base), base)
    message = str(raised.value)
    assert says in message and len(message.splitlines()) == 1 and "\x1b" not in message, message
    assert len(message) < 300, message  # an entry pasted whole is echoed by its ends and its length


@pytest.mark.parametrize(("case_id", "fields"), ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_an_odd_but_usable_form_gives_profile_arguments(case_id, fields, base):
    args = run_form.profile_args(_form(fields, base), base)
    assert args and all(isinstance(arg, str) for arg in args)
