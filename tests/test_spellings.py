"""Other tools' spellings of metric names parse with the tool's meaning, and give the tool's number.

ir_measures (its strings, and its measure objects passed directly), ranx, torchmetrics, RecBole and
RePlay: each spelling is parsed to the topkeval metric it means, and checked against the installed
peer on random inputs under the peer's own tie rule (ir_measures' providers, ranx, torchmetrics;
RecBole and RePlay are not test extras: their formulas are transcribed). The name as written is
the column label everywhere; a name that means different things in different tools says so in
:func:`topkeval.explain_metric`, never in a warning.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

pytestmark = pytest.mark.peers

SPELLINGS = [
    # ir_measures
    ("P(rel=2)@5", "precision(rel=2)@5"), ("nDCG(dcg='exp-log2')@10", "ndcg(gain=exp)@10"),
    ("nDCG(dcg=log2)@10", "ndcg@10"), ("AP(judged_only=True)", "ap(judged_only=true)"), ("IPrec@0.5", "iprec(recall=0.5)"),
    ("RBP(p=0.8)", "rbp(p=0.8)"), ("RBP(p=0.8,rel=2)", "rbp(p=0.8,rel=2)"), ("SetF(beta=0.25)", "set_f(beta=0.5)"),
    ("Judged@10", "judged@10"), ("NumRet", "num_ret"), ("NumRet(rel=1)", "num_rel_ret(rel=1)"), ("R@100", "recall@100"),
    ("RR(rel=2)@10", "rr(rel=2)@10"), ("P(cutoff=5)", "precision@5"), ("SetP(relative=True)", "set_relative_precision"),
    ("SetRelP", "set_relative_precision"), ("SetAP", "set_ap"), ("Compat(p=0.8)", "compat(p=0.8)"),
    ("Accuracy(rel=2)@5", "accuracy(rel=2)@5"), ("BPM(T=2,max_rel=3)@10", "bpm(T=2,max_rel=3)@10"),
    ("INSQ(T=2.0, max_rel=1)", "insq(T=2,max_rel=1)"), ("SDCG(dcg='log2',max_rel=1)@10", "sdcg(max_rel=1)@10"),
    ("ir_measures:RBP", "rbp(p=0.8,gain=linear)"), ("ir_measures:RBP(rel=1)", "rbp(p=0.8,rel=1)"),
    # ranx
    ("ndcg@10", "ndcg@10"), ("map@100", "ap@100"), ("mrr", "rr"), ("hits@5", "tp@5"), ("hit_rate@5", "hit_rate@5"),
    ("f1@10", "f1@10"), ("r-precision", "r_precision"), ("bpref", "bpref"), ("ndcg_burges@5", "ndcg(gain=exp)@5"),
    # RecBole
    ("Recall@10", "recall@10"), ("MRR@10", "rr@10"), ("NDCG@10", "ndcg@10"), ("Hit@10", "hit_rate@10"),
    ("Precision@10", "precision@10"), ("MAP@10", "ap@10"), ("GAUC", "auc"), ("recbole:MAP@10", "ap_capped@10"),
    ("recbole:NDCG@10", "ndcg(gain=binary)@10"), ("recbole:Recall@10", "recall@10"),
    # RePlay
    ("HitRate@10", "hit_rate@10"), ("MRR", "rr"), ("NDCG", "ndcg"), ("MAP", "ap"), ("replay:MAP@10", "ap_capped@10"),
    ("replay:NDCG@10", "ndcg(gain=binary)@10"), ("lenskit:Recall@10", "recall_capped@10"),
    # torchmetrics
    ("RetrievalNormalizedDCG(top_k=10)", "ndcg@10"), ("RetrievalNormalizedDCG", "ndcg"), ("RetrievalMAP(top_k=10)",
                                                                                          "ap_found@10"),
    ("RetrievalMAP", "ap_found"), ("RetrievalRecall(top_k=10)", "recall@10"), ("RetrievalPrecision(top_k=10)",
                                                                             "precision@10"),
    ("RetrievalHitRate(top_k=10)", "hit_rate@10"), ("RetrievalMRR(top_k=10)", "rr@10"), ("RetrievalMRR", "rr"),
    ("RetrievalRPrecision", "r_precision"), ("RetrievalFallOut(top_k=10)", "fallout@10"),
    # ranx's rbp.x, trec_eval's set_F.x (beta squared), printed names and levels
    ("rbp.9", "rbp(p=0.9)"), ("rbp.95", "rbp(p=0.95)"), ("set_F.0.25", "set_f(beta=0.5)"),
    ("set_F_0.25", "set_f(beta=0.5)"), ("set_F.4", "set_f(beta=2)"), ("fbeta(beta=1)@5", "f1@5"),
    ("fbeta(beta=2)@5", "fbeta(beta=2)@5"), ("ndcg(gain=burges)@5", "ndcg(gain=exp)@5"),
    ("ndcg(gain=exponential)@5", "ndcg(gain=exp)@5"), ("IPrec@0", "iprec(recall=0)"),
    ("iprec_at_recall_0.35", "iprec(recall=0.35)"), ("Rprec_mult_0.35", "r_precision_mult(mult=0.35)"),
    ("11pt_avg.0.5,0.25", "iprec_avg(levels={0.25,0.5})"), ("iprec_avg(levels={0.5,0.25})", "iprec_avg(levels={0.25,0.5})"),
    ("spark:MAP@10", "ap_capped@10"), ("spark:meanAveragePrecisionAt@10", "ap_capped@10"),
]


@pytest.mark.parametrize("spelling,canonical", SPELLINGS, ids=[s for s, _ in SPELLINGS])
def test_each_spelling_parses_to_its_meaning(spelling, canonical):
    metric = tk.parse_metric(spelling)
    assert str(metric) == canonical
    assert tk.parse_metric(canonical) == metric  # the canonical name round-trips


@pytest.mark.parametrize("bad,fragment", [
    ("P(rel=two)@5", "rel must be a finite number"), ("AP(judged_only=maybe)", "judged_only must be true or false"),
    ("P(cutoff=5)@10", "the cutoff is given twice"), ("nDCG(dcg='exp')@10", "dcg must be 'log2' or 'exp-log2'"),
    ("SDCG(dcg='exp-log2',max_rel=1)@10", "linear gains only"), ("Precision", "needs a cutoff (written @k, or cutoff=k"),
    ("recboel:MAP@10", "Unknown tool 'recboel'"), ("RBP", "rbp needs a parameter"),
])
def test_wrong_spellings_say_what_is_wrong(bad, fragment):
    with pytest.raises(tk.UnknownMetricError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        tk.parse_metric(bad)


def test_names_that_differ_between_tools_are_explained_not_warned():
    """The name is read one way (topkeval's, which is trec_eval's and ir_measures' where they have it);
    explain_metric says what the others mean by it and how to write their meaning. Evaluating it
    warns nothing (the suite turns warnings into errors)."""
    cases = {"MAP@10": ["ap_capped@10", "recbole:MAP@10", "ap_found@10"], "hits@5": ["hit_rate@5"],
             "Hit@5": ["tp@5"], "NDCG@10": ["ndcg(gain=binary)@10", "ndcg(gain=exp)@10"],
             "Recall@10": ["recall_capped@10", "hit_rate@10"], "GAUC": ["weight="], "RetrievalMAP@5": ["ap@5"],
             "RBP(p=0.8)": ["gain=linear", "ir_measures:RBP"], "SetF(beta=0.25)": ["beta squared"]}
    log = {"query": [1, 1, 1, 2, 2], "relevance": [1, 0, 2, 0, 1], "s": [0.9, 0.5, 0.1, 0.3, 0.2]}
    for name, fragments in cases.items():
        text = tk.explain_metric(name)
        assert text.startswith(f"{name!r} is {tk.parse_metric(name)}:"), text
        for fragment in fragments:
            assert fragment in text, (name, fragment, text)
        for other in fragments:  # every spelling the note gives parses
            if "@" in other and "=" not in other.split("(")[0]:
                tk.parse_metric(other)
    res = tk.evaluate(log, list(cases), score="s", ties="first")  # -W error: no warning
    assert res.metrics == list(cases)


def test_the_name_typed_is_the_label_in_tables_compare_cli_and_report(tmp_path, capsys):
    from topkeval.cli import main

    log = pd.DataFrame({"query": [1, 1, 1, 2, 2, 2, 3, 3], "item": list("abcabcab"),
                        "relevance": [2, 0, 1, 0, 1, 2, 1, 0], "old": [0.9, 0.5, 0.1, 0.3, 0.2, 0.1, 0.5, 0.4],
                        "new": [0.1, 0.5, 0.9, 0.3, 0.2, 0.8, 0.4, 0.5]})
    names = ["P(rel=2)@2", "recbole:MAP@2", "RetrievalMAP(top_k=2)", "hits@2", "nDCG(dcg='exp-log2')@2"]
    res = tk.evaluate(log, names, score=["old", "new"], item="item", ties="first")
    assert res.metrics == ["P(rel=2)@2", "recbole:MAP@2", "RetrievalMAP(top_k=2)", "hits@2", "nDCG(dcg='exp-log2')@2"]
    assert list(res.summary.columns) == res.metrics and list(res.per_query.columns[2:]) == res.metrics
    assert res.info["metric_names"]["recbole:MAP@2"] == "ap_capped@2"
    assert list(res.compare(baseline="old", n_resamples=100)["metric"]) == res.metrics
    assert res.label("ap_capped@2") == "recbole:MAP@2" and res.label("precision(rel=2)@2") == "P(rel=2)@2"
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    assert main(["compare", str(path), "--score", "old", "--score", "new", "--baseline", "old", "--item", "item",
                 "--ties", "first", "-m", ",".join(names), "--format", "json"]) == 0
    assert [r["metric"] for r in json.loads(capsys.readouterr().out)["comparison"]] == names
    assert main(["metrics", "recbole:MAP@10"]) == 0
    assert "'recbole:MAP@10' is ap_capped@10" in capsys.readouterr().out
    pytest.importorskip("matplotlib")
    res.report(tmp_path / "r.html", metric="ap_capped@2")
    assert "recbole:MAP@2" in (tmp_path / "r.html").read_text()


def test_one_metric_under_two_spellings_is_refused():
    """Two spellings of one metric would be one column under two labels: refused, naming both."""
    log = {"query": [1, 1], "relevance": [1, 0], "s": [0.9, 0.1]}
    for pair in (["MAP@10", "ap@10"], ["RetrievalMAP(top_k=3)", "ap_found@3"], ["P(cutoff=5)", "P@5"],
                 ["recbole:MAP@10", "ap_capped@10"]):
        with pytest.raises(tk.UnknownMetricError, match=re.escape(f"'{pair[0]}' and '{pair[1]}' are the same metric")):
            tk.evaluate(log, pair, score="s", ties="first")
    # different metrics under related names: both columns
    assert tk.evaluate(log, ["MAP@10", "recbole:MAP@10", "P(rel=2)@5", "P@5"], score="s").metrics == [
        "MAP@10", "recbole:MAP@10", "P(rel=2)@5", "P@5"]


# ---------------------------------------------------------------------------------------------
# a metric's own relevance threshold (rel=) and judged_only


def _runs(seed, queries=20):
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in range(queries):
        docs = [f"d{i:03d}" for i in rng.choice(150, 50, replace=False)]
        run += [(f"q{q:02d}", d, float(rng.integers(1, 9)) / 2) for d in docs[: int(rng.integers(1, 35))]]
        qrels += [(f"q{q:02d}", d, int(rng.choice([-1, 0, 1, 2, 3]))) for d in sorted(rng.choice(docs, 30, replace=False))]
    qrels.append(("q_missing", "d000", 2))
    return (pd.DataFrame(run, columns=["query", "item", "score"]),
            pd.DataFrame(qrels, columns=["query", "item", "relevance"]))


METRICS_REL = ["precision@5", "recall@10", "ap", "rr", "r_precision", "hit_rate@3", "bpref", "set_ap", "ndcg@5",
               "infap", "num_rel_ret", "accuracy@5"]


@pytest.mark.parametrize("path", ["table", "runs", "matrix", "file"])
def test_rel_equals_the_evaluation_at_that_threshold(path, tmp_path):
    """metric(rel=2) gives, on every query, the number of the metric under threshold=2: R, the relevant
    candidates and the judged non-relevant ones under 2; the queries (empty_queries) are the
    evaluation's, here all of them."""
    run, qrels = _runs(1)
    conv = dict(ties="item_desc", empty_queries="keep", undefined="nan")
    own = [f"{m.split('@')[0]}(rel=2)" + (f"@{m.split('@')[1]}" if "@" in m else "") for m in METRICS_REL]
    if path == "runs":
        mixed = tk.evaluate(run, qrels=qrels, item="item", metrics=METRICS_REL + own, **conv)
        at2 = tk.evaluate(run, qrels=qrels, item="item", metrics=METRICS_REL, threshold=2, **conv)
    else:
        table = run.merge(qrels, on=["query", "item"], how="left").fillna({"relevance": 0})
        if path == "matrix":
            users = {q: i for i, q in enumerate(sorted(table["query"].unique()))}
            items = {d: i for i, d in enumerate(sorted(table["item"].unique()))}
            scores = np.full((len(users), len(items)), -np.inf)
            grades = np.zeros((len(users), len(items)))
            u, i = table["query"].map(users).to_numpy(), table["item"].map(items).to_numpy()
            scores[u, i], grades[u, i] = table["score"], table["relevance"]
            exclude = np.isinf(scores)
            scores[exclude] = 0.0
            mixed = tk.evaluate_matrix(scores, grades, METRICS_REL + own, exclude=exclude, **conv)
            at2 = tk.evaluate_matrix(scores, grades, METRICS_REL, exclude=exclude, threshold=2, **conv)
        else:
            data = table
            if path == "file":
                data = tmp_path / "log.parquet"
                table.to_parquet(data)
            mixed = tk.evaluate(data, METRICS_REL + own, item="item", chunk_rows=50 if path == "file" else None, **conv)
            at2 = tk.evaluate(data, METRICS_REL, item="item", threshold=2, **conv)
    a = mixed.per_query[own].to_numpy()
    b = at2.per_query[METRICS_REL].to_numpy()
    assert np.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert not np.allclose(mixed.per_query[METRICS_REL].to_numpy(), b, equal_nan=True)  # the threshold mattered


def test_rel_leaves_the_empty_queries_to_the_evaluation():
    """Which queries are empty is the evaluation's threshold's business: a query with a relevant item
    of grade 1 only is kept, and P(rel=2)@2 is 0 there (R = 0 under 2, precision has no undefined case)."""
    log = {"query": [1, 1, 2, 2, 2], "relevance": [1, 0, 2, 0, 0], "s": [0.9, 0.1, 0.9, 0.1, 0.0]}
    res = tk.evaluate(log, ["P@2", "P(rel=2)@2", "R(rel=2)@2"], score="s", undefined="nan")
    assert res.per_query["P@2"].tolist() == [0.5, 0.5]
    assert res.per_query["P(rel=2)@2"].tolist() == [0.0, 0.5]
    assert np.isnan(res.per_query["R(rel=2)@2"].tolist()[0]) and res.per_query["R(rel=2)@2"].tolist()[1] == 1.0


def test_judged_only_per_metric_equals_the_evaluation_with_judged_only(tmp_path):
    run, qrels = _runs(2)
    names = ["P@5", "ap", "ndcg@10", "set_ap", "num_ret", "bpref"]
    own = [f"{n.split('@')[0]}(judged_only=true)" + (f"@{n.split('@')[1]}" if "@" in n else "") for n in names]
    mixed = tk.evaluate(run, qrels=qrels, item="item", metrics=names + own, conventions="trec_eval")
    whole = tk.evaluate(run, qrels=qrels, item="item", metrics=names, conventions="trec_eval")
    judged = tk.evaluate(run, qrels=qrels, item="item", metrics=names, conventions="trec_eval", judged_only=True)
    assert np.allclose(mixed.per_query[own].to_numpy(), judged.per_query[names].to_numpy(), rtol=1e-12, atol=0)
    assert np.allclose(mixed.per_query[names].to_numpy(), whole.per_query[names].to_numpy(), rtol=1e-12, atol=0)
    assert (mixed.per_query["num_ret(judged_only=true)"] < mixed.per_query["num_ret"]).any()
    # curves evaluate the same runs again, judged_only included
    curve = mixed.curves(["P(judged_only=true)"], ks=[5])
    assert curve["value"].tolist() == pytest.approx(judged.summary["P@5"].tolist(), rel=1e-12)
    with pytest.raises(tk.ParameterError, match="needs judgments apart from the run: pass qrels="):
        tk.evaluate(run.assign(relevance=1), ["AP(judged_only=True)"], item="item")


# ---------------------------------------------------------------------------------------------
# against the installed peers


def _ir_measures():
    return pytest.importorskip("ir_measures", reason="ir_measures is a test extra")


def _theirs(provider, measures, run, qrels) -> dict:
    names = {"query": "query_id", "item": "doc_id"}
    ids = {"query_id": object, "doc_id": object}  # ranx asserts object columns
    return {(m.query_id, str(m.measure)): m.value for m in provider.iter_calc(
        measures, qrels.rename(columns=names).astype(ids), run.rename(columns=names).astype(ids))}


def _check(res, theirs, measures, labels):
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted({q for q, _ in theirs})
    for measure, label in zip(measures, labels):
        for q in pq.index:
            assert pq.loc[q, label] == pytest.approx(theirs[(q, str(measure))], abs=1e-12), (q, label)


@pytest.mark.parametrize("seed", range(3))
def test_ir_measures_strings_and_objects_equal_pytrec_eval(seed):
    """ir_measures' spellings, as strings and as its measure objects, against its pytrec_eval
    provider: rel= per measure (a separate trec_eval -l invocation there), judged_only, IPrec@x,
    SetF's beta squared, NumRet(rel=1); conventions="pytrec_eval" and a judged query missing from the
    run scored 0, as ir_measures scores it."""
    ir_measures = _ir_measures()
    pytest.importorskip("pytrec_eval", reason="pytrec_eval (pytrec-eval-terrier) is a test extra")
    from ir_measures import AP, RR, IPrec, NumRet, P, R, SetF, SetRelP, Success, nDCG

    run, qrels = _runs(10 + seed)
    measures = [P(rel=2) @ 5, nDCG @ 10, AP(judged_only=True), IPrec @ 0.5, SetF(beta=0.5), NumRet, R @ 100,
                RR(rel=2), Success(rel=3) @ 5, SetRelP, NumRet(rel=1), AP(rel=2, judged_only=True) @ 10]
    theirs = _theirs(ir_measures.pytrec_eval, measures, run, qrels)
    conv = dict(conventions="pytrec_eval", missing_queries="zero")
    strings = [str(m) for m in measures]
    assert strings[:4] == ["P(rel=2)@5", "nDCG@10", "AP(judged_only=True)", "IPrec@0.5"]
    as_text = tk.evaluate(run, qrels=qrels, item="item", metrics=strings, **conv)
    as_objects = tk.evaluate(run, qrels=qrels, item="item", metrics=measures, **conv)
    assert as_objects.metrics == strings  # an object is labelled by its own str()
    for res in (as_text, as_objects):
        _check(res, theirs, measures, strings)


def test_ir_measures_objects_through_every_provider():
    """Measure objects of the other providers: ir_measures' own code (Judged, Compat, Accuracy),
    cwl_eval's (BPM, SDCG), ranx's (nDCG(dcg='exp-log2')), each under its provider's tie rule."""
    ir_measures = _ir_measures()
    from ir_measures import Compat, Judged, nDCG

    run, qrels = _runs(20)
    run = run.assign(score=run["score"] + np.random.default_rng(0).random(len(run)) / 1000)  # ranx: no ties
    judged = [Judged @ 5, Judged @ 10]
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=judged, ties="item_asc", item_order="text",
                      short_lists="shrink", missing_queries="zero", empty_queries="keep")
    _check(res, _theirs(ir_measures.judged, judged, run, qrels), judged, [str(m) for m in judged])
    compat = [Compat, Compat(p=0.8)]
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=compat, ties="item_asc", item_order="text",
                      missing_queries="zero", empty_queries="keep")
    _check(res, _theirs(ir_measures.compat, compat, run, qrels), compat, [str(m) for m in compat])
    exp = [nDCG(dcg="exp-log2") @ 10, nDCG(dcg="exp-log2")]
    pytest.importorskip("ranx", reason="ranx is a test extra")
    qrels = qrels[qrels["query"] != "q_missing"]  # ranx refuses judged queries missing from the run
    theirs = _theirs(ir_measures.ranx, exp, run, qrels)
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=exp, conventions="ranx")
    _check(res, theirs, exp, [str(m) for m in exp])


def test_ir_measures_rbp_object_is_graded_without_rel():
    """ir_measures' RBP without rel= weighs a rank by its grade (trectools, not installed here: checked
    by hand); RBP(rel=1) is binary, and equals cwl_eval's (whose weights are normalised over 1000
    ranks: a factor 1 / (1 - p^1000))."""
    ir_measures = _ir_measures()
    log = {"query": [1, 1, 1], "relevance": [2, 0, 1], "s": [0.9, 0.5, 0.1]}
    res = tk.evaluate(log, [ir_measures.RBP, ir_measures.RBP(rel=1), "RBP(p=0.8)"], score="s")
    assert res.metrics == ["RBP", "RBP(rel=1)", "RBP(p=0.8)"]
    assert res.summary.iloc[0].tolist() == pytest.approx([0.2 * (2 + 0.8**2), 0.2 * (1 + 0.8**2), 0.2 * (1 + 0.8**2)],
                                                         rel=1e-14)
    pytest.importorskip("cwl", reason="cwl-eval is a test extra")
    run, qrels = _runs(30)
    measures = [ir_measures.RBP(rel=1), ir_measures.RBP(p=0.5, rel=2)]
    theirs = _theirs(ir_measures.cwl_eval, measures, run, qrels)
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=measures, ties="first", missing_queries="zero",
                      empty_queries="keep")
    pq = res.per_query.set_index("query")
    for m, p in zip(measures, (0.8, 0.5)):
        for q in pq.index:
            assert pq.loc[q, str(m)] / (1 - p**1000) == pytest.approx(theirs[(q, str(m))], abs=1e-12), (q, str(m))


def test_ranx_spellings_equal_ranx():
    ranx = pytest.importorskip("ranx", reason="ranx is a test extra")
    rng = np.random.default_rng(3)
    run_rows, qrel_rows = [], []
    for q in range(30):
        n = int(rng.integers(2, 30))
        run_rows += [(f"q{q}", f"d{i}", float(s)) for i, s in enumerate(rng.permutation(n) + rng.random())]
        qrel_rows += [(f"q{q}", f"d{i}", int(g)) for i, g in enumerate(rng.choice([0, 0, 1, 2, 3], n + 5))]
    run = pd.DataFrame(run_rows, columns=["query", "item", "score"])
    qrels = pd.DataFrame(qrel_rows, columns=["query", "item", "relevance"])
    names = ["ndcg@10", "map@100", "mrr", "hits@5", "hit_rate@5", "f1@10", "r-precision", "bpref", "precision@5",
             "recall@10", "map", "ndcg", "mrr@3", "ndcg_burges@5"]
    o = {"query": object, "item": object}
    theirs = ranx.evaluate(ranx.Qrels.from_df(qrels.astype(o), q_id_col="query", doc_id_col="item",
                                              score_col="relevance"),
                           ranx.Run.from_df(run.astype(o), q_id_col="query", doc_id_col="item", score_col="score"),
                           names)
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=names, conventions="ranx")
    assert res.metrics == names
    assert res.summary.iloc[0].tolist() == pytest.approx([theirs[n] for n in names], abs=1e-12)


def test_torchmetrics_spellings_equal_torchmetrics():
    """torchmetrics' class names, with top_k or without, against its functional form per query
    (scores without ties, some <= 0: torchmetrics never counts those as found)."""
    torch = pytest.importorskip("torch")
    R = pytest.importorskip("torchmetrics.functional.retrieval")
    rng = np.random.default_rng(4)
    rows = []
    for q in range(30):
        n = int(rng.integers(2, 25))
        rows += [(q, float(s), int(g)) for s, g in zip(rng.permutation(n) / n - 0.2, rng.choice([0, 0, 0, 1, 2], n))]
    frame = pd.DataFrame(rows, columns=["query", "score", "relevance"])

    def binary(f, **kw):
        return lambda p, t: f(p, (t > 0).long(), **kw)

    names = {"RetrievalNormalizedDCG(top_k=5)": lambda p, t: R.retrieval_normalized_dcg(p, t, top_k=5),
             "RetrievalNormalizedDCG": lambda p, t: R.retrieval_normalized_dcg(p, t),
             "RetrievalMAP(top_k=5)": binary(R.retrieval_average_precision, top_k=5),
             "RetrievalMAP": binary(R.retrieval_average_precision),
             "RetrievalRecall(top_k=5)": binary(R.retrieval_recall, top_k=5),
             "RetrievalPrecision(top_k=5)": binary(R.retrieval_precision, top_k=5),
             "RetrievalHitRate(top_k=5)": binary(R.retrieval_hit_rate, top_k=5),
             "RetrievalMRR(top_k=5)": binary(R.retrieval_reciprocal_rank, top_k=5),
             "RetrievalMRR": binary(R.retrieval_reciprocal_rank),
             "RetrievalRPrecision": binary(R.retrieval_r_precision),
             "RetrievalFallOut(top_k=5)": binary(R.retrieval_fall_out, top_k=5)}
    res = tk.evaluate(frame, list(names), conventions="torchmetrics", ties="first")  # RetrievalMAP: a deterministic rule
    pq = res.per_query.set_index("query")
    for q, part in frame.groupby("query"):
        p, t = torch.tensor(part["score"].to_numpy()), torch.tensor(part["relevance"].to_numpy())
        for name, f in names.items():
            assert pq.loc[q, name] == pytest.approx(float(f(p, t)), abs=1e-6), (q, name)  # torchmetrics: float32
    with pytest.raises(tk.ParameterError, match="ap_found is not computed exactly under ties='expected'"):
        tk.evaluate(frame, ["RetrievalMAP"], conventions="torchmetrics")


def test_recbole_and_replay_spellings_by_their_formulas():
    """RecBole and RePlay are not test extras: their MAP@k and NDCG@k are transcribed (RecBole
    metrics.py: MAP divides the summed precisions by min(R, k); NDCG's gains and ideal are binary,
    the ideal over min(R, k) ranks) and compared on random lists with distinct scores."""
    rng = np.random.default_rng(6)
    rows, want = [], {"recbole:MAP@5": [], "replay:NDCG@5": [], "Hit@5": [], "MRR@5": []}
    for q in range(40):
        n = int(rng.integers(1, 15))
        grades = rng.choice([0, 0, 1, 2], n)
        scores = rng.permutation(n).astype(float)
        rows += [(q, s, g) for s, g in zip(scores, grades)]
        rel = (grades[np.argsort(-scores)] > 0).astype(float)[:5]
        R = int((grades > 0).sum())
        if R == 0:
            continue  # RecBole evaluates users with a test item
        prec = np.cumsum(rel) / np.arange(1, len(rel) + 1)
        ap = float((prec * rel).sum() / min(R, 5))
        dcg = float((rel / np.log2(np.arange(2, len(rel) + 2))).sum())
        idcg = float((1 / np.log2(np.arange(2, min(R, 5) + 2))).sum())
        first = np.flatnonzero(rel)
        for name, value in (("recbole:MAP@5", ap), ("replay:NDCG@5", dcg / idcg),
                            ("Hit@5", float(rel.any())), ("MRR@5", 1 / (first[0] + 1) if len(first) else 0.0)):
            want[name].append(value)
    res = tk.evaluate(pd.DataFrame(rows, columns=["query", "score", "relevance"]), list(want), ties="first")
    assert res.summary.iloc[0].tolist() == pytest.approx([np.mean(v) for v in want.values()], rel=1e-12)


def _graded_runs(seed, queries=25):
    """Runs without ties (as trec_eval and ranx would order them alike), graded judgments with
    relevant documents no run found and unjudged retrieved ones."""
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in range(queries):
        n = int(rng.integers(2, 30))
        run += [(f"q{q:02d}", f"d{i:02d}", float(s)) for i, s in enumerate(rng.permutation(n) + rng.random())]
        judged = rng.choice(n + 6, int(rng.integers(1, n + 6)), replace=False)
        qrels += [(f"q{q:02d}", f"d{i:02d}", int(rng.choice([0, 0, 1, 2]))) for i in judged]
        qrels.append((f"q{q:02d}", f"d{int(judged[0]):02d}x", 1))  # a relevant document no run found
    return (pd.DataFrame(run, columns=["query", "item", "score"]),
            pd.DataFrame(qrels, columns=["query", "item", "relevance"]))


def test_trec_eval_parameter_spellings_mean_what_trec_eval_computes():
    """trec_eval's set_F.x (x is beta squared: (x + 1) P R / (x P + R)), iprec_at_recall.x,
    Rprec_mult.x against pytrec_eval's own computation of those names, and their printed names."""
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec_eval (pytrec-eval-terrier) is a test extra")
    from topkeval.metrics.names import trec_name

    run, qrels = _graded_runs(5)
    qrel = {q: dict(zip(g["item"], g["relevance"])) for q, g in qrels.groupby("query")}
    runs = {q: dict(zip(g["item"], g["score"])) for q, g in run.groupby("query")}
    for measure, printed, ours in (("set_F.0.25", "set_F", "set_F.0.25"), ("set_F.4", "set_F", "set_F.4"),
                                   ("iprec_at_recall.0", "iprec_at_recall_0.00", "IPrec@0"),
                                   ("iprec_at_recall.0.5", "iprec_at_recall_0.50", "iprec_at_recall_0.50"),
                                   ("Rprec_mult.0.35", "Rprec_mult_0.35", "Rprec_mult_0.35")):
        theirs = pytrec_eval.RelevanceEvaluator(qrel, {measure}).evaluate(runs)
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=[ours], conventions="pytrec_eval")
        pq = res.per_query.set_index("query")[ours]
        assert sorted(pq.index) == sorted(theirs)
        for q, values in theirs.items():
            assert pq.loc[q] == pytest.approx(values[printed], abs=1e-12), (measure, q)
        if printed != "set_F":
            assert trec_name(ours) == printed
    assert trec_name("set_F.0.25") == "set_F_0.25" and trec_name("set_F.4") == "set_F_4"
    # trec_eval 9 and 10 count the relevant items of level 0.35 differently (docs/conventions.md): the name only
    assert trec_name("iprec(recall=0.35)") == "iprec_at_recall_0.35"


def test_ranx_rbp_spellings_mean_ranx_persistence():
    """ranx's rbp.9 and rbp.5 are the persistence 0.9 and 0.5 (not 0.09): against ranx on binary
    judgments (where its grade-weighted RBP is topkeval's rbp)."""
    ranx = pytest.importorskip("ranx", reason="ranx is a test extra")
    run, qrels = _graded_runs(6)
    qrels = qrels.assign(relevance=(qrels["relevance"] > 0).astype(int))
    qrels = qrels[qrels.groupby("query")["relevance"].transform("sum") > 0]
    run = run[run["query"].isin(qrels["query"])]
    o = {"query": object, "item": object}
    theirs = ranx.evaluate(ranx.Qrels.from_df(qrels.astype(o), q_id_col="query", doc_id_col="item", score_col="relevance"),
                           ranx.Run.from_df(run.astype(o), q_id_col="query", doc_id_col="item", score_col="score"),
                           ["rbp.9", "rbp.5"])
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["rbp.9", "rbp.5"], conventions="ranx")
    assert res.summary.iloc[0].tolist() == pytest.approx([theirs["rbp.9"], theirs["rbp.5"]], abs=1e-12)


def test_f_beta_spellings_by_their_formula():
    """fbeta(beta=1) is f1; fbeta(beta=2)@k is (1 + 4) h / (4 R + k), by hand on one ranking."""
    log = {"query": [1] * 6, "relevance": [1, 0, 1, 0, 0, 1], "s": [6.0, 5, 4, 3, 2, 1]}
    res = tk.evaluate(log, ["fbeta(beta=1)@4", "f1@3", "fbeta(beta=2)@4"], score="s")
    assert res.summary.iloc[0].tolist() == pytest.approx([2 * 2 / (4 + 3), 2 * 2 / (3 + 3), 5 * 2 / (4 * 3 + 4)])


def test_spark_map_spelling_is_sparks_mean_average_precision_at():
    """spark:MAP@k, Spark's RankingMetrics.meanAveragePrecisionAt(k), transcribed (its loop over the
    first k predictions, the precisions at the hits over min(labels, k))."""
    run, qrels = _graded_runs(7)
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["spark:MAP@5", "map@5"], ties="first")
    pq = res.per_query.set_index("query")
    differs = 0
    for q, part in run.groupby("query"):
        labels = set(qrels[(qrels["query"] == q) & (qrels["relevance"] > 0)]["item"])
        if not labels:
            continue
        pred = part.sort_values("score", ascending=False)["item"].tolist()
        hits, total = 0, 0.0
        for i, d in enumerate(pred[:5]):
            if d in labels:
                hits += 1
                total += hits / (i + 1)
        assert pq.loc[q, "spark:MAP@5"] == pytest.approx(total / min(len(labels), 5), abs=1e-12), q
        differs += len(labels) > 5 and total > 0
    assert differs and not pq["spark:MAP@5"].equals(pq["map@5"])  # some query has more than 5 relevant items
