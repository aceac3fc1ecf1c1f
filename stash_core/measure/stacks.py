"""The Python stacks of a launch's ranks when its hang watch stops it (launch/hang_watch.py): which rank was
stuck where, and which were waiting for it in a collective.

A worker asked to (the job's "dump_stacks") registers faulthandler on SIGUSR1, to write every thread's stack
to a file of its own in the launch's private $TMPDIR, named by its rank and process id. faulthandler writes
from the signal handler itself, so a rank blocked inside a collective's C++ code dumps too (a Python handler
would wait for the call to return). The launcher signals each of its workers that made such a file, reads
the files back, and says which rank was where.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import threading
import time
from pathlib import Path

SIGNAL = signal.SIGUSR1
WAIT_S = 3.0  # for the dumps to be written: each is written at once, unless the machine is starved
MAX_LINES_PER_RANK = 20  # the innermost frames: where the rank is, not how it got there
_NAME = "stash-stacks-rank{rank}-pid{pid}.txt"
_FILE = re.compile(r"^stash-stacks-rank(\d+)-pid(\d+)\.txt$")
_MAIN = re.compile(r"^main thread (0x[0-9a-f]+)$")
_FRAME = re.compile(r'^\s*File "(.+)", line (\d+) in (.+)$')
# A rank whose innermost frame is here waits for its peers: a collective, or the end of a backward pass,
# which waits for DDP's gradient all-reduce.
_COLLECTIVE = re.compile(r"/torch/(distributed|autograd|nn/parallel)/")
_open: list = []  # the file faulthandler writes to: open for the worker's whole life


def dump_on_signal(rank: int) -> None:
    """In a worker: on SIGNAL, every thread's stack into this rank's file in $TMPDIR (nothing without one, or
    where the file cannot be made)."""
    folder = os.environ.get("TMPDIR")
    if not folder or not os.path.isdir(folder):
        return
    try:
        stream = open(os.path.join(folder, _NAME.format(rank=rank, pid=os.getpid())), "w")  # noqa: SIM115
    except OSError:
        return  # a full or odd $TMPDIR: the run goes on, and a hang is said without this rank's stack
    _open.append(stream)
    # which of the dump's threads is the main one, which runs the loop: faulthandler names threads by id
    # only, and cuts a stack past 100 frames, Stash's outermost ones with it (a deeply recursive model)
    stream.write(f"main thread 0x{threading.main_thread().ident:016x}\n")
    stream.flush()
    faulthandler.register(SIGNAL, file=stream, all_threads=True, chain=False)


def dump_stacks(folder: str, pids: set[int], wait_s: float = WAIT_S) -> dict[int, list[str]]:
    """Each rank's stack lines, by rank: every worker among `pids` (the launch's processes) that made a file
    in `folder` is signalled, and its file read once the dumps stop growing (or after `wait_s`)."""
    files: dict[int, Path] = {}
    before: dict[int, int] = {}  # each file's size when signalled: its header line, or an earlier dump
    for path in Path(folder).glob("stash-stacks-rank*-pid*.txt"):
        match = _FILE.match(path.name)
        if match is None or int(match[2]) not in pids:
            continue  # a data loader process inherits the handler, not the file name: never signalled
        before[int(match[1])] = _size(path)
        try:
            os.kill(int(match[2]), SIGNAL)
        except OSError:
            continue
        files[int(match[1])] = path
    deadline, sizes = time.monotonic() + wait_s, None
    while files and time.monotonic() < deadline:
        time.sleep(0.1)
        now = {rank: _size(path) for rank, path in files.items()}
        if all(now[rank] > before[rank] for rank in now) and now == sizes:
            break  # every rank has written, and none is still writing
        sizes = now
    stacks = {}
    for rank, path in sorted(files.items()):
        try:
            stacks[rank] = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
    return stacks


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def where_ranks_were(stacks: dict[int, list[str]]) -> str | None:
    """'rank 1 was in forward (m.py, line 16); rank 0 was waiting in a collective', or None without stacks."""
    waiting, elsewhere = [], []
    for rank, lines in stacks.items():
        frame = next(filter(None, map(_FRAME.match, _loop_thread(lines))), None)  # the innermost
        if frame is None:
            continue
        if _COLLECTIVE.search(frame[1]):
            waiting.append(str(rank))
        else:
            elsewhere.append(f"rank {rank} was in {frame[3].strip()} ({frame[1]}, line {frame[2]})")
    if waiting:
        ranks = f"rank {waiting[0]} was" if len(waiting) == 1 else f"ranks {', '.join(waiting)} were"
        elsewhere.append(f"{ranks} waiting in a collective")
    return "; ".join(elsewhere) or None


def _loop_thread(lines: list[str]) -> list[str]:
    """The dump's lines of the thread that runs Stash's loop: the main thread where the dump names it, else
    one with Stash's frames, else the first; its header, then its frames, the most recent first."""
    threads: list[list[str]] = []
    main = next(filter(None, map(_MAIN.match, lines)), None)
    for line in lines:
        if line.startswith(("Thread ", "Current thread ")):
            threads.append([])
        if threads and line.strip():
            threads[-1].append(line.rstrip())
    mains = [thread for thread in threads if main and f" {main[1]} " in thread[0]]
    ours = [thread for thread in threads if any("/stash_core/measure/" in line for line in thread)]
    return (mains or ours or threads or [[]])[0]


def stack_tail(stacks: dict[int, list[str]]) -> list[str]:
    """The stacks as the lines of a failed run's stderr tail: under each rank's name, the innermost frames of
    its thread that ran the loop."""
    tail: list[str] = []
    for rank, lines in stacks.items():
        tail.append(f"rank {rank}:")
        tail.extend(_loop_thread(lines)[: MAX_LINES_PER_RANK + 1])
    return tail
