"""Recommend: the models a database has profiled, the instance catalog, and a ranked recommendation with the
frames its charts draw."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from stash_core.api.decisions import recommend
from stash_core.catalog import COLUMNS, CatalogEdits, apply_catalog_edits, list_instances
from stash_core.cells import is_missing
from stash_core.decide.predict.configuration import DOES_NOT_FIT
from stash_core.decide.predict.cpu_rows import CPU_MEASURED, NOT_PROFILED_COUNTS
from stash_core.decide.predict.instances import gpus_used_cell
from stash_core.decide.recommend import DEFAULT_MAX_INSTANCES, Recommendation
from stash_core.decide.recommend.answer import UNPRICED
from stash_core.decide.recommend.costs import step_error
from stash_core.decide.recommend.explain import job_headline
from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store import reads
from stash_core.views.catalog_refresh import REFRESH_BUTTON
from stash_core.views.labels import column_label
from stash_core.views.stall_frames import stall_long_frame
from stash_core.views.step_spread import with_step_bounds
from stash_core.zoo_names import SCRIPT_PREFIX

MEETS_CONSTRAINTS = {True: "meets the constraints", False: "does not meet them"}
# Why a configuration was not predicted: a phrase of the reason (decide/predict, decide/recommend, the
# Compare view; the decisions' own constants where they have one, so that `predict` and `recommend` are
# counted alike) and what the pages call it.
NOT_PREDICTED_KINDS = (
    ("no entry in the accelerator table", "accelerator not in Stash's table"),
    (DOES_NOT_FIT, "batch does not fit the GPU's memory"),
    (NOT_PROFILED_COUNTS, "machine counts of a CPU instance not profiled"),
    (CPU_MEASURED, "no GPU (CPU instances need a profile)"),
    ("the job uses", "fewer GPUs than the job's workers"),
    ("communication not predictable", "communication not predictable"),
    (UNPRICED, "no price of the kind asked"),
)


@dataclass(frozen=True)
class RecommendRequest:
    """What the Recommend form asks for (None: no limit; instances None: the whole catalog)."""

    model: str
    batch_size: int
    epochs: float
    dataset_images: int
    budget_hours: float | None = None
    max_usd: float | None = None
    spot: bool = False
    instances: tuple[str, ...] | None = None
    max_instances: int = DEFAULT_MAX_INSTANCES
    workers_per_instance: int | None = None  # GPUs used of each instance; None: all of them
    precision: str = "pytorch"  # PyTorch's own for the model (profile_arithmetic.default_precision)
    input_shape: tuple[int, ...] | None = None  # one sample; None: the model's default
    memory_format: str = "nchw"  # the job's habits (decide/predict/job.py)
    optimizer: str | None = None
    optimizer_impl: str = "foreach"
    attention: str = "fused"


@dataclass(frozen=True)
class JobDefaults:
    """What the form proposes for a model: its kind, its default input shape and a typical epoch."""

    kind: str  # "image" | "tokens" | "unknown" (a model known only by its profiles, or a user file)
    input_shape: str  # "3,224,224", "1024"; "" when not known
    epoch_samples: int
    samples_label: str


IMAGENET_IMAGES = 1_281_167
TOKEN_EPOCH_SEQUENCES = 1_000_000  # a round number of sequences: no data set is implied
DEFAULT_MODEL = "resnet50"


def model_choices(profiled: pd.DataFrame, current: str | None = None) -> list[str]:
    """The models the form offers: the zoo and every profiled model, in a fixed order (the zoo's, then the
    profiled ones by name), and the one chosen now even when it is neither: a new profile never reorders
    or replaces the choice. A profiled script is not offered: Stash has no model of it to recommend from;
    nor is a model file or module (FILE.py:FACTORY) a stored run names: a stored name is data, and choosing
    it would run its code (its result file may be anyone's). Typed in, it is the user's own."""
    from stash_core.zoo_names import zoo_models

    names = zoo_models()
    profiled_names = {str(name) for name in profiled["model"].dropna()}
    names += sorted({name for name in profiled_names if not is_script(name) and ":" not in name} - set(names))
    if current and current not in names:
        names.append(current)
    return names


def is_script(model: str) -> bool:
    """Whether `model` names a profiled script's runs ("script:train.py"), not a model."""
    return model.startswith(SCRIPT_PREFIX)


def job_defaults(model: str) -> JobDefaults:
    """The form's defaults for `model`: a token model gets its sequence length and a count of sequences,
    never ImageNet's images and 224 px."""
    from stash_core.decide.predict.step_cost import model_input  # kept on disk: no model built each rerun
    from stash_core.errors import StashError
    from stash_core.zoo_names import is_zoo_name

    if not is_zoo_name(model):
        return JobDefaults("unknown", "", IMAGENET_IMAGES, "Samples in one epoch")
    try:
        info = model_input(model)
    except StashError:
        return JobDefaults("unknown", "", IMAGENET_IMAGES, "Samples in one epoch")
    shape = ",".join(str(size) for size in info.input_shape)
    if info.kind == "tokens":
        return JobDefaults("tokens", shape, TOKEN_EPOCH_SEQUENCES, "Sequences in one epoch")
    return JobDefaults("image", shape, IMAGENET_IMAGES, "Images in one epoch")


def profiled_models(db_path: Path | str) -> pd.DataFrame:
    """(model, batch_size, runs) of completed runs, the most-profiled first."""
    return reads.profiled_models(db_path)


def batch_sizes_of(profiled: pd.DataFrame, model: str) -> list[int]:
    """The batch sizes `model` was profiled with (a frame of profiled_models), smallest first."""
    return sorted(set(profiled.loc[profiled["model"] == model, "batch_size"].dropna().astype(int)))


def profiled_shape(profiled: pd.DataFrame, model: str, batch_size: int) -> str | None:
    """The input shape ("3,32,32") `model` was profiled with most at `batch_size`, None where it ran at its
    default shape or was never profiled: the form proposes it beside the profiled batch, so that the
    profile answers the job it proposes."""
    rows = profiled[(profiled["model"] == model) & (profiled["batch_size"] == batch_size)]
    if rows.empty:
        return None
    most = rows.sort_values("runs", ascending=False, kind="stable")["input_shape"].iloc[0]  # null: default
    try:
        shape = json.loads(most) if isinstance(most, str) else None
        return ",".join(str(int(size)) for size in shape) if shape else None
    except (ValueError, TypeError):  # a hand-edited spec: the model's default is proposed
        return None


def instance_names(db_path: Path | str) -> list[str]:
    """Names of the instance catalog (stored and built-in rows), by name."""
    return list(list_instances(db_path)["name"])


def instance_catalog(db_path: Path | str) -> pd.DataFrame:
    """The instance catalog's editable columns (shapes, prices, price date and source), by name."""
    return list_instances(db_path)[list(COLUMNS)]


# The catalog's columns edited together (the whole table would not fit the page): name first in each.
CATALOG_GROUPS = {
    "Shapes": ["name", "accelerator", "accelerator_count", "vcpus", "memory_gib"],
    "Links": ["name", "provider", "network_gbps", "interconnect"],
    "Prices": ["name", "on_demand_usd_per_h", "spot_usd_per_h", "price_date", "source", "region", "origin"],
}


def alike_in_every_row(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table without what every row of it (two or more) says alike, and {column: that text}: a column of
    one text is left out, and a note's parts ("; ") that every row has are taken out of each (said once under
    the table rather than in every row)."""
    if len(frame) < 2:
        return frame, {}
    alike = {}
    for column in columns:
        if column not in frame or not frame[column].notna().all():
            continue
        parts = [str(text).split("; ") for text in frame[column]]
        shared = [part for part in parts[0] if part and all(part in row for row in parts[1:])]
        if not shared:
            continue
        alike[column] = "; ".join(shared)
        rest = ["; ".join(part for part in row if part not in shared) for row in parts]
        frame = frame.drop(columns=column) if not any(rest) else frame.assign(**{column: rest})
    return frame, alike


def ranks_by_note(ranks: pd.Series, notes: pd.Series) -> dict[str, str]:
    """{note: "ranks 1-3, 7"} of the rows that carry each note, in the order of their first row."""
    rows: dict[str, list[int]] = {}
    for rank, note in zip(ranks, notes, strict=True):
        if isinstance(note, str) and note:
            rows.setdefault(note, []).append(int(rank))
    return {note: f"rank{'s' * (len(found) > 1)} {_runs_of(found)}" for note, found in rows.items()}


def _runs_of(numbers: list[int]) -> str:
    """"1-3, 7" of [1, 2, 3, 7]."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def in_catalog_words(text: str) -> str:
    """A catalog message with each column's name as the editor heads it ("on_demand_usd_per_h must not be
    negative" -> "on-demand (USD/h) must not be negative")."""
    for column in COLUMNS:
        if "_" in column:  # a whole name only: "_" is a word character, so none matches inside another
            text = re.sub(rf"\b{column}\b", column_label(column), text)
    return text


def with_catalog_edits(before: pd.DataFrame, edited: pd.DataFrame) -> pd.DataFrame:
    """The whole catalog table with the edits of one group of its columns (`edited`, rows by the index of
    `before`, added rows after them): the other columns of an existing row unchanged, empty for a new one."""
    after = before.copy()
    kept = edited.index.intersection(before.index)
    for column in edited.columns:
        after[column] = after[column].astype(object)
        after.loc[kept, column] = edited.loc[kept, column].astype(object)
    added = edited.loc[edited.index.difference(before.index)]
    if added.empty:
        return after
    return pd.concat([after, added.reindex(columns=before.columns).astype(object)], ignore_index=True)


def save_catalog_edits(db_path: Path | str, before: pd.DataFrame, after: pd.DataFrame) -> CatalogEdits:
    """Store the rows changed and added between two versions of instance_catalog (every value checked first;
    UsageError names a bad one and stores nothing). Returns the names changed and added, and the warnings
    of the rows stored (a $0 price, an unknown GPU, several GPUs without a link)."""
    return apply_catalog_edits(db_path, before, after)


def recommendation(db_path: Path | str, request: RecommendRequest) -> Recommendation:
    """Every configuration of the catalog evaluated for `request`, the feasible ones ranked by cost; a
    profiled script (UsageError) is predicted from its run instead."""
    if is_script(request.model):
        raise UsageError(
            f"{request.model} is a profiled script, not a model: predict it from its run with "
            "`stash predict --script-run RUN`"
        )
    arguments = asdict(request)
    arguments["instances"] = list(request.instances) if request.instances else None
    return recommend(**arguments, db=db_path).answer


def stalls_not_predicted(option: dict) -> list[str]:
    """The stalls of an option that have no figure (CPU and disk of a prediction without a profile)."""
    return [stall for stall in STALL_NAMES if is_missing(option.get(f"{stall}_s"))]


def headline(result: Recommendation) -> str:
    """The job the recommendation answers, in the words `stash recommend` prints first."""
    return job_headline(result.request)


def pareto_points(options: pd.DataFrame) -> pd.DataFrame:
    """The options of a recommendation a log-log chart can draw (priced, costing more than $0), with `kind`
    telling whether each meets the constraints; those that do come last, so that they are drawn over the
    others."""
    priced = options[options["training_usd"].notna() & (options["training_usd"] > 0)]
    return priced.assign(kind=priced["feasible"].map(MEETS_CONSTRAINTS)).sort_values(
        "feasible", kind="stable", key=lambda column: column.astype(bool)
    )


def free_options(options: pd.DataFrame) -> int:
    """How many options cost $0 (an instance priced at 0 per hour, e.g. hardware already owned): a log axis
    has no place for them."""
    return int((options["training_usd"] == 0).sum())


def stall_seconds_long(ranked: pd.DataFrame, db_path: Path | str | None = None) -> pd.DataFrame:
    """Per configuration (`run_label`, its `source`) the parts of its iteration laid end to end as the
    Breakdown chart lays a run's (views.stall_frames): the stalls it has a figure for and, for a profile's,
    the signed remainder, so that every bar closes at the iteration time its time and cost are of (a
    profile's stalls may add up to more or less than its iteration). A stall not predicted is left out.

    A measured configuration's parts carry its profile's intervals and statuses (read from `db_path`), so
    that they are resolved or not as the Stall breakdown says; a predicted one's have no interval of their
    own (`resolved` None: the option's error is of its whole step), never "not resolved"."""
    if ranked.empty:
        return stall_long_frame(ranked.assign(run_id=[], run_label=[]), "seconds").assign(source=[])
    measured = ranked["source"].astype(str).str.endswith("measured")
    frame = _with_profile_intervals(ranked, measured, db_path)
    long = stall_long_frame(frame.assign(run_id=ranked["config"], run_label=ranked["config"]), "seconds")
    sources = dict(zip(ranked["config"], ranked["source"], strict=True))
    long = long.assign(source=long["run_label"].map(sources), resolved=long["resolved"].astype(object))
    predicted = ~long["source"].astype(str).str.endswith("measured")
    long.loc[predicted, "resolved"] = None
    long.loc[predicted, "note"] = PREDICTED_PART_NOTE
    return with_step_bounds(long, frame)  # each bar's whole-iteration spread, across its end


PREDICTED_PART_NOTE = "predicted: no interval of its own (the option's expected error is of its whole step)"
# A profile's figures beside its stalls' seconds: what tells a resolved stall from one within the noise.
_INTERVAL_COLUMNS = ("iteration_ci95_s", "unattributed_ci95_s",
                     *(f"{s}_{kind}" for s in STALL_NAMES for kind in ("ci95_s", "status")))  # fmt: skip


def _with_profile_intervals(
    ranked: pd.DataFrame, measured: pd.Series, db_path: Path | str | None
) -> pd.DataFrame:
    """`ranked` with the interval and status columns of each measured option's profile (its run_id)."""
    run_ids = [str(run) for run in ranked.loc[measured, "run_id"].dropna()] if "run_id" in ranked else []
    if db_path is None or not run_ids:
        return ranked
    stored = reads.stall_breakdown_rows(db_path, run_ids, _INTERVAL_COLUMNS).set_index("run_id")
    frame = ranked.copy()
    for column in _INTERVAL_COLUMNS:
        if column in stored:
            pairs = zip(ranked["run_id"], measured, strict=True)
            frame[column] = [stored[column].get(run) if is_measured else None for run, is_measured in pairs]
    return frame


def marked_source(frame: pd.DataFrame) -> pd.Series:
    """'measured' or 'predicted ±E%' per option, with a mark that tells them apart at a glance; E is the
    step's stated error, compute's and communication's added, as the recommendation's card and the ranking's
    ties take it (costs.step_error; the compute path's alone read ±41% under a card's ±49%)."""

    def mark(row: dict) -> str:
        error = step_error(row)
        if row.get("source") == "measured":
            return "● measured"
        spread = "" if error is None else f" ±{float(error):.0%}"
        flag = " unvalidated" if row.get("unvalidated") in (True,) else ""
        return f"◇ predicted{spread}{flag}"

    return pd.Series([mark(row) for row in frame.to_dict(orient="records")], index=frame.index, dtype=object)


def gpus_used(frame: pd.DataFrame) -> pd.Series:
    """GPUs used of each instance's, times the instances, as predict's table writes them: '8/8', '2x8/8'."""
    columns = ("instance_count", "workers_per_instance", "gpus_per_instance")
    cells = [gpus_used_cell(*values) for values in zip(*(frame[column] for column in columns), strict=True)]
    return pd.Series(cells, index=frame.index, dtype=object)


def not_predicted_summary(reasons: Iterable[str]) -> str:
    """The reasons configurations were not predicted, counted by kind: "batch does not fit the GPU's memory:
    3, accelerator not in Stash's table: 1"; '' for none. (A stored profile set aside is no configuration:
    the results list those apart, in profiles_set_aside.)"""
    counts = Counter(_kind(reason) for reason in reasons)
    return ", ".join(f"{kind}: {count}" for kind, count in counts.most_common())


def _kind(reason: str) -> str:
    for phrase, kind in NOT_PREDICTED_KINDS:
        if phrase in reason:
            return kind
    return "other reasons"


# The commands a reason names, as this page's controls do the same: (pattern, words). A name is one shell
# word, quoted by shell_word where it holds a space or a sign the shell reads ('my box').
_WORD = r"('(?:[^']|'\\'')*'|[^\s`]+)"
_ADVICE_WORDS = (
    (re.compile(rf"`stash instances set {_WORD} --interconnect LINK`"),
     lambda m: "set its interconnect in the Links columns of the instance catalog at the top of the page"),
    (re.compile(rf"`stash instances set {_WORD} --network-gbps GBPS`"),
     lambda m: "set its network_gbps in the Links columns of the instance catalog at the top of the page"),
    (re.compile(rf"`stash profile --model {_WORD} --batch-size (\d+)(?: --input-shape (\S+))?"
                rf"(?: --workers (\d+))? --instance {_WORD}`"),
     lambda m: (f"the Run page with model {_unquoted(m[1])}, batch size {m[2]}"
                + (f", input shape {m[3]}" if m[3] else "") + (f", {m[4]} workers" if m[4] else "")
                + f" and Instance label {_unquoted(m[5])}")),
    (re.compile(rf"`stash instances seed --db {_WORD}`"),
     lambda m: f"the button below ({REFRESH_BUTTON})"),
)


def _unquoted(word: str) -> str:
    """A shell word as its text ('my box' -> my box)."""
    try:
        return " ".join(shlex.split(word))
    except ValueError:
        return word


def advice_in_page_words(text: str) -> str:
    """A reason's advice with the commands it names said as the page's controls (the catalog editor at the
    top of the page, the Run page): its backticks had shown as they were."""
    for pattern, words in _ADVICE_WORDS:
        text = pattern.sub(words, text)
    return text

