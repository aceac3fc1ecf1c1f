"""Arguments shared by every group of `stash` subcommands."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterable
from datetime import date
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError
from stash_core.pathargs import database_path, default_db
from stash_core.spec_parse import (
    INT32_MAX,
    Number,
    count,
    empty_item,
    identifier,
    parse_input_shape,
    positive_int,
    positive_real,
)
from stash_core.units import GIB, finite_float, parse_duration_s, parse_size_bytes, rate_bps

__all__ = [
    "INT32_MAX", "Number", "add_db_argument", "clearable", "comma_list", "count", "db_path",
    "duration_text", "fraction", "gbps_text", "identifier", "iso_date", "non_negative", "positive_int",
    "positive_real", "rate_text", "seed", "shape_text", "size_text",
]  # fmt: skip

BLANKS = ("", "none", "null", "-")


def non_negative(high: float) -> Number:
    """A finite number from 0 up to `high`."""
    return Number(0, high, whole=False, what="a number >= 0")


def fraction(what: str = "a fraction between 0 and 1") -> Number:
    """A finite number strictly between 0 and 1."""
    return Number(0, 1, whole=False, low_open=True, high_open=True, what=what)


seed = Number(0, INT32_MAX, what="an integer >= 0")


def clearable(rule: Callable[[str], Any]) -> Callable[[str], str]:
    """argparse type of a value that 'none' (or 'null', '-') clears: checked by `rule`, kept as typed. An
    empty text is refused: a variable that expanded to nothing would clear a value without a word."""

    def check(text: str) -> str:
        _refuse_empty(text)
        if text.strip().lower() not in BLANKS:
            rule(text)
        return text

    return check


def _refuse_empty(text: str) -> None:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value: give one, or 'none' to clear it")


def iso_date(text: str) -> str:
    """argparse type of a date YYYY-MM-DD (or 'none' that clears it), kept as typed; an empty text is
    refused, as clearable refuses it."""
    _refuse_empty(text)
    if text.strip().lower() in BLANKS:
        return text
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date like 2025-01-31, got {text!r}") from None
    if not date(1970, 1, 1) <= day < date(2262, 4, 11):
        raise argparse.ArgumentTypeError(f"expected a date from 1970 to 2262, got {text!r}")
    return text


def import_day(text: str) -> date | None:
    """argparse type of a date YYYY-MM-DD as a date ('none': None, the default), checked as iso_date."""
    checked = iso_date(text)
    return None if checked.strip().lower() in BLANKS else date.fromisoformat(checked.strip())


def rate_text(unlimited: bool = False) -> Callable[[str], str]:
    """argparse type of a tc-style link rate (1gbit, 200mbit, 10mbps), 8kbit .. 400gbit, kept as typed;
    with `unlimited`, also 'unlimited' or 'none'."""

    def check(text: str) -> str:
        if unlimited and text.strip().lower() in ("unlimited", "none"):
            return text
        bits_per_s = rate_bps(text.strip())
        if bits_per_s is None:
            raise argparse.ArgumentTypeError(f"expected a rate like 1gbit, 200mbit or 10mbps, got {text!r}")
        if not 8e3 <= bits_per_s <= 4e11:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (8kbit .. 400gbit)")
        return text

    return check


def duration_text(high_s: float) -> Callable[[str], str]:
    """argparse type of a duration (250us, 1ms, 2s, or 0) up to `high_s`, kept as typed."""

    def check(text: str) -> str:
        try:
            seconds = parse_duration_s(text)
        except UsageError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        if not 0 <= seconds <= high_s:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (0 .. {high_s:g}s)")
        return text

    return check


def size_text(high_bytes: int = 16 * GIB) -> Callable[[str], str]:
    """argparse type of a size in bytes (4KiB, 256MiB, 1GB) up to `high_bytes`, kept as typed."""

    def check(text: str) -> str:
        try:
            size = parse_size_bytes(text)
        except UsageError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        except (OverflowError, ValueError):  # more digits than a float holds
            raise argparse.ArgumentTypeError(f"{text[:40]!r}... is not a size") from None
        if size > high_bytes:
            raise argparse.ArgumentTypeError(f"{text!r} is larger than {high_bytes // GIB} GiB")
        return text

    return check


# A predicted link's rate, as `fit --link-gbps` takes it: 1 kbit/s to 100 Tbit/s (a p5's EFA is 3.2 Tbit/s;
# an emulated link's tc rate stops at 400gbit, rate_text).
PREDICTED_LINK_GBPS = (1e-6, 1e5)


def gbps_text(text: str) -> str:
    """argparse type of a predicted link's bandwidth, a rate (1gbit, 200mbit) or a number of Gbit/s; kept
    as typed."""
    low, high = PREDICTED_LINK_GBPS
    number = finite_float(text)
    bits_per_s = number * 1e9 if number is not None else rate_bps(text.strip())
    if bits_per_s is None:
        raise argparse.ArgumentTypeError(f"expected a rate like 1gbit or 200mbit, or Gbit/s, got {text!r}")
    if not low * 1e9 <= bits_per_s <= high * 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range ({low:g} to {high:g} Gbit/s)")
    return text


def shape_text(text: str) -> str:
    """argparse type of an input shape (3,224,224 or 128), kept as typed."""
    try:
        parse_input_shape(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--input-shape ")) from None
    return text


def comma_list(rule: Callable[[str], Any], most: int = 64) -> Callable[[str], list[Any]]:
    """argparse type of a comma list, each item read by `rule`: at least one, at most `most`."""

    def read(text: str) -> list[Any]:
        parts = [part.strip() for part in text.split(",")]
        if not any(parts):
            raise argparse.ArgumentTypeError(f"expected a comma list, got {text!r}")
        if said := empty_item(text):  # "resnet10,,bert_tiny"
            raise argparse.ArgumentTypeError(said)
        if len(parts) > most:
            raise argparse.ArgumentTypeError(f"at most {most} items, got {len(parts)}")
        return [rule(part) for part in parts]

    return read


def db_path(args: argparse.Namespace) -> Path:
    """--db, else $STASH_DB, else ./results.duckdb."""
    if getattr(args, "db", None) is not None:
        return Path(args.db)
    return default_db()


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", type=database_path, default=None, help="DuckDB file (default: $STASH_DB or ./results.duckdb)"
    )


# fp32 is FP32 throughout (TF32 off for matrix products and cuDNN); PyTorch's own default on a GPU with TF32
# runs cuDNN's convolutions and recurrent layers in TF32 (torch.backends.cudnn.allow_tf32) and matrix products
# in FP32.
PRECISION_HELP = (
    "arithmetic of the training: pytorch (as PyTorch trains the model when the job sets none: "
    "convolutions and recurrent layers on TF32 tensor cores where the GPU has them, other matrix products "
    "in FP32; restated as tf32 where those layers do most of the matrix work, else fp32), fp32 (FP32 "
    "throughout), tf32 (TF32 tensor cores for every matrix operator), amp (float16/bfloat16 autocast)"
)


def add_format_argument(parser: argparse.ArgumentParser, keys: str) -> None:
    """--format table|json: a table, or one JSON object on stdout with the keys `keys` (its failure a JSON
    object too: cli/main.asks_for_json)."""
    parser.add_argument(
        "--format", choices=("table", "json"), default="table",
        help=f"table or one JSON object on stdout: {{{keys}}}",
    )  # fmt: skip


# Revocations per spot instance per hour that `spot` and `spot-simulate` take: one a second at most.
MAX_REVOCATIONS_PER_H = 3600.0


def unknown_options(typed: list[str], known: Iterable[str]) -> list[str]:
    """The options in `typed` (up to a script's `--`) that are not among `known`."""
    typed = typed[: typed.index("--")] if "--" in typed else typed
    known = set(known)
    return [word for word in typed if word.startswith("--") and word.split("=", 1)[0] not in known]


def options_meant(typed: list[str], known: Iterable[str]) -> list[str]:
    """The `known` options that the unknown ones in `typed` start or nearly spell (--budget: --budget-hours),
    at most three."""
    options = sorted(option for option in known if option.startswith("--"))
    meant: list[str] = []
    for word in (word.split("=", 1)[0] for word in typed if word.startswith("--") and word != "--"):
        starting = [option for option in options if option.startswith(word)]
        meant += starting or difflib.get_close_matches(word, options, n=1, cutoff=0.8)
    return list(dict.fromkeys(meant))[:3]
