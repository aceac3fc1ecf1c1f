"""Run Python scripts as new processes that skip the imports every one of them pays for.

A script started by a new interpreter imports torch, pandas and Stash again (some 4 CPU-s each on the 2-core
CI machine): tests that start dozens of scripts only to see them refuse an argument spent minutes on it. A
ForkServer is one interpreter that imports those modules once and forks a child per script: the child is a
new process with the script as `__main__`, its own argv, folder, stdin (/dev/null), stdout and stderr (files
the caller reads) and exit status, as `python SCRIPT ARGS` gives them. Nothing runs in the server between
its imports and the forks, so no thread pool of torch exists to be forked half-held.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

# The server: imports the modules named in argv, then for each request line ({"argv", "cwd", "out", "err"})
# forks a child that runs the script as __main__ and answers {"returncode"} once it has ended.
_SERVER = r"""
import importlib, json, os, runpy, signal, sys, traceback
for name in sys.argv[1:]:
    importlib.import_module(name)
sys.stdout.flush()
requests = os.fdopen(os.dup(0), "r")
answers = os.fdopen(os.dup(1), "w")
for line in requests:
    request = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.alarm(request["timeout_s"])  # a script that hangs ends as one killed by SIGALRM
            os.chdir(request["cwd"])
            for fd, path, mode in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY),
                                   (2, request["err"], os.O_WRONLY)):
                os.dup2(os.open(path, mode), fd)
            sys.argv = list(request["argv"])
            if request.get("module"):  # python -m MODULE: the folder it runs in comes first on sys.path
                sys.path[0] = os.getcwd()
                runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            else:
                script = sys.argv[0]
                sys.path[0] = os.path.dirname(os.path.abspath(script))
                runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
    answers.flush()
"""


class ForkServer:
    """`run(script, *args, cwd=...)` -> CompletedProcess, as subprocess.run([sys.executable, script, *args],
    capture_output=True, text=True, cwd=cwd) gives it (script "-m MODULE": python -m MODULE); `close()` ends
    the server. The environment is the server's, given when it starts."""

    def __init__(self, preload: list[str], env: dict[str, str] | None = None) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="stash-forked-")
        self._server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *preload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip

    def run(
        self, script: str | Path, *args: str, cwd: Path, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        out, err = (Path(self._scratch.name) / name for name in ("out", "err"))
        out.write_bytes(b"")
        err.write_bytes(b"")
        module = str(script)[3:] if str(script).startswith("-m ") else None
        request = {
            "argv": [module or str(script), *args], "module": module, "cwd": str(cwd), "out": str(out),
            "err": str(err), "timeout_s": max(1, round(timeout)),
        }  # fmt: skip
        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        answer = self._server.stdout.readline()
        if not answer:
            raise RuntimeError(f"the fork server ended (exit status {self._server.wait(timeout)})")
        returncode = json.loads(answer)["returncode"]
        return subprocess.CompletedProcess(
            [str(script), *args], returncode, out.read_text(errors="replace"), err.read_text(errors="replace")
        )

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()
        self._scratch.cleanup()
