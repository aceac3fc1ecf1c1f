"""Whether a user's model code runs in a child process of its own (zoo/contained.py).

On for the command line (cli/main.py turns it on), so that nothing the code does reaches what a command
prints or writes. Off in the dashboard's server, a process with many threads that a fork would copy
mid-flight: there the code runs in-process under the time limit of zoo/user_limits.py, as before.
"""

ENABLED = False


def enable() -> None:
    global ENABLED
    ENABLED = True
