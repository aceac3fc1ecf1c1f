"""What the Python API returns: one dataclass per answer, each with `.to_frame()` (a pandas DataFrame, the
rows a table would show) and `.to_dict()` (plain JSON values, as the command's --format json prints them).

pandas is imported by the methods that build frames, not here: `import stash_core` stays light.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stash_core.units import json_safe

if TYPE_CHECKING:
    import pandas as pd


def _equal_fields(self: Any, other: Any) -> Any:
    """== of two answers field by field (those compared): `frame == frame` is a frame of yes and no, and
    NaN != NaN, so a dataclass's own == fails or says that an answer differs from itself."""
    if type(other) is not type(self):
        return NotImplemented
    compared = [one.name for one in fields(self) if one.compare]
    return all(_same(getattr(self, name), getattr(other, name)) for name in compared)


def _same(mine: Any, theirs: Any) -> bool:
    if hasattr(mine, "equals") and hasattr(theirs, "equals"):  # a DataFrame: pandas' own comparison
        return bool(mine.equals(theirs))
    if isinstance(mine, float) and isinstance(theirs, float) and math.isnan(mine) and math.isnan(theirs):
        return True  # an unknown figure in both
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return mine.keys() == theirs.keys() and all(_same(mine[key], theirs[key]) for key in mine)
    if isinstance(mine, list | tuple) and isinstance(theirs, list | tuple):
        return type(mine) is type(theirs) and len(mine) == len(theirs) and all(map(_same, mine, theirs))
    return bool(mine == theirs)


# The keys of a row (a recommendation's `best`, a spot plan's) that its one-line repr shows: all of them made
# a notebook cell's output a line of some 20,000 characters.
_ROW_SHOWN = ("config", "cluster", "iteration_s", "training_h", "training_usd", "cost_usd")
_TEXT_SHOWN = 160  # characters of a long text field (a reason) shown in a repr


def _compact_repr(self: Any) -> str:
    """The answer as a notebook shows it: a list of more than one line as its count, a row as its headline
    figures, a long text clipped. The whole is in the fields themselves, and `.to_frame()`/`.to_dict()`."""
    parts = []
    for one in fields(self):
        if not one.repr:
            continue
        value = getattr(self, one.name)
        if isinstance(value, list) and len(value) > 1:
            shown = f"<{len(value)} {'rows' if isinstance(value[0], dict) else 'lines'}>"
        elif isinstance(value, dict) and ("config" in value or "cluster" in value):
            headline = {key: value[key] for key in _ROW_SHOWN if key in value}
            shown = repr(headline | {"...": f"{len(value)} keys in all"})
        elif isinstance(value, str) and len(value) > _TEXT_SHOWN:
            shown = repr(value[: _TEXT_SHOWN - 3] + "...")
        else:
            shown = repr(value)
        parts.append(f"{one.name}={shown}")
    return f"{type(self).__name__}({', '.join(parts)})"


def _as_arguments(text: str) -> str:
    """A profile's message with `stash profile`'s flags named as profile()'s arguments (api/options.py)."""
    from stash_core.api.options import PROFILE_OPTION_NAMES, argument_words

    return argument_words(text, PROFILE_OPTION_NAMES)


@dataclass
class Result:
    """One profile: its result document (the versioned JSON file, docs/schema.md) and where it was saved.

    `error` is the reason a failed or interrupted run stopped; `warning` says when the instance label
    does not fit the machine; `save_problem` what could not be saved (a full disk), or None. The
    breakdown's own warnings (a stall short of its target, and why) are `.warnings`, as `stash profile`
    prints them after its table (its options named as profile()'s arguments).
    """

    run_id: str
    status: str  # completed, failed or interrupted
    iteration_s: float | None  # one training iteration of the whole configuration, seconds
    error: str | None = None
    result_file: Path | None = None  # None when the file could not be written
    db: Path | None = None  # the database that stores the run; None when it was not stored
    warning: str | None = None
    save_problem: str | None = None
    doc: dict[str, Any] = field(default_factory=dict, repr=False)

    __eq__ = _equal_fields

    @classmethod
    def from_document(cls, doc: dict[str, Any], **where: Any) -> Result:
        """A Result of a result document; `where` sets result_file, db, warning, save_problem. The error is
        the document's, its options named as profile()'s arguments ("raise comm_timeout")."""
        breakdown = doc.get("breakdown") or {}
        error = doc.get("error")
        return cls(
            run_id=doc["run_id"], status=doc["status"], iteration_s=breakdown.get("iteration_s"),
            error=_as_arguments(error) if isinstance(error, str) else error, doc=doc, **where,
        )  # fmt: skip

    @property
    def breakdown(self) -> dict[str, Any]:
        """The stall breakdown of the document ({} for a run that failed before it had one)."""
        return self.doc.get("breakdown") or {}

    @property
    def warnings(self) -> list[str]:
        """What a reader of the breakdown must know beside its figures (a stall not resolved, an interval
        short of its target and what would narrow it, other load), as `stash profile` prints them but with
        its options named as profile()'s arguments ("launches 3", not "--launches 3"); the document keeps
        the command's words, which `stash show` prints."""
        return [_as_arguments(text) for text in self.breakdown.get("warnings") or []]

    @property
    def spec(self) -> dict[str, Any]:
        """The profile's configuration as the document records it (model, batch_size, workers_per_node...)."""
        return self.doc.get("spec") or {}

    def to_frame(self) -> pd.DataFrame:
        """One row per stall, as the database's stalls table holds it, then the remainder (stall
        `unattributed`, "not separated"), so that the seconds add up to the iteration time
        (`stash_core.breakdown(run_id)` reads the same rows back): run_id, stall, seconds, ci95_s, share,
        epoch_s, status, note, raw_s (the signed difference a stall within the noise reports as 0, or a stall
        not separable counts in the remainder), resolved
        (with_resolved)."""
        from stash_core.store.ingest_rows import prepare_run
        from stash_core.store.stored_breakdown import with_remainder_row

        doc = json_safe(self.doc)
        stalls = prepare_run(doc, None).stalls
        return with_resolved(with_remainder_row(stalls, doc["run_id"], doc.get("breakdown")))

    def to_dict(self) -> dict[str, Any]:
        """The result document as read (migrated to this version: a file written before the remainder has it
        recomputed, as the store does; NaN and infinities as None)."""
        return json_safe(copy.deepcopy(self.doc))


@dataclass
class Predictions:
    """Predicted training-step times without a profile: the job asked (`request`), one row per predicted
    configuration (`frame`: instance, workers, step time, compute/interconnect/network, expected error,
    memory; each column in docs/api.md), one 'NAME: reason' line per instance that could not be predicted,
    one line per stored profile of the job that measured another precision (`profiles_set_aside`), and
    `warnings`: catalog rows among those predicted for that an older Stash seeded."""

    request: dict[str, Any]
    frame: pd.DataFrame = field(repr=False)
    not_predictable: list[str] = field(default_factory=list)
    expected_errors: dict[str, Any] = field(default_factory=dict)
    answer: Any = field(default=None, repr=False, compare=False)  # decide.predict's Prediction
    profiles_set_aside: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # catalog rows an older Stash seeded, with the way out

    __eq__ = _equal_fields
    __repr__ = _compact_repr

    def to_frame(self) -> pd.DataFrame:
        """One row per configuration (one per instance unless max_instances > 1), highest throughput
        (samples_per_s) first: more GPUs may take a longer step and still do more."""
        return self.frame.copy()

    def to_dict(self) -> dict[str, Any]:
        """{"job", "predictions", "not_predicted", "profiles_set_aside", "warnings"}: what `stash predict
        --format json` prints. Where nothing could be predicted, the command adds "error" and "exit_status"
        (2); here the frame is empty and `not_predictable` says why for each instance."""
        return self.answer.to_json()


@dataclass
class Recommendation:
    """What to rent: every configuration evaluated (`options`), the cheapest that meets the constraints
    (`best`, None when none does, with `infeasible_reason`), why others lose, what was not evaluated."""

    request: dict[str, Any]
    options: pd.DataFrame = field(repr=False)
    best: dict[str, Any] | None
    explanations: list[str] = field(default_factory=list)
    infeasible_reason: str | None = None
    excluded: list[str] = field(default_factory=list)
    label_warnings: list[str] = field(default_factory=list)
    answer: Any = field(default=None, repr=False, compare=False)  # decide.recommend's Recommendation
    profiles_set_aside: list[str] = field(default_factory=list)  # the job's stored profiles not used, and why

    __eq__ = _equal_fields
    __repr__ = _compact_repr

    @property
    def ranked(self) -> pd.DataFrame:
        """The configurations that meet every constraint, cheapest first."""
        return self.answer.ranked

    @property
    def warnings(self) -> list[str]:
        """label_warnings, then old or undated prices, then catalog rows an older Stash seeded (what the
        JSON's "warnings" holds)."""
        return self.answer.warnings if self.answer is not None else list(self.label_warnings)

    def to_frame(self) -> pd.DataFrame:
        """Every configuration evaluated, one row each (`feasible`, `rank`, `pareto` say how it placed; each
        column in docs/api.md)."""
        return self.options.copy()

    def to_dict(self) -> dict[str, Any]:
        """What `stash recommend --format json` prints."""
        return self.answer.to_json()


# The columns of a spot plan's candidates (spot.planner.plan_table's rows), also when there are none.
SPOT_COLUMNS = ("cluster", "workers", "iteration_s", "R", "iterations", "training_s", "usd_per_h", "cost_usd",
                "within_budget", "outside_loss_model")  # fmt: skip


@dataclass
class SpotPlan:
    """The cheapest spot (or on-demand) cluster that reaches a target loss within a time budget (spotDNN):
    the best candidate (None with `infeasible_reason`), the candidates, the coefficients the plan is
    fragile to, and its risk under revocations (spot prices only)."""

    pricing: str  # spot or on_demand
    best: dict[str, Any] | None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    bounds: tuple[int, int] = (0, 0)  # the fewest and most workers the budget allows (crossed: none)
    infeasible_reason: str | None = None
    fragile: list[str] = field(default_factory=list)
    risk: dict[str, Any] | None = None
    plan: Any = field(default=None, repr=False, compare=False)  # spot.planner's PlanResult
    notes: list[str] = field(default_factory=list)  # the types offered left out of the plan (no price), why
    request: dict[str, Any] = field(default_factory=dict)  # the target, budget and links it was planned for

    __eq__ = _equal_fields
    __repr__ = _compact_repr

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate cluster, cheapest first; no rows, the same columns, when none was found."""
        import pandas as pd

        return pd.DataFrame(self.candidates, columns=list(SPOT_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        """What `stash spot --json` prints (a row outside the loss model: its infinite iterations, time and
        cost as None)."""
        from stash_core.spot.planner import PLAN_BASIS

        return json_safe({
            "request": self.request, "pricing": self.pricing, "basis": PLAN_BASIS, "best": self.best,
            "candidates": self.candidates, "bounds": list(self.bounds),
            "infeasible_reason": self.infeasible_reason, "fragile": self.fragile, "risk": self.risk,
            "notes": self.notes,
            # "exact": every mix of counts tried; "window": spotDNN's heuristic, a cheaper mix may exist
            "search": self.plan.search if self.plan is not None else None,
        })  # fmt: skip


@dataclass
class Schedule:
    """One simulation of a shared GPU cluster: the simulation document (settings, one entry per policy with
    its metrics) and where it was saved."""

    simulation_id: str
    result_file: Path
    db: Path | None  # None when it was not stored
    doc: dict[str, Any] = field(repr=False)
    jobs: list[Any] = field(default_factory=list, repr=False)  # the trace's jobs (sched.TraceJob)
    source: str = ""  # how the trace is named: its path and format, or the generator's settings
    cluster: Any = None  # sched.Cluster
    fabric: Any = None  # sched.Fabric of the shared links, None without a link model

    def to_frame(self) -> pd.DataFrame:
        """One row per policy: its label and metrics (makespan_s, avg_jct_s, p95_jct_s, avg_queue_s, ...)."""
        import pandas as pd

        rows = [{"policy": entry["settings"]["label"], **entry["metrics"]} for entry in self.doc["policies"]]
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """The simulation document as its file holds it."""
        return json_safe(copy.deepcopy(self.doc))


def with_resolved(stalls: pd.DataFrame) -> pd.DataFrame:
    """The breakdown's rows with `resolved`, as runs() has <stall>_resolved and `stash show` says it: True
    when the stall's 95% interval is no wider than its value, False when it is (or the stall is within the
    noise), missing (<NA>) without a figure and for the remainder, which is what is left over."""
    import pandas as pd

    from stash_core.analysis.stalls import REMAINDER, stall_resolved

    rows = stalls.to_dict(orient="records")
    said = [None if row["stall"] == REMAINDER else stall_resolved(row) for row in rows]
    return stalls.assign(resolved=pd.array(said, dtype="boolean"))
