"""The data behind each dashboard page, one module per page (no Streamlit here)."""

from stash_core.views import (
    breakdown,
    campaign,
    common,
    compare,
    labels,
    models,
    overview,
    recommend,
    run_form,
    schedule,
    spot,
    sql,
    table_fit,
    upload,
)

__all__ = ["breakdown", "campaign", "common", "compare", "labels", "models", "overview", "recommend", "run_form",
           "schedule", "spot", "sql", "table_fit", "upload"]  # fmt: skip
