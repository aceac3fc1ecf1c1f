"""Run: the form that starts a profile, turned into `stash profile` arguments."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES

# ---------------------------------------------------------------------------------------------------------
# Run form


@dataclass
class RunForm:
    """What the Run page's form asks for; `profile_args` turns it into `stash profile` arguments."""

    model: str
    batch_size: int
    workers: int = 1
    nodes: int = 1
    stalls: list[str] = field(default_factory=lambda: ["compute", "interconnect", "cpu", "disk"])
    data_source: str = "synthetic"  # synthetic (generated JPEG files) | dataset (a folder) | none
    synthetic_images: int = 512
    dataset: str = ""
    input_shape: str = ""
    num_classes: int | None = None
    iterations: str = "auto"
    max_phase_s: float = 60.0
    instance: str = ""
    where: str = "local"  # local | hosts | cluster
    hosts: str = ""
    ssh_user: str = ""
    ssh_key: str = ""
    device: str = "auto"


def profile_args(
    form: RunForm, base_dir: Path | None = None, supported_flags: set[str] | None = None
) -> list[str]:
    """`stash profile` arguments for a form; UsageError naming the first field that is wrong.

    Relative model files and data set folders are made absolute against `base_dir` (the dashboard's working
    folder), because the run starts in the database's folder.
    """
    base = Path(base_dir or Path.cwd())
    model = (form.model or "").strip()
    if not model:
        raise UsageError("Model: choose a zoo model or give FILE.py:FACTORY")
    if ":" in model and model.split(":", 1)[0].endswith(".py"):
        file_part, factory = model.split(":", 1)
        path = Path(file_part).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise UsageError(f"Model: no file {path}")
        if not factory.isidentifier():
            raise UsageError(f"Model: {factory!r} is not a Python function name")
        model = f"{path}:{factory}"
    if not isinstance(form.batch_size, int) or form.batch_size < 1:
        raise UsageError("Batch size must be a whole number of at least 1")
    if not isinstance(form.workers, int) or form.workers < 1:
        raise UsageError("Workers must be a whole number of at least 1")
    if not isinstance(form.nodes, int) or form.nodes < 1:
        raise UsageError("Nodes must be a whole number of at least 1")
    if not form.stalls:
        raise UsageError("Stalls: pick at least one stall to measure")
    unknown = [s for s in form.stalls if s not in STALL_NAMES]
    if unknown:
        raise UsageError(f"Stalls: unknown {', '.join(unknown)}")
    args = ["--model", model, "--batch-size", str(form.batch_size), "--workers", str(form.workers),
            "--stalls", ",".join(form.stalls)]  # fmt: skip
    if form.nodes > 1:
        args += ["--nodes", str(form.nodes)]
    if form.data_source == "synthetic":
        if not isinstance(form.synthetic_images, int) or form.synthetic_images < 1:
            raise UsageError("Synthetic images must be a whole number of at least 1")
        args += ["--synthetic-images", str(form.synthetic_images)]
    elif form.data_source == "dataset":
        folder = Path(form.dataset.strip()).expanduser() if form.dataset.strip() else None
        if folder is None:
            raise UsageError("Data set: give the folder of the data set (one sub-folder per class)")
        folder = folder if folder.is_absolute() else base / folder
        if not folder.is_dir():
            raise UsageError(f"Data set: no folder {folder}")
        args += ["--dataset", str(folder)]
    elif form.data_source != "none":
        raise UsageError(f"unknown data source {form.data_source!r}")
    elif any(stall in ("cpu", "disk") for stall in form.stalls):
        raise UsageError("CPU and disk stalls need real data: choose synthetic images or a data set")
    shape = form.input_shape.strip()
    if shape:
        if not re.fullmatch(r"\d+(\s*,\s*\d+)*", shape) or any(int(v) < 1 for v in shape.split(",")):
            raise UsageError(
                "Input shape: give C,H,W for images (e.g. 3,64,64) or a sequence length (e.g. 128)"
            )
        args += ["--input-shape", ",".join(v.strip() for v in shape.split(","))]
    if form.num_classes is not None:
        if form.num_classes < 2:
            raise UsageError("Classes must be at least 2")
        args += ["--num-classes", str(form.num_classes)]
    iterations = str(form.iterations).strip()
    if iterations != "auto" and (not iterations.isdigit() or int(iterations) < 2):
        raise UsageError("Iterations: 'auto' or a whole number of at least 2")
    args += ["--iterations", iterations]
    if not form.max_phase_s or form.max_phase_s <= 0:
        raise UsageError("Time limit per phase must be positive")
    args += ["--max-phase-seconds", f"{float(form.max_phase_s):g}"]
    if form.instance.strip():
        if not re.fullmatch(r"[\w.:@+-]+", form.instance.strip()):
            raise UsageError("Instance label: letters, digits and . _ - : @ + only")
        args += ["--instance", form.instance.strip()]
    if form.device != "auto":
        args += ["--device", form.device]
    if form.where == "hosts":
        hosts = [h.strip() for h in re.split(r"[,\s]+", form.hosts) if h.strip()]
        if not hosts:
            raise UsageError("Remote hosts: give at least one host (user@host or host), separated by commas")
        bad = [h for h in hosts if not re.fullmatch(r"([\w.-]+@)?[\w.-]+(:\d+)?", h)]
        if bad:
            raise UsageError(f"Remote hosts: {bad[0]!r} is not a host name (user@host[:port])")
        _require_flag("--hosts", supported_flags, "remote hosts")
        args += ["--hosts", ",".join(hosts)]
        if form.ssh_user.strip():
            if not re.fullmatch(r"[A-Za-z_][\w.-]*", form.ssh_user.strip()):
                raise UsageError(f"SSH user: {form.ssh_user.strip()!r} is not a user name")
            args += ["--ssh-user", form.ssh_user.strip()]
        if form.ssh_key.strip():
            key = Path(form.ssh_key.strip()).expanduser()
            if not key.is_file():
                raise UsageError(f"SSH key: no file {key}")
            args += ["--ssh-key", str(key)]
    elif form.where == "cluster":
        _require_flag("--cluster", supported_flags, "the emulated cluster")
        args += ["--cluster", "emulated"]
    elif form.where != "local":
        raise UsageError(f"unknown place to run {form.where!r}")
    if form.nodes > 1 and form.where == "local":
        raise UsageError("Nodes > 1 needs remote hosts or the emulated cluster")
    return args


def _require_flag(flag: str, supported: set[str] | None, what: str) -> None:
    if supported is not None and flag not in supported:
        raise UsageError(f"this version of stash cannot run on {what} yet (no {flag} option)")


def zoo_models() -> list[str]:
    """Names of the model zoo (imports torch, so callers should cache it)."""
    from stash_core.zoo import list_models

    return list(list_models())


def profile_flags() -> set[str]:
    """The option strings `stash profile` accepts (to offer only what the installed command supports)."""
    from stash_core.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse keeps sub-parsers here; there is no public accessor
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and "profile" in choices:
            return {flag for sub in choices["profile"]._actions for flag in sub.option_strings}
    return set()
