"""What a cloud campaign's machines get of this checkout: SkyPilot copies the folder that holds stash_core to
each one as the workdir, so the files a campaign names (model files, a script) must lie in it and are named by
their path inside it; Stash installed as a package has no such folder."""

from __future__ import annotations

from pathlib import Path

import stash_core
from stash_core.campaign.plan import check_model_names
from stash_core.errors import UsageError


def refuse_without_checkout() -> None:
    """A cloud campaign copies the folder that holds stash_core (a Stash checkout) to each machine and
    installs its requirements.txt there: Stash installed as a package has neither, and the folder it would
    copy is the whole site-packages (torch included), rented for a setup that fails."""
    root = Path(stash_core.PACKAGE_PARENT)
    if not (root / "requirements.txt").is_file():
        raise UsageError(
            f"--cloud copies a Stash checkout to each machine, and Stash here is installed as a package "
            f"({root} holds no requirements.txt): run the campaign from a checkout of this Stash version"
        )


def workdir_file(path: str, flag: str) -> str:
    """A file's path inside this checkout, which SkyPilot copies to each machine as the workdir."""
    root = Path(stash_core.PACKAGE_PARENT).resolve()
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_relative_to(root):
        raise UsageError(f"{flag} {path}: with --cloud it must lie in {root} (copied to each machine as the "
                         "workdir)")  # fmt: skip
    return resolved.relative_to(root).as_posix()


def workdir_models(models: list[str]) -> list[str]:
    """The models as the rented machine finds them: a model file (FILE.py:FACTORY) must lie in this checkout,
    which SkyPilot copies there as the workdir, and is named by its path inside it."""
    check_model_names(models)
    root = Path(stash_core.PACKAGE_PARENT).resolve()
    named = []
    for model in models:
        location, _, factory = model.rpartition(":")
        if not location.endswith(".py"):
            named.append(model)
            continue
        path = Path(location).expanduser().resolve()
        if not path.is_relative_to(root):
            raise UsageError(f"--models {model}: with --cloud a model file must lie in {root} (copied to "
                             "each machine as the workdir), or give package.module:FACTORY")  # fmt: skip
        named.append(f"{path.relative_to(root).as_posix()}:{factory}")
    return named


def model_ref(model: str) -> str:
    """A campaign's model as the remote machine's checkout names it: a model file relative to the checkout's
    root (every profile runs there), a zoo name as it is."""
    location = model.rpartition(":")[0]
    relative = location.endswith(".py") and not Path(location).is_absolute()
    return str(Path(stash_core.PACKAGE_PARENT) / model) if relative else model
