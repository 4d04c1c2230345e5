"""Paths to read, checked before any reader opens them: each mistake is named for what it is.

A reader given a folder, an empty file or a gzip file under a ``.csv`` name fails deep inside
Arrow with a message about something else ("Column 'query' not found", "magic bytes not found in
footer"). :func:`input_path` looks first and says what the path is and what to do:

* an empty path, a path with a NUL character, a URL (topkeval reads local files);
* ``~`` at the start, expanded to the home folder when no such path exists as written (as pandas
  does); a path that does not exist, saying whether its folder does;
* a folder: where a file is expected (a TREC run or qrels file), or empty, or without parquet
  files (a folder is read as a parquet dataset);
* anything but a regular file (a named pipe would block the reader forever, a device is no data),
  a file that cannot be opened or read (permissions, ``/proc`` files), an empty file;
* contents that do not match the name: a ``.parquet`` file of text, a gzip file named ``.csv``,
  a ``.gz`` name on a file that is not compressed, a parquet or binary file read as a TREC file.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..errors import InputFileError
from .formats import GZIP_SUFFIX, PARQUET, format_of, is_gzip_name

#: A URL: a scheme, then "://" (https://, s3://, file://...).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = PARQUET.magic or b""


def _sample(names: list[str], n: int = 3) -> str:
    return ", ".join(repr(x) for x in names[:n]) + (", ..." if len(names) > n else "")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _data_files(folder: Path, limit: int = 1000) -> list[Path]:
    """Up to ``limit`` files of a folder and its subfolders, as a parquet dataset lists them
    (names starting with ``_`` or ``.``, such as ``_SUCCESS``, are not data)."""
    out: list[Path] = []
    stack = [folder]
    while stack and len(out) < limit:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            raise InputFileError(f"Cannot read the folder '{current}': {exc.strerror or exc}.") from None
        for entry in entries:
            if entry.name.startswith(("_", ".")):
                continue
            if entry.is_dir():
                stack.append(Path(entry.path))
            elif entry.is_file():
                out.append(Path(entry.path))
    return out


def _head(path: Path, size: int = 512) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except PermissionError:
        raise InputFileError(f"Cannot read '{path}': permission denied. Check the file's permissions.") from None
    except OSError as exc:
        raise InputFileError(f"Cannot read '{path}': {exc.strerror or exc}.") from None


def _looks_like_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end of the sample is still text
        if exc.start < len(head) - 3:
            return False
    return b"\x00" not in head


def _check_contents(path: Path, head: bytes) -> None:
    """The first bytes of ``path`` against what its name says it is."""
    fmt = format_of(path)
    gzipped = head.startswith(_GZIP_MAGIC)
    text = fmt is not None and fmt.text
    if fmt is not None and fmt.magic is not None:
        if not head.startswith(_PARQUET_MAGIC):
            what = ("gzip-compressed data" if gzipped else "text (a CSV file? then name it .csv)"
                    if _looks_like_text(head) else "data of another format")
            raise InputFileError(f"Cannot read '{path}' as {fmt.name}: it holds {what}, while a .{fmt.name} file "
                                 f"starts with the bytes {fmt.magic.decode('latin-1')}.")
        return
    if is_gzip_name(path):
        if not gzipped and text:
            raise InputFileError(f"Cannot read '{path}': it is named .gz but is not gzip-compressed; remove the .gz "
                                 "from its name.")
        return  # a TREC file named .gz that is not compressed is read as plain text
    if head.startswith(_PARQUET_MAGIC):
        raise InputFileError(f"Cannot read '{path}': it is a parquet file; name it {PARQUET.suffixes[0]} (its name "
                             "decides how it is read).")
    if text:
        if gzipped:
            raise InputFileError(f"Cannot read '{path}' as CSV: it is gzip-compressed; name it {path.name}{GZIP_SUFFIX} so that "
                                 "it is decompressed.")
        if not _looks_like_text(head):
            raise InputFileError(f"Cannot read '{path}' as CSV: it holds binary data, not text.")


def input_path(path, what: str = "the data", *, folder: bool = True, noun: str = "File") -> Path:
    """``path`` as a :class:`~pathlib.Path` to read, after checking what it is.

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What the path should be, for messages (``"the judgments (qrels=)"``, ``"a TREC run file"``).
    folder : bool
        Whether a folder is welcome (read as a parquet dataset); False where a file is expected.
    noun : str
        What is not found, when nothing is at the path ("File", "Run file").

    Raises
    ------
    InputFileError
        Saying what the path is (see the module docstring) and what to do.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for expect_file in (True, False):
    ...     try:
    ...         input_path(folder, "a TREC run file", folder=not expect_file)
    ...     except InputFileError as exc:
    ...         print(str(exc).replace(folder, "runs"))
    'runs' is a folder, where a TREC run file (a file) was expected: give the path of a file in it (it is empty).
    'runs' is an empty folder: there is nothing to read. A folder is read as a parquet dataset (the .parquet files in it): put them there, or give the path of a file.
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if text == "":
        raise InputFileError(f"The path of {what} is empty (''): give the path of a file.")
    if "\x00" in text:
        raise InputFileError(f"The path {text!r} of {what} contains a NUL character, which no file name can hold.")
    if _URL.match(text):
        raise InputFileError(f"{text!r} is a URL; topkeval reads local files. Download it first, or read it with "
                             "pandas, polars or pyarrow (which read http, s3 and gs URLs) and pass the table.")
    p = Path(text)
    if text.startswith("~") and not p.exists() and not p.is_symlink():
        try:
            expanded = p.expanduser()
        except RuntimeError:  # ~name of an unknown user
            expanded = p
        if expanded != p:
            if not expanded.exists():
                raise InputFileError(f"{noun} not found: '{text}' (nor '{expanded}'). Check the path.")
            p = expanded
    try:
        st = p.stat()
    except FileNotFoundError:
        if p.is_symlink():
            raise InputFileError(f"'{p}' is a symbolic link to '{os.readlink(p)}', which does not exist.") from None
        parent = p.parent
        where = "" if parent.is_dir() else f" The folder '{parent}' does not exist either."
        raise InputFileError(f"{noun} not found: '{p}'.{where} Check the path.") from None
    except PermissionError:
        raise InputFileError(f"Cannot read '{p}': permission denied on the path. Check its permissions.") from None
    except OSError as exc:  # a name too long, a loop of links
        raise InputFileError(f"Cannot read '{p}': {exc.strerror or exc}.") from None
    if stat.S_ISDIR(st.st_mode):
        files = _data_files(p)
        names = [str(f.relative_to(p)) for f in files]
        if not folder:
            inside = f" ({_sample(names)})" if names else " (it is empty)"
            raise InputFileError(f"'{p}' is a folder, where {what} (a file) was expected: give the path of a file "
                                 f"in it{inside}.")
        if not files:
            raise InputFileError(f"'{p}' is an empty folder: there is nothing to read. A folder is read as a parquet "
                                 "dataset (the .parquet files in it): put them there, or give the path of a file.")
        if not any(format_of(f) is PARQUET for f in files) and not any(
                _head(f, 4) == _PARQUET_MAGIC for f in files[:20]):
            raise InputFileError(f"'{p}' is a folder without parquet files (it holds {_sample(names)}); a folder is "
                                 f"read as a parquet dataset. Give the path of the file to read, such as "
                                 f"'{p / names[0]}'.")
        return p
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(f"'{p}' is {_kind(st.st_mode)}, not a file: topkeval reads regular files (a pipe "
                             "would be read until its writer closes it, a device holds no table). Write the data "
                             "to a file first.")
    head = _head(p)
    if not head:
        raise InputFileError(f"'{p}' is empty (0 bytes): there is nothing to read.")
    _check_contents(p, head)
    return p


def input_paths(data, qrels):
    """The paths among ``evaluate``'s ``data`` and ``qrels`` checked with :func:`input_path`; each
    is returned as given, or as its expanded form when it began with ``~``. Anything else (tables,
    arrays) is returned untouched."""

    def one(value, what: str, folder: bool, noun: str = "File"):
        if not isinstance(value, (str, os.PathLike)):
            return value
        checked = input_path(value, what, folder=folder, noun=noun)
        return value if os.fspath(value) == os.fspath(checked) or not os.fspath(value).startswith("~") \
            else str(checked)

    if isinstance(data, (list, tuple)) and data and all(isinstance(p, (str, os.PathLike)) for p in data):
        checked = [one(p, "a TREC run file", False, "Run file") for p in data]
        data = checked if isinstance(data, list) else tuple(checked)
    else:
        data = one(data, "the data", True)
    return data, one(qrels, "the judgments (qrels=)", True)
