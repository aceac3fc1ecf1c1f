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


def test_a_browser_that_gave_the_token_is_admitted_again_by_a_cookie_that_does_not_hold_it() -> None:
    from stash_core.views.access import admission_cookie, admission_proof, remember_admission

    proof = admission_proof("s3cret")
    assert "s3cret" not in proof and proof != admission_proof("s3cret!")
    assert admitted("203.0.113.7", None, "s3cret", 8765, proof) == (True, "")
    for wrong in (None, "", admission_proof("other"), proof[:-1], "s3cret"):
        allowed, reason = admitted("203.0.113.7", None, "s3cret", 8765, wrong)
        assert not allowed and "access token" in reason
    script = remember_admission("s3cret", 8765)
    assert admission_cookie(8765) in script and proof in script and "s3cret" not in script.replace(proof, "")
    assert "SameSite=Strict" in script and "location.replace" in script
