"""Metric names: suggestions for unknown names keep the user's cutoff and parameters; the name the
user typed is the column label, and every lookup by metric name accepts it and the canonical one."""

from __future__ import annotations

import re

import pytest

import topkeval as tk


def _suggestions(text: str) -> list[str]:
    with pytest.raises(tk.UnknownMetricError) as info:
        tk.parse_metric(text)
    found = re.search(r"(?:Did you mean|as in) (.*?)[?.]?$", str(info.value).split(" Known metrics")[0])
    assert found, str(info.value)
    return [s.strip("'") for s in found.group(1).split(" or ")]


@pytest.mark.parametrize("text,first", [
    ("recal@2", "recall@2"), ("Recal@2", "recall@2"), ("precison@5", "precision@5"), ("ndgc@10", "ndcg@10"),
    ("ndgc(gain=exp)@3", "ndcg(gain=exp)@3"), ("f_beta(beta=2)@3", "fbeta(beta=2)@3"), ("hit_rat@3", "hit_rate@3"),
    ("precison @ 5", "precision@5"), ("reca;l@2", "recall@2"), ("mapp", "map"), ("rbp_resi", "rbp_resid"),
    ("ndcgg(gains={0:1,1:4})@5", "ndcg(gains={0:1,1:4})@5"),
    # a known family written wrongly: the right form, with the user's cutoff when it is a valid one
    ("fbeta@5", "fbeta(beta=0.5)@5"), ("P@", "precision@10"), ("recall@0", "recall@10"),
    ("fbeta(beta=0.5)@1O", "fbeta(beta=0.5)@10"), ("recal@0", "recall@10"),
])
def test_suggestions_keep_the_cutoff_and_the_parameters(text, first):
    """The suggestion is made on the family name, and keeps what follows it: 'recal@2' suggests
    'recall@2', not 'recall@10'. Every suggestion parses."""
    suggestions = _suggestions(text)
    assert suggestions[0] == first, suggestions
    for suggestion in suggestions:
        tk.parse_metric(suggestion)


@pytest.mark.parametrize("text", ["recal@2x", "relstring", "prefs_simp", "Rprec_mult_avgjg_0.20", "map_avgjg",
                                  "P_avgjg", "((@3"])
def test_unknown_names_raise_without_recursion(text):
    """A suggestion that does not parse itself is not suggested (nor does trying it suggest again)."""
    with pytest.raises(tk.UnknownMetricError):
        tk.parse_metric(text)


#: a valid value of each kind of parameter, and another one (two distinct values of one parameter)
_VALUES = {"gain": ("linear", "exp"), "levels": ("{0.5}", "{0.25}"), "bool": ("true", "false"), "real": ("1", "2"),
           "number": ("1", "2"), "positive": ("1", "2"), "grade": ("2", "3"), "unit": ("0.5", "0.8"),
           "fraction": ("0.5", "0.25"), "weights": ("{1,0.5}", "{1,0.25}")}


def _twice_names():
    """For every built-in family and every parameter it takes (its own, and rel= and judged_only= that
    every family takes): a name giving that parameter twice, its other required parameters once."""
    from topkeval.metrics.names import GENERIC
    from topkeval.metrics.registry import FAMILIES

    out = []
    for fam in FAMILIES.values():
        if not getattr(fam.function, "__module__", "").startswith("topkeval."):  # define_metric's: other tests
            continue
        for p in fam.params + GENERIC:
            values = p.choices[:2] if p.kind == "choice" else _VALUES[p.kind]
            if len(values) < 2:
                values = (values[0], values[0])
            others = [f"{q.name}={(q.choices[0] if q.kind == 'choice' else _VALUES[q.kind][0])}"
                      for q in fam.params if q.required and q.name != p.name]
            at = "@5" if fam.cutoff != "none" else ""
            twice = ",".join(others + [f"{p.name}={values[0]}", f"{p.name}={values[1]}"])
            once = ",".join(others + [f"{p.name}={values[0]}"])
            out.append(pytest.param(f"{fam.name}({twice}){at}", f"{fam.name}({once}){at}",
                                    id=f"{fam.name}({twice}){at}"))
    return out


@pytest.mark.parametrize("name,once", _twice_names())
def test_a_parameter_given_twice_is_refused_in_every_family(name, once):
    """``P(rel=1,rel=2)@5`` took the last value without a word: every parameter of every family,
    given twice, is refused (with the same value twice too), and once it parses."""
    with pytest.raises(tk.UnknownMetricError, match=r"is given twice"):
        tk.parse_metric(name)
    tk.parse_metric(once)


@pytest.mark.parametrize("name,fragment", [
    ("P(rel=1,rel=2)@5", "rel is given twice"),
    ("P(rel=1,rel=1)@5", "rel is given twice"),
    ("nDCG(dcg='exp-log2',dcg='log2')@10", "dcg is given twice (dcg='exp-log2' and dcg='log2')"),
    ("nDCG(dcg='exp-log2',gain=linear)@10", "dcg= and gain= both set the gain"),
    ("Compat(p=0.8,p=0.9)", "p is given twice"),
    ("rbp(0.8,p=0.9)@10", "p is given twice"),  # the lone value is the first parameter
    ("ndcg(gain=exp,gains=linear)@10", "gain is given twice"),  # ir_measures' spelling of the same parameter
    ("P(cutoff=5,top_k=5)", "the cutoff is given twice"),
    ("SetP(relative=true,relative=false)", "relative is given twice"),
    # odd spellings: two pairs of parentheses, trec_eval's p= twice (not "rel must be a finite number")
    ("P(rel=2)(rel=3)@5", "rel is given twice, in two pairs of parentheses"),
    ("rbp(p=0.5)(p=0.8)", "p is given twice, in two pairs of parentheses"),
    ("P(rel=2)(judged_only=1)@5", "the parameters are in two pairs of parentheses: give them in one pair"),
    ("P(rel=2))@5", "its parentheses do not pair up"),
    ("rbp.p=0.5.p=0.8", "p is given twice (rbp.p=0.5.p=0.8): give it once (rbp.p=0.8)"),
    ("rbp_resid.p=0.5,p=0.8", "p is given twice"),
])
def test_peer_spellings_given_twice_are_refused(name, fragment):
    with pytest.raises(tk.UnknownMetricError, match=re.escape(fragment)):
        tk.parse_metric(name)


def test_a_tool_prefix_takes_the_users_own_value_of_its_preset():
    """recbole:nDCG means binary gains; the user's gain= replaces the tool's (given once by the user)."""
    assert str(tk.parse_metric("recbole:nDCG(gain=exp)@10")) == "ndcg(gain=exp)@10"
    assert str(tk.parse_metric("recbole:nDCG@10")) == "ndcg(gain=binary)@10"


@pytest.mark.parametrize("text,names", [
    ("map,11pt_avg", ["map", "11pt_avg"]), ("11pt_avg,map", ["11pt_avg", "map"]),
    ("P.5,10,map", ["P.5,10", "map"]), ("utility.1,-1,0,0,map", ["utility.1,-1,0,0", "map"]),
    ("11pt_avg..25,.5,ndcg.1=3,2=7", ["11pt_avg..25,.5", "ndcg.1=3,2=7"]), ("map 11pt_avg", ["map", "11pt_avg"]),
])
def test_a_list_of_names_splits_at_each_name(text, names):
    """``-m map,11pt_avg`` failed (11pt_avg, starting with a digit, was read as a value of map) while
    ``-m 11pt_avg,map`` worked: a part continues the name before it only when it is a value."""
    from topkeval.metrics.names import parse_metrics, split_names

    assert split_names(text) == names
    for name in names:
        parse_metrics(name)


LOG = {"query": [1, 1, 1, 2, 2, 2, 2], "item": ["x", "y", "z", "x", "y", "z", "w"],
       "relevance": [1, 0, 1, 0, 1, 0, 0], "old": [0.9, 0.8, 0.1, 0.5, 0.4, 0.3, 0.2],
       "new": [0.1, 0.8, 0.9, 0.4, 0.5, 0.3, 0.2], "device": list("aaabbbb")}


def _res(metrics=("map", "P@1", "ndcg @ 2", "recall_2"), **kw):
    return tk.evaluate(LOG, list(metrics), score=["old", "new"], item="item", **kw)


def test_the_name_typed_is_the_column_label():
    """metrics=["map"] gives a column "map" (summary["map"] was a KeyError: the column was "ap");
    only blanks are taken out; info["metric_names"] maps each label to the canonical name."""
    res = _res()
    assert res.metrics == ["map", "P@1", "ndcg@2", "recall_2"]
    assert list(res.summary.columns) == res.metrics and list(res.per_query.columns[2:]) == res.metrics
    assert res.info["metrics"] == res.metrics
    assert res.info["metric_names"] == {"map": "ap", "P@1": "precision@1", "ndcg@2": "ndcg@2", "recall_2": "recall@2"}
    canonical = tk.evaluate(LOG, ["ap", "precision@1", "ndcg@2", "recall@2"], score=["old", "new"], item="item")
    assert res.summary.to_numpy().tolist() == canonical.summary.to_numpy().tolist()
    assert tk.evaluate(LOG, [tk.parse_metric("map")], score="old").metrics == ["ap"]  # a Metric: its canonical name
    trec = tk.evaluate(LOG, ["P.1,2"], score="old")
    assert trec.metrics == ["P.1", "P.2"] and trec.label("precision@2") == "P.2"


@pytest.mark.parametrize("metrics,first,second", [(["map", "ap"], "map", "ap"), (["P@10", "precision@10"], "P@10", "precision@10"),
                                                  (["P.5,10", "P@5"], "P.5", "P@5"), (["MRR@3", "rr@3"], "MRR@3", "rr@3")])
def test_one_metric_under_two_names_is_refused(metrics, first, second):
    with pytest.raises(tk.UnknownMetricError, match=re.escape(f"'{first}' and '{second}' are the same metric")):
        tk.evaluate(LOG, metrics, score="old")


def test_one_name_twice_is_kept_once():
    assert tk.evaluate(LOG, ["recall@2", "recall @ 2", "map", "map"], score="old").metrics == ["recall@2", "map"]


def test_every_lookup_by_metric_name_accepts_the_label_and_every_other_name(tmp_path):
    res = _res()
    for name in ("map", "ap", "AP", "average_precision", " map ", tk.parse_metric("ap")):
        assert res.label(name) == "map"
    assert res.label("precision@1") == "P@1" and res.label("ndcg@2") == "ndcg@2" and res.label("recall@2") == "recall_2"
    for bad in ("recall@5", "recal@2"):
        with pytest.raises(tk.ParameterError, match="was not evaluated"):
            res.label(bad)
    with pytest.raises(tk.ParameterError, match="'metric' parameter of label must be a metric name"):
        res.label(3)
    # diff
    for name in ("map", "ap"):
        d = res.diff("old", "new", name)
        assert d["delta"].tolist() == (res.per_query.set_index(["model", "query"])["map"]
                                       .unstack(0).eval("new - old").sort_values(kind="stable").tolist())
    with pytest.raises(tk.ParameterError, match="was not evaluated"):
        res.diff("old", "new", "ndcg@5")
    # compare(metrics=)
    for names in (["ap", "precision@1"], ["map", "P@1"], "AP"):
        table = res.compare(baseline="old", metrics=names, n_resamples=200)
        assert list(table["metric"]) == (["map", "P@1"] if isinstance(names, list) else ["map"])
    # summary_ci, segments, to_latex: the labels
    assert list(res.summary_ci(n_resamples=200)["metric"].unique()) == res.metrics
    assert "map" in res.to_latex() and "P@1" in res.to_latex()
    seg = _res(by="device")
    assert [c for c in seg.segments.columns if c in seg.metrics] == seg.metrics
    # curves: families as given; plot_deltas and report find the metric by any name
    assert set(res.curves(["P"], ks=[1, 2])["metric"]) == {"P"}
    assert res.curves(["P"], ks=[1])["value"].tolist() == res.summary["P@1"].tolist()
    pytest.importorskip("matplotlib")
    assert res.plot_deltas("ap") is not None
    out = res.report(tmp_path / "r.html", metric="ap")
    assert "map" in (tmp_path / "r.html").read_text()
    assert out


def test_cli_labels_and_lookups(tmp_path, capsys):
    import json

    import pandas as pd

    from topkeval.cli import main

    path = tmp_path / "log.parquet"
    pd.DataFrame(LOG).to_parquet(path)
    assert main(["compare", str(path), "--score", "old", "--score", "new", "--baseline", "old", "--item", "item",
                 "-m", "map,P@1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["comparison"]
    assert [r["metric"] for r in rows] == ["map", "P@1"]
    assert main(["diff", str(path), "--score", "old", "--score", "new", "--baseline", "old", "--item", "item",
                 "-m", "map"]) == 0
    assert "map: new - old per query" in capsys.readouterr().out
    assert main(["evaluate", str(path), "--score", "old", "-m", "map", "-m", "ap"]) == 2
    assert "are the same metric" in capsys.readouterr().err


def test_labels_on_the_other_paths(tmp_path):
    """A streamed file, a score matrix and MatrixEvaluator label their columns the same way."""
    import numpy as np
    import pandas as pd

    path = tmp_path / "log.parquet"
    pd.DataFrame(LOG).to_parquet(path)
    streamed = tk.evaluate(path, ["map", "P@1"], score="old", chunk_rows=2, keep_per_query=False)
    assert streamed.metrics == ["map", "P@1"] and streamed.label("ap") == "map"
    matrix = tk.evaluate_matrix(np.array([[0.9, 0.1, 0.5]]), np.array([[1, 0, 1]]), ["MAP", "R@2"])
    assert matrix.metrics == ["MAP", "R@2"] and matrix.info["metric_names"] == {"MAP": "ap", "R@2": "recall@2"}
    ev = tk.MatrixEvaluator(["MAP", "R@2"])
    ev.update(np.array([[0.9, 0.1, 0.5]]), np.array([[1, 0, 1]]))
    assert ev.metrics == ["MAP", "R@2"] and ev.compute().metrics == ["MAP", "R@2"]


@pytest.mark.parametrize("text", ["ndcg(gain=1:3,2:7)@5", "ndcg(gain=exp,gain=linear)@5", "rbp(0.8,p=0.9)@10",
                                  "fbeta(beta=0.5,beta=2)@10"])
def test_a_parameter_given_twice_is_refused(text):
    """A gain map written without its braces reads as two values of gain (the lone 2:7 is the first
    parameter again): refused, not the last one kept."""
    with pytest.raises(tk.UnknownMetricError, match="given twice"):
        tk.parse_metric(text)
    assert str(tk.parse_metric("ndcg(gain={1:3,2:7})@5")) == "ndcg(gain={1:3,2:7})@5"


def test_trec_evals_own_spelling_of_a_recall_level_is_read():
    """trec_eval's ``-m iprec_at_recall.0.10`` (its parameter after a dot) is the metric it prints as
    iprec_at_recall_0.10; a list of levels names one metric per level; a level outside [0, 1] is refused."""
    for dotted, printed in [("iprec_at_recall.0.10", "iprec_at_recall_0.10"), ("iprec_at_recall.1.00", "iprec(recall=1)"),
                            ("IPREC_AT_RECALL.0.5", "iprec_at_recall_0.50"), ("iprec_at_recall.0", "iprec(recall=0)")]:
        assert tk.parse_metric(dotted) == tk.parse_metric(printed)
    from topkeval.metrics.names import labelled_metrics, split_names

    labels, parsed = labelled_metrics(split_names("iprec_at_recall.0.10,0.20,map"))  # -m as the command line reads it
    assert labels == ("iprec_at_recall.0.10", "iprec_at_recall.0.20", "map")
    assert [str(m) for m in parsed] == ["iprec(recall=0.1)", "iprec(recall=0.2)", "ap"]
    with pytest.raises(tk.UnknownMetricError, match="names 2 metrics: pass it in a list"):
        tk.parse_metric("iprec_at_recall.0.1,0.2")
    with pytest.raises(tk.UnknownMetricError, match="recall must be a number from 0 to 1"):
        tk.parse_metric("iprec_at_recall.1.5")
    log = {"query": [1, 1, 1, 2, 2], "rel": [1, 0, 1, 0, 1], "s": [0.9, 0.8, 0.1, 0.5, 0.4]}
    res = tk.evaluate(log, ["iprec_at_recall.0.50"], relevance="rel", score="s", ties="first")
    assert res.summary.iloc[0].tolist() == [0.75]  # by hand: q1 1 (rank 1), q2 1/2 (rank 2)
