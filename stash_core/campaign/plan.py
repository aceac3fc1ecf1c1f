"""A campaign's plan: the configurations of a sweep of profiles, which of them are stored already, and the
`stash profile` arguments of each (run here or over SSH by local.py, on rented machines by cloud.py).

A campaign is the product models x batch sizes x workers per node x nodes (x link bandwidths, for multi-node
configurations on the emulated cluster), or a user's training script (with its arguments) x workers per node
x nodes. Re-running the same campaign skips the configurations stored as completed (same model, a model
file by its contents, batch size, workers per node, nodes and instance label; for a script the same contents
and arguments instead of the batch, which the script chooses) where the stored run measured what the campaign
asks (covers: device, input shape, classes, stalls): a campaign resumes after Ctrl-C, a reboot or a failure.

Emulated bandwidths are recorded in the instance label ("<instance>@<bandwidth>", e.g. "local@1gbit"), which
is how resume tells them apart and how the stall fits read the bandwidth back.
"""

from __future__ import annotations

import re
import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stash_core.campaign.result_names import result_file
from stash_core.campaign.shapes import model_defaults, shape_for
from stash_core.campaign.stored import completed_keys
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec, script_model_name, script_sha256
from stash_core.spec_parse import one_per_rate, parse_iterations, parse_stalls
from stash_core.zoo_names import (
    ZOO_NAMES,
    canonical_model,
    close_zoo_names,
    model_file_sha256,
    model_identity,
    refuse_other_input,
)

# The store (pandas, duckdb) and the profile child are imported where they are used: a plan and its check of
# the model names need neither, nor torch (zoo_names.py).

FAMILIES = {"resnet": "resnet{depth}", "vgg": "vgg{depth}"}
DEFAULT_DEPTHS = {"resnet": (10, 12, 16, 18, 34, 50, 101, 152), "vgg": (11, 13, 16, 19)}


@dataclass(frozen=True)
class CampaignItem:
    """One configuration of the sweep, i.e. one `stash profile` run: of a model at a batch size, or of a
    training script (its path as the profile is given it; model is then its stored name, batch None)."""

    model: str
    batch_size: int | None
    workers_per_node: int
    nodes: int
    instance: str  # the label stored with the run; carries "@bandwidth" for emulated links
    bandwidth: str | None = None  # tc-style rate for the emulated cluster, e.g. "1gbit"
    script: str | None = None
    script_args: tuple[str, ...] = ()
    script_sha256: str | None = None  # of its contents when planned: a changed script is a new configuration

    @property
    def key(self) -> tuple:
        """What a stored run must match to count as this configuration (a model as it is stored)."""
        return (canonical_model(self.model), *self._sizes)

    @property
    def keys(self) -> tuple[tuple, ...]:
        """Every key a stored run may match: the model's stored name, and a model file's contents (typed
        as an absolute path, or from another folder, it is the same file); covers() checks the contents."""
        by_contents = (model_identity(self.model, model_file_sha256(self.model)), *self._sizes)
        return tuple(dict.fromkeys((self.key, by_contents)))

    @property
    def _sizes(self) -> tuple:
        return (self.batch_size, self.workers_per_node, self.nodes, self.instance, self.script_sha256,
                self.script_args)

    def describe(self) -> str:
        if self.script is not None:
            args = f" -- {shlex.join(self.script_args)}" if self.script_args else ""  # as a shell takes them
            text = f"script {self.script}{args}, {self.workers_per_node} worker(s)"
            return text + (f" x {self.nodes} nodes" if self.nodes > 1 else "")
        text = f"{self.model} batch {self.batch_size}, {self.workers_per_node} worker(s)"
        if self.nodes > 1:
            text += f" x {self.nodes} nodes"
        if self.bandwidth:
            text += f" at {self.bandwidth}"
        return text


@dataclass
class CampaignSettings:
    """What every profile of the campaign shares."""

    db_path: Path
    stalls: list[str] | None = None  # None: compute,interconnect (+ network on several nodes)
    iterations: str = "auto"
    input_shape: str | None = None  # "3,64,64", or an image shape and a sequence length: campaign/shapes.py
    num_classes: int | None = None
    device: str | None = None
    results_dir: Path | None = None
    cluster_name: str | None = None  # the emulated cluster of the --bandwidths profiles; None: the default
    # each profile's time and precision (`stash profile`'s options; None: its defaults); like --iterations,
    # they do not make a stored run another configuration
    max_phase_s: float | None = None
    launches: int | None = None
    target_relative_ci: float | None = None
    extra_args: list[str] = field(default_factory=list)
    python: str = sys.executable


def family_models(family: str, depths: list[int] | None = None) -> list[str]:
    """Zoo names of a family at the given depths (resnet 10..152, vgg 11..19); UsageError for unknown ones."""
    if family not in FAMILIES:
        raise UsageError(f"unknown model family {family!r}: choose {', '.join(FAMILIES)}")
    depths = list(depths) if depths else list(DEFAULT_DEPTHS[family])
    names = [FAMILIES[family].format(depth=depth) for depth in depths]
    missing = [name for name in names if name not in ZOO_NAMES]
    if missing:
        valid = ", ".join(str(depth) for depth in DEFAULT_DEPTHS[family])
        raise UsageError(f"no zoo model {', '.join(missing)}: {family} depths are {valid}")
    return names


_MODULE_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def check_model_names(models: list[str]) -> None:
    """Every model a zoo name, FILE.py:FACTORY (an existing file) or package.module:FACTORY; a bare path or
    anything else is refused before anything runs (it would otherwise become part of result file names)."""
    for name in models:
        text = str(name).strip()
        if text.lower() in ZOO_NAMES:
            continue
        location, colon, factory = text.rpartition(":")
        if colon and factory.isidentifier():
            if location.endswith(".py"):
                if Path(location).expanduser().is_file():
                    continue
                raise UsageError(f"--models {text!r}: no model file {location}")
            if _MODULE_RE.fullmatch(location):
                continue
        raise UsageError(
            f"--models {text!r}: not a zoo model{close_zoo_names(text)} (see `stash models`); give a user "
            "model as FILE.py:FACTORY or package.module:FACTORY"
        )


def instance_label(instance: str | None, bandwidth: str | None) -> str:
    """The label a run is stored under: the instance (default: host name), "@bandwidth" when emulated."""
    base = instance or socket.gethostname()
    return f"{base}@{bandwidth.strip().lower()}" if bandwidth else base


def plan_campaign(
    models: list[str],
    batch_sizes: list[int],
    workers: list[int],
    nodes: list[int],
    bandwidths: list[str] | None = None,
    instance: str | None = None,
    check_models: bool = True,
) -> list[CampaignItem]:
    """Every configuration of the sweep, in a stable order (small models first within each setting).

    Bandwidths apply to multi-node configurations only; a one-node configuration is planned once. The model
    names are checked (check_model_names) unless the caller checked them already.
    """
    for values, what in ((batch_sizes, "batch sizes"), (workers, "workers"), (nodes, "nodes")):
        if not values or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in values):
            raise UsageError(f"{what} must be a list of positive whole numbers, got {values!r}")
    if not models:
        raise UsageError("a campaign needs at least one model")
    if check_models:
        check_model_names(models)
    # A zoo name in any case is the zoo's (ResNet10 and resnet10: one model, stored as resnet10), and a rate
    # in any case one rate: each configuration once, and a resume finds what was stored under the name.
    models = [model.strip().lower() if model.strip().lower() in ZOO_NAMES else model for model in models]
    bandwidths = one_per_rate([rate.strip().lower() for rate in bandwidths or []])
    plan: list[CampaignItem] = []
    for node_count in _unique(nodes):
        rates = _unique(bandwidths) if node_count > 1 else []
        for bandwidth in rates or [None]:
            for worker_count in _unique(workers):
                for batch_size in _unique(batch_sizes):
                    for model in _unique(models):
                        label = instance_label(instance, bandwidth)
                        plan.append(
                            CampaignItem(model, batch_size, worker_count, node_count, label, bandwidth)
                        )
    return plan


def covers(measured: dict[str, Any], item: CampaignItem, settings: CampaignSettings) -> bool:
    """Whether a stored run of `item`'s key measured what the campaign asks now: its device, input shape and
    classes where the campaign names them, and at least the stalls it asks for (a run of more stalls
    covers fewer; the number of iterations only changes how precise it is). A run of a model file whose
    contents have changed since measured another model."""
    now = model_file_sha256(item.model) if item.script is None else None
    if now is not None and measured.get("model_sha256") not in (None, now):
        return False
    if settings.device not in (None, "auto") and measured["device"] != settings.device:
        return False
    # A stored run of the model's own shape or classes holds null: it measured the defaults, which the
    # campaign may name (--num-classes 1000 of an ImageNet model); a campaign that names none profiles the
    # defaults, which a run of 3,64,64 and 10 classes did not measure.
    asked = (shape_for(item.model, settings.input_shape), settings.num_classes or None)
    stored = (measured["input_shape"], measured["num_classes"])
    for index, (wanted, had) in enumerate(zip(asked, stored, strict=True)):
        if wanted == had:
            continue  # the model's own both, or the same given (its defaults need the model built)
        default = model_defaults(item.model)[index]  # None where unknown: then nothing but equal values match
        if (had or default) != (wanted or default):
            return False
    return set(profile_spec(item, settings).stalls) <= measured["stalls"]


def plan_script_campaign(
    script: str, script_args: list[str], workers: list[int], nodes: list[int], instance: str | None = None
) -> list[CampaignItem]:
    """The configurations of a training script: workers per node x nodes (the script sets its own batch)."""
    for values, what in ((workers, "workers"), (nodes, "nodes")):
        if not values or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in values):
            raise UsageError(f"{what} must be a list of positive whole numbers, got {values!r}")
    digest = script_sha256(script)
    if digest is None:
        raise UsageError(f"--script {script}: not a readable file")
    label = instance_label(instance, None)
    return [
        CampaignItem(script_model_name(script), None, worker_count, node_count, label, script=script,
                     script_args=tuple(script_args), script_sha256=digest)  # fmt: skip
        for node_count in _unique(nodes)
        for worker_count in _unique(workers)
    ]


def split_done(
    plan: list[CampaignItem], settings: CampaignSettings, done: dict[tuple, list[dict]] | None = None
) -> tuple[list[CampaignItem], list[CampaignItem]]:
    """(to run, already stored) for a plan: stored where a completed run of the item's key covers what the
    campaign asks (covers); `done`: completed_keys(settings.db_path) when read already."""
    done = completed_keys(settings.db_path) if done is None else done
    is_stored = [any(covers(runs, item, settings) for key in item.keys for runs in done.get(key, []))
                 for item in plan]  # fmt: skip
    todo = [item for item, stored in zip(plan, is_stored, strict=True) if not stored]
    return todo, [item for item, stored in zip(plan, is_stored, strict=True) if stored]


def profile_spec(item: CampaignItem, settings: CampaignSettings) -> ProfileSpec:
    """The profile of one configuration: the item's model and sizes with the campaign's shared settings."""
    # The default asks what the configuration has: the interconnect of 2 or more workers a node, a network
    # between nodes. Stalls given are the ones measured (network was added to them on several nodes, an
    # extra run a node count over that nobody asked for).
    default = ["compute", *(["interconnect"] if item.workers_per_node > 1 else []),
               *(["network"] if item.nodes > 1 else [])]  # fmt: skip
    names = settings.stalls or default
    timing = {key: value for key in ("max_phase_s", "launches", "target_relative_ci")
              if (value := getattr(settings, key)) is not None}  # fmt: skip
    if item.script is not None:
        return ProfileSpec(
            model=item.model, batch_size=None, workers_per_node=item.workers_per_node, nodes=item.nodes,
            stalls=parse_stalls(",".join(names)), iterations=parse_iterations(str(settings.iterations)),
            instance=item.instance, device=settings.device or "auto", script=item.script,
            script_args=list(item.script_args), script_sha256=item.script_sha256, **timing,
        )  # fmt: skip
    return ProfileSpec(
        model=item.model,
        batch_size=item.batch_size,
        workers_per_node=item.workers_per_node,
        nodes=item.nodes,
        stalls=parse_stalls(",".join(names)),
        iterations=parse_iterations(str(settings.iterations)),
        instance=item.instance,
        input_shape=list(shape) if (shape := shape_for(item.model, settings.input_shape)) else None,
        num_classes=settings.num_classes or None,
        device=settings.device or "auto",
        cluster="emulated" if item.bandwidth else None,
        cluster_bandwidth=item.bandwidth or None,
        cluster_name=settings.cluster_name if item.bandwidth else None,
        **timing,
    )


def check_measurable_plan(plan: list[CampaignItem], settings: CampaignSettings) -> None:
    """Every configuration can measure the stalls the campaign asks for: one line before anything runs or
    is rented (a profile refusing its --stalls would stop the campaign part way)."""
    from stash_core.engine.plan import check_measurable  # torch-free: a dry run loads no torch

    for item in plan:
        try:
            spec = profile_spec(item, settings)
            refuse_other_input(item.model, spec.input_shape)  # a profile would refuse it after the rental
            check_measurable(spec)
            if item.nodes > 1 and "network" not in spec.stalls:  # it would rent the machines for nothing
                raise UsageError(f"--stalls {','.join(spec.stalls)} measures nothing across {item.nodes} "
                                 "machines: add network, or leave that count out of --nodes")  # fmt: skip
        except UsageError as error:
            raise UsageError(f"{item.describe()}: {error}") from None


def profile_args(item: CampaignItem, settings: CampaignSettings) -> list[str]:
    """The `stash profile` arguments of one configuration (the database and the progress are added by
    engine/profile_child.py)."""
    args = profile_spec(item, settings).to_argv()
    if settings.results_dir is not None:
        out = result_file(Path(settings.results_dir), item.model, item.batch_size, item.workers_per_node,
                          item.nodes, item.instance, item.script_sha256 if item.script is not None else None)
        args = with_options(args, f"--out={out}")  # "=": a folder named "-r" stays a value
    return with_options(args, *settings.extra_args)


def with_options(args: list[str], *options: str) -> list[str]:
    """`stash profile` arguments with more options: before a script's own arguments (after `--`), if any."""
    if "--" not in args:
        return [*args, *options]
    cut = args.index("--")
    return [*args[:cut], *options, *args[cut:]]


def profile_argv(item: CampaignItem, settings: CampaignSettings) -> list[str]:
    """The command line of one configuration's profile child (`stash profile`'s arguments)."""
    from stash_core.engine.profile_child import profile_command

    return profile_command(settings.db_path, profile_args(item, settings), settings.python)


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))
