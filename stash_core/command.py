"""The `stash` command's entry point: loads the command line, then runs it.

A Ctrl-C while the command line loads (its imports take a few tenths of a second) ends the command as a
Ctrl-C during it does, exit status 130 and no traceback; cli/main.py handles the one during the command.
"""

from __future__ import annotations

import sys


def run() -> None:
    try:
        from stash_core.cli.main import main
    except KeyboardInterrupt:
        print("stash: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
