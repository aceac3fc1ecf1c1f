"""The forward pass of a user's script: the time inside the outermost module call(s) of each step.

The script's model is whatever nn.Module it calls (the module it passed to DDP, the DDP wrapper itself, a
loss module): the first iteration finds them with torch's global module hooks, which see every module call
and count the depth, so only the outermost call of a nest is timed. Global hooks take every module call of
the model off torch's fast path, so once one whole iteration has shown which modules are outermost, the
global hooks are replaced by hooks on those modules alone: the steady state costs two hook calls per
outermost call. Module calls inside a DataLoader (transforms that are modules) are not the forward pass.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook


class ForwardTimer:
    def __init__(self, clock) -> None:
        self.clock = clock
        self.depth = 0
        self.opened = None  # the stamp at the start of the outermost call in progress
        self.outermost: dict[int, weakref.ref] = {}  # found while the global hooks are on
        self.searching = True
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
        for module in modules:
            self.handles.append(module.register_forward_pre_hook(self.before))
            self.handles.append(module.register_forward_hook(self.after, always_call=True))
        self.searching = False
        self.outermost.clear()
        return True

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def time_forward(clock) -> Callable[[], None]:
    """Start timing the forward pass into `clock`; returns the function that removes the hooks."""
    timer = ForwardTimer(clock)
    clock.narrow_hooks = timer.narrow
    return timer.remove
