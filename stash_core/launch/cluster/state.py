"""state.json of an emulated cluster: what was made, written after each step of the setup.

A setup interrupted half-way can still be taken down from it; `cluster_down` also works without
it (from the cluster's names alone). Only the files the setup writes are ever removed. The state
records the cluster's name and address range, so a state folder is all a command needs to find it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import stat
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.launch.cluster.names import (
    BRIDGE,
    DEFAULT_LAYOUT,
    DEFAULT_NAME,
    NODE_IFNAME,
    Layout,
    check_name,
    cluster_option,
    name_of_state_dir,
    state_dir_for,
)
from stash_core.userfiles import nearest_existing

STATE_FILE = "state.json"
STATE_VERSION = 1
_STATE_FILES = ("ssh_config", "known_hosts", "id_ed25519", "id_ed25519.pub", "authorized_keys", STATE_FILE)
_NODE_DIR_RE = re.compile(r"n\d+")
# What ssh_config and sshd_config read otherwise than as part of a path (the paths of the state folder go
# into both): a space splits it, % and ${ are expanded (%h: the host), quotes and \ are taken away, # starts a
# comment.
_SSH_UNSAFE_RE = re.compile(r"[\s%$\"'\\#]")


def state_path(state_dir: Path) -> Path:
    return Path(state_dir) / STATE_FILE


class DamagedState(UsageError):
    """A state.json that is JSON but not a cluster's record (edited by hand, or another tool's)."""

    def __init__(self, path: Path, why: str, name: str | None = None) -> None:
        self.what = f"the emulated cluster's state file {path} is damaged ({why})"
        self.name = name  # the cluster it records, where that much can be read
        option = f" --name {name}" if name else " --name NAME"
        super().__init__(f"{self.what}: `stash cluster down{option} --state-dir {path.parent}` takes the "
                         "cluster down from its names and leaves the file, to remove by hand")  # fmt: skip


# The fields every command reads from a node's record, with the types the setup writes (new_node).
_NODE_FIELDS: dict[str, tuple[type, ...]] = {
    "index": (int,), "namespace": (str,), "address": (str,), "shaping": (dict,), "qdiscs": (list,),
    "hub_veth": (str, type(None)), "sshd_pid": (int, type(None)), "warning": (str, type(None)),
}  # fmt: skip


def load_state(state_dir: Path) -> dict | None:
    """The recorded state, or None when there is none (or it cannot be read). DamagedState when it is JSON
    but not a cluster's record: each command would otherwise fail on the first field it reads."""
    path = state_path(state_dir)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    why = _damage(state)
    if why:
        recorded = state.get("name") if isinstance(state, dict) else None
        raise DamagedState(path, why, recorded if isinstance(recorded, str) and _named(recorded) else None)
    return state


def _named(name: str) -> bool:
    """Whether `name` is a cluster's name (check_name takes it)."""
    try:
        check_name(name)
    except UsageError:
        return False
    return True


def _damage(state: object) -> str | None:
    """What makes `state` no cluster record, or None."""
    if not isinstance(state, dict):
        return "not a JSON object"
    for key in ("name", "subnet", "ssh_config", "key_path", "hub_namespace", "root_veth"):
        if not isinstance(state.get(key), str | type(None)):
            return f"{key} is not a text"
    nodes = state.get("nodes", [])
    if not isinstance(nodes, list) or not isinstance(state.get("cpu_sets"), list | type(None)):
        return "nodes is not a list" if not isinstance(nodes, list) else "cpu_sets is not a list"
    for number, node in enumerate(nodes):
        if not isinstance(node, dict):
            return f"node {number} is not a JSON object"
        for key, types in _NODE_FIELDS.items():
            value = node.get(key)
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                return f"node {number} has no valid {key}"
    return None


def save_state(state_dir: Path, state: dict) -> None:
    """Write state.json atomically (a reader never sees half a file)."""
    path = state_path(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    os.replace(tmp, path)


def resolve(name: str | None, state_dir: Path | None) -> tuple[str, Path]:
    """The cluster a command means: its name and state folder.

    Without a state folder, the name's own (state_dir_for). With one, the name it records wins
    over none given (a folder without state: the name its path gives away, else "default"); a
    name given that differs from the recorded one is a UsageError.
    """
    if name is not None:
        check_name(name)
    if state_dir is None:
        name = name or DEFAULT_NAME
        return name, state_dir_for(name).absolute()
    state_dir = Path(state_dir).absolute()  # as `up` recorded it (its ssh configs need absolute paths)
    try:
        recorded = (load_state(state_dir) or {}).get("name")
    except DamagedState as damaged:  # the command says so where it reads the state; down goes by the names
        recorded = damaged.name  # of the cluster it records, where its name can be read
    if name is not None and recorded is not None and name != recorded:
        raise UsageError(f"{state_dir} holds the emulated cluster {recorded}, not {name}")
    return name or recorded or name_of_state_dir(state_dir), state_dir


def require_state(state_dir: Path, name: str = DEFAULT_NAME) -> dict:
    """The state of a cluster that has nodes; UsageError when cluster `name` is not up there, or when
    another account could have changed what it names (the ssh config and keys a profile runs as root)."""
    refuse_shared_folder(Path(state_dir), f"the state folder {state_dir} of the emulated cluster {name}")
    state = load_state(Path(state_dir))
    if not state or not state.get("nodes"):
        raise UsageError(
            f"no emulated cluster {name} is up (no {state_path(Path(state_dir))}; "
            f"sudo stash cluster up{cluster_option(name)} --nodes N)"
        )
    return state


def new_state(
    state_dir: Path,
    cpu_sets: list[list[int]] | None,
    layout: Layout = DEFAULT_LAYOUT,
    made_state_dir: bool = True,
) -> dict:
    """The record of a cluster before anything is made: every part None/empty until it exists.
    made_state_dir: whether the setup made the state folder (else `down` leaves it where it was)."""
    return {
        "version": STATE_VERSION,
        "name": layout.name,
        "subnet": layout.subnet,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "state_dir": str(state_dir),
        "made_state_dir": made_state_dir,
        "hub_namespace": None,
        "bridge": BRIDGE,
        "root_veth": None,
        "root_address": layout.root_address,
        "netem": False,
        "nodes": [],
        "cpu_sets": cpu_sets,
        "ssh_config": None,
        "key_path": None,
    }


def new_node(index: int, shaping: dict, cpus: list[int] | None, layout: Layout = DEFAULT_LAYOUT) -> dict:
    """The record of node index once its namespace exists; its link and sshd are filled in later."""
    return {
        "index": index,
        "namespace": layout.node_namespace(index),
        "address": layout.node_address(index),
        "interface": NODE_IFNAME,
        "hub_veth": None,
        "shaping": dict(shaping),
        "qdiscs": [],
        "down": False,
        "sshd_pid": None,
        "cpus": cpus,
        "warning": None,
    }


def check_state_dir_path(state_dir: Path, label: str) -> None:
    """UsageError when the path of a state folder cannot go into ssh's config files as it is (`label` names
    the folder: the option that gave it, or the cluster's own)."""
    unsafe = _SSH_UNSAFE_RE.search(str(state_dir))
    if unsafe:
        what = "a space" if unsafe.group().isspace() else repr(unsafe.group())
        raise UsageError(
            f"{label} holds {what}, which ssh's config files do not take in a path: choose a folder whose "
            "path has no spaces nor any of % $ \" ' \\ #"
        )


def refuse_shared_folder(state_dir: Path, label: str) -> None:
    """UsageError when another account could change what the cluster's ssh runs or its sshd trusts (root on
    every node, which share this machine's files): the state folder must be this account's and writable by
    no one else, and every folder above it root's or this account's, writable by no one else unless sticky
    (/tmp: no one replaces another's entries there). sshd's own check (StrictModes) cannot be used: it would
    refuse a folder under /tmp."""
    me = os.geteuid()
    if state_dir.is_dir():
        info = state_dir.stat()
        if info.st_uid != me or info.st_mode & 0o022:
            whose = "another account's" if info.st_uid != me else "writable by other accounts"
            raise UsageError(f"{label} is {whose}: anyone who can write there could take root on "
                             "the cluster's nodes; give a new folder, or chmod go-w it")  # fmt: skip
    for folder in state_dir.parents:
        try:
            info = folder.stat()
        except OSError:
            continue  # not made yet: made private with the state folder
        shared = info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX
        if info.st_uid not in (0, me) or shared:
            raise UsageError(f"{label}: {folder} can be changed by other accounts, who could then "
                             "replace the cluster's SSH keys: choose a private folder")  # fmt: skip


def refuse_foreign_files(state_dir: Path, label: str | None = None) -> None:
    """UsageError when `state_dir` is not a folder cluster_up may fill: a file, or a folder that already holds
    a file of the names it writes (a user's ~/.ssh: its key would be overwritten, then removed by down).
    `label` names the folder in the message (default: --state-dir and its path)."""
    given = label is None or label.startswith("--")
    label = label or f"--state-dir {state_dir}"
    instead = "give a folder" if given else "remove it, or give the cluster another folder with --state-dir"
    if state_dir.exists() and not state_dir.is_dir():
        raise UsageError(f"{label} is a file; {instead}" + (" (new, or without SSH files)" if given else ""))
    above = nearest_existing(state_dir)
    if not above.is_dir():  # a file on the way: the folder could never be made
        raise UsageError(f"{label}: {above} is a file, not a folder; {instead}")
    if not state_dir.is_dir():
        return
    present = [name for name in _STATE_FILES if (state_dir / name).exists()]
    present += sorted(path.name for path in state_dir.glob("n*") if _NODE_DIR_RE.fullmatch(path.name))
    if present:
        raise UsageError(
            f"{label} already holds {', '.join(present)}, which a cluster's setup writes: "
            "give a new folder (nothing in it is touched)"
        )


def remove_state_files(state_dir: Path) -> list[str]:
    """Remove only the files cluster_up writes, then the directory if that left it empty; only from a folder
    that holds a cluster's state.json (removed last, so a removal cut short can be run again): another
    folder's files of the same names are the user's. A folder that was there before the cluster (the state
    records it) is kept, emptied of the cluster's files."""
    try:
        state = load_state(state_dir) if state_dir.is_dir() else None
    except DamagedState:
        return []  # not knowably a cluster's folder: its files are left to the user
    if not _is_cluster_state(state):
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
    if state.get("made_state_dir", True):  # states of older versions did not say: made by them
        try:
            state_dir.rmdir()
        except OSError:
            pass
    return [f"removed {removed} state file(s) from {state_dir}"] if removed else []


def _is_cluster_state(state: dict | None) -> bool:
    return isinstance(state, dict) and state.get("version") == STATE_VERSION and "name" in state
