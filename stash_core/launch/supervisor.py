"""The remote side of a multi-node launch: a supervisor that leaves nothing running, and a sweeper.

multinode.py sends this file's source text to every node and runs it with `python -c`, so a host
needs nothing installed for it: standard library only, no stash_core import, and nothing that
relies on being imported as a module (no __file__, no relative imports). Locally it also runs as
`python -m stash_core.launch.supervisor`, which is how its tests drive it.

    run TAG WORKDIR -- COMMAND...
        Change to WORKDIR and start COMMAND with STASH_LAUNCH_ID=TAG in its environment, which every
        process below it inherits (torchrun puts each worker in a session of its own, so a process
        group kill would miss them; the tag finds them wherever they are). Every tagged process is
        ended (TERM, then KILL) when stdin reaches EOF (the local ssh died, the connection dropped
        and sshd noticed, or the launcher closed it), on SIGTERM, SIGHUP or SIGINT, and after
        COMMAND exits, so that no orphaned worker survives.
        Exit status: COMMAND's own (128+N when signal N ended it); EXIT_STOPPED when stopped before
        COMMAND ended; EXIT_WORKDIR, EXIT_NOT_STARTED, EXIT_LEFT_PROCESSES as named.

    sweep TAG
        End every process that carries TAG; print "STASH_SWEEP ended=N left=M"; exit 1 when some
        outlived SIGKILL, else 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

LAUNCH_TAG_VAR = "STASH_LAUNCH_ID"
EXIT_USAGE = 2
EXIT_WORKDIR = 125  # WORKDIR could not be entered
EXIT_LEFT_PROCESSES = 126  # some tagged process outlived SIGKILL
EXIT_NOT_STARTED = 127  # COMMAND could not be started
EXIT_STOPPED = 143  # stdin EOF or a signal ended the run before COMMAND exited (128 + SIGTERM)
SWEEP_WAIT_S = 3.0  # how long each signal of a sweep waits for the tagged processes to go
_POLL_S = 0.2
_USAGE = "usage: supervisor run TAG WORKDIR -- COMMAND... | supervisor sweep TAG"


def tagged_pids(tag: str) -> list[int]:
    """Every process (but this one) whose environment holds STASH_LAUNCH_ID=tag, read from /proc."""
    needle = f"{LAUNCH_TAG_VAR}={tag}".encode()
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    if needle in environ.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found


def sweep(tag: str) -> tuple[int, int]:
    """SIGTERM, then SIGKILL, every tagged process; (most processes seen at once, how many are left)."""
    ended = 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = tagged_pids(tag)
        if not pids:
            break
        ended = max(ended, len(pids))
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + SWEEP_WAIT_S
        while time.monotonic() < deadline and tagged_pids(tag):
            time.sleep(0.05)
    return ended, len(tagged_pids(tag))


def _say(message: str) -> None:
    print(f"STASH_SUPERVISOR {message}", file=sys.stderr, flush=True)


def _watch_stdin(stop: threading.Event) -> None:
    """Set stop once stdin reaches EOF (or cannot be read)."""
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    stop.set()


def _wait(child: subprocess.Popen, stop: threading.Event) -> int | None:
    """COMMAND's exit status, or None when stop was set first."""
    code = None
    while code is None and not stop.is_set():
        try:
            code = child.wait(timeout=_POLL_S)
        except subprocess.TimeoutExpired:
            pass
    return code


def run(tag: str, workdir: str, command: list[str]) -> int:
    """Run command under the tag in workdir until it exits or we are told to stop; then sweep the tag."""
    try:
        os.chdir(workdir)
    except OSError as exc:
        _say(f"cannot use workdir {workdir!r}: {exc.strerror}")
        return EXIT_WORKDIR
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        child = subprocess.Popen(command, env={**os.environ, LAUNCH_TAG_VAR: tag}, stdin=subprocess.DEVNULL)
    except OSError as exc:
        _say(f"cannot start {command[0]}: {exc.strerror}")
        return EXIT_NOT_STARTED
    threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    code = _wait(child, stop)
    _, left = sweep(tag)
    if left:
        _say(f"could not end {left} process(es)")
        return EXIT_LEFT_PROCESSES
    if code is None:
        return EXIT_STOPPED
    return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    """argv without the program name: run TAG WORKDIR -- COMMAND...  |  sweep TAG."""
    if len(argv) == 2 and argv[0] == "sweep":
        ended, left = sweep(argv[1])
        print(f"STASH_SWEEP ended={ended} left={left}", flush=True)
        return 1 if left else 0
    if len(argv) >= 5 and argv[0] == "run" and argv[3] == "--":
        return run(argv[1], argv[2], argv[4:])
    print(_USAGE, file=sys.stderr, flush=True)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
