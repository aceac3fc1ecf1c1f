"""The instance catalog: machine shapes and prices (with date and source), seeded from instances.csv."""

from stash_core.decide.catalog.catalog import (
    CATALOG_CSV,
    COLUMNS,
    add_instance,
    apply_catalog_edits,
    builtin_instances,
    get_instance,
    list_instances,
    seed_catalog,
    set_instance,
)

__all__ = [
    "CATALOG_CSV",
    "COLUMNS",
    "add_instance",
    "apply_catalog_edits",
    "builtin_instances",
    "get_instance",
    "list_instances",
    "seed_catalog",
    "set_instance",
]
