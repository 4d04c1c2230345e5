"""Every file topkeval writes goes through one safe writer (topkeval.files): regular files only,
atomically, never through a link nor over a device, fifo, socket or directory, and every failure
an OutputFileError (an InputFileError) that names the path and the fix."""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path

import pandas as pd
import pytest

import topkeval as tk
from topkeval import files as write

RUN = pd.DataFrame({"query": ["q1", "q1", "q2"], "item": ["a", "b", "a"], "score": [0.5, 0.7, 0.1]})


@pytest.fixture(scope="module")
def res():
    return tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "item": ["x", "y", "x", "y"],
                        "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]}, ["precision@1"], score=["a", "b"],
                       item="item")


def _report(res):
    return lambda path, **kw: res.report(path, curves=False, n_resamples=200, **kw)


def _run(path, **kw):
    return tk.write_run(RUN, path, **kw)


def _text(path, **kw):
    return write.write_text(path, "hello\n", **kw)


WRITERS = {"write_text": lambda res: _text, "write_run": lambda res: _run, "report": _report}


@pytest.fixture(params=list(WRITERS))
def writer(request, res):
    return WRITERS[request.param](res)


@pytest.fixture
def no_harm_to_dev_null(monkeypatch):
    """Whatever the writer does, /dev/null is never renamed over, linked to or removed (the test
    runs as root in places: a broken writer must fail the test, not delete the device)."""
    guarded = {os.path.realpath(os.devnull)}

    def guard(name, fn):
        def wrapped(*args, **kwargs):
            if any(isinstance(a, (str, os.PathLike)) and os.path.realpath(a) in guarded for a in args):
                raise AssertionError(f"os.{name} on {os.devnull}")
            return fn(*args, **kwargs)
        return wrapped

    for name in ("replace", "rename", "link", "unlink", "remove", "open"):
        monkeypatch.setattr(write.os, name, guard(name, getattr(os, name)))


def _left(folder: Path) -> list[str]:
    """Temporary files left behind in ``folder``."""
    return [p for p in os.listdir(folder) if p.startswith(".topkeval-")]


# ---------------------------------------------------------------------------------------------
# bad paths: a clear error, before anything is computed or written


@pytest.mark.parametrize("path,pattern", [
    (None, r"must be a file path \(a str or a pathlib.Path\)\. Got None"),
    ("", r"Got '' instead\. An empty path names no file"),
    ("a\0b.html", "without NUL characters"),
    (3, "Got 3 instead"),
    (["a.html"], "must be a file path"),
])
def test_a_path_that_is_not_one_is_a_parameter_error(writer, path, pattern):
    with pytest.raises(tk.ParameterError, match=pattern) as info:
        writer(path)
    assert "already exists" not in str(info.value)  # '' was once "'.' already exists"


def test_filesystem_failures_name_the_path_and_the_fix(writer, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep")
    cases = {
        tmp_path / ("x" * 300 + ".out"): "the name is too long",  # ENAMETOOLONG
        a_file / "r.out": f"'{a_file}' is a file, not a folder",  # ENOTDIR (works as root, unlike chmod)
        tmp_path / "missing" / "r.out": f"the folder '{tmp_path / 'missing'}' does not exist",
        Path("/proc/r.out"): "no file can be created in the folder '/proc'",
        tmp_path: "it is a directory",
        f"{tmp_path / 'sub'}{os.sep}": "ends with a folder separator",
    }
    for path, words in cases.items():
        for overwrite in (False, True):
            with pytest.raises(tk.OutputFileError, match="Cannot write") as info:
                writer(path, overwrite=overwrite)
            assert isinstance(info.value, tk.InputFileError) and words in str(info.value), info.value
            assert f"'{path}'" in str(info.value)
    assert a_file.read_text() == "keep" and sorted(os.listdir(tmp_path)) == ["a_file"]


def test_an_existing_file_is_replaced_only_with_overwrite(writer, tmp_path):
    target = tmp_path / "out"
    target.write_text("mine")
    target.chmod(0o640)
    with pytest.raises(tk.OutputFileError, match=r"already exists; pass overwrite=True to replace it"):
        writer(target)
    assert target.read_text() == "mine"
    writer(target, overwrite=True)
    assert target.read_text() != "mine" and stat.S_IMODE(target.stat().st_mode) == 0o640  # its mode kept
    assert _left(tmp_path) == []


def test_a_new_file_has_the_mode_open_gives(tmp_path):
    mask = os.umask(0o027)
    try:
        write.write_text(tmp_path / "a", "x")
        with open(tmp_path / "b", "w") as f:
            f.write("x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o640


def _special_files(tmp_path: Path) -> dict[str, Path]:
    other = tmp_path / "precious.txt"
    other.write_text("keep me")
    files = {"a symbolic link": tmp_path / "link", "a symbolic link ": tmp_path / "dangling",
             "a named pipe (fifo)": tmp_path / "fifo", "a directory": tmp_path / "folder"}
    files["a symbolic link"].symlink_to(other)
    files["a symbolic link "].symlink_to(tmp_path / "nothing")
    os.mkfifo(files["a named pipe (fifo)"])
    files["a directory"].mkdir()
    if os.geteuid() == 0:  # a null device of our own (only root may create one)
        files["a character device"] = tmp_path / "null"
        os.mknod(files["a character device"], stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return files


def _same_file(path: Path, before: os.stat_result) -> bool:
    now = os.lstat(path)
    return (now.st_mode, now.st_ino, now.st_dev, now.st_rdev) == (before.st_mode, before.st_ino, before.st_dev,
                                                                  before.st_rdev)


def test_only_regular_files_are_ever_replaced(writer, tmp_path, no_harm_to_dev_null):
    files = _special_files(tmp_path)
    files["the null device"] = Path(os.devnull)
    before = {p: os.lstat(p) for p in files.values()}
    for words, path in files.items():
        kind = "a character device" if words == "the null device" else words.strip()
        for overwrite in (False, True):
            with pytest.raises(tk.OutputFileError, match="writes and replaces only regular files") as info:
                writer(path, overwrite=overwrite)
            assert f"Cannot write '{path}': it is {kind}," in str(info.value)
            assert _same_file(path, before[path])
    assert (tmp_path / "precious.txt").read_text() == "keep me" and not (tmp_path / "nothing").exists()
    assert stat.S_ISCHR(os.lstat(os.devnull).st_mode)
    assert _left(tmp_path) == []


def test_a_device_or_link_that_appears_while_writing_is_not_replaced(tmp_path):
    # checked again just before the temporary file takes the target's place
    target = tmp_path / "out"
    with pytest.raises(tk.OutputFileError, match="it is a named pipe"):
        with write.open_output(target, overwrite=True) as f:
            f.write("x")
            os.mkfifo(target)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    target.unlink()
    with pytest.raises(tk.OutputFileError, match="already exists"):
        with write.open_output(target) as f:
            f.write("x")
            target.write_text("theirs")  # created meanwhile: never overwritten without overwrite=True
    assert target.read_text() == "theirs" and _left(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# atomic: a failure leaves the target as it was and no temporary file


def _full_disk(monkeypatch):
    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(write.os, "fsync", fsync)


def test_a_full_disk_is_an_error_and_keeps_the_old_file(writer, tmp_path, monkeypatch):
    target = tmp_path / "out"
    target.write_text("old")
    _full_disk(monkeypatch)
    for path, overwrite in ((target, True), (tmp_path / "new", False)):
        with pytest.raises(tk.OutputFileError, match=r"Cannot write '.*': the disk is full .* Free some space"):
            writer(path, overwrite=overwrite)
    assert target.read_text() == "old" and not (tmp_path / "new").exists() and _left(tmp_path) == []


def test_an_error_while_writing_removes_the_temporary_file(tmp_path):
    target = tmp_path / "out"
    target.write_text("old")
    with pytest.raises(KeyError):
        with write.open_output(target, overwrite=True) as f:
            f.write("half")
            raise KeyError("the content failed")
    with pytest.raises(tk.OutputFileError, match="Input/output error"):
        with write.open_output(target, overwrite=True) as f:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
    assert target.read_text() == "old" and _left(tmp_path) == []


def test_a_content_error_of_write_run_writes_nothing(tmp_path):
    target = tmp_path / "out.run"
    with pytest.raises(tk.DataError):
        tk.write_run(RUN.assign(score=[1.0, float("nan"), 2.0]), target)
    assert os.listdir(tmp_path) == []


def _shuffled_parquet(tmp_path: Path) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"query": rng.integers(0, 20, 200), "relevance": rng.integers(0, 2, 200),
                          "score": rng.random(200)})
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


def test_a_streamed_file_that_cannot_spill_is_an_error(tmp_path, monkeypatch):
    # a file not grouped by query is spilled to temporary parquet files, by a hash of the query
    import pyarrow.parquet as pq

    log = _shuffled_parquet(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TOPKEVAL_TMP", str(scratch))
    assert tk.evaluate(log, ["recall@5"], chunk_rows=30).info["chunks"] > 1  # it does spill
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    monkeypatch.setenv("TOPKEVAL_TMP", str(a_file))
    with pytest.raises(tk.OutputFileError, match=f"Cannot write topkeval's temporary files in '{a_file}'.*"
                                                 "TOPKEVAL_TMP"):
        tk.evaluate(log, ["recall@5"], chunk_rows=30)

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setenv("TOPKEVAL_TMP", str(scratch))
    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    with pytest.raises(tk.OutputFileError, match="temporary files .*: the disk is full.*TOPKEVAL_TMP"):
        tk.evaluate(log, ["recall@5"], chunk_rows=30)
    assert os.listdir(scratch) == []  # the spill folder is removed all the same


# ---------------------------------------------------------------------------------------------
# one writer: nothing else in the package writes, replaces or deletes a file

#: Calls that write, create, replace or remove a file, whatever they are called on.
WRITES = {"write_text", "write_bytes", "savefig", "to_parquet", "to_csv", "to_excel", "to_feather", "to_pickle",
          "to_hdf", "to_stata", "write_dataset", "write_table", "write_feather", "ParquetWriter", "savez",
          "savez_compressed", "tofile", "symlink_to", "hardlink_to", "touch", "mkfifo", "mknod", "unlink", "rmtree",
          "copyfile", "copytree", "copymode", "makedirs", "removedirs", "fdopen", "mkstemp", "mkdtemp",
          "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile", "TemporaryDirectory"}
#: The same, for names that mean something else on other objects (str.replace, DataFrame.copy):
#: counted when called on one of these modules.
MODULE_WRITES = {"replace", "rename", "renames", "link", "symlink", "remove", "rmdir", "mkdir", "chmod", "truncate",
                 "ftruncate", "move", "copy", "copy2", "save", "dump", "write", "writer"}
MODULES = {"os", "shutil", "tempfile", "pathlib", "np", "numpy", "json", "pickle", "pq", "pa", "csv", "io", "gzip"}

#: The calls outside the writer that are known to be safe, each with its reason: (file, line text).
ALLOWED = {
    ("text.py", "frame.to_csv(buf, "): "writes into an io.StringIO",
    ("cli.py", "log.to_csv(buf, "): "writes into an io.StringIO (demo --save), then write_text",
    ("plots.py", "fig.savefig(buf, "): "writes into an io.BytesIO",
    ("cli.py", "os.open(os.devnull, os.O_WRONLY)"): "points standard output at the null device, writing nothing",
    ("stream.py", "tempfile.TemporaryDirectory("): "spill files of a streamed file: a private folder that topkeval "
                                                   "creates and removes, each OSError as an OutputFileError",
    ("stream.py", "pq.ParquetWriter(files[p], "): "a spill file in that private folder",
    ("stream.py", ".write_table(sub)"): "a spill file in that private folder",
}


def _writing_calls(path: Path):
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else None
        if name == "open":  # open(), os.open, gzip.open, Path.open: writing with w, a, x or + (or O_WRONLY)
            modes = node.args[1:2] + [k.value for k in node.keywords if k.arg in ("mode", "flags")]
            text = " ".join(ast.unparse(m) for m in modes)
            if not (any(c in text for c in "wax+") or "O_WRONLY" in text or "O_RDWR" in text or "O_CREAT" in text):
                continue
        elif name in WRITES:
            if name == "write_text" and owner is None:
                continue  # topkeval.files.write_text, imported
        elif not (name in MODULE_WRITES and owner in MODULES):
            continue
        yield node.lineno, name, lines[node.lineno - 1].strip()


def test_no_file_is_written_outside_the_writer():
    package = Path(tk.__file__).parent
    found, used = [], set()
    for path in sorted(package.rglob("*.py")):
        if path == Path(write.__file__):
            continue
        for lineno, name, line in _writing_calls(path):
            allowed = next((key for key in ALLOWED if key[0] == path.name and key[1] in line), None)
            if allowed:
                used.add(allowed)
            else:
                found.append(f"{path.relative_to(package)}:{lineno}: {name}: {line}")
    assert not found, ("write files through topkeval.files (open_output, write_text), which refuses links and "
                       "devices, is atomic and turns OSError into OutputFileError:\n" + "\n".join(found))
    assert used == set(ALLOWED), f"entries of ALLOWED that match nothing any more: {set(ALLOWED) - used}"
