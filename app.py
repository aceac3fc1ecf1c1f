"""Stash dashboard: `streamlit run app.py`. This entry point is only the frame: navigation, database choice.

Pages live in pages/, one file each. The Models and Recommend pages join the navigation when their files
exist (pages/models.py, pages/recommend.py).
"""

from pathlib import Path

import streamlit as st

from pages._shared import database_setting

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="Stash", page_icon=":material/timer:", layout="wide")


def optional_page(file_name: str, title: str, icon: str) -> list[st.Page]:
    """A page that another part of Stash provides, listed only when its file is there."""
    return (
        [st.Page(f"pages/{file_name}", title=title, icon=icon)]
        if (HERE / "pages" / file_name).is_file()
        else []
    )


sections = {
    "Measure": [
        st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page("pages/run.py", title="Run", icon=":material/play_circle:"),
    ],
    "Analyse": [
        st.Page("pages/breakdown.py", title="Stall breakdown", icon=":material/stacked_bar_chart:"),
        st.Page("pages/compare.py", title="Compare instances", icon=":material/compare_arrows:"),
        *optional_page("models.py", "Models", ":material/insights:"),
        *optional_page("recommend.py", "Recommend", ":material/recommend:"),
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
