"""Stash dashboard: `streamlit run app.py`. This entry point is only the frame: navigation, database choice.

Pages live in pages/, one file each.
"""

import streamlit as st

from pages._shared import database_setting
from stash_core.views.access import admission_cookie, admitted, expected_token, remember_admission
from stash_core.views.icon import tab_icon

st.set_page_config(page_title="Stash", page_icon=tab_icon(), layout="wide")  # drawn, not fetched

TOKEN_FIELD = "stash_token_field"


def lock_page(reason: str, asks_token: bool) -> None:
    """Why this browser sees nothing; with a token, a field for it (given there, no address keeps it)."""
    st.error(reason, icon=":material/lock:")
    if asks_token:
        st.text_input("Access token", key=TOKEN_FIELD, type="password", help="printed by ./run.sh --listen")


# Private unless asked: a session beyond this machine sees nothing without the token (views/access.py).
port, token, opening = st.get_option("server.port"), expected_token(), False
if not st.session_state.get("stash_admitted"):
    given = st.session_state.get(TOKEN_FIELD) or st.query_params.get("token")
    kept = st.context.cookies.get(admission_cookie(port))
    allowed, reason = admitted(st.context.ip_address, given, token, port, kept)
    if not allowed:  # one hidden page: no list of the others either
        st.navigation(
            [st.Page(lambda: lock_page(reason, token is not None), title="Stash")], position="hidden"
        ).run()
        st.stop()
    st.session_state["stash_admitted"] = True
    opening = token is not None and bool(given)  # the token was just given: see below

sections = {
    "Measure": [
        st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page("pages/run.py", title="Run", icon=":material/play_circle:"),
        st.Page("pages/campaign.py", title="Campaign", icon=":material/cloud:"),
    ],
    "Analyse": [
        st.Page("pages/breakdown.py", title="Stall breakdown", icon=":material/stacked_bar_chart:"),
        st.Page("pages/compare.py", title="Compare instances", icon=":material/compare_arrows:"),
        st.Page("pages/models.py", title="Models", icon=":material/insights:"),
        st.Page("pages/recommend.py", title="Recommend", icon=":material/recommend:"),
        st.Page("pages/schedule.py", title="Schedule", icon=":material/schedule:"),
        st.Page("pages/spot.py", title="Spot", icon=":material/savings:"),
    ],
    "Data": [
        st.Page("pages/upload.py", title="Upload", icon=":material/upload_file:"),
        st.Page("pages/sql.py", title="SQL", icon=":material/terminal:"),
    ],
}

page = st.navigation(sections)
with st.sidebar:
    st.markdown("**Stash** · where the time of a training iteration goes")
if opening:  # kept for the browser's session; the page reopens without ?token= (views/access.py)
    st.html(remember_admission(token, port), unsafe_allow_javascript=True)
    st.caption("Opening the dashboard...")
    st.stop()  # no page runs with ?token= still in the address (one that sets a parameter would keep it)
if database_setting() is None:
    st.error("Choose a database file in the sidebar to continue.", icon=":material/database:")
    st.stop()
page.run()
