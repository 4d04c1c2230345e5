"""A fresh hostile review of the surfaces of issue 21, written after its fixes: one table per class.

Every case asserts the right number (worked out by hand in the comment beside it, by enumeration,
or by a peer installed in the test environment: pytrec_eval, ranx, torchmetrics, scikit-learn,
scipy) or the right error class and a fragment of its message; a command-line case asserts the exit
code (0 or 2), one error line, no traceback. The classes: report parameters, report content,
output paths (every writer), write_run, command-line flags, command-line files, command-line
formats and standard output, segments and weights, score matrices, presets against their peers,
comparisons, views (diff, side_by_side, curves, beyond_accuracy, plots), inputs, metric names.
The cases marked "fixed" failed before the fix they came with (a traceback or a silently wrong
number); the others passed as written and stay as guards.
"""

from __future__ import annotations

import errno
import gzip
import io
import itertools
import json
import math
import os
import re
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

import topkeval as tk
from topkeval import ColumnError, DataError, InputFileError, OutputFileError, ParameterError, UnknownMetricError
from topkeval.cli import main

# ---------------------------------------------------------------------------------------------
# shared data

#: Two models over three queries of different lengths (so no "every query has N candidates" warning).
#: recall@1 per query: a = 1/2, 0, 0 (q1: a at .9 is relevant, R = 2; q2 and q3 rank a non-relevant
#: item first); b = 1/2, 1, 1. With b as the baseline, a regresses on q2 and q3 (delta -1 each).
LOG = pd.DataFrame({"query": [1, 1, 1, 2, 2, 2, 3, 3], "item": list("abcabcab"), "relevance": [1, 0, 1, 0, 1, 0, 0, 1],
                    "a": [.9, .8, .1, .5, .4, .3, .2, .1], "b": [.1, .8, .9, .4, .5, .2, .1, .2]})
RES = tk.evaluate(LOG, metrics=["recall@1"], score=["a", "b"], item="item")
FAST = {"n_resamples": 100, "curves": False}  # a report without the metric@k curves, few resamples


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code, err, fragment):
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("topkeval: error: "), err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]


def _read(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# report parameters: refused before any work, with the parameter named

REPORT_PARAMETERS = [
    ({"digits": -1}, "digits"), ({"digits": 2.5}, "digits"), ({"digits": 16}, "digits"), ({"digits": True}, "digits"),
    ({"digits": None}, "digits"), ({"worst": -1}, "worst"), ({"worst": 1.5}, "worst"), ({"worst": True}, "worst"),
    ({"worst": 100_001}, "worst"), ({"k": 0}, "'k'"), ({"k": -3}, "'k'"), ({"k": 2.0}, "'k'"), ({"k": 2**41}, "'k'"),
    ({"queries": "007"}, "pass a list: ['007']"), ({"queries": 1}, "pass a list: [1]"), ({"queries": [None]}, "queries"),
    ({"queries": [float("nan")]}, "queries"), ({"queries": [True]}, "queries"), ({"queries": [[1]]}, "queries"),
    ({"queries": {1: 2}}, "queries"), ({"queries": [99]}, "query 99 of queries= is not among"),
    ({"title": None}, "title"), ({"title": "x" * 1001}, "at most 1,000"), ({"title": "a\x00b"}, "title"),
    ({"images": ""}, "images"), ({"images": ["https://x"]}, "images"), ({"images": 5}, "images"),
    ({"test": "z"}, "test"), ({"correction": "sidak"}, "correction"), ({"confidence": 1}, "confidence"),
    ({"confidence": float("nan")}, "confidence"), ({"n_resamples": 1}, "n_resamples"), ({"seed": -1}, "seed"),
    ({"curves": 1}, "curves"), ({"overwrite": "yes"}, "overwrite"), ({"metric": "recall@5"}, "was not evaluated"),
    ({"baseline": "c"}, "baseline 'c' is not a model"), ({"model": "zz"}, "model 'zz' is not a model"),
]


@pytest.mark.parametrize("options,fragment", REPORT_PARAMETERS, ids=[repr(o) for o, _ in REPORT_PARAMETERS])
def test_report_parameters_are_refused(tmp_path, options, fragment):
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        RES.report(tmp_path / "r.html", **options)
    assert not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------------------------------------
# report content: what the page says, for odd but valid options


def _one_model_report(tmp_path, **options) -> str:
    """A report of model a alone showing query 2 side by side: no figures, so it takes milliseconds."""
    res = tk.evaluate(LOG, metrics=["recall@1"], score="a", item="item")
    return _read(res.report(tmp_path / "one.html", queries=[2], **FAST, **{"k": 3, **options}))


def _images(page) -> list[str]:
    return re.findall(r'<img class="thumb" alt="[^"]*" src="([^"]*)">', page)


def test_report_images_function_that_raises_names_the_item(tmp_path):  # fixed: a ZeroDivisionError traceback
    with pytest.raises(ParameterError, match=r"images\('[abc]'\) raised ZeroDivisionError"):
        _one_model_report(tmp_path, images=lambda item: 1 / 0)


@pytest.mark.parametrize("images,expected", [
    (lambda item: 5, []),  # not a URL: no image
    (lambda item: None, []),
    ("javascript:alert('{item}')", []),  # only http(s) and data:image/ URLs are shown
    ({"b": "https://cdn/b.jpg"}, ["https://cdn/b.jpg"]),  # a mapping without every item
    (pd.Series({"a": "https://cdn/a.jpg"}), ["https://cdn/a.jpg"]),
    ('https://x/{item}" onerror="alert(1)', ['https://x/a&quot; onerror=&quot;alert(1)',  # quotes escaped
                                             'https://x/b&quot; onerror=&quot;alert(1)',
                                             'https://x/c&quot; onerror=&quot;alert(1)']),
])
def test_report_images(tmp_path, images, expected):
    # query 2 under model a: a (.5), b (.4), c (.3)
    assert sorted(_images(_one_model_report(tmp_path, images=images))) == sorted(expected)


def test_report_title_and_ids_are_escaped(tmp_path):
    page = _one_model_report(tmp_path, title="<script>alert(1)</script>")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("digits,shown", [(0, ">0<"), (2, ">0.17<"), (15, ">0.166666666666667<")])
def test_report_digits(tmp_path, digits, shown):
    # model a's recall@1 mean: (1/2 + 0 + 0) / 3 = 0.1666...
    page = _one_model_report(tmp_path, digits=digits)
    assert f'data-value="{1 / 6!r}"' in page and shown in page


@pytest.mark.parametrize("k,rows", [(1, 1), (2, 2), (10**12, 3)])
def test_report_side_by_side_k(tmp_path, k, rows):
    page = _one_model_report(tmp_path, k=k)  # query 2 has 3 candidates: a list shorter than k shows them all
    table = page.split('<table class="sbs">')[1].split("</table>")[0]
    assert table.count("<tr>") - 2 == rows


def test_report_queries_by_value(tmp_path):
    res = tk.evaluate(LOG.assign(query=LOG["query"].map({1: "007", 2: "7", 3: "x"})), metrics=["recall@1"], score="a",
                      item="item")
    page = _read(res.report(tmp_path / "q.html", queries=["7"], **FAST))
    assert 'query <span class="id">7</span>' in page and 'query <span class="id">007</span>' not in page


@pytest.mark.parametrize("worst,listed", [(0, 0), (1, 1), (100_000, 2)])
def test_report_worst(tmp_path, worst, listed):
    # baseline b: model a regresses on q2 and q3 (delta -1 each), nowhere else
    page = _read(RES.report(tmp_path / "w.html", baseline="b", worst=worst, **FAST))
    assert len(re.findall(r'<a href="#q\d+">', page)) == listed


def test_report_of_a_metric_undefined_everywhere_raises_no_warning(tmp_path):  # fixed: matplotlib UserWarning
    every = LOG.assign(relevance=1)  # N = 0 everywhere: specificity is undefined, NaN under undefined="nan"
    res = tk.evaluate(every, metrics=["specificity@1"], score=["a", "b"], item="item", undefined="nan")
    page = _read(res.report(tmp_path / "nan.html", n_resamples=100, curves=False))  # warnings are errors here
    assert "<svg" in page and "no query with a value under both models" in page
    fig = res.plot_deltas("specificity@1")
    assert fig.axes[0].get_legend() is None and fig.axes[0].texts[0].get_text() == "no query with a value under both models"


def test_report_without_per_query_values_says_so(tmp_path):
    path = tmp_path / "log.parquet"
    LOG.to_parquet(path)
    res = tk.evaluate(path, metrics=["recall@1"], score=["a", "b"], item="item", chunk_rows=2, keep_per_query=False)
    page = _read(res.report(tmp_path / "nk.html", **FAST))
    assert "No per-query values were kept" in page and 'id="comparison"' not in page


# ---------------------------------------------------------------------------------------------
# output paths: every writer, every kind of path that is not a new regular file


def _write_report(path, overwrite=False):
    return RES.report(path, overwrite=overwrite, **FAST)


def _write_run(path, overwrite=False):
    return tk.write_run(pd.DataFrame({"query": ["q"], "item": ["d"], "score": [1.0]}), path, overwrite=overwrite)


def _paths(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "file", tmp_path / "link")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    os.mkfifo(tmp_path / "fifo")
    return {
        "a directory": (tmp_path / "folder", True, OutputFileError, "is a directory"),
        "a missing folder": (tmp_path / "no" / "r.html", False, OutputFileError, "does not exist"),
        "a trailing slash": (str(tmp_path / "new") + "/", False, OutputFileError, "ends with a folder separator"),
        "a NUL byte": (str(tmp_path / "a\x00b"), False, ParameterError, "NUL"),
        "an empty path": ("", False, ParameterError, "empty path"),
        "None": (None, False, ParameterError, "file path"),
        "a number": (5, False, ParameterError, "file path"),
        "a 300-character name": (tmp_path / ("x" * 300), False, OutputFileError, "too long"),
        "a symbolic link": (tmp_path / "link", True, OutputFileError, "symbolic link"),
        "a dangling link": (tmp_path / "dangling", True, OutputFileError, "symbolic link"),
        "a fifo": (tmp_path / "fifo", True, OutputFileError, "named pipe"),
        "/dev/null": ("/dev/null", True, OutputFileError, "character device"),
        "an existing file": (tmp_path / "file", False, OutputFileError, "already exists"),
        "a path through a file": (tmp_path / "file" / "r.html", False, OutputFileError, "is a file, not a folder"),
        "/proc": ("/proc/topkeval-review.html", False, OutputFileError, "no file can be created"),
    }


PATH_KINDS = [
    "a directory", "a missing folder", "a trailing slash", "a NUL byte", "an empty path", "None", "a number",
    "a 300-character name", "a symbolic link", "a dangling link", "a fifo", "/dev/null", "an existing file",
    "a path through a file", "/proc"]


@pytest.mark.parametrize("writer", [_write_report, _write_run], ids=["report", "write_run"])
@pytest.mark.parametrize("kind", PATH_KINDS)
def test_output_paths(tmp_path, writer, kind):
    path, overwrite, error, fragment = _paths(tmp_path)[kind]
    with pytest.raises(error, match=re.escape(fragment)):
        writer(path, overwrite=overwrite)
    assert (tmp_path / "file").read_text() == "x" and os.path.islink(tmp_path / "link")  # nothing replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "fifo", "file", "folder", "link"]


@pytest.mark.parametrize("argv,fragment", [
    (["report", "{log}", "--score", "a", "--score", "b", "-o", "-"], "-o/--output is '-'"),  # fixed: wrote a file '-'
    (["demo", "--queries", "20", "--report", "-"], "--report is '-'"),  # fixed: wrote a file '-'
    (["report", "{log}", "--score", "a", "-o", "/dev/null", "--force"], "character device"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}"], "is a directory"),
    (["report", "{log}", "--score", "a", "-o", ""], "-o/--output is empty"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}/no/r.html"], "does not exist"),
    (["demo", "--queries", "20", "--report", "{tmp}"], "is a directory"),
    (["demo", "--queries", "20", "--report", ""], "--report is empty"),
    (["demo", "--queries", "20", "--save", "-"], "--save is '-'"),
    (["demo", "--queries", "20", "--save", "/dev/null"], "give a file ending in .parquet, .csv or .tsv"),
    (["demo", "--queries", "20", "--save", "{tmp}"], "give a file ending in .parquet, .csv or .tsv"),
    (["demo", "--queries", "20", "--save", "{tmp}/x.csv/"], "ends with a folder separator"),
    (["demo", "--queries", "20", "--save", "log.parquet"], "already exists"),
    (["demo", "--queries", "20", "--save", "{tmp}/no/log.csv"], "does not exist"),
    # fixed: the report was written, then the log refused over it (or, with --force, written over it)
    (["demo", "--queries", "20", "--save", "same.csv", "--report", "same.csv"], "the same file"),
    (["demo", "--queries", "20", "--save", "{tmp}/same.csv", "--report", "./same.csv", "--force"], "the same file"),
])
def test_cli_output_paths(tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    LOG.to_parquet(tmp_path / "log.parquet")
    argv = [a.replace("{log}", str(tmp_path / "log.parquet")).replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = _run(argv, capsys)
    _one_error_line(code, err, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet"]


@pytest.mark.parametrize("name", ["-log.csv", "a b's \"x\" $(touch pwned).tsv", "ünï cödé.parquet", "DEMO.CSV",
                                  "log.Parquet"])
def test_demo_save_prints_a_command_a_shell_runs_to_the_same_numbers(tmp_path, capsys, monkeypatch, name):
    """``demo --save NAME``: the printed command, split as a shell splits it, evaluates the file
    saved to the demo's own numbers (fixed: a name starting with '-' was printed bare, and read back
    as an unknown option)."""
    import shlex

    monkeypatch.chdir(tmp_path)
    code, demo_csv, err = _run(["demo", "--queries", "40", "--format", "csv", f"--save={name}"], capsys)
    assert code == 0, err
    command = shlex.split(err.split("evaluate it with:")[1])
    assert command[:2] == ["topkeval", "evaluate"] and os.path.samefile(command[2], tmp_path / name)
    code, again, err = _run(command[1:] + ["--format", "csv"], capsys)
    assert code == 0, err
    assert again == demo_csv
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("name", [b"\xff\xfe.csv", b"new\nline.csv", b"red\x1b[31m.tsv",
                                  "t\tab ü.csv".encode()], ids=["not utf-8", "newline", "escape", "tab"])
def test_demo_save_prints_a_name_of_any_bytes_as_one_line_a_shell_reads_back(tmp_path, name):
    """Fixed: a name that is not UTF-8 was printed to standard error as '\\udcff...' (Python's
    backslashreplace), which names another file; a newline or an escape code went to the terminal
    as it is. Such names are printed $'...' with \\xHH escapes: one line of printable ASCII, read
    back by bash as the very bytes of the name."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(os.path.dirname(__file__)), "src")}
    proc = subprocess.run([sys.executable, "-m", "topkeval", "demo", "--queries", "5", "--format", "json",
                           b"--save=" + name], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # the message is on standard error: standard output stays JSON
    line = proc.stderr.split(b"evaluate it with:\n")[1].rstrip(b"\n")
    assert b"\n" not in line and all(32 <= c < 127 for c in line), line
    assert b"\x1b" not in proc.stderr and proc.stderr.count(b"\n") == 2, proc.stderr  # nothing raw on the terminal
    path = line.split(b"topkeval evaluate ")[1].split(b" --relevance")[0]
    read = subprocess.run(["bash", "-c", b"printf %s " + path], capture_output=True, check=True).stdout
    assert read == name and (tmp_path / os.fsdecode(name)).is_file()


@pytest.mark.parametrize("metrics,columns", [
    ([], ["recall@20", "precision@20", "f1@20", "r_precision"]),  # the defaults, less specificity (judgments apart)
    # fixed: named with -m, specificity@20 was left out as if unsaid (the same list as the defaults)
    (["-m", "recall@20,precision@20,f1@20,specificity@20,r_precision"],
     ["recall@20", "precision@20", "f1@20", "specificity@20", "r_precision"]),
    (["-m", "recall@20", "-m", "precision@20", "-m", "f1@20", "-m", "specificity@20", "-m", "r_precision"],
     ["recall@20", "precision@20", "f1@20", "specificity@20", "r_precision"]),
])
def test_cli_trec_run_and_qrels_default_metrics(tmp_path, capsys, metrics, columns):
    (tmp_path / "run.txt").write_text("1 Q0 a 0 3 sys\n1 Q0 b 1 2 sys\n1 Q0 c 2 1 sys\n2 Q0 a 0 2 sys\n2 Q0 d 1 1 sys\n")
    (tmp_path / "qrels.txt").write_text("1 0 b 1\n2 0 x 1\n2 0 d 1\n")
    code, out, err = _run(["evaluate", "--run", tmp_path / "run.txt", "--qrels", tmp_path / "qrels.txt", *metrics,
                           "--format", "csv"], capsys)
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns) == ["model", *columns]
    assert table["recall@20"].tolist() == [0.75]  # q1: b of {b}; q2: d of {x, d}


# ---------------------------------------------------------------------------------------------
# write_run: a file read_run and trec_eval read back as written, or an error

def _arrow_table(data):
    import pyarrow as pa

    return pa.table(data)


RUN = pd.DataFrame({"query": ["q1", "q1", "q2"], "item": ["a", "b", "c"], "score": [0.1, 0.7, 0.5]})

WRITE_RUN_REFUSED = [
    ("a None query id", RUN.assign(query=[None, "q1", "q2"]), {}, ColumnError, "missing query ids"),  # fixed: 'nan'
    ("a NaN query id", RUN.assign(query=[np.nan, 1.0, 2.0]), {}, ColumnError, "missing query ids"),  # fixed: 'nan'
    ("a None item id", RUN.assign(item=["a", None, "c"]), {}, ColumnError, "missing item ids"),  # fixed: 'None'
    ("ids '1' and 1", RUN.assign(query=["1", 1, 2]), {}, ColumnError, "one kind"),  # fixed: one query '1'
    ("a None run name", RUN.assign(run=["r", None, "r"]), {}, ColumnError, "missing run ids"),  # fixed: 'None'
    ("an item twice", RUN.assign(item=["a", "a", "c"]), {}, DataError, "item 'a' twice"),  # fixed: unreadable run
    ("two runs merged by run_name", RUN.assign(item=["a", "a", "c"], run=["r1", "r2", "r1"]), {"run_name": "x"},
     DataError, "item 'a' twice"),  # fixed
    ("bool scores", RUN.assign(score=[True, False, True]), {}, DataError, "finite numbers"),
    ("a missing score", RUN.assign(score=pd.array([1, None, 2], dtype="Int64")), {}, DataError, "finite numbers"),
    ("an infinite score", RUN.assign(score=[1.0, np.inf, 2.0]), {}, DataError, "finite numbers"),
    ("integer scores beyond 2**53", RUN.assign(score=[2**53 + 1, 2**53, 1]), {}, DataError, "beyond 2**53"),
    ("an id with a space", RUN.assign(item=["a b", "b", "c"]), {}, DataError, "'a b'"),
    ("an empty id", RUN.assign(query=["", "q1", "q2"]), {}, DataError, "''"),
    ("run_name ''", RUN, {"run_name": ""}, ParameterError, "run_name"),
    ("run_name with a space", RUN, {"run_name": "a b"}, DataError, "'a b'"),
    ("a missing column", RUN, {"score": "s"}, ColumnError, "Column 's' not found"),
]


@pytest.mark.parametrize("frame,options,error,fragment", [c[1:] for c in WRITE_RUN_REFUSED],
                         ids=[c[0] for c in WRITE_RUN_REFUSED])
def test_write_run_refuses(tmp_path, frame, options, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        tk.write_run(frame, tmp_path / "out.run", **options)
    assert not (tmp_path / "out.run").exists()


WRITE_RUN_WRITES = [
    ("scores that print alike", {"query": ["q", "q"], "item": ["x", "y"], "score": [0.1 + 0.2, 0.3]},
     "q Q0 x 1 0.30000000000000004 topkeval\nq Q0 y 2 0.3 topkeval\n"),
    ("float32 scores, exactly", {"query": ["q", "q"], "item": ["x", "y"], "score": np.array([0.1, 0.2], np.float32)},
     "q Q0 y 1 0.20000000298023224 topkeval\nq Q0 x 2 0.10000000149011612 topkeval\n"),
    ("ties keep the frame's order", {"query": ["q"] * 3, "item": ["z", "x", "y"], "score": [1, 1, 1]},
     "q Q0 z 1 1.0 topkeval\nq Q0 x 2 1.0 topkeval\nq Q0 y 3 1.0 topkeval\n"),
    ("-0.0 and 0.0 tie", {"query": ["q", "q"], "item": ["x", "y"], "score": [-0.0, 0.0]},
     "q Q0 x 1 -0.0 topkeval\nq Q0 y 2 0.0 topkeval\n"),
    ("unicode and integer ids", {"query": ["é", "é"], "item": [7, 10], "score": [1.0, 2.0]},
     "é Q0 10 1 2.0 topkeval\né Q0 7 2 1.0 topkeval\n"),
    ("a run column of a dict", {"query": ["q", "q"], "item": ["x", "x"], "score": [1.0, 2.0], "run": ["r1", "r2"]},
     "q Q0 x 1 1.0 r1\nq Q0 x 1 2.0 r2\n"),  # fixed: the run column was ignored, the two runs merged
    ("a run column of an Arrow table", _arrow_table({"query": ["q", "q"], "item": ["x", "y"], "score": [1.0, 2.0],
                                                     "run": ["r1", "r2"]}),
     "q Q0 x 1 1.0 r1\nq Q0 y 1 2.0 r2\n"),  # fixed: one run 'topkeval', x and y ranked together
]


@pytest.mark.parametrize("data,text", [c[1:] for c in WRITE_RUN_WRITES], ids=[c[0] for c in WRITE_RUN_WRITES])
def test_write_run_writes(tmp_path, data, text):
    tk.write_run(data, tmp_path / "out.run")
    assert (tmp_path / "out.run").read_text(encoding="utf-8") == text
    back = tk.read_run(tmp_path / "out.run")
    assert back["score"].tolist() == [float(line.split()[4]) for line in text.splitlines()]


# ---------------------------------------------------------------------------------------------
# command-line flags: hostile values, one error line, exit 2

CLI_REFUSED = [
    (["evaluate", "{log}", "--score", "a", "--ci", "95"], "--ci must be a confidence level between 0 and 1, such as 0.95"),
    (["evaluate", "{log}", "--score", "a", "--ci", "nan"], "--ci must be a confidence level between 0 and 1"),
    (["evaluate", "{log}", "--score", "a", "--ci", "x"], "invalid float value"),
    (["evaluate", "{log}", "--score", "a", "--ci", "--format", "trec"], "no place for them"),
    (["evaluate", "{log}", "--score", "a", "-m", ""], "names no metric"),
    (["evaluate", "{log}", "--score", "a", "-m", ","], "names no metric"),
    (["evaluate", "{log}", "--score", "a", "-m", "recall@2,"], "a comma too many"),
    (["evaluate", "{log}", "--score", "a", "-m", "recall@2", "-m", "R@2"], "the same metric"),
    (["evaluate", "{log}", "--score", "a", "-m", "recall@0"], "positive integer"),
    (["evaluate", "{log}", "--score", "a", "-m", "recall@99999999999999999999"], "at most 1099511627775"),
    (["evaluate", "{log}", "--score", "a", "-m", "fbeta(beta=nan)@2"], "beta must be a positive finite number"),
    (["evaluate", "{log}", "--score", "a", "-m", "rbp(p=1)@2"], "p must be a number between 0 and 1"),
    (["evaluate", "{log}", "--score", "a", "-m", "ndcg(gain={1:inf})@2"], "gain must be"),
    (["evaluate", "{log}", "--score", "a", "-m", "récall@2"], "Did you mean 'recall@2'"),
    (["evaluate", "{log}", "--score", "a", "--depth", "0"], "--depth option of evaluate must be a positive int"),
    (["evaluate", "{log}", "--score", "a", "--depth", "1.5"], "invalid int value"),
    (["evaluate", "{log}", "--score", "a", "--depth", "2"], "needs a deterministic tie rule"),
    (["evaluate", "{log}", "--score", "a", "--threshold", "nan"], "finite number"),
    (["evaluate", "{log}", "--score", "a", "--score-threshold", "1e400"], "finite number"),
    (["evaluate", "{log}", "--score", "a", "--chunk-rows", "0"], "--chunk-rows option"),
    (["evaluate", "{log}", "--score", "a", "--by", "query"], "query-level columns other than"),
    (["evaluate", "{log}", "--score", "a", "--by", ""], "--by is empty"),
    (["evaluate", "{log}", "--score", "a", "--weight", "a"], "query-level columns other than"),
    (["evaluate", "{log}", "--score", "a", "--score", "a"], "listed twice"),
    (["evaluate", "{log}", "--score", "query"], "must differ"),
    (["evaluate", "{log}", "--score", "a", "--conventions", ""], "invalid choice"),
    (["evaluate", "{log}", "--score", "a", "--judged-only"], "pass --qrels"),
    (["evaluate", "{log}", "--score", "a", "--missing-queries", "zero"], "pass --qrels"),
    (["evaluate", "{log}", "--sco", "a"], "ambiguous option"),
    (["compare", "{log}", "--score", "a", "--baseline", "a"], "other than --baseline"),
    (["compare", "{log}", "--baseline", "a", "--score", "b", "--resamples", "0"], "--resamples option"),
    (["compare", "{log}", "--baseline", "a", "--score", "b", "--seed", "-1"], "--seed option"),
    (["compare", "{log}", "--baseline", "a", "--score", "b", "--test", "t", "--weight", "w"], "no weighted form"),
    (["diff", "{log}", "--baseline", "a", "--score", "b", "--item", "item", "--show", "1", "-k", "0"], "The -k option of side_by_side must be a positive int"),
    (["diff", "{log}", "--baseline", "a", "--score", "b", "--item", "item", "--show", "99"], "not among the queries"),
    (["diff", "{log}", "--baseline", "a", "--score", "b", "--worst", "0"], "--worst must be a positive integer"),
    (["diff", "{log}", "--baseline", "a", "--score", "b", "--show", "1"], "pass --item"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}/r.html", "--worst", "-1"], "The --worst option of report must be an int in [0, 100000]"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}/r.html", "-k", "0"], "The -k option of report must be a positive int"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}/r.html", "--show", "99"], "is not among the evaluated"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}/r.html", "--images", ""], "The --images option of report must be a pattern with {item}"),
    (["report", "{log}", "--score", "a", "-o", "{tmp}/r.html", "--title", "x" * 2000], "at most 1,000"),
    (["demo", "--queries", "0"], "--queries must be an integer from 1 to 100,000"),
    (["demo", "--queries", "1000000000000"], "--queries must be an integer from 1 to 100,000"),  # fixed: MemoryError
    (["metrics", "extra", "more"], "unrecognized arguments"),
    (["metrics", "extra"], "Unknown metric 'extra'"),
]


@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "log.parquet"
    LOG.assign(w=[1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]).to_parquet(path)
    return path


@pytest.mark.parametrize("argv,fragment", CLI_REFUSED, ids=[" ".join(a)[:60] for a, _ in CLI_REFUSED])
def test_cli_refuses_in_one_line(tmp_path, capsys, log_file, argv, fragment):
    argv = [a.replace("{log}", str(log_file)).replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = _run(argv, capsys)
    _one_error_line(code, err, fragment)
    assert out == ""


def test_cli_numbers(capsys, log_file):
    # each worked out by hand from LOG (columns a, b, relevance; w = 1, 2, 1 per query)
    expected = {
        ("--score", "a", "-m", "recall@2"): 0.8333333333333334,  # (1/2 + 1 + 1) / 3
        ("--score", "a", "-m", "P@1", "--ascending"): 2 / 3,  # lowest first: c rel, c not, b rel
        ("--score", "b", "-m", "recall@1", "--weight", "w"): (0.5 + 2 * 1 + 1) / 4,
        ("--score", "a", "-m", "recall@1", "--conventions", "trec_eval", "--item", "item"): 1 / 6,
        ("--score", "a", "-m", "recall@1", "--chunk-rows", "1"): 1 / 6,
        ("--score", "a", "-m", "recall@1", "--depth", "1", "--ties", "first"): 1 / 6,
    }
    for flags, value in expected.items():
        code, out, err = _run(["evaluate", log_file, *flags, "--format", "json"], capsys)
        assert code == 0 and err == "", (flags, err)
        assert json.loads(out)["summary"][flags[1]][flags[3]] == pytest.approx(value, abs=1e-15), flags


# ---------------------------------------------------------------------------------------------
# command-line files of every kind


def _file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


CLI_FILES_REFUSED = [
    ("an empty folder", lambda t: (t / "empty").mkdir() or t / "empty", "empty folder"),
    ("an empty csv", lambda t: _file(t, "e.csv", ""), "is empty (0 bytes)"),
    ("a csv header only", lambda t: _file(t, "h.csv", "query,relevance,score\n"), "has columns but no rows"),
    ("a parquet of garbage", lambda t: _file(t, "g.parquet", b"\x00garbage"), "starts with the bytes PAR1"),
    ("a fifo", lambda t: os.mkfifo(t / "f.csv") or t / "f.csv", "named pipe"),
    ("/dev/null", lambda t: "/dev/null", "character device"),
    ("a json file", lambda t: _file(t, "x.json", "{}"), "unknown file type '.json'"),
    ("a latin-1 csv", lambda t: _file(t, "l.csv", b"query,relevance,score\n\xe9,1,0.5\n\xe9,0,0.4\n"), "binary data"),
    ("a semicolon csv", lambda t: _file(t, "s.csv", "query;relevance;score\n1;1;0.5\n"), "'query;relevance;score'"),
    ("a csv with a name twice", lambda t: _file(t, "d.csv", "query,relevance,score,score\n1,1,0.5,0.1\n"),
     "2 columns named 'score'"),
    ("a csv with a decimal comma", lambda t: _file(t, "c.csv", 'query,relevance,score\n1,1,"0,5"\n'), "'0,5'"),
    ("a csv with an empty score", lambda t: _file(t, "n.csv", "query,relevance,score\n1,1,\n1,0,0.4\n"),
     "non-finite scores"),
    ("a csv with a ragged row", lambda t: _file(t, "r.csv", "query,relevance,score\n1,1,0.5,9\n"), "Expected 3 columns"),
    ("a TREC run without --qrels", lambda t: _file(t, "x.txt", "q1 Q0 d1 1 0.5 r\n"), "pass --qrels"),
]


@pytest.mark.parametrize("make,fragment", [c[1:] for c in CLI_FILES_REFUSED], ids=[c[0] for c in CLI_FILES_REFUSED])
def test_cli_files_refused(tmp_path, capsys, make, fragment):
    code, out, err = _run(["evaluate", make(tmp_path), "-m", "P@1"], capsys)
    _one_error_line(code, err, fragment)


def _folder(tmp_path, *frames):
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, frame in enumerate(frames):
        pd.DataFrame(frame).to_parquet(folder / f"{i}.parquet")
    return folder


PART = {"query": [1, 1], "relevance": [1, 0], "score": [0.5, 0.4]}
FOLDERS = [
    ("grades int then float", {"query": [2, 2], "relevance": [1.7, 0.0], "score": [0.5, 0.4]}, "1.700000 was truncated"),
    ("grades int then text", {"query": [2, 2], "relevance": ["yes", "no"], "score": [0.5, 0.4]}, "'no'"),
    ("query ids int then text", {"query": ["a", "a"], "relevance": [1, 0], "score": [0.5, 0.4]}, "'a'"),
    ("scores as text", {"query": [2, 2], "relevance": [1, 0], "score": ["x", "y"]}, "'y'"),
    ("a file without the score column", {"query": [2, 2], "relevance": [1, 0]}, "2 non-finite scores"),
]


@pytest.mark.parametrize("chunk", [None, "1", "100"], ids=["whole", "streamed by 1 row", "streamed by 100 rows"])
@pytest.mark.parametrize("second,fragment", [c[1:] for c in FOLDERS], ids=[c[0] for c in FOLDERS])
def test_cli_parquet_folder_with_files_of_other_types(tmp_path, capsys, second, fragment, chunk):
    # fixed: streamed, an ArrowInvalid traceback ("Schema at index 1 was different")
    folder = _folder(tmp_path, PART, second)
    code, _, err = _run(["evaluate", folder, "-m", "P@1", *(["--chunk-rows", chunk] if chunk else [])], capsys)
    _one_error_line(code, err, fragment)


@pytest.mark.parametrize("chunk", [None, "1"], ids=["whole", "streamed"])
def test_cli_parquet_folder_read_in_the_folders_types(tmp_path, capsys, chunk):
    # the second file's grades are the text "0" and "1": cast to the first file's integers, read whole or
    # streamed alike; query 3's top candidate (.5) has grade "0": P@1 = (1 + 0) / 2
    folder = _folder(tmp_path, PART, {"query": [3, 3], "relevance": ["0", "1"], "score": [0.5, 0.4]})
    code, out, err = _run(["evaluate", folder, "-m", "P@1", "--format", "csv", *(["--chunk-rows", chunk] if chunk
                                                                             else [])], capsys)
    assert code == 0 and out == "model,P@1\nscore,0.5\n", err


def test_cli_trec_files(tmp_path, capsys):
    run = _file(tmp_path, "a.run", "q1 Q0 d1 1 0.9 A\r\nq1 Q0 d2 2 0.8 A\r\nq2 Q0 d1 1 0.5 A\r\nq2 Q0 d3 2 0.4 A\r\n")
    qrels = _file(tmp_path, "q.txt.gz", gzip.compress(b"q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq3 0 d9 1\n"))
    # P@1: q1 d1 relevant -> 1, q2 d1 unjudged -> 0; -c adds q3 (absent from the run) at 0: 1/3
    code, out, err = _run(["evaluate", "--run", run, "--qrels", qrels, "-m", "P@1", "--format", "csv",
                           "--conventions", "trec_eval", "--missing-queries", "zero"], capsys)
    assert code == 0 and out == "model,P@1\nA,0.3333333333333333\n", err
    code, _, err = _run(["evaluate", "--run", qrels, "--qrels", run], capsys)
    _one_error_line(code, err, "the run and the judgments may be swapped")
    code, _, err = _run(["evaluate", "--run", _file(tmp_path, "bad.run.gz", b"\x1f\x8bxx"), "--qrels", qrels], capsys)
    _one_error_line(code, err, "Cannot read")


# ---------------------------------------------------------------------------------------------
# command-line formats, and standard output that cannot be written


class _FullStdout(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    def fileno(self):
        raise io.UnsupportedOperation("fileno")


COMMANDS = [
    ["evaluate", "{log}", "--score", "a", "--score", "b", "-m", "recall@1", "--per-query", "--item", "item"],
    ["evaluate", "{log}", "--score", "a", "-m", "recall@1", "--ci", "--item", "item"],
    ["compare", "{log}", "--baseline", "a", "--score", "b", "-m", "recall@1", "--resamples", "100"],
    ["diff", "{log}", "--baseline", "a", "--score", "b", "-m", "recall@1", "--item", "item"],
    ["diff", "{log}", "--baseline", "a", "--score", "b", "-m", "recall@1", "--item", "item", "--show", "2"],
    ["demo", "--queries", "20"],
]


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:1] + c[-2:]) for c in COMMANDS])
def test_cli_formats_and_a_full_stdout(capsys, monkeypatch, log_file, command, fmt):
    argv = [a.replace("{log}", str(log_file)) for a in command] + ["--format", fmt]
    code, out, err = _run(argv, capsys)
    assert code == 0 and out and "error" not in err, err
    if fmt == "json":
        json.loads(out)
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    code, _, err = _run(argv, capsys)
    _one_error_line(code, err, "cannot write to standard output: No space left on device")


# ---------------------------------------------------------------------------------------------
# segments and weights: numbers worked out by hand

#: P@1 per query, s: q1 1, q2 0, q3 1 (a tie of two relevant), q4 1/2 (a tie of a and b, b relevant);
#: t: q1 0, q2 1, q3 1, q4 0. Weights w = 1, 3, 0, 2; segments m = {q1, q3}, d = {q2, q4}.
SW = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3, 4, 4, 4], "item": list("ababababc"),
                   "relevance": [1, 0, 0, 1, 1, 1, 0, 1, 0], "s": [.9, .1, .9, .1, .5, .5, .2, .2, 0.],
                   "t": [.1, .9, .1, .9, .5, .4, .3, .2, 0.], "dev": ["m"] * 6 + ["d"] * 3,
                   "w": [1., 1., 3., 3., 0., 0., 2., 2., 2.]})
SW.loc[2:3, "dev"] = "d"


def _sw(**options):
    return tk.evaluate(SW, metrics=["P@1"], score=["s", "t"], item="item", **options)


def test_weighted_means():
    # s: (1 * 1 + 3 * 0 + 0 * 1 + 2 * 0.5) / 6 = 1/3; t: (0 + 3 * 1 + 0 + 0) / 6 = 1/2
    assert _sw(weight="w").summary["P@1"].tolist() == pytest.approx([1 / 3, 1 / 2], abs=1e-15)


@pytest.mark.parametrize("scale", [1.0, 1e300, 2**-1060, 3.0])
def test_weights_rescaled_give_the_same_means(scale):
    frame = SW.assign(w=SW["w"] * scale)
    res = tk.evaluate(frame, metrics=["P@1"], score=["s", "t"], item="item", weight="w")
    assert res.summary["P@1"].tolist() == pytest.approx([1 / 3, 1 / 2], abs=1e-15)
    assert res.compare(baseline="s", n_resamples=100)["delta"].iloc[0] == pytest.approx(1 / 6, abs=1e-15)


def test_weighted_segments():
    seg = _sw(by="dev", weight="w").segments
    # m: q1 (w 1) and q3 (w 0): s 1, t 0, one query counted; d: q2 (3), q4 (2): s (0 + 1) / 5, t 3 / 5
    assert seg.loc[("m", "s"), "P@1"] == 1.0 and seg.loc[("m", "t"), "P@1"] == 0.0
    assert seg.loc[("d", "s"), "P@1"] == pytest.approx(0.2) and seg.loc[("d", "t"), "P@1"] == pytest.approx(0.6)
    assert seg.loc[("m", "s"), "queries"] == 1 and seg.loc[("d", "s"), "queries"] == 2
    assert seg.loc[("(all)", "s"), "weight"] == 6.0


def test_unweighted_segment_means_equal_the_segments_evaluated_alone():
    seg = _sw(by="dev").segments
    for name in ("m", "d"):
        alone = tk.evaluate(SW[SW["dev"] == name], metrics=["P@1"], score=["s", "t"], item="item").summary
        assert seg.loc[name, "P@1"].tolist() == alone["P@1"].tolist()


def test_weighted_comparison_leaves_zero_weights_out():
    row = _sw(weight="w").compare(baseline="s", n_resamples=100).iloc[0]
    # d = t - s: -1 (w 1), +1 (w 3), 0 (w 0, left out), -1/2 (w 2): (-1 + 3 - 1) / 6
    assert row["delta"] == pytest.approx(1 / 6, abs=1e-15)
    assert (row["n_queries"], row["wins"], row["ties"], row["losses"]) == (3, 1, 0, 2)
    ci = _sw(weight="w").summary_ci(n_resamples=100)
    assert ci["n_queries"].tolist() == [3, 3] and ci["mean"].tolist() == pytest.approx([1 / 3, 1 / 2])


def test_weights_and_segments_with_judgments_apart_and_depth():
    run = SW.drop(columns="relevance")
    qrels = SW[SW["relevance"] > 0][["query", "item", "relevance"]]
    qrels = pd.concat([qrels, pd.DataFrame({"query": [1], "item": ["z"], "relevance": [1]})])  # q1: R = 2
    res = tk.evaluate(run, metrics=["recall@1"], score=["s", "t"], item="item", qrels=qrels, by="dev", weight="w",
                      depth=1, ties="first")
    # depth 1, ties by row order: s keeps a, a, a, a; t keeps b, b, a, a.
    # recall@1 s: q1 1/2 (R = 2), q2 0, q3 1/2 (R = 2), q4 0; t: q1 0, q2 1, q3 1/2, q4 0
    seg = res.segments
    assert seg.loc[("m", "s"), "recall@1"] == 0.5 and seg.loc[("d", "t"), "recall@1"] == pytest.approx(3 / 5)
    assert res.summary["recall@1"].tolist() == pytest.approx([0.5 / 6, 3 / 6])


def _random_weighted_log(seed=3):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(30):
        n, w, seg = int(rng.integers(1, 6)), int(rng.integers(0, 4)), str(rng.choice(["x", "y", "z"]))
        rows += [(q, f"i{i}", int(rng.random() < 0.3), float(rng.integers(0, 3)), float(rng.integers(0, 3)), seg, w)
                 for i in range(n)]
    return pd.DataFrame(rows, columns=["query", "item", "relevance", "a", "b", "seg", "w"])


WEIGHTED_SETTINGS = [{}, {"undefined": "nan"}, {"empty_queries": "keep"}, {"conventions": "trec_eval"},
                     {"ties": "pessimistic", "empty_queries": "keep", "undefined": "nan"}]


@pytest.mark.parametrize("settings", WEIGHTED_SETTINGS, ids=[str(s) for s in WEIGHTED_SETTINGS])
def test_weighted_segments_equal_repeating_each_query_weight_times(settings):
    log = _random_weighted_log()
    metrics = ["P@2", "recall@3", "ndcg@3", "specificity@2", "ap"]
    res = tk.evaluate(log, metrics=metrics, score=["a", "b"], item="item", by="seg", weight="w", **settings)
    repeated = pd.concat([part.assign(query=f"{q}_{r}") for q, part in log.groupby("query")
                          for r in range(int(part["w"].iloc[0]))])  # weight 0: not there at all
    seg = res.segments
    for name in ("x", "y", "z", "(all)"):
        rows = repeated if name == "(all)" else repeated[repeated["seg"] == name]
        ref = tk.evaluate(rows, metrics=metrics, score=["a", "b"], item="item", **settings)
        for model in ("a", "b"):
            np.testing.assert_allclose(seg.loc[(name, model), metrics].to_numpy(float),
                                       ref.summary.loc[model, metrics].to_numpy(float), atol=1e-12, err_msg=name)
        if name == "(all)":
            np.testing.assert_allclose(res.summary[metrics].to_numpy(float), ref.summary[metrics].to_numpy(float),
                                       atol=1e-12)
            ours = res.compare(baseline="a", n_resamples=100).set_index(["seg", "metric"]).loc["(all)", "delta"]
            theirs = ref.compare(baseline="a", n_resamples=100).set_index("metric")["delta"]
            np.testing.assert_allclose(ours.to_numpy(float), theirs.loc[ours.index].to_numpy(float), atol=1e-12)


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_plot_and_report_of_weighted_deltas_count_as_compare(tmp_path):
    # fixed: q3 (weight 0) was counted "equal"; compare leaves it out: t better on q2, worse on q1 and q4
    res = _sw(weight="w")
    assert _legend(res.plot_deltas("P@1", baseline="s")) == ["t worse: 2", "t better: 1", "weighted mean +0.1667",
                                                             "equal: 0"]
    page = _read(res.report(tmp_path / "w.html", baseline="s", **FAST))
    assert "1 query better, 0 equal, 2 worse on P@1." in page


def test_plot_and_report_of_huge_weights(tmp_path):
    # fixed: sum(w) overflowed: a RuntimeWarning and "weighted mean +nan"; equal weights: the plain mean of
    # the deltas -1, +1, 0, -1/2
    res = tk.evaluate(SW.assign(w=1e308), metrics=["P@1"], score=["s", "t"], item="item", weight="w")
    assert "weighted mean -0.1250" in _legend(res.plot_deltas("P@1", baseline="s"))
    assert "<svg" in _read(res.report(tmp_path / "h.html", baseline="s", **FAST))  # warnings are errors here


def test_deltas_within_the_tie_tolerance_are_ties():  # fixed: the plot counted float noise as wins and losses
    from topkeval.outputs.plots import counted_deltas

    d = pd.DataFrame({"query": [0, 1, 2, 3], "delta": [1e-17, -1e-13, 0.5, np.nan]})
    delta, w = counted_deltas(PAIRED, d)
    assert delta.tolist() == [0.0, 0.0, 0.5] and w.tolist() == [1.0, 1.0, 1.0]


SEGMENTS_REFUSED = [
    ("a missing segment", lambda: tk.evaluate(SW.assign(dev=[None] * 9), metrics=["P@1"], score="s", by="dev"),
     DataError, "missing"),
    ("a NaN segment", lambda: tk.evaluate(SW.assign(dev=np.nan), metrics=["P@1"], score="s", by="dev"), DataError,
     "missing values"),
    ("a list as a segment", lambda: tk.evaluate(SW.assign(dev=[[1]] * 9), metrics=["P@1"], score="s", by="dev"),
     ColumnError, "not a list"),
    ("'(all)' as a segment", lambda: tk.evaluate(SW.assign(dev="(all)"), metrics=["P@1"], score="s", by="dev"),
     DataError, "'(all)'"),
    ("a segment named like a metric", lambda: tk.evaluate(SW.assign(**{"P@1": "x"}), metrics=["P@1"], score="s",
                                                           by="P@1"), ParameterError, "cannot be called ['P@1']"),
    ("a segment named ci_low", lambda: tk.evaluate(SW.assign(ci_low="x"), metrics=["P@1"], score="s", by="ci_low"),
     ParameterError, "ci_low"),
    ("a segment that varies in a query", lambda: tk.evaluate(SW.assign(dev=list("abcdefghi")), metrics=["P@1"],
                                                              score="s", by="dev"), DataError, "query-level"),
    ("bool weights", lambda: tk.evaluate(SW.assign(w=True), metrics=["P@1"], score="s", weight="w"), DataError,
     "holds bool"),
    ("a negative weight", lambda: tk.evaluate(SW.assign(w=-1.0), metrics=["P@1"], score="s", weight="w"), DataError,
     ">= 0"),
    ("all weights 0", lambda: tk.evaluate(SW.assign(w=0.0), metrics=["P@1"], score="s", weight="w"), DataError,
     "Every query weight"),
    ("a weight NA", lambda: tk.evaluate(SW.assign(w=pd.array([1] * 6 + [None] * 3, dtype="Int64")), metrics=["P@1"],
                                        score="s", weight="w"), DataError, ">= 0; query 4 has nan"),
    ("by and weight one column", lambda: tk.evaluate(SW, metrics=["P@1"], score="s", by="w", weight="w"),
     ParameterError, "both a segment"),
    ("t-test with weights", lambda: _sw(weight="w").compare(baseline="s", test="t"), ParameterError,
     "no weighted form"),
]


@pytest.mark.parametrize("call,error,fragment", [c[1:] for c in SEGMENTS_REFUSED], ids=[c[0] for c in SEGMENTS_REFUSED])
def test_segments_and_weights_refused(call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call()


# ---------------------------------------------------------------------------------------------
# score matrices: every container gives the numbers of the long format

SCORES = np.array([[0.9, 0.1, 0.5, 0.5], [0.2, 0.8, 0.4, 0.4], [0.3, 0.3, 0.3, 0.3]])
TRUTH = np.array([[1, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]])
MATRIX_METRICS = ["recall@2", "ndcg@2", "P@1", "ap", "rr"]


def _long(scores, truth):
    users, items = np.nonzero(np.ones(scores.shape, bool))
    return pd.DataFrame({"query": users, "item": items, "relevance": truth[users, items], "score": scores[users, items]})


with warnings.catch_warnings():  # at import, outside the per-file list of expected warnings
    warnings.simplefilter("ignore", tk.TopkevalWarning)  # every user has 4 candidates: by design
    LONG = tk.evaluate(_long(SCORES, TRUTH), metrics=MATRIX_METRICS, item="item").summary.iloc[0].tolist()


def _torch():
    return pytest.importorskip("torch")


RELEVANT_FORMS = [
    ("numpy", lambda: TRUTH), ("bool", lambda: TRUTH.astype(bool)), ("nested lists", lambda: TRUTH.tolist()),
    ("csr_matrix", lambda: sp.csr_matrix(TRUTH)), ("csr_array", lambda: sp.csr_array(TRUTH)),
    ("coo", lambda: sp.coo_matrix(TRUTH)), ("csc", lambda: sp.csc_matrix(TRUTH)), ("dok", lambda: sp.dok_matrix(TRUTH)),
    ("lil", lambda: sp.lil_matrix(TRUTH)), ("bsr", lambda: sp.bsr_matrix(TRUTH)), ("dia", lambda: sp.dia_matrix(TRUTH)),
    ("csr with explicit zeros", lambda: sp.csr_matrix((np.array([1, 0, 1, 1, 1.]), (np.array([0, 0, 0, 1, 2]),
                                                                                     np.array([0, 1, 2, 0, 3]))),
                                                       shape=TRUTH.shape)),
    ("edge list", lambda: (np.array([0, 0, 1, 2]), np.array([0, 2, 0, 3]))),
    ("edge list with grades", lambda: (np.array([0, 0, 1, 2]), np.array([0, 2, 0, 3]), np.ones(4))),
    ("edge list listing an edge twice", lambda: (np.array([0, 0, 0, 1, 2]), np.array([0, 2, 2, 0, 3]))),
    ("torch", lambda: _torch().tensor(TRUTH)), ("torch sparse coo", lambda: _torch().tensor(TRUTH).to_sparse()),
    ("torch edge list", lambda: (_torch().tensor([0, 0, 1, 2]), _torch().tensor([0, 2, 0, 3]))),
]


@pytest.mark.parametrize("make", [c[1] for c in RELEVANT_FORMS], ids=[c[0] for c in RELEVANT_FORMS])
def test_matrix_relevance_forms(make):
    assert tk.evaluate_matrix(SCORES, make(), metrics=MATRIX_METRICS).summary.iloc[0].tolist() == LONG


SCORE_FORMS = [
    ("float16", lambda: SCORES.astype(np.float16), "float16 keeps the order and ties of these values"),
    ("fortran order", lambda: np.asfortranarray(SCORES), ""),
    ("read-only", lambda: np.frombuffer(SCORES.tobytes()).reshape(SCORES.shape), ""),
    ("torch", lambda: _torch().tensor(SCORES), ""), ("torch bfloat16", lambda: _torch().tensor(SCORES).bfloat16(), ""),
    ("torch with grad", lambda: _torch().tensor(SCORES, requires_grad=True), ""),
]


@pytest.mark.parametrize("make,_", [c[1:] for c in SCORE_FORMS], ids=[c[0] for c in SCORE_FORMS])
def test_matrix_score_forms(make, _):
    assert tk.evaluate_matrix(make(), TRUTH, metrics=MATRIX_METRICS).summary.iloc[0].tolist() == LONG


def test_matrix_batches_and_evaluator_equal_one_call():
    for batch_size in (1, 2, 10**12):
        assert tk.evaluate_matrix(SCORES, TRUTH, metrics=MATRIX_METRICS, batch_size=batch_size).summary.iloc[0].tolist() \
            == LONG
    for users in (None, ["u0", "u1", "u2"]):
        ev = tk.MatrixEvaluator(MATRIX_METRICS)
        ev.update(SCORES[:0], TRUTH[:0], users=None if users is None else [])  # an empty batch
        for i in range(3):
            ev.update(SCORES[i:i + 1], TRUTH[i:i + 1], users=None if users is None else users[i:i + 1])
        assert ev.compute().summary.iloc[0].tolist() == LONG


def test_matrix_excluded_cells_and_users():
    bad = SCORES.copy()
    bad[1, 1] = np.nan  # an excluded cell (not relevant) may hold anything: never a candidate
    out = tk.evaluate_matrix(bad, TRUTH, metrics=["P@1", "recall@2"], exclude=np.isnan(bad)).summary.iloc[0].tolist()
    users, items = np.nonzero(~np.isnan(bad))
    long = pd.DataFrame({"query": users, "item": items, "relevance": TRUTH[users, items], "score": bad[users, items]})
    assert out == tk.evaluate(long, metrics=["P@1", "recall@2"], item="item").summary.iloc[0].tolist()
    truth = TRUTH * np.array([[1], [1], [0]])
    every = np.zeros_like(TRUTH)
    every[2] = 1  # user 2 has no candidate: no row in the long format, so not counted under keep either
    res = tk.evaluate_matrix(SCORES, truth, metrics=["P@1"], exclude=every, empty_queries="keep")
    # user 0: .9 relevant; user 1: .8 not
    assert res.info["queries"] == 2 and res.info["evaluated"] == 2 and res.summary.iloc[0, 0] == 0.5


_RNG = np.random.default_rng(0)
TIED = _RNG.integers(0, 3, (6, 12)).astype(float)  # three score levels: ties everywhere
TIED_TRUTH = (_RNG.random((6, 12)) < 0.3).astype(int)
TIED_EXCLUDE = (_RNG.random((6, 12)) < 0.2) & (TIED_TRUTH == 0)
TIED_METRICS = ["P@3", "recall@5", "ndcg@4", "ap", "rr", "r_precision", "hit_rate@2", "auc", "bpref"]
SETTINGS = [{"ties": "item_desc"}, {"ties": "item_asc"}, {"ties": "item_desc", "item_order": "text"},
            {"ties": "first"}, {"ties": "optimistic"}, {"ties": "pessimistic"}, {"ties": "expected"}] + [
    {"conventions": name} for name in ("trec_eval", "ranx", "lenskit", "evidently", "torchmetrics", "sklearn")]


@pytest.mark.parametrize("excluded", [False, True], ids=["all cells", "some excluded"])
@pytest.mark.parametrize("settings", SETTINGS, ids=[",".join(map(str, s.values())) for s in SETTINGS])
def test_matrix_equals_the_long_format_under_every_tie_rule_and_preset(settings, excluded):
    keep = ~TIED_EXCLUDE if excluded else np.ones(TIED.shape, bool)
    users, items = np.nonzero(keep)
    long = pd.DataFrame({"query": users, "item": items, "relevance": TIED_TRUTH[users, items],
                         "score": TIED[users, items]})
    ours = tk.evaluate_matrix(TIED, TIED_TRUTH, metrics=TIED_METRICS, exclude=TIED_EXCLUDE if excluded else None,
                              **settings).summary.iloc[0].to_numpy()
    expected = tk.evaluate(long, metrics=TIED_METRICS, item="item", **settings).summary.iloc[0].to_numpy()
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)


MATRIX_REFUSED = [
    ("masked scores", lambda: tk.evaluate_matrix(np.ma.masked_array(SCORES, mask=SCORES > 0.85), TRUTH, ["P@1"]),
     "scores is a masked array with 1 masked cells"),  # fixed: the hidden 0.9 was read
    ("masked relevance", lambda: tk.evaluate_matrix(SCORES, np.ma.masked_array(TRUTH, mask=TRUTH > 0), ["P@1"]),
     "relevant is a masked array with 4 masked cells"),  # fixed: the hidden grades were read
    ("masked exclude", lambda: tk.evaluate_matrix(SCORES, TRUTH, ["P@1"], exclude=np.ma.masked_array(
        TRUTH, mask=TRUTH > 0)), "exclude is a masked array"),  # fixed
    ("masked edge list", lambda: tk.evaluate_matrix(SCORES, (np.ma.masked_array([0, 1], mask=[0, 1]), np.array([0, 0])),
                                                    ["P@1"]), "masked array"),  # fixed
    ("masked scores in an update", lambda: tk.MatrixEvaluator(["P@1"]).update(
        np.ma.masked_array(SCORES, mask=SCORES > 0.85), TRUTH), "masked array"),  # fixed
    ("NaN scores not excluded", lambda: tk.evaluate_matrix(np.where(SCORES > 0.85, np.nan, SCORES), TRUTH, ["P@1"]),
     "NaN at user 0, item 0"),
    ("complex scores", lambda: tk.evaluate_matrix(SCORES.astype(complex), TRUTH, ["P@1"]), "real numbers"),
    ("text scores", lambda: tk.evaluate_matrix(SCORES.astype(str), TRUTH, ["P@1"]), "real numbers"),
    ("a relevance of another shape", lambda: tk.evaluate_matrix(SCORES, TRUTH.T, ["P@1"]), "has shape (4, 3)"),
    ("an edge list as a list", lambda: tk.evaluate_matrix(SCORES, [np.array([0]), np.array([0])], ["P@1"]),
     "given as a tuple"),
    ("an edge list out of range", lambda: tk.evaluate_matrix(SCORES, (np.array([0, 5]), np.array([0, 1])), ["P@1"]),
     "must lie in [0, 3)"),
    ("an edge list of floats", lambda: tk.evaluate_matrix(SCORES, (np.array([0.]), np.array([0.])), ["P@1"]),
     "must be integers"),
    ("repeated cells with grades", lambda: tk.evaluate_matrix(SCORES, (np.array([0, 0]), np.array([0, 0]),
                                                                        np.array([1, 3])), ["P@1"]), "more than once"),
    ("NaN grades", lambda: tk.evaluate_matrix(SCORES, np.where(TRUTH > 0, np.nan, 0), ["P@1"]), "NaN or infinite"),
    ("scores beyond 2**53", lambda: tk.evaluate_matrix(np.array([[2**53 + 1, 2**53]]), np.array([[0, 1]]), ["P@1"]),
     "beyond 2**53"),
    ("an empty dict", lambda: tk.evaluate_matrix({}, TRUTH, ["P@1"]), "empty dict"),
    ("a model named ''", lambda: tk.evaluate_matrix({"": SCORES}, TRUTH, ["P@1"]), "got the key ''"),
    ("everything excluded", lambda: tk.evaluate_matrix(SCORES, TRUTH, ["P@1"], exclude=np.ones_like(TRUTH)),
     "nothing to evaluate"),
]


@pytest.mark.parametrize("call,fragment", [c[1:] for c in MATRIX_REFUSED], ids=[c[0] for c in MATRIX_REFUSED])
def test_matrix_refused(call, fragment):
    with pytest.raises(DataError, match=re.escape(fragment)):
        call()


# ---------------------------------------------------------------------------------------------
# presets against their peers, on odd but valid logs (every row judged)

PEER_LOGS = {
    "one candidate": [("q", "d", 0.5, 1)],
    "all tied, all relevant": [("q", f"d{i}", 1.0, 1) for i in range(5)],
    "20 tied, some relevant": [("q", f"d{i:02d}", 1.0, int(i % 3 == 0)) for i in range(20)],
    "40 tied, graded": [("q", f"d{i:02d}", 1.0, i % 4) for i in range(40)],
    "ids '007', '7', '10', '9'": [("q", "007", 0.5, 1), ("q", "7", 0.5, 0), ("q", "10", 0.5, 0), ("q", "9", 0.5, 1)],
    "unicode ids": [("q", "é", 0.3, 1), ("q", "z", 0.3, 0), ("q", "ä", 0.3, 0), ("q", "日", 0.3, 1)],
    "negative scores": [("q", "a", -0.5, 1), ("q", "b", -0.1, 0), ("q", "c", -0.9, 1), ("q2", "a", 0.0, 1),
                        ("q2", "b", -1.0, 0)],
    "relevant last of 10": [("q", f"d{i}", 10.0 - i, int(i == 9)) for i in range(10)],
    "a query without a relevant item": [("q1", "a", 1.0, 1), ("q1", "b", 0.5, 0), ("q1", "c", 0.4, 2),
                                        ("q2", "a", 1.0, 0), ("q2", "b", 0.2, 0)],
}


def _frame(rows):
    return pd.DataFrame(rows, columns=["query", "item", "score", "grade"])


TREC_NAMES = {"P@1": "P_1", "P@3": "P_3", "P@100": "P_100", "recall@3": "recall_3", "recall@100": "recall_100",
              "ndcg@3": "ndcg_cut_3", "ndcg@100": "ndcg_cut_100", "ap": "map", "rr": "recip_rank", "Rprec": "Rprec",
              "success@1": "success_1", "bpref": "bpref", "ndcg": "ndcg", "ap@3": "map_cut_3", "set_P": "set_P",
              "set_recall": "set_recall", "num_rel_ret": "num_rel_ret", "iprec(recall=0.5)": "iprec_at_recall_0.50"}


@pytest.mark.peers
@pytest.mark.parametrize("preset", ["trec_eval", "pytrec_eval"])
@pytest.mark.parametrize("name", list(PEER_LOGS))
def test_trec_eval_presets_equal_pytrec_eval(name, preset):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rows = PEER_LOGS[name]
    qrel, run = {}, {}
    for q, d, s, g in rows:
        qrel.setdefault(q, {})[d] = g
        run.setdefault(q, {})[d] = s
    ref = pytrec_eval.RelevanceEvaluator(qrel, {"P.1,3,100", "recall.3,100", "ndcg_cut.3,100", "map", "recip_rank",
                                                "Rprec", "success.1", "bpref", "ndcg", "map_cut.3", "set_P",
                                                "set_recall", "num_rel_ret", "iprec_at_recall"}).evaluate(run)
    res = tk.evaluate(_frame(rows), metrics=list(TREC_NAMES), relevance="grade", item="item", conventions=preset)
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted(ref)
    for q, values in ref.items():
        for ours, theirs in TREC_NAMES.items():
            assert pq.loc[q, ours] == pytest.approx(values[theirs], abs=1e-12), (q, ours)


RANX_NAMES = {"precision@3": "precision@3", "recall@3": "recall@3", "f1@3": "f1@3", "r_precision": "r-precision",
              "rr@3": "mrr@3", "ap@3": "map@3", "ndcg@3": "ndcg@3", "ndcg(gain=exp)@3": "ndcg_burges@3",
              "hit_rate@1": "hit_rate@1", "precision@100": "precision@100", "ap": "map", "rr": "mrr"}


@pytest.mark.peers
@pytest.mark.parametrize("name", list(PEER_LOGS))
def test_ranx_preset_equals_ranx(name):
    ranx = pytest.importorskip("ranx")
    rows = PEER_LOGS[name]
    qrels, run = {}, {}
    for q, d, s, g in rows:
        qrels.setdefault(q, {})[d] = g
        run.setdefault(q, {})[d] = s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's and ranx's own warnings
        ref = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), list(RANX_NAMES.values()), return_mean=False)
    res = tk.evaluate(_frame(rows), metrics=list(RANX_NAMES), relevance="grade", item="item", conventions="ranx")
    pq = res.per_query.set_index("query")
    for j, q in enumerate(sorted(run)):  # ranx orders its queries by id
        for ours, theirs in RANX_NAMES.items():
            assert pq.loc[q, ours] == pytest.approx(float(np.atleast_1d(ref[theirs])[j]), abs=1e-12), (q, ours)


@pytest.mark.peers
@pytest.mark.parametrize("name", list(PEER_LOGS))
def test_gain_maps_and_judged_equal_ir_measures(name):
    ir_measures = pytest.importorskip("ir_measures")
    rows = PEER_LOGS[name]
    qrels = [ir_measures.Qrel(q, d, int(g)) for q, d, _, g in rows]
    run = [ir_measures.ScoredDoc(q, d, float(s)) for q, d, s, _ in rows]
    frame = _frame(rows)
    cases = [(ir_measures.nDCG(gains={0: 1, 1: 4, 2: 9, 3: 16}) @ 3, "ndcg(gain={0:1,1:4,2:9,3:16})@3",
              {"conventions": "trec_eval"}),
             (ir_measures.Judged @ 3, "judged@3",  # ir_measures divides by min(k, n): shrink
              {"ties": "item_asc", "item_order": "text", "short_lists": "shrink", "empty_queries": "keep"})]
    for measure, ours, settings in cases:
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
        pq = tk.evaluate(frame, metrics=[ours], relevance="grade", item="item", **settings).per_query
        assert dict(zip(pq["query"], pq[ours])) == pytest.approx(theirs, abs=1e-12), (measure, name)


UNTIED = ["one candidate", "negative scores", "relevant last of 10", "a query without a relevant item"]


@pytest.mark.peers
@pytest.mark.parametrize("name", UNTIED)
def test_torchmetrics_preset_equals_torchmetrics(name):
    torch = _torch()
    R = pytest.importorskip("torchmetrics.functional.retrieval")
    frame = _frame(PEER_LOGS[name])
    binary = frame.assign(rel=(frame["grade"] > 0).astype(int))
    res = tk.evaluate(binary, metrics=["P@3", "P@100", "recall@3", "r_precision", "hit_rate@1", "rr@3", "rr", "ap"],
                      relevance="rel", conventions="torchmetrics", empty_queries="keep")
    graded = tk.evaluate(frame, metrics=["ndcg@3", "ndcg"], relevance="grade", conventions="torchmetrics",
                         empty_queries="keep")
    pq, gq = res.per_query.set_index("query"), graded.per_query.set_index("query")
    for q, part in frame.groupby("query"):
        p = torch.tensor(part["score"].to_numpy())
        t = torch.tensor((part["grade"] > 0).astype(int).to_numpy())
        g = torch.tensor(part["grade"].to_numpy())
        theirs = {"P@3": R.retrieval_precision(p, t, top_k=3), "P@100": R.retrieval_precision(p, t, top_k=100),
                  "recall@3": R.retrieval_recall(p, t, top_k=3), "r_precision": R.retrieval_r_precision(p, t),
                  "hit_rate@1": R.retrieval_hit_rate(p, t, top_k=1), "rr@3": R.retrieval_reciprocal_rank(p, t, top_k=3),
                  "rr": R.retrieval_reciprocal_rank(p, t), "ap": R.retrieval_average_precision(p, t)}
        for metric, value in theirs.items():
            assert pq.loc[q, metric] == pytest.approx(float(value), abs=1e-6), (q, metric)
        for metric, value in {"ndcg@3": R.retrieval_normalized_dcg(p, g, top_k=3),
                              "ndcg": R.retrieval_normalized_dcg(p, g)}.items():
            assert gq.loc[q, metric] == pytest.approx(float(value), abs=1e-6), (q, metric)


@pytest.mark.peers
@pytest.mark.parametrize("name", [n for n in PEER_LOGS if n != "one candidate"])
def test_sklearn_preset_equals_ndcg_score(name):
    from sklearn.metrics import dcg_score, ndcg_score

    frame = _frame(PEER_LOGS[name])
    res = tk.evaluate(frame, metrics=["ndcg@3", "ndcg", "dcg@3"], relevance="grade", conventions="sklearn",
                      empty_queries="keep")
    pq = res.per_query.set_index("query")
    for q, part in frame.groupby("query"):
        y, s = part["grade"].to_numpy()[None], part["score"].to_numpy()[None]
        if y.sum() == 0:
            continue  # scikit-learn's nDCG of a query without gain is 0 with a warning: its own convention
        assert pq.loc[q, "ndcg@3"] == pytest.approx(ndcg_score(y, s, k=3), abs=1e-12)
        assert pq.loc[q, "ndcg"] == pytest.approx(ndcg_score(y, s), abs=1e-12)
        assert pq.loc[q, "dcg@3"] == pytest.approx(dcg_score(y, s, k=3), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# comparisons: p-values by enumeration and scipy, and results that cannot compare

#: P@1 of a = 1, 0, 1, 1, 0, 1 and of b = 0, 0, 1, 0, 0, 0 on six queries of two candidates (c0 relevant),
#: plus a query of three candidates (no "every query has N candidates" warning) where both score 1.
_A, _B = [1, 0, 1, 1, 0, 1, 1], [0, 0, 1, 0, 0, 0, 1]
PAIRS = pd.DataFrame([(q, c, int(c == "c0"), float((c == "c0") == bool(x)), float((c == "c0") == bool(y)))
                      for q, (x, y) in enumerate(zip(_A, _B)) for c in (["c0", "c1"] if q < 6 else ["c0", "c1", "c2"])],
                     columns=["query", "item", "relevance", "a", "b"])
PAIRED = tk.evaluate(PAIRS, metrics=["P@1"], score=["a", "b"], item="item")
_D = np.array(_B, float) - np.array(_A, float)


def _enumerated_p(d) -> float:
    t = abs(d.mean())
    flips = [abs((np.array(s) * d).mean()) >= t - 1e-12 for s in itertools.product([1, -1], repeat=len(d))]
    return sum(flips) / len(flips)


@pytest.mark.parametrize("test,expected", [
    ("permutation", _enumerated_p(_D)),  # 2**7 sign vectors: exact
    ("t", stats.ttest_rel(_B, _A).pvalue),
    ("wilcoxon", stats.wilcoxon(_D).pvalue),
])
def test_compare_p_values(test, expected):
    row = PAIRED.compare(baseline="a", test=test, n_resamples=1000).iloc[0]
    assert row["p_value"] == pytest.approx(expected, abs=1e-12)
    assert row["delta"] == pytest.approx(_D.mean()) and row["relative_delta"] == pytest.approx(_D.mean() / np.mean(_A))
    assert (row["wins"], row["ties"], row["losses"]) == (0, 4, 3)
    assert row["effect_size"] == pytest.approx(_D.mean() / _D.std(ddof=1))


def test_compare_one_query_and_identical_models():
    one = tk.evaluate(PAIRS[PAIRS["query"] == 0], metrics=["P@1"], score=["a", "b"])
    row = one.compare(baseline="a", n_resamples=100).iloc[0]
    # one query: no spread to resample, so no interval (it was [-1, -1], which read as certainty)
    assert row["delta"] == -1 and math.isnan(row["ci_low"]) and math.isnan(row["ci_high"]) and math.isnan(row["p_value"])
    same = tk.evaluate(PAIRS.assign(b=PAIRS["a"]), metrics=["P@1"], score=["a", "b"])
    for test in ("permutation", "t", "wilcoxon", "bootstrap"):
        row = same.compare(baseline="a", test=test, n_resamples=100).iloc[0]
        assert (row["delta"], row["p_value"], row["verdict"]) == (0.0, 1.0, "no detectable difference")


def test_compare_a_metric_undefined_everywhere():
    res = tk.evaluate(PAIRS.assign(relevance=1), metrics=["specificity@1"], score=["a", "b"], undefined="nan")
    row = res.compare(baseline="a", n_resamples=100).iloc[0]
    assert row["n_queries"] == 0 and math.isnan(row["delta"]) and math.isnan(row["p_value"])
    assert row["verdict"] == "no query to compare"  # fixed: "no detectable difference" about nothing
    assert res.summary_ci(n_resamples=100)["n_queries"].tolist() == [0, 0]


def test_compare_models_that_share_no_query():  # fixed: "no detectable difference" about nothing
    run = {"query": [1, 1, 2, 2], "item": ["a", "b", "a", "b"], "score": [.9, .1, .9, .1], "m": ["A", "A", "B", "B"]}
    res = tk.evaluate(run, metrics=["P@1"], model="m", item="item",
                      qrels={"query": [1, 2], "item": ["a", "b"], "relevance": [1, 1]})
    assert res.summary["P@1"].tolist() == [1.0, 0.0]  # A ranks q1's relevant a first; B ranks q2's a, not b
    row = res.compare(baseline="A", n_resamples=100).iloc[0]
    assert (row["n_queries"], row["verdict"]) == (0, "no query to compare") and math.isnan(row["delta"])
    assert res.compare(baseline="A", missing="zero", n_resamples=100).iloc[0]["n_queries"] == 2


def _split_log():
    """b beats a on the 12 queries of segment A, a beats b on the 24 of segment B (and both find the
    relevant item of one more query of B): b is significantly better within A, worse within B, and
    not significantly different overall (P@1: a 25/37, b 13/37)."""
    rows = []
    for q in range(36):
        b_wins = q < 12
        rows += [(q, "c0", 1, float(not b_wins), float(b_wins), "A" if b_wins else "B"),
                 (q, "c1", 0, float(b_wins), float(not b_wins), "A" if b_wins else "B")]
    rows += [(99, "c0", 1, 1., 1., "B"), (99, "c1", 0, 0., 0., "B"), (99, "c2", 0, 0., 0., "B")]
    return pd.DataFrame(rows, columns=["query", "item", "relevance", "a", "b", "seg"])


def test_latex_marks_follow_the_overall_rows_with_segments():  # fixed: a segment's significance marked overall
    res = tk.evaluate(_split_log(), metrics=["P@1"], score=["a", "b"], by="seg")
    table = res.compare(baseline="a", n_resamples=1000).set_index("seg")
    assert table.loc["A", "verdict"] == "better" and table.loc["B", "verdict"] == "worse"
    assert table.loc["(all)", "verdict"] == "no detectable difference"
    assert res.summary["P@1"].tolist() == pytest.approx([25 / 37, 13 / 37])
    for text in (res.to_latex(baseline="a", n_resamples=1000), res.to_latex(n_resamples=1000)):
        assert "0.3514 \\" in text and "0.6757} \\" in text  # neither value carries a mark


@pytest.fixture(scope="module")
def means_only(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "log.parquet"
    LOG.to_parquet(path)
    return tk.evaluate(path, metrics=["recall@1"], score=["a", "b"], item="item", chunk_rows=2, keep_per_query=False)


@pytest.mark.parametrize("call,fragment", [
    (lambda r: r.compare(n_resamples=100), "compare works on the per-query values"),  # fixed: "no detectable difference"
    (lambda r: r.summary_ci(n_resamples=100), "summary_ci works on the per-query values"),  # fixed: NaN intervals
    (lambda r: r.diff("a", "b", "recall@1"), "diff works on the per-query values"),  # fixed: an empty table
    (lambda r: r.to_latex(baseline="a", n_resamples=100), "compare works on the per-query values"),  # fixed: a dagger note
    (lambda r: r.plot_deltas("recall@1"), "diff works on the per-query values"),  # fixed: an empty plot
], ids=["compare", "summary_ci", "diff", "to_latex", "plot_deltas"])
def test_results_without_per_query_values_refuse_to_compare(means_only, call, fragment):
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        call(means_only)
    # what does not need them still works: the means, the curves (the file is read again), to_latex without baseline
    assert means_only.summary["recall@1"].tolist() == pytest.approx([1 / 6, 5 / 6])
    assert means_only.curves(ks=[1])["value"].tolist() == pytest.approx([1 / 6, 5 / 6])


COMPARE_REFUSED = [
    (lambda: PAIRED.compare(baseline="a", metrics=["P@5"]), ParameterError, "'P@5' was not evaluated"),
    (lambda: PAIRED.compare(baseline="a", metrics=[]), ParameterError, "at least one"),
    (lambda: PAIRED.compare(baseline="z"), ParameterError, "z"),
    (lambda: PAIRED.compare(baseline="a", confidence=1.0), ParameterError, "confidence"),
    (lambda: PAIRED.compare(baseline="a", n_resamples=10**8), ParameterError, "n_resamples"),
    (lambda: PAIRED.compare(baseline="a", missing="drop"), ParameterError, "missing"),
    (lambda: tk.evaluate(PAIRS, metrics=["P@1"], score="a").compare(), ParameterError, "two or more models"),
    (lambda: PAIRED.summary_ci(confidence=0), ParameterError, "confidence"),
    (lambda: PAIRED.diff("a", "z", "P@1"), ParameterError, "model 'z'"),
    (lambda: PAIRED.diff("a", "b", "P@5"), ParameterError, "not evaluated"),
    (lambda: PAIRED.diff("a", "b", "P@1", items=1), ParameterError, "True or False"),
]


@pytest.mark.parametrize("call,error,fragment", COMPARE_REFUSED, ids=[str(i) for i in range(len(COMPARE_REFUSED))])
def test_compare_refused(call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call()


# ---------------------------------------------------------------------------------------------
# views: diff, side_by_side, curves, beyond_accuracy

#: Query "007": x, y, z all tied under a (x, z relevant); b ranks x (.9), y, z (.1). Query "7": a ranks x (.9,
#: not relevant) over y (relevant); b the other way round.
IDS = pd.DataFrame({"query": ["007", "007", "007", "7", "7"], "item": ["x", "y", "z", "x", "y"],
                    "relevance": [1, 0, 1, 0, 1], "a": [.5, .5, .5, .9, .1], "b": [.9, .5, .1, .1, .9]})
VIEWS = tk.evaluate(IDS, metrics=["recall@1", "ndcg@2", "rr"], score=["a", "b"], item="item")


def test_expected_values_under_ties():
    pq = VIEWS.per_query.set_index(["model", "query"])
    # a, "007": a tie of 3 with 2 relevant for 1 slot: h(1) = 2/3, recall 1/3; each relevant item at rank 1 or 2
    # with chance 1/3 each: DCG@2 = 2 (1/3 + 1/3 / log2 3), ideal 1 + 1 / log2 3: exactly 2/3;
    # rr: first relevant at rank 1 with chance 2/3, rank 2 with chance 1/3: 2/3 + 1/6
    assert pq.loc[("a", "007")].tolist() == pytest.approx([1 / 3, 2 / 3, 5 / 6], abs=1e-15)
    assert pq.loc[("a", "7")].tolist() == pytest.approx([0, 1 / math.log2(3), 1 / 2], abs=1e-15)


def test_side_by_side_keeps_ids_apart():
    view = VIEWS.side_by_side("007", k=3)
    assert view[("a", "item")].tolist() == ["x", "y", "z"] and view[("b", "item")].tolist() == ["x", "y", "z"]
    assert view[("a", "tied_ranks")].tolist() == ["1-3"] * 3
    assert VIEWS.side_by_side("7", k=10**12).shape[0] == 2  # a list shorter than k: its whole length
    assert VIEWS.side_by_side(7).equals(VIEWS.side_by_side("7"))  # matched by value, never "007"
    with pytest.raises(ParameterError, match="not among the queries"):
        VIEWS.side_by_side("07")


def test_diff_items_gained_and_lost_under_ties():
    d = VIEWS.diff("a", "b", "recall@1").set_index("query")
    # "007": a shows x or z with chance 1/3 each, b shows x: x gained, z lost; delta 1/2 - 1/3
    assert d.loc["007", "delta"] == pytest.approx(1 / 6) and d.loc["007", "gained"] == ["x"]
    assert d.loc["007", "lost"] == ["z"] and d.loc["7", "gained"] == ["y"] and d.loc["7", "lost"] == []


@pytest.mark.parametrize("ks,expected", [
    ([1], [1 / 6, 3 / 4]),  # recall@1: a (1/3 + 0) / 2; b (1/2 + 1) / 2
    (range(1, 3), [1 / 6, 3 / 4, 5 / 6, 3 / 4]),  # recall@2 a: "007" 2 (2/3) / 2 = 2/3, "7" 1: 5/6
    (np.arange(1, 2), [1 / 6, 3 / 4]),
    ([10**12], [1.0, 1.0]),
])
def test_curves(ks, expected):
    frame = VIEWS.curves(metrics=["recall"], ks=ks)
    assert frame["value"].tolist() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("ks,fragment", [([2.7], "positive ints"), ([2.0], "positive ints"),
                                         ([float("nan")], "positive ints"), ([], "non-empty"), (3, "[3]"),
                                         (list(range(1, 10_002)), "at most 10,000")])
def test_curves_refused(ks, fragment):
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        VIEWS.curves(ks=ks)


def test_beyond_accuracy_by_hand():
    out = VIEWS.beyond_accuracy(k=1)
    # a's top 1: "007" x, y or z (1/3 each), "7" x. Expected distinct items: x 1, y 1/3, z 1/3, of 3
    assert out.loc["a", "coverage@1"] == pytest.approx(5 / 9)
    # pop: "007" has x and z relevant, "7" has y: each 1/2; novelty -log2(1/2) = 1
    assert out.loc["a", "novelty@1"] == pytest.approx(1.0) and out.loc["a", "popularity@1"] == pytest.approx(0.5)
    # exposures 4/3, 1/3, 1/3: Gini (2 * 4/3 - 2 * 1/3) / (3 * 2) = 1/3
    assert out.loc["a", "gini@1"] == pytest.approx(1 / 3)
    div = VIEWS.beyond_accuracy(k=2, features={"x": [1, 0], "y": [0, 1], "z": [1e-170, 1e-170]})
    # b: "007" x, y (distance 1); "7" y, x: 1. a, "007": pairs xy, xz, yz each shown with chance 1/3:
    # (1 + 2 (1 - 1/sqrt 2)) / 3; "7": 1
    assert div.loc["b", "diversity@2"] == pytest.approx(1.0)
    assert div.loc["a", "diversity@2"] == pytest.approx(((1 + 2 * (1 - 2**-0.5)) / 3 + 1) / 2)


BEYOND_REFUSED = [
    ({"k": 2**63}, "at most"), ({"catalog": 1}, "catalog=1"), ({"catalog": ["x"]}, "not in catalog"),
    ({"catalog": "xyz"}, "pass a list"), ({"popularity": {"x": 0.0, "y": 0.5, "z": 0.1}}, "(0, 1]"),
    ({"popularity": {"y": 0.5}}, "have no popularity"), ({"features": {"x": [0, 0], "y": [0, 1], "z": [1, 1]}},
                                                          "all 0"),
    ({"features": {"x": [1], "y": [0, 1], "z": [1, 1]}}, "one length"),
    ({"similarity": lambda i, j: 2.0}, "in [-1, 1]"), ({"similarity": lambda i, j: 1 / 0}, "raised ZeroDivisionError"),
    ({"similarity": lambda i, j: True}, "finite number"),
    ({"similarity": lambda i, j: 0.5, "features": {"x": [1]}}, "not both"),
]


@pytest.mark.parametrize("options,fragment", BEYOND_REFUSED, ids=[str(i) for i in range(len(BEYOND_REFUSED))])
def test_beyond_accuracy_refused(options, fragment):
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        VIEWS.beyond_accuracy(**{"k": 2, **options})


# ---------------------------------------------------------------------------------------------
# inputs: tables and columns of every kind

BASE = {"query": [1, 1, 2, 2], "item": ["a", "b", "a", "b"], "relevance": [1, 0, 0, 1], "score": [.9, .1, .8, .2]}


def _arrow(kind):
    pa = pytest.importorskip("pyarrow")
    table = pa.table(BASE)
    if kind == "dataset":
        import pyarrow.dataset as ds

        return ds.dataset(table)
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


INPUTS = [
    ("pandas Int64 arrays in a dict", lambda: {k: pd.array(v) for k, v in BASE.items()}),  # fixed: AttributeError
    ("a pandas Categorical in a dict", lambda: {**BASE, "query": pd.Categorical(BASE["query"])}),  # fixed
    ("pandas string arrays in a dict", lambda: {**BASE, "item": pd.array(BASE["item"], dtype="string")}),  # fixed
    ("an Arrow dataset", lambda: _arrow("dataset")),  # fixed: AttributeError 'column'
    ("an Arrow record batch reader", lambda: _arrow("reader")),  # fixed: AttributeError 'column'
    ("pandas with nullable dtypes", lambda: pd.DataFrame(BASE).convert_dtypes()),
    ("polars", lambda: pytest.importorskip("polars").DataFrame(BASE)),
    ("a polars LazyFrame", lambda: pytest.importorskip("polars").DataFrame(BASE).lazy()),
]


@pytest.mark.parametrize("make", [c[1] for c in INPUTS], ids=[c[0] for c in INPUTS])
def test_inputs(make):
    # P@1: query 1 ranks a (relevant) first, query 2 ranks a (not relevant) first
    res = tk.evaluate(make(), metrics=["P@1"], item="item")
    assert res.per_query["P@1"].tolist() == [1.0, 0.0]


INPUTS_REFUSED = [
    ("an Int64 grade NA in a dict", lambda: tk.evaluate({**BASE, "relevance": pd.array([1, None, 0, 1], dtype="Int64")},
                                                        ["P@1"]), DataError, "non-finite grades"),  # fixed
    ("a pd.array with NA as one ranking", lambda: tk.recall_at_k(pd.array([1, 0, None]), [1, 2, 3], 1), DataError,
     "non-finite grades"),
    ("an Arrow scanner", lambda: tk.evaluate(_arrow("dataset").scanner(), ["P@1"]), DataError, "Got Scanner"),
    ("ids 7 and '7'", lambda: tk.evaluate({**BASE, "query": [7, 7, "7", "7"]}, ["P@1"]), ColumnError, "one kind"),
    ("a run named ''", lambda: tk.evaluate({"query": [1, 1], "item": ["a", "b"], "score": [1., 2.], "m": ["", "x"]},
                                           ["P@1"], model="m", item="item",
                                           qrels={"query": [1], "item": ["a"], "relevance": [1]}), ParameterError,
     "empty text"),  # fixed: a model no method could name
]


@pytest.mark.parametrize("call,error,fragment", [c[1:] for c in INPUTS_REFUSED], ids=[c[0] for c in INPUTS_REFUSED])
def test_inputs_refused(call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call()


@pytest.mark.parametrize("progress,fragment", [
    (lambda rows: 1 / 0, "progress(2) raised ZeroDivisionError"),  # fixed: a ZeroDivisionError traceback
    (lambda: None, "progress(2) raised TypeError"),  # fixed: a TypeError traceback
])
def test_a_progress_function_that_fails_is_named(tmp_path, progress, fragment):
    LOG.to_parquet(tmp_path / "log.parquet")
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        tk.evaluate(tmp_path / "log.parquet", metrics=["P@1"], score="a", chunk_rows=2, progress=progress)
    seen = []
    res = tk.evaluate(tmp_path / "log.parquet", metrics=["P@1"], score="a", chunk_rows=2, progress=seen.append)
    assert sum(seen) == 8 and res.summary.iloc[0, 0] == pytest.approx(1 / 3)  # a: q1 a relevant, q2 and q3 not


@pytest.mark.parametrize("reader", [tk.read_run, tk.read_qrels])
def test_a_parquet_table_given_as_a_trec_file(tmp_path, reader):  # fixed: "a table should be named .parquet"
    LOG.to_parquet(tmp_path / "log.parquet")
    with pytest.raises(InputFileError, match="it is a parquet table, not a TREC file"):
        reader(tmp_path / "log.parquet")


def test_bytes_query_ids_can_be_shown(tmp_path):  # fixed: side_by_side and report refused the ids they hold
    res = tk.evaluate({**BASE, "query": [b"q1", b"q1", b"q2", b"q2"]}, metrics=["P@1"], item="item")
    assert res.side_by_side(b"q2")[("score", "item")].tolist() == ["a", "b"]
    page = _read(res.report(tmp_path / "b.html", queries=[b"q2"], **FAST))
    assert 'query <span class="id">q2</span>' in page and 'query <span class="id">q1</span>' not in page


@pytest.mark.parametrize("ids,expected", [
    (["007", "007", "7", "7"], ["007", "7"]), (["é", "é", "e\u0301", "e\u0301"], ["é", "e\u0301"]),
    ([2**60, 2**60, 2**60 + 1, 2**60 + 1], [2**60, 2**60 + 1]), ([True, True, False, False], [True, False]),
])
def test_query_ids_stay_apart(ids, expected):
    res = tk.evaluate({**BASE, "query": ids}, metrics=["P@1"])
    assert res.per_query["query"].tolist() == expected and res.per_query["P@1"].tolist() == [1.0, 0.0]


# ---------------------------------------------------------------------------------------------
# metric names: labels as typed, found by any name

NAMES = [  # (as typed, canonical, value on PAIRS' model a under ties="first")
    ("map", "ap", None), ("MAP", "ap", None), ("P_1", "precision@1", 5 / 7), ("P.1", "precision@1", 5 / 7),
    ("ndcg_cut_2", "ndcg@2", None), ("recip_rank", "rr", None), ("Rprec", "r_precision", 5 / 7),
    ("success_1", "hit_rate@1", 5 / 7), ("hits@1", "tp@1", 5 / 7), ("P @1", "precision@1", 5 / 7),
    ("p@01", "precision@1", 5 / 7), ("auroc", "auc", None), ("11pt_avg", "iprec_avg", None),
    ("iprec_at_recall_0.50", "iprec(recall=0.5)", None), ("set_F.0.5", "set_f(beta=0.7071067811865476)", None),
    ("ndcg.1=3,2=7", "ndcg(gain={1:3,2:7})", None), ("ndcg(gain=EXP)@2", "ndcg(gain=exp)@2", None),
    ("fbeta(beta=1.0)@1", "f1@1", None), ("rbp.95", "rbp(p=0.95)", None),
]


@pytest.mark.parametrize("typed,canonical,value", NAMES, ids=[n[0] for n in NAMES])
def test_metric_labels_as_typed(typed, canonical, value):
    res = tk.evaluate(PAIRS, metrics=[typed], score="a", ties="first")
    label = typed.replace(" ", "")  # blanks removed, the rest as typed
    assert res.metrics == [label] and res.info["metric_names"] == {label: canonical}
    assert res.label(canonical) == label and res.summary.columns.tolist() == [label]
    if value is not None:
        assert res.summary.iloc[0, 0] == pytest.approx(value)


@pytest.mark.parametrize("metrics,fragment", [
    (["recall@1", "Recall@1"], "the same metric"), (["map", "ap"], "the same metric"),
    (["fbeta(beta=0.50)@2", "fbeta(beta=0.5)@2"], "the same metric"), (["P@1.0"], "positive integer"),
    (["P@１"], "positive integer"), (["P@1,recall@1"], "Did you mean"), (["model"], "no metric is called 'model'"),
    (["rbp"], "needs a parameter"), (["P@1099511627776"], "at most 1099511627775"),
])
def test_metric_names_refused(metrics, fragment):
    with pytest.raises(UnknownMetricError, match=re.escape(fragment)):
        tk.evaluate(PAIRS, metrics=metrics, score="a")


@pytest.mark.parametrize("name,fragment", [("map@1000", "was not evaluated"), (1, "metric name"), (None, "metric name")])
def test_label_refused(name, fragment):
    res = tk.evaluate(PAIRS, metrics=["map", "P@1"], score="a")
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        res.label(name)
