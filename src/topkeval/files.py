"""The one way topkeval writes a file: regular files only, atomically, every failure as an error.

Every file the project writes (the HTML report, TREC runs, the command line's ``-o`` and
``--report``) goes through :func:`open_output` (or :func:`write_text`), so that each of them:

- checks the path before anything is computed (:func:`check_output_path`): a path that is not
  text, empty, or holds a NUL byte is a :class:`~topkeval.errors.ParameterError`; a missing
  folder, a name too long, a folder where nothing can be created, an existing file without
  ``overwrite=True`` is an :class:`~topkeval.errors.OutputFileError` naming the path and the fix;
- writes only regular files: an existing symbolic link, directory, device (``/dev/null``), fifo or
  socket at the path is refused, ``overwrite=True`` included, and left as it is;
- is atomic: the content goes to a temporary file in the target's folder, which then takes the
  target's place in one step (``os.replace``; ``os.link`` when nothing may be replaced, so that a
  file created meanwhile is never overwritten). A failure (a full disk, an error while the content
  is produced) removes the temporary file and leaves the target as it was;
- turns every ``OSError`` into an :class:`~topkeval.errors.OutputFileError` (a
  :class:`~topkeval.errors.InputFileError`, a :class:`~topkeval.errors.TopkevalError`).

A new file gets the permissions ``open()`` would give it; a replaced file keeps its own.
``tests/test_outputs.py`` checks that nothing else in ``src/topkeval`` writes, replaces or
deletes a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import OutputFileError
from .params import FilePath

#: What an existing non-regular file is, in words.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (fifo)"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str | None:
    """None for a regular file, else what the file is."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _text(path, param: str, owner: str) -> str:
    """The path as text (the parameter layer's check of a path), not naming a folder."""
    FilePath().check(path, param, owner)
    text = FilePath.text(path) or ""
    if text.endswith(("/", os.sep)):
        raise OutputFileError(f"Cannot write '{text}': the path ends with a folder separator, so it names a folder. "
                              "Give the path of the file to write inside it.")
    return text


def _why(exc: OSError, path: str) -> str:
    """The reason an OSError gives, and how to fix it."""
    folder = os.path.dirname(path) or "."
    code = exc.errno
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return "the disk is full (or the disk quota is reached). Free some space or write to another disk"
    if code in (errno.EACCES, errno.EPERM):
        return (f"permission denied. Write to a folder where you may create files, or change the permissions of "
                f"'{folder}'")
    if code == errno.EROFS:
        return "the file system is read-only. Write to another folder"
    if code == errno.ENAMETOOLONG:
        return "the name is too long (file systems allow about 255 bytes per name). Choose a shorter name"
    if code == errno.ENOENT and os.path.isdir(folder):  # /proc and other virtual file systems
        return f"no file can be created in the folder '{folder}' ({exc.strerror}). Write to another folder"
    if code == errno.ENOENT:
        return f"the folder '{folder}' does not exist. Create it first, or write to an existing folder"
    if code == errno.ENOTDIR:
        part = next((str(p) for p in reversed(Path(path).parents) if os.path.lexists(p) and not os.path.isdir(p)),
                    None)
        where = f"'{part}' is a file, not a folder" if part else "a part of the path is not a folder"
        return f"{where}. Check the path"
    if code == errno.EISDIR:
        return "it is a directory. Give the path of the file to write inside it"
    if code == errno.ELOOP:
        return "the path has too many symbolic links. Give the real path"
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason} (errno {code}). Check the path, or write elsewhere"


def _error(exc: OSError, path: str) -> OutputFileError:
    return OutputFileError(f"Cannot write '{path}': {_why(exc, path)}.")


def _lstat(path: str) -> os.stat_result | None:
    """The file at ``path`` itself (a link is not followed); None when there is none."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _refuse_existing(path: str, st: os.stat_result, overwrite: bool) -> None:
    kind = _kind(st.st_mode)
    if kind is not None:
        raise OutputFileError(f"Cannot write '{path}': it is {kind}, and topkeval writes and replaces only regular "
                              "files (never through a link, never over a device, fifo, socket or directory). Give "
                              "the path of a regular file.")
    if not overwrite:
        raise OutputFileError(f"'{path}' already exists; pass overwrite=True to replace it.")


def _probe(folder: str) -> None:
    """Create and remove an empty file in ``folder``: can anything be created there?"""
    fd, tmp = _temporary(folder)
    os.close(fd)
    os.unlink(tmp)


def _temporary(folder: str) -> tuple[int, str]:
    """A new, empty, hidden file in ``folder``, created with the permissions ``open()`` gives."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".topkeval-{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", folder)  # pragma: no cover


def check_output_path(path, *, overwrite: bool = False, param: str = "path", owner: str = "write") -> Path:
    """Check that ``path`` can be written, before anything is computed; return it as a Path.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    overwrite : bool
        Whether an existing regular file may be replaced (anything else never is).
    param, owner : str
        The parameter and the function named in a message ("The 'path' parameter of write_run ...").

    Raises
    ------
    ParameterError
        ``path`` is not a path, is empty, or holds a NUL byte.
    OutputFileError
        The folder does not exist or nothing can be created in it, the name is too long, or
        something is at the path already: a regular file (without ``overwrite``), a directory, a
        link, a device, a fifo or a socket.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_output_path(folder + "/report.html").name
    'report.html'
    >>> check_output_path(folder, overwrite=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topkeval.errors.OutputFileError: Cannot write '...': it is a directory, and topkeval writes and replaces only regular files (never through a link, never over a device, fifo, socket or directory). Give the path of a regular file.
    """
    text = _text(path, param, owner)
    try:
        st = _lstat(text)
        if st is not None:
            _refuse_existing(text, st, overwrite)
        folder = os.path.dirname(text) or "."
        if not os.path.isdir(folder):
            raise OutputFileError(f"Cannot write '{text}': the folder '{folder}' does not exist. Create it first, "
                                  "or write to an existing folder.")
        _probe(folder)
    except OSError as exc:
        raise _error(exc, text) from None
    return Path(text)


@contextlib.contextmanager
def open_output(path, *, overwrite: bool = False, binary: bool = False, encoding: str = "utf-8",
                param: str = "path", owner: str = "write") -> Iterator[IO[Any]]:
    """A file object to write ``path`` through: the file appears, whole, when the block ends.

    The content goes to a temporary file in the same folder; when the ``with`` block ends without
    an error, that file takes the place of ``path`` in one step. On any error (raised by the block
    or by the file system) the temporary file is removed and ``path`` is left as it was. See the
    module docstring for the rules.

    Raises
    ------
    ParameterError, OutputFileError
        As :func:`check_output_path`, and an OutputFileError for any ``OSError`` while writing
        (a full disk, ...).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with open_output(target) as f:
    ...     _ = f.write("hello\\n")
    >>> target.read_text()
    'hello\\n'
    """
    target = os.fspath(check_output_path(path, overwrite=overwrite, param=param, owner=owner))
    folder = os.path.dirname(target) or "."
    tmp = None
    try:
        fd, tmp = _temporary(folder)
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding=encoding, newline="")) as f:
            yield f
            f.flush()
            try:
                os.fsync(f.fileno())  # on disk before it takes the target's place
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, getattr(errno, "ENOTSUP", errno.EINVAL)):
                    raise  # a full disk, an I/O error; not a file system that cannot sync
        _commit(tmp, target, overwrite)
        tmp = None
    except OSError as exc:
        raise _error(exc, target) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _commit(tmp: str, target: str, overwrite: bool) -> None:
    """Put ``tmp`` at ``target``: only where nothing is, or a regular file with ``overwrite``."""
    st = _lstat(target)
    if st is not None:
        _refuse_existing(target, st, overwrite)  # checked again: the file system may have changed meanwhile
        os.chmod(tmp, stat.S_IMODE(st.st_mode))  # a replaced file keeps its permissions
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)  # fails if anything appeared at target meanwhile: nothing is overwritten
    except FileExistsError:
        st = _lstat(target)
        if st is None:
            raise
        _refuse_existing(target, st, overwrite)
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, target)
        return
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EROFS, errno.EACCES, errno.EIO,
                         errno.ENAMETOOLONG):
            raise
        # a file system without hard links: the check above, then the replacement
        os.replace(tmp, target)
        return
    os.unlink(tmp)


def scratch_error(exc: OSError, folder) -> OutputFileError:
    """The error for a scratch file topkeval could not write (the spill files of a streamed file, in a
    private temporary folder it creates and removes), with the fix: another temporary folder."""
    return OutputFileError(f"Cannot write topkeval's temporary files in '{folder}': {_why(exc, os.fspath(folder))}. "
                           "Or set the TOPKEVAL_TMP environment variable to a folder with room for a copy of the "
                           "input.")


@contextlib.contextmanager
def scratch_folder(prefix: str = "topkeval-") -> Iterator[Path]:
    """A private temporary folder (in ``TOPKEVAL_TMP`` when set), removed with everything in it when
    the block ends: for files topkeval writes only to hand them on (the artifacts that
    :meth:`Results.log_mlflow` gives MLflow to copy). Its files are written with :func:`open_output`
    like any other; failing to create the folder is an :class:`~topkeval.errors.OutputFileError`.

    Examples
    --------
    >>> with scratch_folder() as folder:
    ...     _ = write_text(folder / "a.txt", "hi")
    ...     sorted(p.name for p in folder.iterdir())
    ['a.txt']
    >>> folder.exists()
    False
    """
    import tempfile

    where = os.environ.get("TOPKEVAL_TMP")
    try:
        scratch = tempfile.TemporaryDirectory(prefix=prefix, dir=where)
    except OSError as exc:
        raise scratch_error(exc, where or tempfile.gettempdir()) from None
    with scratch as folder:
        yield Path(folder)


def write_parquet(path, table, *, overwrite: bool = False, param: str = "path", owner: str = "write") -> str:
    """Write an Arrow table to ``path`` as parquet with :func:`open_output`; return the path written.

    Examples
    --------
    >>> import tempfile, pathlib, pyarrow as pa, pyarrow.parquet as pq
    >>> path = write_parquet(pathlib.Path(tempfile.mkdtemp()) / "a.parquet", pa.table({"x": [1, 2]}))
    >>> pq.read_table(path).to_pydict()
    {'x': [1, 2]}
    """
    import pyarrow.parquet as pq

    with open_output(path, overwrite=overwrite, binary=True, param=param, owner=owner) as f:
        pq.write_table(table, f)
    return os.fspath(path)


def write_text(path, text: str, *, overwrite: bool = False, param: str = "path", owner: str = "write") -> str:
    """Write ``text`` (UTF-8) to ``path`` with :func:`open_output`; return the path written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = write_text(pathlib.Path(tempfile.mkdtemp()) / "a.txt", "hi")
    >>> pathlib.Path(path).read_text()
    'hi'
    """
    with open_output(path, overwrite=overwrite, param=param, owner=owner) as f:
        f.write(text)
    return os.fspath(path)
