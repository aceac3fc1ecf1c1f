"""The emulated links watched through a profile: checked as each launch ends (between launches, outside every
timed loop), so that a `stash cluster set` made and undone while the profile ran is seen, not only a change
still there at its end."""

from __future__ import annotations

from pathlib import Path

from stash_core.engine.progress import Reporter
from stash_core.launch.hosts import RemoteHosts, link_change_warning
from stash_core.spec import ProfileSpec


class LinkWatch(Reporter):
    """A reporter that keeps the first change of the links it sees (`change`: link_change_warning's words)."""

    def __init__(self, remote: RemoteHosts | None, spec: ProfileSpec, cluster_state: Path | None) -> None:
        self.remote, self.spec, self.cluster_state = remote, spec, cluster_state
        self.change: str | None = None

    def phase_finished(self, record: dict) -> None:
        if self.change is None:
            self.change = link_change_warning(self.remote, self.spec, self.cluster_state)

    def final_change(self) -> str | None:
        """The first change seen, else one there at the end (a check once the runs are over)."""
        return self.change or link_change_warning(self.remote, self.spec, self.cluster_state)
