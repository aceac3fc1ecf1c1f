"""Running models without importing torch's compiler where nothing compiles.

Many of torch's functions are wrapped in guards that keep torch.compile from tracing into them: the reference
implementations that run batch norm, softmax, a loss ... on the meta device, every TorchDispatchMode, and an
optimizer's add_param_group, zero_grad and step (whose wrapper calls torch._dynamo.graph_break() at every
step). A guard's first call imports torch._dynamo, 2-3 s of CPU for work that compiles nothing: the meta
forward that checks a user model's output shape, the count of a step's operators (a cold `stash predict`),
and every measuring launch on the CPU (its first optimizer and DDP).

While the block runs, and only if nothing has imported the compiler yet, `torch._dynamo` is a stand-in
that serves what eager code asks of it, as the compiler does when it is not tracing: `disable(fn)` returns
fn unguarded (a guard only matters while the compiler traces, and nothing does), `graph_break()` does
nothing, `utils.get_optimize_ddp_mode()` gives the compiler's default mode (DDP checks it at construction:
anything but "python_reducer" keeps DDP's C++ reducer), and `trace_rules.clear_lru_cache()` (what
init_process_group calls once the compiler is in sys.modules) has no cache to clear. Anything else
asked of it (a model that calls torch.compile, reads the compiler's config, imports one of its modules)
loads the real compiler first, once, and gets the real answer: the stand-in costs such a model nothing
but the guards it served before. Afterwards the stand-in and every guard it served are removed, so a later
torch.compile or optimizer in the same process imports the real compiler and guards as usual.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

COMPILER = "torch._dynamo"
PACKAGE, _, NAME = COMPILER.rpartition(".")
CACHED = "__dynamo_disable"  # where torch._compile caches a guarded function's guard
# torch._dynamo.config.optimize_ddp's default (True) as get_optimize_ddp_mode() names it
DEFAULT_DDP_MODE = "ddp_optimizer"


@contextmanager
def compiler_unimported(when: bool = True) -> Iterator[None]:
    """Run the block with torch's compiler served by a stand-in (see above), unless it is loaded already or
    `when` is False (the callers' GPU paths, where workers import the compiler as torch does)."""
    if not when or COMPILER in sys.modules:
        yield
        return
    served: list[Callable] = []
    stand_in = _stand_in(served)
    loaded = _LoadedSubmodules()
    package = importlib.import_module(PACKAGE)
    sys.modules[COMPILER] = stand_in
    # as an import would bind it: torch's own __getattr__ would otherwise look it up at every optimizer step
    setattr(package, NAME, stand_in)
    sys.meta_path.insert(0, loaded)
    try:
        yield
    finally:
        _unbind(stand_in)
        if loaded in sys.meta_path:
            sys.meta_path.remove(loaded)
        for fn in served:
            if getattr(fn, CACHED, None) is fn:
                delattr(fn, CACHED)


def _unbind(stand_in: types.ModuleType) -> None:
    """Take the stand-in out of sys.modules and off torch, where it still is."""
    if sys.modules.get(COMPILER) is stand_in:
        del sys.modules[COMPILER]
    if vars(sys.modules[PACKAGE]).get(NAME) is stand_in:  # (not getattr: torch would import the compiler)
        delattr(sys.modules[PACKAGE], NAME)


def _stand_in(served: list[Callable]) -> types.ModuleType:
    stand_in = types.ModuleType(COMPILER)

    def disable(fn: Callable, recursive: bool = True, wrapping: bool = True) -> Callable:
        served.append(fn)
        return fn

    def graph_break(msg: str = "") -> None:
        return None

    def real(name: str) -> object:
        # Called for any attribute the stand-in lacks; of the dunders, __path__ only: an import of a compiler
        # module. Others (__file__, __wrapped__ ...) are asked by tools that look around: not there.
        if name.startswith("__") and name != "__path__":
            raise AttributeError(name)
        _unbind(stand_in)
        return getattr(importlib.import_module(COMPILER), name)

    def submodule(name: str, **served_here: Callable) -> types.ModuleType:
        """One of the compiler's modules serving `served_here`, the real module's answer for anything else."""
        module = types.ModuleType(f"{COMPILER}.{name}")

        def rest(attribute: str) -> object:
            if attribute.startswith("__"):  # not a package, and not the real module's file
                raise AttributeError(attribute)
            return getattr(real(name), attribute)

        vars(module).update(served_here, __getattr__=rest)
        return module

    stand_in.disable = disable  # type: ignore[attr-defined]
    stand_in.graph_break = graph_break  # type: ignore[attr-defined]
    ddp_mode = submodule("utils", get_optimize_ddp_mode=lambda: DEFAULT_DDP_MODE)
    # init_process_group clears the compiler's caches once it is in sys.modules: none yet, nothing to clear
    caches = submodule("trace_rules", clear_lru_cache=lambda: None)
    stand_in.utils, stand_in.trace_rules = ddp_mode, caches  # type: ignore[attr-defined]
    stand_in.__getattr__ = real  # type: ignore[attr-defined]
    return stand_in


class _LoadedSubmodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import torch._dynamo.X` through the stand-in: reading the stand-in's __path__ has just loaded the real
    compiler, X with it; the import system would run X's code a second time (a second module, a second
    config), so it is handed the module the real compiler loaded."""

    def find_spec(
        self, name: str, path: object, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name.startswith(COMPILER + ".") and name in sys.modules:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = sys.modules[spec.name]
        self._spec = module.__spec__  # the import system overwrites it with ours before exec_module
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._spec
