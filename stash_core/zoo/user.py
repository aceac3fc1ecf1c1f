"""User models: `path/to/file.py:FACTORY` or `package.module:FACTORY` (given num_classes if it takes it)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from torch import nn

from stash_core.terminal import named_message
from stash_core.zoo.user_limits import (
    LIMIT_VAR,
    UserCodeExit,
    UserCodeTimeout,
    UserModelError,
    limited_user_code,
    user_code_limit_s,
)

# Module names that user files are imported under: one per absolute path, so two files called model.py (or a
# file called torch.py) never replace each other or a real package in sys.modules.
USER_MODULE_PREFIX = "_stash_user_model_"
# One thread of a process imports and runs a user's model code at a time: what it changes while it runs
# (os._exit, sys.path, sys.dont_write_bytecode) is the process's, and a second thread would save the first's
# stand-ins as the originals and restore them for good (a notebook predicting model files in threads).
USER_CODE = threading.RLock()
# Raised through the user's code but not by its fault: Ctrl-C, and the limits' own (user_limits.py)
NOT_THE_MODELS = (KeyboardInterrupt, UserCodeTimeout, UserCodeExit)


def one_line(exc: BaseException) -> str:
    """'Type: message' on one line, without a traceback."""
    return named_message(type(exc).__name__, str(exc))


def split_ref(ref: str) -> tuple[str, str]:
    """'where:FACTORY' -> (where, FACTORY), or UsageError when either half is missing."""
    location, _, factory_name = ref.rpartition(":")
    if not location.strip() or not factory_name.strip():
        raise UserModelError(
            f"model reference {ref!r} must look like path/to/file.py:FACTORY or package.module:FACTORY"
        )
    return location.strip(), factory_name.strip()


def is_file_location(location: str) -> bool:
    return location.endswith(".py") or "/" in location or os.sep in location


def user_module_name(path: Path) -> str:
    return USER_MODULE_PREFIX + hashlib.sha1(str(path).encode()).hexdigest()[:16]


@contextmanager
def _nothing_written() -> Iterator[None]:
    """Read the user's code without writing beside it (no __pycache__ in their folder, which may be read-only,
    shared or watched), whatever PYTHONDONTWRITEBYTECODE says."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = saved


@contextmanager
def _on_sys_path(folder: Path | str, last: bool = False) -> Iterator[None]:
    """Let a user file import its neighbours while it is imported and its factory runs, then tidy up."""
    entry = str(folder)
    sys.path.insert(len(sys.path) if last else 0, entry)
    try:
        yield
    finally:
        if entry in sys.path:
            sys.path.remove(entry)


def _import_file(location: str) -> ModuleType:
    path = Path(location).expanduser().resolve()
    if path.is_dir():
        raise UserModelError(f"model file {location} is a folder; give a .py file")
    if path.exists() and not path.is_file():  # a device, a pipe, a socket: nothing to import
        raise UserModelError(f"model file {location} is not a regular file; give a .py file")
    if not path.is_file():
        raise UserModelError(f"model file not found: {location}")
    if path.suffix != ".py":
        raise UserModelError(f"model file must be a .py file: {location}")
    name = user_module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserModelError(f"cannot import model file {location}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look classes up here while the file runs
    argv, sys.argv = sys.argv, [str(path)]  # a file that parses arguments as it loads sees none, as run alone
    try:
        spec.loader.exec_module(module)
    except NOT_THE_MODELS:
        sys.modules.pop(name, None)
        raise
    except BaseException as exc:  # GeneratorExit, SystemExit, a BaseException of its own too
        sys.modules.pop(name, None)
        raise UserModelError(f"cannot import model file {location}: {one_line(exc)}") from None
    finally:
        sys.argv = argv
    return module


def _import_module(location: str) -> ModuleType:
    try:
        return importlib.import_module(location)
    except NOT_THE_MODELS:
        raise
    except BaseException as exc:
        raise UserModelError(f"cannot import model module {location}: {one_line(exc)}") from None


@contextmanager
def _current_folder_if_needed(location: str) -> Iterator[None]:
    """A package in the current folder, as `python -m` would find it: Stash's processes start without that
    folder on their path (-P). It goes last and only while the module is imported and its factory runs, so no
    file there shadows a module elsewhere (a notebook's or a service's later imports included)."""
    try:
        here = os.getcwd()
        found = importlib.util.find_spec(location.split(".")[0]) is not None
    except (OSError, ImportError, ValueError):  # a removed folder, a bad name: the import says why
        found = True
    if found or here in sys.path:
        yield
    else:
        with _on_sys_path(here, last=True):
            yield


def accepts_num_classes(factory: Callable[..., object]) -> bool:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return False
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return True
        if parameter.name == "num_classes" and parameter.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            return True
    return False


def _classes_required(factory: Callable[..., object]) -> bool:
    """Whether the factory's num_classes has no default of its own (`make(num_classes)`)."""
    try:
        parameter = inspect.signature(factory).parameters.get("num_classes")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _refuse_required_arguments(ref: str, factory: Callable[..., object], passes_classes: bool) -> None:
    """A factory is called with no arguments, or num_classes alone: one that needs more is told so, rather
    than what Python's TypeError says of the call."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the call says what is wrong
        return
    missing = [
        parameter.name
        for parameter in parameters
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and not (passes_classes and parameter.name == "num_classes")
    ]
    if missing:
        needs = f"arguments {', '.join(missing)}" if len(missing) > 1 else f"an argument {missing[0]}"
        raise UserModelError(
            f"model factory {ref} needs {needs}: Stash calls a factory with no arguments, or with "
            "num_classes alone where it takes one; give the others defaults"
        )


def call_user_factory(ref: str, num_classes: int | None, default_classes: int) -> tuple[nn.Module, bool]:
    """Import the factory that ref names and call it; returns (model, whether num_classes was passed).
    Without `num_classes` the factory keeps its own default; `default_classes` only where its num_classes
    has none."""
    location, factory_name = split_ref(ref)
    # Another thread's model code past its limit (no alarm runs off the main thread) holds no other for good.
    if not USER_CODE.acquire(timeout=user_code_limit_s()):
        raise UserModelError(f"model factory {ref}: another thread's model code has run past the time limit "
                             f"({user_code_limit_s():g} s, {LIMIT_VAR})")  # fmt: skip
    try:
        return _call_user_factory(ref, location, factory_name, num_classes, default_classes)
    finally:
        USER_CODE.release()


def _call_user_factory(ref: str, location: str, factory_name: str, num_classes: int | None,
                       default_classes: int) -> tuple[nn.Module, bool]:  # fmt: skip
    # a time limit (os._exit cannot end Stash), and no byte-code written beside the user's files
    with limited_user_code(f"model {ref}"), _nothing_written():
        if is_file_location(location):
            folder = Path(location).expanduser().resolve().parent
            with _on_sys_path(folder):
                module = _import_file(location)
                return _call(ref, module, factory_name, num_classes, default_classes)
        with _current_folder_if_needed(location):
            module = _import_module(location)
            return _call(ref, module, factory_name, num_classes, default_classes)


def _call(
    ref: str, module: ModuleType, factory_name: str, num_classes: int | None, default_classes: int
) -> tuple[nn.Module, bool]:
    factory = getattr(module, factory_name, None)
    if factory is None:
        public = sorted(
            name
            for name, value in vars(module).items()
            if callable(value)
            and not name.startswith("_")
            and getattr(value, "__module__", None) == module.__name__
        )
        hint = f" (it defines: {', '.join(public[:8])})" if public else ""
        raise UserModelError(
            f"{ref}: no factory named {factory_name!r} in {module.__file__ or module.__name__}{hint}"
        )
    if not callable(factory):
        raise UserModelError(
            f"{ref}: {factory_name!r} is not a callable factory (its type is {type(factory).__name__})"
        )
    passes_classes = accepts_num_classes(factory) and (num_classes is not None or _classes_required(factory))
    _refuse_required_arguments(ref, factory, passes_classes)
    try:
        model = factory(num_classes=num_classes or default_classes) if passes_classes else factory()
    except NOT_THE_MODELS:
        raise
    except BaseException as exc:
        raise UserModelError(f"model factory {ref} raised {one_line(exc)}") from None
    if not isinstance(model, nn.Module):
        kind = type(model).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"  # "an int", "a dict"
        raise UserModelError(f"model factory {ref} returned {article} {kind}, not a torch.nn.Module")
    return model, passes_classes
