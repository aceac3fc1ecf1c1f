"""SkyPilot's functions as a cloud campaign calls them (campaign/cloud.py), with a launch that "provisions" a
node of an emulated cluster (tests/cluster/) instead of a VM.

Everything after provisioning is real: the task's set-up and run scripts run on the node over SSH, from the
workdir (the nodes share this machine's files, so this checkout is the workdir as SkyPilot's copy of it would
be, and STASH_VENV is the environment the tests run in; PIP_NO_INDEX keeps pip from the network); the run's
log is streamed to tail_logs' output stream; a teardown takes the node's cluster down, with every process on
it and its results folder (the machine's disk). Like SkyPilot, the fake names each cluster for ssh
in ~/.sky/generated/ssh/CLUSTER (under the HOME the test sets).

A launch can be made to fail with an exception (SkyPilot's own types where SkyPilot is installed, else
classes of the same names), and the node of an instance type can be made to disappear when a line of its log
appears (`lose_node_on`).
"""

from __future__ import annotations

import itertools
import shlex
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

try:  # SkyPilot's own exception types where it is installed
    from sky.exceptions import ClusterDoesNotExist, ResourcesUnavailableError  # type: ignore
except ImportError:

    class ResourcesUnavailableError(Exception):  # type: ignore[no-redef]
        """Stands for sky.exceptions.ResourcesUnavailableError (no capacity, quota)."""

    class ClusterDoesNotExist(ValueError):  # type: ignore[no-redef]
        """Stands for sky.exceptions.ClusterDoesNotExist."""


@dataclass
class FakeCluster:
    name: str
    instance: str | None = None
    state_dir: Path | None = None
    job: subprocess.Popen | None = None
    ssh_config: Path | None = None


class FakeTask:
    """sky.Task as the campaign uses it: built from the YAML config."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    @classmethod
    def from_yaml_config(cls, config: dict[str, Any]) -> FakeTask:
        assert {"name", "workdir", "resources", "setup", "run"} <= set(config), config
        return cls(config)


class FakeSky:
    """The functions of `sky` that campaign/cloud.py calls."""

    Task = FakeTask

    def __init__(
        self,
        tmp: Path,
        home: Path,
        fail_launch: dict[str, Exception] | None = None,
        lose_node_on: tuple[str, str] | None = None,
    ) -> None:
        self.tmp, self.home = tmp, home
        self.fail_launch = fail_launch or {}
        self.lose_node_on = lose_node_on  # (instance type, log text): its node disappears at that line
        self.clusters: dict[str, FakeCluster] = {}
        self.calls: list[tuple[str, str]] = []
        self.requests: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.counter = itertools.count()

    # requests: SkyPilot's calls return a request id; get() runs it (and raises its errors)
    def _request(self, action) -> str:
        with self.lock:
            request_id = f"request-{next(self.counter)}"
            self.requests[request_id] = action
        return request_id

    def get(self, request_id: str) -> Any:
        return self.stream_and_get(request_id)

    def stream_and_get(
        self,
        request_id: str | None = None,
        log_path: str | None = None,
        tail: int | None = None,
        follow: bool = True,
        output_stream: Any = None,
    ) -> Any:
        return self.requests.pop(request_id)(output_stream)

    def status(self, cluster_names: list[str] | None = None) -> str:
        return self._request(
            lambda _: [{"name": name} for name in cluster_names or [] if name in self.clusters]
        )

    def cancel(self, cluster_name: str, all: bool = False) -> str:  # noqa: A002 - SkyPilot's name
        self.calls.append(("cancel", cluster_name))
        return self._request(lambda _: self._end_job(self.clusters[cluster_name]))

    def launch(
        self,
        task: FakeTask,
        cluster_name: str,
        idle_minutes_to_autostop: int | None = None,
        down: bool = False,
        retry_until_up: bool = False,
    ) -> str:
        self.calls.append(("launch", cluster_name))
        assert down and idle_minutes_to_autostop, "autostop with teardown: the safety net"
        return self._request(lambda stream: self._launch(task.config, cluster_name, stream))

    def _launch(self, config: dict[str, Any], name: str, stream: Any) -> tuple[int, None]:
        instance = config["resources"]["instance_type"]
        if instance in self.fail_launch:
            raise self.fail_launch[instance]
        from clusterkit import cluster_name

        from stash_core.launch import cluster

        record = self.clusters.setdefault(name, FakeCluster(name, instance))
        if record.state_dir is None:
            record.state_dir = self.tmp / f"node-{name}"
            with self.lock:
                label = f"c{next(self.counter)}"
            cluster.cluster_up(1, state_dir=record.state_dir, name=cluster_name(label))
            record.ssh_config = self._name_for_ssh(record)
        setup = self._ssh(record, config, config["setup"], capture=True)
        if stream is not None:  # the launch's log: the set-up's output
            stream.write(setup.stdout)
        if setup.returncode != 0:
            raise RuntimeError(f"setup failed on {name}: {setup.stdout[-2000:]}")
        record.job = subprocess.Popen(
            self._ssh_argv(record, config, config["run"]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        return 1, None

    def _name_for_ssh(self, record: FakeCluster) -> Path:
        """~/.sky/generated/ssh/CLUSTER, as SkyPilot writes it: `ssh CLUSTER` reaches the node."""
        from stash_core.launch import cluster

        node = cluster.cluster_hosts(record.state_dir)[0]
        text = Path(node.config_file).read_text()
        lines = [
            f"Host {record.name} {line[5:]}" if line.startswith("Host ") and "*" in line else line
            for line in text.splitlines()
        ]
        path = self.home / ".sky" / "generated" / "ssh" / record.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Host {record.name}\n    HostName {node.host}\n\n" + "\n".join(lines) + "\n")
        return path

    def _ssh_argv(self, record: FakeCluster, config: dict[str, Any], script: str) -> list[str]:
        env = {
            **config.get("envs", {}),
            "STASH_VENV": sys.prefix,  # this environment: the nodes share this machine's files
            "PIP_NO_INDEX": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        remote = f"cd {shlex.quote(config['workdir'])} && env {exports} bash -c {shlex.quote(script)}"
        return [
            "ssh",
            "-F",
            str(record.ssh_config),
            "-o",
            "ServerAliveInterval=1",
            "-o",
            "ServerAliveCountMax=3",
            record.name,
            remote,
        ]

    def _ssh(self, record, config, script: str, capture: bool) -> subprocess.CompletedProcess:
        return subprocess.run(
            self._ssh_argv(record, config, script),
            capture_output=capture,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )

    def tail_logs(
        self, cluster_name: str, job_id: int | None, follow: bool, tail: int = 0, output_stream: Any = None
    ) -> int:
        """The job's log to output_stream until it ends; 0 when it succeeded, 100 when it failed."""
        record = self.clusters.get(cluster_name)
        if record is None or record.job is None:
            raise ClusterDoesNotExist(f"cluster {cluster_name!r} does not exist")
        assert record.job.stdout is not None
        for line in record.job.stdout:
            (output_stream or sys.stdout).write(line)
            if self.lose_node_on and self.lose_node_on[0] == record.instance and self.lose_node_on[1] in line:
                self._lose(record)
        return 0 if record.job.wait() == 0 else 100

    def _lose(self, record: FakeCluster) -> None:
        """The node disappears (a preempted spot VM): its cluster goes, with everything running on it."""
        from stash_core.launch import cluster

        self.calls.append(("lost", record.name))
        cluster.cluster_down(record.state_dir)

    def down(self, cluster_name: str) -> str:
        self.calls.append(("down", cluster_name))
        return self._request(lambda _: self._down(cluster_name))

    def _down(self, name: str) -> None:
        record = self.clusters.pop(name, None)
        if record is None:
            raise ClusterDoesNotExist(f"cluster {name!r} does not exist")
        from stash_core.campaign.remote import REMOTE_ROOT
        from stash_core.launch import cluster

        if record.state_dir is not None:
            cluster.cluster_down(record.state_dir)
        self._end_job(record)
        shutil.rmtree(f"{REMOTE_ROOT}/{name}", ignore_errors=True)  # the machine's disk
        if record.ssh_config is not None:
            record.ssh_config.unlink(missing_ok=True)

    @staticmethod
    def _end_job(record: FakeCluster) -> None:
        if record.job is not None and record.job.poll() is None:
            record.job.kill()
            record.job.wait(timeout=30)


def fake_sky(tmp: Path, home: Path, **kwargs: Any) -> FakeSky:
    return FakeSky(tmp, home, **kwargs)


__all__ = ["ClusterDoesNotExist", "FakeSky", "ResourcesUnavailableError", "SimpleNamespace", "fake_sky"]


# An installed SkyPilot as `stash campaign --cloud --dry-run` finds it: a `sky` package on the path, with the
# version in its metadata, whose Task and Resources check a task against the catalog written in its home
# (campaign/sky_check.py writes it there) the way SkyPilot's do: an instance type not in that catalog, or not
# in the task's region, is refused. Each task checked is a line of the file $FAKE_SKY_LOG; a launch finds no
# capacity (logged too).
_FAKE_SKY_INIT = """
import csv, json, os
from pathlib import Path

from sky import clouds, exceptions  # noqa: F401 - as SkyPilot's own package has them


def _log(what):
    if os.environ.get("FAKE_SKY_LOG"):
        with open(os.environ["FAKE_SKY_LOG"], "a") as handle:
            handle.write(what + "\\n")


class Resources:
    def __init__(self, infra, instance_type, use_spot=False, **_):
        from sky.skylet import constants

        self.cloud, _, self.region = infra.partition("/")
        self.instance_type, self.use_spot = instance_type, use_spot
        catalogs = Path.home() / ".sky" / "catalogs" / constants.CATALOG_SCHEMA_VERSION
        catalog = catalogs / self.cloud / "vms.csv"
        if not catalog.exists():  # no catalog written (a launch, not a plan's check): SkyPilot's own is used
            self.row = {"Price": "0", "SpotPrice": "0"}
            return
        rows = list(csv.DictReader(catalog.open()))
        found = [row for row in rows if (row["InstanceType"], row["Region"]) == (instance_type, self.region)]
        if not found:
            where = f"cloud {self.cloud} in {self.region}"
            raise ValueError(f"Invalid instance type {instance_type!r} for {where}.")
        self.row = found[0]

    def get_cost(self, seconds):
        return float(self.row["SpotPrice" if self.use_spot else "Price"]) * seconds / 3600

    def __str__(self):
        return f"{self.cloud.upper()}({self.instance_type})"


class Task:
    def __init__(self, config):
        self.resources = [Resources(**config["resources"])]

    @classmethod
    def from_yaml_config(cls, config):
        missing = {"name", "workdir", "resources", "setup", "run"} - set(config)
        if missing:
            raise ValueError(f"Invalid task: missing {sorted(missing)}")
        _log(json.dumps(config["resources"]["instance_type"]))
        return cls(config)


# A launch as a cloud without capacity answers it: nothing provisioned, so nothing to tear down.
def get(request):
    return request


def status(cluster_names=None, **_):
    return []


def launch(task, cluster_name=None, **_):
    _log("launch " + json.dumps(cluster_name))
    raise exceptions.ResourcesUnavailableError(f"no capacity for {cluster_name} (a stand-in SkyPilot)")


def down(cluster_name, **_):
    raise exceptions.ClusterDoesNotExist(f"cluster {cluster_name} does not exist")
"""

_FAKE_SKY_FILES = {
    "sky/__init__.py": _FAKE_SKY_INIT,
    "sky/exceptions.py": (
        "class CloudUserIdentityError(Exception):\n    pass\n\n\n"
        "class ResourcesUnavailableError(Exception):\n    pass\n\n\n"
        "class ClusterDoesNotExist(ValueError):\n    pass\n"
    ),
    "sky/clouds.py": "class AWS:\n    @classmethod\n    def get_user_identities(cls):\n        return None\n",
    "sky/skylet/__init__.py": "",
    "sky/skylet/constants.py": "CATALOG_SCHEMA_VERSION = 'v8'\n",
    "skypilot-0.0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: skypilot\nVersion: 0.0.1\n",
}


def install_fake_skypilot(folder: Path) -> Path:
    """A fake installed SkyPilot in `folder` (put it on sys.path and PYTHONPATH); returns the folder."""
    for name, text in _FAKE_SKY_FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder
