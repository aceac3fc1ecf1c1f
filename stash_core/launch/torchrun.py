"""torchrun that forks Stash's own workers and exits without the interpreter's teardown once it has succeeded.

`python -m stash_core.launch.torchrun ARGS` is `python -m torch.distributed.run ARGS`: torchrun's own main(),
arguments, output and exit status. Two costs of every launch of every profile are taken off:

- Start-up: a worker started anew imports torch (2-3 s of CPU), and its first optimizer (and DDP) imports
  torch's compiler (2-3 s more). Stash's own worker modules (FORKED) on the CPU, here and on remote nodes,
  run as torchrun's `--run-path` scripts with `--start-method fork` instead (the module's file found where
  torchrun runs): torchrun, which has imported torch already, forks each worker from itself (no tensor op
  has run in it, so no thread pool is copied), and the worker serves what its optimizer and DDP ask of the
  compiler without importing it (zoo/compiler_guards.py). On a GPU they are started
  anew (torchrun touches CUDA, which a forked process cannot use again), and so is any other module (a
  user's script, whose exit handlers a forked process would not run), as `-m module`, as torchrun does it.
- Listening: a launch on this machine alone (`--standalone`, or a master on loopback) would have its
  rendezvous stores (torch's TCPStore binds every interface) and its workers' gloo and NCCL sockets (on the
  address the host name resolves to) reachable from other machines. They listen on loopback only
  (loopback_only), and the workers are told that address (`--local-addr`). A launch over several machines
  given its master as an IP address has its stores listen on that address alone (stores_listen_on).
- Teardown: an interpreter that imported torch spends about 0.6 s tearing itself down after torchrun's main()
  has returned (its workers gone, its rendezvous store closed). So once main() returns, the output is flushed
  and the process exits at once, as the workers do (measure/protocol.end_reported). A failure (an exception,
  a non-zero exit) takes the ordinary way out, with torchrun's traceback and exit status.
"""

from __future__ import annotations

import importlib.util
import os
import sys

# Stash's measuring and probe workers: forked from torchrun rather than started anew.
FORKED = ("stash_core.measure.worker", "stash_core.measure.probe_worker")
# Stash's option, not torchrun's: main() turns `FORK_OPTION MODULE` into torchrun's options that fork MODULE's
# file, found where torchrun runs (a remote node's copy of Stash has a path this machine does not know).
FORK_OPTION = "--stash-fork-module"


def entry(module: str, on_cpu: bool) -> list[str]:
    """The arguments that run `module`: forked (FORKED, on the CPU), else torchrun's `-m module`."""
    if module not in FORKED or not on_cpu:
        return ["-m", module]
    return [FORK_OPTION, module]


def torchrun_args(args: list[str]) -> list[str]:
    """torchrun's own arguments for ours: FORK_OPTION MODULE becomes `--run-path --start-method fork FILE`,
    MODULE's file here (SystemExit with one line when there is none); anything else as it is."""
    if FORK_OPTION not in args:
        return args
    at = args.index(FORK_OPTION)  # the first: a module's own arguments follow it
    module = args[at + 1]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise SystemExit(f"torchrun: no module named {module} on this machine")
    return [*args[:at], "--run-path", "--start-method", "fork", spec.origin, *args[at + 2 :]]


LOOPBACK = "127.0.0.1"
# The workers' collective sockets on loopback, unless the user chose an interface (their choice is kept).
LOOPBACK_INTERFACES = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


def loopback_only() -> None:
    """Make this torchrun's rendezvous stores and its workers' sockets listen on loopback alone."""
    for name, value in LOOPBACK_INTERFACES.items():
        os.environ.setdefault(name, value)
    stores_listen_on(LOOPBACK)


def stores_listen_on(address: str) -> None:
    """Make this torchrun's rendezvous stores (torch's TCPStore binds every interface) listen on `address`
    alone: loopback, or node 0's address where the other nodes reach it."""
    import socket

    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import (
        c10d_rendezvous_backend,
        dynamic_rendezvous,
        static_tcp_rendezvous,
    )

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listening: list[socket.socket] = []  # kept open for as long as their stores serve

    class BoundStore(dist.TCPStore):
        """A TCPStore whose server listens on a socket bound to `address`."""

        def __init__(self, host_name: str, port: int, world_size=None, is_master=False, *args, **kwargs):
            if is_master and kwargs.get("master_listen_fd") is None:
                bound = socket.create_server((address, port), family=family)
                listening.append(bound)
                port, kwargs["master_listen_fd"] = bound.getsockname()[1], bound.fileno()
            super().__init__(host_name, port, world_size, is_master, *args, **kwargs)

    def bound_server(_handler, _master_addr, master_port) -> dist.TCPStore:
        return BoundStore(address, master_port, is_master=True, multi_tenant=True)

    c10d_rendezvous_backend.TCPStore = BoundStore  # the rendezvous's own store
    static_tcp_rendezvous.TCPStore = BoundStore  # the store of a launch given --master-addr (over ssh)
    dynamic_rendezvous.DynamicRendezvousHandler._create_tcp_store_server = bound_server  # the workers'


def on_loopback_alone(args: list[str]) -> bool:
    """A launch whose master is loopback (a host's one-machine runs over ssh with --master-addr, or several
    nodes that are all this machine): nothing of it needs to listen beyond this machine."""
    return _option(args, "--master-addr") in (LOOPBACK, "localhost")


def resolves_to_loopback(name: str) -> bool:
    """Whether `name` (an address or a host name) stands for this machine's loopback alone, as this machine
    resolves it (/etc/hosts often maps the machine's own name so); False when it does not resolve."""
    import ipaddress
    import socket

    try:
        found = {info[4][0] for info in socket.getaddrinfo(name.strip("[]"), None)}
    except (OSError, UnicodeError):
        return False
    return bool(found) and all(ipaddress.ip_address(address.split("%")[0]).is_loopback for address in found)


def master_address(args: list[str]) -> str | None:
    """The --master-addr of a launch when it is an IP address (node 0 then holds it, preflight checks);
    None for a host name, which node 0 may resolve to another of its addresses than the others reach."""
    import ipaddress

    text = _option(args, "--master-addr")
    try:
        return str(ipaddress.ip_address(text.strip("[]"))) if text else None
    except ValueError:
        return None


def _option(args: list[str], name: str) -> str | None:
    """The value of torchrun's option `name` (`--name V` or `--name=V`, `-` or `_` alike) before the module's
    own arguments; None when not given."""
    spelled = {name, name.replace("-", "_").replace("__", "--", 1)}
    for index, arg in enumerate(args):
        if arg in ("-m", "--run-path", FORK_OPTION):  # the module's own arguments follow
            return None
        key, _, value = arg.partition("=")
        if key in spelled:
            return value or (args[index + 1] if index + 1 < len(args) else None)
    return None


def main() -> None:
    from torch.distributed.run import main as torchrun_main  # here: `stash` imports entry() without torch

    sys.argv[1:] = torchrun_args(sys.argv[1:])
    if "--standalone" in sys.argv[1:] or on_loopback_alone(sys.argv[1:]):
        if not any(arg.split("=")[0] in ("--local-addr", "--local_addr") for arg in sys.argv[1:]):
            # the workers are told this address for the stores, which listen on loopback alone (else the
            # host name's address, which need not be loopback)
            sys.argv[1:1] = ["--local-addr", LOOPBACK]
        loopback_only()
    elif master := master_address(sys.argv[1:]):
        # several machines: the stores listen where the other nodes reach node 0, not on every interface
        stores_listen_on(master)
    try:
        torchrun_main()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
