"""Where a user's model code runs (zoo/contained.py).

- The command line (cli/main.py turns ENABLED on): in a child forked from the command, so that nothing the
  code does reaches what a command prints or writes.
- The dashboard's server (pages/_shared.py turns FRESH_PROCESS on): a process with many threads, which a fork
  would copy mid-flight, so the code runs in a new interpreter that forks the child in its turn. Nothing the
  code does (os.abort, a crash in an extension, a signal) can end the server that every user shares.
- Elsewhere (the Python API, tests): in-process, under the time limit of zoo/user_limits.py.
"""

ENABLED = False
FRESH_PROCESS = False


def enable() -> None:
    global ENABLED
    ENABLED = True


def enable_fresh_process() -> None:
    global FRESH_PROCESS
    FRESH_PROCESS = True
