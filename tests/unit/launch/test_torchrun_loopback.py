"""launch/torchrun.py on this machine alone (`--standalone`, as launch/local.torchrun_argv runs it): the
rendezvous stores of torchrun and the gloo sockets of its workers listen on loopback only, so nothing a
single-machine profile starts can be reached from another machine. A real launch of two gloo workers; the
last one lists, from /proc, the listening TCP sockets of torchrun and of both workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stash_core.launch import local
from stash_core.launch.runner import worker_env

pytestmark = pytest.mark.launches

# The job: two gloo workers all-reduce once (their pair sockets then exist); rank 1 prints every listening
# TCP socket (address:port in /proc/net/tcp's hex) held by a worker or its torchrun, then both leave together.
JOB = r"""
import os, torch, torch.distributed as dist

def inodes(pid):
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found

dist.init_process_group("gloo")
tensor = torch.ones(4)
dist.all_reduce(tensor)
dist.barrier()
if dist.get_rank() == 0:
    open(os.environ["RANK0_PID"], "w").write(str(os.getpid()))
dist.barrier()
if dist.get_rank() == 1:
    rank0 = int(open(os.environ["RANK0_PID"]).read())
    rank0_parent = int(open(f"/proc/{rank0}/stat").read().rsplit(")", 1)[1].split()[1])  # its torchrun
    mine = inodes(os.getpid()) | inodes(os.getppid()) | inodes(rank0) | inodes(rank0_parent)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in mine:  # 0A: LISTEN
                print("LISTEN", table.rsplit("/", 1)[1], fields[1], flush=True)
dist.barrier()
dist.destroy_process_group()
"""

LOOPBACK_V4 = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
LOOPBACK_V6_ENDS = "00000000000000000000000001000000"  # ::1; ::ffff:127.0.0.1 ends in 0100007F


def _listening(tmp_path: Path) -> list[str]:
    (tmp_path / "job.py").write_text(JOB)
    argv = local.torchrun_argv(2, "job", [])
    at = argv.index("-m", 3)  # torchrun's `-m job` (argv[1:3] is `-m stash_core.launch.torchrun`)
    argv[at : at + 2] = [str(tmp_path / "job.py")]  # the script itself, as torchrun runs a file
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**_env(tmp_path), "RANK0_PID": str(tmp_path / "rank0.pid")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.split()[2] for line in done.stdout.splitlines() if line.startswith("LISTEN ")]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **worker_env(1), "TMPDIR": str(tmp_path)}  # torchrun's log folder goes there


def test_a_launch_on_this_machine_listens_on_loopback_only(tmp_path) -> None:
    addresses = _listening(tmp_path)
    assert len(addresses) >= 3, addresses  # the rendezvous store, the workers' store, gloo's pairs
    for address in addresses:
        host = address.split(":")[0]
        assert host == LOOPBACK_V4 or host.endswith((LOOPBACK_V4, LOOPBACK_V6_ENDS)), addresses


def test_a_standalone_launch_without_a_local_address_still_joins_where_the_host_name_is_not_loopback(
    tmp_path,
) -> None:
    """`python -m stash_core.launch.torchrun --standalone ...` as torchrun is run (no --local-addr), on a
    machine whose name resolves to 127.0.1.1 (Debian's /etc/hosts) rather than to the stores' 127.0.0.1:
    the workers are told the address the stores listen on."""
    (tmp_path / "job.py").write_text(
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.ones(2)\n"
        "dist.all_reduce(t)\n"
        "print(f'sum {int(t[0].item())}', flush=True)  # one write: the two ranks share the pipe\n"
        "dist.destroy_process_group()\n"
    )
    source = (
        "import socket, runpy; socket.getfqdn = lambda *_: '127.0.1.1'; "
        "runpy.run_module('stash_core.launch.torchrun', run_name='__main__', alter_sys=True)"
    )
    argv = [sys.executable, "-c", source, "--standalone", "--nnodes", "1", "--nproc-per-node", "2",
            "--max-restarts", "0", "job.py"]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=_env(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("sum 2") == 2


def test_a_one_machine_launch_given_a_loopback_master_listens_on_loopback_only(tmp_path) -> None:
    """A host's one-machine runs (R0, R1) over ssh are torchrun with `--nnodes 1 --master-addr 127.0.0.1`, not
    --standalone: its rendezvous store (static) listened on every interface of the host."""
    import socket

    from stash_core.launch.multinode import TORCHRUN_SRC

    (tmp_path / "job.py").write_text(JOB)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-c", TORCHRUN_SRC, "--nnodes", "1", "--node-rank", "0", "--nproc-per-node", "2",
            "--master-addr", "127.0.0.1", "--master-port", str(port), "--max-restarts", "0",
            "--monitor-interval", "0.5", str(tmp_path / "job.py")]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**_env(tmp_path), "RANK0_PID": str(tmp_path / "rank0.pid")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    addresses = [line.split()[2] for line in done.stdout.splitlines() if line.startswith("LISTEN ")]
    assert len(addresses) >= 2, addresses  # the rendezvous store, gloo's pairs
    for address in addresses:
        host = address.split(":")[0]
        assert host == LOOPBACK_V4 or host.endswith((LOOPBACK_V4, LOOPBACK_V6_ENDS)), addresses


def _two_nodes_listening(tmp_path: Path, master: str) -> list[str]:
    """Two torchrun nodes of a gloo worker each, both on this machine, given `master`: what they listen on."""
    import socket

    from stash_core.launch.multinode import TORCHRUN_SRC

    (tmp_path / "job.py").write_text(JOB)
    with socket.socket() as probe:
        probe.bind((master, 0))
        port = probe.getsockname()[1]
    nodes = [
        subprocess.Popen(
            [sys.executable, "-c", TORCHRUN_SRC, "--nnodes", "2", "--node-rank", str(rank),
             "--nproc-per-node", "1", "--master-addr", master, "--master-port", str(port),
             "--max-restarts", "0", "--monitor-interval", "0.5", str(tmp_path / "job.py")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            env={**_env(tmp_path), "RANK0_PID": str(tmp_path / "rank0.pid")},
        )
        for rank in range(2)
    ]  # fmt: skip
    outputs = []
    try:
        for node in nodes:
            out, err = node.communicate(timeout=120)
            assert node.returncode == 0, err[-3000:]
            outputs.append(out)
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    return [line.split()[2] for out in outputs for line in out.splitlines() if line.startswith("LISTEN ")]


def test_two_nodes_given_a_loopback_master_listen_on_loopback_only(tmp_path) -> None:
    """Two hosts that are both this machine (`--hosts 127.0.0.1:22,localhost:22`): the rendezvous store of a
    launch over two nodes listened on every interface."""
    addresses = _two_nodes_listening(tmp_path, "127.0.0.1")
    assert addresses, addresses
    for address in addresses:
        host = address.split(":")[0]
        assert host == LOOPBACK_V4 or host.endswith((LOOPBACK_V4, LOOPBACK_V6_ENDS)), addresses


def test_two_nodes_given_a_master_address_serve_their_store_on_it_alone(tmp_path) -> None:
    """A master given as an IP address (node 0's, where the other nodes reach it): the store listens there,
    not on every interface (127.0.0.2 stands in for a machine's own address)."""
    addresses = _two_nodes_listening(tmp_path, "127.0.0.2")
    wildcard = ("00000000", "00000000000000000000000000000000")
    assert "0200007F" in {address.split(":")[0] for address in addresses}, addresses  # 127.0.0.2
    assert not [address for address in addresses if address.split(":")[0] in wildcard], addresses
