"""./run.sh says where the stash command is and how to put it on PATH; ./test.sh passes -q only when the
caller chose no verbosity (a second -q made `./test.sh --co -q` print per-file counts)."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stub_checkout(tmp_path: Path) -> Path:
    """run.sh and test.sh beside a no-op set-up and a .venv whose programs print their arguments."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    for name in ("run.sh", "test.sh"):
        shutil.copy2(REPO / name, root / name)
    (root / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    for program in ("python", "streamlit"):
        stub = root / ".venv" / "bin" / program
        stub.write_text('#!/usr/bin/env bash\necho "ARGS: $*"\n')
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return root


def args_of(root: Path, script: str, *args: str) -> tuple[list[str], str]:
    done = subprocess.run(["bash", script, *args], cwd=root, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("ARGS: "))
    return line.removeprefix("ARGS: ").split(), done.stdout


def test_test_sh_passes_one_quiet_flag_and_none_when_the_caller_chose(tmp_path: Path) -> None:
    root = stub_checkout(tmp_path)
    args, _ = args_of(root, "test.sh")
    assert args.count("-q") == 1
    args, _ = args_of(root, "test.sh", "--co", "-q")
    assert args.count("-q") == 1 and "--co" in args
    args, _ = args_of(root, "test.sh", "-v", "tests/unit")
    assert "-q" not in args and "-v" in args


def test_run_sh_says_where_stash_is_and_how_to_put_it_on_path(tmp_path: Path) -> None:
    root = stub_checkout(tmp_path)
    args, stdout = args_of(root, "run.sh")
    assert args[:2] == ["run", "app.py"]
    bin_dir = root.resolve() / ".venv" / "bin"
    assert f"stash: {bin_dir}/stash" in stdout
    assert f'export PATH="{bin_dir}:$PATH"' in stdout
