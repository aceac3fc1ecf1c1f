"""Command-line arguments the benchmarks share: a parser whose --help is the script's whole docstring, counts
and sizes that must be positive, and comma lists from a fixed set of choices. A bad value is one line and
exit status 2 (argparse's own refusal), before anything is timed.

    parser = bench_parser(__doc__)
    parser.add_argument("--pairs", type=positive_int, default=20)
    parser.add_argument("--variants", type=choice_list(VARIANTS), default=",".join(VARIANTS))
"""

from __future__ import annotations

import argparse
import csv
import math
import signal
import sys
from collections.abc import Callable, Iterable


class BenchParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (no usage block) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (--help says more)\n")


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser that prints the docstring as written (argparse would rewrap it and a one-line cut would end
    mid-sentence). A bench run as the program whose reader goes away (`| head`) ends quietly, as a Unix tool
    ended by SIGPIPE, not with a traceback. SIGPIPE is the process's: a bench imported by another program (a
    test calling its parse_args) leaves it as that program has it, where the default would end the program
    silently at its next write to a pipe whose reader has gone (a child that exited before reading)."""
    run_as_program = sys._getframe(1).f_globals.get("__name__") == "__main__"
    if run_as_program and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return BenchParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive: at least 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def share(text: str) -> float:
    """A share above 0, at most 1 (an offered load)."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text} is above 1: a share, from above 0 to 1")
    return value


def choice_list(allowed: Iterable[str]) -> Callable[[str], str]:
    """A comma list whose every name is one of `allowed`, none twice (returned as given, spaces taken out)."""
    names = list(allowed)

    def parse(text: str) -> str:
        given = [name.strip() for name in text.split(",")]
        unknown = [name for name in given if name not in names]
        if unknown or not text.strip():
            raise argparse.ArgumentTypeError(
                f"{','.join(unknown) or repr(text)} is not one of {','.join(names)}"
            )
        if len(set(given)) < len(given):
            raise argparse.ArgumentTypeError(f"{text}: a name given twice")
        return ",".join(given)

    return parse


def shape(text: str) -> str:
    """An input shape, as given: positive whole numbers separated by commas (3,32,32, or 512 for tokens)."""
    try:
        [positive_int(part) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        wrong = f"{text!r} is not a shape: positive whole numbers, e.g. 3,32,32"
        raise argparse.ArgumentTypeError(wrong) from None
    return text


def cluster_shape(text: str) -> str:
    """A cluster as given, SWITCHESxNODESxGPUS (16x8x8): three positive whole numbers."""
    parts = text.split("x")
    try:
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(text)
        [positive_int(part) for part in parts]
    except argparse.ArgumentTypeError:
        wrong = f"{text!r} is not a cluster: SWITCHESxNODESxGPUS, three positive whole numbers, e.g. 16x8x8"
        raise argparse.ArgumentTypeError(wrong) from None
    return text


def model_name(text: str) -> str:
    """A model of the zoo (`stash models` lists them), or a factory of the user's (FILE.py:FACTORY,
    package.module:FACTORY), checked where it is built."""
    from stash_core.zoo import list_models

    if ":" not in text and text not in list_models():
        raise argparse.ArgumentTypeError(f"{text!r} is not a zoo model (`stash models` lists them)")
    return text


def spread_text(values: list[float], digits: int = 2) -> str:
    """The standard deviation of `values`, or n/a for fewer than two (one value has no spread, not 0)."""
    import statistics

    return f"{statistics.stdev(values):.{digits}f}" if len(values) > 1 else "n/a"


def write_csv(path, header: list[str], rows: list[list]) -> None:
    """A bench's rows as a CSV file with its header."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


if __name__ == "__main__":  # a helper module: what it is, where it is run from
    raise SystemExit("bench/bench_args.py holds the arguments the benchmarks share; run one of bench/*.py")
