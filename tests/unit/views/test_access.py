"""Who may see the dashboard: local sessions, or anyone with the token when one is set."""

from __future__ import annotations

from stash_core.views.access import admitted


def test_without_a_token_only_this_machine_sees_the_pages() -> None:
    for local in (None, "127.0.0.1", "::1"):
        assert admitted(local, None, None) == (True, "")
    allowed, reason = admitted("203.0.113.7", None, None)
    assert not allowed and "SSH tunnel" in reason


def test_with_a_token_every_session_needs_it_even_a_local_one() -> None:
    for client in (None, "127.0.0.1", "203.0.113.7"):
        assert admitted(client, "s3cret", "s3cret") == (True, "")
        for wrong in (None, "", "s3cre", "s3cret!", "S3CRET"):
            allowed, reason = admitted(client, wrong, "s3cret")
            assert not allowed and "access token" in reason


def test_the_ssh_tunnel_it_suggests_names_the_dashboards_own_port() -> None:
    allowed, reason = admitted("203.0.113.7", None, None, 8765)
    assert not allowed and "ssh -L 8765:127.0.0.1:8765 HOST" in reason and "8501" not in reason
