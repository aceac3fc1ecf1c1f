"""state.json of the emulated cluster: what was made, written after each step of the setup.

A setup interrupted half-way can still be taken down from it; `cluster_down` also works without
it (from the stash-* names alone). Only the files the setup writes are ever removed.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.launch.cluster_names import (
    BRIDGE,
    NODE_IFNAME,
    ROOT_ADDRESS,
    node_address,
    node_namespace,
)

STATE_FILE = "state.json"
STATE_VERSION = 1
_STATE_FILES = ("ssh_config", "known_hosts", "id_ed25519", "id_ed25519.pub", "authorized_keys", STATE_FILE)
_NODE_DIR_RE = re.compile(r"n\d+")


def state_path(state_dir: Path) -> Path:
    return Path(state_dir) / STATE_FILE


def load_state(state_dir: Path) -> dict | None:
    """The recorded state, or None when there is none (or it cannot be read)."""
    try:
        return json.loads(state_path(state_dir).read_text())
    except (OSError, ValueError):
        return None


def save_state(state_dir: Path, state: dict) -> None:
    """Write state.json atomically (a reader never sees half a file)."""
    path = state_path(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    os.replace(tmp, path)


def require_state(state_dir: Path) -> dict:
    """The state of a cluster that has nodes; UsageError when none is up."""
    state = load_state(Path(state_dir))
    if not state or not state.get("nodes"):
        raise UsageError(f"no emulated cluster is up (no {state_path(Path(state_dir))})")
    return state


def new_state(state_dir: Path, cpu_sets: list[list[int]] | None) -> dict:
    """The record of a cluster before anything is made: every part None/empty until it exists."""
    return {
        "version": STATE_VERSION,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "state_dir": str(state_dir),
        "hub_namespace": None,
        "bridge": BRIDGE,
        "root_veth": None,
        "root_address": ROOT_ADDRESS,
        "netem": False,
        "nodes": [],
        "cpu_sets": cpu_sets,
        "ssh_config": None,
        "key_path": None,
    }


def new_node(index: int, shaping: dict, cpus: list[int] | None) -> dict:
    """The record of node index once its namespace exists; its link and sshd are filled in later."""
    return {
        "index": index,
        "namespace": node_namespace(index),
        "address": node_address(index),
        "interface": NODE_IFNAME,
        "hub_veth": None,
        "shaping": dict(shaping),
        "qdiscs": [],
        "down": False,
        "sshd_pid": None,
        "cpus": cpus,
        "warning": None,
    }


def remove_state_files(state_dir: Path) -> list[str]:
    """Remove only the files cluster_up writes, then the directory if that left it empty."""
    if not state_dir.is_dir():
        return []
    removed = 0
    for name in _STATE_FILES:
        path = state_dir / name
        if path.exists():
            path.unlink()
            removed += 1
    for node_dir in state_dir.glob("n*"):
        if node_dir.is_dir() and _NODE_DIR_RE.fullmatch(node_dir.name):
            shutil.rmtree(node_dir, ignore_errors=True)
            removed += 1
    try:
        state_dir.rmdir()
    except OSError:
        pass
    return [f"removed {removed} state file(s) from {state_dir}"] if removed else []
