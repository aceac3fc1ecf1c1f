"""torchrun that exits without the interpreter's teardown once it has succeeded.

`python -m stash_core.launch.torchrun ARGS` is `python -m torch.distributed.run ARGS`: torchrun's own main(),
arguments, output and exit status. A launch waits for torchrun to exit, and an interpreter that imported torch
spends about 0.6 s tearing itself down after torchrun's main() has returned (its workers gone by then, its
rendezvous store closed): a cost paid by every launch of every profile. So once main() returns, the output is
flushed and the process exits at once, as the workers do (measure/protocol.end_reported). A failure (an
exception, a non-zero exit) takes the ordinary way out, with torchrun's traceback and exit status.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
