"""What a node offers a multi-node launch, checked on the node itself before anything starts there.

multinode_preflight.py sends this file's source text to every node and runs it with `python -c`, so a
host needs nothing installed for it: standard library only, no stash_core import.

    WORKDIR [MASTER_ADDR MASTER_PORT]

prints one JSON line: workdir_ok (WORKDIR is a directory), torch (this python can import torch) and,
given the master address and port (node 0 only), port_free/port_error (the port can be bound here)
and addr_local/addr_error (the address belongs to this host, so the rendezvous can listen on it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys


def port_check(port: int) -> dict:
    """port_free (and port_error when not): whether a TCP socket can bind the port on every address."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("0.0.0.0", port))
        return {"port_free": True}
    except OSError as exc:
        return {"port_free": False, "port_error": exc.strerror}
    finally:
        sock.close()


def address_check(address: str) -> dict:
    """addr_local (and addr_error when not): whether a socket can bind the address, i.e. it is ours."""
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family)
        try:
            sock.bind((sockaddr[0], 0))
        finally:
            sock.close()
        return {"addr_local": True}
    except OSError as exc:
        return {"addr_local": False, "addr_error": exc.strerror or str(exc)}


def check(workdir: str, master_addr: str | None = None, master_port: int | None = None) -> dict:
    result = {"workdir_ok": os.path.isdir(workdir), "torch": importlib.util.find_spec("torch") is not None}
    if master_addr is not None and master_port is not None:
        result.update(port_check(master_port))
        result.update(address_check(master_addr))
    return result


def main(argv: list[str]) -> int:
    """argv without the program name: WORKDIR [MASTER_ADDR MASTER_PORT]."""
    if len(argv) not in (1, 3):
        print("usage: remote_preflight WORKDIR [MASTER_ADDR MASTER_PORT]", file=sys.stderr, flush=True)
        return 2
    if len(argv) == 3:
        print(json.dumps(check(argv[0], argv[1], int(argv[2]))))
    else:
        print(json.dumps(check(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
