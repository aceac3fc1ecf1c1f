"""`import stash_core` stays light: the API's names are there, each loaded when first used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import REPO

import stash_core
from stash_core import api, errors, spec

HEAVY = ("torch", "pandas", "duckdb", "numpy")
IMPORT_BUDGET_S = 0.3

PROGRAM = """
import json, sys, time
started = time.perf_counter()
import stash_core
took_s = time.perf_counter() - started
after_import = sorted(name for name in HEAVY if name in sys.modules)
api_loaded = "stash_core.api" in sys.modules
stash_core.runs, stash_core.breakdown, stash_core.load_result, stash_core.Result  # looked up, not called
stash_core.profile, stash_core.profile_script  # their flow (torch, pandas, DuckDB) is loaded when called
print(json.dumps({"took_s": took_s, "after_import": after_import, "api_loaded": api_loaded,
                  "after_lookup": sorted(name for name in HEAVY if name in sys.modules)}))
"""


def test_importing_the_package_loads_neither_the_api_nor_torch_pandas_or_duckdb():
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.replace("HEAVY", repr(HEAVY))],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["after_import"] == [] and not outcome["api_loaded"]
    assert outcome["took_s"] < IMPORT_BUDGET_S
    assert outcome["after_lookup"] == []  # the reads load the store when called


def test_the_api_names_are_the_packages():
    for name in api.__all__:
        assert getattr(stash_core, name) is getattr(api, name)
        assert name in dir(stash_core) and name in stash_core.__all__
    assert stash_core.UsageError is errors.UsageError and stash_core.SaveError is errors.SaveError
    assert stash_core.ProfileSpec is spec.ProfileSpec  # what profile(spec=...) takes, as docs/api.md names it


def test_a_name_once_used_is_listed_once():
    stash_core.runs, api.runs, stash_core.UsageError  # noqa: B018  (each now in its module's globals)
    for module in (stash_core, api):
        listed = dir(module)
        assert "runs" in listed and len(listed) == len(set(listed))


def test_an_unknown_name_of_the_api_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'profiles'"):
        api.profiles  # noqa: B018
