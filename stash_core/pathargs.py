"""The one rule for paths on the command line: an output may not replace what the same command reads.

Every option that names a local file or folder is given one of the argparse types below (a test walks
every command's parser, so an option cannot be added without one). After parsing, `check_outputs` resolves
each output (through links) and refuses, with one line and exit 2 before anything is written, an output
that is the database, its write-ahead log, an input of the same command or a source file it imports (a
model's FILE.py).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path

from stash_core.errors import UsageError

OUTPUT, INPUT = "output", "input"


class PathArg:
    """argparse type of a local path with a role (OUTPUT or INPUT): `~` expanded once, here; the value is a
    Path, or its text with `as_text` (for fields stored as text)."""

    __name__ = "path"  # argparse names the type in its messages

    def __init__(self, role: str, as_text: bool = False, file: bool = False) -> None:
        self.role = role
        self.as_text = as_text
        self.file = file  # a file's path: one that ends with "/" names a folder

    def __call__(self, text: str) -> Path | str:
        if not text.strip():
            raise argparse.ArgumentTypeError("expected a path, got an empty text")
        if self.file and text.rstrip().endswith(os.sep):
            example = f"{text}{DEFAULT_DB_NAME}"  # the one file-only path Stash takes: a database
            raise argparse.ArgumentTypeError(f"{text} names a directory: give a file, e.g. {example}")
        if any(ord(char) < 32 or ord(char) == 127 for char in text):
            raise argparse.ArgumentTypeError("a path may not hold control characters")
        try:
            path = expand_home(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return str(path) if self.as_text else path

    def __repr__(self) -> str:
        return f"PathArg({self.role!r})"


output_path = PathArg(OUTPUT)
input_path = PathArg(INPUT)
input_text = PathArg(INPUT, as_text=True)
database_path = PathArg(INPUT, file=True)


DEFAULT_DB_NAME = "results.duckdb"


_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# What a file system takes (Linux): a name of at most 255 bytes, a path of at most 4096.
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4096


def expand_home(text: str) -> Path:
    """`text` as a Path with `~` or `~user` expanded; UsageError (one line) for a `~user` of no user and for a
    path the file system cannot hold (a name over 255 bytes, a path over 4096), before anything opens it.
    A URL (s3://bucket/x, http://...) is refused: as a path it named a local folder "s3:"."""
    if _URL_RE.match(text):
        raise UsageError(f"{text[:80]!r} is a URL: Stash reads and writes local files only; give a path")
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~user of no user, or ~ without a home
        raise UsageError(
            f"cannot expand {text.split('/')[0]!r} in {text!r}: no such user's home folder"
        ) from None
    encoded = os.fsencode(str(path))
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > MAX_NAME_BYTES or len(encoded) > MAX_PATH_BYTES:
        shown = text if len(text) <= 60 else f"{text[:40]}...{text[-12:]}"
        raise UsageError(
            f"File name too long: {shown!r} ({len(encoded):,} bytes; a name in a path may have at most "
            f"{MAX_NAME_BYTES}, a path {MAX_PATH_BYTES:,})"
        )
    return path


def home_folder() -> Path | None:
    """The user's home folder; None where there is none ($HOME unset and the user not in the passwd file, as
    in a container run under a bare uid): a cache folder under it is then none either."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        return None


def user_cache_dir(*parts: str) -> Path | None:
    """$STASH_CACHE_DIR/PARTS, else $XDG_CACHE_HOME/stash/PARTS, else ~/.cache/stash/PARTS; None with no home
    folder (what is cached is then counted or asked again)."""
    explicit = env_path("STASH_CACHE_DIR")
    if explicit:
        return explicit.joinpath(*parts)
    home = home_folder()
    base = env_path("XDG_CACHE_HOME") or (home / ".cache" if home is not None else None)
    return base.joinpath("stash", *parts) if base is not None else None


def env_path(variable: str) -> Path | None:
    """The file or folder an environment variable names ($STASH_CACHE_DIR, $STASH_CLUSTER_STATE,
    $XDG_CACHE_HOME), `~` expanded as on the command line (a shell leaves `~` as is inside quotes:
    STASH_CACHE_DIR='~/cache' must not make a folder named `~`); None when unset or empty."""
    text = os.environ.get(variable)
    return expand_home(text) if text else None


def dataset_cache_root() -> Path:
    """Folder that holds generated data sets: $STASH_CACHE_DIR/datasets or ~/.cache/stash/datasets."""
    explicit = env_path("STASH_CACHE_DIR")
    if explicit is not None:
        return explicit / "datasets"
    home = home_folder()
    if home is None:
        raise UsageError("no home folder to keep generated data sets in ($HOME is unset and this user has "
                         "none): set STASH_CACHE_DIR to a folder, or give --dataset")
    return home / ".cache" / "stash" / "datasets"


def path_argument(name: str, value: object) -> Path | None:
    """A file or folder given from Python (the API, the store's functions) as the command line would take
    it: `~` expanded (expand_home), no control character; UsageError "name: reason" for another type, an
    empty text or a control character (a NUL byte included). None stays None."""
    if value is None:
        return None
    if not isinstance(value, str | Path) or not str(value).strip():
        raise UsageError(f"{name}: expected a path, got {value!r}"[:200])
    if any(ord(char) < 32 or ord(char) == 127 for char in str(value)):
        raise UsageError(f"{name}: a path may not hold control characters, got {str(value)!r}"[:200])
    return expand_home(str(value))


def required_path(name: str, value: object) -> Path:
    """As path_argument, for a path that must be given."""
    path = path_argument(name, value)
    if path is None:
        raise UsageError(f"{name}: a value is required, got None")
    return path


def default_db_text() -> str:
    """The database when none is named, as text (the dashboard's setting shows it as given): $STASH_DB, else
    results.duckdb. UsageError for a STASH_DB of only spaces, with control characters or not UTF-8 (DuckDB
    cannot open such a name, and the dashboard cannot show it), before anything runs."""
    text = os.environ.get("STASH_DB") or DEFAULT_DB_NAME
    if not text.strip():
        raise UsageError("STASH_DB holds only spaces: unset it, or name a .duckdb file")
    if text.rstrip().endswith(os.sep):
        example = f"{text}{DEFAULT_DB_NAME}"
        raise UsageError(f"STASH_DB {text} names a directory: name a .duckdb file, e.g. {example}")
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise UsageError(f"STASH_DB {text!r} holds a control character: name a .duckdb file without one")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, which Python keeps as surrogates
        from stash_core.exits import undecodable_reason

        raise UsageError(f"STASH_DB {undecodable_reason(os.fsencode(text))}") from None
    return text


def default_db() -> Path:
    """The database when none is named, for the command line, the Python API and the dashboard alike:
    $STASH_DB (`~` expanded), else ./results.duckdb."""
    return expand_home(default_db_text())


def db_named_by(given: object) -> str:
    """How a refusal names where the database came from: --db when given, else $STASH_DB when set, else the
    default's name (a user who never typed --db looks for a flag they did not give)."""
    if given is not None:
        return "--db"
    return "$STASH_DB" if os.environ.get("STASH_DB") else "the default database"


def role_of(action: argparse.Action) -> str | None:
    return action.type.role if isinstance(action.type, PathArg) else None


def chosen_actions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Iterator[argparse.Action]:
    """The actions of the parsers that parsed `args`: the top one and each chosen subcommand's."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                yield from chosen_actions(chosen, args)
        else:
            yield action


def _values(value: object) -> list[str | Path]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]  # type: ignore[list-item]


def _model_file(model: object) -> Path | None:
    """The FILE.py of a --model FILE.py:FACTORY (a source the command imports), else None."""
    if not isinstance(model, str) or ":" not in model:
        return None
    file_part = model.rsplit(":", 1)[0]
    if not file_part.endswith(".py"):
        return None
    try:
        return expand_home(file_part)
    except UsageError:
        return None  # the model's reader says what is wrong with it


def _same(one: Path, other: Path) -> bool:
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    try:  # hard links, or one path through a mount of the other
        return one.exists() and other.exists() and os.path.samefile(one, other)
    except OSError:
        return False


def read_paths(actions: list[argparse.Action], args: argparse.Namespace, db: Path | None) -> list[tuple]:
    """(what, path) of everything the command reads: its inputs, the database and its WAL, a model file."""
    reads: list[tuple[str, Path]] = []
    for action in actions:
        if role_of(action) == INPUT and action.dest != "db":  # the database is named below, with its WAL
            flag = action.option_strings[0] if action.option_strings else action.dest
            reads += [(flag, Path(value)) for value in _values(getattr(args, action.dest, None))]
    if db is not None:
        reads += [("the database", db), ("the database's write-ahead log", Path(f"{db}.wal"))]
    model_file = _model_file(getattr(args, "model", None))
    if model_file is not None:
        reads.append(("the model file", model_file))
    return reads


def check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace, db: Path | None) -> None:
    """Refuse (UsageError, exit 2) an output path that is the database, its WAL, an input of the command or
    a source it imports; nothing has been written when this runs."""
    actions = list(chosen_actions(parser, args))
    reads = read_paths(actions, args, db)
    for action in actions:
        if role_of(action) != OUTPUT:
            continue
        flag = action.option_strings[0] if action.option_strings else action.dest
        for value in _values(getattr(args, action.dest, None)):
            refuse_overwrite(flag, value, reads)
    refuse_writes_into_data(actions, args, db)


# Folders read as a training job's data: what a command writes inside one is read as data by the next. A
# --dataset is read as its class folders, so what lands there is the database's results/ beside it, and an
# output inside a class folder; a --data-dir is read whole by the script, so any output inside it is.
DATA_FOLDERS = {"dataset": False, "data_dir": True}  # dest -> whether its outputs at its top count too


def _data_folders(args: argparse.Namespace) -> Iterator[tuple[str, str, bool, bool]]:
    """(the flag and value said, its real path, whether an output at its top is read, whether the database
    at its top is) of each folder read as data: those given, and the generated data sets' folder, whatever
    the command (a later --synthetic-images profile reads its sets; the database's results/ beside them is
    not read)."""
    for dest, whole in DATA_FOLDERS.items():
        for value in _values(getattr(args, dest, None)):
            yield f"--{dest.replace('_', '-')} {value}", os.path.realpath(value), whole, True
    try:
        root = dataset_cache_root()
    except UsageError:  # no home folder: no set is made, and --synthetic-images says why
        return
    yield f"the folder of generated data sets ({root})", os.path.realpath(root), False, False


def refuse_writes_into_data(
    actions: list[argparse.Action], args: argparse.Namespace, db: Path | None
) -> None:
    """UsageError where the database (with its results/ and job folders beside it), or an output inside a
    --data-dir, lies inside a data folder the command reads: the next profile would read them as its data
    (a folder of result files as one more class). A --no-store profile writes no database."""
    stored = db is not None and not getattr(args, "no_store", False)
    outputs = [(action.option_strings[0] if action.option_strings else action.dest, Path(value))
               for action in actions if role_of(action) == OUTPUT
               for value in _values(getattr(args, action.dest, None))]  # fmt: skip
    for named, folder, whole, db_at_top in _data_folders(args):
        if folder == os.sep:  # the whole file system: refused for what it is, where it is read
            continue
        inside = folder.rstrip(os.sep) + os.sep
        for flag, path in ([("--db", db)] if stored else []) + outputs:
            # by its own folder too: results/ is made beside a linked database, not beside its target
            parent = os.path.realpath(Path(path).parent)
            places = {os.path.realpath(path), os.path.join(parent, Path(path).name)}
            # an output at a --dataset's top is never read (only its class folders are); the database's
            # results/ beside it is
            read = (flag == "--db" and db_at_top) or whole or parent != folder
            if read and any(place.startswith(inside) for place in places):
                why = "what Stash writes there would be read as data by the next profile"
                raise UsageError(f"{flag} {path} is inside {named}: {why}; choose a path outside it")


def refuse_overwrite(flag: str, output: str | Path, reads: list[tuple[str, Path]]) -> None:
    """UsageError when `output` is (through links) one of the (what, path) the command reads."""
    for what, read in reads:
        if _same(Path(output), read):
            raise UsageError(
                f"{flag} {output} is {what} ({read}) of this command: writing there would replace "
                "what it reads; choose another path"
            )
