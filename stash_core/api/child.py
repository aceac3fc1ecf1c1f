"""`python -m stash_core.api.child PROFILE_ARGS`: one profile in a process of its own, the way the dashboard's
background runs (engine/jobs.py) and a campaign's profiles (campaign/local.py) start it
(engine/profile_child.py builds the command).

The arguments are `stash profile`'s, parsed by the same parser; the flow is the command's
(api/profile_flow.py). What the parent reads: protocol lines on stdout with --progress json (PHASE,
PROGRESS and the DONE line once the run is saved), "stash: ..." lines on stderr for a refused or failed
profile, and the command's exit status (exits.run_command: 2 bad input, 1 failed, 130/143/129 stopped).
A completed profile ends with "run RUN_ID saved to ..." (the breakdown itself is in the database).
"""

from __future__ import annotations

import sys

from stash_core import containment
from stash_core.api.options import parse_profile
from stash_core.api.profile_flow import ProfileRun, run_profile_flow
from stash_core.errors import SaveError
from stash_core.exits import refuse_undecodable, refuse_vanished_folder, run_command


def main(argv: list[str] | None = None) -> int:
    """Run the profile of `argv` (default: this process's arguments); its exit status."""

    def command() -> int:
        given = sys.argv[1:] if argv is None else argv
        refuse_undecodable(given)
        refuse_vanished_folder()
        args, db_path = parse_profile(given)
        containment.enable()  # a user's model code runs in a child of its own, as under `stash profile`
        run_profile_flow(args, db_path, list(sys.argv), report, lambda note: print(note, flush=True))
        return 0

    return run_command(command)


def report(run: ProfileRun) -> None:
    """The end of a saved run: a failed or interrupted one raises its error after where it is saved, one
    saved only in part raises SaveError; a completed one says where it is."""
    if run.error is not None:
        print(f"stash: {run.early_end_line()}", file=sys.stderr)
        raise run.error
    if run.problem:
        raise SaveError(run.problem)
    if run.warning:
        print(f"warning: {run.warning}")
    print(f"run {run.doc['run_id']} saved to {run.where}")


if __name__ == "__main__":
    sys.exit(main())
