"""What would resolve a breakdown's unresolved stalls, said once under its figures: more iterations or a
quieter machine, or, for a profiled script whose own loop ran out, a script with more to do (its warning
says so, and more iterations cannot help: it has no more steps)."""

from __future__ import annotations

from collections.abc import Iterable

from stash_core.analysis.stalls import RESOLVE_HINT

# The words a run's warning starts its reason with when a profiled script ended by itself
# (engine/launch_warnings.script_end_warning); a stored breakdown keeps its warnings as text only.
SCRIPT_ENDED_WORDS = "the script ended by itself"
SCRIPT_ENDED_HINT = "a script with more to do (see its warning), or a quieter machine"


def resolve_hint(warnings: Iterable[object] | None) -> str:
    """The advice for a breakdown with these warnings."""
    ended = any(SCRIPT_ENDED_WORDS in str(warning) for warning in warnings or ())
    return SCRIPT_ENDED_HINT if ended else RESOLVE_HINT
