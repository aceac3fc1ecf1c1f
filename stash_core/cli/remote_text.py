"""`stash remote check`'s text: what a host offers a run, every text the host sent printed as text."""

from __future__ import annotations

from stash_core import __version__
from stash_core.terminal import printable


def format_remote_info(host: str, info: dict) -> str:
    """What a host offers, as lines; every text the host sent printed as text (its escapes as \\xNN)."""
    return printable(_remote_lines(host, info))


def _remote_lines(host: str, info: dict) -> str:
    gpus = info.get("gpus") or []
    gpu_text = ", ".join(str(gpu.get("name")) for gpu in gpus) if gpus else info.get("gpu_status") or "none"
    torch_text = info.get("torch_version") or f"not usable ({info.get('torch_error')})"
    return "\n".join(
        [
            f"host      {host} ({info.get('hostname')})",
            f"python    {info.get('python_version')} ({info.get('python_executable')})",
            f"torch     {torch_text}",
            f"stash     {_stash_text(info.get('stash_version'))}",
            f"cpus      {info.get('cpu_count')}",
            f"gpus      {len(gpus)}: {gpu_text}",
        ]
    )


def _stash_text(version: str | None) -> str:
    if not version:
        return "not installed"
    if version != __version__:
        return f"{version} (this machine runs {__version__}: a profile needs the same version on every host)"
    return version
