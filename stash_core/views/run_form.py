"""Run: the form that starts a profile, turned into `stash profile` arguments.

The form's values become a ProfileSpec, checked by stash_core.spec_checks like a command line; this module
only words the spec's errors for the form's fields and makes relative paths absolute.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from stash_core.engine.paired import PAIRED_OFF_HINT
from stash_core.engine.plan import check_measurable
from stash_core.errors import UsageError
from stash_core.launch.ssh import parse_target
from stash_core.pathargs import expand_home
from stash_core.spec import ProfileSpec, default_of, option_rule, script_model_name, script_sha256
from stash_core.spec_checks import check_fields, check_label
from stash_core.spec_parse import FieldError, parse_input_shape, parse_iterations, parse_stalls
from stash_core.terminal import clipped
from stash_core.units import finite_float
from stash_core.zoo_names import ZOO_NAMES, close_zoo_names, refuse_other_input

# How the form words a wrong spec value: by field, or "field/rule" where a field has several checks. Fields
# that the form cannot get wrong keep the command's own message.
FIELD_MESSAGES = {
    "model": "Model: choose a zoo model or give FILE.py:FACTORY",
    "batch_size": "Batch size (per worker) must be a whole number of at least 1",
    "workers_per_node": "Workers per machine must be a whole number of at least 1",
    "nodes": "Machines (nodes) must be a whole number of at least 1",
    "nodes/machines": "Machines (nodes) > 1 needs remote hosts or the emulated cluster",
    "nodes/cluster": "The emulated cluster needs Machines (nodes) 2 or more (one alone is this machine)",
    "stalls/empty": "Stalls: pick at least one stall to measure",
    "stalls/unknown": "Stalls: unknown {value}",
    "synthetic_images": "Number of images must be a whole number of at least 1",
    "image_px": "Image side (px) must be a whole number from 8 to 8192",
    "loader_workers": "Loader processes per worker must be a whole number of at least 0",
    "dataset/missing": "Data set: no folder {value}",
    "num_classes": "Classes must be a whole number of at least 1",
    "iterations": "Iterations per phase: 'auto' or a whole number of at least 2",
    "max_phase_s": "Time limit per phase must be positive",
    "instance/characters": "Instance label: letters, digits and . _ - @ + only, not starting with -",
    "hosts": "Remote hosts: {quoted} is not a host name (user@host[:port])",
    "hosts/count": "Remote hosts: {value} host(s) for {nodes} node(s); give one host per node",
    "ssh_user": "SSH user: {quoted} is not a user name",
    "ssh_key": "SSH key: no file {value}",
    "script/missing": "Script: no file {value}",
    "data_dir/missing": "Folder of the data it reads: no folder {value}",
}


# The form's names of the fields a limit refuses (the command names its flag: --batch-size)
FIELD_LABELS = {
    "batch_size": "Batch size (per worker)", "workers_per_node": "Workers per machine",
    "nodes": "Machines (nodes)", "synthetic_images": "Number of images", "num_classes": "Classes",
    "iterations": "Iterations per phase",
    "max_phase_s": "Time limit per phase (s)", "target_relative_ci": "Target interval (± %)",
    "image_px": "Image side (px)", "loader_workers": "Loader processes per worker",
}  # fmt: skip
# A finished or failed profile's words on the Run page: `stash profile`'s options as the form's fields, the
# longest first (views.common.in_page_words); those it has no field for are named by RUN_PAGE_LACKS.
RUN_PAGE_WORDS = {
    "--max-phase-seconds": "Time limit per phase", "--iterations N": "Iterations per phase",
    "--target-ci": "Target interval", "--data-dir": "Folder of the data it reads",
    "--iterations": "Iterations per phase", "--workers": "Workers per machine", "--nodes": "Machines (nodes)",
    "--batch-size": "Batch size (per worker)", "--synthetic-images": "Number of images",
    "--input-shape": "Input shape", "--dataset": "Data set folder", "--image-px": "Image side (px)",
    "--loader-workers": "Loader processes per worker",
    PAIRED_OFF_HINT: "",  # the command's way out, which this page has no field for
}  # fmt: skip
RUN_PAGE_LACKS = ("--launches", "--max-iterations", "--threads-per-worker")


def options_not_on_the_page(lines: list[str]) -> str | None:
    """Said under messages that name options the Run page has no field for: how to set them."""
    named = [flag for flag in RUN_PAGE_LACKS if any(flag in line for line in lines)]
    if not named:
        return None
    return (f"{', '.join(named)}: options of `stash profile` that this page leaves at their defaults; run "
            "the command to set them")  # fmt: skip


# The command's own reason, under the field's name, for the checks the form does not word itself (a label
# that is taken, a shape too large): the flag the message starts with, and the field it is.
FLAG_FIELDS = {"--instance": "Instance label", "--input-shape": "Input shape", "--script": "Script"}


# The form's first values where the spec has no default: a profile names its batch size, and generates a
# synthetic data set only when asked (the form's data source "synthetic" asks for this many images).
FIRST_BATCH_SIZE = 32
FIRST_SYNTHETIC_IMAGES = 512


@dataclass
class RunForm:
    """What the Run page's form asks for; `profile_args` turns it into `stash profile` arguments. Its
    defaults are the spec's (stash_core/spec.py), as are the bounds of its numbers (number_range)."""

    model: str
    batch_size: int
    workers: int = default_of("workers_per_node")
    nodes: int = default_of("nodes")
    stalls: list[str] = field(default_factory=lambda: default_stalls(1, 1))  # the defaults' 1 worker, 1 node
    data_source: str = "synthetic"  # synthetic (generated JPEG files) | dataset (a folder) | none
    synthetic_images: int = FIRST_SYNTHETIC_IMAGES
    image_px: int = default_of("image_px")  # the side of the generated images
    dataset: str = ""
    loader_workers: int = default_of("loader_workers")  # DataLoader processes per worker, for real data
    input_shape: str = ""
    num_classes: int | None = None
    find_unused_parameters: bool = False  # DDP's, for a model that uses some parameters on some steps only
    iterations: str = default_of("iterations")
    max_phase_s: float = default_of("max_phase_s")
    target_ci_pct: float = default_of("target_relative_ci") * 100  # the 95% interval's half-width sought, %
    instance: str = ""
    where: str = "local"  # local | hosts | cluster
    hosts: str = ""
    ssh_user: str = ""
    ssh_key: str = ""
    device: str = default_of("device")
    # Your own training script instead of a model (then model, batch size and data source are not used).
    use_script: bool = False
    script: str = ""
    script_args: str = ""  # as typed after `--` in a shell
    data_dir: str = ""


def default_stalls(workers: int, nodes: int, real_data: bool = True) -> list[str]:
    """The stalls the form first offers for this many workers and nodes and this data: those the setup has
    a run for (interconnect needs 2 workers, network 2 nodes, CPU and disk real data; engine/plan.py's
    STALL_NEEDS)."""
    return ["compute"] + (["interconnect"] if workers > 1 else []) + (["network"] if nodes > 1 else []) + (
        ["cpu", "disk"] if real_data else [])  # fmt: skip


def carried_stalls(
    chosen: list[str], before: tuple[int, int, bool], after: tuple[int, int, bool]
) -> list[str]:
    """The stalls offered when the setup (workers, nodes, real data) changes from `before` to `after`: the
    choice made, less those `after` cannot measure, plus those it measures and `before` could not."""
    could, can = default_stalls(*before), default_stalls(*after)
    return [stall for stall in can if stall in chosen or stall not in could]


# A stall the setup cannot measure, in the form's words (engine/plan.py's STALL_NEEDS names the flags).
MEASURABLE_WORDS = {
    "--stalls ": "Stalls: ",
    "--workers 2 or more": "2 or more workers per machine",
    "--nodes 2 or more": "2 or more machines",
    "real data (--dataset DIR or --synthetic-images N)": "real data (synthetic images or a data set)",
}


def number_range(attr: str) -> tuple[int, int]:
    """The whole numbers that the spec's option for field `attr` allows, (lowest, highest): the range the
    Run page's number inputs offer (a time limit in whole seconds)."""
    rule = option_rule(attr)
    low = math.floor(rule.low) + 1 if rule.low_open else math.ceil(rule.low)
    high = math.ceil(rule.high) - 1 if rule.high_open else math.floor(rule.high)
    return int(low), int(high)


def profile_args(
    form: RunForm, base_dir: Path | None = None, supported_flags: set[str] | None = None
) -> list[str]:
    """`stash profile` arguments for a form; UsageError naming the first field that is wrong.

    Relative model files, data set folders and key files are made absolute against `base_dir` (the
    dashboard's working folder), because the run starts in the database's folder. `supported_flags`, when
    given, are the options of the command that will run (None: this package's, which has them all).
    """
    base = Path(base_dir or Path.cwd())
    try:
        spec = form_spec(form, base)
        check_fields(spec)
        check_label(spec.instance)
    except FieldError as error:
        raise UsageError(form_message(error, form)) from None
    for host in spec.hosts:  # as the launcher will read it: a port in range, a host name ssh takes
        try:
            parse_target(host)
        except UsageError as error:
            shown = clipped(host, quoted=True)  # said once: the launcher's message may name the host already
            said = str(error) if shown in str(error) else f"{shown}: {error}"
            raise UsageError(f"Remote hosts: {said}") from None
    try:  # a zoo model's input of the other kind: refused here, as Recommend does, not by a job that fails
        refuse_other_input(spec.model, spec.input_shape)
    except UsageError as error:
        raise UsageError(f"Input shape: {error}") from None
    target = default_of("target_relative_ci")  # with a fixed count: refused here, as the command refuses it
    if spec.iterations != "auto" and spec.target_relative_ci != target:
        fixed = f"with {spec.iterations} every run times that many"
        raise UsageError(f"Target interval: it steers Iterations per phase 'auto'; {fixed}: set "
                         f"Iterations to auto, or the target back to {target:.0%}")  # fmt: skip
    try:
        check_measurable(spec)
    except UsageError as error:
        text = str(error)
        for option, words in MEASURABLE_WORDS.items():
            text = text.replace(option, words)
        raise UsageError(text) from None
    if spec.device == "cuda" and not spec.hosts and not spec.cluster:
        _refuse_no_gpu_here()
    if spec.hosts:
        _require_flag("--hosts", supported_flags, "remote hosts")
    if spec.cluster:
        _require_flag("--cluster", supported_flags, "the emulated cluster")
    return spec.to_argv()


def _refuse_no_gpu_here() -> None:
    """Device cuda on this machine without a GPU: refused in the form, as `stash profile` refuses it,
    rather than started as a job that fails at once. NVML says so without loading torch in the server."""
    from stash_core.measure.nvml import gpu_status

    has_gpu, status = gpu_status()
    if not has_gpu:
        raise UsageError(f"Device: cuda, but no NVIDIA GPU is visible on this machine ({status}); choose cpu")


def form_spec(form: RunForm, base: Path) -> ProfileSpec:
    """The ProfileSpec of a form (FieldError from parsing its texts; check_fields checks the rest)."""
    if form.where not in ("local", "hosts", "cluster"):
        raise UsageError(f"unknown place to run {form.where!r}")
    remote = form.where == "hosts"
    hosts = [host for host in re.split(r"[,\s]+", form.hosts) if host] if remote else []
    if remote and not hosts:
        raise UsageError("Remote hosts: give at least one host (user@host or host), separated by commas")
    if form.use_script or form.script.strip():
        return _script_spec(form, base, hosts)
    return ProfileSpec(
        model=_model(form.model, base),
        batch_size=form.batch_size,
        workers_per_node=form.workers,
        nodes=form.nodes,
        stalls=parse_stalls(",".join(form.stalls)),
        **_data(form, base),
        input_shape=_input_shape(form.input_shape),
        num_classes=form.num_classes,
        find_unused_parameters=form.find_unused_parameters,
        iterations=parse_iterations(str(form.iterations).strip()),
        max_phase_s=float(form.max_phase_s or 0),
        target_relative_ci=_target(form.target_ci_pct),
        instance=form.instance.strip() or None,
        device=form.device,
        hosts=hosts,
        ssh_user=(form.ssh_user.strip() or None) if remote else None,
        ssh_key=_absolute(form.ssh_key, base) if remote else None,
        cluster="emulated" if form.where == "cluster" else None,
    )


def _target(percent: float | None) -> float:
    """The form's target in percent as the spec's fraction; UsageError outside (0, 100)."""
    value = finite_float(percent)
    if value is None or not 0 < value < 100:
        raise UsageError(f"Target interval (± %): a percentage above 0 and below 100, got {percent!r}")
    return value / 100


def _script_spec(form: RunForm, base: Path, hosts: list[str]) -> ProfileSpec:
    """The spec of a form that names a training script: the model's fields give way to the script's."""
    script = _absolute(form.script, base)
    if script is None:
        raise UsageError("Script: give the path of your training script, or upload it")
    try:
        args = shlex.split(form.script_args, comments=True)  # as a shell reads the line
    except ValueError as error:
        raise UsageError(f"Script arguments: {error} (quote them as in a shell)") from None
    model_form = replace(
        form,
        use_script=False,
        script="",
        model="resnet18",
        batch_size=1,
        data_source="none",
        stalls=["compute"],
    )
    spec = form_spec(model_form, base)
    return replace(
        spec,
        model=script_model_name(script),
        batch_size=None,
        stalls=parse_stalls(",".join(form.stalls)),
        script=script,
        script_args=args,
        script_sha256=script_sha256(script),
        data_dir=_absolute(form.data_dir, base),
        input_shape=None,
        num_classes=None,
    )


def form_message(error: FieldError, form: RunForm) -> str:
    """The form's wording of a spec error (the command's message for the checks the form does not word)."""
    template = FIELD_MESSAGES.get(f"{error.attr}/{error.rule}" if error.rule else error.attr)
    text = str(error)
    if "at most" in text and error.attr in FIELD_LABELS:  # too large: the command's limit, the field's name
        return f"{FIELD_LABELS[error.attr]}: {text.split(' ', 1)[1]}" if text.startswith("--") else text
    if template is None:
        flag = text.split(" ", 1)[0].rstrip(":")
        return f"{FLAG_FIELDS[flag]}: {text.removeprefix(flag).lstrip(': ')}" if flag in FLAG_FIELDS else text
    value = error.value
    return template.format(value=clipped(value), quoted=clipped(value, quoted=True), nodes=form.nodes)


def _model(text: str, base: Path) -> str:
    """The model reference, with a relative FILE.py made absolute; UsageError when the file is not there."""
    model = (text or "").strip()
    if ":" in model and model.split(":", 1)[0].endswith(".py"):
        file_part, factory = model.split(":", 1)
        path = _local_path(file_part, "Model")
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise UsageError(f"Model: no file {path}")
        if not factory.isidentifier():
            raise UsageError(f"Model: {factory!r} is not a Python function name")
        model = f"{path}:{factory}"
    elif ":" in model:  # package.module:FACTORY
        module, _, factory = model.rpartition(":")
        if not all(part.isidentifier() for part in module.split(".")) or not factory.isidentifier():
            raise UsageError(f"Model: {clipped(model, quoted=True)} is no zoo name, FILE.py:FACTORY or "
                             "package.module:FACTORY")  # fmt: skip
    elif model and model.lower() not in ZOO_NAMES:  # refused here, not by the job a moment later
        said = f"{clipped(model, quoted=True)}{close_zoo_names(model)}"
        raise UsageError(f"Model: unknown model {said}; give a zoo model name or FILE.py:FACTORY")
    return model


def _data(form: RunForm, base: Path) -> dict:
    """The data set fields of the spec for the form's data source."""
    if form.data_source == "synthetic":
        return {"synthetic_images": form.synthetic_images, "image_px": form.image_px,
                "loader_workers": form.loader_workers}  # fmt: skip
    if form.data_source == "dataset":
        if not form.dataset.strip():
            raise UsageError("Data set: give the folder of the data set (one sub-folder per class)")
        return {"dataset": _absolute(form.dataset, base), "loader_workers": form.loader_workers}
    if form.data_source != "none":
        raise UsageError(f"unknown data source {form.data_source!r}")
    if any(stall in ("cpu", "disk") for stall in form.stalls):
        raise UsageError("CPU and disk stalls need real data: choose synthetic images or a data set")
    return {}


def _input_shape(text: str) -> list[int] | None:
    """C,H,W or SEQ, written with commas (the command also reads 3x64x64)."""
    if not text.strip():
        return None
    shape = parse_input_shape(text)
    if ",".join(map(str, shape)) != re.sub(r"\s", "", text):
        raise FieldError("--input-shape: give C,H,W or a sequence length", "input_shape", text)
    return shape


def _absolute(text: str, base: Path) -> str | None:
    if not text.strip():
        return None
    path = _local_path(text.strip(), "Path")
    return str(path if path.is_absolute() else base / path)


def _local_path(text: str, what: str) -> Path:
    """`text` as a path, `~` expanded; UsageError for control characters, a `~user` of no user or a name
    the file system cannot hold (each raised an exception of its own further on)."""
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise UsageError(f"{what}: {text!r} holds a control character; give the path without it")
    return expand_home(text)


def _require_flag(flag: str, supported: set[str] | None, what: str) -> None:
    if supported is not None and flag not in supported:
        raise UsageError(f"this version of stash cannot run on {what} yet (no {flag} option)")


def zoo_models() -> list[str]:
    """Names of the model zoo (imports torch, so callers should cache it)."""
    from stash_core.zoo import list_models

    return list(list_models())
