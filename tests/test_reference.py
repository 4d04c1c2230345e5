"""The engine equals the brute-force reference on random logs, for every convention and path."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import topkeval as tk
from paths import evaluate_path
from reference import evaluate_reference
from strategies import DETERMINISTIC_ONLY, SCORES, conventions, logs, metric_specs
from topkeval.conventions import resolve
from topkeval.inputs.grouped import build_log
from topkeval.metrics import FAMILIES
from topkeval.metrics.judged import DETERMINISTIC
from topkeval.metrics.names import parse_metrics


def _close(a, b):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _check(res, rows, specs, conv, models):
    ref_pq, ref_sum = evaluate_reference(rows, specs, conv, models)
    got = {(r.model, r.query): r for r in res.per_query.itertuples(index=False)}
    assert set(got) == set(ref_pq)
    names = [s[0] for s in specs]
    for key, vals in ref_pq.items():
        row = res.per_query[(res.per_query.model == key[0]) & (res.per_query["query"] == key[1])].iloc[0]
        for name in names:
            assert _close(float(row[name]), vals[name]), (key, name, row[name], vals[name])
    for model in models:
        for name in names:
            assert _close(float(res.summary.loc[model, name]), ref_sum[model][name]), (model, name)


def _exact_only(specs, conv, frame):
    """The specs the engine computes under ``conv``; those it refuses (interpolated precision under
    ties="expected") must raise, and are left out (r_precision stands in when none is left)."""
    refused = [s for s in specs if s[1] in DETERMINISTIC_ONLY and conv["ties"] == "expected"]
    for spec in refused:
        with pytest.raises(tk.ParameterError, match="not computed exactly under ties='expected'"):
            tk.evaluate(frame, metrics=[spec[0]], query="query", relevance="grade", score="a", item="item", **conv)
    return [s for s in specs if s not in refused] or [("r_precision", "r_precision", None, None)]


@given(rows=logs(), conv=conventions(), specs=metric_specs())
def test_evaluate_equals_reference(rows, conv, specs):
    models = ["a", "b"]
    df = pd.DataFrame(rows)
    specs = _exact_only(specs, conv, df)
    res = tk.evaluate(df, metrics=[s[0] for s in specs], query="query", relevance="grade",
                      score=models, item="item", **conv)
    assert res.metrics == [s[0] for s in specs]
    _check(res, rows, specs, conv, models)


#: Every family at once, at a cutoff and (where it has one) without, with its parameters: each drawn
#: log checks them all (test_evaluate_equals_reference draws a few families per log).
EVERY_FAMILY = [
    ("r_precision", "r_precision", None, None), ("precision@2", "precision", 2, None),
    ("recall@2", "recall", 2, None), ("recall_capped@2", "recall_capped", 2, None), ("f1@3", "f1", 3, None),
    ("fbeta(beta=0.5)@2", "fbeta", 2, 0.5), ("fbeta(beta=2)@3", "fbeta", 3, 2.0),
    ("specificity@2", "specificity", 2, None), ("fallout@2", "fallout", 2, None), ("hit_rate@2", "hit_rate", 2, None),
    ("tp@2", "tp", 2, None), ("fp@2", "fp", 2, None), ("fn@2", "fn", 2, None), ("tn@2", "tn", 2, None),
    ("ap_capped@2", "ap_capped", 2, None), ("judged@2", "judged", 2, None),
    ("rr", "rr", None, None, None), ("rr@2", "rr", 2, None, None), ("ap", "ap", None, None, None),
    ("ap@3", "ap", 3, None, None), ("ndcg", "ndcg", None, None, None), ("ndcg@3", "ndcg", 3, None, None),
    ("ndcg(gain=exp)@2", "ndcg", 2, None, "exp"), ("dcg(gain={1:3,2:7})", "dcg", None, None, ((1, 3), (2, 7))),
    ("dcg@2", "dcg", 2, None, None), ("rbp(p=0.8)@3", "rbp", 3, 0.8, None),
    ("rbp_residual(p=0.5)", "rbp_residual", None, 0.5, None), ("err@2", "err", 2, 4.0, None),
    ("err(max_grade=6.5)", "err", None, 6.5, None), ("set_precision", "set_precision", None, None, None),
    ("set_recall", "set_recall", None, None, None), ("set_f(beta=0.5)", "set_f", None, 0.5, None),
    ("set_relative_precision", "set_relative_precision", None, None, None), ("num_ret", "num_ret", None, None, None),
    ("num_rel", "num_rel", None, None, None), ("num_rel_ret", "num_rel_ret", None, None, None),
    ("bpref", "bpref", None, None, None), ("auc", "auc", None, None, None),
    ("iprec(recall=0.5)", "iprec", None, 0.5, None), ("iprec(recall=0.3)", "iprec", None, 0.3, None),
    ("iprec_avg", "iprec_avg", None, None, None), ("infap", "infap", None, None, None),
    ("unj@2", "unj", 2, None), ("rbp_resid", "rbp_resid", None, 0.9, None),
    ("utility", "utility", None, None, None),
    ("utility(a=0.5,b=-0.25,c=-1,d=0.5,docs=40)", "utility", None, (0.5, -0.25, -1.0, 0.5, 40.0), None),
    ("gm_map", "gm_map", None, None, None), ("gm_bpref", "gm_bpref", None, None, None),
    ("r_precision_mult(mult=0.35)", "r_precision_mult", None, 0.35, None),
    ("Rprec_mult_1.50", "r_precision_mult", None, 1.5, None), ("bin_g", "bin_g", None, None, None),
    ("g", "g", None, None, None), ("G.0=1,1=3,2=7", "g", None, None, ((0, 1), (1, 3), (2, 7))),
    ("rndcg", "rndcg", None, None, None), ("rndcg(gain=exp)", "rndcg", None, None, "exp"),
    ("Rndcg.1=2,2=2", "rndcg", None, None, ((1, 2), (2, 2))),
    ("ndcg_rel", "ndcg_rel", None, None, None), ("ndcg_rel(gain={-1:2,0:-1,2:5})", "ndcg_rel", None, None,
                                                  ((-1, 2), (0, -1), (2, 5))),
    ("num_nonrel_judged_ret", "num_nonrel_judged_ret", None, None, None),
    ("11pt_avg..25,.5,.75", "iprec_avg", None, (0.25, 0.5, 0.75), None),
    ("set_ap", "set_ap", None, None, None),
    ("insq(T=2,max_rel=3)", "insq", None, {"T": 2.0, "max_rel": 3}, None),
    ("sdcg(min_rel=1,max_rel=3)@2", "sdcg", 2, {"min_rel": 1, "max_rel": 3}),
    ("bpm(max_rel=2)@3", "bpm", 3, {"max_rel": 2}), ("bpm(T=0.5,min_rel=-1,max_rel=2)@9", "bpm", 9,
                                                        {"T": 0.5, "min_rel": -1, "max_rel": 2}),
    ("inst(T=2,max_rel=2)", "inst", None, {"T": 2.0, "max_rel": 2}, None),
    ("nerr8(max_rel=3)@2", "nerr8", 2, {"max_rel": 3}), ("nerr9(min_rel=-1,max_rel=2)@3", "nerr9", 3,
                                                         {"min_rel": -1, "max_rel": 2}),
    ("nerr10(p=0.5,max_rel=3)", "nerr10", None, {"p": 0.5, "max_rel": 3}, None),
    ("nerr11(T=2,max_rel=1)", "nerr11", None, {"T": 2.0, "max_rel": 1}, None),
    ("compat", "compat", None, {"p": 0.95, "normalize": True}, None),
    ("compat(p=0.5,normalize=false)", "compat", None, {"p": 0.5, "normalize": False}, None),
    ("accuracy", "accuracy", None, None, None), ("accuracy@3", "accuracy", 3, None),
    ("ap_found", "ap_found", None, None, None), ("ap_found@3", "ap_found", 3, None),
    ("rbp(p=0.5,gain=linear)@3", "rbp", 3, 0.5, "linear"), ("ndcg(gain=binary)@3", "ndcg", 3, None, "binary"),
    ("yaap", "yaap", None, None, None), ("num_q", "num_q", None, None, None),
    ("rbp_trec", "rbp_trec", None, 0.9, None), ("rbp_trec(p=0.5)", "rbp_trec", None, 0.5, None),
    ("ideal_dcg", "ideal_dcg", None, None, None), ("ideal_dcg(gain={1:3,2:7})@3", "ideal_dcg", 3, None, ((1, 3), (2, 7))),
    ("ndcg_p", "ndcg_p", None, None, None), ("ndcg_p(gain={0:1,1:4})", "ndcg_p", None, None, ((0, 1), (1, 4))),
    ("rbp_weighted(weights={1,0.5,0,2})@3", "rbp_weighted", 3, (1.0, 0.5, 0.0, 2.0), None),
    ("tbg(H=2,max_rel=3)", "tbg", None, {"H": 2.0, "max_rel": 3}, None),
    ("u_measure(L=3,max_rel=3,value=etu)", "u_measure", None, {"L": 3.0, "max_rel": 3, "value": "etu"}, None),
    ("npv(rate=1,max_rel=2,value=etc)", "npv", None, {"rate": 1.0, "max_rel": 2, "value": "etc"}, None),
    ("bpm_dynamic(T=0.5,hb=-0.5,max_rel=2)@4", "bpm_dynamic", 4, {"T": 0.5, "hb": -0.5, "gain_med": 0.5,
                                                                     "max_rel": 2}),
    ("ift_goal(T=1,b1=0.9,R1=10,max_rel=3)", "ift_goal", None, {"T": 1.0, "b1": 0.9, "R1": 10.0, "max_rel": 3}, None),
    ("ift_rate(A=0.2,b2=2,R2=1,max_rel=3,value=ed)", "ift_rate", None,
     {"A": 0.2, "b2": 2.0, "R2": 1.0, "max_rel": 3, "value": "ed"}, None),
    ("ift(T=2,b1=0.9,R1=0.5,A=0.5,b2=0.9,R2=10,max_rel=3)", "ift", None,
     {"T": 2.0, "b1": 0.9, "R1": 0.5, "A": 0.5, "b2": 0.9, "R2": 10.0, "max_rel": 3}, None),
    ("trap(max_rel=3)", "trap", None, {"max_rel": 3}, None), ("trap(max_rel=2,value=etu)", "trap", None,
                                                               {"max_rel": 2, "value": "etu"}, None),
    ("insq(max_rel=3,value=etu)", "insq", None, {"max_rel": 3, "value": "etu"}, None),
    ("sdcg(max_rel=3,value=ed)@3", "sdcg", 3, {"max_rel": 3, "value": "ed"}),
    ("inst(max_rel=2,value=etc)", "inst", None, {"max_rel": 2, "value": "etc"}, None),
]


def test_every_registered_family_is_checked_against_the_reference():
    """A family registered in topkeval.metrics is drawn by the strategies at once (tests/strategies.py
    reads the registry) and must be in EVERY_FAMILY, computed by tests/reference.py."""
    from strategies import BUILT_IN, FAMILIES_K, UNCUT

    assert set(BUILT_IN) == {spec[1] for spec in EVERY_FAMILY}
    assert set(BUILT_IN) == set(FAMILIES_K) | set(UNCUT) | {"r_precision"}


@given(rows=logs(), conv=conventions())
def test_every_family_equals_reference(rows, conv):
    models = ["a", "b"]
    df = pd.DataFrame(rows)
    specs = _exact_only(EVERY_FAMILY, conv, df)
    res = tk.evaluate(df, metrics=[s[0] for s in specs], query="query", relevance="grade",
                      score=models, item="item", **conv)
    assert res.metrics == [s[0] for s in specs]
    _check(res, rows, specs, conv, models)


#: the families read from h(k), the hit probability and h(R) alone: a plan of only these under ties="expected"
#: takes the kernel's shortest accumulation for queries without ties (kernels.cpu._accumulate_untied)
PLAIN = [spec for spec in EVERY_FAMILY
         if set(FAMILIES[spec[1]].needs) <= {"h", "hit", "h_at_r"} and FAMILIES[spec[1]].ips != "pooled"]


@given(rows=logs(), conv=conventions(), untie=st.booleans(), expected=st.booleans(), data=st.data())
def test_set_metrics_alone_equal_reference(rows, conv, untie, expected, data):
    """Set metrics without a rank metric or a gain (the kernel's shortest path where no candidate is tied),
    on scores with ties and, drawn distinct, without, under every convention (half the examples under
    ties="expected", where a tie is counted in expectation)."""
    models = ["a", "b"]
    if expected:
        conv = dict(conv, ties="expected")
    if untie:  # distinct scores: a random order of the rows
        order = data.draw(st.permutations(range(len(rows))))
        rows = [{**row, "a": float(order[i]), "b": float(-order[i] * 2.5)} for i, row in enumerate(rows)]
    df = pd.DataFrame(rows)
    specs = _exact_only(PLAIN, conv, df)
    res = tk.evaluate(df, metrics=[s[0] for s in specs], query="query", relevance="grade",
                      score=models, item="item", **conv)
    _check(res, rows, specs, conv, models)


@given(rows=logs(max_len=6), conv=conventions(), specs=metric_specs())
def test_both_kernel_paths_equal_reference(rows, conv, specs):
    """Force the counting path and the sorting path in turn."""
    models = ["a", "b"]
    df = pd.DataFrame(rows)
    specs = _exact_only(specs, conv, df)
    log = build_log(df["query"].to_numpy(), df["grade"].to_numpy(), {m: df[m].to_numpy() for m in models},
                    df["item"].to_numpy(), names=dict(query="query", relevance="grade", item="item"))
    mets = parse_metrics([s[0] for s in specs])
    for path in (1, 2):
        res = evaluate_path(log, mets, resolve(**conv), path)
        _check(res, rows, specs, conv, models)


def test_long_query_sort_path_with_many_relevant():
    """A query of 3,000 candidates and ~1,000 relevant takes the sorting path; counting agrees."""
    rng = np.random.default_rng(3)
    n = 3000
    scores = rng.integers(0, 40, n).astype(float)  # heavy ties
    grades = (rng.random(n) < 0.33).astype(int)
    items = rng.permutation(n)
    mets = parse_metrics(["recall@10", "precision@100", "hit_rate@1", "r_precision", "f1@1000"])
    log = build_log(np.zeros(n, int), grades, {"m": scores}, items, names=dict(query="q", relevance="g", item="i"))
    for ties in ("expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc"):
        conv = resolve(ties=ties)
        a = evaluate_path(log, mets, conv, 1, threads=None).per_query
        b = evaluate_path(log, mets, conv, 2, threads=None).per_query
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_expected_ties_formula_by_hand():
    """A tie group of t=4 candidates with r=2 relevant taking m=2 of the top-3 slots adds r*m/t = 1."""
    rel = [1, 1, 0, 0, 0]
    scores = [0.5, 0.5, 0.5, 0.5, 0.9]  # item 4 alone on top, then the tie group
    assert tk.precision_at_k([0] + rel[:4], [0.9] + scores[:4], 3) == 1 / 3
    assert tk.recall_at_k(rel, scores, 3) == 0.5
    # hit@2: one slot out of 4 with 2 relevant: 1 - C(2,1)/C(4,1) = 1/2
    res = tk.evaluate({"query": [0] * 5, "relevance": rel, "score": scores}, metrics=["hit_rate@2", "hit_rate@3"])
    assert res.summary.iloc[0].tolist() == [0.5, 1 - (2 / 4) * (1 / 3)]


@pytest.mark.parametrize("seed", range(30))
def test_sort_path_selection_equals_counting(seed):
    """Lists much longer than the cutoffs: the sorting path sorts only the selected top (ties kept
    whole at the boundary); the counting path looks at every candidate. They must agree."""
    rng = np.random.default_rng(seed)
    n_q, n = 20, 60
    scores = rng.integers(0, 6, n_q * n).astype(float)  # many ties, also across the boundary
    grades = rng.choice([0, 0, 1, 2], n_q * n)
    items = np.tile(rng.permutation(n), n_q)
    query = np.repeat(np.arange(n_q), n)
    log = build_log(query, grades, {"m": scores}, items, names=dict(query="q", relevance="g", item="i"))
    mets = parse_metrics(["recall@3", "precision@1", "hit_rate@2", "ndcg@4", "ap@5", "rr@2", "dcg(gain=exp)@3",
                          "specificity@5"] + (["r_precision"] if seed % 2 else []))
    for ties in ("expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc"):
        conv = resolve(ties=ties, score_threshold=1.0 if seed % 3 == 0 else None)
        a = evaluate_path(log, mets, conv, 1, threads=None)
        b = evaluate_path(log, mets, conv, 2, threads=None)
        pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=False, rtol=1e-12, atol=1e-12)
        assert a.info["ties_at_cutoff"] == b.info["ties_at_cutoff"]


@st.composite
def runs_and_judgments(draw):
    """A run (query, item, a) and judgments (query, item, grade) over overlapping items: retrieved
    items without a judgment, judged items never retrieved, negative grades (in the pool, unjudged)."""
    run, judged = [], {}
    for q in range(draw(st.integers(1, 4))):
        items = draw(st.permutations(list(range(10))))
        n = draw(st.integers(1, 6))
        for item in items[:n]:
            run.append({"query": f"q{q}", "item": item, "a": draw(SCORES)})
        for item in items[: draw(st.integers(1, 9))]:
            if draw(st.booleans()):
                judged[(f"q{q}", item)] = draw(st.sampled_from([-1, 0, 0, 1, 2, 3]))
    if not judged:
        judged[("q0", 0)] = 1
    return run, judged


@given(data=runs_and_judgments(), conv=conventions(), specs=metric_specs())
def test_judgments_apart_equal_reference(data, conv, specs):
    """evaluate(run, qrels=...) on the reference: a retrieved item without a judgment is unjudged
    (judged@k, bpref tell it from a judged non-relevant one), R and the judged non-relevant items
    count judged items never retrieved."""
    run, judged = data
    qrels = pd.DataFrame([{"query": q, "item": i, "grade": g} for (q, i), g in judged.items()])
    specs = _exact_only(specs, conv, pd.DataFrame([dict(r, grade=0) for r in run]))
    rows = [dict(r, grade=judged.get((r["query"], r["item"]), 0), judged=(r["query"], r["item"]) in judged)
            for r in run]
    judgments: dict = {}
    for (q, _), g in sorted(judged.items()):
        judgments.setdefault(q, []).append(g)
    shared = {r["query"] for r in run}
    judgments = {q: g for q, g in judgments.items() if q in shared}  # missing_queries="skip"
    if not judgments:
        return
    try:
        res = tk.evaluate(pd.DataFrame(run), qrels=qrels, metrics=[s[0] for s in specs], query="query",
                          relevance="grade", score="a", item="item", **conv)
    except tk.EmptyQueryError:
        assert conv["empty_queries"] == "error"
        return
    ref_pq, ref_sum = evaluate_reference(rows, specs, conv, ["a"], judgments=judgments)
    got = res.per_query.set_index("query")
    assert set(got.index) == {q for _, q in ref_pq}
    for (_, q), vals in ref_pq.items():
        for name, value in vals.items():
            assert _close(float(got.loc[q, name]), value), (q, name, got.loc[q, name], value)
    for name, value in ref_sum["a"].items():
        assert _close(float(res.summary.iloc[0][name]), value), name


@given(data=runs_and_judgments(), conv=conventions(), specs=metric_specs(),
       threshold=st.sampled_from([0, 0.0, -0.5, -1, -2]))
def test_judgments_apart_under_a_threshold_at_or_below_zero_equal_reference(data, conv, specs, threshold):
    """A relevance threshold of 0 or less: a judged item of grade 0 (and of a negative grade at or above
    the threshold) is relevant, a retrieved item without a judgment never is (its filler grade 0 would
    pass the threshold; trec_eval: only a judged document can be relevant)."""
    test_judgments_apart_equal_reference.hypothesis.inner_test(data, dict(conv, threshold=threshold), specs)


def test_unjudged_documents_are_never_relevant_whatever_the_threshold():
    """By hand: x is unjudged, a judged 0, b judged 1, c judged -1 and never retrieved. Under a threshold of
    0, a and b are relevant (R = 2: recall and AP at most 1, as pytrec_eval and the msmarco script count);
    under -1, c too (R = 3)."""
    run = pd.DataFrame({"query": "q", "item": ["x", "a", "b"], "score": [3.0, 2.0, 1.0]})
    qrels = pd.DataFrame({"query": "q", "item": ["a", "b", "c"], "relevance": [0, 1, -1]})
    metrics = ["recall@3", "P@3", "ap", "rr", "bpref", "hit_rate@1"]
    for threshold, want in ((0, [1.0, 2 / 3, (1 / 2 + 2 / 3) / 2, 1 / 2, 1.0, 0.0]),
                            (-1, [2 / 3, 2 / 3, (1 / 2 + 2 / 3) / 3, 1 / 2, 2 / 3, 0.0])):
        for ties in DETERMINISTIC + ("expected",):
            res = tk.evaluate(run, qrels=qrels, item="item", metrics=metrics, threshold=threshold, ties=ties)
            assert res.summary.iloc[0].tolist() == pytest.approx(want, abs=1e-15), (threshold, ties)
        named = tk.evaluate(run, qrels=qrels, item="item", metrics=[f"recall(rel={threshold})@3", f"ap(rel={threshold})"])
        assert named.summary.iloc[0].tolist() == pytest.approx([want[0], want[2]], abs=1e-15)


@given(data=runs_and_judgments(), conv=conventions(), ties=st.sampled_from(DETERMINISTIC))
def test_infap_with_sampled_pools_equals_reference(data, conv, ties):
    """infAP on runs against judgments with all four kinds of retrieved items: relevant, judged
    non-relevant, in the pool but not judged (grade -1) and outside the pool (no judgment)."""
    run, judged = data
    conv = dict(conv, ties=ties)
    specs = [("infap", "infap", None, None), ("bpref", "bpref", None, None)]
    qrels = pd.DataFrame([{"query": q, "item": i, "grade": g} for (q, i), g in judged.items()])
    rows = [dict(r, grade=judged.get((r["query"], r["item"]), 0), judged=(r["query"], r["item"]) in judged)
            for r in run]
    judgments: dict = {}
    for (q, _), g in sorted(judged.items()):
        judgments.setdefault(q, []).append(g)
    judgments = {q: g for q, g in judgments.items() if q in {r["query"] for r in run}}
    if not judgments:
        return
    res = tk.evaluate(pd.DataFrame(run), qrels=qrels, metrics=["infap", "bpref"], query="query", relevance="grade",
                      score="a", item="item", **conv)
    ref_pq, ref_sum = evaluate_reference(rows, specs, conv, ["a"], judgments=judgments)
    got = res.per_query.set_index("query")
    assert set(got.index) == {q for _, q in ref_pq}
    for (_, q), vals in ref_pq.items():
        assert _close(float(got.loc[q, "infap"]), vals["infap"]), (q, got.loc[q, "infap"], vals["infap"])
    assert _close(float(res.summary.iloc[0]["infap"]), ref_sum["a"]["infap"])


def test_infap_by_hand():
    """Ranks: 1 relevant, 2 grade -1 (pooled, not judged), 3 no judgment (outside the pool),
    4 relevant, 5 judged non-relevant; a third relevant item is never retrieved (R = 3).
    Rank 1 gives 1; rank 4 gives 1/4 + (3/4) (2/3) (1 + eps) / (1 + 2 eps): 2 of the 3 ranks above
    are in the pool, 1 of the 1 judged above is relevant."""
    run = pd.DataFrame({"query": "q", "item": ["a", "b", "c", "d", "e"], "score": [5.0, 4.0, 3.0, 2.0, 1.0]})
    qrels = pd.DataFrame({"query": "q", "item": ["a", "b", "d", "e", "f"], "relevance": [1, -1, 2, 0, 1]})
    eps = 1e-5
    want = (1 + 1 / 4 + (3 / 4) * (2 / 3) * (1 + eps) / (1 + 2 * eps)) / 3
    for ties in DETERMINISTIC:
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=["infAP"], ties=ties)
        assert res.summary.iloc[0]["infAP"] == pytest.approx(want, rel=1e-14), ties
    # grade -1 read as judged non-relevant would give 1/4 + (3/4) (2/3) (1 + eps) / (2 + 2 eps) instead
    as_zero = tk.evaluate(run, qrels=qrels.replace({"relevance": {-1: 0}}), item="item", metrics=["infap"],
                          ties="first")
    assert as_zero.summary.iloc[0]["infap"] == pytest.approx(
        (1 + 1 / 4 + (3 / 4) * (2 / 3) * (1 + eps) / (2 + 2 * eps)) / 3, rel=1e-14)
    with pytest.raises(tk.ParameterError, match="infap is not computed exactly under ties='expected'"):
        tk.evaluate(run, qrels=qrels, item="item", metrics=["infap"], ties="expected")


def test_rbp_residual_by_hand():
    """Moffat & Zobel's residual: a (relevant), b (unjudged), c (judged non-relevant), d (unjudged), p = 0.5:
    rbp = 0.5 * 0.5**0; residual = 0.5 * (0.5**1 + 0.5**3) + 0.5**4 (every rank past the list) = 0.375;
    at k = 2: 0.5 * 0.5**1 + 0.5**2 = 0.5. A log without judgments apart has only the tail, p**n."""
    import topkeval as tk

    run = {"query": [1, 1, 1, 1], "item": ["a", "b", "c", "d"], "score": [4.0, 3.0, 2.0, 1.0]}
    qrels = {"query": [1, 1, 1], "item": ["a", "c", "z"], "relevance": [1, 0, 1]}
    res = tk.evaluate(run, ["rbp(p=0.5)", "rbp_residual(p=0.5)", "rbp_residual(p=0.5)@2"], item="item", qrels=qrels)
    assert res.summary.iloc[0].tolist() == [0.5, 0.375, 0.5]
    plain = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 0, 0], "score": [3.0, 2.0, 1.0]},
                        ["rbp_residual(p=0.8)", "rbp_residual(p=0.8)@2"])
    assert plain.summary.iloc[0].tolist() == pytest.approx([0.8**3, 0.8**2], rel=1e-15)


@pytest.mark.parametrize("negative_grades", ["zero", "gain"])
@pytest.mark.parametrize("ties", ["expected", "first", "pessimistic", "ranx"])
def test_gain_maps_on_a_score_matrix(ties, negative_grades):
    """A gain map that gives grade 0 a gain counts every non-excluded cell of a score matrix (each
    is judged, grade 0), in the DCG and in the ideal DCG, as in the long format; negative gains
    count in the DCG only (trec_eval), or in the ideal too, after the cells of grade 0
    (negative_grades="gain", torchmetrics). Matrix, long format and reference agree."""
    rng = np.random.default_rng(12)
    users, items = 7, 6
    scores = rng.integers(0, 3, (users, items)) / 2
    grades = rng.choice([-2, -1, 0, 0, 0, 1, 2], (users, items))
    grades[0] = np.minimum(grades[0], 0)  # a user without a relevant item: an ideal DCG from grade 0 alone
    exclude = (rng.random((users, items)) < 0.2) & (grades == 0)
    metrics = ["ndcg(gain={0:1,2:5})@3", "ndcg(gain={0:1})", "dcg(gain={0:1,1:3})@2", "ndcg(gain={0:-1,1:2})@4",
               "ndcg(gain={0:-0.5})", "ndcg@3", "ndcg", "dcg@4"]
    conv = dict(ties=ties, empty_queries="keep", negative_grades=negative_grades)
    got = tk.evaluate_matrix(scores, grades, metrics, exclude=exclude, **conv).per_query.set_index("user")
    u, i = np.nonzero(~exclude)
    long = pd.DataFrame({"query": u, "item": i, "grade": grades[u, i], "a": scores[u, i]})
    want = tk.evaluate(long, metrics, relevance="grade", score="a", item="item", **conv)
    pd.testing.assert_frame_equal(got.loc[want.per_query["query"], want.metrics].reset_index(drop=True),
                                  want.per_query[want.metrics], check_exact=False, rtol=1e-12, atol=1e-12)
    if negative_grades == "zero":
        assert (got["ndcg(gain={0:1})"] <= 1 + 1e-12).all() and got.loc[0, "ndcg(gain={0:1})"] > 0
    if ties == "expected":
        return  # the reference enumerates every order of these heavy ties: too many
    full = resolve(**conv).as_dict()
    specs = [(m, tk.parse_metric(m).family, tk.parse_metric(m).k, None, tk.parse_metric(m).param("gain"))
             for m in metrics]
    ref, _ = evaluate_reference(long.to_dict("records"), specs, full, ["a"])
    for (_, q), values in ref.items():
        for name, value in values.items():
            assert _close(float(got.loc[q, name]), value), (q, name, got.loc[q, name], value)


def test_trec_eval_rbp_resid_and_unj_by_hand():
    """trec_eval's rbp_resid (m_rbp_resid.c) and unj_k (m_unjudged.c): unjudged means no judgment or a
    negative grade. Query 1: a (relevant), b (no judgment), c (judged 0), d (grade -1), p = 0.5:
    0.5**4 + 0.5 (0.5**1 + 0.5**3) = 0.375; unj@2 = 1/2, unj@10 = 2/10 (judged@10 = 3/10: a list
    shorter than k, and a negative grade, keep unj@k from being 1 - judged@k). Query 2, fully
    judged: rbp_resid 0 where Moffat & Zobel's residual (rbp_residual: grade -1 is a judgment there)
    keeps the tail p**n. Query 3, judged but
    absent from the run, under missing_queries="zero" (trec_eval -c): 0 (its residual: 1)."""
    run = pd.DataFrame({"query": ["1"] * 4 + ["2"] * 2, "item": ["a", "b", "c", "d", "a", "b"],
                        "score": [4.0, 3.0, 2.0, 1.0, 2.0, 1.0]})
    qrels = pd.DataFrame({"query": ["1", "1", "1", "2", "2", "3"], "item": ["a", "c", "d", "a", "b", "z"],
                          "relevance": [1, 0, -1, 1, 0, 1]})
    metrics = ["rbp_resid(p=0.5)", "unj@2", "unj_10", "judged@10", "rbp_residual(p=0.5)", "rbp_resid"]
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=metrics, conventions="trec_eval",
                      missing_queries="zero")
    pq = res.per_query.set_index("query")[res.metrics]
    assert pq.loc["1"].tolist()[:5] == pytest.approx([0.375, 0.5, 0.2, 0.3, 0.5 * 0.5 + 0.5**4])
    assert pq.loc["1", "rbp_resid"] == pytest.approx(0.9**4 + 0.1 * (0.9 + 0.9**3), rel=1e-14)
    assert pq.loc["2"].tolist() == [0.0, 0.0, 0.0, 0.2, 0.25, 0.0]
    assert pq.loc["3"].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    # judged_only (trec_eval -J) leaves nothing unjudged: 0
    only = tk.evaluate(run, qrels=qrels, item="item", metrics=["rbp_resid", "unj@2"], judged_only=True)
    assert (only.per_query[["rbp_resid", "unj@2"]] == 0).all().all()


def test_trec_eval_measures_by_hand():
    """trec_eval's other measures on one query: ranks a (grade 2), b (0), c (-1: in the pool, not
    judged), d (no judgment), e (1), f (0); z (grade 3) is never retrieved: R = 3, n = 6, r = 2."""
    from math import log, log2

    run = pd.DataFrame({"query": "q", "item": list("abcdef"), "score": [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]})
    qrels = pd.DataFrame({"query": "q", "item": list("abcefz"), "relevance": [2, 0, -1, 1, 0, 3]})
    ideal3 = 3 + 2 / log2(3) + 1 / 2  # ideal gains 3, 2, 1
    want = {
        "set_map": 2 * 2 / (6 * 3),
        "utility": 2 - 4,
        "utility(a=2,b=-1,c=0.5,d=0.25,docs=20)": 2 * 2 - 4 + 0.5 * (3 - 2) + 0.25 * (20 - 6 - 3 + 2),
        "num_nonrel_judged_ret": 2,  # b and f: c's grade is -1, d has none
        "binG": (1 + 1 / log2(2 + 3)) / 3,  # e has b, c, d above it
        "Rprec_mult_0.20": 1.0,  # floor(0.6 + 0.9) = 1
        "r_precision_mult(mult=1)": 1 / 3,  # floor(3.9) = 3
        "r_precision_mult(mult=2)": 2 / 6,
        "r_precision_mult(mult=3)": 2 / 9,  # floor(9.9) = 9 > n: the missing ranks non-relevant
        "r_precision_mult(mult=0.02)": 0.0,  # floor(0.96) = 0: undefined
        "gm_map": log((1 + 2 / 5) / 3),
        "gm_bpref": log((1 + (1 - 1 / 2)) / 3),  # NJ = 2 (b, f); e has b above it
        # the ideal costs 3, 2, 1 then 1 a rank: S = 2 at rank 1 (cost 3), S = 3 at rank 5 (cost 8)
        "G": (2 / log2(2 + 3 - 2) + 1 / log2(2 + 8 - 3)) / 6,
        # the R levels 1, 2, 3 (gains 3, 2, 1), and n = 6 >= 3 + 2
        "Rndcg": (2 / 3 + 2 / (3 + 2 / log2(3)) + 2 / ideal3 + (2 + 1 / log2(6)) / ideal3) / 4,
        # a at rank 1, e at rank 5, z never retrieved: the whole list's nDCG
        "ndcg_rel": (2 / 3 + 2 * (2 + 1 / log2(6)) / ideal3) / 3,
        "11pt_avg.0.5,1": (2 / 5 + 0) / 2,  # lround(1.5) = 2: 2/5 at e; 3 > r: 0
    }
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=list(want), ties="item_desc", empty_queries="keep")
    got = res.per_query.iloc[0]
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-14, abs=1e-15), name
    # grade 0 gains 1: b and f do, d (no judgment) does not; ideal gains 3, 2, 1, 1, 1; gains at ranks 1, 2, 5, 6
    i5 = 3 + 2 / log2(3) + 1 / 2 + 1 / log2(5) + 1 / log2(6)
    d5 = 2 + 1 / log2(3) + 1 / log2(6)
    zero = tk.evaluate(run, qrels=qrels, item="item", metrics=["ndcg_rel(gain={0:1})"], ties="first")
    assert zero.per_query.iloc[0, -1] == pytest.approx(
        (2 / 3 + (2 + 1 / log2(3)) / (3 + 2 / log2(3)) + d5 / i5 + 2 * (d5 + 1 / log2(7)) / i5) / 5, rel=1e-14)
    # a judged query absent from the run (three relevant items) is an empty list: 11pt_avg's levels that
    # count no relevant item (lround(x R) = 0) are undefined there, the others 0
    absent = pd.concat([qrels, pd.DataFrame({"query": "q2", "item": list("xyz"), "relevance": 1})])
    empty = tk.evaluate(run, qrels=absent, item="item", metrics=["11pt_avg.0.5,1", "11pt_avg", "11pt_avg.0.1,1"],
                        ties="first", missing_queries="zero", undefined="nan").per_query.set_index("query")
    assert empty.loc["q2", "11pt_avg.0.5,1"] == 0.0
    assert np.isnan(empty.loc["q2", "11pt_avg"]) and np.isnan(empty.loc["q2", "11pt_avg.0.1,1"])
    # no relevant item (grade >= 2 relevant) but a positive gain: Rndcg is undefined (trec_eval returns
    # at once), G and ndcg_rel are not: gain 1 at rank 1 of an ideal list of one gain 1
    ones = {"query": [1, 1], "item": [1, 2], "relevance": [1, 0], "score": [2.0, 1.0]}
    some = tk.evaluate(ones, ["Rndcg", "G", "ndcg_rel"], item="item", threshold=2, empty_queries="keep",
                       undefined="nan", ties="first").per_query.iloc[0]
    assert np.isnan(some["Rndcg"]) and some["G"] == 1.0 and some["ndcg_rel"] == 1.0
    shrink = tk.evaluate(run, qrels=qrels, item="item", metrics=["r_precision_mult(mult=3)"], ties="first",
                         short_lists="shrink")
    assert shrink.per_query.iloc[0, -1] == pytest.approx(2 / 6, rel=1e-15)
    with pytest.raises(tk.ShortListError, match="floor"):
        tk.evaluate(run, qrels=qrels, item="item", metrics=["r_precision_mult(mult=3)"], ties="first",
                    short_lists="error")


def test_trec_eval_measures_under_expected_ties_by_hand():
    """Three tied candidates, one relevant (grade 1): binG's X is uniform on 0..2, the relevant one
    is in the top floor(1 + 0.9) = 1 with chance 1/3, and Rndcg's expected DCG gives each rank the
    mean gain 1/3 (its level at 1, and at n = 3 >= 1 + 2)."""
    from math import log2

    log = {"query": [1, 1, 1], "item": [1, 2, 3], "relevance": [1, 0, 0], "score": [0.5, 0.5, 0.5]}
    res = tk.evaluate(log, ["binG", "Rprec_mult_1.00", "Rndcg"], item="item")
    got = res.per_query.iloc[0]
    assert got["binG"] == pytest.approx((1 + 1 / log2(3) + 1 / 2) / 3, rel=1e-15)
    assert got["Rprec_mult_1.00"] == pytest.approx(1 / 3, rel=1e-15)
    assert got["Rndcg"] == pytest.approx((1 / 3 + (1 + 1 / log2(3) + 1 / 2) / 3) / 2, rel=1e-15)
    for refused in ("G", "ndcg_rel", "gm_map", "gm_bpref"):
        with pytest.raises(tk.ParameterError, match="not computed exactly under ties='expected'"):
            tk.evaluate(log, [refused], item="item")


def test_skipped_queries_leave_every_statistic_of_the_others_in_place():
    """A query without a relevant item between others is skipped; under short_lists='error' the
    statistics are cut to the evaluated queries before the metrics read them (every kind: counts,
    DCG, ERR, the second pass, sequences): each value is the one of the log without that query."""
    log = pd.DataFrame({"query": [1, 1, 1, 2, 2, 2, 3, 3, 3], "relevance": [2, 0, 1, 0, 0, 0, 0, 3, 1],
                        "score": [0.9, 0.5, 0.1, 0.8, 0.2, 0.4, 0.9, 0.7, 0.4]})
    metrics = ["ndcg@3", "dcg@2", "err@3", "rbp(p=0.5)@3", "bpref", "rr", "ap@3", "auc", "nerr10(max_rel=3)"]
    got = tk.evaluate(log, metrics, short_lists="error", ties="first").per_query
    want = tk.evaluate(log[log["query"] != 2], metrics, short_lists="error", ties="first").per_query
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
    assert got["ndcg@3"].tolist() == pytest.approx([(2 + 1 / 2) / (2 + 1 / math.log2(3)),
                                                     (3 / math.log2(3) + 1 / 2) / (3 + 1 / math.log2(3))])


def test_dynamic_bpm_reaches_a_goal_exactly_as_cwl_eval_does():
    """Gains 0, 1/3, 1 under T = 1, hb = -0.5, gain_med = 0.5: after rank 2 the goal is 1 + 0.25 + 1/12, and
    the gain seen at rank 3 is 4/3: equal in exact arithmetic, and compared in cwl_eval's floating point (the
    goal moved rank by rank), which stops after rank 3 (EU = (0 + 1/3 + 1) / 3). A goal written in closed form
    rounds the other way and read on to rank 4 (hypothesis found it: 0.3333 against 0.4444)."""
    log = pd.DataFrame({"query": ["q"] * 6, "item": [3, 4, 5, 0, 1, 2], "grade": [0, 1, 3, 0, 0, 0],
                        "score": [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]})
    res = tk.evaluate(log, ["bpm_dynamic(hb=-0.5,max_rel=3)@4"], relevance="grade", item="item",
                      ties="pessimistic")
    assert res.per_query.iloc[0, -1] == pytest.approx(4 / 9, abs=1e-15)
    cwl = pytest.importorskip("cwl.ruler.measures.cwl_bpm", reason="cwl-eval is a test extra")

    class Ranking:  # cwl_eval's interface: the gains and costs of the first 1000 ranks
        def get_gain_vector(self, worse_case=True):
            return np.array([0.0, 1 / 3, 1.0] + [0.0] * 997)

        def get_cost_vector(self, worse_case=True):
            return np.ones(1000)

    c = cwl.BPMDCWLMetric(T=1, K=4, hb=-0.5, gain_med=0.5).c_vector(Ranking())
    assert c[:4].tolist() == [1.0, 1.0, 0.0, 0.0]  # it stops after rank 3, as topkeval does
