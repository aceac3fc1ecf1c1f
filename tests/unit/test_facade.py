"""The package itself: its version and location, and importing it loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import stash_core


def test_the_package_names_its_version_and_its_parent_folder():
    assert stash_core.__version__.count(".") == 2
    assert (Path(stash_core.PACKAGE_PARENT) / "stash_core" / "__init__.py").is_file()


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        stash_core.nothing_here  # noqa: B018


def test_importing_the_package_loads_neither_torch_nor_duckdb():
    code = "import sys, stash_core; print(sorted({'torch', 'duckdb', 'pandas'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
