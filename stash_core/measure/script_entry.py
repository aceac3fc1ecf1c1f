"""Entry point of one worker process of a run of the user's own training script (launched like worker.py).

    python -m torch.distributed.run ... -m stash_core.measure.script_entry --job-json '{...}'

It installs the instrumentation (script_hooks.py), then runs the script as __main__ with its own arguments:
nothing in the script changes, and a script that works under torchrun works here. The run ends at the
stopping rule (script_stop.py), or when the script ends by itself. Rank 0 prints the result as worker.py
does (STASH-RESULT); any failure is one STASH-ERROR line naming what happened, with the last lines the
script wrote to stderr and stdout.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import os
import socket
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from stash_core import PACKAGE_PARENT, SAFE_PATH_VALUE
from stash_core.measure import protocol
from stash_core.measure.error_line import error_line, raised_at
from stash_core.measure.output_tail import OutputTail, last_words
from stash_core.measure.rank_sync import MIN_WARMUP_ITERATIONS
from stash_core.measure.script_backward import BACKWARDS_WITHOUT_STEP, no_step_in_time, no_step_message
from stash_core.measure.script_cache import cache_state_thread, evict_each_read
from stash_core.measure.script_groups import destroy_kept, end, groups_kept
from stash_core.measure.script_hooks import StepClock, install
from stash_core.measure.script_stop import StopRule, StopScript
from stash_core.measure.worker_job import WorkerJob, read_worker_job
from stash_core.terminal import one_line
from stash_core.zoo.compiler_guards import compiler_unimported


class ScriptFailed(Exception):
    """What went wrong with the script, as one line; `says_why`: the script's last line on stderr tells
    why (argparse's "error: unrecognized arguments"), so the report ends with it."""

    def __init__(self, message: str, says_why: bool = False) -> None:
        super().__init__(message)
        self.says_why = says_why


def main(argv: list[str] | None = None) -> int:
    job = read_worker_job(argv)
    rank = int(os.environ.get("RANK", "0"))
    # The protocol and the failure report write to copies of stdout and stderr, so that a script that
    # closes its own (sys.stdout.close(), os.close(1)) or replaces it still has its progress, error and result
    # reported, and its output's tail holds its own lines only.
    protocol.use_stream(_private_copy(sys.stdout))
    stderr = OutputTail(_private_copy(sys.stderr))
    sys.stderr = stderr
    _STDOUT_TAIL[0] = sys.stdout = OutputTail(sys.stdout)  # a hang's last words are often a print's
    clock = StepClock()
    rule = StopRule(job, clock, rank)
    clock.on_boundary = rule
    remove = install(clock, replay=job["data"] == "synthetic")
    stop_evicting = evict_each_read(job)
    watchdog = start_watchdog(job, clock, rank, stderr)
    cache = None

    def wind_up() -> tuple[float | None, int | None]:
        """Stash's own threads and hooks stopped: (the data's resident fraction at the start, the files
        opened under --data-dir, or None where not counted)."""
        watchdog.set()
        stop_evicting()
        remove()
        if cache is None:
            return None, None
        return cache.stop(), (cache.opens if cache.watch is not None else None)

    def left(status: int) -> None:
        """The script's os._exit(status): its run reported as one that ended by itself, then the process
        ends with that status (or 1 where the run failed), its own finally blocks and atexit hooks skipped
        as os._exit does. The other ranks are not gathered: they may not be exiting."""
        code = conclude(rank, stderr, lambda: script_end(clock, rule, status, gather=False), wind_up)
        REAL_EXIT(status or code)

    def caught_stop() -> None:
        """The script caught StopScript and stepped on: its run, measured when Stash stopped it, is reported
        as such, and the process ends as at the script's os._exit, which left() reports."""
        REAL_EXIT(conclude(rank, stderr, lambda: rule.result, wind_up))

    rule.on_caught_stop = caught_stop

    def measure() -> dict:
        nonlocal cache
        cache = cache_state_thread(job)
        with os_exit_reported(left):
            result = run_script(job, clock, rule)
        if job.get("probe") and dist.is_initialized() and dist.get_world_size() > 1 and rule.result:
            from stash_core.measure.probe_worker import run_probe_suite
            from stash_core.measure.script_stop import collective_device

            result["probe"] = run_probe_suite(job["probe"], collective_device())
        return result

    if conclude(rank, stderr, measure, wind_up):
        return 1
    if dist.is_initialized():
        destroy_kept()
    gc.collect()  # the script's loaders end their worker processes
    return 0


def conclude(rank: int, stderr: OutputTail, measure, wind_up) -> int:
    """The run's end reported: rank 0's result (0), or this rank's failure as one STASH-ERROR line (1).
    `measure` gives the result; `wind_up` stops Stash's own work after it, giving what it adds."""
    try:
        result = measure()
    except ScriptFailed as error:
        why = stderr.tail()[-1:] if error.says_why else []
        emit_error(rank, ": ".join([str(error), *(line.strip()[:300] for line in why)]), stderr)
        return 1
    except Exception as error:  # noqa: BLE001 - Stash's own side (cache state, summary, probe): one line
        emit_error(rank, error_line(error), stderr)
        return 1
    finally:
        fraction, opens = wind_up()
    if rank == 0:
        result["resident_fraction_start"] = fraction
        if opens is not None:
            result["script"]["data_dir_opens"] = opens
        protocol.emit("RESULT", result)
    return 0


REAL_EXIT = os._exit  # the process's own exit: Stash's watchdog, and the script's os._exit once reported


@contextlib.contextmanager
def os_exit_reported(report) -> Iterator[None]:
    """While the script runs, its os._exit(status) in this process calls report(status) first: os._exit
    skips the finally blocks and atexit hooks that would report the run. Processes forked from this one
    (DataLoader workers, which end with os._exit) exit as they would; so does a second caller (a thread)."""
    pid, once = os.getpid(), threading.Lock()

    def exit_reported(status):
        if os.getpid() == pid and isinstance(status, int) and once.acquire(blocking=False):
            os._exit = REAL_EXIT
            report(status)
        REAL_EXIT(status)

    os._exit = exit_reported
    try:
        yield
    finally:
        os._exit = REAL_EXIT


def run_script(job: WorkerJob, clock: StepClock, rule: StopRule) -> dict:
    path = Path(job["script"])
    try:
        code = compile(path.read_bytes(), str(path), "exec")
    except OSError as error:
        raise ScriptFailed(f"cannot read the script {one_line(path)}: {error.strerror or error}") from None
    except (SyntaxError, ValueError) as error:
        raise ScriptFailed(f"the script {one_line(path.name)} does not parse: {error}") from None
    sys.argv = [str(path), *job.get("script_args", [])]
    # Stash's folder (first on PYTHONPATH, for this entry) goes after everything else: the script's own
    # modules and packages (a package named `app`, say) are found before Stash's, as without it.
    sys.path[:] = [entry for entry in sys.path if entry != PACKAGE_PARENT] + [PACKAGE_PARENT]
    sys.path.insert(0, str(path.parent))  # as `python script.py` has it: the script's folder, not the cwd
    if os.environ.get("PYTHONSAFEPATH") == SAFE_PATH_VALUE:  # Stash's, for its worker: not the script's
        del os.environ["PYTHONSAFEPATH"]  # the script's own `python helper.py` keeps helper's folder
    try:
        # As in Stash's own workers (worker.py): on the CPU, the optimizer's and DDP's reach for torch's
        # compiler is served without importing it (2-3 s of CPU a process); a script that compiles, or asks
        # the compiler anything else, loads the real one at that moment. On a GPU the script runs as it is.
        with compiler_unimported(when=cpu_only(job)), own_workers_refused(), groups_kept(clock):
            run_as_main(code, path)
    except StopScript:
        return rule.result
    except OwnWorkers as error:
        raise ScriptFailed(str(error)) from None
    except SystemExit as error:
        return script_end(clock, rule, error.code)
    except Exception as error:  # noqa: BLE001 - the script's own error, reported as one line
        print_script_traceback(error)  # the user sees where, and it lands in the stderr tail
        at = raised_at(error, path)
        raise ScriptFailed(f"the script raised {error_line(error)}{at} ({where(clock)})") from None
    return script_end(clock, rule, None)


def print_script_traceback(error: BaseException) -> None:
    """The script's error as `python script.py` prints it: from the script's own frames on, without this
    entry's frames that ran it (run_script, run_as_main)."""
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
        frames = frames.tb_next
    traceback.print_exception(type(error), error, frames or error.__traceback__)


def script_end(clock: StepClock, rule: StopRule, status: object, gather: bool = True) -> dict:
    """What a script that ended by itself measured, `status` its exit status (sys.exit's code, os._exit's
    status; None: it returned); ScriptFailed where it failed or left nothing to time. `gather`: whether the
    other ranks may be gathered (not where this rank alone may be ending)."""
    if isinstance(status, int) and status != 0:
        raise ScriptFailed(f"the script exited with status {status} {where(clock)}", True)
    if status is not None and not isinstance(status, int):  # sys.exit("message"): status 1
        print(status, file=sys.stderr)  # as Python writes it at its exit: in the stderr tail too
        message = str(status).splitlines()[0][:300] if str(status).strip() else "(no message)"
        raise ScriptFailed(f"the script exited with status 1 {where(clock)}: {message}")
    if rule.result is not None:  # Stash stopped it, and it exited from its own finally or except
        return rule.result
    if clock.first_step_at is None:
        raise ScriptFailed(
            "the script ended without an optimizer step (Stash counts iterations by optimizer.step())"
        )
    if clock.iterations == 0:
        raise ScriptFailed("the script ended after its first optimizer step: no whole iteration to time")
    result = rule.ended_by_script(gather)
    if not result["samples"]["iteration_s"]:  # every iteration was warm-up: no figure to give
        raise ScriptFailed(
            f"the script ended after {clock.iterations + 1} optimizer steps, all of them warm-up (the "
            f"first step, which starts the clock, and at least the {MIN_WARMUP_ITERATIONS} iterations after "
            "it): no iteration is left to time, so give the script more steps"
        )
    return result


class OwnWorkers(BaseException):
    """The script started its own worker processes (torch.multiprocessing.spawn): refused at the call (a
    BaseException, as StopScript: a script's `except Exception` lets it by)."""


OWN_WORKERS = (
    "the script starts its own worker processes (torch.multiprocessing.spawn), where Stash cannot time them: "
    "Stash starts the workers itself (--workers N, with torchrun), so run the per-process function as the "
    "script's body, its rank from the environment (RANK, LOCAL_RANK, WORLD_SIZE)"
)


@contextlib.contextmanager
def own_workers_refused() -> Iterator[None]:
    """torch.multiprocessing.spawn and start_processes raise OwnWorkers while the script runs: its
    children would train without Stash's hooks while this process waited, until the start timeout."""
    import torch.multiprocessing as torch_mp

    saved = {name: getattr(torch_mp, name, None) for name in ("spawn", "start_processes")}

    def refused(*args, **kwargs):
        raise OwnWorkers(OWN_WORKERS)

    for name, original in saved.items():
        if original is not None:
            setattr(torch_mp, name, refused)
    try:
        yield
    finally:
        for name, original in saved.items():
            if original is not None:
                setattr(torch_mp, name, original)


def cpu_only(job: WorkerJob) -> bool:
    """Whether the script can only run on the CPU: asked for, or no GPU to be had."""
    asked = job.get("device") or "auto"
    return asked == "cpu" or (asked == "auto" and not torch.cuda.is_available())


def run_as_main(code, path: Path) -> None:
    """Run the compiled script as __main__, as runpy.run_path does, but without restoring sys.argv[0]
    afterwards: a script that empties sys.argv made that restore fail with IndexError."""
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=str(path), __cached__=None, __loader__=None, __package__=None,
                           __spec__=None, __builtins__=builtins)  # fmt: skip
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module  # pickling (spawned loader workers) finds the script's classes here
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def where(clock: StepClock) -> str:
    if clock.first_step_at is None:
        return "before its first optimizer step"
    return f"after {clock.iterations + 1} optimizer steps"


# How long past the run's time (or its last step, if later) a script may go without an optimizer step: a
# step then ends the run, so a script that makes none hangs (a deadlock, a blocked read) or pauses longer.
STALL_GRACE_S = 60.0
WATCH_EVERY_S = 1.0


def start_watchdog(job: WorkerJob, clock: StepClock, rank: int, stderr: OutputTail) -> threading.Event:
    """End this process when the script has not stepped in time: a hang before its first step, or no step
    for STALL_GRACE_S past the run's time. Set the returned event to stop watching."""
    timeout_s = float(job.get("start_timeout_s", 120.0))
    run_s, grace_s = float(job["max_phase_s"]), float(job.get("stall_grace_s", STALL_GRACE_S))
    started = time.perf_counter()
    stop = threading.Event()

    def fail(message: str, hung: bool = False) -> None:
        # a hang's last words say where it waits ("downloading the data set...", "waiting for the server")
        said = last_words(stderr, _STDOUT_TAIL[0]) if hung else ""
        emit_error(rank, message + said, stderr)
        REAL_EXIT(3)  # torchrun ends the other ranks; the launcher ends the whole process tree

    def watch() -> None:
        while not stop.wait(WATCH_EVERY_S):
            now, first, last = time.perf_counter(), clock.first_step_at, clock.last_step_at
            backwards = clock.backwards_before_step
            if first is None and backwards >= BACKWARDS_WITHOUT_STEP:
                fail(no_step_message(backwards))
            if first is None and now - started > timeout_s:
                fail(no_step_in_time(timeout_s, backwards), hung=True)
            if first is not None and last is not None and now > max(first + run_s, last) + grace_s:
                fail(f"no optimizer step for {now - last:.0f} s after step {clock.iterations + 1}, over "
                     f"{grace_s:g} s past this launch's {run_s:.3g} s of timing: the script hangs (a "
                     f"deadlock, a blocked read) or pauses over {grace_s:g} s between steps",
                     hung=True)  # fmt: skip

    threading.Thread(target=watch, name="stash-script-watch", daemon=True).start()
    return stop


def emit_error(rank: int, message: str, stderr: OutputTail) -> None:
    stdout = _STDOUT_TAIL[0]
    for stream in (stderr, stdout):
        with contextlib.suppress(OSError, ValueError):  # the script's closed stdout: its lines are kept
            stream.flush()
    tails = {"stderr_tail": stderr.tail(), "stdout_tail": stdout.tail()}
    protocol.emit("ERROR", {"message": f"rank {rank} ({socket.gethostname()}): {message}", **tails})


_STDOUT_TAIL: list = [None]  # the script's stdout with its last lines, set by main before anything can fail


def _private_copy(stream):
    """A text stream on a duplicate of `stream`'s descriptor (the stream itself when it has none)."""
    try:
        return os.fdopen(os.dup(stream.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    except (OSError, ValueError, AttributeError):
        return stream


if __name__ == "__main__":
    end(main())
