"""`stash profile`: the profile of the command line (api/profile_flow.py checks, runs and saves it), its
breakdown printed.

The options themselves are defined once in stash_core.spec, and what a valid profile is in spec_checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stash_core.analysis.core_sharing import core_sharing_note
from stash_core.api.database_notes import new_database_note
from stash_core.api.profile_flow import ProfileRun, run_profile_flow
from stash_core.cli.probe_text import format_communication
from stash_core.cli.report import format_breakdown
from stash_core.errors import SaveError, StashError
from stash_core.terminal import printable


def profile_from_args(args, db_path: Path) -> int:
    """Run the profile of parsed `stash profile` arguments and print it; its error raised once it is saved."""
    run_profile_flow(args, db_path, sys.argv, report_result, _note)
    return 0


def _note(text: str) -> None:
    """A note before the profile runs (a new database...): one that cannot be written (`> /dev/full`) stops
    nothing, the breakdown at the end says so."""
    try:
        print(printable(text), flush=True)
    except (OSError, ValueError):
        pass


def report_result(run: ProfileRun) -> None:
    """The breakdown of a saved run. A failed or interrupted run raises its error (after one line on where it
    is saved); a run that could not be saved whole raises SaveError after its breakdown."""
    doc = run.doc
    if run.error is not None:
        print(f"stash: {printable(run.early_end_line())}", file=sys.stderr)
        raise run.error
    try:
        _print_breakdown(run)
    except BrokenPipeError:
        raise  # its reader has gone (`| head`): nothing to say
    except OSError as error:  # `> /dev/full`, a full disk under the output file: the run itself is kept
        if run.problem:
            raise SaveError(run.problem) from None
        raise StashError(
            f"run {doc['run_id']} was saved to {run.where}, but its breakdown could not be written to "
            f"standard output: {error.strerror or error}"
        ) from None


def _print_breakdown(run: ProfileRun) -> None:
    doc = run.doc
    kind = (doc.get("model") or {}).get("kind")
    if not doc.get("breakdown"):  # as `stash show` says it of a run without one
        print(f"run {doc['run_id']}: no stall breakdown")
        return
    print(format_breakdown(doc["breakdown"], doc["spec"].get("dataset_images"), kind))
    for line in format_communication(doc["breakdown"]):
        print(line)
    sharing = core_sharing_note(doc)
    if sharing:
        print(sharing)
    if run.problem:
        raise SaveError(run.problem)
    if run.warning:
        print(printable(f"warning: {run.warning}"))
    print(printable(f"run {doc['run_id']} saved to {run.where}"))
    if run.stored and run.db_was_new:
        print(printable(new_database_note(run.db_path, at_start=False)))
