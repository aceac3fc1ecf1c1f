"""Running a model on the meta device without importing torch's compiler.

Many of torch's reference implementations (the decompositions that run batch norm, softmax, GELU, a loss ...
on the meta device) and every TorchDispatchMode are wrapped in a guard that keeps torch.compile from tracing
into them; the guard's first call imports torch._dynamo, some 2-3 s for work that compiles nothing: the meta
forward that checks a user model's output shape (paid by every `stash profile` of a model file before its
first launch) and the count of a step's operators (decide/predict/step_cost.py, a cold `stash predict`).
While the block runs, and only if nothing has imported the compiler yet, the guards are served by a stand-in
that returns each function unguarded; afterwards the stand-in and every guard it served are removed, so a
later torch.compile or optimizer in the same process imports the real compiler and guards as usual.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

COMPILER = "torch._dynamo"
CACHED = "__dynamo_disable"  # where torch._compile caches a guarded function's guard


@contextmanager
def compiler_unimported() -> Iterator[None]:
    """Run the block with torch's compiler guards served unguarded, unless the compiler is loaded already."""
    if COMPILER in sys.modules:
        yield
        return
    served: list[Callable] = []

    def disable(fn: Callable, recursive: bool = True, wrapping: bool = True) -> Callable:
        served.append(fn)
        return fn

    stand_in = types.ModuleType(COMPILER)
    stand_in.disable = disable  # type: ignore[attr-defined]
    sys.modules[COMPILER] = stand_in
    try:
        yield
    finally:
        if sys.modules.get(COMPILER) is stand_in:
            del sys.modules[COMPILER]
        for fn in served:
            if getattr(fn, CACHED, None) is fn:
                delattr(fn, CACHED)
