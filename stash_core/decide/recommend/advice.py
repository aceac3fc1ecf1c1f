"""What to do about an option a recommendation cannot predict: the advice added to its reason, only where
following it gets that option past this reason (a profile of one GPU did not make two of them measured, and no
profile of one machine measures the network between several)."""

from __future__ import annotations

from stash_core.decide.predict.catalog_fixes import catalog_fixes
from stash_core.decide.predict.collectives import NO_NETWORK
from stash_core.terminal import shell_word


def unpredicted_advice(
    reason: str, name: str, workers: int, count: int, model: str, batch_size: int, shape: tuple | None
) -> str:
    """' (what makes it predictable or measured)' for `count` x `name` with `workers` GPUs each, or ''."""
    instance = shell_word(name)
    fixes = catalog_fixes(reason, name)
    # a profile of the whole machine is the option of one, and the base of all where the instance itself is
    # what is unknown (its reason names no count: its GPU)
    whole_instance = count == 1 or not reason.startswith(f"{count} x ")
    if whole_instance and NO_NETWORK not in reason:
        shape_flag = f" --input-shape {','.join(map(str, shape))}" if shape else ""
        workers_flag = f" --workers {workers}" if workers > 1 else ""
        fixes.append(
            f"a profile there makes it measured: `stash profile --model {shell_word(model)} --batch-size "
            f"{batch_size}{shape_flag}{workers_flag} --instance {instance}`"
        )
    return f" ({'; or '.join(fixes)})" if fixes else ""
