"""Errors that end a command with a clear one-line message.

UsageError: the user gave something wrong (bad flag, bad file, unreachable host) -> exit 2.
MeasurementError: the input was fine but a measurement failed -> exit 1.
"""


class StashError(Exception):
    exit_code = 1


class UsageError(StashError):
    exit_code = 2


class MeasurementError(StashError):
    exit_code = 1
