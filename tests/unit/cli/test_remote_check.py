"""`stash remote check` exits as the host is: 0 where it can run this Stash's profiles, 1 where not, in JSON
as in words."""

from __future__ import annotations

import pytest

from stash_core.cli.main import main


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_host_that_cannot_profile_exits_1_in_json_too(monkeypatch, capsys, json_flag) -> None:
    """`remote check --json` exited 0 for a host without torch, where the table's exit was 1."""
    from stash_core import __version__
    from stash_core.launch import ssh

    hosts = {"ready": {"stash_version": __version__, "torch_version": "2.13.0"},
             "no-torch": {"stash_version": __version__, "torch_version": None},
             "old": {"stash_version": "0.0.1", "torch_version": "2.13.0"}}  # fmt: skip
    monkeypatch.setattr(ssh, "remote_check", lambda target, **_: {"python": "3.11", **hosts[target.host]})
    codes = {host: main(["remote", "check", host, *json_flag]) for host in hosts}
    capsys.readouterr()
    assert codes == {"ready": 0, "no-torch": 1, "old": 1}
