"""The data behind each dashboard page, one module per page (no Streamlit here)."""

from stash_core.views import (
    breakdown,
    common,
    compare,
    models,
    overview,
    recommend,
    run_form,
    schedule,
    spot,
    sql,
    upload,
)

__all__ = ["breakdown", "common", "compare", "models", "overview", "recommend", "run_form", "schedule",
           "spot", "sql", "upload"]  # fmt: skip
