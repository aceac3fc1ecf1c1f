"""Launch one run on this machine with torchrun and read its protocol lines.

torchrun and its workers (and their data-loader processes) run in their own session, so that
an error, a timeout, Ctrl-C, SIGTERM or SIGHUP (interrupts.Stopped) ends every one of them by process group,
leaving no orphans. They run under the supervisor of multi-node launches (launch/supervisor.py), which tags
every process below it and ends each tagged one when the command exits (a training script's leftover
children, a double-forked daemon that holds the output pipe) and when its stdin, a pipe only this process
holds, reaches EOF: so even a SIGKILL of `stash` ends the whole run. Within a profile of Stash's own CPU
workers, torchrun is instead forked from the profile's warm starter (launch/warm_start.py), which gives the
same guarantees with its own tag and socket.
"""

from __future__ import annotations

import getpass
import os
import re
import secrets
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stash_core.errors import MeasurementError
from stash_core.interrupts import check_stop_request, held_interrupts, stop_exception
from stash_core.launch import supervisor, torchrun, warm_start
from stash_core.launch.hang_watch import HangWatch, hung_error
from stash_core.launch.warm_start import WarmLaunch
from stash_core.proc import end_tree, remove_folders_of_ended

KILL_GRACE_S = 5.0
LINE_END = re.compile(rb"\r\n|\r|\n")
TORCHRUN_MODULE = "stash_core.launch.torchrun"


def torchrun_argv(
    nproc_per_node: int, module: str, module_args: list[str], on_cpu: bool = False
) -> list[str]:
    """The command line of `nproc_per_node` processes of `module` under torchrun on this machine alone
    (Stash's own workers forked from torchrun when they run on the CPU: launch/torchrun.py)."""
    return [
        sys.executable, "-m", TORCHRUN_MODULE, "--standalone", "--local-addr", torchrun.LOOPBACK,
        "--nnodes", "1", "--nproc-per-node", str(nproc_per_node), "--max-restarts", "0",
        *torchrun.entry(module, on_cpu), *module_args,
    ]  # fmt: skip


def run_local(
    argv: list[str],
    on_line: Callable[[str], None],
    timeout_s: float,
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
    watch: HangWatch | None = None,
) -> list[str]:
    """Run argv, feeding each stdout/stderr line to on_line; return stderr's last lines on failure.

    Raises MeasurementError when the process fails, runs past timeout_s, or `watch` (which on_line arms and
    disarms) finds its timed loop hung.
    """
    # torchrun's log folder (a torchelastic_* folder per launch in $TMPDIR otherwise) and its children's
    # $TMPDIR: one private folder per launch, removed when the launch ends, however it ends; named with this
    # process's id, so that one left by a profile killed hard is swept by the next (_sweep_once).
    _sweep_once()
    temp_dir = tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{os.getpid()}-")
    try:
        process = _start(with_log_dir(argv, temp_dir), env, preexec, temp_dir)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    stderr_tail: list[str] = []
    deadline_s = time.monotonic() + timeout_s
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout.fileno(), selectors.EVENT_READ, _Lines("out"))
            selector.register(process.stderr.fileno(), selectors.EVENT_READ, _Lines("err"))
            open_streams = 2
            while open_streams:
                remaining = deadline_s - time.monotonic()
                if remaining <= 0:
                    raise _out_of_time(timeout_s, process.pid, temp_dir, watch)
                for key, _ in selector.select(timeout=min(remaining, 1.0)):
                    lines, ended = key.data.read(key.fd)
                    for line in lines:
                        if key.data.stream == "err":
                            stderr_tail = (stderr_tail + [line.rstrip()])[-40:]
                        on_line(line)
                    if ended:
                        selector.unregister(key.fd)
                        open_streams -= 1
                reason = watch.check(process.pid) if watch is not None else None
                if reason:
                    raise hung_error(reason, process.pid, temp_dir)
                check_stop_request()  # the dashboard's Cancel of a profile run from Python
        try:
            process.wait(timeout=max(deadline_s - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            raise _out_of_time(timeout_s, process.pid, temp_dir, watch) from None
    finally:
        # Ctrl-C, SIGTERM or SIGHUP arriving now must not cut the cleanup short and leave workers behind.
        with held_interrupts() as interrupted:
            if isinstance(process, WarmLaunch):
                process.stop()
            else:
                stop_process_group(process)
                for stream in (process.stdin, process.stdout, process.stderr):  # read raw, never closed
                    if stream is not None:
                        stream.close()
            shutil.rmtree(temp_dir, ignore_errors=True)
        if interrupted:
            raise stop_exception(interrupted[0])
    if process.returncode != 0:
        return stderr_tail or [f"exit status {process.returncode}"]
    return []


def _out_of_time(timeout_s: float, root_pid: int, temp_dir: str, watch: HangWatch | None) -> MeasurementError:
    """The error of a launch past its time limit, with where each rank was when its ranks can say (those a
    hang watch looks after dump their stacks on request): a hang before the timed loop, which the watch does
    not time, ends here."""
    reason = f"run did not finish within {timeout_s:.0f} s; stopped it"
    return hung_error(reason, root_pid, temp_dir) if watch is not None else MeasurementError(reason)


class _Lines:
    """The whole lines of one pipe as they arrive. Read raw: a buffered reader keeps lines that select()
    no longer sees, and a loop's end (LOOP_END) held back would look like a hung rank to the hang watch."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.partial = b""

    def read(self, fd: int) -> tuple[list[str], bool]:
        """(the complete lines now readable, whether the pipe ended); the last one may lack its newline."""
        data = os.read(fd, 65536)
        if not data:
            rest, self.partial = self.partial.rstrip(b"\r"), b""
            return ([rest.decode(errors="replace")] if rest else []), True
        # "\r" ends a line too (a progress bar redraws with it), "\r\n" once: a "\r" at the end waits for
        # what follows it.
        text = self.partial + data
        cut = len(text) - 1 if text.endswith(b"\r") else len(text)
        *lines, rest = LINE_END.split(text[:cut])
        self.partial = rest + text[cut:]
        return [line.decode(errors="replace") for line in lines], False


_TEMP_PREFIX = "stash-launch-"
_swept: list[bool] = []


def _sweep_once() -> None:
    """The launch folders of profiles killed hard (their process ended), once per process."""
    if not _swept:
        _swept.append(True)
        remove_folders_of_ended(Path(tempfile.gettempdir()), _TEMP_PREFIX)


def with_log_dir(argv: list[str], folder: str) -> list[str]:
    """A torchrun argv (torchrun_argv's) with its log folder in `folder`; any other argv as it is."""
    if argv[1:3] != ["-m", TORCHRUN_MODULE]:
        return argv
    return [*argv[:3], "--log-dir", folder, *argv[3:]]


def _start(
    argv: list[str], env: dict[str, str] | None, preexec, temp_dir: str
) -> subprocess.Popen | WarmLaunch:
    """The launch forked by the profile's warm starter where it serves it (launch/warm_start.py), else
    argv started anew under the supervisor, with `temp_dir` as its $TMPDIR."""
    starter = warm_start.active()
    forked = argv[1:3] == ["-m", TORCHRUN_MODULE] and torchrun.FORK_OPTION in argv
    if starter is not None and forked and starter.serves(env, preexec):
        launch = starter.launch(argv[3:], temp_dir)
        if launch is not None:
            return launch
    tag = f"local-{os.getpid()}-{secrets.token_hex(4)}"
    supervised = [sys.executable, supervisor.__file__, "run", tag, os.getcwd(), "--", *argv]
    return subprocess.Popen(
        supervised,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE,  # never written: its EOF (this process gone) ends the run
        start_new_session=True,
        env={**os.environ, **compile_cache_env(), **(env or {}), "TMPDIR": temp_dir},
        preexec_fn=preexec,
    )


def compile_cache_env() -> dict[str, str]:
    """torch.compile's cache where it is without a private $TMPDIR ($TMPDIR/torchinductor_<user>), so that a
    compiling script or model does not compile anew in every launch; nothing where the user has set one."""
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return {}
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = str(os.getuid())
    user = re.sub(r'[\\/:*?"<>|]', "_", user)  # as torch makes the name
    return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")}


def stop_process_group(process: subprocess.Popen) -> None:
    """End the process and everything it started: TERM, then KILL after a grace (see stash_core.proc)."""
    end_tree(process.pid, KILL_GRACE_S, popen=process)
