"""Each local launch's torchrun forked from one process that imported torch once for the whole profile.

A torchrun started anew spends 1.5-2 s of CPU importing torch before it forks Stash's workers, and a
profile on this machine makes a dozen launches or more (bench/launch_startup.py measures it). Here one
server process, started once per profile, imports torch.distributed.run and Stash's worker modules, and
forks each launch's torchrun from itself: the same main() with the same arguments, output and exit status
(launch/torchrun.py), with nothing imported again. It applies where the workers themselves are forked from
torchrun (Stash's own workers on the CPU: torchrun.FORKED), so a launch's processes start from the same
state as before, one fork further down. Unlike interpreters started anew, every launch then shares the
server's address-space layout and string-hash seed; bench/launch_variance.py, run before and after, found
launches disagreeing by as much as before (docs/measurements/launch-variance.txt).

Nothing is left behind, as under the supervisor (launch/supervisor.py):
- the server runs with STASH_LAUNCH_ID=TAG, a tag of its own that every process forked below it inherits;
  launches run one at a time, so after each one (its torchrun gone, or stopped) the server ends every
  other process carrying the tag;
- the server reads its socket while a launch runs: a "stop" ends the launch's processes at once, and the
  socket's EOF (the profile ended, or `stash` was killed) ends them and the server.

The launch's processes were waited for by the server, not by `stash`: their CPU time comes back with the
launch's exit status, so machine_load still counts it as the launch's own (server_cpu_s).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import random
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator

import psutil

from stash_core.launch import supervisor, torchrun

MESSAGE_BYTES = 1 << 20  # read buffer; a message over the socket's send buffer (~200 KiB) is refused
SERVER_REPLY_S = 120.0  # a launch request's answer, the server's own import included
STOP_REPLY_S = 3 * supervisor.SWEEP_WAIT_S + 5.0  # a stop's sweep: TERM, then KILL, each waited for
_POLL_S = 0.2  # how often a launch's exit is looked at where the kernel has no pidfd

_local = threading.local()  # the server of the profile running in this thread (warm_launches)


def serve(fd: int) -> int:
    """The server: import once, then fork one torchrun per request on the socket `fd`, until its EOF."""
    connection = socket.socket(fileno=fd)
    import torch.distributed.run  # noqa: F401 - the import every launch would otherwise pay

    for module in torchrun.FORKED:  # the workers' modules too: torchrun runs them from sys.modules' state
        importlib.import_module(module)
    tag = os.environ[supervisor.LAUNCH_TAG_VAR]
    try:
        return _serve_launches(connection, tag)
    finally:  # whatever ends the server (EOF, a reply that cannot be sent): nothing it forked stays
        supervisor.sweep(tag)


def _serve_launches(connection: socket.socket, tag: str) -> int:
    """One launch at a time, for each request on the socket, until its EOF."""
    while True:
        request = _receive(connection, with_fds=True)
        if request is None:
            return 0
        message, fds = request
        if "args" not in message:  # a "stop" that crossed its launch's exit: nothing runs to stop
            for descriptor in fds:
                os.close(descriptor)
            continue
        pid = os.fork()
        if pid == 0:
            _run_torchrun(connection, message, fds)  # never returns
        for descriptor in fds:
            os.close(descriptor)
        _send(connection, {"pid": pid})
        status, cpu_s, ended = _wait_launch(connection, pid)
        supervisor.sweep(tag)  # what the launch left (none, when it ended well), and all of it when stopped
        if ended:
            return 0
        code = os.waitstatus_to_exitcode(status)
        _send(connection, {"exit": code if code >= 0 else 128 - code, "cpu_s": cpu_s})


def _run_torchrun(connection: socket.socket, message: dict, fds: list[int]) -> None:
    """The forked child: torchrun's main() with the launch's arguments, its output on the launch's pipes."""
    code = 1
    try:
        connection.close()
        os.setsid()  # a session of its own, as a launch under the supervisor has
        signal.signal(signal.SIGINT, signal.default_int_handler)  # not the server's: as a process anew
        random.seed()  # not the server's sequence, shared by every launch
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for descriptor in (null, *fds):
            os.close(descriptor)
        os.chdir(message["cwd"])
        if message.get("tmpdir"):  # the launch's own folder, removed when it ends: not the server's
            os.environ["TMPDIR"] = message["tmpdir"]
            tempfile.tempdir = None  # gettempdir() reads $TMPDIR again
        sys.argv = ["torchrun", *message["args"]]
        torchrun.main()  # exits at once when it has succeeded
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - said on the launch's stderr, as a torchrun started anew would
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _wait_launch(connection: socket.socket, pid: int) -> tuple[int, float, bool]:
    """(wait status, CPU seconds of the launch's processes, whether the socket ended): the launch's exit,
    or its end by a "stop" or the socket's EOF (its processes ended, then reaped)."""
    try:
        exited = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exited = None
    ended = stopped = False
    try:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, usage.ru_utime + usage.ru_stime, ended
            watched = ([] if stopped else [connection]) + ([exited] if exited is not None else [])
            timeout_s = None if exited is not None and watched else _POLL_S
            readable, _, _ = select.select(watched, [], [], timeout_s)
            if connection in readable:
                ended = _receive(connection, with_fds=False) is None
                stopped = True
                supervisor.sweep(os.environ[supervisor.LAUNCH_TAG_VAR])  # "stop", or the socket's EOF
    finally:
        if exited is not None:
            os.close(exited)


def _send(connection: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(connection, [data], fds)
    else:
        connection.sendall(data)


def _receive(connection: socket.socket, with_fds: bool) -> tuple[dict, list[int]] | None:
    """The next message (and the descriptors it carries), None at EOF."""
    try:
        if with_fds:
            data, fds, _, _ = socket.recv_fds(connection, MESSAGE_BYTES, 2)
        else:
            data, fds = connection.recv(MESSAGE_BYTES), []
    except OSError:
        return None
    if not data:
        return None
    return json.loads(data), list(fds)


class WarmStarter:
    """The server of one profile (a context manager), and the launches it forks (launch)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)  # the launches' environment: a launch that asks for another starts anew
        self.tag = f"warm-{os.getpid()}-{secrets.token_hex(6)}"
        self.reaped_cpu_s = 0.0
        self.broken = False
        self._process: subprocess.Popen | None = None
        self._connection: socket.socket | None = None

    def __enter__(self) -> WarmStarter:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            try:
                self._process = self._start_server(theirs)
            except OSError:  # no server: every launch starts anew, as without one
                self.broken = True
                ours.close()
                return self
        self._connection = ours
        return self

    def _start_server(self, theirs: socket.socket) -> subprocess.Popen:
        return subprocess.Popen(
            # -P: no current folder on sys.path, where a stray json.py would shadow the standard one
            [sys.executable, "-P", "-m", "stash_core.launch.warm_start", str(theirs.fileno())],
            env={**os.environ, **self.env, supervisor.LAUNCH_TAG_VAR: self.tag},
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # a server that fails is a launch started anew, not a traceback
            start_new_session=True,  # Ctrl-C reaches `stash`, which stops the launch and then this
        )

    def __exit__(self, *_exc) -> None:
        if self._connection is not None:
            self._connection.close()  # EOF: the server ends what runs and exits
        if self._process is not None:
            try:
                self._process.wait(timeout=STOP_REPLY_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        supervisor.sweep(self.tag)  # whatever a server that died left behind

    def serves(self, env: dict[str, str] | None, preexec) -> bool:
        """Whether a launch with this environment and set-up can be forked here."""
        if self.broken or self._connection is None or preexec is not None:
            return False
        return {**os.environ, **(env or {})} == {**os.environ, **self.env}

    def launch(self, args: list[str], temp_dir: str | None = None) -> WarmLaunch | None:
        """A launch of torchrun with `args` (launch/torchrun.py's) and `temp_dir` as its $TMPDIR (as a launch
        started anew has: its workers' loaders keep their sockets there), or None when the server is gone
        (the caller then starts one anew)."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        message: dict = {}
        try:
            try:
                request = {"args": args, "cwd": os.getcwd(), "tmpdir": temp_dir}
                _send(self._connection, request, [out_write, err_write])
            except OSError as error:  # too large a message: this launch alone starts anew
                if error.errno != errno.EMSGSIZE:
                    raise
                return None
            # The first launch waits for the server's import; one that never answers is given up on.
            if select.select([self._connection], [], [], SERVER_REPLY_S)[0]:
                reply = _receive(self._connection, with_fds=False)
                message = reply[0] if reply is not None else {}
        except OSError:
            message = {}
        finally:
            os.close(out_write)
            os.close(err_write)
            if "pid" not in message:
                os.close(out_read)
                os.close(err_read)
        if "pid" not in message:  # the server is gone or stuck: end what it may have started
            self.broken = True
            supervisor.sweep(self.tag)
            return None
        return WarmLaunch(self, int(message["pid"]), out_read, err_read)


class WarmLaunch:
    """One forked launch, read as run_local reads a subprocess: stdout, stderr, pid, wait(), returncode."""

    def __init__(self, starter: WarmStarter, pid: int, out_fd: int, err_fd: int) -> None:
        self.starter = starter
        self.pid = pid
        self.stdout = open(out_fd, "rb", buffering=0)  # noqa: SIM115 - read raw by run_local, closed by stop()
        self.stderr = open(err_fd, "rb", buffering=0)  # noqa: SIM115
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, once the server has reaped the launch (subprocess.TimeoutExpired before)."""
        if self.returncode is None:
            connection = self.starter._connection
            readable, _, _ = select.select([connection], [], [], timeout)
            if not readable:
                raise subprocess.TimeoutExpired("torchrun", timeout)
            self._take(_receive(connection, with_fds=False))
        return self.returncode

    def stop(self) -> None:
        """End the launch's processes (if it still runs) and close its pipes."""
        if self.returncode is None:
            try:
                _send(self.starter._connection, {"stop": True})
                self.wait(timeout=STOP_REPLY_S)
            except (OSError, subprocess.TimeoutExpired):
                self._take(None)
        for stream in (self.stdout, self.stderr):
            stream.close()

    def _take(self, reply: tuple[dict, list[int]] | None) -> None:
        message = reply[0] if reply is not None else {}
        if "exit" not in message:  # the server is gone: end what it left, and start later launches anew
            self.starter.broken = True
            supervisor.sweep(self.starter.tag)
            self.returncode = 1
            return
        self.returncode = int(message["exit"])
        self.starter.reaped_cpu_s += float(message.get("cpu_s") or 0.0)


@contextlib.contextmanager
def warm_launches(env: dict[str, str]) -> Iterator[WarmStarter]:
    """Within the block, local launches of forked workers (run_local) fork from one server."""
    with WarmStarter(env) as starter:
        previous, _local.starter = active(), starter
        try:
            yield starter
        finally:
            _local.starter = previous


def active() -> WarmStarter | None:
    return getattr(_local, "starter", None)


@contextlib.contextmanager
def launches_anew() -> Iterator[None]:
    """Within the block, local launches start torchrun anew even inside warm_launches (a bench's baseline)."""
    previous, _local.starter = active(), None
    try:
        yield
    finally:
        _local.starter = previous


def server_cpu_s() -> float:
    """CPU seconds of the active server itself and of the launches it reaped (0 without one)."""
    starter = active()
    if starter is None:
        return 0.0
    server_s = 0.0
    if starter._process is not None:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(starter._process.pid).cpu_times()
            server_s = times.user + times.system
    return starter.reaped_cpu_s + server_s


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopped by its socket, never by a terminal's Ctrl-C
    code = serve(int(sys.argv[1]))
    os._exit(code)  # without the teardown of an interpreter that imported torch (launch/torchrun.py)
