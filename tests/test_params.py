"""The one parameter layer: presentation parameters that used to slip through, and the layer itself.

Each row of ``PRESENTATION`` was a traceback, a silently wrong value or a report full of error notes
before the layer (issue 21): digits, worst, k, ks, queries, correction. The API-wide walk over
every public parameter is tests/test_api_hostile.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval import params as P

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")

LOG = pd.DataFrame({"query": ["007", "007", "007", "7", "7"], "item": ["a", "b", "c", "a", "b"],
                    "relevance": [1, 0, 1, 0, 1], "old": [0.9, 0.5, 0.1, 0.8, 0.3],
                    "new": [0.2, 0.5, 0.9, 0.1, 0.8]})
RES = tk.evaluate(LOG, metrics=["recall@2", "precision@2"], score=["old", "new"], item="item")

PRESENTATION = [
    (lambda tmp: RES.report(tmp / "r.html", digits=-1), "'digits' parameter of report must be an int in \\[0, 15\\]"),
    (lambda tmp: RES.report(tmp / "r.html", digits=2.5), "'digits' parameter of report"),
    (lambda tmp: RES.report(tmp / "r.html", digits=None), "'digits' parameter of report"),
    (lambda tmp: RES.to_latex(digits=-1), "'digits' parameter of to_latex"),
    (lambda tmp: RES.to_latex(digits=None), "'digits' parameter of to_latex"),
    (lambda tmp: RES.to_markdown(digits=2.5), "'digits' parameter of to_markdown"),
    (lambda tmp: RES.to_markdown(digits=16), "'digits' parameter of to_markdown"),
    (lambda tmp: RES.report(tmp / "r.html", worst=-1), "'worst' parameter of report must be an int in \\[0, 100000\\]"),
    (lambda tmp: RES.report(tmp / "r.html", worst=1.5), "'worst' parameter of report"),
    (lambda tmp: RES.report(tmp / "r.html", k=0), "'k' parameter of report must be None or a positive int"),
    (lambda tmp: RES.report(tmp / "r.html", queries="007"), "'queries' parameter of report must be None or a list "
                                                           "of ids.*pass a list: \\['007'\\]"),
    (lambda tmp: RES.report(tmp / "r.html", title=None), "'title' parameter of report"),
    (lambda tmp: RES.report(tmp / "r.html", images=""), "'images' parameter of report"),
    (lambda tmp: RES.report(tmp / "r.html", curves="yes"), "'curves' parameter of report must be True or False"),
    (lambda tmp: RES.report(tmp / "r.html", worts=3), "report\\(\\) got an unexpected keyword 'worts'. Did you mean "
                                                      "'worst'"),
    (lambda tmp: RES.curves(ks=[2.7]), "'ks' parameter of curves must be None or a non-empty list of positive "
                                       "ints.*Got \\[2.7\\]"),
    (lambda tmp: RES.curves(ks=[math.nan]), "'ks' parameter of curves"),
    (lambda tmp: RES.curves(ks=[None]), "'ks' parameter of curves"),
    (lambda tmp: RES.curves(ks=[]), "'ks' parameter of curves"),
    (lambda tmp: RES.curves(ks=5), "'ks' parameter of curves.*pass a list: \\[5\\]"),
    (lambda tmp: RES.curves(ks=range(1, 20_000)), "at most 10,000 of them"),
    (lambda tmp: RES.side_by_side("007", k=0), "'k' parameter of side_by_side must be a positive int"),
    (lambda tmp: RES.side_by_side("007", k=2**63), "'k' parameter of side_by_side must be a positive int of at most"),
    (lambda tmp: RES.side_by_side(["007"]), "'query' parameter of side_by_side.*Give one id"),
    (lambda tmp: RES.side_by_side(None), "'query' parameter of side_by_side"),
    (lambda tmp: RES.side_by_side(math.nan), "'query' parameter of side_by_side"),
    (lambda tmp: RES.beyond_accuracy(k=2**63), "'k' parameter of beyond_accuracy must be a positive int of at most"),
    (lambda tmp: RES.beyond_accuracy(catalog=[[1]]), "'catalog' parameter of beyond_accuracy"),
    (lambda tmp: RES.compare(correction="nope"), "'correction' parameter of compare.*'none'"),
    (lambda tmp: RES.compare(metrics=[]), "'metrics' parameter of compare"),
    (lambda tmp: RES.diff("old", "new", ["recall@2"]), "'metric' parameter of diff.*Give one metric"),
    (lambda tmp: RES.plot_curve("recall", ax=1), "'ax' parameter of plot_curve must be None or a matplotlib Axes"),
    (lambda tmp: RES.summary_ci(confidence=math.nan), "'confidence' parameter of summary_ci"),
    (lambda tmp: tk.evaluate(LOG, score=["old", "old"]), "'score' parameter of evaluate.*listed twice"),
    (lambda tmp: tk.evaluate(LOG, by=0), "'by' parameter of evaluate.*Column names are text"),
    (lambda tmp: tk.evaluate(LOG, threads=10**6), "'threads' parameter of evaluate"),
    (lambda tmp: tk.evaluate(LOG, scroe="old"), "evaluate\\(\\) got an unexpected keyword 'scroe'. Did you mean "
                                                "'score'"),
    (lambda tmp: tk.read_run(""), "'path' parameter of read_run must be a file path"),
    (lambda tmp: tk.read_run("a\x00b"), "'path' parameter of read_run.*NUL"),
    (lambda tmp: tk.read_runs("a.run"), "'paths' parameter of read_runs.*pass a list"),
    (lambda tmp: tk.write_run(LOG, tmp / "x.run", score="old", run_name=""), "'run_name' parameter of write_run"),
    (lambda tmp: tk.write_run(LOG, None, score="old"), "'path' parameter of write_run"),
    (lambda tmp: tk.parse_metric(None), "'text' parameter of parse_metric"),
    (lambda tmp: tk.MatrixEvaluator(sync_on_compute=1), "'sync_on_compute' parameter of MatrixEvaluator must be True "
                                                       "or False"),
    (lambda tmp: tk.MatrixEvaluator(conventions="trec-eval"), "'conventions' parameter of MatrixEvaluator.*Did you "
                                                              "mean 'trec_eval'"),
]


@pytest.mark.parametrize("call,pattern", PRESENTATION)
def test_presentation_parameters_are_refused_with_the_one_message(call, pattern, tmp_path):
    with pytest.raises(tk.ParameterError, match=pattern):
        call(tmp_path)
    assert not list(tmp_path.iterdir())  # nothing written when a parameter is refused


def test_correction_none_is_no_correction_in_python_as_on_the_command_line():
    a = RES.compare(baseline="old", correction="none", n_resamples=200)
    b = RES.compare(baseline="old", correction=None, n_resamples=200)
    pd.testing.assert_frame_equal(a, b)
    assert (a["p_adjusted"] == a["p_value"]).all()


def test_side_by_side_with_a_huge_k_shows_the_whole_list_without_allocating_k_rows():
    view = RES.side_by_side("007", k=10**12)
    assert view[("", "rank")].tolist() == [1, 2, 3]  # query '007' has three candidates
    assert view[("old", "item")].tolist() == ["a", "b", "c"]
    assert view[("new", "item")].tolist() == ["c", "b", "a"]


def test_a_report_with_a_huge_k_shows_each_list_once(tmp_path):
    path = RES.report(tmp_path / "r.html", k=10**12, queries=["007"], curves=False)
    page = Path(path).read_text(encoding="utf-8")
    block = page[page.index('id="q0"'):]
    assert "Top 1000000000000, side by side" in page
    assert block.count('data-value="3">3</td>') == 1 and 'data-value="4">' not in block  # ranks 1..3 only


def test_curves_take_cutoffs_as_given_in_increasing_order():
    frame = RES.curves(ks=np.array([3, 1, 1]))
    assert frame["k"].tolist() == [1, 1, 3, 3] * 2  # recall and precision, two models each
    one = frame[(frame["metric"] == "recall") & (frame["model"] == "new")].set_index("k")["value"]
    # recall@1 of 'new': query '007' ranks c (relevant) first: 1/2; query '7' ranks b (relevant) first: 1/1
    assert one.loc[1] == pytest.approx((0.5 + 1.0) / 2)


def test_numpy_scalars_pass_as_python_values():
    view = RES.side_by_side(np.str_("007"), k=np.int64(2))
    assert len(view) == 2
    assert RES.to_markdown(digits=np.int32(1)).count("0.5") >= 1


def test_a_long_repr_is_cut_in_the_message():
    with pytest.raises(tk.ParameterError) as info:
        RES.to_markdown(digits=list(range(1000)))
    assert len(str(info.value)) < 300


# ---------------------------------------------------------------------------------------------
# the layer


def test_constraints_accept_and_refuse():
    assert P.Int(0, 15).check(np.int16(3), "d", "f") == 3
    for bad in (True, 2.0, "3", None, 16, -1):
        with pytest.raises(tk.ParameterError):
            P.Int(0, 15).check(bad, "d", "f")
    assert P.Real(0, 1, low_open=True).check(np.float32(0.5), "c", "f") == 0.5
    for bad in (0, math.nan, math.inf, True, "0.5"):
        with pytest.raises(tk.ParameterError):
            P.Real(0, 1, low_open=True).check(bad, "c", "f")
    assert P.Bool().check(np.bool_(False), "b", "f") is False
    assert P.IntList(1).check(range(1, 4), "ks", "f") == [1, 2, 3]
    assert P.Ids().check(np.array(["a", "b"]), "q", "f") == ["a", "b"]
    assert P.Model().check(7, "m", "f") == "7"  # models are named by text
    assert P.QueryId().check(np.int64(7), "q", "f") == 7 and type(P.QueryId().check(np.int64(7), "q", "f")) is int


def test_alternatives_name_each_in_the_message():
    with pytest.raises(tk.ParameterError, match="must be None or a positive int. Got 0 instead"):
        P.validate_params(k=[P.Int(1), None])(lambda k=None: k)(0)


def test_a_misspelt_keyword_is_also_a_type_error():
    with pytest.raises(TypeError, match="Did you mean 'digits'"):
        RES.to_markdown(digit=2)


def test_a_constraint_for_a_parameter_the_function_lacks_is_refused():
    with pytest.raises(TypeError, match="constraints without a parameter"):
        P.validate_params(k=P.Int(), x=P.Int())(lambda k: k)


@pytest.mark.filterwarnings("always::topkeval.TopkevalWarning")
def test_warnings_point_at_the_callers_line_not_into_the_library():
    log = {"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.9, 0.1]}
    with pytest.warns(tk.TopkevalWarning, match="Every query has exactly 2 candidates") as seen:
        tk.evaluate(log, ["recall@1"], score="s")  # through the parameter layer's wrapper
    assert {w.filename for w in seen} == {__file__}
    res = tk.evaluate(LOG.assign(d="x"), ["recall@2"], score=["old", "new"], item="item", by="d")
    with pytest.warns(tk.TopkevalWarning, match="ignores weight= and by=") as seen:
        res.beyond_accuracy(k=1)
    assert {w.filename for w in seen} == {__file__}
