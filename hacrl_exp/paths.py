"""Output paths: checked before anything is written, and written only by atomically replacing regular files.

Every entry point resolves the paths it will write once, up front (`check_output`):

- a path that exists must be the kind asked for (a folder, or a regular file), never a device, fifo or socket;
- a symlink is refused unless the user asked to follow symlinks (`--follow-symlinks`, which sets
  HACRL_FOLLOW_SYMLINKS=1 for the process and the jobs it starts); a dangling or looping one is refused either way;
- a path that does not exist yet needs a writable folder above it (and no file, dangling symlink or loop on the way);
- `check_free_space`: the file system holds enough free bytes for what comes next (the next checkpoint, estimated
  from the last one).

`replace_atomic` writes a file into a temporary file beside it and renames it over the target, so readers see the old
or the new content; it refuses to replace anything but a regular file (a device node or a symlink stays as it was).
`output_error` turns a failed write (ENOSPC, EACCES, EROFS, ...) into one `OutputError` line naming the path.

Names and private files, for every entry point alike:

- `check_name`: a user value that becomes a file or folder name (a report's `name=`, grid tag or experiment, a sweep's
  study, Hydra's `hydra.job.name`) is one path component: not empty, not `.` or `..`, not hidden, no separator,
  printable. (Agent names match a narrower pattern of their own, config/validate.py's AGENT_NAME.)
- `open_no_follow`: a file the process owns at a known path (a run's `.lock`, a warm-start entry's lock) is opened
  without following a symlink, and only when it is a regular file.
- `private_folder`: temporary and log files go into a fresh folder only this user can enter (`mkdtemp`), never at a
  predictable path in the shared temp folder, where someone else may have put a symlink first.

`take_lock` / `locked`: a lock file holding the holder's pid (a sweep's study; creating a store once).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hacrl_exp.errors import ConfigError, OutputError

FOLLOW_SYMLINKS_FLAG = "--follow-symlinks"
FOLLOW_SYMLINKS_ENV = "HACRL_FOLLOW_SYMLINKS"
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)


def follow_symlinks() -> bool:
    """Whether symlinks given as output paths are followed (HACRL_FOLLOW_SYMLINKS=1, set by --follow-symlinks)."""
    return os.environ.get(FOLLOW_SYMLINKS_ENV) == "1"


def take_follow_flag(argv: list[str]) -> list[str]:
    """argv without --follow-symlinks; when it was there, symlinks are followed from now on (in this process and the
    jobs it starts, through the environment)."""
    if FOLLOW_SYMLINKS_FLAG in argv:
        os.environ[FOLLOW_SYMLINKS_ENV] = "1"
    return [a for a in argv if a != FOLLOW_SYMLINKS_FLAG]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a fifo"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _link_problem(path: Path) -> str | None:
    """Why a symlink cannot be followed: dangling or a loop; None when it leads somewhere."""
    try:
        path.resolve(strict=True)
    except RuntimeError:  # Python < 3.13 reports a loop this way
        return f"{path} is a symlink loop"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path} is a symlink loop"
        return f"{path} is a dangling symlink (to {os.readlink(path)}, which does not exist)"
    return None


def output_problem(path: Path, kind: str, follow: bool | None = None) -> str | None:
    """What is wrong with writing `path` as `kind` ('folder' or 'file'), or None. Reads only; writes nothing."""
    follow = follow_symlinks() if follow is None else follow
    if os.path.islink(path):
        problem = _link_problem(path)
        if problem:
            return problem
        if not follow:
            return f"{path} is a symlink (to {os.readlink(path)}); give the real path, or pass {FOLLOW_SYMLINKS_FLAG}"
        path = path.resolve()
    if os.path.lexists(path):
        mode = path.stat().st_mode
        if kind == "folder" and not stat.S_ISDIR(mode):
            return f"{path} is {_kind(mode)}, not a folder; give a new folder"
        if kind == "file" and not stat.S_ISREG(mode):
            return f"{path} is {_kind(mode)}, not a regular file; give a file path"
        folder = path if kind == "folder" else path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{folder} cannot be written (permission denied or a read-only file system)"
        return None
    return _ancestor_problem(path)


def _ancestor_problem(path: Path) -> str | None:
    """A path that does not exist yet: the nearest thing above it must be a writable folder."""
    for above in path.absolute().parents:
        if os.path.islink(above) and not above.exists():
            return _link_problem(above)
        if not os.path.lexists(above):
            continue
        if not above.is_dir():
            return f"{above} is {_kind(above.stat().st_mode)}, not a folder, so {path} cannot be made"
        if not os.access(above, os.W_OK | os.X_OK):
            return f"{above} cannot be written (permission denied or a read-only file system)"
        return None
    return None


def check_output(path: str | os.PathLike, key: str, kind: str = "folder", follow: bool | None = None) -> Path:
    """The path to write for `key=path` (a followed symlink's target); ConfigError naming the key otherwise."""
    given = Path(path).expanduser()
    try:
        problem = output_problem(given, kind, follow)
    except OSError as exc:  # a folder on the way this user may not enter
        problem = f"{exc.filename or given} cannot be read ({exc.strerror or exc})"
    if problem and problem.startswith(f"{given} "):  # about the path itself: `key=path is ...`
        raise ConfigError(f"{key}={path} {problem[len(str(given)) + 1 :]}")
    if problem:  # about a folder above it
        raise ConfigError(f"{key}={path}: {problem}")
    return given.resolve() if os.path.islink(given) else given


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes an unprivileged writer may still use on the file system holding `path` (or its nearest ancestor)."""
    here = Path(path).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    info = os.statvfs(here)
    return info.f_bavail * info.f_frsize


def size_of(folder: Path) -> int:
    """Bytes of the files under a folder."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def check_free_space(path: Path, needed: int, what: str, fix: str) -> None:
    """OutputError unless the file system of `path` has `needed` free bytes for `what`."""
    free = free_bytes(path)
    if free < needed:
        raise OutputError(f"disk full: {path} has {free} bytes free, {what} needs about {needed}; {fix}")


def output_error(exc: BaseException, path: Path, then: str) -> OutputError | None:
    """The one line for a write that failed on a full disk (naming the file and the free bytes) or a denied path, with
    the fix and `then` (what to do after it); None for another failure. torch reports a full disk as
    RuntimeError('... unexpected pos ...'): a failed write with under 1 MiB left is taken for one."""
    where = Path(getattr(exc, "filename", None) or path)
    code = getattr(exc, "errno", None)
    if code in FULL or (not isinstance(exc, OSError) and free_bytes(where) < 1 << 20):
        return OutputError(f"disk full: writing {where} failed with {free_bytes(where)} bytes free; free space, {then}")
    if code in DENIED:
        reason = "read-only file system" if code == errno.EROFS else "permission denied"
        return OutputError(f"{where}: {reason}; make it writable, {then}")
    return None


def replace_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """write(tmp) into a temporary file beside `path`, fsync, rename over `path`, fsync the folder. Refuses
    (OutputError, nothing written) when `path` exists and is not a regular file: a device, a fifo, a folder or a
    symlink is never replaced (resolve a symlink first to write its target)."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        what = "a symlink" if os.path.islink(path) else _kind(os.lstat(path).st_mode)
        raise OutputError(f"{path} is {what}; only a regular file is replaced")
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask's mode, as a plain open gives
    try:
        write(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable across a power cut (a kill -9 needs no more than the rename)."""
    if hasattr(os, "O_DIRECTORY"):
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


NAME_MAX = 255
"""Bytes of one file name on the common file systems (ext4, xfs, tmpfs, APFS)."""


def name_problem(value: str) -> str | None:
    """Why `value` cannot be one file or folder name, or None."""
    if not value.strip():
        return "is empty"
    if value in (".", ".."):
        return f"is {value!r}, which names a folder that exists (the one above), not a new one"
    if "/" in value or "\\" in value:
        return "holds a path separator, so it would name a folder elsewhere"
    if value.startswith("."):
        return "starts with '.', a hidden name (and the prefix of the temporary folders written beside it)"
    if not value.isprintable():
        return "holds a control character"
    if len(value.encode()) > NAME_MAX:
        return f"is longer than {NAME_MAX} bytes"
    return None


def check_name(value: str, key: str) -> str:
    """`value` when it is one plain file or folder name; ConfigError naming `key` otherwise. The one check of every
    user value that becomes a name on disk, so that none of them can point outside the folder it is written into."""
    problem = name_problem(str(value))
    if problem:
        raise ConfigError(f"{key}={value!r} {problem}; give one plain name (letters, digits, _, - and .)")
    return value


def open_no_follow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open(path, flags) of a regular file only: a symlink at `path` is refused (OutputError naming it), never
    followed to truncate or overwrite the file it points at; a fifo or device is refused too (O_NONBLOCK: opening a
    fifo does not wait for a writer, and regular files ignore the flag)."""
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise OutputError(f"{path} is a symlink (to {os.readlink(path)}); remove it, then run again") from None
        raise
    found = os.fstat(fd).st_mode
    if not stat.S_ISREG(found):
        os.close(fd)
        raise OutputError(f"{path} is {_kind(found)}, not a regular file; remove it, then run again")
    return fd


def private_folder(prefix: str) -> Path:
    """A new folder in the temp folder that only this user can enter (mode 0700, a name no one can guess first)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def take_lock(path: Path, wait: bool = False) -> int | None:
    """An open descriptor holding an exclusive `flock` on `path` (created, with this process's pid written in it), or
    None when another process holds it and not `wait`. The lock ends when the descriptor closes or the process dies:
    the kernel drops it, so a killed holder never leaves a stale lock. The file stays (removing it would race)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)  # as a run's .lock: never through a planted symlink
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def lock_holder(path: Path) -> str:
    """The pid written in lock file `path` ('?' when it is not written yet)."""
    try:
        return path.read_text().strip() or "?"
    except OSError:
        return "?"


def user_cache_dir() -> Path:
    """$HACRL_CACHE_DIR, else ~/.cache/hacrl_exp: warm starts and MLflow store templates (trainer.cache_dir overrides
    it for a run's warm starts)."""
    return Path(os.environ.get("HACRL_CACHE_DIR") or Path.home() / ".cache" / "hacrl_exp")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock file `path` for the block, waiting for another holder to end (creating a store: seconds)."""
    fd = take_lock(path, wait=True)
    try:
        yield
    finally:
        os.close(fd)
