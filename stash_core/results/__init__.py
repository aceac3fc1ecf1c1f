"""The versioned result document: write it, load it, migrate it forward, validate it.

SCHEMA_VERSION is the one version number of result (and probe) documents; code that builds a document
stamps it with this constant. The format is documented in docs/schema.md ("Result file").
"""

from stash_core.results.file import (
    MIGRATIONS,
    PROBE_KIND,
    RESULT_KIND,
    SCHEMA_VERSION,
    ResultDocument,
    check_probe,
    default_result_path,
    json_safe,
    load_document,
    load_result,
    upgrade_result,
    validate_result,
    write_result_atomic,
)

__all__ = [
    "MIGRATIONS",
    "PROBE_KIND",
    "RESULT_KIND",
    "SCHEMA_VERSION",
    "ResultDocument",
    "check_probe",
    "default_result_path",
    "json_safe",
    "load_document",
    "load_result",
    "upgrade_result",
    "validate_result",
    "write_result_atomic",
]
