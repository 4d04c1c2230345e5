"""The layers the merges brought, checked where a wrong value would pass unseen: the parameter
layer's bounds and normalised values, the safe writer's temporary file, and the command line's
warning policy and one-line errors (in process, under pytest's own warning filters). The mutation
check (tests/mutation/run.py) runs these against mutations of topkeval.params, topkeval.files
and topkeval.cli."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval import params as P
from topkeval.cli import main
from topkeval.errors import TopkevalWarning

# ---------------------------------------------------------------------------------------------
# the parameter layer


def test_int_bounds_are_inclusive():
    assert P.Int(0, 15).check(0, "digits", "f") == 0 and P.Int(0, 15).check(15, "digits", "f") == 15
    assert P.Int(1).check(1, "k", "f") == 1
    with pytest.raises(tk.ParameterError, match=r"'digits' parameter of f must be an int .*15. Got 16 instead"):
        P.Int(0, 15).check(16, "digits", "f")
    with pytest.raises(tk.ParameterError, match="must be an int in .0, 15.. Got -1"):
        P.Int(0, 15).check(-1, "digits", "f")
    big = P.Int(1, 2**40)  # a bound beyond any sensible value is named only to a value beyond it
    assert big.check(2**40, "k", "f") == 2**40
    with pytest.raises(tk.ParameterError, match="must be a positive int of at most 1099511627776. Got 1099511627777"):
        big.check(2**40 + 1, "k", "f")


def test_real_bounds_are_inclusive_unless_open():
    assert P.Real(0, 1).check(0, "x", "f") == 0.0 and P.Real(0, 1).check(1, "x", "f") == 1.0
    unit = P.Real(0, 1, low_open=True, high_open=True)  # a confidence level
    assert unit.check(0.5, "confidence", "f") == 0.5
    for bad in (0, 1, 0.0, 1.0):
        with pytest.raises(tk.ParameterError, match=r"must be a number in \(0, 1\)"):
            unit.check(bad, "confidence", "f")
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(tk.ParameterError, match="must be a finite number"):
            P.Real().check(bad, "x", "f")
    assert P.Real().check(-1e308, "x", "f") == -1e308


def test_numpy_scalars_become_python_values():
    assert type(P.Int(0).check(np.int64(3), "k", "f")) is int
    assert type(P.Real().check(np.float32(0.5), "x", "f")) is float
    assert type(P.Bool().check(np.bool_(True), "b", "f")) is bool

    @P.validate_params(k=P.Int(), x=[P.Real(), None], flag=P.Bool())
    def types(k, x=None, flag=False):
        return type(k), type(x), type(flag)

    assert types(np.int64(2), np.float32(1.5), flag=np.bool_(True)) == (int, float, bool)


def test_options_are_compared_exactly_and_none_is_no_correction():
    with pytest.raises(tk.ParameterError, match="Did you mean 'holm'"):
        P.Options("holm", "bh").check("HOLM", "correction", "f")
    correction = P._constraint(P.CORRECTION)
    assert correction.check("none", "correction", "f") is None
    assert correction.check(None, "correction", "f") is None and correction.check("bh", "correction", "f") == "bh"


@pytest.mark.parametrize("constraint,value,pattern", [
    (P.Ids(), "007", r"pass a list: \['007'\]"),
    (P.Ids(), b"ab", "a list of ids"),
    (P.Ids(), {"a": 1}, "a list of ids"),
    (P.IntList(1), b"\x01\x02", "a non-empty list of positive ints"),  # bytes are numbers one by one
    (P.IntList(1), iter([1, 2]), "a non-empty list of positive ints"),  # read once by the check
    (P.IntList(1), {1: "a"}, "a non-empty list of positive ints"),
    (P.IntList(1), 5, r"pass a list: \[5\]"),
])
def test_lists_of_ids_and_of_ints_refuse_a_lone_value(constraint, value, pattern):
    with pytest.raises(tk.ParameterError, match=pattern):
        constraint.check(value, "ids", "f")


def test_lists_of_ids_and_of_ints_as_given():
    assert P.Ids().check(("a", 1), "q", "f") == ["a", 1]
    assert P.IntList(1).check(np.array([3, 1]), "ks", "f") == [3, 1]


# ---------------------------------------------------------------------------------------------
# the safe writer


def test_a_new_file_is_whole_and_leaves_no_temporary_file(tmp_path):
    from topkeval import files as write

    text = "".join(f"line {i}\n" for i in range(20_000))
    assert write.write_text(tmp_path / "new.txt", text) == os.fspath(tmp_path / "new.txt")
    assert (tmp_path / "new.txt").read_text() == text and os.listdir(tmp_path) == ["new.txt"]


# ---------------------------------------------------------------------------------------------
# the command line: its warnings policy and one-line errors, in process


@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "log.csv"
    pd.DataFrame({"q": [1, 1, 2, 2], "rel": [1, 0, 0, 1], "s": [0.9, 0.1, 0.8, 0.2]}).to_csv(path, index=False)
    return path


def _cli(argv, capsys, monkeypatch, before):
    """Run the command in process, ``before()`` running inside evaluate (a library that warns)."""
    import topkeval.api

    original = topkeval.api.evaluate

    def evaluate(*args, **kwargs):
        before()
        return original(*args, **kwargs)

    monkeypatch.setattr(topkeval.api, "evaluate", evaluate)
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _noisy():
    warnings.warn("the library\nsays hello", UserWarning, stacklevel=1)
    warnings.warn("the library will change", FutureWarning, stacklevel=1)
    warnings.warn("the library's old name", DeprecationWarning, stacklevel=1)
    warnings.warn("the library\nsays hello", UserWarning, stacklevel=1)  # the same again
    warnings.warn("use empty_queries='keep' to count it", TopkevalWarning, stacklevel=1)


def test_each_warning_is_one_line_once_in_the_command_lines_words(log_file, capsys, monkeypatch):
    code, out, err = _cli(["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "s", "-m", "P@1"],
                          capsys, monkeypatch, _noisy)
    assert code == 0 and "P@1" in out
    assert err.splitlines() == ["topkeval: warning: the library says hello (UserWarning from test_layers)",
                                "topkeval: warning: use --empty-queries keep to count it"]


def test_an_error_is_the_only_line_one_line_exit_2(log_file, capsys, monkeypatch):
    def fail():
        _noisy()
        raise tk.DataError("the data is\nbad: use empty_queries='keep'")

    code, out, err = _cli(["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "s"], capsys,
                          monkeypatch, fail)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["topkeval: error: the data is bad: use --empty-queries keep"]


# ---------------------------------------------------------------------------------------------
# column names of the results


@pytest.mark.parametrize("name", ["model", "delta", "gained", "recall@1", "ndcg@3"])
def test_a_query_column_named_like_a_result_column_is_refused(name):
    """per_query holds model and one column per metric, Results.diff baseline, model, delta, gained and
    lost: a query column of one of those names (or any metric's, which curves may add) would be
    overwritten or read as the other."""
    log = {name: [1, 1, 2, 2, 2], "relevance": [1, 0, 0, 1, 0], "a": [0.9, 0.1, 0.9, 0.1, 0.5],
           "b": [0.1, 0.9, 0.1, 0.9, 0.5]}
    with pytest.raises(tk.ParameterError, match=f"The query column is called '{name}'.*could not hold both"):
        tk.evaluate(log, ["recall@1"], query=name, score=["a", "b"])
    renamed = {("query" if k == name else k): v for k, v in log.items()}
    assert tk.evaluate(renamed, ["recall@1"], score=["a", "b"]).summary.iloc[:, 0].tolist() == [0.5, 0.5]


def test_side_by_side_frame_cells():
    """Run a retrieves x, y, z; run b retrieves y, w (x and w relevant). As text: b's empty third
    position is blank everywhere, 'not retrieved' where the other run lacks the item; as values
    (CSV, JSON) the other rank is a whole number or null."""
    from topkeval.outputs.text import json_text, records, side_by_side_frame

    run = {"query": ["q1"] * 5, "item": ["x", "y", "z", "y", "w"], "score": [3.0, 2.0, 1.0, 2.0, 1.0],
           "run": ["a", "a", "a", "b", "b"]}
    res = tk.evaluate(run, ["recall@3"], item="item", model="run",
                      qrels={"query": ["q1", "q1"], "item": ["x", "w"], "relevance": [1, 1]})
    view = res.side_by_side("q1", k=3, baseline="a", model="b")
    text = side_by_side_frame(view, text=True)
    assert text["b other rank"].tolist() == ["2", "not retrieved", ""]
    assert text["a other rank"].tolist() == ["not retrieved", "1", "not retrieved"]
    assert text["rank"].tolist() == ["1", "2", "3"] and text["b relevance"].tolist() == ["unjudged", "1", ""]  # y: not in the qrels
    payload = json_text(records(side_by_side_frame(view, text=False)))
    assert '"b other rank": 2' in payload and '"b other rank": 2.0' not in payload
