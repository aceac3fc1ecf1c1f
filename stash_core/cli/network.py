"""Subcommands for machines and networks: remote hosts, the emulated cluster, bandwidth probes.

    stash remote check HOST           what a host offers a run: python, torch, Stash, GPUs
    stash cluster up|down|status|set  emulated clusters on this machine (root), one per --name
    stash probe                       all-reduce and point-to-point bandwidth and latency

`stash probe` takes the options that name the machines (--hosts, --cluster, ...) from
stash_core.spec_argparse, as `stash profile` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stash_core import __version__
from stash_core.cli.args import Number, count, duration_text, identifier, positive_real, rate_text, size_text
from stash_core.cli.cluster_text import format_cluster_status, format_shaping, print_cluster_status
from stash_core.cli.probe_store import store_probe
from stash_core.cli.remote_text import format_remote_info
from stash_core.errors import UsageError
from stash_core.pathargs import database_path, db_named_by, input_path, input_text, output_path
from stash_core.spec_argparse import add_machine_arguments
from stash_core.spec_parse import WORKERS, given_text
from stash_core.terminal import printable
from stash_core.units import parse_size_bytes

MAX_NODES = 16  # launch/cluster/names.MAX_NODES, not imported: building `stash --help` loads no cluster code
LOSS = Number(0, 100, whole=False, what="a percentage from 0 to 100")


def node_text(text: str) -> str:
    """argparse type of `cluster set --node`: 'all', an index or a comma list of indices."""
    if text.strip() == "all":
        return text
    for part in text.split(","):
        try:
            index = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected an index, a comma list or 'all'") from None
        if not 0 <= index < MAX_NODES:
            raise argparse.ArgumentTypeError(f"node index {index} is out of range (0 .. {MAX_NODES - 1})")
    return text


# Imports inside the command functions are deliberate: this module is loaded to build `stash --help`.


def add_commands(subparsers, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Register `remote`, `cluster` and `probe`."""
    remote = subparsers.add_parser("remote", help="remote hosts: check what a host offers a run")
    remote_commands = remote.add_subparsers(dest="remote_command", required=True, parser_class=parser_class)
    check = remote_commands.add_parser("check", help="python, torch, Stash version, CPUs and GPUs of a host")
    check.add_argument("host", help="[user@]host[:port]")
    check.add_argument("--ssh-user", type=given_text, default=None, help="user on the host")
    check.add_argument(
        "--ssh-key", type=input_text, default=None, help="private key file (only its path is used)"
    )
    check.add_argument("--python", type=given_text, default=None, help="python on the host (default python3)")
    check.add_argument("--workdir", type=given_text, default=None, help="directory to run from on the host")
    check.add_argument("--ssh-config", type=input_text, default=None, help="ssh_config file to use (ssh -F)")
    check.add_argument("--json", action="store_true", help="print the raw JSON")

    cluster = subparsers.add_parser("cluster", help="emulated clusters: namespaces, shaped links, sshd")
    cluster_commands = cluster.add_subparsers(
        dest="cluster_command", required=True, parser_class=parser_class
    )
    up = cluster_commands.add_parser("up", help="create a cluster of N nodes (root)")
    up.add_argument("--nodes", type=count(MAX_NODES), required=True,
                    help=f"machines to emulate, each a network namespace with an sshd (at most {MAX_NODES})")
    up.add_argument(
        "--bandwidth",
        type=rate_text(True),
        default="1gbit",
        help="link rate, tc style: 1gbit, 200mbit, 10mbps",
    )
    up.add_argument(
        "--latency", type=duration_text(10), default="0ms", help="one-way delay (needs the kernel's netem)"
    )
    up.add_argument("--loss", type=LOSS, default=0.0, help="packet loss in percent (needs netem)")
    up.add_argument("--split-cpus", action="store_true", help="give each node its own cores")
    up.add_argument(
        "--subnet", default=None,
        help="address range, a /24 (default: 10.213.0.0/24 for 'default', the first free 10.213.K.0/24 else)",
    )  # fmt: skip
    _cluster_arguments(up)
    down = cluster_commands.add_parser(
        "down", help="remove the cluster's namespaces, links, qdiscs, processes"
    )
    _cluster_arguments(down)
    status = cluster_commands.add_parser("status", help="what exists now")
    status.add_argument("--json", action="store_true", help="print the answer as JSON")
    _cluster_arguments(status)
    change = cluster_commands.add_parser("set", help="change a node's shaping, cut or restore its link")
    change.add_argument("--node", type=node_text, default="all", help="node index, comma list, or 'all'")
    change.add_argument("--bandwidth", type=rate_text(True), default=None, help="link rate, or 'unlimited'")
    change.add_argument("--latency", type=duration_text(10), default=None, help="one-way delay")
    change.add_argument("--loss", type=LOSS, default=None, help="packet loss in percent")
    state = change.add_mutually_exclusive_group()
    state.add_argument("--down", action="store_true", help="cut the link")
    state.add_argument("--up", action="store_true", help="restore the link")
    _cluster_arguments(change)

    probe = subparsers.add_parser("probe", help="all-reduce and point-to-point bandwidth and latency")
    probe.add_argument("--workers", type=WORKERS, default=2, help="workers per machine")
    probe.add_argument("--nodes", type=WORKERS, default=1, help="machines (with --hosts or --cluster)")
    probe.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                       help="NCCL on the GPUs, or gloo on the CPUs; auto: the GPUs where there are")
    probe.add_argument("--min-size", type=size_text(), default="4KiB", help="smallest all-reduce message")
    probe.add_argument("--max-size", type=size_text(), default="256MiB", help="largest all-reduce message")
    probe.add_argument(
        "--p2p-size", type=size_text(), default="16MiB", help="point-to-point bandwidth message"
    )
    probe.add_argument(
        "--gradient-size",
        type=size_text(),
        default=None,
        help="also all-reduce this many bytes in DDP buckets",
    )
    probe.add_argument(
        "--budget", type=positive_real(600), default=0.3, help="seconds of repetitions per size"
    )
    probe.add_argument("--threads-per-worker", type=count(1024), default=1, help="torch threads per worker")
    probe.add_argument(
        "--instance", type=identifier, default=None, help="label of the machine or cloud instance type"
    )
    probe.add_argument("--out", type=output_path, default=None, help="also write the probe as a JSON file")
    probe.add_argument("--no-store", action="store_true", help="do not store in the database")
    probe.add_argument("--json", action="store_true", help="print the probe as JSON")
    probe.add_argument(
        "--db", type=database_path, default=None, help="DuckDB file (default: $STASH_DB or ./results.duckdb)"
    )
    add_machine_arguments(probe)


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name", default=None,
        help="which cluster: 1-11 lowercase letters and digits, starting with a letter (default: the one in "
        "--state-dir, or 'default')",
    )  # fmt: skip
    parser.add_argument(
        "--state-dir", type=input_path, default=None,
        help="default: /run/stash-cluster-NAME; for 'default' $STASH_CLUSTER_STATE or /run/stash-cluster",
    )  # fmt: skip


# ---------------------------------------------------------------- remote


def cmd_remote(args) -> int:
    from dataclasses import replace

    from stash_core.launch.hosts import refuse_unused_user, validate_python, validate_workdir
    from stash_core.launch.ssh import parse_target, remote_check, validate_user

    key = Path(args.ssh_key).expanduser() if args.ssh_key else None
    config = Path(args.ssh_config).expanduser() if args.ssh_config else None
    target = parse_target(args.host, key_path=key, config_file=config)
    refuse_unused_user(args.ssh_user, [target])
    if args.ssh_user and target.user is None:
        target = replace(target, user=validate_user(args.ssh_user))
    python = validate_python(args.python or "python3")
    workdir = validate_workdir(args.workdir) if args.workdir else None
    info = remote_check(target, python=python, workdir=workdir)
    # exit 1 where the host cannot run this Stash's profiles, in JSON as in words: a script reads the status
    ready = info.get("stash_version") == __version__ and bool(info.get("torch_version"))
    if args.json and not ready:  # a failure's keys, as every command's JSON has them
        unready = "torch is not usable there" if not info.get("torch_version") else (
            f"it runs Stash {info.get('stash_version') or '(none)'}, this machine {__version__}")
        info = {**info, "error": f"{target} cannot run this Stash's profiles: {unready}", "exit_status": 1}
    print(json.dumps(info, indent=2, sort_keys=True) if args.json else format_remote_info(str(target), info))
    return 0 if ready else 1


# ---------------------------------------------------------------- cluster


def cmd_cluster(args) -> int:
    from stash_core.launch import cluster

    name, state_dir = args.name, args.state_dir
    if args.cluster_command == "up":
        status = cluster.cluster_up(
            args.nodes, bandwidth=args.bandwidth, latency=args.latency, loss_pct=args.loss,
            split_cpus=args.split_cpus, state_dir=state_dir, name=name, subnet=args.subnet,
        )  # fmt: skip
        print(format_cluster_status(status))
        return 0
    if args.cluster_command == "down":
        actions = cluster.cluster_down(state_dir, name)
        # the folder given names what was looked for, not a name guessed from its path
        which = f"with its state in {state_dir}" if name is None and state_dir else name or "default"
        if not actions:  # a mistyped name left the cluster meant running: the ones up are named
            from stash_core.launch.cluster.net import live_cluster_names

            looked_for = name or (None if state_dir else "default")  # a folder: any cluster may be it
            up = [other for other in live_cluster_names() if other != looked_for]
            actions = [f"no emulated cluster {which} was up" + (f" (up: {', '.join(up)})" if up else "")]
        print("\n".join(actions))
        # a cluster whose state is elsewhere is still up: a script must not read that as taken down
        return 1 if any(action.startswith(cluster.LEFT_ALONE) for action in actions) else 0
    if args.cluster_command == "status":
        return print_cluster_status(cluster.cluster_status(state_dir, name), args.json, state_dir is not None)
    return _cluster_set(args, state_dir, name)


def _cluster_set(args, state_dir: Path | None, name: str | None) -> int:
    from stash_core.launch import cluster

    if not (args.down or args.up) and (args.bandwidth, args.latency, args.loss) == (None, None, None):
        raise UsageError(
            "cluster set: nothing to change; give --bandwidth, --latency, --loss, --down or --up"
        )
    status = cluster.cluster_status(state_dir, name)
    nodes = status["nodes"]
    if not nodes:
        from stash_core.launch.cluster.gone import no_state_message

        where = Path(status["state_dir"])
        missing = no_state_message(status["name"], where, "--state-dir", state_dir is not None)
        if missing:  # a wrong folder is not a cluster that is not up
            raise UsageError(missing)
        option = "" if status["name"] == "default" else f" --name {status['name']}"
        raise UsageError(
            f"no emulated cluster {status['name']} is up (sudo stash cluster up{option} --nodes N)"
        )
    if args.node == "all":
        indices = [node["index"] for node in nodes]
    else:
        try:
            indices = [int(part) for part in args.node.split(",")]
        except ValueError:
            raise UsageError(f"--node {args.node!r}: expected an index, a comma list or 'all'") from None
    # every index checked before the first link changes: a bad one later in the list changes nothing
    missing = [index for index in indices if index not in {node["index"] for node in nodes}]
    if missing:
        raise UsageError(
            f"--node {args.node}: the emulated cluster {status['name']} has no node {missing[0]} "
            f"(nodes 0..{len(nodes) - 1}); nothing was changed"
        )
    indices = list(dict.fromkeys(indices))  # --node 1,1 changes node 1 once
    down = True if args.down else False if args.up else None
    warnings: dict[str, None] = {}  # each said once: nodes given the same shaping share one warning
    for index in indices:
        current = next((node for node in nodes if node["index"] == index), None)
        keep_down = bool(current and not current.get("link_up")) if down is None else down
        shaping = cluster.set_link(
            index, bandwidth=args.bandwidth, latency=args.latency, loss_pct=args.loss, down=keep_down,
            state_dir=state_dir, name=name,
        )  # fmt: skip
        shown = format_shaping(shaping, status.get("netem"))
        print(f"node {index}: {shown}{'  LINK DOWN' if shaping['down'] else ''}")
        if shaping.get("warning"):
            warnings[shaping["warning"]] = None
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- probe


def cmd_probe(args) -> int:
    from stash_core.cli.probe_text import format_probe, probe_json
    from stash_core.engine.probes import run_probe_command
    from stash_core.measure.probe_plan import FLOAT_BYTES, P2P_LATENCY_BYTES
    from stash_core.pathargs import default_db

    if args.workers < 1 or args.nodes < 1:
        raise UsageError("--workers and --nodes must be positive")
    min_size, max_size = (
        parse_size_bytes(args.min_size, "--min-size"),
        parse_size_bytes(args.max_size, "--max-size"),
    )
    sizes = (("--min-size", args.min_size, min_size), ("--max-size", args.max_size, max_size))
    for flag, text, size in sizes:
        if size % FLOAT_BYTES:  # the probe sends whole float32 values: 5 B would be measured as 4 B
            below = max(FLOAT_BYTES, size // FLOAT_BYTES * FLOAT_BYTES)
            raise UsageError(
                f"{flag} {text}: messages are whole float32 values; give a multiple of {FLOAT_BYTES} B "
                f"({below} or {below + FLOAT_BYTES})"
            )
    if min_size > max_size:
        raise UsageError("--min-size is larger than --max-size")
    gradient_bytes = parse_size_bytes(args.gradient_size, "--gradient-size") if args.gradient_size else None
    p2p_bytes = parse_size_bytes(args.p2p_size, "--p2p-size")
    if p2p_bytes // FLOAT_BYTES * FLOAT_BYTES <= P2P_LATENCY_BYTES:  # as sent: whole float32 values
        raise UsageError(
            f"--p2p-size {args.p2p_size}: the bandwidth message, sent as whole {FLOAT_BYTES}-byte values, "
            f"must be larger than the {P2P_LATENCY_BYTES} B latency message: give at least "
            f"{P2P_LATENCY_BYTES + FLOAT_BYTES} B"
        )
    db_path = args.db or default_db()
    # Where the probe goes is checked before it measures (as for `stash profile`).
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out {args.out} is a directory; give the probe file's name")
    if args.out is not None:
        from stash_core.api.profile_flow import refuse_losing_output
        from stash_core.results.file import PROBE_KIND
        from stash_core.userfiles import check_output

        check_output(args.out, "probe file")  # below a file, a device, a folder it may not write in
        refuse_losing_output(args.out, db_path, "--out", PROBE_KIND)  # nor one the database does not hold
    if not args.no_store:
        from stash_core.store.storable import check_storable

        locked = check_storable(db_path, db_named_by(args.db))  # refused now, not after the probe measured
        if locked:
            print(printable(locked.replace("the run is stored", "the probe is stored")), file=sys.stderr)
    probe = run_probe_command(
        workers_per_node=args.workers,
        nodes=args.nodes,
        device=args.device,
        min_size_bytes=min_size,
        max_size_bytes=max_size,
        p2p_size_bytes=p2p_bytes,
        gradient_bytes=gradient_bytes,
        budget_s=args.budget,
        threads_per_worker=args.threads_per_worker,
        instance=args.instance,
        machine_args=args,
        warn=lambda text: print(f"warning: {text}", file=sys.stderr),
    )
    if args.out is not None:
        from stash_core.results.file import write_result_atomic

        write_result_atomic(args.out, probe)
    print(json.dumps(probe_json(probe), indent=2) if args.json else format_probe(probe))
    if not args.no_store:
        store_probe(probe, args.out, db_path)
    if not args.json:
        where = [str(path) for path in (args.out, None if args.no_store else db_path) if path]
        print(printable(f"probe {probe['probe_id']}" + (f" saved to {' and '.join(where)}" if where else "")))
    return 0


COMMANDS: dict = {"remote": cmd_remote, "cluster": cmd_cluster, "probe": cmd_probe}
