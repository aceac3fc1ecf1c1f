"""Who may see the dashboard: every session on this machine; beyond it, only a session that gave the token.

`./run.sh` binds the dashboard to 127.0.0.1. `./run.sh --listen ADDRESS` (or STASH_LISTEN) binds it to
ADDRESS and sets STASH_DASHBOARD_TOKEN; then every session must open the URL with `?token=...` once (its
Run page starts the user's code, so an open port must not be an open shell). A dashboard started by other
means, bound beyond this machine without a token, serves only sessions from this machine.

Without a token, "from this machine" is where the connection comes from: every account on the machine, and
whoever a proxy on it lets through, counts. A web page elsewhere can make the user's own browser connect from
here, by pointing its name at 127.0.0.1 (DNS rebinding): Streamlit's server.allowedHosts (.streamlit/
config.toml: localhost, 127.0.0.1, ::1) refuses the WebSocket of a page that came by another name, before
this code runs.
"""

from __future__ import annotations

import hmac
import os

TOKEN_VARIABLE = "STASH_DASHBOARD_TOKEN"
LOOPBACK_CLIENTS = (None, "127.0.0.1", "::1", "localhost")  # Streamlit gives None for a local session


def expected_token() -> str | None:
    return os.environ.get(TOKEN_VARIABLE) or None


def admitted(
    client_ip: object, given_token: str | None, token: str | None, port: int = 8501
) -> tuple[bool, str]:
    """(may this session see the pages, why not): with a token, the token; without, a local client only.
    `client_ip` is Streamlit's st.context.ip_address: an address text, or None for a local session (anything
    else, as a test harness gives, counts as no address); `port` is the dashboard's, for the SSH tunnel."""
    client_ip = client_ip if isinstance(client_ip, str) else None
    if token is not None:
        if given_token and hmac.compare_digest(given_token.encode(), token.encode()):
            return True, ""
        return False, (
            "This dashboard needs its access token: open the URL that `./run.sh --listen` printed "
            "(it ends in ?token=...)."
        )
    if client_ip in LOOPBACK_CLIENTS:
        return True, ""
    return False, (
        f"This dashboard serves only its own machine. Reach it through an SSH tunnel (ssh -L "
        f"{port}:127.0.0.1:{port} HOST), or start it with `./run.sh --listen ADDRESS`, which sets a token."
    )
