"""Who may see the dashboard: every session on this machine; beyond it, only a session that gave the token.

`./run.sh` binds the dashboard to 127.0.0.1. `./run.sh --listen ADDRESS` (or STASH_LISTEN) binds it to
ADDRESS and sets STASH_DASHBOARD_TOKEN; then every browser must give the token once, in the URL (`?token=...`)
or in the lock page's field (its Run page starts the user's code, so an open port must not be an open shell).
A dashboard started by other means, bound beyond this machine without a token, serves only sessions from this
machine.

A browser that gave the token keeps its admission in a cookie for its session (a reload, another tab, a run
followed on the Run page need no token), and the page reopens without `?token=` (location.replace: the entry
of the history that held it is replaced, Back does not show it). What remains: the browser's own list of
visited addresses keeps a URL typed or pasted with `?token=` (the lock page's field keeps none); the cookie,
set by the page's script (a `streamlit run` script has no HTTP route of its own that could set an HttpOnly
one), holds a proof derived from the token, not the token, and like every cookie it goes to every port of the
host name and can be read by the scripts of the pages served there; it ends with the browser's session. A
browser that refuses cookies is admitted for the open page only: a reload asks for the token again.

Without a token, "from this machine" is where the connection comes from: every account on the machine, and
whoever a proxy on it lets through, counts. A web page elsewhere can make the user's own browser connect from
here, by pointing its name at 127.0.0.1 (DNS rebinding): Streamlit's server.allowedHosts (.streamlit/
config.toml: localhost, 127.0.0.1, ::1) refuses the WebSocket of a page that came by another name, before
this code runs.
"""

from __future__ import annotations

import hashlib
import hmac
import os

TOKEN_VARIABLE = "STASH_DASHBOARD_TOKEN"
LOOPBACK_CLIENTS = (None, "127.0.0.1", "::1", "localhost")  # Streamlit gives None for a local session


def expected_token() -> str | None:
    return os.environ.get(TOKEN_VARIABLE) or None


def admission_cookie(port: int) -> str:
    """The cookie that keeps a browser's admission: one per port, as cookies are shared by a host's ports."""
    return f"stash_admission_{port}"


def admission_proof(token: str) -> str:
    """What the cookie holds: derived from the token (it admits as the token does, but does not give it)."""
    return hmac.new(token.encode(), b"stash dashboard admission", hashlib.sha256).hexdigest()


def admitted(
    client_ip: object, given_token: str | None, token: str | None, port: int = 8501, kept: str | None = None
) -> tuple[bool, str]:
    """(may this session see the pages, why not): with a token, the token or the admission cookie's proof
    (`kept`); without, a local client only. `client_ip` is Streamlit's st.context.ip_address: an address
    text, or None for a local session (anything else, as a test harness gives, counts as no address); `port`
    is the dashboard's, for the SSH tunnel."""
    client_ip = client_ip if isinstance(client_ip, str) else None
    if token is not None:
        if given_token and hmac.compare_digest(given_token.encode(), token.encode()):
            return True, ""
        if kept and hmac.compare_digest(kept.encode(), admission_proof(token).encode()):
            return True, ""
        return False, (
            "This dashboard needs its access token: give it below, or open the URL that `./run.sh --listen` "
            "printed (it ends in ?token=...)."
        )
    if client_ip in LOOPBACK_CLIENTS:
        return True, ""
    return False, (
        f"This dashboard serves only its own machine. Reach it through an SSH tunnel (ssh -L "
        f"{port}:127.0.0.1:{port} HOST), or start it with `./run.sh --listen ADDRESS`, which sets a token."
    )


# The page's script once a browser gave the token: the cookie for the browser's session, then the page again
# without ?token= (replacing the history's entry that held it). Where the cookie is refused, the address bar
# loses the token all the same and Streamlit is told of the new address as of a Back (popstate), so that it
# shows the pages at once; a reload then asks for the token again.
_REMEMBER_SCRIPT = """<script>
(() => {
  const kept = "%(name)s=%(proof)s";
  document.cookie = kept + "; path=/; SameSite=Strict" + (location.protocol === "https:" ? "; Secure" : "");
  const url = new URL(location.href);
  url.searchParams.delete("token");
  if (document.cookie.split("; ").includes(kept)) {
    location.replace(url);
  } else {
    history.replaceState(history.state, "", url);
    dispatchEvent(new PopStateEvent("popstate"));
  }
})();
</script>"""


def remember_admission(token: str, port: int) -> str:
    """The HTML (a script) that keeps this browser's admission and takes ?token= out of the address."""
    return _REMEMBER_SCRIPT % {"name": admission_cookie(port), "proof": admission_proof(token)}
