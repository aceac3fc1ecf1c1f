"""The instance catalog: machine shapes and prices (with date and source), seeded from instances.csv, and the
check of a run's instance label against the machine it ran on (labels.py)."""

from stash_core.catalog.catalog import (
    CATALOG_CSV,
    COLUMNS,
    CatalogEdits,
    add_instance,
    apply_catalog_edits,
    builtin_instances,
    get_instance,
    is_stale_catalog_warning,
    list_instances,
    seed_and_refresh,
    seed_catalog,
    set_instance,
    stale_catalog_warning,
)
from stash_core.catalog.labels import (
    CONFIRMED_KEY,
    LabelCheck,
    check_document,
    check_label,
    check_runs,
    check_stored_run,
    confirm_label,
    label_problems,
    stored_label_checks,
)

__all__ = [
    "CATALOG_CSV",
    "COLUMNS",
    "CONFIRMED_KEY",
    "CatalogEdits",
    "LabelCheck",
    "add_instance",
    "apply_catalog_edits",
    "builtin_instances",
    "check_document",
    "check_label",
    "check_runs",
    "check_stored_run",
    "confirm_label",
    "get_instance",
    "label_problems",
    "list_instances",
    "seed_and_refresh",
    "seed_catalog",
    "set_instance",
    "is_stale_catalog_warning",
    "stale_catalog_warning",
    "stored_label_checks",
]
