"""A user's model code run in a child process, so that nothing it does reaches what Stash prints or writes.

The child is forked (torch and the step model already imported: no second start-up) into a process group of
its own. Its standard output and error go to a pipe that the parent forwards to its own standard error, line
by line and marked as the model's, so a factory that prints cannot break `--format json`; its working
folder, signal handlers, threads and forks are its own. It sends back one pickled answer (the value, or the
StashError to raise) and ends with os._exit, so a thread the factory left running cannot keep the command
alive. The parent waits at most the user-code time limit plus a grace, then kills the child's whole group.
"""

from __future__ import annotations

import os
import pickle
import posix
import selectors
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from stash_core import containment
from stash_core.errors import StashError, UsageError
from stash_core.proc import end_with_parent
from stash_core.zoo.user_limits import LIMIT_VAR, UserModelError, user_code_limit_s

T = TypeVar("T")
GRACE_S = 2.0  # beyond the user-code limit: the answer's pickling and sending
MAX_FORWARDED_BYTES = 64 * 1024  # of the model's own output; more is cut (a factory printing in a loop)


HEADER_BYTES = 8


def contained(what: str, function: Callable[..., T], *args: Any) -> T:
    """function(*args) run in a child process (in a new interpreter first in the dashboard's server, in this
    process where containment is off: stash_core/containment.py); its value, or the StashError it raised (one
    line); a UserModelError when the child dies, exits or runs past the limit. `function` is a module's own
    function and `args` can be pickled (both cross to a new interpreter)."""
    if containment.FRESH_PROCESS and not containment.ENABLED:
        return _in_new_interpreter(what, function, args)
    if not containment.ENABLED:
        return function(*args)
    limit_s = user_code_limit_s()
    answer_read, answer_write = os.pipe()
    output_read, output_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(function, args, answer_write, output_write, (answer_read, output_read))
    os.close(answer_write)
    os.close(output_write)
    try:
        # Twice the limit: a factory is built on the meta device first and, failing there, for real.
        answer, timed_out = _wait(answer_read, output_read, 2 * limit_s + GRACE_S, what)
        status = None if answer is not None or timed_out else _reaped(pid)
    finally:
        os.close(answer_read)
        os.close(output_read)
        _kill_group(pid)
    if answer is None:
        if timed_out or status is None:
            raise UserModelError(f"{what} did not finish within {limit_s:g} s (time limit; {LIMIT_VAR})")
        raise UserModelError(f"{what} ended its process ({_status_text(status)}) before giving an answer")
    kind, value = answer
    if kind == "error":
        raise value
    return value


def _child(
    function: Callable[..., Any], args: tuple, answer_write: int, output_write: int, unused: tuple
) -> None:
    code = 0
    me = os.getpid()
    try:
        os.setpgid(0, 0)
        end_with_parent()
        for fd in unused:
            os.close(fd)
        os.dup2(output_write, 1)
        os.dup2(output_write, 2)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        # Python's own streams onto those descriptors (a caller may have replaced them with buffers)
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")  # noqa: SIM115
        torch = sys.modules.get("torch")
        if torch is not None:  # a forked child cannot use the parent's OpenMP threads (a parallel op hangs
            torch.set_num_threads(1)  # once the parent used them): its small CPU counts run on one thread
        try:
            answer: tuple[str, Any] = ("value", function(*args))
        except StashError as error:
            answer = ("error", error)
        except BaseException as error:  # anything the user's code raised, GeneratorExit and SystemExit too
            text = " ".join(str(error).split())[:300]
            said = f"{type(error).__name__}: {text}" if text else type(error).__name__
            answer = ("error", UsageError(f"the model's code raised {said}"))
        if os.getpid() != me:  # a process the user's code forked: only the child answers
            posix._exit(0)
        try:
            data = pickle.dumps(answer)
        except Exception as error:
            data = pickle.dumps(("error", UsageError(f"the model's answer could not be sent back: {error}")))
        view = memoryview(len(data).to_bytes(HEADER_BYTES, "big") + data)
        while view:
            view = view[os.write(answer_write, view) :]
    except BaseException:
        code = 70
    finally:
        posix._exit(code)  # not os._exit: the user's code, or a limit around it, may have replaced it


def _wait(answer_fd: int, output_fd: int, timeout_s: float, what: str) -> tuple[Any, bool]:
    """(the child's answer or None, whether it ran past `timeout_s`); the model's own output forwarded
    meanwhile."""
    selector = selectors.DefaultSelector()
    selector.register(answer_fd, selectors.EVENT_READ, "answer")
    selector.register(output_fd, selectors.EVENT_READ, "output")
    received = bytearray()
    forwarded = 0
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, True
        for key, _ in selector.select(left):
            data = os.read(key.fd, 65536)
            if key.data == "output":
                if not data:
                    selector.unregister(key.fd)
                elif forwarded < MAX_FORWARDED_BYTES:
                    forwarded += len(data)
                    _forward(data, what)
                continue
            if not data:
                return None, False  # the child ended without an answer
            received += data
        if len(received) >= HEADER_BYTES:
            size = int.from_bytes(received[:HEADER_BYTES], "big")
            if len(received) >= HEADER_BYTES + size:
                return pickle.loads(bytes(received[HEADER_BYTES : HEADER_BYTES + size])), False


def _reaped(pid: int) -> int | None:
    """The child's exit status once it has ended (waiting up to a second), None while it runs."""
    for _ in range(20):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        time.sleep(0.05)
    return None


def _forward(data: bytes, what: str | None) -> None:
    """The model's own output on Stash's standard error, as text with control characters escaped, each line
    marked as the model's (None: marked already, by the interpreter that ran it)."""
    from stash_core.terminal import printable

    mark = f"[{what}] " if what is not None else ""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            print(f"{mark}{printable(line)}", file=sys.stderr)


def _kill_group(pid: int) -> None:
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit code {os.WEXITSTATUS(status)}"


# A new interpreter imports torch and Stash before it forks the child: seconds, on top of the code's limit.
INTERPRETER_START_S = 60.0
ANSWER_A_CALL = "from stash_core.zoo.contained import answer_a_call; answer_a_call()"


def _in_new_interpreter(what: str, function: Callable[..., T], args: tuple) -> T:
    """contained() run by a new interpreter (answer_a_call) with containment on: the
    call goes to it pickled on its standard input, the answer comes back on its standard output."""
    import subprocess

    from stash_core import PACKAGE_PARENT

    limit_s = user_code_limit_s()
    call = pickle.dumps((what, function.__module__, function.__qualname__, args))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")])),
    }
    try:
        done = subprocess.run(
            # -P: no current folder on sys.path, where a stray json.py would shadow the standard one
            [sys.executable, "-P", "-c", ANSWER_A_CALL],
            input=call, capture_output=True, env=env,
            timeout=2 * limit_s + GRACE_S + INTERPRETER_START_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise UserModelError(
            f"{what} did not finish within {limit_s:g} s (time limit; {LIMIT_VAR})"
        ) from None
    _forward(done.stderr[-MAX_FORWARDED_BYTES:], None)
    try:
        kind, value = pickle.loads(done.stdout)
    except Exception:  # no answer: the interpreter ended first
        raise UserModelError(
            f"{what} ended its process (exit code {done.returncode}) before giving an answer"
        ) from None
    if kind == "error":
        raise value
    return value


def answer_a_call() -> None:
    """The new interpreter's side: read the pickled call, run it contained, write the pickled answer."""
    import importlib

    what, module, name, args = pickle.loads(sys.stdin.buffer.read())
    containment.enable()
    function = importlib.import_module(module)
    for part in name.split("."):
        function = getattr(function, part)
    try:
        answer: tuple[str, Any] = ("value", contained(what, function, *args))
    except StashError as error:
        answer = ("error", error)
    sys.stdout.buffer.write(pickle.dumps(answer))
    sys.stdout.flush()
