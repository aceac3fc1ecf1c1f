"""./run.sh says where the stash command is and how to put it on PATH; ./test.sh passes -q only when the
caller chose no verbosity (a second -q made `./test.sh --co -q` print per-file counts)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def stub_checkout(tmp_path: Path) -> Path:
    """run.sh and test.sh beside a no-op set-up and a .venv whose programs print their arguments."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    for name in ("run.sh", "test.sh", "scripts/test_tiers.sh"):
        shutil.copy2(REPO / name, root / name)
    (root / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    (root / "scripts" / "setup_system.sh").write_text('#!/usr/bin/env bash\necho "SYSTEM PACKAGES"\n')
    for program in ("python", "streamlit"):
        stub = root / ".venv" / "bin" / program
        stub.write_text('#!/usr/bin/env bash\necho "ARGS: $*"\n')
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return root


def as_a_person_runs_it() -> dict[str, str]:
    """The environment without a tier's STASH_TEST_NO_SETUP (this suite itself runs inside a tier)."""
    return {name: value for name, value in os.environ.items() if name != "STASH_TEST_NO_SETUP"}


def args_of(root: Path, script: str, *args: str) -> tuple[list[str], str]:
    command = ["bash", script, *args]
    env = as_a_person_runs_it()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True, env=env)
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


@pytest.mark.parametrize("given", [["--server.address", "0.0.0.0"], ["--server.address=0.0.0.0"]])
def test_run_sh_refuses_an_address_given_around_listen(tmp_path: Path, given: list[str]) -> None:
    """Streamlit takes the last --server.address: passed on after run.sh's own, it bound the dashboard
    beyond this machine with no warning and no token."""
    root = stub_checkout(tmp_path)
    done = subprocess.run(["bash", "run.sh", *given], cwd=root, capture_output=True, text=True,
                          env=as_a_person_runs_it())  # fmt: skip
    assert done.returncode == 2 and "ARGS:" not in done.stdout, done.stdout
    assert "--listen ADDRESS" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize("given", [["--listen", "--server.port", "8598"], ["--listen", "192.0.2.1"]])
def test_run_sh_refuses_a_listen_address_it_cannot_bind_in_one_line_before_set_up(tmp_path, given) -> None:
    """The next option taken as the address, or an address not on this machine (192.0.2.1, a documentation
    address), ended in the server's traceback after set-up."""
    root = stub_checkout(tmp_path)
    (root / "scripts" / "setup.sh").write_text('#!/usr/bin/env bash\necho "SET UP"\n')
    done = subprocess.run(["bash", "run.sh", *given], cwd=root, capture_output=True, text=True,
                          env=as_a_person_runs_it())  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.startswith(f"run.sh: --listen {given[1]}") and len(done.stderr.splitlines()) == 1


def test_run_sh_help_is_its_own_usage_without_set_up(tmp_path: Path) -> None:
    root = stub_checkout(tmp_path)
    (root / "scripts" / "setup.sh").write_text('#!/usr/bin/env bash\necho "SET UP"\n')
    done = subprocess.run(["bash", "run.sh", "--help"], cwd=root, capture_output=True, text=True,
                          env=as_a_person_runs_it(), check=True)  # fmt: skip
    assert "--listen ADDRESS" in done.stdout and "SET UP" not in done.stdout and "ARGS" not in done.stdout


def test_run_sh_takes_a_relative_stash_db_from_where_it_is_typed(tmp_path: Path) -> None:
    root = stub_checkout(tmp_path)
    stub = root / ".venv" / "bin" / "streamlit"
    stub.write_text('#!/usr/bin/env bash\necho "ARGS: $STASH_DB"\n')
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    done = subprocess.run(["bash", str(root / "run.sh")], cwd=elsewhere, capture_output=True, text=True,
                          env={**as_a_person_runs_it(), "STASH_DB": "mine.duckdb"}, check=True)  # fmt: skip
    assert f"ARGS: {elsewhere}/mine.duckdb" in done.stdout.splitlines()


def test_run_sh_answers_any_host_name_only_with_listen(tmp_path: Path) -> None:
    """Private, the names of .streamlit/config.toml (localhost, 127.0.0.1, ::1: no DNS rebinding); with
    --listen, whatever name the machine is reached by (the token guards it)."""
    root = stub_checkout(tmp_path)
    args, _ = args_of(root, "run.sh")
    assert "--server.allowedHosts" not in args
    args, _ = args_of(root, "run.sh", "--listen", "0.0.0.0")
    assert args[args.index("--server.allowedHosts") + 1] == "*"
    # a browser without the token that makes a page fail sees no code or path of the server
    assert args[args.index("--client.showErrorDetails") + 1] == "none"
    assert "--client.showErrorDetails" not in args_of(root, "run.sh")[0]
    config = (REPO / ".streamlit" / "config.toml").read_text()
    assert 'allowedHosts = ["localhost", "127.0.0.1", "::1"]' in config


def test_test_sh_sets_up_unless_told_the_caller_did(tmp_path: Path) -> None:
    root = stub_checkout(tmp_path)
    (root / "scripts" / "setup.sh").write_text('#!/usr/bin/env bash\necho "SETUP $*"\n')
    # some tests: the Python packages and the system packages, before pytest
    _, stdout = args_of(root, "test.sh", "tests/unit")
    assert "SETUP --system" in stdout and "SYSTEM PACKAGES" not in stdout
    # the whole suite: the Python packages first; the tiers install the system packages beside tier 1
    _, stdout = args_of(root, "test.sh")
    assert "SETUP \n" in stdout and "SETUP --system" not in stdout
    assert stdout.count("SYSTEM PACKAGES") == 1
    for args in ([], ["tests/unit"]):
        env = {"PATH": "/usr/bin:/bin", "STASH_TEST_NO_SETUP": "1"}
        command = ["bash", "test.sh", *args]
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True, env=env)
        assert "SETUP" not in done.stdout and "SYSTEM" not in done.stdout and "ARGS: " in done.stdout


def test_the_ci_tiers_select_every_test_exactly_once() -> None:
    """The tiers' marker expressions: whatever markers a test carries, exactly one tier runs it."""
    import itertools

    from _pytest.mark.expression import Expression

    tiers = re.findall(r'bash test\.sh -m ("[^"]+"|\S+)', (REPO / "scripts" / "test_tiers.sh").read_text())
    assert len(tiers) == 4, tiers
    expressions = [Expression.compile(tier.strip('"')) for tier in tiers]
    names = ["cluster", "root", "launches", "quiet", "e2e", "slow"]
    for flags in itertools.product([False, True], repeat=len(names)):
        marks = {name for name, on in zip(names, flags, strict=True) if on}
        assert sum(e.evaluate(lambda name, marks=marks: name in marks) for e in expressions) == 1, marks


@pytest.mark.parametrize(
    ("marks", "folder", "said"),
    [
        ("pytest.mark.cluster", "unit", "marked cluster belongs in tests/cluster/"),
        ("pytest.mark.e2e", "app", "marked e2e belongs in tests/e2e/"),
        ("pytest.mark.cluster", "e2e", "marked cluster belongs in tests/cluster/"),
        ("pytest.mark.slow", "cluster", "every test there is marked cluster"),
        ('getattr(pytest.mark, "qu" + "iet"), pytest.mark.launches', "unit", "does not say mark.quiet"),
    ],
)
def test_a_test_that_no_tier_would_run_is_refused(tmp_path: Path, marks: str, folder: str, said: str) -> None:
    """The cluster and browser tiers collect only tests/cluster and tests/e2e, tier 1 leaves them out, and
    the quiet tier collects only the files that say mark.quiet: a test marked for a folder's tier elsewhere,
    a test in such a folder without its mark, or a quiet launch in a file the quiet tier would not find
    would run in no tier, so the suite refuses to collect it."""
    (tmp_path / "tests" / folder).mkdir(parents=True)
    for helper in ("conftest.py", "xdist_schedule.py"):  # the conftest imports the scheduling plugin
        shutil.copy2(REPO / "tests" / helper, tmp_path / "tests" / helper)
    test = f"import pytest\n\npytestmark = [{marks}]\n\n\ndef test_x():\n    pass\n"
    (tmp_path / "tests" / folder / "test_x.py").write_text(test)
    names = ["cluster", "e2e", "slow", "quiet", "launches"]
    markers = f"[tool.pytest.ini_options]\nmarkers = {[f'{name}: {name}' for name in names]}\n"
    (tmp_path / "pyproject.toml").write_text(markers)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0
    assert "test_x" in done.stdout + done.stderr and said in done.stdout + done.stderr


def _ci_checkout(tmp_path: Path, failing_tier: str = "") -> Path:
    """.ci/run, test.sh and the tiers beside a set-up that counts its runs and a python stub that prints its
    -m expression and fails (exit 1) for the tier whose expression is `failing_tier`."""
    root = stub_checkout(tmp_path)
    (root / ".ci").mkdir()
    shutil.copy2(REPO / ".ci" / "run", root / ".ci" / "run")
    (root / "scripts" / "setup.sh").write_text(f'#!/usr/bin/env bash\necho x >> "{root}/setups"\n')
    (root / ".venv" / "bin" / "python").write_text(
        "#!/usr/bin/env bash\n"
        'while [ $# -gt 0 ] && { [ "$1" != -m ] || [ "$2" = pytest ]; }; do shift; done\n'
        f'echo "TIER: $2"\n[ "$2" != "{failing_tier}" ]\n'
    )
    return root


def test_ci_sets_up_once_runs_every_tier_and_fails_when_one_does(tmp_path: Path) -> None:
    root = _ci_checkout(tmp_path / "ok")
    done = subprocess.run(
        ["bash", ".ci/run"], cwd=root, capture_output=True, text=True, env=as_a_person_runs_it()
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / "setups").read_text().count("x") == 1
    assert done.stdout.count("TIER: ") == 4 and "TIER: cluster" in done.stdout
    tiers = re.findall(r'bash test\.sh -m "?([^"\n]+)', (REPO / "scripts" / "test_tiers.sh").read_text())
    assert len(tiers) == 4, tiers
    for tier in tiers:
        failing = _ci_checkout(tmp_path / tier.replace(" ", "_"), failing_tier=tier)
        done = subprocess.run(
            ["bash", ".ci/run"], cwd=failing, capture_output=True, text=True, env=as_a_person_runs_it()
        )
        assert done.returncode != 0 and done.stdout.count("TIER: ") == 4, (tier, done.stdout)
    # system packages that cannot be installed fail the run, after every tier has run
    failing = _ci_checkout(tmp_path / "system")
    (failing / "scripts" / "setup_system.sh").write_text("#!/usr/bin/env bash\nexit 100\n")
    done = subprocess.run(
        ["bash", ".ci/run"], cwd=failing, capture_output=True, text=True, env=as_a_person_runs_it()
    )
    assert done.returncode != 0 and done.stdout.count("TIER: ") == 4
    assert "system packages 100" in done.stdout


def _setup_checkout(tmp_path: Path, uv_fails: bool = False) -> Path:
    """scripts/setup.sh beside a .venv whose pip and uv log their arguments (uv failing when asked)."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    for name in ("requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    programs = {
        "python": 'echo "python $*" >> "$LOG"',
        "pip": 'echo "pip $*" >> "$LOG"\n'
        '[ "$1 $2" = "config list" ] && echo "install.find-links=\'/from/pip/config\'"\nexit 0',
        "uv": f'[ "$1" = --version ] && exit 1\necho "uv $*" >> "$LOG"\nexit {1 if uv_fails else 0}',
    }
    for program, body in programs.items():
        stub = root / ".venv" / "bin" / program
        stub.write_text(f"#!/usr/bin/env bash\n{body}\n")
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return root


def _setup_log(root: Path, **env: str) -> list[str]:
    log = root / "log"
    environment = {"PATH": "/usr/bin:/bin", "LOG": str(log), **env}
    done = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=root, capture_output=True, text=True, env=environment
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_setup_installs_with_uv_passing_on_pips_wheel_folders_and_constraints(tmp_path: Path) -> None:
    root = _setup_checkout(tmp_path)
    lines = _setup_log(root, PIP_FIND_LINKS="/wheels/a /wheels/b", PIP_CONSTRAINT="/caps.txt")
    assert any(line.startswith("pip install -q uv==") for line in lines)
    installs = [line for line in lines if line.startswith("uv pip install")]
    assert len(installs) == 2 and "-r requirements-dev.txt" in installs[0] and "-e ." in installs[1]
    for install in installs:
        assert "--find-links /wheels/a --find-links /wheels/b --find-links /from/pip/config" in install
        assert "--constraint /caps.txt" in install
        assert "--compile-bytecode" not in install  # not every file: what Stash's processes load, below
    # byte-code for what Stash's processes load, by importing it in two processes, once per set of pins
    # (the two run at once: either may log first)
    loads = sorted(
        (line for line in lines if line.startswith("python -c import ")), key=lambda line: "torch" not in line
    )
    assert len(loads) == 2 and "import torch," in loads[0] and "stash_core.measure.worker" in loads[0]
    assert "import pandas," in loads[1] and "streamlit" in loads[1]
    assert list(root.glob(".venv/compiled-*"))
    again = _setup_log(root)[len(lines) :]
    assert not [line for line in again if line.startswith("python -c")]
    # without the PIP_ variables, pip's configuration files say where the wheels lie (any section)
    lines = _setup_log(_setup_checkout(tmp_path / "config"))
    assert "--find-links /from/pip/config" in next(
        line for line in lines if line.startswith("uv pip install")
    )


def test_setup_keeps_the_pinned_uv_that_names_its_platform(tmp_path: Path) -> None:
    root = _setup_checkout(tmp_path)
    pinned = re.search(r"^UV_VERSION=(\S+)$", (REPO / "scripts" / "setup.sh").read_text(), re.M)
    uv = root / ".venv" / "bin" / "uv"  # uv's own answer: "uv 0.13.9 (x86_64-unknown-linux-gnu)"
    answer = f'&& echo "uv {pinned[1]} (x86_64-unknown-linux-gnu)" && exit 0'
    uv.write_text(uv.read_text().replace("&& exit 1", answer))
    lines = _setup_log(root)
    assert not any(line.startswith("pip install -q uv==") for line in lines)  # 2 s a set-up, every time


def test_setup_falls_back_to_pip_when_uv_fails(tmp_path: Path) -> None:
    lines = _setup_log(_setup_checkout(tmp_path, uv_fails=True))
    assert "pip install -q -r requirements-dev.txt" in lines and "pip install -q --no-deps -e ." in lines


def _fresh_machine(root: Path, has_ensurepip: bool, root_user: bool) -> dict[str, str]:
    """A PATH whose python3 makes a stub .venv (with pip only once ensurepip is there, as Debian's does),
    whose apt-get installs ensurepip, and whose id says root or not."""
    tools = root / "tools"
    tools.mkdir()
    marker = root / "ensurepip-installed"
    if has_ensurepip:
        marker.touch()
    programs = {
        # venv-stub NAME: a .venv/bin/NAME that logs its arguments
        "venv-stub": 'mkdir -p .venv/bin\nprintf \'#!/usr/bin/env bash\\necho "%s $*" >> "$LOG"\\n\' "$1"'
        ' > ".venv/bin/$1"\nchmod +x ".venv/bin/$1"',
        "python3": 'echo "python3 $*" >> "$LOG"\n'
        f'[ "$1" = -c ] && [[ "$2" == *ensurepip* ]] && {{ [ -e "{marker}" ]; exit; }}\n'
        '[ "$1" = -c ] && { echo 11; exit 0; }\n'
        "venv-stub python && venv-stub uv\n"
        f'[ -e "{marker}" ] || {{ echo "ensurepip is not available" >&2; exit 1; }}\n'
        "venv-stub pip",
        "apt-get": f'echo "apt-get $*" >> "$LOG"\n[ "$1" = install ] && touch "{marker}"\nexit 0',
        "id": f"echo {0 if root_user else 1000}",
    }
    for program, body in programs.items():
        (tools / program).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (tools / program).chmod(0o755)
    return {"PATH": f"{tools}:/usr/bin:/bin", "LOG": str(root / "log")}


def test_setup_makes_again_an_environment_left_without_pip(tmp_path: Path) -> None:
    """python3 without Debian's venv package left .venv/bin/python and no pip: the next run, with the package
    there, failed at .venv/bin/pip instead of making the environment again."""
    root = _setup_checkout(tmp_path)
    (root / ".venv" / "bin" / "pip").unlink()
    env = _fresh_machine(root, has_ensurepip=True, root_user=False)
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    log = (root / "log").read_text().splitlines()
    assert "python3 -m venv .venv" in log and any(line.startswith("uv pip install") for line in log)


def test_setup_installs_the_venv_package_as_root_and_says_what_to_install_otherwise(tmp_path: Path) -> None:
    root = _setup_checkout(tmp_path / "root")
    shutil.rmtree(root / ".venv")
    env = _fresh_machine(root, has_ensurepip=False, root_user=True)
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    log = (root / "log").read_text().splitlines()
    assert any(line.startswith("apt-get install") and "python3.11-venv" in line for line in log), log
    assert (root / ".venv" / "bin" / "pip").exists()
    # without root: one line naming the package, and no half-made environment left behind
    user = _setup_checkout(tmp_path / "user")
    shutil.rmtree(user / ".venv")
    env = _fresh_machine(user, has_ensurepip=False, root_user=False)
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=user, capture_output=True, text=True, env=env)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "python3.11-venv" in done.stderr and not (user / ".venv").exists()
    assert "apt-get" not in (user / "log").read_text()
