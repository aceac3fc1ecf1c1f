"""Every file the package reads that is not Python is named in pyproject's package-data: a wheel (`pip
install .`) otherwise lacks it, and the command that reads it fails only once installed (kernel_data/ was
left out)."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib

import pytest
from support import REPO


def test_every_data_file_of_the_package_goes_into_its_wheel() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the files the package tracks are not known")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["stash_core"]
    tracked = subprocess.run(["git", "ls-files", "stash_core"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()  # fmt: skip
    data = [path.removeprefix("stash_core/") for path in tracked if not path.endswith(".py")]
    assert data, "no data files found"
    # setuptools' globs: "*" stays within one folder, as fnmatch's does once the folder parts match
    left_out = [path for path in data if not any(
        fnmatch.fnmatch(path, pattern) and path.count("/") == pattern.count("/") for pattern in patterns
    )]  # fmt: skip
    assert left_out == []
