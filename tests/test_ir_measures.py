"""Measures of ir_measures that topkeval computes itself: SetAP, Compat, Accuracy and cwl_eval's
C/W/L measures (BPM, INSQ, INST, SDCG, NERR8-11). Each is checked on ir_measures' own test cases
(the inputs and numbers of its tests/*.py, without ir_measures) and against the installed
ir_measures (and cwl-eval) on random runs, under the tie rule each of its providers uses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

pytestmark = pytest.mark.peers

# ir_measures tests/cwl.qrels and tests/cwl.run
CWL_QRELS = """T1 00 D1 1\nT1 00 D2 0\nT1 00 D3 1\nT1 00 D4 1\nT1 00 D7 1\nT1 00 D8 0\nT1 00 D9 1\nT1 00 D10 0
T2 00 D1 1\nT2 00 D2 1\nT2 00 D5 1\nT2 00 D6 0\nT2 00 D7 1\nT2 00 D8 1\nT2 00 D9 1\nT2 00 D10 0
T3 00 D4 0\nT3 00 D5 0\nT3 00 D6 1\nT3 00 D7 1\nT3 00 D8 1\nT3 00 D9 0\nT3 00 D10 1
"""
CWL_RUN = "".join(f"{q} E1 D{d} {d} {score} R1\n" for q in ("T1", "T2", "T3")
                  for d, score in enumerate((4.3, 4.2, 4.1, 3.9, 3.8, 3.7, 3.6, 3.5, 3.4, 3.3), start=1))

#: ir_measures tests/test_cwl_eval.py: "based on a manual execution of cwl-eval", to 4 places
CWL_EXPECTED = {
    "BPM(T=1.0, max_rel=1)@20": [1.0000, 1.0000, 0.1667], "BPM(T=2.0, max_rel=1)@10": [0.6667, 1.0000, 0.2857],
    "INSQ(T=1.0, max_rel=1)": [0.5872, 0.6629, 0.0880], "INSQ(T=2.0, max_rel=1)": [0.4513, 0.5068, 0.1292],
    "INST(T=1.0, max_rel=1)": [0.7934, 0.9226, 0.0888], "INST(T=2.0, max_rel=1)": [0.5994, 0.6924, 0.1397],
    "SDCG(max_rel=1)@10": [0.5645, 0.6531, 0.2848], "NERR8(max_rel=1)@10": [1.0000, 1.0000, 0.1667],
    "NERR9(max_rel=1)@10": [1.0000, 1.0000, 0.0680], "NERR10(p=0.8, max_rel=1)": [1.0000, 1.0000, 0.0888],
    "NERR11(T=2.0, max_rel=1)": [1.0000, 1.0000, 0.0691],
}
#: the same measures as topkeval writes them
CWL_OURS = ["bpm(max_rel=1)@20", "bpm(T=2,max_rel=1)@10", "insq(max_rel=1)", "insq(T=2,max_rel=1)", "inst(max_rel=1)",
            "inst(T=2,max_rel=1)", "sdcg(max_rel=1)@10", "nerr8(max_rel=1)@10", "nerr9(max_rel=1)@10",
            "nerr10(p=0.8,max_rel=1)", "nerr11(T=2,max_rel=1)"]

# ir_measures tests/test_pytrec_eval.py (test_SetAP) and tests/test_providers.py (test_empty)
SET_QRELS = "0 0 D0 0\n0 0 D1 1\n0 0 D2 2\n0 0 D3 2\n0 0 D4 0\n1 0 D0 1\n1 0 D3 2\n1 0 D5 0\n"
SET_RUN = ("0 0 D0 1 0.8 run\n0 0 D2 2 0.7 run\n0 0 D1 3 0.3 run\n0 0 D3 4 0.4 run\n0 0 D4 5 0.1 run\n"
           "1 0 D1 1 0.8 run\n1 0 D4 2 0.7 run\n1 0 D3 3 0.3 run\n1 0 D2 4 0.4 run\n")
# ir_measures tests/test_accuracy.py
ACC_QRELS = "0 0 C0_1 0\n0 0 B0_1 1\n0 0 A0_1 2\n1 0 A1_1 2\n1 0 A1_2 2\n1 0 B1_1 1\n1 0 C1_2 0\n2 0 B1_1 1\n"
ACC_RUN = ("0 0 C0_1 1 0.4 run\n0 0 A0_1 2 0.3 run\n0 0 C0_2 3 0.2 run\n0 0 C0_3 4 0.1 run\n"
           "1 0 C1_1 1 0.8 run\n1 0 A1_1 2 0.7 run\n1 0 C1_2 3 0.6 run\n1 0 B1_1 4 0.5 run\n1 0 C1_3 5 0.4 run\n"
           "2 0 B1_1 2 0.2 run\n2 0 C1_1 3 0.1 run\n")


def _files(tmp_path, qrels: str, run: str):
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    return str(tmp_path / "run"), str(tmp_path / "qrels")


def test_cwl_eval_test_case(tmp_path):
    """ir_measures' test of its cwl_eval provider, every C/W/L measure: topkeval to 4 places (the
    test's precision), under the run's own order (cwl_eval keeps ties in input order: ties="first")."""
    run, qrels = _files(tmp_path, CWL_QRELS, CWL_RUN)
    res = tk.evaluate(run, qrels=qrels, metrics=CWL_OURS, ties="first", empty_queries="keep")
    pq = res.per_query.set_index("query")
    assert list(pq.index) == ["T1", "T2", "T3"]
    for ours, want in zip(CWL_OURS, CWL_EXPECTED.values()):
        assert pq[ours].tolist() == pytest.approx(want, abs=1e-4), ours
    # INSQ and SDCG weigh ranks by fixed weights: the same under every tie rule (there are no ties here)
    for ties in ("expected", "item_desc"):
        again = tk.evaluate(run, qrels=qrels, metrics=CWL_OURS[2:4] + CWL_OURS[6:7], ties=ties)
        assert again.summary.iloc[0].tolist() == pytest.approx(res.summary[CWL_OURS[2:4] + CWL_OURS[6:7]].iloc[0].tolist(),
                                                                abs=1e-15)


def test_cwl_by_hand():
    """One list, grades 2, 0, 1 of max_rel 2 (gains 1, 0, 1/2): BPM@3 with T = 1 stops at rank 1 (1/1);
    with T = 2 it reads all three (1.5 / 3). NERR8@2: C_1 = 1 - g_1 = 0, so W_1 = 1: 1. NERR9@3: 1 too.
    SDCG@2 = (1 / log2 2 + 0) / (1 + 1 / log2 3). INSQ(T=1) weighs rank i by 1 / (i + 1)^2 over 1000 ranks."""
    log = {"query": [1, 1, 1], "relevance": [2, 0, 1], "score": [3.0, 2.0, 1.0]}
    names = ["bpm(max_rel=2)@3", "bpm(T=2,max_rel=2)@3", "nerr8(max_rel=2)@2", "nerr9(max_rel=2)@3", "sdcg(max_rel=2)@2",
             "insq(max_rel=2)"]
    got = tk.evaluate(log, names, ties="first").summary.iloc[0].tolist()
    z = sum(1 / (i + 1) ** 2 for i in range(1, 1001))
    assert got == pytest.approx([1.0, 0.5, 1.0, 1.0, 1 / (1 + 1 / np.log2(3)), (1 / 4 + 0.5 / 16) / z], rel=1e-14)


def test_set_ap_test_case(tmp_path):
    """ir_measures' test_SetAP (pytrec_eval's set_map): exact numbers at relevance levels 1, 2 and 3."""
    run, qrels = _files(tmp_path, SET_QRELS, SET_RUN)
    for level, want, mean in ((1, [0.6, 0.125], 0.3625), (2, [0.4, 0.25], 0.325)):
        res = tk.evaluate(run, qrels=qrels, metrics=["SetAP"], conventions="trec_eval", threshold=level)
        assert res.per_query["SetAP"].tolist() == want and res.summary.iloc[0].tolist() == [mean]
    # set_map is set_P x set_recall
    res = tk.evaluate(run, qrels=qrels, metrics=["set_ap", "set_P", "set_recall"], conventions="trec_eval")
    pq = res.per_query
    assert pq["set_ap"].tolist() == pytest.approx((pq["set_P"] * pq["set_recall"]).tolist(), rel=1e-15)


def test_accuracy_test_case(tmp_path):
    """ir_measures' test_accuracy: queries without a relevant candidate retrieved are not reported
    (topkeval: undefined, here nan, out of the mean)."""
    run, qrels = _files(tmp_path, ACC_QRELS, ACC_RUN)
    one = tk.evaluate(run, qrels=qrels, metrics=["accuracy"], ties="first", undefined="nan", empty_queries="keep")
    assert one.per_query["accuracy"].tolist() == pytest.approx([2 / 3, 0.5 * (2 / 3 + 1 / 3), 1.0], abs=1e-9)
    assert one.summary.iloc[0, 0] == pytest.approx((2 / 3 + 0.5 + 1) / 3, abs=1e-9)
    two = tk.evaluate(run, qrels=qrels, metrics=["accuracy"], ties="first", undefined="nan", empty_queries="keep",
                      threshold=2)
    assert two.per_query["accuracy"].tolist()[:2] == pytest.approx([2 / 3, 0.75], abs=1e-9)
    assert np.isnan(two.per_query["accuracy"].tolist()[2])


def test_compat_test_case(tmp_path):
    """ir_measures' test_providers.py: Compat(p=0.8) of query 0 (ties by docno, ascending) is
    0.4744431703672816; query 1, not in the run, is 0 (missing_queries="zero")."""
    run, qrels = _files(tmp_path, SET_QRELS, "".join(line + "\n" for line in SET_RUN.splitlines() if line[0] == "0"))
    res = tk.evaluate(run, qrels=qrels, metrics=["compat(p=0.8)"], ties="item_asc", item_order="text",
                      missing_queries="zero", empty_queries="keep")
    assert res.per_query["compat(p=0.8)"].tolist() == pytest.approx([0.4744431703672816, 0.0], abs=1e-15)
    # by hand: the list D0 D2 D3 D1 D4 (D3 ties D1? no: 0.4 > 0.3), the ideal D2 D3 D1 (grades 2, 2, 1)
    p = 0.8
    overlap = [0, 1, 2, 3, 3]  # |top d of the list and of the ideal|, d = 1..5
    best = [1, 2, 3, 3, 3]
    num = sum(p**d * o / (d + 1) for d, o in enumerate(overlap))
    den = sum(p**d * o / (d + 1) for d, o in enumerate(best))
    assert num / den == pytest.approx(0.4744431703672816, abs=1e-15)


def test_sequence_families_need_a_deterministic_tie_rule():
    log = {"query": [1, 1, 1], "relevance": [1, 0, 1], "score": [1.0, 1.0, 0.5]}
    for name in ("bpm(max_rel=1)@2", "inst(max_rel=1)", "nerr8(max_rel=1)@2", "nerr9(max_rel=1)@2",
                 "nerr10(max_rel=1)", "nerr11(max_rel=1)", "compat", "accuracy", "accuracy@2"):
        with pytest.raises(tk.ParameterError, match="is not computed exactly under ties='expected'"):
            tk.evaluate(log, [name])
        assert tk.evaluate(log, [name], ties="pessimistic").metrics == [name]
    # the two with fixed weights are exact under ties="expected": the mean of the two orders
    first = tk.evaluate(log, ["insq(max_rel=1)", "sdcg(max_rel=1)@2"], ties="optimistic").summary.iloc[0]
    last = tk.evaluate(log, ["insq(max_rel=1)", "sdcg(max_rel=1)@2"], ties="pessimistic").summary.iloc[0]
    mean = tk.evaluate(log, ["insq(max_rel=1)", "sdcg(max_rel=1)@2"]).summary.iloc[0]
    assert mean.tolist() == pytest.approx(((first + last) / 2).tolist(), rel=1e-14)


@pytest.mark.parametrize("bad,why", [("bpm@5", "needs a parameter"), ("insq(max_rel=1,min_rel=1)", "must be above"),
                                     ("compat(normalize=maybe)", "true or false"), ("sdcg(max_rel=0)@3", "positive"),
                                     ("bpm(max_rel=1,T=-1)@2", "positive"), ("nerr10(p=1,max_rel=1)", "between 0 and 1")])
def test_bad_parameters_are_refused(bad, why):
    with pytest.raises(tk.UnknownMetricError, match=why):
        tk.parse_metric(bad)


def test_sequence_families_on_a_score_matrix():
    """A score matrix (selection, then the CPU kernel) gives the long format's numbers."""
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 4, (9, 8)) / 2
    grades = rng.choice([0, 0, 1, 2, 3], (9, 8))
    exclude = (rng.random((9, 8)) < 0.2) & (grades == 0)  # lists of several lengths
    names = ["bpm(max_rel=3)@3", "inst(T=2,max_rel=3)", "nerr9(max_rel=3)@4", "nerr11(max_rel=3)", "compat(p=0.5)",
             "accuracy@4", "accuracy", "insq(max_rel=3)", "sdcg(min_rel=1,max_rel=3)@5", "set_ap"]
    for ties in ("item_desc", "pessimistic"):
        got = tk.evaluate_matrix(scores, grades, names, exclude=exclude, ties=ties, empty_queries="keep").per_query
        u, i = np.nonzero(~exclude)
        long = pd.DataFrame({"query": u, "item": i, "relevance": grades[u, i], "score": scores[u, i]})
        want = tk.evaluate(long, names, item="item", ties=ties, empty_queries="keep").per_query
        pd.testing.assert_frame_equal(got[names].reset_index(drop=True), want[names].reset_index(drop=True),
                                      check_exact=False, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# against the installed ir_measures

def _ir_measures():
    return pytest.importorskip("ir_measures", reason="ir_measures is a test extra")


def _random(seed, grades, queries=25, pool=120, long_query=False):
    """A run with ties, unjudged items and queries without relevant items; judgments with relevant items
    the run missed, and a query the run misses; rows grouped by query."""
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in range(queries):
        docs = [f"d{i:03d}" for i in rng.choice(pool, 60, replace=False)]
        n = int(rng.integers(1, 40))
        run += [(f"q{q:02d}", d, float(rng.integers(1, 9)) / 2) for d in docs[:n]]
        qrels += [(f"q{q:02d}", d, int(rng.choice(grades))) for d in sorted(rng.choice(docs, int(rng.integers(1, 40)),
                                                                                     replace=False))]
    if long_query:  # past cwl_eval's 1000 ranks
        run += [("q99", f"e{i:04d}", float(2000 - i)) for i in range(1200)]
        qrels += [("q99", f"e{i:04d}", int(g)) for i, g in enumerate(rng.choice(grades, 1200))]
    qrels.append(("q_missing", "d000", 1))
    return (pd.DataFrame(run, columns=["query", "item", "score"]),
            pd.DataFrame(qrels, columns=["query", "item", "relevance"]))


def _theirs(provider, measures, run, qrels) -> dict:
    names = {"query": "query_id", "item": "doc_id"}
    return {(m.query_id, str(m.measure)): m.value
            for m in provider.iter_calc(measures, qrels.rename(columns=names), run.rename(columns=names))}


@pytest.mark.parametrize("seed", range(3))
def test_cwl_measures_equal_cwl_eval(seed, tmp_path, monkeypatch):
    """Every C/W/L measure against ir_measures' cwl_eval provider (cwl-eval): ties in input order,
    unjudged items gain 0, negative grades 0, gains clipped to [min_rel, max_rel], lists cut at
    1000 ranks and padded to it, a judged query missing from the run scored 0."""
    ir_measures = _ir_measures()
    pytest.importorskip("cwl", reason="cwl-eval is a test extra (ir_measures' cwl_eval provider)")
    from ir_measures import BPM, INSQ, INST, NERR8, NERR9, NERR10, NERR11, SDCG

    monkeypatch.chdir(tmp_path)  # cwl_eval may write a log file where it runs
    run, qrels = _random(seed, [-1, 0, 1, 2, 3], long_query=seed == 0)
    measures = {BPM(T=1, max_rel=3) @ 10: "bpm(max_rel=3)@10", BPM(T=2, min_rel=1, max_rel=3) @ 5:
                "bpm(T=2,min_rel=1,max_rel=3)@5", INSQ(T=2, max_rel=3): "insq(T=2,max_rel=3)",
                INST(T=1, max_rel=3): "inst(max_rel=3)", SDCG(max_rel=3) @ 10: "sdcg(max_rel=3)@10",
                SDCG(max_rel=2) @ 2000: "sdcg(max_rel=2)@2000", NERR8(max_rel=3) @ 10: "nerr8(max_rel=3)@10",
                NERR9(max_rel=3) @ 5: "nerr9(max_rel=3)@5", NERR10(p=0.8, max_rel=3): "nerr10(p=0.8,max_rel=3)",
                NERR11(T=2, max_rel=3): "nerr11(T=2,max_rel=3)", INST(T=0.5, min_rel=1, max_rel=2):
                "inst(T=0.5,min_rel=1,max_rel=2)",
                # min_rel below 0: a judged grade 0 (or -1) gains 1/3, an item without a judgment 0
                INSQ(min_rel=-1, max_rel=2): "insq(min_rel=-1,max_rel=2)"}
    theirs = _theirs(ir_measures.cwl_eval, list(measures), run, qrels)
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=list(measures.values()), ties="first",
                      empty_queries="keep", missing_queries="zero")
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted({q for q, _ in theirs})
    for measure, ours in measures.items():
        for q in pq.index:
            assert pq.loc[q, ours] == pytest.approx(theirs[(q, str(measure))], abs=1e-12), (q, ours)


@pytest.mark.parametrize("seed", range(3))
def test_set_ap_equals_pytrec_eval(seed):
    """SetAP (trec_eval's set_map through pytrec_eval), with and without judged_only (trec_eval -J)."""
    ir_measures = _ir_measures()
    pytest.importorskip("pytrec_eval", reason="pytrec_eval (pytrec-eval-terrier) is a test extra")
    run, qrels = _random(10 + seed, [-1, 0, 1, 2])
    for judged_only in (False, True):
        measure = ir_measures.SetAP(judged_only=judged_only)
        theirs = _theirs(ir_measures.pytrec_eval, [measure], run, qrels)
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=["set_ap"], conventions="pytrec_eval",
                          judged_only=judged_only, missing_queries="zero")
        pq = res.per_query.set_index("query")["set_ap"]
        assert sorted(pq.index) == sorted({q for q, _ in theirs})
        for q in pq.index:
            assert pq.loc[q] == pytest.approx(theirs[(q, str(measure))], abs=1e-12), (q, judged_only)


@pytest.mark.parametrize("seed", range(3))
def test_compat_equals_ir_measures(seed):
    """ir_measures' compat provider: the list by score, ties by docno ascending (item_asc, as text);
    the ideal by grade, then by the run's score (the judgments listed by docno, as the run breaks
    ties); p and normalize varied; a query without relevant items 0 (undefined, 0 here)."""
    ir_measures = _ir_measures()
    run, qrels = _random(20 + seed, [-1, 0, 1, 2, 3])
    for p, normalize in ((0.95, True), (0.8, True), (0.5, False)):
        measure = ir_measures.Compat(p=p, normalize=normalize)
        theirs = _theirs(ir_measures.compat, [measure], run, qrels)
        name = f"compat(p={p},normalize={str(normalize).lower()})"
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=[name], ties="item_asc", item_order="text",
                          empty_queries="keep", missing_queries="zero")
        pq = res.per_query.set_index("query")[name]
        assert sorted(pq.index) == sorted({q for q, _ in theirs})
        for q in pq.index:
            assert pq.loc[q] == pytest.approx(theirs[(q, str(measure))], abs=1e-12), (q, p, normalize)


@pytest.mark.parametrize("seed", range(2))
def test_compat_ideal_in_the_judgments_order_equals_ir_measures(seed):
    """compat(ideal=judgments): ir_measures' ideal (equal grades by the run's score, 0 for a document the
    run lacks, then in the judgments' order), on judgments in shuffled order, tied scores and scores of 0
    and below; with judgments apart, and in one table of graded rows (its rows' order, shuffled across
    queries), where the default ideal (the list's order) differs."""
    ir_measures = _ir_measures()
    run, qrels = _random(40 + seed, [-1, 0, 1, 2, 3])
    run = run.assign(score=run["score"] - 2.0)  # scores <= 0 tie with the 0 of a document the run lacks
    qrels = qrels.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    measure = ir_measures.Compat(p=0.8)
    theirs = _theirs(ir_measures.compat, [measure], run, qrels)
    conv = dict(ties="item_asc", item_order="text", empty_queries="keep")
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["compat(p=0.8,ideal=judgments)", "compat(p=0.8)"],
                      missing_queries="zero", **conv)
    pq = res.per_query.set_index("query")
    assert sorted(pq.index) == sorted({q for q, _ in theirs})
    for q in pq.index:
        assert pq.loc[q, "compat(p=0.8,ideal=judgments)"] == pytest.approx(theirs[(q, str(measure))], abs=1e-12), q
    assert not np.allclose(pq["compat(p=0.8,ideal=judgments)"], pq["compat(p=0.8)"])
    # one table: the graded rows are the judgments, in the order they are given
    table = run.merge(qrels, on=["query", "item"]).sample(frac=1.0, random_state=seed + 7).reset_index(drop=True)
    theirs = _theirs(ir_measures.compat, [measure], table[["query", "item", "score"]],
                     table[["query", "item", "relevance"]])
    one = tk.evaluate(table, metrics=["compat(p=0.8,ideal=judgments)"], item="item", **conv).per_query
    for row in one.itertuples(index=False):
        assert row[2] == pytest.approx(theirs[(row.query, str(measure))], abs=1e-12), row.query


@pytest.mark.parametrize("seed", range(3))
def test_accuracy_equals_ir_measures(seed):
    """ir_measures' accuracy provider: its stable sort by score (ties in input order: ties="first"),
    relevant = grade >= rel, a query without a relevant or a non-relevant candidate in the top k not
    reported (undefined: nan)."""
    ir_measures = _ir_measures()
    run, qrels = _random(30 + seed, [-1, 0, 0, 1, 2])
    for rel in (1, 2):
        measures = {ir_measures.Accuracy(rel=rel): "accuracy", ir_measures.Accuracy(rel=rel) @ 5: "accuracy@5"}
        theirs = _theirs(ir_measures.accuracy, list(measures), run, qrels)
        res = tk.evaluate(run, qrels=qrels, item="item", metrics=list(measures.values()), ties="first",
                          threshold=rel, undefined="nan", empty_queries="keep")
        pq = res.per_query.set_index("query")
        for measure, ours in measures.items():
            reported = {q: v for (q, m), v in theirs.items() if m == str(measure)}
            assert reported and set(pq.index[pq[ours].notna()]) == set(reported), ours
            for q, value in reported.items():
                assert pq.loc[q, ours] == pytest.approx(value, abs=1e-12), (q, ours)
            assert res.summary.iloc[0][ours] == pytest.approx(np.mean(list(reported.values())), abs=1e-12)


@pytest.mark.parametrize("seed", range(2))
def test_cwl_eval_measures_and_columns_equal_cwl_eval(seed, tmp_path, monkeypatch):
    """cwl_eval's measures that ir_measures does not pass on (TBG, U-measure, NPV, the three IFT
    variants, dynamic BPM, TrAP) and every one's columns (EU, ETU, EC, ETC, ED: value=), against
    cwl-eval's own classes on its own Ranking (unit costs, gains scaled to [0, 1], lists padded to
    and cut at 1000 ranks, a list of 1,200), to 1e-9."""
    pytest.importorskip("cwl", reason="cwl-eval is a test extra")
    import logging

    from cwl.ruler.measures.cwl_ap import TrAPCWLMetric
    from cwl.ruler.measures.cwl_bpm import BPMCWLMetric, BPMDCWLMetric
    from cwl.ruler.measures.cwl_dcg import NDCGCWLMetric
    from cwl.ruler.measures.cwl_ift import IFTGoalCWLMetric, IFTGoalRateCWLMetric, IFTRateCWLMetric
    from cwl.ruler.measures.cwl_insq import INSQCWLMetric
    from cwl.ruler.measures.cwl_inst import INSTCWLMetric
    from cwl.ruler.measures.cwl_nerr import NERReq9CWLMetric, NERReq11CWLMetric
    from cwl.ruler.measures.cwl_npv import NPVCWLMetric
    from cwl.ruler.measures.cwl_tbg import TBGCWLMetric
    from cwl.ruler.measures.cwl_umeasure import UMeasureCWLMetric
    from cwl.ruler.ranking import Ranking

    monkeypatch.chdir(tmp_path)  # cwl_eval may write a log file where it runs
    logging.getLogger("cwl").disabled = True
    rng = np.random.default_rng(40 + seed)
    rows = []
    for q in range(10):
        n = 1200 if q == 0 else int(rng.integers(1, 30))
        grades = rng.choice([-1, 0, 0, 1, 2, 3], n)
        rows += [(f"q{q}", f"d{i}", float(n - i), int(g)) for i, g in enumerate(grades)]  # no ties
    run = pd.DataFrame(rows, columns=["query", "item", "score", "relevance"])
    cases = {"tbg(H=5,max_rel=3)": lambda: TBGCWLMetric(5), "tbg(max_rel=3)": lambda: TBGCWLMetric(224),
             "u_measure(L=20,max_rel=3)": lambda: UMeasureCWLMetric(20),
             "npv(rate=0.5,max_rel=3)": lambda: NPVCWLMetric(0.5),
             "ift_goal(T=1,b1=0.9,R1=10,max_rel=3)": lambda: IFTGoalCWLMetric(1, 0.9, 10),
             "ift_rate(A=0.2,b2=0.9,R2=10,max_rel=3)": lambda: IFTRateCWLMetric(0.2, 0.9, 10),
             "ift(T=2,b1=0.9,R1=1,A=0.2,b2=0.9,R2=10,max_rel=3)": lambda: IFTGoalRateCWLMetric(2, 0.9, 1, 0.2, 0.9, 10),
             "bpm_dynamic(T=1.5,hb=2,gain_med=0.4,max_rel=3)@10": lambda: BPMDCWLMetric(1.5, 10, 2.0, 1.0, 0.4),
             "trap(max_rel=3)": lambda: TrAPCWLMetric(), "insq(T=2,max_rel=3)": lambda: INSQCWLMetric(2.0),
             "sdcg(max_rel=3)@10": lambda: NDCGCWLMetric(10), "inst(max_rel=3)": lambda: INSTCWLMetric(1.0),
             "bpm(T=2,max_rel=3)@5": lambda: BPMCWLMetric(2.0, 5), "nerr9(max_rel=3)@10": lambda: NERReq9CWLMetric(10),
             "nerr11(T=2,max_rel=3)": lambda: NERReq11CWLMetric(2.0)}
    columns = ["eu", "etu", "ec", "etc", "ed"]  # the order of cwl_eval's get_scores

    def named(name, column):
        return name if column == "eu" else name.replace("max_rel=3", f"max_rel=3,value={column}")

    names = [named(name, c) for name in cases for c in columns]
    res = tk.evaluate(run, names, item="item", ties="first", empty_queries="keep")
    pq = res.per_query.set_index("query")
    for name, make in cases.items():
        for q, part in run.groupby("query"):
            gains = np.clip(part["relevance"].to_numpy(float), 0, 3) / 3
            ranking = Ranking(q, gains, np.full(len(gains), np.nan), max_n=1000)
            ranking.total_qrel_rels = float((gains > 0).sum())  # as RankingMaker sets it from the qrels
            measure = make()
            measure.residuals = False  # TrAP skips CWLMetric.__init__; cwl_eval's CWLRuler sets it
            measure.measure(ranking)
            for column, theirs in zip(columns, measure.get_scores()):
                assert pq.loc[q, res.label(named(name, column))] == pytest.approx(theirs, rel=1e-9, abs=1e-12), (
                    name, column, q)


def test_results_labelled_by_ir_measures_measures_read_back_from_their_per_query_table():
    """evaluate labels an ir_measures measure's column with its own spelling (RBP is RBP(p=0.8)); the
    per-query table reads back as the same metrics (ir_measures' spelling where topkeval's fails)."""
    ir = pytest.importorskip("ir_measures")
    rng = np.random.default_rng(0)
    log = pd.DataFrame({"query": np.repeat(np.arange(30), 10), "item": np.tile(np.arange(10), 30),
                        "relevance": rng.integers(0, 3, 300), "score": rng.random(300)}).iloc[:-1]  # lists of 9, 10
    res = tk.evaluate(log, [ir.RBP(p=0.8), ir.RBP(p=0.8, rel=2), ir.nDCG @ 5], item="item")
    back = tk.Results.from_per_query(res.per_query)
    assert back.metrics == res.metrics
    assert [back.evaluation.metric(m) for m in back.metrics] == [res.evaluation.metric(m) for m in res.metrics]
    pd.testing.assert_frame_equal(back.summary, res.summary)
