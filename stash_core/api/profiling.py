"""`stash_core.profile()` and `stash_core.profile_script()`: `stash profile` from Python.

The options go through the command's own parser (api/options.py) and the same flow (api/profile_flow.py):
a profile from a notebook stores the same rows as one from the terminal, and the dashboard follows it.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import stash_core
from stash_core.api.options import api_options, parse_profile, profile_argv
from stash_core.api.results import Result
from stash_core.errors import UsageError
from stash_core.pathargs import required_path
from stash_core.spec import ProfileSpec
from stash_core.spec_parse import FieldError

if TYPE_CHECKING:  # the flow loads torch, pandas and DuckDB: when profile() is called, not when looked up
    from stash_core.api.profile_flow import ProfileRun


@api_options("profile")
def profile(spec: ProfileSpec | None = None, **options: Any) -> Result:
    """Profile a training job by differential runs, write its result file and store it (`stash profile`).

    Args:
        spec: a stash.ProfileSpec to start from (its fields away from their defaults); `options` override it.
        **options: `stash profile`'s options by flag name with underscores, e.g. model="resnet10",
            batch_size=8, input_shape=(3, 32, 32), workers=2, max_phase_seconds=4, launches=1,
            db="x.duckdb" (default $STASH_DB, else ./results.duckdb), out=PATH, no_store=True,
            progress="none" (default "auto": a bar on a terminal, else a line per run, on stderr; "bar": a
            bar always; "json": protocol lines on stdout);
            or by the ProfileSpec field they set (workers_per_node=2, max_phase_s=4). Sequences are given
            as lists or tuples; script_args is the list after `--`.

    Returns:
        Result: the run id, status, iteration time, result file, database and the whole document;
        `.to_frame()` has one row per stall.

    Raises:
        UsageError: an unknown option or a value `stash profile` refuses, before anything runs (the same
            one line the command prints).
        MeasurementError: a run failed; what was measured is saved first (the exception's note says where).
        KeyboardInterrupt: interrupted (Ctrl-C, or the dashboard's Cancel run, which ends only the
            profile's own launches); saved first likewise.
    """
    from stash_core.api.profile_flow import run_profile_flow

    argv = profile_argv(spec, options)
    args, db_path = parse_profile(argv)
    notify = _quiet if args.progress == "none" else _note  # progress="none": nothing on stderr at all
    run = run_profile_flow(args, db_path, ["stash", "profile", *argv], _raise_early_end, notify, "python")
    return Result.from_document(
        run.doc, result_file=run.out_path, db=run.db_path if run.in_database else None, warning=run.warning,
        save_problem=run.problem,
    )  # fmt: skip


@api_options("profile_script")
def profile_script(script: str | Path | None = None, /, *args: str, **options: Any) -> Result:
    """Profile your own training script, run unmodified under torchrun in each run (`stash profile
    --script`); its batch size is measured from its first batch.

    Args:
        script: the training script's path (first, or as script=).
        *args: the script's own arguments (what follows `--` on the command line).
        **options: as for `profile()`, e.g. workers=2, data_dir=PATH (the files it reads), db=PATH.

    Returns:
        Result: as `profile()` returns it; the model is named "script:NAME".

    Raises:
        UsageError: a bad option, or a script that cannot be read, before anything runs.
        MeasurementError: a run failed (saved first, as by `profile()`).
    """
    if "script" in options:  # script= as a keyword: the same, given once
        if script is not None:
            raise UsageError("profile_script: give the script once, as its first argument or as script=")
        script = options.pop("script")
    if "script_args" in options:  # the script's arguments are those after it; given twice they would clash
        raise UsageError(
            "profile_script: give script_args as the arguments after the script, not as script_args="
        )
    script = required_path("script", script)  # not str(None): a file named "None" would be profiled
    given = [os.fspath(arg) if isinstance(arg, os.PathLike) else arg for arg in args]  # a Path is its text
    try:
        return profile(script=str(script), script_args=given, **options)  # each checked as text there
    except UsageError as error:  # profile()'s checks, named as this function's
        text = str(error.args[0]) if len(error.args) == 1 else ""
        if type(error) in (UsageError, FieldError) and text.startswith("profile: "):
            error.args = ("profile_script: " + text.removeprefix("profile: "),)
        raise


def _raise_early_end(run: ProfileRun) -> None:
    """A failed or interrupted profile raises its error, noted with where it is saved; a save that lost a
    copy is a warning beside the result (the run itself is measured)."""
    if run.error is not None:
        run.error.add_note(run.early_end_line())
        raise run.error
    if run.problem:
        warnings.warn(run.problem, RuntimeWarning, stacklevel=_first_outside_stash())


def _first_outside_stash() -> int:
    """The stack level, from the caller, of the first frame outside Stash's package: a warning names the
    caller's line (profile() and profile_script() reach here through different numbers of frames)."""
    package = str(Path(stash_core.__file__).parent) + "/"
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # beside the progress lines, never in the caller's output


def _quiet(text: str) -> None:
    """A note dropped (progress="none" prints nothing): the new database it names is Result.db."""
