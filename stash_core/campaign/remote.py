"""What runs on a rented machine, as shell text: the set-up of Stash (SkyPilot's `setup`) and the profiles of
one instance type (its `run`), both run from the workdir, a copy of this checkout. The run script announces
each finished profile on a line of its own (MARKER), which the launching machine reads from the job's log to
copy that result file back at once: a machine lost later loses only the profile it was running.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from stash_core.campaign.plan import CampaignItem, CampaignSettings, profile_args, with_options

MARKER = "stash-campaign:"
REMOTE_ROOT = "/tmp/stash-campaign"  # REMOTE_ROOT/<cluster>/runs/<file>.json on the rented machine
VENV_VAR = "STASH_VENV"  # where the environment is made (default ~/stash-venv); an existing one is used as is
UV_VERSION = "0.13.9"  # as scripts/setup.sh

SETUP_SCRIPT = f"""\
set -euo pipefail
echo "{MARKER} setting up"
venv="${{{VENV_VAR}:-$HOME/stash-venv}}"
if [ ! -x "$venv/bin/python" ]; then
    if ! command -v uv >/dev/null 2>&1; then
        python3 -m pip install -q --user "uv=={UV_VERSION}"
        export PATH="$HOME/.local/bin:$PATH"
    fi
    uv venv -q --seed --python 3.11 "$venv"
fi
# The pinned packages of this checkout; torch==2.13.0 from the package index is its CUDA build on Linux.
"$venv/bin/python" -m pip install -q -r requirements.txt
"$venv/bin/python" -c 'import torch, stash_core
print("{MARKER} set up: torch", torch.__version__, "GPUs", torch.cuda.device_count())'
"""

# SkyPilot may put a prefix before each line of a job's log ("(task, pid=1234) ") and colour it
_DONE = re.compile(rf"(?:^|\s){MARKER} profiled (\d+) of (\d+) exit (\d+) ([A-Za-z0-9._-]+\.json)$")
_STARTED = re.compile(rf"(?:^|\s){MARKER} profiling (\d+) of (\d+)$")
_SET_UP = re.compile(rf"(?:^|\s){MARKER} setting up$")
_COLOUR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Finished:
    """A profile the run script announced as finished: its place, exit status and result file's name."""

    index: int
    total: int
    exit_code: int
    file_name: str


def results_dir(cluster: str) -> str:
    """The folder of the cluster's result files on the rented machine."""
    return f"{REMOTE_ROOT}/{cluster}/runs"


def result_file_name(item: CampaignItem) -> str:
    """A configuration's result file name (letters, digits, '.', '_' and '-' only)."""
    what = f"b{item.batch_size}" if item.script is None else f"s{str(item.script_sha256)[:8]}"
    key = f"{item.model}_{what}_w{item.workers_per_node}_n{item.nodes}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-") + ".json"


def remote_profile_args(item: CampaignItem, settings: CampaignSettings, cluster: str) -> list[str]:
    """`stash profile`'s arguments for one configuration on the rented machine: the campaign's settings,
    the result file in the cluster's folder there."""
    args = profile_args(item, replace(settings, results_dir=None))
    return with_options(args, "--out", f"{results_dir(cluster)}/{result_file_name(item)}")


def run_script(items: list[CampaignItem], settings: CampaignSettings, cluster: str) -> str:
    """The profiles of one instance type, one after the other, each announced before and after; exit 1 when
    any failed (the others still run)."""
    folder = results_dir(cluster)
    lines = [
        "set -u",
        f'venv="${{{VENV_VAR}:-$HOME/stash-venv}}"',
        f"mkdir -p {shlex.quote(folder)}",
        "failed=0",
    ]
    total = len(items)
    for index, item in enumerate(items, 1):
        database = f"{REMOTE_ROOT}/{cluster}/profiles.duckdb"
        argv = remote_profile_args(item, settings, cluster)
        argv = with_options(argv, "--db", database, "--progress", "none")
        args = " ".join(shlex.quote(arg) for arg in argv)
        lines += [
            f'echo "{MARKER} profiling {index} of {total}"',
            f'"$venv/bin/python" -m stash_core.api.child {args}',
            "status=$?",
            '[ "$status" = 0 ] || failed=$((failed + 1))',
            f'echo "{MARKER} profiled {index} of {total} exit $status {result_file_name(item)}"',
        ]
    lines.append('[ "$failed" = 0 ]')
    return "\n".join(lines) + "\n"


def parse_finished(line: str) -> Finished | None:
    """The profile a log line announces as finished, else None."""
    found = _DONE.search(_plain(line))
    if not found:
        return None
    index, total, exit_code, name = found.groups()
    return Finished(int(index), int(total), int(exit_code), name)


def parse_started(line: str) -> tuple[int, int] | None:
    """(k, n) of a 'profiling k of n' line, else None."""
    found = _STARTED.search(_plain(line))
    return (int(found.group(1)), int(found.group(2))) if found else None


def parse_setting_up(line: str) -> bool:
    """Whether a log line says the set-up has begun."""
    return bool(_SET_UP.search(_plain(line)))


def _plain(line: str) -> str:
    return _COLOUR.sub("", line).strip()
