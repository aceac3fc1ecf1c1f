"""The zoo's model names without importing the zoo: importing stash_core.zoo loads torch (seconds on a small
machine), which a campaign's plan and the stored profiles' lookups do not need to tell a zoo name from a
user's model. The names are the keys of zoo/registry.py's ZOO; tests/unit/test_zoo_names.py keeps the two the
same."""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import stat

from stash_core.errors import UsageError

SCRIPT_PREFIX = "script:"  # where a model's name goes, a profiled script's runs are "script:train.py"
SCRIPT_HINT = "predict it from its run with `stash predict --script-run RUN`"

ZOO_NAMES: frozenset[str] = frozenset({
    "alexnet", "mobilenet_v2", "shufflenet_v2", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "squeezenet1_0",
    "resnet10", "resnet12", "resnet16", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "vgg11", "vgg13", "vgg16", "vgg19",
    "bert_tiny", "bert_base", "bert_large",
    "gpt2_tiny", "gpt2", "gpt2_medium", "gpt2_large", "gpt2_xl", "llama_tiny", "tinyllama_1b", "llama2_7b",
})  # fmt: skip


# The zoo models that take token ids (one sequence length as their input shape); the others take images
# (C,H,W). zoo/registry.py's kinds, known without torch (a campaign's dry run imports none).
TOKEN_MODELS: frozenset[str] = frozenset({
    "bert_tiny", "bert_base", "bert_large",
    "gpt2_tiny", "gpt2", "gpt2_medium", "gpt2_large", "gpt2_xl", "llama_tiny", "tinyllama_1b", "llama2_7b",
})  # fmt: skip


def close_zoo_names(name: str) -> str:
    """' (did you mean resnet50, resnet152?)' for a name close to zoo models, else '' (as `profile` says)."""
    close = difflib.get_close_matches(str(name).strip().lower(), sorted(ZOO_NAMES), n=4, cutoff=0.5)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def refuse_other_input(name: str, shape: tuple[int, ...] | list[int] | None) -> None:
    """UsageError, as the zoo's build says it, for an input shape of the other kind than a zoo model takes;
    nothing for a user's model or no shape."""
    name = str(name).strip().lower()
    if name not in ZOO_NAMES or not shape:
        return
    given = ",".join(str(size) for size in shape)
    if name in TOKEN_MODELS and len(shape) != 1:
        raise UsageError(
            f"{name} takes token ids: input shape must be one sequence length (like 128); got {given}"
        )
    if name not in TOKEN_MODELS and len(shape) != 3:
        raise UsageError(f"{name} takes images: input shape must be C,H,W (like 3,224,224); got {given}")


def zoo_models() -> list[str]:
    """The zoo's model names, sorted (what stash_core.zoo.list_models() returns)."""
    return sorted(ZOO_NAMES)


def is_zoo_name(ref: object) -> bool:
    """Whether `ref` names a zoo model, which Stash builds itself. Anything else (a model file, a module's
    factory, a script) is code: a name a stored run holds is data, and a page never imports or runs it."""
    return isinstance(ref, str) and ref.strip().lower() in ZOO_NAMES


def canonical_model(ref: str) -> str:
    """The name a model's profiles are stored under: a zoo name in lower case, as the zoo builds it (the zoo
    takes `ResNet18` for `resnet18`); a user's FILE.py:FACTORY with its path written one way (`./m.py` and
    `m.py` are one file); anything else (a module's factory, a script run) as given; all without the spaces
    around them. Which file a FILE.py name stood for is its contents' hash (model_file_sha256)."""
    if not isinstance(ref, str):
        return ref  # not a name: the caller's own check refuses it
    name = ref.strip()  # as the zoo and `stash profile` take it
    if name.lower() in ZOO_NAMES:
        return name.lower()
    file = model_file(name)
    return f"{os.path.normpath(file)}:{name.rpartition(':')[2]}" if file else name


def model_file(ref: str) -> str | None:
    """The FILE.py of a user's model FILE.py:FACTORY, as written; None for anything else."""
    file, colon, _ = str(ref).strip().rpartition(":")
    return file if colon and file.endswith(".py") else None


def absolute_model_ref(ref: str) -> str:
    """A user's FILE.py:FACTORY with FILE.py made absolute (from this process's folder), anything else as
    given: a worker of this machine started in another folder (an emulated node's) finds the same file."""
    file = model_file(ref)
    if file is None:
        return ref
    return f"{os.path.abspath(os.path.expanduser(file))}:{factory_of(ref)}"


def model_file_stamp(ref: str) -> tuple[int, int] | None:
    """(modification time in ns, size in bytes) of a user model's FILE.py (FILE.py:FACTORY); None for a zoo
    name, a module path or a file that is not there. Part of an in-process cache's key: an edited file is
    counted afresh in a process that lives on (the dashboard)."""
    file = model_file(ref)
    try:
        status = os.stat(os.path.expanduser(file)) if file else None
    except (OSError, ValueError):
        return None
    return (status.st_mtime_ns, status.st_size) if status else None


MODEL_FILE_MAX_BYTES = 64 * 2**20  # a model file is code: anything larger is not hashed (no identity kept)


def model_identity(ref: str, sha256: str | None) -> str:
    """What tells one model from another where runs are matched to a plan: a user's FILE.py:FACTORY by its
    contents' hash and its factory (typed as m.py, ./m.py or /abs/m.py, or from another folder, it is one
    model), where the hash is known; anything else by canonical_model."""
    name = canonical_model(ref)
    if sha256 and model_file(name):
        return f"sha256:{sha256}:{name.rpartition(':')[2]}"
    return name


def model_file_sha256(ref: str) -> str | None:
    """The sha256 of a user model's FILE.py contents (FILE.py:FACTORY), which a profile keeps: two files of
    one name (an edited file, another folder's) are two models; None for a zoo name, a module's factory or a
    file that cannot be read. Read once per file as it is (its stamp keys the cache): a prediction asks for
    it at every lookup of the model's profiles."""
    file = model_file(ref)
    if file is None:
        return None
    path = os.path.realpath(os.path.expanduser(file))
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(status.st_mode):  # a pipe or a device would block or never end
        return None
    return _sha256_of(path, status.st_mtime_ns, status.st_size, status.st_ino)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, mtime_ns: int, size: int, inode: int) -> str | None:
    """The file's sha256; the stamp (modification time, size, inode) only keys the cache."""
    if size > MODEL_FILE_MAX_BYTES:
        return None
    try:
        with open(path, "rb") as handle:
            source = handle.read(MODEL_FILE_MAX_BYTES + 1)
    except OSError:
        return None
    return hashlib.sha256(source).hexdigest() if len(source) <= MODEL_FILE_MAX_BYTES else None


def factory_of(ref: str) -> str:
    """The FACTORY of FILE.py:FACTORY or package.module:FACTORY."""
    return str(ref).strip().rpartition(":")[2].strip()


PROFILE_HINT = f"profile a script with `stash profile --script FILE.py`, {SCRIPT_HINT}"


def refuse_script_name(ref: str, hint: str = PROFILE_HINT) -> None:
    """UsageError, with `hint`, for a profiled script's name ("script:train.py") given as a model: no module
    is named `script`, and a script's runs are predicted from a run."""
    if str(ref or "").strip().startswith(SCRIPT_PREFIX):
        raise UsageError(f"{str(ref).strip()} is a profiled script, not a model: {hint}")
