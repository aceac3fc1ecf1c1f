"""What every table, view and column of the store means: the one source of the database's COMMENT ON
metadata (applied when a database is created or migrated) and of the column tables of docs/schema.md.

Meanings are Markdown (backticks mark names); a database comment carries the same text without the marks and
with the unit in brackets. `python -m stash_core.store.schema_markdown` prints docs/schema.md (`--write`
writes it, `--check` fails when it is stale).
"""

from __future__ import annotations

import functools
import hashlib

from stash_core.results.file import STALL_NAMES
from stash_core.store.schema_tables import (
    INSTANCES,
    ITERATIONS,
    MODELS,
    PHASES,
    PROBES,
    RUNS,
    SCHEMA_META,
    SIMULATIONS,
    STALLS,
    TELEMETRY,
    ColumnDoc,
    RelationDoc,
    table,
)

_FROM_RUNS = (
    "run_id", "started_at", "finished_at", "status", "error", "model", "model_kind", "batch_size",
    "workers_per_node", "nodes", "instance", "device", "backend", "dataset", "dataset_images", "iteration_s",
    "iteration_ci95_s", "epoch_s", "iterations_per_epoch", "reference_phase",
)  # fmt: skip

STALL_BREAKDOWN = RelationDoc(
    "stall_breakdown",
    "one row per run",
    "A pivot of `stalls` joined to `runs`, then the signed remainder, so that in every row with an "
    "iteration time the five `<stall>_s` and `unattributed_s` add up to `iteration_s` and the shares to 1 "
    "(NULL stalls count as 0); runs without stalls (failed) have NULL stall columns. `<stall>` stands for "
    f"each of {', '.join(f'`{stall}`' for stall in STALL_NAMES)}.",
    (
        *(ColumnDoc(name, borrowed_from="runs") for name in _FROM_RUNS),
        *table(
            """
            epoch_ci95_s | s | 95 % CI half-width of `epoch_s`: `iteration_ci95_s × iterations_per_epoch` (an
                epoch's time is estimated as its iterations times their mean; the interval of that estimate)
            <stall>_s | s | stall per iteration (`stalls.seconds`); NULL where not measured or not separable,
                and where the stored figure is not valid (not a number, or a 'measured' one below 0): its
                time is then in `unattributed_s`, as `stash show` says
            <stall>_ci95_s | s | 95 % CI half-width of the stall
            <stall>_share | fraction | stall / `iteration_s`
            <stall>_epoch_s | s | stall per epoch
            <stall>_epoch_ci95_s | s | 95 % CI half-width of the stall per epoch,
                `<stall>_ci95_s × iterations_per_epoch`
            <stall>_status | | `stalls.status` of that stall
            <stall>_resolved | | whether the stall is resolved, as `stash show` says it: its 95 % CI is no
                wider than its value (false also within the noise, or without a CI: it could be 0); NULL
                where `<stall>_s` is
            unattributed_s | s | signed remainder ("not separated"): `iteration_s` minus the five stalls
                (NULL stalls count as 0), computed here from `stalls`, so that the stalls and it add up to
                `iteration_s` exactly (see `runs.unattributed_s`); NULL without `iteration_s`
            unattributed_ci95_s | s | 95 % CI half-width of the remainder (`runs.unattributed_ci95_s`)
            unattributed_share | fraction | `unattributed_s / iteration_s`; with the five `<stall>_share`
                it adds up to 1
            unattributed_epoch_s | s | remainder per epoch, `unattributed_s × iterations_per_epoch`
            unattributed_epoch_ci95_s | s | 95 % CI half-width of the remainder per epoch,
                `unattributed_ci95_s × iterations_per_epoch`
            """
        ),
    ),
    kind="view",
)

RELATIONS: tuple[RelationDoc, ...] = (
    SCHEMA_META, RUNS, PHASES, ITERATIONS, TELEMETRY, STALLS, MODELS, INSTANCES, PROBES, SIMULATIONS,
    STALL_BREAKDOWN,
)  # fmt: skip
_BY_NAME = {relation.name: relation for relation in RELATIONS}


def plain(markdown: str) -> str:
    """A Markdown meaning as comment text: without backticks and bold marks."""
    return markdown.replace("`", "").replace("**", "")


def relation_comment(relation: RelationDoc) -> str:
    """The comment of a table or view: its summary as a sentence, then the paragraph under its heading."""
    summary = relation.summary[:1].upper() + relation.summary[1:]
    return " ".join(part.rstrip(".") + "." for part in (summary, plain(relation.about)) if part)


def column_comments(relation: RelationDoc) -> dict[str, str]:
    """{column: comment} of a table or view in column order, `<stall>` patterns expanded per stall."""
    comments: dict[str, str] = {}
    for column in relation.columns:
        if column.borrowed_from:
            comments[column.name] = column_comments(_BY_NAME[column.borrowed_from])[column.name]
            continue
        text = plain(column.meaning) + (f" ({column.unit})" if column.unit else "")
        if "<stall>" in column.name:
            comments.update({column.name.replace("<stall>", stall): text for stall in STALL_NAMES})
        else:
            comments[column.name] = text
    return comments


@functools.cache
def _comments() -> dict[str, dict[str, str]]:
    return {
        relation.name: {"": relation_comment(relation), **column_comments(relation)} for relation in RELATIONS
    }


def described_comments() -> dict[str, dict[str, str]]:
    """{relation: {"": comment of the relation, column: comment of the column}} of every table and view."""
    return {name: dict(columns) for name, columns in _comments().items()}


def documented_meaning(relation: str, column: str = "") -> str:
    """The comment this Stash gives a column ("" for the relation itself); "" where it documents none."""
    return _comments().get(relation, {}).get(column, "")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def comment_script() -> str:
    """One SQL script of COMMENT ON statements for every table, view and column (views lose their comments
    when they are replaced, so it runs after every CREATE OR REPLACE VIEW)."""
    statements = []
    for relation in RELATIONS:
        kind = "VIEW" if relation.kind == "view" else "TABLE"
        comments = _comments()[relation.name]
        for column, text in comments.items():
            target = f"COLUMN {relation.name}.{column}" if column else f"{kind} {relation.name}"
            statements.append(f"COMMENT ON {target} IS {_literal(text)};\n")
    return "".join(statements)


# Part of schema_meta's `comments_digest` (schema.SCHEMA_DIGEST): a writer re-applies comments that changed.
COMMENTS_DIGEST = hashlib.sha256(comment_script().encode("utf-8")).hexdigest()[:16]
