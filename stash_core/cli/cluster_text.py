"""An emulated cluster's status as `stash cluster up` and `status` print it, in words or JSON."""

from __future__ import annotations

import json
from pathlib import Path


def print_cluster_status(status: dict, as_json: bool, folder_given: bool) -> int:
    """Print a cluster's status; exit 1 where none, one not fully up or one whose namespaces are gone
    cannot be used (`status || up`), the reason in the JSON too (`error`, as every command's failure)."""
    shown, elsewhere = status.get("name") or "default", None
    if not status["nodes"]:  # a live cluster, its state in another folder: no stray, and not "none is up"
        from stash_core.launch.cluster.gone import no_state_message

        elsewhere = no_state_message(shown, Path(status["state_dir"]), "--state-dir", folder_given)
        if elsewhere and not as_json:
            print(elsewhere)
            return 1
    usable = bool(status["nodes"]) and not status["gone"] and status["up"]
    if as_json and not usable:
        why = "none is up" if not status["nodes"] else "its namespaces are gone" if status["gone"] else (
            "it is not fully up")  # fmt: skip
        error = elsewhere or f"emulated cluster {shown} cannot be used: {why}"
        status = {**status, "error": error, "exit_status": 1}
    print(json.dumps(status, indent=2) if as_json else format_cluster_status(status))
    return 0 if usable else 1


def format_shaping(shaping: dict, netem: bool | None = True) -> str:
    """A link's shaping as emulated: without the kernel's netem only the rate is, so no delay or loss is
    shown as if it were (what was asked for is said as not emulated)."""
    rate = shaping.get("rate_bps")
    rate_text = "unlimited" if not rate else (f"{rate / 1e9:g}gbit" if rate >= 1e9 else f"{rate / 1e6:g}mbit")
    delay_us, loss_pct = shaping.get("latency_us", 0) or 0, shaping.get("loss_pct", 0) or 0
    if netem is False:  # only what was asked of netem is said: a zero delay or loss needs none
        wanted = [f"delay {delay_us}us"] if delay_us else []
        wanted += [f"loss {loss_pct:g}%"] if loss_pct else []
        asked = f" ({', '.join(wanted)} asked, not emulated: no netem)" if wanted else ""
        return f"rate {rate_text}{asked}"
    return f"rate {rate_text}, delay {delay_us}us, loss {loss_pct:g}%"


def format_cluster_status(status: dict) -> str:
    name = status.get("name") or "default"
    others = status.get("other_clusters") or []
    other_text = f"\nother emulated clusters here: {', '.join(others)}" if others else ""
    if not status["nodes"]:
        extra = status.get("unrecorded_namespaces")
        where = f" (no state in {status['state_dir']})" if status.get("state_dir") else ""
        return (
            f"no emulated cluster {name}{where}"
            + (f" (stray namespaces: {', '.join(extra)})" if extra else "")
            + other_text
        )
    state = "GONE" if status.get("gone") else "up" if status["up"] else "NOT fully up"
    lines = [
        f"emulated cluster {name} {state}, addresses {status.get('subnet')} (state in {status['state_dir']})"
    ]
    width = max(len(node["namespace"]) for node in status["nodes"]) + 1
    for node in status["nodes"]:
        link = "up" if node.get("link_up") else "DOWN" if node.get("link_up") is False else "?"
        sshd = "sshd running" if node.get("sshd_alive") else "sshd NOT running"
        if node.get("exists") is False:  # its sshd may live on in the lost namespace, out of reach
            left = ", sshd left running in it" if node.get("sshd_alive") else ""
            link, sshd = "GONE", f"namespace gone{left}"
        cpus = f", cpus {','.join(map(str, node['cpus']))}" if node.get("cpus") else ""
        lines.append(
            f"  {node['namespace']:<{width}}{node['address']:<14}link {link:<5}"
            f"{format_shaping(node['shaping'], status.get('netem'))}, {sshd}{cpus}"
        )
    if not status.get("netem"):
        lines.append("  note: this kernel has no netem qdisc (sch_netem): only the rate is emulated here")
    for warning in status.get("warnings") or []:
        lines.append(f"warning: {warning}")
    if status.get("gone"):
        option = "" if name == "default" else f" --name {name}"
        missing = [node["namespace"] for node in status["nodes"] if not node.get("exists")]
        lost = "it lost its hub or its state"
        if missing:
            lost = f"namespace{'s' if len(missing) > 1 else ''} {', '.join(missing)} gone"
        lines.append(f"{lost}: stash cluster down{option}, then up again")
    if status.get("ssh_config"):
        lines.append(f"ssh: ssh -F {status['ssh_config']} {status['nodes'][0]['namespace']}")
    else:  # written last by the setup: one cut short has none
        lines.append("ssh: no client config (its setup did not finish): nodes cannot be reached by ssh")
    return "\n".join(lines) + other_text
