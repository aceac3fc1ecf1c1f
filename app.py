"""Stash dashboard: `streamlit run app.py`. This entry point is only the frame: navigation, database choice.

Pages live in pages/, one file each.
"""

import streamlit as st

from pages._shared import database_setting
from stash_core.views.access import admitted, expected_token

st.set_page_config(page_title="Stash", page_icon=":material/timer:", layout="wide")

# Private unless asked: a session beyond this machine sees nothing without the token (views/access.py).
if not st.session_state.get("stash_admitted"):
    port = st.get_option("server.port")
    allowed, reason = admitted(st.context.ip_address, st.query_params.get("token"), expected_token(), port)
    if not allowed:  # one hidden page: no list of the others either
        st.navigation(
            [st.Page(lambda: st.error(reason, icon=":material/lock:"), title="Stash")], position="hidden"
        ).run()
        st.stop()
    st.session_state["stash_admitted"] = True
    if "token" in st.query_params:  # not left in the address bar, the history or a screenshot
        del st.query_params["token"]

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
if database_setting() is None:
    st.error("Choose a database file in the sidebar to continue.", icon=":material/database:")
    st.stop()
page.run()
