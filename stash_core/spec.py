"""What to run: ProfileSpec, the one definition of a profile's options.

OPTIONS lists every `stash profile` option once (the parsers of its texts and the rules of its numbers are
spec_parse.py's). `spec_argparse.add_profile_arguments` gives them to a parser,
`ProfileSpec.from_args` reads a parsed command line, `ProfileSpec.to_argv` writes the arguments that
reproduce a spec; spec_checks.py checks a spec's values, raising FieldError: a UsageError of one line that
names the flag.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError
from stash_core.pathargs import database_path, input_text, output_path
from stash_core.spec_parse import (
    BATCH_SIZE,
    DAY_S,
    LOADER_WORKERS,
    MAX_ITERATIONS,
    PORT,
    SEED,
    TARGET_CI,
    WORKERS,
    FieldError,
    Number,
    count,
    given_text,
    parse_hosts,
    parse_input_shape,
    parse_iterations,
    parse_rate,
    parse_stalls,
    positive_real,
    refuse_dangling_link,
)
from stash_core.units import STALLS
from stash_core.userfiles import read_user_bytes
from stash_core.zoo_names import SCRIPT_PREFIX

MAX_SCRIPT_BYTES = 16 * 1024 * 1024  # a training script is kilobytes; a link to /dev/zero never ends
DEVICES = ("auto", "cpu", "cuda")
PAIRED_CHOICES = ("auto", "on", "off")
# A first look at host names (the launcher checks DNS names and addresses): [user@]host[:port], [v6]:port.

# A read cap below 0.1 MB/s makes a real-data run take hours (1e-9 was taken as one byte a second).
DISK_READ_MBPS = Number(0.1, 1e6, whole=False, what="from 0.1 to 1e6 (MB/s)")

# The rendezvous/process-group timeout across machines: under 5 s a slow start fails, over an hour a dead
# peer hangs the profile (seconds, both ends allowed).
COMM_TIMEOUT_S = (5, 3600)


@dataclass
class ProfileSpec:
    model: str
    batch_size: int | None  # None only for a script (measured from its first batch)
    workers_per_node: int = 1
    nodes: int = 1
    stalls: list[str] = field(default_factory=lambda: list(STALLS))
    dataset: str | None = None
    synthetic_images: int | None = None
    dataset_images: int | None = None
    loader_workers: int = 2
    iterations: str = "auto"
    device: str = "auto"
    backend: str | None = None
    instance: str | None = None
    threads_per_worker: int | None = None
    # CPU workers pinned each to its own cores (engine/phase.worker_cores), the same in every launch.
    pin_workers: bool = True
    # R0 and R1 timed in one launch, in alternating blocks (engine/paired.py): auto, on or off.
    paired: str = "auto"
    disk_read_mbps: float | None = None
    input_shape: list[int] | None = None
    num_classes: int | None = None
    # DDP's find_unused_parameters: a model whose loss leaves some parameters out on some steps needs it.
    find_unused_parameters: bool = False
    image_px: int = 256
    target_relative_ci: float = 0.02
    max_iterations: int = 2000
    max_phase_s: float = 120.0
    # Launches per run, interleaved in rounds (engine/plan.py); None: 3 with --iterations auto, 1 with N.
    launches: int | None = None
    hosts: list[str] = field(default_factory=list)
    seed: int = 0
    # Several machines: named hosts over ssh, or the emulated cluster ("emulated"). Only the key's path
    # is kept, never its contents.
    ssh_user: str | None = None
    ssh_key: str | None = None
    ssh_config: str | None = None  # an ssh_config file the hosts are reached with (ssh -F), its path only
    remote_python: str | None = None
    remote_workdir: str | None = None
    cluster: str | None = None
    cluster_bandwidth: str | None = None  # rate set on the emulated links for this profile, e.g. "200mbit"
    cluster_name: str | None = None  # which emulated cluster (stash cluster up --name); None: "default"
    master_addr: str | None = None
    master_port: int | None = None
    comm_timeout_s: int = 60  # rendezvous and process-group timeout across machines (seconds)
    probes: bool = True  # bandwidth/latency probe after R1 and R1n
    # The user's own training script instead of a model (model is then "script:NAME", batch_size measured).
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    script_sha256: str | None = None  # of the script's contents when the spec was made (not an option)
    data_dir: str | None = None  # the files the script reads, for the page-cache state of R3 and R2
    script_start_timeout_s: float = 120.0  # how long to wait for the script's first optimizer step

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProfileSpec:
        """The spec of a parsed `stash profile` command line: texts parsed, the data set's path resolved."""
        values: dict[str, Any] = {}
        _script_model(args)
        for option in OPTIONS:
            value = getattr(args, option.dest, None)
            if option.attr is None or value is None or value is False:  # False: a switch not given
                continue
            if option.switch:
                value = not default_of(option.attr)
            values[option.attr] = option.parse(value) if option.parse else value
        if values.get("script"):
            # A flag typed at its default value is refused too (the check of the fields sees only values).
            typed = {option.attr for option in OPTIONS if option.dest in getattr(args, "typed", ())}
            check_script_makes(values, given=lambda attr, value: attr in typed)
            values["script_sha256"] = script_sha256(values["script"])
            values.setdefault("batch_size", None)  # the script's own, measured from its first batch
        return cls(**values)

    def to_argv(self) -> list[str]:
        """The `stash profile` arguments that reproduce this spec; options at their default are left out."""
        argv: list[str] = []
        for option, value in self.options_given().items():
            argv += [option.flag] if option.switch else _flag_and_value(option.flag, _text(value))
        return argv + (["--", *self.script_args] if self.script_args else [])

    def options_given(self) -> dict[Option, Any]:
        """The options (not `--`) whose fields are away from their defaults, with the fields' values, in the
        order of OPTIONS; a script's model (derived from the script) is left out."""
        values: dict[Option, Any] = {}
        for option in OPTIONS:
            if option.attr is None or option.flag == "--":
                continue
            value = getattr(self, option.attr)
            if self.script and option.attr == "model" and value == script_model_name(self.script):
                continue  # derived from the script
            if value is not None and value != default_of(option.attr):
                values[option] = value
        return values

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def workers_total(self) -> int:
        return self.workers_per_node * self.nodes

    @property
    def fixed_iterations(self) -> int | None:
        return None if self.iterations == "auto" else int(self.iterations)

    @property
    def remote(self) -> bool:
        """Runs go to other machines over ssh (named hosts or the emulated cluster)."""
        return bool(self.hosts) or self.cluster is not None

    @property
    def real_data(self) -> bool:
        # A script always reads its own data: with --data-dir as CPU and disk, without as one input pipeline.
        return self.dataset is not None or self.synthetic_images is not None or self.script is not None


def script_model_name(script: str) -> str:
    """How a script is named where a model's name goes (runs.model): "script:train.py"."""
    return f"{SCRIPT_PREFIX}{Path(script).name}"


def script_sha256(script: str) -> str | None:
    """The sha256 of the script's contents (None when it cannot be read; check_fields says why)."""
    try:
        return hashlib.sha256(read_user_bytes(script, "script", MAX_SCRIPT_BYTES)).hexdigest()
    except UsageError:
        return None


def _script_model(args: argparse.Namespace) -> None:
    """--script in place of --model (which it excludes); without it, --model and --batch-size are needed."""
    script = getattr(args, "script", None)
    if script and getattr(args, "model", None):
        raise FieldError("--script excludes --model: give one or the other", "script", script)
    if script:
        refuse_dangling_link(script)
        args.script = _resolved(script, "--script")
        args.model = script_model_name(script)
        return
    if getattr(args, "script_args", None):
        raise FieldError("arguments after -- are the script's: they need --script", "script_args")
    if getattr(args, "data_dir", None):  # before --batch-size: a script would not need that either
        raise FieldError("--data-dir applies to --script only", "data_dir", args.data_dir)
    for flag, dest in (("--model", "model"), ("--batch-size", "batch_size")):
        if hasattr(args, dest) and getattr(args, dest) is None:
            raise FieldError(f"{flag} is required (or --script)", dest)


# What a script makes itself (its data, its model's input and classes, its DataLoader): an option for it
# would be taken and never used.
SCRIPT_MAKES = (("dataset", "--dataset"), ("synthetic_images", "--synthetic-images"),
                ("input_shape", "--input-shape"), ("num_classes", "--num-classes"),
                ("find_unused_parameters", "--find-unused-parameters"),
                ("image_px", "--image-px"), ("loader_workers", "--loader-workers"),
                ("pin_workers", "--no-pin"))  # fmt: skip
SCRIPT_MAKES_WORDS = "the script makes its own model, data and loader"


def check_script_makes(values: dict, given: Callable[[str, Any], bool]) -> None:
    """Refuse an option for what the script makes itself; `given`: whether a value was given (on the command
    line, any value there; in a spec made otherwise, one other than the default)."""
    for attr, flag in SCRIPT_MAKES:
        value = values.get(attr)
        if attr not in values or value is None or not given(attr, value):
            continue
        if attr in ("dataset", "synthetic_images"):
            raise FieldError(f"--script reads its own data: give --data-dir, not {flag}", attr, value)
        # pinned, a script's workers would share their cores with its own DataLoader processes
        why = "its workers are never pinned to cores" if attr == "pin_workers" else SCRIPT_MAKES_WORDS
        raise FieldError(f"{flag} does not go with --script: {why}", attr, value)


def default_of(attr: str) -> Any:
    """The default value of a ProfileSpec field (MISSING for model and batch_size)."""
    spec_field = _FIELDS[attr]
    if spec_field.default_factory is not MISSING:
        return spec_field.default_factory()
    return spec_field.default


_FIELDS = {spec_field.name: spec_field for spec_field in fields(ProfileSpec)}


def option_rule(attr: str) -> Number:
    """The rule (whole or real, and its range) of the numeric option that sets field `attr`: with default_of,
    the one table of the options' bounds and defaults, which the dashboard's Run page reads too."""
    for option in OPTIONS:
        if option.attr == attr and isinstance(option.type, Number):
            return option.type
    raise KeyError(f"no numeric option sets {attr!r}")


def _resolved(text: str, flag: str = "--dataset") -> str | None:
    """The absolute path of a path option's text; a path that cannot be resolved (a symlink loop, a name
    too long) is a FieldError naming the flag."""
    if not text:
        return None
    try:
        return str(Path(text).resolve())
    except (RuntimeError, OSError) as error:  # pathlib raises RuntimeError for a symlink loop
        why = "a symlink loop" if isinstance(error, RuntimeError) else (error.strerror or str(error))
        message = f"{flag} {text}: cannot be resolved ({why})"
        raise FieldError(message, flag[2:].replace("-", "_"), text) from None


def _resolved_data_dir(text: str) -> str | None:
    return _resolved(text, "--data-dir")


def _expanded(text: str) -> str | None:
    return str(Path(text).expanduser()) if text else None


def _flag_and_value(flag: str, text: str) -> list[str]:
    """`--flag value`; `--flag=-value` where the value starts with "-", so that it is never read as a flag."""
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


def _text(value: Any) -> str:
    """A spec value as command-line text that parses back to the same value."""
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


# ---------------------------------------------------------------------------------------------------------
# The options of `stash profile`

# Groups: DATA is one or the other; MACHINES and PROFILE_MACHINES (not for `stash probe`): several machines.
DATA, MACHINES, PROFILE_MACHINES = "data", "machines", "profile-machines"


@dataclass(frozen=True)
class Option:
    """One `stash profile` option: the ProfileSpec field it sets (`attr`; None: how to run, not what)."""

    flag: str
    attr: str | None
    help: str | None = None
    type: Callable[[str], Any] | None = None  # argparse's conversion of the text
    parse: Callable[[str], Any] | None = None  # the text -> the field's value, in from_args
    choices: tuple[str, ...] | None = None
    default: Any = None  # for options that are not fields (a field's default is the spec's)
    group: str = ""
    switch: bool = False  # no value: sets the field away from its default

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_") if self.flag != "--" else "script_args"


OPTIONS: tuple[Option, ...] = (
    Option("--model", "model", "zoo name, FILE.py:FACTORY or package.module:FACTORY"),
    Option("--batch-size", "batch_size", "samples per worker per iteration", BATCH_SIZE),
    Option("--workers", "workers_per_node", "worker processes (GPUs) per machine", WORKERS),
    Option("--nodes", "nodes", "machines (with --hosts or --cluster)", WORKERS),
    Option("--stalls", "stalls", "comma list of compute,interconnect,network,cpu,disk (default: all)",
           parse=parse_stalls),
    Option("--dataset", "dataset", "ImageFolder-style directory: one folder per class", input_text,
           parse=_resolved, group=DATA),
    Option("--synthetic-images", "synthetic_images", "generate N files once: JPEG images for an image model, "
           "text documents for a token model", count(10**8), group=DATA),
    Option("--dataset-images", "dataset_images", "samples in an epoch, for runs without --dataset or "
           "--synthetic-images (whose epoch is their files)", count(10**12)),
    Option("--image-px", "image_px", "side of generated images (pixels)",
           Number(8, 8192, what="an integer from 8 to 8192")),
    Option("--loader-workers", "loader_workers", "DataLoader processes per worker", LOADER_WORKERS),
    Option("--iterations", "iterations", "'auto' (until ± target) or a number per run (default: auto)",
           parse=parse_iterations),
    Option("--target-ci", "target_relative_ci", "relative 95%% CI to reach with auto", TARGET_CI),
    Option("--max-iterations", "max_iterations", "cap per run (of --iterations N too)",
           Number(2, MAX_ITERATIONS, what="at least 2")),
    Option("--max-phase-seconds", "max_phase_s", "time per run, in seconds: its first --launches launches "
           "share it, and further rounds start only while the runs' launches so far (start-up included) "
           "leave room for one more; a launch looks at its clock after its first 10 iterations, so slow "
           "iterations can pass it", positive_real(7 * DAY_S)),
    Option("--launches", "launches", "rounds of launches that always run, every run once per round, "
           "interleaved, for intervals that hold from one launch to the next; with auto and 2 or more, more "
           "rounds follow while a run is short of --target-ci (default: 3 with auto, 1 with --iterations N)",
           Number(1, 100, what="an integer from 1 to 100")),
    Option("--device", "device", "where the workers run", choices=DEVICES),
    Option("--threads-per-worker", "threads_per_worker", "torch threads per CPU worker (default: the "
           "machine's CPU cores / workers per machine, at least 1)", count(1024)),
    Option("--no-pin", "pin_workers", "leave CPU workers free to move between cores (default: each pinned "
           "to its own)", switch=True),
    Option("--paired", "paired", "time R0 and R1 in one launch, in alternating blocks, so that both see the "
           "same machine (auto: CPU runs of Stash's own loop on this machine)", choices=PAIRED_CHOICES),
    Option("--instance", "instance", "label of the machine or cloud instance type"),
    Option("--input-shape", "input_shape", "C,H,W for images or a sequence length for tokens",
           parse=parse_input_shape),
    Option("--num-classes", "num_classes", "classes of the model's output (default: the class folders of "
           "--dataset, else the model's own)", count(10**7)),
    Option("--find-unused-parameters", "find_unused_parameters", "let DDP find, every step, the parameters "
           "the step's loss did not use (a model that uses some only on some steps needs it, as its own "
           "training does; it costs a pass over the autograd graph each step)", switch=True),
    Option("--disk-read-mbps", "disk_read_mbps", "cap read throughput (block-I/O cgroup), MB/s, 0.1 to 1e6",
           DISK_READ_MBPS),
    Option("--seed", "seed", "seed of the synthetic data and the model", SEED),
    # The user's own training script (see docs/scripts.md).
    Option("--script", "script", "your training script, run unmodified under torchrun (instead of --model)",
           input_text),
    Option("--data-dir", "data_dir", "the files your script reads (for the cached and cold runs)",
           input_text, parse=_resolved_data_dir),
    Option("--script-start-timeout", "script_start_timeout_s", "wait at most this long for the script's "
           "first optimizer step (s)", positive_real(DAY_S)),
    Option("--", "script_args", "after --: your script's own arguments"),
    # How to run and where the results go: not part of the spec.
    Option("--out", None, "result file (default: results/RUN_ID.json beside the database)", output_path),
    Option("--no-store", None, "write the result file only, not the database", switch=True),
    Option("--progress", None, "how to show progress: auto (a bar on a terminal, a line per run elsewhere), "
           "bar (a bar always), json (protocol lines), none", choices=("auto", "bar", "json", "none"),
           default="auto"),
    Option("--db", None, "DuckDB file (default: $STASH_DB or ./results.duckdb)", database_path),
    # Several machines (--cluster-state is where this machine keeps the emulated cluster's state).
    Option("--hosts", "hosts", "comma list of [user@]host[:port], one per node", given_text,
           parse=parse_hosts, group=MACHINES),
    Option("--ssh-user", "ssh_user", "user on the hosts", given_text, group=MACHINES),
    Option("--ssh-key", "ssh_key", "private key file (only its path is kept)", input_text, parse=_expanded,
           group=MACHINES),
    Option("--ssh-config", "ssh_config", "ssh_config file the hosts are reached with (ssh -F; only its path "
           "is kept)", input_text, parse=_expanded, group=MACHINES),
    Option("--python", "remote_python", "python on the hosts (default python3)", given_text, group=MACHINES),
    Option("--workdir", "remote_workdir", "directory on the hosts to run from", given_text, group=MACHINES),
    Option("--cluster", "cluster", "use the emulated cluster", choices=("emulated",), group=MACHINES),
    Option("--cluster-state", None, "emulated cluster state dir", input_text, group=MACHINES),
    Option("--cluster-name", "cluster_name", "which emulated cluster (stash cluster up --name)", given_text,
           group=MACHINES),
    Option("--cluster-bandwidth", "cluster_bandwidth",
           "set the emulated links to this rate (or unlimited) for the profile",
           parse=parse_rate, group=PROFILE_MACHINES),
    Option("--master-addr", "master_addr", "rendezvous address of the first host", given_text,
           group=MACHINES),
    Option("--master-port", "master_port", "rendezvous port (default: a free one)", PORT, group=MACHINES),
    Option("--comm-timeout", "comm_timeout_s", "rendezvous/process-group timeout across machines (s)",
           Number(*COMM_TIMEOUT_S, what=f"{COMM_TIMEOUT_S[0]}..{COMM_TIMEOUT_S[1]} seconds"), group=MACHINES),
    Option("--no-probes", "probes", "skip the bandwidth probe of R1/R1n", switch=True,
           group=PROFILE_MACHINES),
)  # fmt: skip
