"""The forward pass of a user's script: the time inside the outermost module call(s) of each step.

The script's model is whatever nn.Module it calls (the module it passed to DDP, the DDP wrapper itself, a
loss module): the first iteration finds them with torch's global module hooks, which see every module call
and count the depth, so only the outermost call of a nest is timed. Global hooks take every module call of
the model off torch's fast path, so once one whole iteration has shown which modules are outermost, the
global hooks are replaced by hooks on those modules alone: the steady state costs two hook calls per
outermost call. Module calls inside a DataLoader (transforms that are modules) are not the forward pass.

Those hooks are Stash's, not the script's: a copy of a timed module (`torch.save(model, ...)`, pickle,
copy.deepcopy) holds the script's own hooks only, and `torch.jit.script` compiles the module without them
(it failed on them: "Hook 'after' ... expected to only have exactly 3 inputs"; pickling failed on the
timer's clock), so that the script saves and exports what it would without Stash.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterator

import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

# A module's dicts of forward hooks (by handle id) that Stash's hooks go into
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_always_called")


class ForwardTimer:
    def __init__(self, clock) -> None:
        self.clock = clock
        self.depth = 0
        self.opened = None  # the stamp at the start of the outermost call in progress
        self.outermost: dict[int, weakref.ref] = {}  # found while the global hooks are on
        self.searching = True
        self.on_modules: list[weakref.ref] = []  # the modules that carry this timer's hooks (narrowed)
        self.handles = [
            register_module_forward_pre_hook(self.before),
            register_module_forward_hook(self.after, always_call=True),  # also when the forward raises
        ]

    def before(self, module, args) -> None:
        if self.clock.in_loader:
            return
        self.depth += 1
        if self.depth == 1:
            if self.clock.optimizer_start is not None:
                # A forward inside optimizer.step(): the step runs a closure (as Lightning does), so its
                # own time cannot be told apart from forward and backward.
                self.clock.optimizer_start = None
                self.clock.closure_seen = True
            if self.searching:
                self.outermost.setdefault(id(module), weakref.ref(module))
            self.opened = self.clock.stamp()

    def after(self, module, args, output) -> None:
        if self.clock.in_loader or self.depth == 0:
            return
        self.depth -= 1
        if self.depth == 0 and self.opened is not None:
            self.clock.forward_pairs.append((self.opened, self.clock.stamp()))
            self.clock.forward_seen = True
            self.opened = None

    def narrow(self) -> bool:
        """After a whole iteration: hooks on the outermost modules only. False while none was called yet
        (the global hooks stay, and cost nothing while no module is called)."""
        modules = [module for ref in self.outermost.values() if (module := ref()) is not None]
        if not modules:
            return False
        self.remove()
        self._hook(modules)
        self.on_modules = [weakref.ref(module) for module in modules]
        self.searching = False
        self.outermost.clear()
        return True

    def _hook(self, modules: list) -> None:
        for module in modules:
            self.handles.append(module.register_forward_pre_hook(self.before))
            self.handles.append(module.register_forward_hook(self.after, always_call=True))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def hook_ids(self) -> set[int]:
        return {handle.id for handle in self.handles}

    @contextlib.contextmanager
    def lifted(self) -> Iterator[None]:
        """The modules without this timer's hooks for a while (torch.jit.script compiling one), then with."""
        if self.searching or not self.handles:
            yield
            return
        modules = [module for ref in self.on_modules if (module := ref()) is not None]
        self.remove()
        try:
            yield
        finally:
            self._hook(modules)


def _state_without(original: Callable, ids: Callable[[], set[int]]) -> Callable:
    """Module.__getstate__ that leaves out the hooks of `ids()` (a copy of the state's hook dicts; the module
    keeps them)."""

    def __getstate__(module):
        state = original(module)
        ours = ids()
        for key in _HOOK_DICTS if ours else ():
            hooks = state.get(key)
            if hooks and not ours.isdisjoint(hooks):
                kept = [(hook_id, hook) for hook_id, hook in hooks.items() if hook_id not in ours]
                state[key] = type(hooks)(kept)
        return state

    return __getstate__


def _scripted_without(original: Callable, timer: ForwardTimer) -> Callable:
    @functools.wraps(original)
    def script(*args, **kwargs):
        with timer.lifted():
            return original(*args, **kwargs)

    return script


def time_forward(clock) -> Callable[[], None]:
    """Start timing the forward pass into `clock`; returns the function that removes the hooks."""
    timer = ForwardTimer(clock)
    clock.narrow_hooks = timer.narrow
    original_state, original_script = torch.nn.Module.__getstate__, torch.jit.script
    torch.nn.Module.__getstate__ = _state_without(original_state, timer.hook_ids)
    torch.jit.script = _scripted_without(original_script, timer)

    def remove() -> None:
        timer.remove()
        torch.nn.Module.__getstate__ = original_state
        torch.jit.script = original_script

    return remove
