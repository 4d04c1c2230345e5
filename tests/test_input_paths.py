"""Input files and folders as a new user gives them, and the columns of judgments beside TREC runs.

Each mistake is said for what it is (an empty folder, a folder where a file was expected, an empty
file, a gzip file named .csv, a named pipe...), never as a missing column or a deep Arrow message;
and ``query=``, ``item=`` and ``relevance=`` name the columns of a qrels table beside TREC run files.
Expected numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import gzip
import os

import pandas as pd
import pytest

import topkeval as tk

LOG = pd.DataFrame({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "score": [0.9, 0.1, 0.8, 0.2],
                    "item": ["a", "b", "a", "b"]})
RUN = "q1 Q0 d1 1 0.9 bm25\nq1 Q0 d2 2 0.5 bm25\nq2 Q0 d3 1 0.4 bm25\n"


@pytest.fixture
def run_file(tmp_path):
    path = tmp_path / "a.run"
    path.write_text(RUN)
    return path


# ----------------------------------------------------------------------------------------------
# the columns of a qrels table beside TREC run files


def test_qrels_table_columns_beside_trec_runs(tmp_path, run_file):
    qrels = tmp_path / "truth.csv"
    qrels.write_text("user,doc,grade\nq1,d1,1\nq2,d4,1\n")
    res = tk.evaluate(run_file, ["recall@2"], qrels=qrels, query="user", item="doc", relevance="grade")
    # q1: d1 retrieved at 1, R = 1 -> 1; q2: d4 not retrieved, R = 1 -> 0; mean 0.5
    assert res.summary.loc["bm25", "recall@2"] == 0.5
    assert res.query_name == "user"
    assert dict(zip(res.per_query["user"], res.per_query["recall@2"])) == {"q1": 1.0, "q2": 0.0}
    frame = pd.read_csv(qrels, dtype=str).assign(grade=lambda f: f.grade.astype(int))
    same = tk.evaluate(run_file, ["recall@2"], qrels=frame, query="user", item="doc", relevance="grade")
    assert same.summary.equals(res.summary)


def test_qrels_table_missing_column_names_the_right_option(tmp_path, run_file):
    qrels = tmp_path / "truth.csv"
    qrels.write_text("user,doc,grade\nq1,d1,1\n")
    with pytest.raises(tk.ColumnError, match=r"Column 'query' \(query=\).*Did you mean 'user'") as info:
        tk.evaluate(run_file, ["recall@2"], qrels=qrels)
    assert "relevance=None" not in str(info.value)  # that hint is about the relevance column only
    with pytest.raises(tk.ColumnError, match=r"Column 'relevance' \(relevance=\).*pass relevance=None"):
        tk.evaluate(run_file, ["recall@2"], qrels=qrels, query="user", item="doc")


def test_trec_qrels_file_with_query_name(tmp_path, run_file):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d4 1\n")
    res = tk.evaluate(run_file, ["recall@2"], qrels=qrels, query="topic")
    assert res.summary.loc["bm25", "recall@2"] == 0.5 and res.query_name == "topic"


@pytest.mark.parametrize("option,pattern", [
    ({"score": "s"}, "score= names the score columns of a table"),
    ({"score": ["a", "b"]}, "score= names the score columns of a table"),
    ({"model": "run"}, "model= names a run-name column"),
    ({"query": "doc", "item": "doc"}, "query and item columns must differ"),
])
def test_options_trec_runs_cannot_take_are_refused(tmp_path, run_file, option, pattern):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    with pytest.raises(tk.ParameterError, match=pattern):
        tk.evaluate(run_file, ["recall@2"], qrels=qrels, **option)


def test_column_names_that_a_run_table_uses_inside(tmp_path, run_file):
    """query='score' and item='run' (columns of the judgments) do not collide with the run's own."""
    truth = pd.DataFrame({"score": ["q1", "q2"], "run": ["d1", "d4"], "relevance": [1, 1]})
    res = tk.evaluate(run_file, ["recall@2"], qrels=truth, query="score", item="run")
    assert res.summary.loc["bm25", "recall@2"] == 0.5


# ----------------------------------------------------------------------------------------------
# folders


def test_empty_folder(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(tk.InputFileError, match="'.*empty' is an empty folder"):
        tk.evaluate(empty)
    with pytest.raises(tk.InputFileError, match="is an empty folder"):
        tk.evaluate(LOG, item="item", qrels=empty)
    with pytest.raises(tk.InputFileError, match="is a folder, where a TREC run file .* was expected.*it is empty"):
        tk.evaluate([empty], qrels=LOG)


def test_folder_where_a_file_is_expected(tmp_path, run_file):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a.run").write_text(RUN)
    with pytest.raises(tk.InputFileError, match=r"is a folder, where a TREC run file \(a file\) was expected: give "
                                                r"the path of a file in it \('a.run'\)"):
        tk.evaluate([folder], qrels=tmp_path / "q.txt")
    for read in (tk.read_run, tk.read_qrels):
        with pytest.raises(tk.InputFileError, match="is a folder"):
            read(folder)


def test_folder_without_parquet_files(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    LOG.to_csv(folder / "log.csv", index=False)
    (folder / "_SUCCESS").write_text("")
    with pytest.raises(tk.InputFileError, match=r"folder without parquet files \(it holds 'log.csv'\).*"
                                                r"such as '.*log.csv'"):
        tk.evaluate(folder)


def test_folder_of_parquet_files_is_read(tmp_path):
    """A dataset folder (a partition subfolder, a _SUCCESS marker, a file without suffix) still reads."""
    folder = tmp_path / "data.parquet" / "day=1"
    folder.mkdir(parents=True)
    LOG.to_parquet(folder / "part-0")
    (tmp_path / "data.parquet" / "_SUCCESS").write_text("")
    res = tk.evaluate(tmp_path / "data.parquet", ["precision@1"])
    assert res.summary.loc["score", "precision@1"] == 0.5  # q1: a relevant first; q2: a not relevant first


# ----------------------------------------------------------------------------------------------
# files: empty, of another format, unreadable


@pytest.mark.parametrize("name", ["log.csv", "log.parquet", "log.tsv", "a.run"])
def test_empty_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    with pytest.raises(tk.InputFileError, match=r"is empty \(0 bytes\)"):
        tk.evaluate(path) if name != "a.run" else tk.evaluate(path, qrels=LOG)


def test_file_with_a_header_and_no_rows(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("query,relevance,score\n")
    with pytest.raises(tk.DataError, match="log.csv' has columns but no rows"):
        tk.evaluate(path)
    empty = tmp_path / "empty.parquet"
    LOG.iloc[:0].to_parquet(empty)
    with pytest.raises(tk.DataError, match="has columns but no rows|no rows"):
        tk.evaluate(empty)
    qrels = tmp_path / "truth.csv"
    qrels.write_text("query,item,relevance\n")
    with pytest.raises(tk.DataError, match="truth.csv' has columns but no rows"):
        tk.evaluate(LOG, item="item", qrels=qrels)


def test_text_named_parquet(tmp_path):
    path = tmp_path / "log.parquet"
    LOG.to_csv(path, index=False)
    with pytest.raises(tk.InputFileError, match=r"Cannot read '.*log.parquet' as parquet: it holds text \(a CSV "
                                                r"file\? then name it .csv\)"):
        tk.evaluate(path)


def test_gzip_named_csv_and_csv_named_gz(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(gzip.compress(LOG.to_csv(index=False).encode()))
    with pytest.raises(tk.InputFileError, match="gzip-compressed; name it log.csv.gz"):
        tk.evaluate(path)
    renamed = tmp_path / "log2.csv.gz"
    renamed.write_bytes(path.read_bytes())
    assert tk.evaluate(renamed, ["precision@1"]).summary.loc["score", "precision@1"] == 0.5
    plain = tmp_path / "log3.csv.gz"
    plain.write_text(LOG.to_csv(index=False))
    with pytest.raises(tk.InputFileError, match="named .gz but is not gzip-compressed"):
        tk.evaluate(plain)


def test_parquet_under_another_name(tmp_path):
    csv = tmp_path / "log.csv"
    LOG.to_parquet(csv)
    with pytest.raises(tk.InputFileError, match="is a parquet file; name it .parquet"):
        tk.evaluate(csv)
    run = tmp_path / "model.run"
    LOG.to_parquet(run)
    with pytest.raises(tk.InputFileError, match="is a parquet file; name it .parquet"):
        tk.evaluate(run, qrels=LOG)


def test_binary_file_as_trec_run(tmp_path):
    path = tmp_path / "model.run"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(tk.InputFileError, match="as a TREC run file: it holds binary data, not text"):
        tk.read_run(path)


def test_gzip_trec_files_are_read_whatever_their_name(tmp_path, run_file):
    packed = tmp_path / "b.run"  # no .gz in the name
    packed.write_bytes(gzip.compress(RUN.encode()))
    pd.testing.assert_frame_equal(tk.read_run(packed), tk.read_run(run_file))


def _error_within(seconds, call, fifo):
    """The exception ``call`` raises, failing the test if it blocks (then the pipe is opened and
    closed for writing, so that the blocked reader sees its end and the test run goes on)."""
    import threading

    raised = []

    def target():
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - handed back to the test
            raised.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY))
        worker.join(seconds)
        pytest.fail("reading a named pipe blocked")
    assert raised, "no error"
    return raised[0]


def test_named_pipe_does_not_block(tmp_path):
    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    for call in (lambda: tk.evaluate(fifo), lambda: tk.read_run(fifo)):
        exc = _error_within(30, call, fifo)
        assert isinstance(exc, tk.InputFileError) and "is a named pipe, not a file" in str(exc), exc


def test_devices_and_proc_files():
    with pytest.raises(tk.InputFileError, match="is a character device, not a file"):
        tk.evaluate("/dev/null")
    if os.path.exists("/proc/self/mem"):  # a regular file that cannot be read (I/O error)
        with pytest.raises(tk.InputFileError, match="Cannot read '/proc/self/mem'"):
            tk.evaluate("/proc/self/mem", qrels=LOG)


def test_unreadable_file(tmp_path):
    path = tmp_path / "log.csv"
    LOG.to_csv(path, index=False)
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):  # root reads anything
            pytest.skip("this user can read files without read permission")
        with pytest.raises(tk.InputFileError, match="permission denied"):
            tk.evaluate(path)
    finally:
        path.chmod(0o644)


# ----------------------------------------------------------------------------------------------
# the path itself


def test_home_folder_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    LOG.to_csv(tmp_path / "log.csv", index=False)
    res = tk.evaluate("~/log.csv", ["precision@1"])
    assert res.summary.loc["score", "precision@1"] == 0.5
    (tmp_path / "a.run").write_text(RUN)
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n")
    assert tk.evaluate(["~/a.run"], ["recall@1"], qrels="~/q.txt").summary.loc["bm25", "recall@1"] == 1.0
    with pytest.raises(tk.InputFileError, match=f"File not found: '~/nope.csv' \\(nor '{tmp_path}/nope.csv'\\)"):
        tk.evaluate("~/nope.csv")


@pytest.mark.parametrize("path,pattern", [
    ("", r"path of the data is empty \(''\)"),
    ("log\x00.csv", "NUL character"),
    ("https://example.com/log.parquet", "is a URL; topkeval reads local files"),
    ("s3://bucket/log.parquet", "is a URL"),
    ("/no/such/folder/log.csv", "File not found: '/no/such/folder/log.csv'. The folder '/no/such/folder' does not "
                                "exist either"),
])
def test_paths_that_cannot_be_read(path, pattern):
    with pytest.raises(tk.InputFileError, match=pattern):
        tk.evaluate(path)


def test_run_paths_and_broken_links(tmp_path):
    with pytest.raises(tk.InputFileError, match="Run file not found"):
        tk.evaluate([tmp_path / "nope.run"], qrels=LOG)
    with pytest.raises(tk.InputFileError, match="path of the judgments"):
        tk.evaluate(LOG, item="item", qrels="")
    link = tmp_path / "log.csv"
    link.symlink_to(tmp_path / "gone.csv")
    with pytest.raises(tk.InputFileError, match="symbolic link to '.*gone.csv', which does not exist"):
        tk.evaluate(link)


# ----------------------------------------------------------------------------------------------
# TREC files: line-numbered errors, swapped files


def test_malformed_run_line_keeps_its_line_number(tmp_path):
    path = tmp_path / "a.run"
    path.write_text("q1 Q0 d1 1 0.9 bm25\n# a comment\nq1 Q0 d2 2 bm25\n")
    with pytest.raises(tk.DataError, match=r"a.run, line 3: a run line needs 6 fields.*Got: 'q1 Q0 d2 2 bm25'"):
        tk.read_run(path)


def test_swapped_run_and_judgments(tmp_path, run_file):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    with pytest.raises(tk.DataError, match="line 1: a run line needs 6 fields.*looks like a qrels line"):
        tk.evaluate(qrels, qrels=run_file)
    with pytest.raises(tk.DataError, match="line 1: a qrels line needs 4 fields.*looks like a run line"):
        tk.evaluate(run_file, qrels=run_file)
