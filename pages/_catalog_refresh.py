"""The warning of catalog rows an older Stash seeded, with the button that refreshes them (Recommend and
Campaign: the pages whose answers those rows decide)."""

import streamlit as st

from pages._shared import current_db, forget_cached_queries
from stash_core import views
from stash_core.errors import StashError
from stash_core.views import catalog_refresh as catalog_words
from stash_core.views.common import plain


def catalog_refresh(warnings: list[str], page: str) -> None:
    """The warnings of rows an older Stash seeded, and one button that gives them this Stash's values; `page`
    keys the button and what the page says after the rerun (refreshed_note)."""
    for warning in warnings:
        said = views.recommend.advice_in_page_words(warning)  # the command as this page's button
        st.warning(plain(said), icon=":material/update:")  # names: data
    if st.button(catalog_words.REFRESH_BUTTON, icon=":material/update:", key=f"{page}-catalog-refresh"):
        try:
            refreshed = catalog_words.refresh_builtin_rows(current_db())
        except StashError as exc:  # a database that cannot be written: said, the page kept
            st.error(plain(str(exc)), icon=":material/error:")
            return
        st.session_state[f"{page}-refreshed"] = len(refreshed)  # said after the rerun, above the new answer
        forget_cached_queries()  # as every page that writes: no answer of the rows before is kept
        st.rerun()  # the database changed: the answer is evaluated again on the refreshed rows


def refreshed_note(page: str) -> None:
    """After the button's rerun: how many rows took this Stash's values, said once."""
    refreshed = st.session_state.pop(f"{page}-refreshed", None)
    if refreshed is not None:
        st.success(f"{refreshed} built-in instance(s) of the catalog now hold this Stash's values: the "
                   "answer below uses them.", icon=":material/update:")  # fmt: skip
