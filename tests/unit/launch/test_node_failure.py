"""One line for what went wrong on a node, from its ssh exit status and the stderr it shares with ssh."""

from __future__ import annotations

import pytest

from stash_core.launch.node_failure import failure_reason, node_label, port_in_use
from stash_core.launch.ssh import SshTarget

TARGET = SshTarget(host="10.213.0.11")
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "worker.py", line 3, in <module>',
    "ValueError: bad batch",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: worker failed",
    "some trailing noise",
]


def test_label_names_index_and_host():
    assert node_label(1, TARGET) == "node 1 (10.213.0.11)"


def test_lost_connection_names_the_ssh_clients_own_line_not_the_programs():
    lines = ["ready rank=1", "Timeout, server 10.213.0.11 not responding.", "RuntimeError: gloo lost a peer"]
    reason = failure_reason(TARGET, 255, lines)
    assert reason.startswith("lost its ssh connection: cannot reach host 10.213.0.11")
    assert "Timeout, server 10.213.0.11 not responding." in reason and "gloo" not in reason


def test_lost_connection_without_any_ssh_line():
    reason = failure_reason(TARGET, 255, ["ValueError: x"])
    assert reason.endswith("the connection dropped (no answer from the host)")


def test_refused_key_is_named_as_such():
    reason = failure_reason(TARGET, 255, ["ssh: root@10.213.0.11: Permission denied (publickey)."])
    assert reason.startswith("lost its ssh connection: authentication refused by host 10.213.0.11")


def test_workdir_problem_is_the_supervisors_own_line():
    line = "STASH_SUPERVISOR cannot use workdir '/nope': No such file or directory"
    assert failure_reason(TARGET, 125, ["noise", line]) == line


@pytest.mark.parametrize(
    ("code", "start"),
    [(1, "exited with code 1: "), (137, "was ended by signal 9: "), (200, "exited with code 200: ")],
)
def test_exit_status_with_the_last_exception_line(code, start):
    reason = failure_reason(TARGET, code, TRACEBACK)
    assert reason.startswith(start)
    assert reason.endswith("ValueError: bad batch")  # the worker's exception, not torchrun's banner


def test_torchruns_root_cause_when_the_worker_printed_no_exception():
    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "=" * 40,
             "Root Cause (first observed failure):", "[0]:", "  rank      : 1 (local_rank: 1)",
             "  exitcode  : 1 (pid: 77)", "  traceback : To enable traceback see: x", "=" * 40]  # fmt: skip
    reason = failure_reason(TARGET, 1, lines)
    assert reason == "exited with code 1: rank 1 (local_rank: 1) exited with code 1 (pid: 77)"


def test_without_an_exception_line_the_last_line_is_the_detail():
    assert failure_reason(TARGET, 3, ["one", "two", ""]) == "exited with code 3: two"
    assert failure_reason(TARGET, 3, []) == "exited with code 3: (no message)"


def test_port_in_use():
    assert port_in_use(["torch.distributed.DistNetworkError: ... EADDRINUSE ..."])
    assert port_in_use(["OSError: [Errno 98] Address already in use"])
    assert not port_in_use(["ValueError: x"])
