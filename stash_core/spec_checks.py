"""The checks of a profile's spec (spec.ProfileSpec): each value, the values against each other and the
machines named, without looking at this machine beyond the files named; each refusal a FieldError (spec_parse:
a UsageError of one line that names the flag).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import asdict
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.spec import (
    DEVICES,
    MAX_SCRIPT_BYTES,
    OPTIONS,
    PAIRED_CHOICES,
    ProfileSpec,
    check_script_makes,
    default_of,
)
from stash_core.spec_parse import (
    MAX_NAME_CHARS,
    FieldError,
    Number,
    below,
    check_stalls,
    instance_name_problem,
    parse_iterations,
    parse_rate,
    shape_error,
    shape_fits,
)
from stash_core.terminal import clipped, printable, shell_word, unsafe_character
from stash_core.userfiles import read_user_bytes

_USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")  # as the launcher's (launch.ssh)
# [user@]host[:port]: neither user nor host starts with "-" (ssh would read an option), and no port stands
# without its host (":22"; "::1" is an IPv6 address); the port's range is checked apart (_port_in_range).
_HOST_RE = re.compile(
    rf"(?:{_USER_RE.pattern}@)?(?:\[[0-9A-Za-z:.%]+\](?::\d+)?|(?!-|:[^:]*$)[A-Za-z0-9_.:%-]+)"
)
_LABEL_RE = re.compile(r"(?!-)[\w.@+-]+")  # no leading "-": a label is never read as an option


def check_fields(spec: ProfileSpec) -> None:
    """Check each value of a spec, and the values against each other, without looking at this machine."""
    if not str(spec.model or "").strip():
        raise FieldError("--model: give a zoo name, FILE.py:FACTORY or package.module:FACTORY", "model")
    for attr, wrong in (("max_phase_s", below(spec.max_phase_s, 0, True)),
                        ("max_iterations", below(spec.max_iterations, 2))):  # fmt: skip
        if wrong:
            message = "--max-phase-seconds must be positive and --max-iterations at least 2"
            raise FieldError(message, attr, getattr(spec, attr))
    _check_counts(spec)
    check_stalls(spec.stalls)
    parse_iterations(str(spec.iterations))
    if spec.input_shape is not None and not shape_fits(spec.input_shape):
        raise shape_error(spec.input_shape)
    if spec.device not in DEVICES:
        raise FieldError(f"--device must be auto, cpu or cuda, got {spec.device!r}", "device", spec.device)
    if spec.paired not in PAIRED_CHOICES:
        raise FieldError(f"--paired must be auto, on or off, got {spec.paired!r}", "paired", spec.paired)
    _check_data(spec)
    _check_script(spec)
    _check_text_fields(spec)
    validate_machines(spec)
    if spec.cluster_bandwidth is not None:
        parse_rate(spec.cluster_bandwidth)


def _check_counts(spec: ProfileSpec) -> None:
    """Every field of a numeric option (the options whose type is a Number rule) within its rule's range."""
    for option in OPTIONS:
        if isinstance(option.type, Number) and option.attr:
            value = getattr(spec, option.attr)
            measured = spec.script and option.attr == "batch_size"  # a script's: measured from its batches
            if value is None and (default_of(option.attr) is None or measured):
                continue
            problem = option.type.problem(value)
            if problem:
                raise FieldError(f"{option.flag} {problem}", option.attr, value)


def _check_data(spec: ProfileSpec) -> None:
    if spec.dataset and spec.synthetic_images:
        raise FieldError("give either --dataset or --synthetic-images, not both", "dataset", spec.dataset)
    if spec.dataset_images is not None and (spec.dataset or spec.synthetic_images):
        # A data set's epoch is its files: a second epoch size would be stored and never used.
        flag = "--dataset" if spec.dataset else "--synthetic-images"
        message = f"--dataset-images sets the epoch of runs without a data set; {flag}'s epoch is its files"
        raise FieldError(message, "dataset_images", spec.dataset_images)
    if spec.image_px != default_of("image_px") and not spec.synthetic_images and not spec.script:
        # Only generated images have a side to choose; a --dataset's images are read as they are.
        raise FieldError("--image-px applies to --synthetic-images only", "image_px", spec.image_px)
    if spec.dataset is not None and not Path(spec.dataset).is_dir():
        why = "a file, not a folder" if Path(spec.dataset).exists() else "no such directory"
        raise FieldError(f"--dataset {spec.dataset}: {why}", "dataset", spec.dataset, "missing")


def _check_text_fields(spec: ProfileSpec) -> None:
    """Labels and names are stored and printed: no control or bidirectional characters, refused up front."""
    for attr, flag in (("instance", "--instance"), ("model", "--model"), ("script", "--script")):
        value = getattr(spec, attr)
        character = unsafe_character(value) if isinstance(value, str) else None
        if character:
            raise FieldError(f"{flag} {value!r} holds the control character {character}", attr, value)
    label = spec.instance  # stored and shown as the run's machine: a name, as result files hold it
    if isinstance(label, str) and not 1 <= len(label.strip()) <= len(label) <= MAX_NAME_CHARS:
        what = "an empty label" if not label.strip() else f"a label of {len(label):,} characters"
        raise FieldError(
            f"--instance: {what}; give a name of 1 to {MAX_NAME_CHARS} characters",
            "instance",
            label,
            "length",
        )
    if isinstance(label, str):
        _check_instance_name(label)


def _check_instance_name(label: str) -> None:
    """A label the catalog can hold as an instance name: a label no `--instances` can name is a run no
    prediction or catalog row can reach."""
    problem = instance_name_problem(label)
    if problem:
        raise FieldError(f"--instance {label!r} {problem}", "instance", label)


def _check_script(spec: ProfileSpec) -> None:
    """The script exists and parses; --data-dir is a directory and only for a script."""
    if spec.script is None:
        for attr, flag in (("data_dir", "--data-dir"), ("script_args", "arguments after --")):
            if getattr(spec, attr):
                raise FieldError(f"{flag} applies to --script only", attr, getattr(spec, attr))
        if spec.script_start_timeout_s != default_of("script_start_timeout_s"):
            value = spec.script_start_timeout_s
            raise FieldError(
                "--script-start-timeout applies to --script only", "script_start_timeout_s", value
            )
        return
    check_script_makes(asdict(spec), given=lambda attr, value: value != default_of(attr))
    path = Path(spec.script)
    try:
        exists = path.exists()
    except OSError as error:  # a name too long for the file system, say
        raise FieldError(f"--script: {error.strerror or error}", "script", spec.script) from None
    if not exists:
        hint = _arguments_typed_in(spec.script)
        raise FieldError(f"--script {spec.script}: no such file{hint}", "script", spec.script, "missing")
    try:
        # The reader of user files: a directory, FIFO or device (a link to /dev/zero) is refused by name.
        source = read_user_bytes(path, "script", MAX_SCRIPT_BYTES)
    except UsageError as error:
        raise FieldError(f"--script {error}", "script", spec.script) from None
    if _is_notebook(path, source):  # its JSON parses as a Python expression, then fails at run time
        raise FieldError(
            f"--script {spec.script} is a Jupyter notebook, not a Python script: export it first "
            "(jupyter nbconvert --to script NOTEBOOK.ipynb) and profile the .py file",
            "script", spec.script,
        )  # fmt: skip
    if path.suffix.lower() in DATA_SUFFIXES:  # "a,b" parses as Python, then fails in the first run
        raise FieldError(
            f"--script {spec.script} is a {path.suffix.lower()} file, not a Python script: give the training "
            "script (.py)", "script", spec.script, "syntax",
        )  # fmt: skip
    suffix = path.suffix.lower()
    shell = _shell_launcher(source)
    if shell is None and suffix in SHELL_SUFFIXES and not source.startswith(b"#!"):  # no #! line says other
        shell = f"a {suffix} file"
    if shell:
        raise FieldError(
            f"--script {spec.script} is a shell script ({shell}), not a Python script: give the Python "
            "training script it starts (Stash launches it under torchrun itself)",
            "script", spec.script, "syntax",
        )  # fmt: skip
    try:
        compile(source, str(path), "exec")
    except (SyntaxError, ValueError) as error:
        where = f" (line {error.lineno})" if getattr(error, "lineno", None) else ""
        message = f"--script {spec.script} does not parse{where}: {getattr(error, 'msg', error)}"
        raise FieldError(message, "script", spec.script, "syntax") from None
    if not all(isinstance(arg, str) for arg in spec.script_args):
        raise FieldError("the script's arguments must be text", "script_args", spec.script_args)
    if spec.data_dir is not None and not Path(spec.data_dir).is_dir():
        why = "a file, not a folder" if Path(spec.data_dir).exists() else "no such directory"
        message = f"--data-dir {spec.data_dir}: {why}"
        raise FieldError(message, "data_dir", spec.data_dir, "missing")


# Suffixes of data, never of a training script: a CSV of numbers parses as Python and failed in R0 only.
DATA_SUFFIXES = frozenset({".csv", ".tsv", ".json", ".jsonl", ".parquet", ".duckdb", ".yaml", ".yml", ".txt",
                           ".md", ".log", ".npy", ".npz", ".pt", ".pth", ".ckpt"})  # fmt: skip


def _is_notebook(path: Path, source: bytes) -> bool:
    """A .ipynb file, or a JSON object with nbformat and cells (a notebook under another name)."""
    if path.suffix.lower() == ".ipynb":
        return True
    if not source.lstrip().startswith(b"{"):
        return False
    try:
        document = json.loads(source)
    except ValueError:
        return False
    return isinstance(document, dict) and "nbformat" in document and "cells" in document


def _machine_of(host: str) -> tuple[str, int]:
    """(host name in lower case or address, ssh port) of a valid "[user@]host[:port]": one machine in the
    spellings of one name ("root@H:022", "h" and "H:22" alike; the user does not change the machine)."""
    name, port = _name_and_port(host)
    try:
        name = str(ipaddress.ip_address(name))  # one spelling of an address: 2001:DB8:0::1 is 2001:db8::1
    except ValueError:
        name = name.lower()  # a host name (another name of the same machine is not found here)
    return name, int(port) if port else 22


def _port_in_range(host: str) -> bool:
    """A host's port, when it names one ("h:2222", "[v6]:2222"; a bare IPv6 address has none): 1..65535."""
    port = _name_and_port(host)[1]
    return port is None or (port.isdigit() and 1 <= int(port) <= 65535)


def _name_and_port(host: str) -> tuple[str, str | None]:
    """(the name or address, the port as written or None) of "[user@]host[:port]" ("[v6]:port" and a bare
    IPv6 address, which has none, alike)."""
    address = host.rsplit("@", 1)[-1]
    if address.startswith("["):
        name, _, rest = address[1:].partition("]")
        return name, rest[1:] if rest else None
    if address.count(":") == 1:
        name, _, port = address.partition(":")
        return name, port
    return address, None  # a name, an IPv4 or a bare IPv6 address: ssh's port 22


def validate_machines(spec: ProfileSpec) -> None:
    """The multi-machine options: consistent with --nodes, and no option that needs one machine."""
    if spec.hosts and spec.cluster is not None:
        raise FieldError("give either --hosts or --cluster, not both", "cluster", spec.cluster)
    if spec.cluster is not None and spec.cluster != "emulated":
        raise FieldError(f"--cluster {spec.cluster!r}: the only cluster kind is 'emulated'", "cluster")
    if spec.cluster_bandwidth is not None and spec.cluster is None:
        raise FieldError("--cluster-bandwidth applies to --cluster emulated only", "cluster_bandwidth")
    if spec.cluster_name is not None and spec.cluster is None:
        raise FieldError("--cluster-name applies to --cluster emulated only", "cluster_name")
    for host in spec.hosts:
        if not _HOST_RE.fullmatch(host) or not _port_in_range(host):
            message = f"--hosts: invalid host name {clipped(host, quoted=True)}: expected [user@]host[:port]"
            raise FieldError(message, "hosts", host)
    machines = [_machine_of(host) for host in spec.hosts]
    twice = next((host for index, host in enumerate(spec.hosts) if machines[index] in machines[:index]), None)
    if twice is not None:
        raise FieldError(
            f"--hosts names {clipped(twice)} twice: give each node its own machine", "hosts", twice, "twice"
        )
    if spec.hosts and len(spec.hosts) != spec.nodes:
        message = f"--hosts names {len(spec.hosts)} host(s) for --nodes {spec.nodes}; give one per node"
        raise FieldError(message, "hosts", len(spec.hosts), "count")
    if spec.cluster is not None and spec.nodes < 2:  # its nodes are this machine's: one alone is a local run
        message = (f"--cluster emulated takes --nodes 2 or more (got {spec.nodes}): one node of it alone is "
                   "this machine, measured as without --cluster")  # fmt: skip
        raise FieldError(message, "nodes", spec.nodes, "cluster")
    if spec.nodes > 1 and not spec.remote:
        message = f"--nodes {spec.nodes}: say which machines with --hosts or --cluster emulated"
        raise FieldError(message, "nodes", spec.nodes, "machines")
    if spec.remote and spec.disk_read_mbps is not None:
        raise FieldError(
            "--disk-read-mbps caps this machine's disk; it cannot be used with --hosts or --cluster",
            "disk_read_mbps",
        )
    _check_ssh(spec)
    _check_rendezvous(spec)


def check_cluster_state(spec: ProfileSpec, cluster_state: object) -> None:
    """--cluster-state (not a field: where this machine keeps the cluster's state) only with --cluster."""
    if cluster_state and spec.cluster is None:
        raise FieldError("--cluster-state applies to --cluster emulated only", "cluster", cluster_state)


def _check_rendezvous(spec: ProfileSpec) -> None:
    """The rendezvous options are for runs across machines: on this machine alone they were ignored."""
    if spec.master_addr is not None and not spec.hosts:
        message = "--master-addr applies to --hosts only (on the emulated cluster the rendezvous is node 0)"
        raise FieldError(message, "master_addr", spec.master_addr)
    timeout_given = spec.comm_timeout_s != default_of("comm_timeout_s")
    if not spec.remote and (spec.master_port is not None or timeout_given):
        message = "--master-port and --comm-timeout need --hosts (or --cluster)"
        raise FieldError(message, "master_port", spec.master_port, "local")


def _check_ssh(spec: ProfileSpec) -> None:
    ssh = spec.ssh_user or spec.ssh_key or spec.ssh_config
    if not spec.remote and (ssh or spec.remote_python or spec.remote_workdir):
        # said as each one is: the emulated cluster takes --python and --workdir, not the ssh options
        message = ("--ssh-user, --ssh-key and --ssh-config need --hosts; --python and --workdir need --hosts "
                   "or --cluster")  # fmt: skip
        raise FieldError(message, "ssh_user", spec.ssh_user, "local")
    if spec.cluster and not spec.hosts and ssh:  # they were ignored there
        message = ("--ssh-user, --ssh-key and --ssh-config apply to --hosts only (the emulated cluster has "
                   "its own root key and ssh_config)")  # fmt: skip
        raise FieldError(message, "ssh_user", ssh)
    if spec.ssh_config and not Path(spec.ssh_config).is_file():
        message = f"--ssh-config: ssh_config {spec.ssh_config!r} does not exist or is not a file"
        raise FieldError(message, "ssh_config", spec.ssh_config)
    if spec.ssh_user and not _USER_RE.fullmatch(spec.ssh_user):
        expected = "expected letters, digits, _ . - (max 32)"
        message = f"--ssh-user: invalid user name {clipped(spec.ssh_user, quoted=True)}: {expected}"
        raise FieldError(message, "ssh_user", spec.ssh_user)
    if spec.ssh_key and not Path(spec.ssh_key).is_file():
        message = f"--ssh-key: ssh key {spec.ssh_key!r} does not exist or is not a file"
        raise FieldError(message, "ssh_key", spec.ssh_key)


def check_label(label: str | None) -> None:
    """The dashboard's rule for --instance: letters, digits and . _ - @ +, not starting with - (the command
    takes any label a catalog name can be)."""
    if label is not None and not _LABEL_RE.fullmatch(label):
        message = f"--instance {label!r}: letters, digits and . _ - @ + only, not starting with -"
        raise FieldError(message, "instance", label, "characters")


def _arguments_typed_in(script: str) -> str:
    """The hint for `--script "train.py 5"`: a file the text names up to a space, with the rest as its
    arguments (those go after `--`); "" where no such file is there."""
    for cut in (index for index in range(len(script) - 1, 0, -1) if script[index] == " "):
        head = Path(script[:cut])
        if head.is_file():
            arguments = script[cut + 1 :].strip()
            return f" (a script's own arguments go after --: --script {shell_word(str(head))} -- {arguments})"
    return ""


SHELL_SUFFIXES = (".sh", ".bash", ".zsh")  # a shell script without its #! line is one too


def _shell_launcher(source: bytes) -> str | None:
    """The interpreter line of a shell script (`#!/bin/bash`), which would fail as Python with "does not
    parse"; None for anything else."""
    first = source.split(b"\n", 1)[0].strip()
    if not first.startswith(b"#!") or b"python" in first:
        return None
    words = first[2:].decode(errors="replace").split()
    shells = ("sh", "bash", "zsh", "dash", "ksh")
    names = [Path(word).name for word in words[:2]]
    return printable(first.decode(errors="replace")) if any(name in shells for name in names) else None
