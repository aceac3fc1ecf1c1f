"""The facade of stash_core: every name resolves, lazily, and importing the package loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import stash_core


@pytest.mark.parametrize("name", [name for name in stash_core.__all__ if not name.startswith("_")])
def test_every_facade_name_resolves(name):
    assert getattr(stash_core, name) is not None


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        stash_core.nothing_here  # noqa: B018


def test_importing_the_package_loads_neither_torch_nor_duckdb():
    code = "import sys, stash_core; print(sorted({'torch', 'duckdb', 'pandas'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
