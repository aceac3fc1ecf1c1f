"""`python -m stash_core`: the `stash` command, through the same entry point (a Ctrl-C while the command line
loads ends it as `stash` does: exit status 130, no traceback)."""

from stash_core.command import run

run()
