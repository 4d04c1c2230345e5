"""Cross-checks against other evaluators where they implement the same convention."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec_eval (pytrec-eval-terrier) is a test extra")

pytestmark = pytest.mark.peers


def _random_log(seed, ties):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(40):
        n = int(rng.integers(1, 30))
        items = rng.choice(200, n, replace=False)
        scores = rng.integers(0, 6, n) / 2 if ties else rng.permutation(n) + rng.random()
        grades = rng.choice([0, 0, 0, 1, 2], n)
        rows += [(f"q{q:02d}", f"d{it:03d}", float(s), int(g)) for it, s, g in zip(items, scores, grades)]
    return pd.DataFrame(rows, columns=["query", "item", "score", "grade"])


def _as_dicts(frame) -> dict:
    """{query: {item: value}} of a (query, item, value) frame, as pytrec_eval takes runs and judgments."""
    out: dict = {}
    for q, d, v in frame.itertuples(index=False):
        out.setdefault(q, {})[d] = v
    return out


def _partial_judgments(rng, queries: int, pool: int, grades: list[int]):
    """A run with heavy ties and unjudged documents; judgments with relevant documents no run found."""
    run_rows, qrel_rows = [], []
    for q in range(queries):
        docs = [f"d{i:03d}" for i in rng.choice(pool, 60 if pool > 100 else 40, replace=False)]
        run_rows += [(f"q{q}", d, float(rng.integers(0, 8)) / 2) for d in docs[: int(rng.integers(1, 40))]]
        qrel_rows += [(f"q{q}", d, int(rng.choice(grades))) for d in rng.choice(docs, int(rng.integers(1, 40)),
                                                                                 replace=False)]
    return (pd.DataFrame(run_rows, columns=["query", "item", "score"]),
            pd.DataFrame(qrel_rows, columns=["query", "item", "relevance"]))


def _pytrec(frame, measures):
    qrel, run = {}, {}
    for q, it, s, g in frame.itertuples(index=False):
        qrel.setdefault(q, {})[it] = g
        run.setdefault(q, {})[it] = s
    return pytrec_eval.RelevanceEvaluator(qrel, measures).evaluate(run)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [False, True])
def test_trec_eval_preset_equals_pytrec_eval(seed, ties):
    frame = _random_log(seed, ties)
    ref = _pytrec(frame, {"P.1,5,10,50", "recall.1,5,10,50", "Rprec", "success.1,5,10"})
    metrics = ["P@1", "P@5", "P@10", "P@50", "R@1", "R@5", "R@10", "R@50", "Rprec", "success@1", "success@5",
               "success@10"]
    trec_names = ["P_1", "P_5", "P_10", "P_50", "recall_1", "recall_5", "recall_10", "recall_50", "Rprec",
                  "success_1", "success_5", "success_10"]
    res = tk.evaluate(frame, metrics=metrics, query="query", relevance="grade", score="score", item="item",
                      conventions="trec_eval")
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted(ref)
    for q, values in ref.items():
        for ours, theirs in zip(res.metrics, trec_names):
            assert pq.loc[q, ours] == pytest.approx(values[theirs], abs=1e-12), (q, ours)
    for ours, theirs in zip(res.metrics, trec_names):
        assert res.summary.iloc[0][ours] == pytest.approx(np.mean([v[theirs] for v in ref.values()]), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_default_conventions_equal_pytrec_eval_without_ties(seed):
    """Without ties and with every query holding a relevant item, the defaults agree with trec_eval."""
    frame = _random_log(seed, ties=False)
    has_rel = frame.groupby("query")["grade"].transform("max") > 0
    frame = frame[has_rel]
    ref = _pytrec(frame, {"P.5,10", "recall.5,10", "Rprec"})
    res = tk.evaluate(frame, metrics=["precision@5", "precision@10", "recall@5", "recall@10", "r_precision"],
                      query="query", relevance="grade", score="score")
    expected = [np.mean([v[m] for v in ref.values()]) for m in ["P_5", "P_10", "recall_5", "recall_10", "Rprec"]]
    assert res.summary.iloc[0].tolist() == pytest.approx(expected, abs=1e-12)


TREC_COMMON = {"P_5": "precision@5", "P_10": "precision@10", "recall_5": "recall@5", "recall_100": "recall@100",
               "Rprec": "r_precision", "recip_rank": "rr", "map": "ap", "map_cut_10": "ap@10", "ndcg": "ndcg",
               "ndcg_cut_5": "ndcg@5", "ndcg_cut_10": "ndcg@10", "success_1": "hit_rate@1", "success_5": "hit_rate@5",
               "num_ret": "num_ret", "num_rel": "num_rel", "num_rel_ret": "num_rel_ret"}


@pytest.mark.parametrize("seed", range(6))
def test_trec_eval_preset_with_partial_judgments_and_ties(seed):
    """Runs with heavy ties and unjudged documents, judgments with relevant documents no run found."""
    run, qrels = _partial_judgments(np.random.default_rng(100 + seed), queries=30, pool=300, grades=[0, 1, 2, 3])
    run_rows = list(run.itertuples(index=False, name=None))
    run_rows.append(("q_unjudged", "d000", 1.0))  # a query without judgments: trec_eval ignores it
    run = pd.DataFrame(run_rows, columns=["query", "item", "score"])
    qrel_dict, run_dict = _as_dicts(qrels), _as_dicts(run)
    measures = {"P.5,10", "recall.5,100", "Rprec", "recip_rank", "map", "map_cut.10", "ndcg", "ndcg_cut.5,10",
                "success.1,5", "num_ret", "num_rel", "num_rel_ret"}
    ref = pytrec_eval.RelevanceEvaluator(qrel_dict, measures).evaluate(run_dict)
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=list(TREC_COMMON.values()), conventions="trec_eval")
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted(ref)
    for q, values in ref.items():
        for theirs, ours in TREC_COMMON.items():
            assert pq.loc[q, ours] == pytest.approx(values[theirs], abs=1e-9), (q, theirs)
    assert res.info["run_queries_without_judgments"] == {"score": 1}


@pytest.mark.parametrize("seed", range(4))
def test_pytrec_eval_compares_float32_scores_and_docnos_as_text(seed):
    """pytrec_eval (trec_eval 9 inside) stores scores as C floats: two scores equal in float32 tie,
    and trec_eval breaks ties by docno descending with strcmp, even when docnos are numbers
    ("9" > "100" > "10")."""
    rng = np.random.default_rng(200 + seed)
    rows = []
    for q in range(25):
        n = int(rng.integers(2, 30))
        items = rng.choice([9, 10, 100, 99, 1000, 5, 50, 500, 7, 70, 700, 3, 30, 300, 1, 11, 111], min(n, 17),
                           replace=False)
        base = rng.integers(0, 4, len(items)).astype(float) / 3  # ties, and scores that float32 rounds
        nudged = np.where(rng.random(len(items)) < 0.5, np.nextafter(base, 2.0), base)  # equal as float32
        rows += [(q, int(i), float(s), int(g)) for i, s, g in zip(items, nudged, rng.choice([0, 1, 2], len(items)))]
    frame = pd.DataFrame(rows, columns=["query", "item", "score", "grade"])
    qrel, run = {}, {}
    for q, it, s, g in frame.itertuples(index=False):
        qrel.setdefault(str(q), {})[str(it)] = g
        run.setdefault(str(q), {})[str(it)] = s
    measures = {"P_1": "P@1", "P_3": "P@3", "recip_rank": "rr", "map": "ap", "ndcg_cut_3": "ndcg@3"}
    ref = pytrec_eval.RelevanceEvaluator(qrel, set(measures)).evaluate(run)
    res = tk.evaluate(frame, metrics=list(measures.values()), relevance="grade", item="item",
                      conventions="pytrec_eval")
    pq = res.per_query.set_index("query")
    for q, values in ref.items():
        for theirs, ours in measures.items():
            assert pq.loc[int(q), res.label(ours)] == pytest.approx(values[theirs], abs=1e-12), (q, theirs)
    # the two rules matter on this log: numbers as numbers, or exact doubles, give other values
    for other in ({"item_order": "typed"}, {"score_precision": "exact"}):
        changed = tk.evaluate(frame, metrics=list(measures.values()), relevance="grade", item="item",
                              conventions="pytrec_eval", **other)
        assert not changed.per_query.equals(res.per_query), other


def test_pytrec_eval_scores_beyond_float32_become_infinite_and_tie():
    """Scores beyond float32's range (1e308, -1e308, 5e38): pytrec_eval's C floats make them +-inf, so
    1e308 and 5e38 tie (docno descending decides); topkeval's float32 rule does the same, without a
    warning (the test suite turns warnings into errors)."""
    qrel = {"q": {"a": 1, "b": 0, "z": 0}, "r": {"a": 1, "b": 1}}
    run = {"q": {"a": 1e308, "z": 5e38, "b": -1e308, "c": 1.0}, "r": {"a": -1e308, "b": -5e38}}
    measures = {"P_1": "P@1", "recip_rank": "rr", "map": "ap"}
    ref = pytrec_eval.RelevanceEvaluator(qrel, set(measures)).evaluate(run)
    frame = pd.DataFrame([(q, d, s) for q, docs in run.items() for d, s in docs.items()], columns=["query", "item", "score"])
    judged = pd.DataFrame([(q, d, g) for q, docs in qrel.items() for d, g in docs.items()],
                          columns=["query", "item", "relevance"])
    res = tk.evaluate(frame, qrels=judged, item="item", metrics=list(measures.values()), conventions="pytrec_eval")
    pq = res.per_query.set_index("query")
    assert ref["q"]["P_1"] == 0.0  # z (5e38) before a (1e308): both +inf, z > a as text
    for q, values in ref.items():
        for theirs, ours in measures.items():
            assert pq.loc[q, ours] == pytest.approx(values[theirs], abs=1e-12), (q, theirs)


@pytest.mark.parametrize("seed", range(3))
def test_judged_only_and_set_measures_equal_pytrec_eval(seed):
    """trec_eval -J (judged documents only) and the set measures without a cutoff."""
    # grade -1: in the pool but unjudged, which -J drops too
    run, qrels = _partial_judgments(np.random.default_rng(300 + seed), queries=20, pool=100, grades=[-1, 0, 1, 2])
    qrel_dict, run_dict = _as_dicts(qrels), _as_dicts(run)
    measures = {"P_5": "P@5", "map": "map", "ndcg": "ndcg", "num_ret": "num_ret", "set_P": "set_P",
                "set_recall": "set_recall", "set_relative_P": "set_relative_P", "set_F": "set_F.0.5"}
    for judged_only in (False, True):  # -J drops unjudged items and those with a negative grade
        ref = pytrec_eval.RelevanceEvaluator(qrel_dict, set(measures) - {"set_F"} | {"set_F.0.5"},
                                             judged_docs_only_flag=judged_only).evaluate(run_dict)
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=list(measures.values()),
                          conventions="pytrec_eval", judged_only=judged_only)
        pq = res.per_query.set_index("query")
        for q, values in ref.items():
            for theirs, ours in measures.items():
                assert pq.loc[q, res.label(ours)] == pytest.approx(values[theirs], abs=1e-12), (q, theirs)


ranx = pytest.importorskip("ranx", reason="ranx is a test extra")


# ranx's kernels cast uint64 to int64 in their own code; numba says so when it compiles them (a cold
# numba cache, as in CI; which of ranx's modules numba names varies with what compiled first): nothing
# about the input, nothing topkeval can change. Only in this test, which calls ranx alone.
@pytest.mark.filterwarnings(r"ignore:.*unsafe cast from uint64 to int64:numba.core.errors.NumbaTypeSafetyWarning")  # numba wraps the text in ANSI bold codes
def test_ranx_hits_and_ndcg_burges():
    rng = np.random.default_rng(7)
    run_rows, qrel_rows = [], []
    for q in range(15):
        n = int(rng.integers(2, 25))
        scores = rng.permutation(n) + rng.random()
        run_rows += [(f"q{q}", f"d{i}", float(s)) for i, s in enumerate(scores)]
        qrel_rows += [(f"q{q}", f"d{i}", int(g)) for i, g in enumerate(rng.choice([0, 1, 2, 3], n)) if g > 0]
        if not any(r[0] == f"q{q}" for r in qrel_rows):
            qrel_rows.append((f"q{q}", "d0", 1))
    run = pd.DataFrame(run_rows, columns=["query", "item", "score"])
    qrels = pd.DataFrame(qrel_rows, columns=["query", "item", "relevance"])
    as_object = {"query": object, "item": object}  # ranx asserts object columns
    r_qrels = ranx.Qrels.from_df(qrels.astype(as_object), q_id_col="query", doc_id_col="item", score_col="relevance")
    r_run = ranx.Run.from_df(run.astype(as_object), q_id_col="query", doc_id_col="item", score_col="score")
    theirs = ranx.evaluate(r_qrels, r_run, ["hits@5", "ndcg_burges@5", "ndcg@5"])
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["hits@5", "ndcg_burges@5", "ndcg@5"],
                      conventions="ranx")
    assert res.summary.iloc[0].tolist() == pytest.approx([theirs["hits@5"], theirs["ndcg_burges@5"],
                                                           theirs["ndcg@5"]], abs=1e-12)


def test_ranx_rank_biased_precision():
    """ranx's rbp.95 and rbp.8 (its RBP weighs a relevant document by its grade: binary judgments here)."""
    rng = np.random.default_rng(11)
    run_rows, qrel_rows = [], []
    for q in range(20):
        n = int(rng.integers(1, 40))
        run_rows += [(f"q{q}", f"d{i}", float(s)) for i, s in enumerate(rng.permutation(n) + rng.random())]
        qrel_rows += [(f"q{q}", f"d{i}", 1) for i in range(n) if rng.random() < 0.2] or [(f"q{q}", "d0", 1)]
    run = pd.DataFrame(run_rows, columns=["query", "item", "score"])
    qrels = pd.DataFrame(qrel_rows, columns=["query", "item", "relevance"])
    as_object = {"query": object, "item": object}
    theirs = ranx.evaluate(ranx.Qrels.from_df(qrels.astype(as_object), q_id_col="query", doc_id_col="item",
                                              score_col="relevance"),
                           ranx.Run.from_df(run.astype(as_object), q_id_col="query", doc_id_col="item",
                                            score_col="score"), ["rbp.95", "rbp.8"])
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["rbp.95", "rbp(p=0.8)"], conventions="ranx")
    assert res.metrics == ["rbp.95", "rbp(p=0.8)"] and res.info["metric_names"]["rbp.95"] == "rbp(p=0.95)"
    assert res.summary.iloc[0].tolist() == pytest.approx([theirs["rbp.95"], theirs["rbp.8"]], abs=1e-12)


def _v9_count(level: float, R: int) -> int:
    """trec_eval <= 9 (pytrec_eval): the number of relevant documents of a recall level, (long)(x R + 0.9)."""
    return int(level * R + 0.9)


def _v10_count(level: float, R: int) -> int:
    """trec_eval 10: lround(x R), half away from zero."""
    return int(np.floor(level * R + 0.5))


@pytest.mark.parametrize("seed", range(4))
def test_pytrec_eval_bpref_and_interpolated_precision(seed):
    """trec_eval 9 (pytrec_eval): bpref, iprec_at_recall at the 11 levels and 11pt_avg, on runs with
    ties, unjudged documents, relevant documents no run found, and documents in the pool but not
    judged (grade -1). trec_eval 10 (topkeval's rule, checked on its own test outputs in
    test_trec.py) rounds x R to the nearest count where trec_eval 9 added 0.9 and truncated: the
    levels where the two counts differ are left out."""
    run, qrels = _partial_judgments(np.random.default_rng(300 + seed), queries=30, pool=300, grades=[-1, 0, 1, 2])
    ref = pytrec_eval.RelevanceEvaluator(_as_dicts(qrels), {"bpref", "iprec_at_recall", "11pt_avg", "num_rel"}
                                         ).evaluate(_as_dicts(run))
    levels = [x / 10 for x in range(11)]
    names = [f"iprec_at_recall_{x:.2f}" for x in levels]
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["bpref", "11pt_avg", *names], conventions="pytrec_eval")
    assert res.metrics[:2] == ["bpref", "11pt_avg"]  # labelled as asked
    assert res.label("iprec_avg") == "11pt_avg"
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted(ref)
    compared = 0
    for q, values in ref.items():
        assert pq.loc[q, "bpref"] == pytest.approx(values["bpref"], abs=1e-12), q
        R = int(values["num_rel"])
        same = [_v9_count(x, R) == _v10_count(x, R) for x in levels]
        for ours, theirs, agree in zip(res.metrics[2:], names, same):
            if agree:
                assert pq.loc[q, ours] == pytest.approx(values[theirs], abs=1e-12), (q, theirs)
                compared += 1
        if all(same):
            assert pq.loc[q, "11pt_avg"] == pytest.approx(values["11pt_avg"], abs=1e-12), q
    assert compared > 200


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [1, 2])
def test_pytrec_eval_infap(seed, level):
    """trec_eval's infAP (pytrec_eval): runs with heavy ties, documents outside the pool (no
    judgment), in the pool but not judged (grade -1), judged non-relevant and relevant, relevant
    documents no run found; relevance at grade >= 1 and >= 2 (trec_eval -l2); with and without -J
    (judged_only: the unpooled and grade -1 documents leave the ranking)."""
    run, qrels = _partial_judgments(np.random.default_rng(500 + seed), queries=30, pool=300, grades=[-1, -1, 0, 1, 2])
    kinds = run.merge(qrels, on=["query", "item"], how="left")["relevance"]
    assert kinds.isna().any() and (kinds == -1).any() and (kinds == 0).any()  # every kind of retrieved document
    for judged_only in (False, True):
        ref = pytrec_eval.RelevanceEvaluator(_as_dicts(qrels), {"infAP"}, relevance_level=level,
                                             judged_docs_only_flag=judged_only).evaluate(_as_dicts(run))
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=["infAP"], conventions="pytrec_eval",
                          threshold=level, empty_queries="keep", judged_only=judged_only)
        pq = res.per_query.set_index("query")
        assert sorted(pq.index) == sorted(ref)
        assert any(v["infAP"] > 0 for v in ref.values())
        for q, values in ref.items():  # a query without relevant documents: 0 in both
            assert pq.loc[q, "infAP"] == pytest.approx(values["infAP"], abs=1e-12), (q, judged_only)


@pytest.mark.parametrize("level", [1, 2])
def test_pytrec_eval_other_trec_eval_measures(level):
    """trec_eval's set_map, utility, gm_map and gm_bpref (per query: the logs trec_eval averages),
    Rprec_mult, binG, G, Rndcg, ndcg_rel and num_nonrel_judged_ret (pytrec_eval) on runs with heavy
    ties, unjudged documents, grade -1 (in the pool, not judged), grades up to 3 (G, Rndcg and
    ndcg_rel walk the levels), relevant documents no run found and lists shorter and longer than
    the ideal one (Rndcg's last level at n when the list is longer by 2 or more); relevance at
    grade >= 1 and >= 2; with and without -J."""
    measures = ["set_map", "utility", "gm_map", "gm_bpref", "binG", "G", "Rndcg", "ndcg_rel", "num_nonrel_judged_ret"]
    mults = [f"Rprec_mult_{x:.2f}" for x in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)]
    compared, ends = 0, set()
    for seed in range(4):
        run, qrels = _partial_judgments(np.random.default_rng(700 + seed), queries=30, pool=300,
                                        grades=[-1, 0, 0, 1, 2, 3])
        n = run.groupby("query").size()
        ideal = qrels[qrels["relevance"] > 0].groupby("query").size().reindex(n.index, fill_value=0)
        ends |= {int(np.sign(d)) if d <= 1 else 2 for d in n - ideal}
        for judged_only in (False, True):
            ref = pytrec_eval.RelevanceEvaluator(_as_dicts(qrels), {*measures, "Rprec_mult"}, relevance_level=level,
                                                 judged_docs_only_flag=judged_only).evaluate(_as_dicts(run))
            more = pytrec_eval.RelevanceEvaluator(_as_dicts(qrels), {"Rprec_mult.0.35,5.0"}, relevance_level=level,
                                                  judged_docs_only_flag=judged_only).evaluate(_as_dicts(run))
            for q, values in more.items():  # one parameter list per measure and evaluator
                ref[q].update(values)
            names = [*measures, *mults, "Rprec_mult.0.35,5.0"]
            res = tk.evaluate(run, qrels=qrels, item="item", metrics=names, conventions="pytrec_eval",
                              threshold=level, judged_only=judged_only)
            assert res.metrics[-2:] == ["Rprec_mult.0.35", "Rprec_mult.5.0"]  # one metric per multiplier
            pq = res.per_query.set_index("query").rename(columns={"Rprec_mult.0.35": "Rprec_mult_0.35",
                                                                  "Rprec_mult.5.0": "Rprec_mult_5.00"})
            assert sorted(pq.index) == sorted(ref)
            for q, values in ref.items():
                for name, value in values.items():
                    assert pq.loc[q, name] == pytest.approx(value, rel=1e-14, abs=1e-14), (q, name, judged_only)
                    compared += 1
            assert any(v["G"] > 0 for v in ref.values()) and any(v["num_nonrel_judged_ret"] > 0 for v in ref.values())
    assert compared == 4 * 2 * 30 * (len(measures) + len(mults) + 2)
    assert ends == {-1, 0, 1, 2}  # lists shorter than the ideal one, as long, longer by 1, longer by 2 or more


def test_pytrec_eval_11pt_avg_at_chosen_levels():
    """trec_eval's 11pt_avg.0.25,0.5,0.75 (pytrec_eval: trec_eval 9, whose count of a level is
    (long)(x R + 0.9) where trec_eval 10 rounds x R: the queries where they differ are left out)."""
    levels = (0.25, 0.5, 0.75)
    compared = 0
    for seed in range(3):
        run, qrels = _partial_judgments(np.random.default_rng(800 + seed), queries=40, pool=300, grades=[-1, 0, 1, 2])
        ref = pytrec_eval.RelevanceEvaluator(_as_dicts(qrels), {"11pt_avg.0.25,0.5,0.75", "num_rel"}
                                             ).evaluate(_as_dicts(run))
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=["11pt_avg.0.25,0.5,0.75"], conventions="pytrec_eval")
        assert res.info["metric_names"] == {"11pt_avg.0.25,0.5,0.75": "iprec_avg(levels={0.25,0.5,0.75})"}
        pq = res.per_query.set_index("query")
        for q, values in ref.items():
            R = int(values["num_rel"])
            if all(_v9_count(x, R) == _v10_count(x, R) for x in levels):
                assert pq.loc[q, "11pt_avg.0.25,0.5,0.75"] == pytest.approx(values["11pt_avg"], abs=1e-12), q
                compared += 1
    assert compared > 50


def _ir_measures():
    return pytest.importorskip("ir_measures", reason="ir_measures is a test extra")


@pytest.mark.parametrize("seed", range(4))
def test_ir_measures_judged(seed):
    """ir_measures' Judged@k (its own code): judged = listed in the qrels, whatever the grade; ties by
    docno ascending; divides by min(k, retrieved)."""
    ir_measures = _ir_measures()
    run, qrels = _partial_judgments(np.random.default_rng(400 + seed), queries=25, pool=120, grades=[-1, 0, 1, 2])
    measures = [ir_measures.Judged @ k for k in (1, 5, 10, 50)]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.judged.iter_calc(
        measures, qrels.rename(columns={"query": "query_id", "item": "doc_id"}),
        run.rename(columns={"query": "query_id", "item": "doc_id"}))}
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["Judged@1", "judged@5", "judged@10", "judged@50"],
                      ties="item_asc", item_order="text", short_lists="shrink", empty_queries="keep")
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted({q for q, _ in theirs})
    for (q, measure), value in theirs.items():
        assert pq.loc[q, res.label("judged@" + measure.split("@")[1])] == pytest.approx(value, abs=1e-12), (q, measure)


def test_ir_measures_err_by_gdeval():
    """ir_measures' ERR@k runs gdeval.pl (perl): p = (2^grade - 1) / 2^4, ties by docno descending
    as text, negative grades count 0."""
    ir_measures = _ir_measures()
    import shutil

    if shutil.which("perl") is None:
        pytest.skip("gdeval.pl needs perl")
    run, qrels = _partial_judgments(np.random.default_rng(7), queries=20, pool=150, grades=[-1, 0, 1, 2, 3, 4])
    run["query"] = run["query"].str[1:]  # gdeval reads numeric topics only
    qrels["query"] = qrels["query"].str[1:]
    measures = [ir_measures.ERR @ k for k in (1, 5, 20)]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.gdeval.iter_calc(
        measures, qrels.rename(columns={"query": "query_id", "item": "doc_id"}),
        run.rename(columns={"query": "query_id", "item": "doc_id"}))}
    assert theirs
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["ERR@1", "err@5", "err(max_grade=4)@20"],
                      ties="item_desc", item_order="text", empty_queries="keep")
    pq = res.per_query.set_index("query")
    for (q, measure), value in theirs.items():
        # gdeval prints 5 decimals (printf, as Python formats them)
        assert f"{pq.loc[q, res.label('err@' + measure.split('@')[1])]:.5f}" == f"{value:.5f}", (q, measure)


@pytest.mark.parametrize("seed", range(3))
def test_auc_equals_torchmetrics_and_sklearn_per_query(seed):
    """auc under ties="expected" is the per-query binary AUROC of torchmetrics and scikit-learn (a
    tied (relevant, non-relevant) pair counts 1/2), on heavy ties; a query whose candidates are all
    relevant or all non-relevant is undefined (here nan, left out of the mean)."""
    torch = pytest.importorskip("torch")
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    from sklearn.metrics import roc_auc_score

    frame = _random_log(500 + seed, ties=True)
    res = tk.evaluate(frame, metrics=["auc"], query="query", relevance="grade", score="score", item="item",
                      undefined="nan", empty_queries="keep")
    pq = res.per_query.set_index("query")["auc"]
    compared = 0
    for q, part in frame.groupby("query"):
        y = (part["grade"] > 0).to_numpy()
        if y.all() or not y.any():
            assert np.isnan(pq.loc[q])
            continue
        s = part["score"].to_numpy()
        theirs = float(tmf.binary_auroc(torch.tensor(s, dtype=torch.float64), torch.tensor(y.astype(int))))
        assert pq.loc[q] == pytest.approx(roc_auc_score(y, s), abs=1e-12), q
        assert pq.loc[q] == pytest.approx(theirs, abs=1e-6), q  # torchmetrics computes in float32
        compared += 1
    assert compared > 20
    assert res.summary.iloc[0]["auc"] == pytest.approx(pq.dropna().mean(), abs=1e-12)


IR_MEASURES_QRELS = """0 0 D0 1
0 0 D1 -1
0 0 D2 0
0 0 D3 2
0 0 D4 0
1 0 D0 1
1 0 D3 2
1 0 D4 -1
1 0 D5 0"""
IR_MEASURES_RUN = """0 0 D0 1 0.8 run
0 0 D2 2 0.7 run
0 0 D1 3 0.3 run
0 0 D3 4 0.4 run
0 0 D4 5 0.1 run
1 0 D1 1 0.8 run
1 0 D4 2 0.7 run
1 0 D3 3 0.3 run
1 0 D2 4 0.4 run"""


def test_ir_measures_ndcg_with_a_gain_map_test_case(tmp_path):
    """ir_measures' own test of nDCG(gains={0:1,1:4}) (tests/test_pytrec_eval.py, test_nDCG, to 5 places): 0.97177
    and 0.14949. Unjudged documents (D1, D2 of query 1) gain nothing, the judged grade-0 document
    D5 gains 1 in the ideal ranking and grade -1 (in the pool, unjudged) gains nothing."""
    (tmp_path / "qrels").write_text(IR_MEASURES_QRELS + "\n")
    (tmp_path / "run").write_text(IR_MEASURES_RUN + "\n")
    want = {"ndcg": [0.76018, 0.32739], "ndcg_cut_3": [0.76018, 0.0], "ndcg(gains={0:1,1:4})": [0.97177, 0.14949]}
    for preset in ("trec_eval", "pytrec_eval"):
        res = tk.evaluate(str(tmp_path / "run"), qrels=str(tmp_path / "qrels"), metrics=list(want),
                          conventions=preset)
        for name, values in want.items():
            assert res.per_query[res.label(name)].tolist() == pytest.approx(values, abs=1e-5), (preset, name)
    # by hand, query 1: D3 (grade 2) at rank 4 over the ideal 4, 2, 1 (D0, D3, D5)
    assert 2 / np.log2(5) / (4 + 2 / np.log2(3) + 1 / 2) == pytest.approx(0.149492, abs=1e-6)
    ir_measures = _ir_measures()
    measure = ir_measures.nDCG(gains={0: 1, 1: 4})
    theirs = {m.query_id: m.value for m in ir_measures.pytrec_eval.iter_calc(
        [measure], list(ir_measures.read_trec_qrels(IR_MEASURES_QRELS)), list(ir_measures.read_trec_run(IR_MEASURES_RUN)))}
    mine = res.per_query.set_index("query")["ndcg(gains={0:1,1:4})"]
    for q, value in theirs.items():
        assert mine.loc[q] == pytest.approx(value, abs=1e-12), q


@pytest.mark.parametrize("seed", range(4))
def test_ir_measures_gain_maps_on_partial_judgments(seed):
    """nDCG with gain maps (grade 0 given a gain, grades renamed) against ir_measures (pytrec_eval
    inside) on runs with heavy ties, unjudged documents, grade -1 and relevant documents never
    retrieved, at cutoffs and without, with and without judged_only (trec_eval -J)."""
    ir_measures = _ir_measures()
    run, qrels = _partial_judgments(np.random.default_rng(600 + seed), queries=25, pool=120, grades=[-1, 0, 1, 2, 3])
    as_irm = {"query": "query_id", "item": "doc_id"}
    for gains in ({0: 1, 1: 4}, {0: 2, 1: 1, 2: 5, 3: 3}, {1: 3, 2: 7}):
        spelled = "{" + ",".join(f"{g}:{v}" for g, v in gains.items()) + "}"
        for judged_only in (False, True):
            measures = [ir_measures.nDCG(gains=gains, judged_only=judged_only) @ k for k in (3, 10)] + [
                ir_measures.nDCG(gains=gains, judged_only=judged_only)]
            theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.pytrec_eval.iter_calc(
                measures, qrels.rename(columns=as_irm), run.rename(columns=as_irm))}
            names = [f"ndcg(gain={spelled})@3", f"ndcg(gain={spelled})@10", f"ndcg(gain={spelled})"]
            res = tk.evaluate(run, qrels=qrels, item="item", metrics=names, conventions="pytrec_eval",
                              judged_only=judged_only)
            pq = res.per_query.set_index("query")
            for (q, measure), value in theirs.items():
                k = measure.rsplit("@", 1)[1] if "@" in measure else None
                column = names[0 if k == "3" else 1 if k == "10" else 2]
                assert pq.loc[q, column] == pytest.approx(value, abs=1e-12), (q, measure, judged_only)


def test_negative_gains_count_in_dcg_not_in_the_ideal():
    """trec_eval's m_ndcg.c: "Gains are allowed to be 0 or negative"; a retrieved document's gain is
    added whatever its sign, the ideal ranking stops at the first gain <= 0. With ndcg.0=-1,2=5: run
    a (grade 0), b (grade 2), c (no judgment), d (grade 1); judged e (grade 2) never retrieved."""
    run = pd.DataFrame({"query": "q", "item": ["a", "b", "c", "d"], "score": [4.0, 3.0, 2.0, 1.0]})
    qrels = pd.DataFrame({"query": "q", "item": ["a", "b", "d", "e"], "relevance": [0, 2, 1, 2]})
    dcg = -1 + 5 / np.log2(3) + 1 / np.log2(5)
    ideal = 5 + 5 / np.log2(3) + 1 / 2
    for name in ("ndcg(gain={0:-1,2:5})", "ndcg.0=-1,2=5"):
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=[name, "dcg(gain={0:-1,2:5})"],
                          conventions="trec_eval")
        assert res.summary.iloc[0].tolist() == pytest.approx([dcg / ideal, dcg], rel=1e-14)


def test_judged_only_with_every_retrieved_item_unjudged_equals_pytrec_eval():
    """trec_eval -J on queries whose retrieved documents are all unjudged (or grade -1): nothing is
    left to rank. Every measure is 0 as in pytrec_eval, except interpolated precision at a level
    whose count of relevant documents is 0 (recall 0, and 11pt_avg): pytrec_eval computes 0 / 0,
    NaN; topkeval gives the undefined value (0 under the presets, NaN with undefined="nan")."""
    qrels = pd.DataFrame([("a", "d1", 1), ("a", "d2", 0), ("a", "d3", 2), ("a", "u2", -1), ("b", "x1", 1),
                          ("b", "x2", 0)], columns=["query", "item", "relevance"])
    run = pd.DataFrame([("a", "u1", 0.5), ("a", "u2", 0.9), ("b", "x1", 1.0), ("b", "u3", 0.5)],
                       columns=["query", "item", "score"])
    measures = {"P_5": "P@5", "recall_5": "recall@5", "map": "map", "ndcg": "ndcg", "Rprec": "Rprec",
                "recip_rank": "recip_rank", "bpref": "bpref", "infAP": "infAP", "set_P": "set_P",
                "set_recall": "set_recall", "set_relative_P": "set_relative_P", "num_ret": "num_ret",
                "num_rel": "num_rel", "num_rel_ret": "num_rel_ret", "success_1": "success_1",
                "iprec_at_recall_0.00": "iprec_at_recall_0.00", "11pt_avg": "11pt_avg"}
    ref = pytrec_eval.RelevanceEvaluator(_as_dicts(qrels), {"P.5", "recall.5", "map", "ndcg", "Rprec", "recip_rank",
                                                            "bpref", "infAP", "set_P", "set_recall", "set_relative_P",
                                                            "num_ret", "num_rel", "num_rel_ret", "success.1",
                                                            "iprec_at_recall", "11pt_avg"},
                                         judged_docs_only_flag=True).evaluate(_as_dicts(run))
    assert np.isnan(ref["a"]["11pt_avg"]) and np.isnan(ref["a"]["iprec_at_recall_0.00"])
    for undefined in (0.0, "nan"):
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=list(measures.values()), conventions="pytrec_eval",
                          judged_only=True, undefined=undefined)
        pq = res.per_query.set_index("query")
        for q, values in ref.items():
            for theirs, ours in measures.items():
                want = values[theirs]
                if undefined == "nan" and theirs not in ("iprec_at_recall_0.00", "11pt_avg"):
                    continue  # trec_eval's other x / 0 are 0 (set_P of nothing): the presets' undefined
                if np.isnan(want) and undefined == 0.0:
                    want = 0.0
                got = pq.loc[q, ours]
                assert got == pytest.approx(want, abs=1e-12, nan_ok=True), (q, theirs, undefined)
