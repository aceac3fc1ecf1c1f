"""The one way Stash starts a profile as a child process: its command line and environment, and a run in the
foreground read by its protocol lines (measure/protocol.py).

The child is `python -m stash_core.api.child` with `stash profile`'s arguments: the profile flow itself, not
the `stash` command (whose parsing of every other command it does not need). Background runs for the
dashboard (engine/jobs.py) start it under a wrapper that records its exit status; a campaign
(campaign/local.py) runs one configuration after the other through run_profile_child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stash_core
from stash_core.errors import UsageError
from stash_core.measure import protocol
from stash_core.proc import end_tree

# The module a child runs (a name, not an import: it sits in a higher layer, api/, as it stores the result).
PROFILE_CHILD_MODULE = "stash_core.api.child"
STOP_GRACE_S = 10.0  # how long a stopped profile gets to save its result before its tree is ended
_KEPT_OUTPUT_LINES = 30
_WARNING = "warning: "  # how the child says what the saved run's reader should know (api/child.report)


def profile_command(db_path: Path | str, profile_args: list[str], python: str | None = None) -> list[str]:
    """`python -m stash_core.api.child ARGS --db DB --progress json`: the command of every profile Stash
    starts as a child (ARGS are `stash profile`'s). UsageError when ARGS set --db or --progress themselves."""
    cut = profile_args.index("--") if "--" in profile_args else len(profile_args)
    options, script_args = profile_args[:cut], profile_args[cut:]  # a script's own arguments are its own
    for arg in options:
        flag = arg.split("=", 1)[0]
        if flag in ("--db", "--progress"):
            raise UsageError(
                f"{flag} is set by Stash for this profile; leave it out of the profile arguments"
            )
    # -P: the current folder is not on the child's sys.path (a json.py there would shadow the standard one)
    return [python or sys.executable, "-P", "-m", PROFILE_CHILD_MODULE, *options,
            "--db", str(Path(db_path).resolve()), "--progress", "json", *script_args]  # fmt: skip


def run_profile_child(
    db_path: Path | str,
    profile_args: list[str],
    on_message: Callable[[dict[str, Any]], None],
    python: str | None = None,
    stop_grace_s: float = STOP_GRACE_S,
) -> dict[str, Any]:
    """Run one profile as a child in the foreground (profile_command) and read its protocol lines:
    each message but the last goes to `on_message` as {"kind": ..., **payload}; returns status, run_id, error,
    exit_code (the error from the DONE line, else the last error line of the output) and warnings (the
    profile's "warning: ..." lines, such as a machine that contradicts its instance label).

    Interrupted (Ctrl-C, or any exception while waiting), the child gets SIGINT and `stop_grace_s` to save
    what it measured; whatever is left of its tree is ended."""
    output: deque[str] = deque(maxlen=_KEPT_OUTPUT_LINES)
    warnings: list[str] = []
    done: dict[str, Any] = {}
    process = subprocess.Popen(
        profile_command(db_path, profile_args, python), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True, env=child_env(Path(db_path).resolve()),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            # Only a line of the child's own: one that starts with the marker (its stderr, merged here, may
            # quote a script's text, such as the failure line of a script that exited with a message).
            message = protocol.parse(line) if line.startswith(protocol.MARKER) else None
            if message is None:
                if line.strip():
                    output.append(line.rstrip())
                if line.startswith(_WARNING):
                    warnings.append(line.removeprefix(_WARNING).rstrip())
                continue
            kind, payload = message
            if kind == "DONE" and isinstance(payload, dict):
                done = payload
            elif isinstance(payload, dict):
                on_message({"kind": kind, **payload})
        exit_code = process.wait()
    except BaseException:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=stop_grace_s)
        except subprocess.TimeoutExpired:
            pass
        end_tree(process.pid, stop_grace_s, popen=process)
        raise
    status = done.get("status") or ("completed" if exit_code == 0 else "failed")
    error = done.get("error")
    if exit_code != 0 and not error:
        error = _last_error_line(output) or f"stash profile exited with code {exit_code}"
    return {
        "status": status, "run_id": done.get("run_id"), "error": error, "exit_code": exit_code,
        "warnings": warnings,
    }  # fmt: skip


def child_env(db: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with Stash on the path, the database named and the output unbuffered (read live)."""
    child_env = {**os.environ, **(env or {})}
    package_root = stash_core.PACKAGE_PARENT
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, child_env.get("PYTHONPATH")) if p)
    child_env["STASH_DB"] = str(db)
    child_env["PYTHONUNBUFFERED"] = "1"
    return child_env


def _last_error_line(lines: deque[str]) -> str | None:
    for line in reversed(lines):
        if line.startswith("stash:") or "Error" in line:
            return line.removeprefix("stash: ").strip()
    return lines[-1].strip() if lines else None
