"""The one reader and the one writer of files a user names.

Reading: only a regular file (a FIFO would block, /dev/zero never ends, a directory is not text), at most a
stated size, UTF-8 with or without a byte-order mark, and JSON nested no deeper than a stated depth. Every
problem is a one-line UsageError that says which.

Writing: atomically (a temporary file beside the target, fsync, rename, fsync of the folder) and through
links (a symlinked target keeps its link; the file it points at is replaced); a target that exists and is
not a regular file (/dev/full, a FIFO, a directory) is refused, never replaced; JSON is written without NaN
or infinities (null instead), which are not JSON.

Uploads: a model file or training script uploaded to the dashboard is checked as Python and kept, named by
its content, next to the database (save_model_file).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError, write_failure
from stash_core.units import json_safe

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 256 * MIB  # a cluster trace of a few million jobs; far beyond any workload or script
DEFAULT_MAX_DEPTH = 64  # workloads and traces nest a handful of levels
# The folder next to a database where the dashboard keeps its files: its background jobs (engine/jobs.py)
# and, in models/, the model files and training scripts uploaded to it.
DASHBOARD_DIRNAME = ".stash-jobs"


def file_kind(mode: int) -> str:
    """What a file of this st_mode is, in words (for "is a FIFO, not a regular file")."""
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):  # fmt: skip
        if test(mode):
            return name
    return "special file"


def read_user_bytes(
    path: Path | str, what: str = "file", max_bytes: int = DEFAULT_MAX_BYTES, head_bytes: int | None = None
) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes` (only its first `head_bytes` when given:
    enough to tell a format); UsageError "<path>: <problem>" (the problem names `what`) for a missing,
    special, unreadable or too large file."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{path}: {what} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{path}: is a {file_kind(info.st_mode)}, not a regular file ({what})")
        if info.st_size > max_bytes:
            raise UsageError(f"{path}: {what} is {info.st_size:,} bytes; at most {max_bytes:,} are read")
        os.set_blocking(fd, True)
        if head_bytes is not None:
            return os.read(fd, head_bytes)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(MIB, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # a file that grew while it was read
                raise UsageError(f"{path}: {what} is larger than {max_bytes:,} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_user_text(path: Path | str, what: str = "file", max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The text of a user's file, UTF-8 with an optional byte-order mark (dropped); checked as by
    read_user_bytes, and refused when it is not UTF-8 or holds NUL bytes."""
    raw = read_user_bytes(path, what, max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise UsageError(f"{path}: {what} holds NUL bytes (a binary file?)")
    return text


def read_user_json(path: Path | str, what: str = "file", max_bytes: int = DEFAULT_MAX_BYTES,
                   max_depth: int = DEFAULT_MAX_DEPTH) -> Any:  # fmt: skip
    """The JSON value of a user's file (read as by read_user_text), refused when empty, invalid, nested
    deeper than `max_depth`, or holding an integer too long to convert."""
    text = read_user_text(path, what, max_bytes)
    return parse_json(text, f"{path}: {what}", max_depth)


def refuse_repeated_columns(names: list[str] | None, where: str, fold_case: bool = False) -> None:
    """A CSV header that names a column twice is refused: csv.DictReader would keep the last of them and
    drop the other without a word."""
    seen: set[str] = set()
    for name in names or []:
        key = name.strip().lower() if fold_case else name.strip()
        if key and key in seen:
            raise UsageError(f"{where}: the header names the column {name.strip()!r} twice; keep one")
        seen.add(key)


def parse_json(text: str, where: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """JSON text parsed with the checks of read_user_json; `where` begins each message."""
    if not text.strip():
        raise UsageError(f"{where} is empty")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{where} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise UsageError(f"{where} nests JSON deeper than {max_depth} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise UsageError(f"{where} holds a number too long to read ({exc})") from None
    if json_depth(value) > max_depth:
        raise UsageError(f"{where} nests JSON deeper than {max_depth} levels")
    return value


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (0 for a scalar); walks without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return deepest


# ---------------------------------------------------------------- writing


def writable_target(path: Path | str, what: str = "file") -> Path:
    """The regular file a write to `path` replaces: links followed, so that a symlink stays a symlink; a
    target that exists but is not a regular file is refused (one line), as is a missing folder that cannot
    be created. Call it before long work, so that a bad output path is found first."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise UsageError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"cannot write {what} {path}: it is a {file_kind(info.st_mode)}, not a regular file")
    return real


def nearest_existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (where a write that creates the missing folders starts)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def unreachable_reason(path: Path | str) -> str | None:
    """Why nothing can be at `path`: a symlink loop on the way ("x is a symlink loop ...") or a file where a
    folder must be ("x is a file, not a folder"); None when it exists or only its last parts are missing (a
    write creates them). `exists()` says False for both, as for a file not made yet."""
    try:
        os.stat(path)
        return None
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR):
            return None
    walked, mode = Path(Path(path).anchor), 0
    for part in Path(path).parts[len(walked.parts) :]:
        above, walked = walked, walked / part
        try:
            mode = os.stat(walked).st_mode  # of the last part that exists, when the next fails
        except OSError as error:
            if error.errno == errno.ELOOP:
                return f"{walked} is a symlink loop (or a chain of links too long to follow)"
            if error.errno == errno.ENOTDIR:
                kind = "file" if stat.S_ISREG(mode) else file_kind(mode)
                return f"{above} is a {kind}, not a folder"
            return None
    return None


def check_reachable(path: Path | str, what: str = "database") -> None:
    """UsageError "cannot use WHAT PATH: REASON" for a path below a file or through a symlink loop
    (unreachable_reason): a reader took it for a file not made yet, a writer failed with "File exists"."""
    reason = unreachable_reason(path)
    if reason is not None:
        raise UsageError(f"cannot use {what} {path}: {reason}")


def check_output(path: Path | str, what: str = "file") -> Path:
    """writable_target, and a folder this process may write in (the nearest existing one, since a write
    creates the missing ones): for an output path checked before minutes of work. The file to replace."""
    target = writable_target(path, what)
    folder = nearest_existing(target.parent)
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {what} {path}: {folder} is not a folder this user can write in")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: permission denied")
    return target


class StagedFile:
    """A file written beside its target and moved into place by commit(): readers see the old file or the
    whole new one. discard() (or garbage) removes the temporary file."""

    def __init__(self, path: Path | str, what: str = "file"):
        self.path, self.what = Path(path), what
        self.target = writable_target(path, what)
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = _create_beside(self.target, self._mode())
        except OSError as exc:
            raise write_failure(f"cannot write {what} {self.path}: {exc.strerror or exc}", exc) from None
        self._fd: int | None = fd

    def write(self, data: str | bytes) -> None:
        """Write the whole content (once), flushed to the disk."""
        payload = data.encode("utf-8") if isinstance(data, str) else data
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(self._fd, view) :]
            if (kept := self._mode()) is not None:
                os.fchmod(self._fd, kept)
            os.fsync(self._fd)
        except OSError as exc:
            self.discard()
            raise write_failure(f"cannot write {self.what} {self.path}: {exc.strerror or exc}", exc) from None
        except BaseException:
            self.discard()
            raise
        finally:
            self._close()

    def commit(self) -> Path:
        """Move the written file into place and make the rename durable; the path written."""
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:
            self.discard()
            raise write_failure(f"cannot write {self.what} {self.path}: {exc.strerror or exc}", exc) from None
        _fsync_directory(self.target.parent)
        return self.path

    def discard(self) -> None:
        self._close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _mode(self) -> int | None:
        try:
            return stat.S_IMODE(os.stat(self.target).st_mode)  # a replaced file keeps its permissions
        except OSError:
            return None  # a new file keeps the mode it was created with


def _create_beside(target: Path, kept: int | None) -> tuple[int, str]:
    """A new file beside `target`, created with the replaced file's mode (`kept`: never looser) or 0o666 for
    the kernel to take the umask off (reading the umask sets it, a race with other threads' files)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        name = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
        with contextlib.suppress(FileExistsError):
            return os.open(name, flags, 0o666 if kept is None else kept), str(name)
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(target.parent))


def write_atomic(path: Path | str, data: str | bytes, what: str = "file") -> Path:
    """Write `data` to `path` atomically, through links, never onto a special file; UsageError (one line)
    when it cannot be written whole (the old file, if any, is then left as it was)."""
    staged = StagedFile(path, what)
    staged.write(data)
    return staged.commit()


def json_text(doc: Any, indent: int | None = None) -> str:
    """JSON of `doc` with NaN and infinities as null."""
    separators = None if indent is not None else (",", ":")
    try:
        return json.dumps(doc, allow_nan=False, indent=indent, separators=separators)
    except ValueError:  # only then pay for a sanitising copy of the whole document
        return json.dumps(json_safe(doc), allow_nan=False, indent=indent, separators=separators)


def write_json_atomic(path: Path | str, doc: Any, what: str = "file", indent: int | None = None) -> Path:
    """`doc` as JSON (no NaN: null instead) written as by write_atomic."""
    return write_atomic(path, json_text(doc, indent), what)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not every file system allows opening a directory, so best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)


def private_folder(folder: Path) -> Path:
    """`folder`, made (with its parents) where it is missing and kept for this user alone (mode 0700, an older
    one's too); UsageError when it is another user's or a link: the jobs and model files of a database in a
    shared folder (/tmp) are signalled, removed or imported by this user, so nobody else may put them there.
    (A file system that keeps no permissions, such as a Windows drive under WSL, keeps its mode.)"""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = folder.lstat()
    except OSError as exc:
        raise write_failure(f"cannot make the folder {folder}: {exc.strerror or exc}", exc) from None
    refused = _not_ours(folder, found)
    if refused:
        raise UsageError(f"{refused}: remove it, or keep the database in a folder of your own")
    if stat.S_IMODE(found.st_mode) != 0o700:
        with contextlib.suppress(OSError):
            folder.chmod(0o700)
    return folder


def folder_problem(folder: Path) -> str | None:
    """Why private_folder would refuse `folder` as it is now (another user's, a link), without making it;
    None where it is fine or missing."""
    try:
        refused = _not_ours(folder, folder.lstat())
    except OSError:
        return None
    return f"{refused}: its jobs are not shown, nor can new ones start" if refused else None


def _not_ours(folder: Path, found: os.stat_result) -> str | None:
    """What makes a folder not this user's to keep jobs in (a link, another user's), or None."""
    if stat.S_ISLNK(found.st_mode):
        return f"{folder} is a link"
    if not stat.S_ISDIR(found.st_mode):
        return f"{folder} is a file, not a folder"
    return None if private_enough(found) else f"{folder} belongs to another user (uid {found.st_uid})"


def private_enough(found: os.stat_result) -> bool:
    """A folder of this user's (a link is never one)."""
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()


def save_model_file(db_path: Path | str, file_name: str, source: bytes) -> Path:
    """Keep a model file (or training script) uploaded to the dashboard for its runs:
    `<database folder>/.stash-jobs/models/<name>_<hash>.py`; returns its path.

    UsageError when it is not a Python file or is not valid Python (checked by compiling, not running it).
    """
    name = Path(file_name).name
    if not name.endswith(".py"):
        raise UsageError(f"{name}: a model file must be a Python file (.py) with a factory function")
    try:
        compile(source, name, "exec")
    except (SyntaxError, ValueError) as exc:
        raise UsageError(f"{name}: not valid Python ({exc.__class__.__name__}: {exc})") from None
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in Path(name).stem) or "model"
    digest = hashlib.sha256(source).hexdigest()[:10]
    folder = Path(db_path).resolve().parent / DASHBOARD_DIRNAME / "models"
    path = folder / f"{stem}_{digest}.py"
    private_folder(folder.parent)
    private_folder(folder)
    try:
        if not path.is_file() or path.read_bytes() != source:  # named after these contents, it holds them
            kept = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            kept.write_bytes(source)
            os.replace(kept, path)  # whole: a profile importing it meanwhile reads the old or the new
    except OSError as exc:
        raise write_failure(f"cannot keep the model file in {folder}: {exc.strerror or exc}", exc) from None
    return path
