"""Numbers that are reported, checked against values computed apart from the code under test: by
hand, by scipy, or by enumerating every sign vector of a permutation test.

Each test here kills a mutation that the rest of the fast suite let through (issue 28): the
Monte-Carlo p-value's ``(1 + b) / (1 + N)``, weighted sign flips, ``relative_delta`` and
``effect_size``, a comparison on a single shared query, ``info["ties_at_cutoff"]``, the lenskit
preset's ``undefined="nan"``, the qrels reader's field count, the rank column of ``write_run``,
the two-sided bootstrap p-value and the weighted mean over defined values; and, for what later
merges brought, the ties of "first" and of ranx (numba's quicksort order), the gains of unjudged
candidates and of negative grades, trec_eval's unj and rbp_resid, score matrices whose top is
selected out or counted in place, weighted means of values whose sum overflows and the best mean
of a column. The mutation check (``tests/mutation/run.py``) runs them against those mutations.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import topkeval as tk
from topkeval.results import Results

TESTS = ("permutation", "t", "wilcoxon", "bootstrap")


def _results(values: dict[str, list]) -> Results:
    """Results holding given per-query values of one metric (queries 0, 1, ...)."""
    frames = [pd.DataFrame({"model": model, "query": np.arange(len(v)), "recall@1": np.asarray(v, float)})
              for model, v in values.items()]
    pq = pd.concat(frames, ignore_index=True)
    return Results.from_per_query(pq)


def _sign_flip_p(x) -> float:
    """Two-sided sign-flip p-value of the mean of ``x`` by enumerating all 2**n sign vectors."""
    x = np.asarray(x, float)
    observed = abs(x.sum())
    hits = sum(abs(sum(s * v for s, v in zip(signs, x))) >= observed - 1e-12 * max(1.0, observed)
               for signs in itertools.product((-1.0, 1.0), repeat=len(x)))
    return hits / 2 ** len(x)


def _rr_log(old_ranks, new_ranks, weights=None) -> pd.DataFrame:
    """A log of five candidates per query, one relevant (item 0), ranked at ``old_ranks[q]`` by
    model ``old`` and ``new_ranks[q]`` by ``new``: rr is 1 / that rank, by construction."""
    rows = []
    for q, (ro, rn) in enumerate(zip(old_ranks, new_ranks)):
        assert 1 <= ro <= 5 and 1 <= rn <= 5
        order_old = [1, 2, 3, 4]
        order_old.insert(ro - 1, 0)  # the item at position p (from 0) scores 5 - p
        order_new = [1, 2, 3, 4]
        order_new.insert(rn - 1, 0)
        for item in range(5):
            rows.append({"query": q, "item": item, "relevance": int(item == 0),
                         "old": 5.0 - order_old.index(item), "new": 5.0 - order_new.index(item),
                         **({"w": float(weights[q])} if weights is not None else {})})
    return pd.DataFrame(rows)


# --- compare: p-values --------------------------------------------------------------------------


@pytest.mark.parametrize("n_resamples", [100, 1000])
def test_monte_carlo_p_value_floor_is_one_over_one_plus_n(n_resamples):
    """21 equal differences: 2**21 sign vectors (Monte Carlo), and a resampled mean as extreme as
    the observed one needs every sign alike (probability 2**-20 per resample, so none is drawn):
    p = (1 + 0) / (1 + N), never 0."""
    row = _results({"b": [0.5] * 21, "m": [0.75] * 21}).compare(
        baseline="b", test="permutation", correction=None, n_resamples=n_resamples).iloc[0]
    assert row.p_value == 1 / (1 + n_resamples)


def test_monte_carlo_p_value_counts_plus_one_over_n_plus_one():
    """Two differences of 1 and 19 of 0: a resample is as extreme as the observed mean exactly
    when both signs agree (probability 1/2). p is (1 + b) / (1 + N) for a whole count b near N / 2."""
    n_resamples = 2000
    row = _results({"b": [0.0] * 21, "m": [1.0, 1.0] + [0.0] * 19}).compare(
        baseline="b", test="permutation", correction=None, n_resamples=n_resamples).iloc[0]
    count = row.p_value * (1 + n_resamples) - 1
    assert count == pytest.approx(round(count), abs=1e-6)
    assert abs(count / n_resamples - 0.5) < 5 * math.sqrt(0.25 / n_resamples)


def test_exact_permutation_p_value_by_hand():
    """d = (0.3, 0, 0.3, 0.2): of the 8 sign vectors of the non-zero differences only (+,+,+) and
    (-,-,-) reach |sum| = 0.8, so p = 2/8; delta, relative_delta and Cohen's d by hand."""
    row = _results({"b": [0.2, 0.4, 0.6, 0.8], "m": [0.5, 0.4, 0.9, 1.0]}).compare(
        baseline="b", test="permutation", correction=None).iloc[0]
    assert row.p_value == pytest.approx(0.25, abs=1e-12)
    assert row.delta == pytest.approx(0.2)
    assert row.baseline == pytest.approx(0.5) and row.value == pytest.approx(0.7)
    assert row.relative_delta == pytest.approx(0.2 / 0.5)  # the baseline's mean, not the model's
    # sd of d with n - 1 degrees of freedom: deviations (0.1, -0.2, 0.1, 0) -> sqrt(0.06 / 3)
    assert row.effect_size == pytest.approx(0.2 / math.sqrt(0.06 / 3))
    assert (row.wins, row.ties, row.losses, row.n_queries) == (3, 1, 0, 4)


@pytest.mark.parametrize("test", TESTS)
def test_one_shared_query_gives_no_p_value(test):
    """A single paired query has no variance to test against: p is NaN (not 1), never significant."""
    row = _results({"b": [0.2], "m": [0.7]}).compare(baseline="b", test=test, correction="holm").iloc[0]
    assert math.isnan(row.p_value) and math.isnan(row.p_adjusted)
    assert not row.significant and row.verdict == "no detectable difference"
    assert row.delta == pytest.approx(0.5) and row.n_queries == 1 and math.isnan(row.effect_size)


def test_verdict_follows_the_sign_of_a_significant_delta():
    """12 equal differences: exact p = 2 / 2**12, significant; better when the model gains, worse when
    it loses, and no verdict when nothing is significant."""
    up = _results({"b": [0.25] * 12, "m": [0.5] * 12}).compare(baseline="b", test="permutation").iloc[0]
    down = _results({"b": [0.5] * 12, "m": [0.25] * 12}).compare(baseline="b", test="permutation").iloc[0]
    assert up.p_value == pytest.approx(2 / 2**12) and down.p_value == pytest.approx(2 / 2**12)
    assert (up.verdict, down.verdict) == ("better", "worse") and up.significant and down.significant
    flat = _results({"b": [0.25, 0.5] * 3, "m": [0.5, 0.25] * 3}).compare(baseline="b").iloc[0]
    assert flat.verdict == "no detectable difference" and not flat.significant


@pytest.mark.parametrize("test,scipy_p", [
    ("t", lambda m, b: stats.ttest_rel(m, b).pvalue),
    ("wilcoxon", lambda m, b: stats.wilcoxon(m, b, zero_method="wilcox").pvalue),
])
def test_t_and_wilcoxon_equal_scipy_on_hand_values(test, scipy_p):
    b = [0.2, 0.4, 0.6, 0.8, 0.1, 0.5]
    m = [0.5, 0.3, 0.9, 1.0, 0.4, 0.5]
    row = _results({"b": b, "m": m}).compare(baseline="b", test=test, correction=None).iloc[0]
    assert row.p_value == pytest.approx(scipy_p(m, b), rel=1e-12)


def test_bootstrap_intervals_by_hand():
    """Resampled means of constant values are that constant; of (0, 1) they are 0, 1/2 or 1 (with
    probabilities 1/4, 1/2, 1/4), so the 95% percentile interval is [0, 1]."""
    row = _results({"b": [0.25] * 5, "m": [0.75] * 5}).compare(baseline="b", correction=None).iloc[0]
    assert (row.ci_low, row.ci_high) == pytest.approx((0.5, 0.5), abs=1e-12)
    row = _results({"b": [0.0, 0.0], "m": [0.0, 1.0]}).compare(baseline="b", correction=None).iloc[0]
    assert (row.ci_low, row.ci_high) == pytest.approx((0.0, 1.0), abs=1e-12)
    ci = _results({"b": [0.3] * 5, "m": [0.0, 1.0, 0.0, 1.0, 1.0]}).summary_ci().set_index("model")
    assert (ci.loc["b", "ci_low"], ci.loc["b", "ci_high"]) == pytest.approx((0.3, 0.3), abs=1e-12)
    assert (ci.loc["m", "ci_low"], ci.loc["m", "ci_high"]) == pytest.approx((0.2, 1.0), abs=1e-12)


def test_bootstrap_p_value_is_two_sided():
    """The studentized paired bootstrap test (Efron & Tibshirani 16.4 with 12.5's bootstrap-t):
    T = mean / se, T* = (mean* - mean) / se*, p = (1 + #{|T*| >= |T|}) / (1 + N), both tails, against
    a direct loop with another generator (in distribution)."""
    rng = np.random.default_rng(3)
    n, n_resamples = 40, 20_000
    d = rng.normal(0.12, 0.5, n)
    row = _results({"b": np.zeros(n), "m": d}).compare(
        baseline="b", test="bootstrap", correction=None, n_resamples=n_resamples).iloc[0]
    drawn = d[rng.integers(0, n, (n_resamples, n))]
    t_star = (drawn.mean(axis=1) - d.mean()) / (drawn.std(axis=1, ddof=1) / np.sqrt(n))
    observed = d.mean() / (d.std(ddof=1) / np.sqrt(n))
    direct = (1 + np.sum(np.abs(t_star) >= abs(observed))) / (1 + n_resamples)
    one_tail = (1 + np.sum(t_star >= abs(observed))) / (1 + n_resamples)
    assert 0.05 < direct < 0.5 and abs(direct - 2 * one_tail) < 0.05  # the two tails differ from one
    assert row.p_value == pytest.approx(direct, abs=0.02)


# --- compare: query weights ----------------------------------------------------------------------

#: rr ranks of the relevant item under the two models, and query weights (not all 1): the weighted
#: and the unweighted sign-flip p-values differ widely here
OLD_RANKS = [4, 2, 3, 1, 3, 2, 3, 4, 3, 4, 1, 3]
NEW_RANKS = [3, 4, 2, 4, 2, 4, 2, 2, 2, 1, 2, 3]
WEIGHTS = [2.0, 0.5, 5.0, 0.5, 5.0, 3.0, 3.0, 1.0, 1.0, 5.0, 3.0, 0.5]


def _weighted(n_queries: int):
    frame = _rr_log(OLD_RANKS[:n_queries], NEW_RANKS[:n_queries], WEIGHTS[:n_queries])
    res = tk.evaluate(frame, ["rr"], relevance="relevance", score=["old", "new"], item="item", weight="w")
    b = 1 / np.array(OLD_RANKS[:n_queries], float)
    m = 1 / np.array(NEW_RANKS[:n_queries], float)
    return res, m, b, np.array(WEIGHTS[:n_queries])


def test_weighted_exact_sign_flips_equal_enumeration():
    """With weights, the permutation test flips the signs of w d: 2**8 vectors, all enumerated."""
    res, m, b, w = _weighted(8)
    row = res.compare(baseline="old", test="permutation", correction=None).iloc[0]
    d = m - b
    assert row.p_value == pytest.approx(_sign_flip_p(w * d), abs=1e-12)
    assert abs(_sign_flip_p(w * d) - _sign_flip_p(d)) > 0.1  # the weights matter here
    delta = (w * d).sum() / w.sum()
    assert row.delta == pytest.approx(delta)
    assert row.value == pytest.approx((w * m).sum() / w.sum())
    assert row.baseline == pytest.approx((w * b).sum() / w.sum())
    assert row.relative_delta == pytest.approx(delta / ((w * b).sum() / w.sum()))
    # Cohen's d with the weighted sd: weights rescaled to mean 1, n - 1 degrees of freedom
    n = len(d)
    sd = math.sqrt((w / w.mean() * (d - delta) ** 2).sum() / (n - 1))
    assert row.effect_size == pytest.approx(delta / sd)
    assert row.weight == pytest.approx(w.sum())


def test_weighted_monte_carlo_sign_flips_near_enumeration():
    """12 queries and 4,000 resamples (fewer than 2**12 sign vectors): Monte Carlo, within a few
    standard errors of the exact weighted p-value, and far from the unweighted one."""
    res, m, b, w = _weighted(12)
    n_resamples = 4000
    row = res.compare(baseline="old", test="permutation", correction=None, n_resamples=n_resamples).iloc[0]
    d = m - b
    exact = _sign_flip_p(w * d)
    assert abs(row.p_value - exact) < 5 * math.sqrt(exact * (1 - exact) / n_resamples) + 1e-3
    assert abs(exact - _sign_flip_p(d)) > 0.3


def test_weighted_mean_leaves_out_undefined_values_and_their_weight():
    """recall of a query without a relevant item is undefined (NaN under undefined="nan"): that
    query and its weight stay out of the weighted mean."""
    frame = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "item": [1, 2, 1, 2, 1, 2], "relevance": [1, 0, 1, 0, 0, 0],
                          "s": [0.9, 0.1, 0.1, 0.9, 0.5, 0.4], "w": [1.0, 1.0, 2.0, 2.0, 5.0, 5.0]})
    res = tk.evaluate(frame, ["recall@1"], score="s", item="item", weight="w", empty_queries="keep", undefined="nan")
    assert res.summary.loc["s", "recall@1"] == pytest.approx((1 * 1.0 + 2 * 0.0) / (1 + 2))
    ci = res.summary_ci(n_resamples=200).iloc[0]
    assert ci["mean"] == pytest.approx(1 / 3) and ci["n_queries"] == 2


# --- evaluation: counts and conventions ----------------------------------------------------------


@pytest.mark.parametrize("relevance,scores,ties", [
    ([1, 1, 0], [0.5, 0.5, 0.1], 0), ([1, 0, 0], [0.5, 0.5, 0.1], 1), ([0, 1, 0], [0.5, 0.5, 0.1], 1),
    ([1, 1, 1], [0.5, 0.5, 0.1], 0), ([0, 1, 0], [0.9, 0.5, 0.5], 0), ([1, 0, 0], [0.5, 0.9, 0.5], 0),
])
def test_ties_at_cutoff_counts_mixed_ties_only(relevance, scores, ties):
    """precision@1: a tie straddles k = 1 when it holds the first rank and more; only a tie of
    relevant and non-relevant candidates lets the tie rule decide the value. A tie group that starts
    right after k (ranks 2-3) does not straddle it (nor k = 3, which it ends at)."""
    frame = {"query": [1, 1, 1], "relevance": relevance, "score": scores}
    res = tk.evaluate(frame, ["precision@1", "precision@3"])
    assert res.info["ties_at_cutoff"] == {"score": ties}
    top = max(scores)
    on_top = [r for r, s in zip(relevance, scores) if s == top]
    assert res.summary.loc["score", "precision@1"] == pytest.approx(sum(on_top) / len(on_top))


def test_hit_rate_of_a_tie_by_hand():
    """A tie of one relevant and one non-relevant candidate for one slot: hit_rate@1 = 1/2. Three
    candidates, one relevant, for two slots: 1 - C(2, 2) / C(3, 2) = 2/3."""
    res = tk.evaluate({"query": [1, 1, 2, 2, 2], "relevance": [1, 0, 0, 1, 0], "score": [0.5, 0.5, 0.5, 0.5, 0.5]},
                      ["hit_rate@1", "hit_rate@2"])
    pq = res.per_query.set_index("query")
    assert pq.loc[1, "hit_rate@1"] == pytest.approx(1 / 2) and pq.loc[1, "hit_rate@2"] == 1.0
    assert pq.loc[2, "hit_rate@1"] == pytest.approx(1 / 3) and pq.loc[2, "hit_rate@2"] == pytest.approx(2 / 3)


def test_r_precision_looks_past_the_largest_cutoff():
    """R = 4 with precision@3 asked for too: R-precision still counts the relevant candidate at rank 4."""
    res = tk.evaluate({"query": [1] * 5, "relevance": [1, 1, 1, 1, 0], "score": [5.0, 4.0, 3.0, 2.0, 1.0]},
                      ["precision@3", "r_precision"])
    assert res.summary.iloc[0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("short_lists,value", [("pad", 1 / 2), ("shrink", 1.0)])
def test_r_precision_of_a_list_shorter_than_r(short_lists, value):
    """R = 2 relevant items, one left as a candidate (the other scores below score_threshold): h(R) = 1,
    over R (pad) or over min(R, n) = 1 (shrink)."""
    res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 1, 0], "score": [0.9, 0.1, 0.05]}, ["r_precision"],
                      score_threshold=0.3, short_lists=short_lists)
    assert res.summary.iloc[0, 0] == pytest.approx(value)


@pytest.mark.parametrize("path", [1, 2])
def test_optimistic_and_pessimistic_ties_order_grades_by_hand(path):
    """Three tied candidates of grades 1, 3 and 0: optimistic ranks relevant ones first, higher grades
    first (3, 1, 0); pessimistic the reverse (0, 1, 3). Linear gains, both kernel paths."""
    from paths import evaluate_path
    from topkeval.conventions import resolve
    from topkeval.inputs.grouped import build_log
    from topkeval.metrics.names import parse_metrics

    log = build_log(np.zeros(3, int), np.array([1, 3, 0]), {"s": np.full(3, 0.5)}, np.arange(3),
                    names=dict(query="q", relevance="g", item="i"))
    mets = parse_metrics(["dcg@1", "dcg@2", "rr"])
    opt = evaluate_path(log, mets, resolve(ties="optimistic"), path).summary.iloc[0].tolist()
    pes = evaluate_path(log, mets, resolve(ties="pessimistic"), path).summary.iloc[0].tolist()
    assert opt == pytest.approx([3.0, 3.0 + 1 / math.log2(3), 1.0])
    assert pes == pytest.approx([0.0, 1 / math.log2(3), 1 / 2])


@pytest.mark.parametrize("preset", ["trec_eval", "pytrec_eval"])
def test_trec_eval_presets_break_ties_by_item_ids_as_text(preset):
    """trec_eval sorts tied documents by docno descending with strcmp: "9" before "10", even when the
    ids are numbers in a table; P@1 is then 1 (item 9 is the relevant one)."""
    frame = {"query": [1, 1, 1], "item": [10, 9, 100], "relevance": [0, 1, 0], "score": [0.5, 0.5, 0.5]}
    res = tk.evaluate(frame, ["P@1", "recip_rank"], item="item", conventions=preset)
    assert res.summary.iloc[0].tolist() == [1.0, 1.0]
    typed = tk.evaluate(frame, ["P@1", "recip_rank"], item="item", conventions=preset, item_order="typed")
    assert typed.summary.iloc[0].tolist() == [0.0, 1 / 3]  # 100, 10, 9 as numbers


def test_ascending_scores_put_the_lowest_first():
    """Ranks as scores (lower is better): the relevant item has rank 1 in query 1 and rank 3 in query 2."""
    frame = {"query": [1, 1, 1, 2, 2, 2], "relevance": [0, 1, 0, 1, 0, 0], "rank": [2, 1, 3, 3, 1, 2]}
    res = tk.evaluate(frame, ["precision@1", "rr"], score="rank", ascending=True)
    assert res.per_query[["precision@1", "rr"]].to_numpy().tolist() == [[1.0, 1.0], [0.0, 1 / 3]]


def test_lenskit_preset_scores_an_empty_list_nan_and_leaves_it_out():
    """LensKit: precision over the list's length, NaN for an empty list (every candidate of query 2
    is below score_threshold), which stays out of the mean."""
    assert math.isnan(tk.conventions.resolve("lenskit").undefined)
    frame = {"query": [1, 1, 2, 2], "relevance": [1, 0, 1, 0], "score": [0.9, 0.1, 0.2, 0.3]}
    res = tk.evaluate(frame, ["precision@2", "recall@2"], conventions="lenskit", score_threshold=0.5)
    pq = res.per_query.set_index("query")
    assert pq.loc[1, "precision@2"] == 1.0 and math.isnan(pq.loc[2, "precision@2"])
    assert pq.loc[2, "recall@2"] == 0.0  # R = 1: defined, and 0
    assert res.summary.loc["score", "precision@2"] == 1.0
    assert res.summary.loc["score", "recall@2"] == pytest.approx(0.5)


def test_ndcg_of_grades_whose_dcg_overflows_is_exact():
    """Two candidates of grade 1.5e308, in the ideal order: their DCG (1.5e308 (1 + 1/log2(3))) is
    beyond float64, yet nDCG is exactly 1 (both DCGs are summed on a scale divided by a power of 2),
    and dcg itself is refused rather than given as inf."""
    frame = {"query": [1, 1, 1], "relevance": [1.5e308, 1.5e308, 0.0], "score": [3.0, 2.0, 1.0]}
    assert tk.evaluate(frame, ["ndcg", "ndcg@2", "ndcg@1"]).summary.iloc[0].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(tk.DataError, match="exceeds the largest float64"):
        tk.evaluate(frame, ["dcg"])


@pytest.mark.parametrize("n,refused", [(2, False), (1, True)])
def test_short_lists_error_refuses_only_lists_shorter_than_k(n, refused):
    frame = {"query": [1] * n, "relevance": [1] + [0] * (n - 1), "score": np.arange(n, 0, -1.0)}
    if refused:
        with pytest.raises(tk.ShortListError, match="looks at the top 2, but query 1 has only 1 candidates"):
            tk.evaluate(frame, ["precision@2"], short_lists="error")
    else:
        assert tk.evaluate(frame, ["precision@2"], short_lists="error").summary.iloc[0, 0] == 0.5


def test_p_value_text_at_and_above_the_floor():
    """1 / (1 + N) is the smallest Monte-Carlo p-value: shown as "< 1e-02" for N = 100, not as a number;
    the next one, 2 / 101, as a number."""
    from topkeval.outputs.text import p_value_text

    assert p_value_text(1 / 101, 100) == "< 1e-02"
    assert p_value_text(2 / 101, 100) == "0.0198"
    assert p_value_text(0.00005) == "< 1e-04" and p_value_text(float("nan")) == "nan"


def test_report_lists_only_the_queries_that_got_worse():
    """Three queries: one worse, one equal, one better. The report's worst regressions (worst=10) list
    the one that got worse, and its counts say 1, 1 and 1."""
    import re

    from topkeval.outputs.html import report_html

    frame = {"query": [1, 1, 2, 2, 3, 3], "item": [1, 2, 1, 2, 1, 2], "relevance": [1, 0, 1, 0, 1, 0],
             "old": [0.9, 0.1, 0.9, 0.1, 0.1, 0.9], "new": [0.1, 0.9, 0.9, 0.1, 0.9, 0.1]}
    res = tk.evaluate(frame, ["precision@1"], score=["old", "new"], item="item")
    page = report_html(res, baseline="old", worst=10, curves=False, n_resamples=200)
    worst = re.search(r'<table class="worst">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    assert worst.count("<tr>") == 1 and 'href="#q0">1</a>' in worst
    assert "1 query better, 1 equal, 1 worse" in page and "<h3>The worst regression on precision@1</h3>" in page


def test_json_writes_an_undefined_value_as_null():
    """LensKit's empty list (NaN) is null in JSON, and the mean over the other query stays a number."""
    import json

    from topkeval.outputs.text import json_text

    frame = {"query": [1, 1, 2, 2], "relevance": [1, 0, 1, 0], "score": [0.9, 0.1, 0.2, 0.3]}
    res = tk.evaluate(frame, ["precision@2"], conventions="lenskit", score_threshold=0.5)
    payload = json.loads(json_text(res.to_dict(per_query=True)))
    assert [row["precision@2"] for row in payload["per_query"]] == [1.0, None]
    assert payload["summary"]["score"]["precision@2"] == 1.0


# --- TREC files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["q1 0 d1 1 extra", "q1 0 d1", "q1 0 d1 1 2 3"])
def test_qrels_line_without_four_fields_is_refused(tmp_path, line):
    path = tmp_path / "qrels.txt"
    path.write_text(f"q1 0 d0 1\n{line}\n")
    with pytest.raises(tk.DataError, match=r"line 2: a qrels line needs 4 fields"):
        tk.read_qrels(path)


def test_write_run_ranks_from_one_per_query_and_run(tmp_path):
    frame = pd.DataFrame({"query": ["q2", "q1", "q1", "q1", "q2"], "item": ["a", "b", "c", "d", "e"],
                          "score": [0.1, 0.5, 0.9, 0.7, 0.3]})
    path = tmp_path / "out.run"
    tk.write_run(frame, path, run_name="r")
    lines = [line.split() for line in path.read_text().splitlines()]
    assert [(q, item, rank) for q, _, item, rank, _, _ in lines] == [
        ("q1", "c", "1"), ("q1", "d", "2"), ("q1", "b", "3"), ("q2", "e", "1"), ("q2", "a", "2")]
    assert [float(line[4]) for line in lines] == [0.9, 0.7, 0.5, 0.3, 0.1]
    assert {line[1] for line in lines} == {"Q0"} and {line[5] for line in lines} == {"r"}


def test_write_run_keeps_every_digit_of_the_scores(tmp_path):
    scores = [1 / 3, 0.1 + 0.2, 1e-300, -2.5e17]
    frame = pd.DataFrame({"query": ["q"] * 4, "item": ["a", "b", "c", "d"], "score": scores})
    tk.write_run(frame, tmp_path / "out.run")
    back = tk.read_run(tmp_path / "out.run")
    assert sorted(back["score"].tolist()) == sorted(scores)  # the same floats, to the last bit


# --- score matrices -------------------------------------------------------------------------------


@pytest.mark.parametrize("metrics", [
    ["recall@1", "num_ret", "num_rel_ret"],  # each row's top 1 selected (a scan with a threshold)
    ["recall@3", "num_ret", "num_rel_ret", "bpref"],  # every cell selected (bpref needs the whole list)
    ["ap", "recall@3", "num_ret", "num_rel_ret"],  # counted in place
])
def test_matrix_score_threshold_keeps_a_score_equal_to_it(metrics):
    """Scores (0.5, 0.9, 0.1, 0.3, 0.5) at score_threshold=0.5: three candidates (0.5 is not below
    0.5), the relevant one scoring 0.5 among them, the one scoring 0.1 not (R = 2 still). The top 1
    is the non-relevant 0.9; AP: the relevant candidate ties for ranks 2-3, (1/2 + 1/3) / 2 over R."""
    res = tk.evaluate_matrix(np.array([[0.5, 0.9, 0.1, 0.3, 0.5]]), np.array([[1, 0, 1, 0, 0]]), metrics=metrics,
                             score_threshold=0.5)
    want = {"recall@1": 0.0, "recall@3": 0.5, "num_ret": 3.0, "num_rel_ret": 1.0, "ap": (1 / 2 + 1 / 3) / 2 / 2,
            "bpref": (0.5 + 0.0) / 2 / 2}
    # bpref: 3 judged non-relevant items (every cell is judged), min(NJ, R) = 2; above the relevant one
    # the 0.9 and, in half the orders of its tie, the other 0.5: 1 - 1/2 or 1 - 2/2
    assert res.summary.iloc[0].to_dict() == pytest.approx({m: want[m] for m in metrics})


def test_device_counts_pessimistic_ties_put_unjudged_cells_before_graded_ones(monkeypatch):
    """The torch counts (on CPU tensors here): a tie of an unjudged cell (grade 0), a non-relevant cell
    of grade 1 (threshold 2) and a relevant one of grade 2. Pessimistic: non-relevant first, lower
    grades first, so the order is 0, 1, 2 and dcg@1 = 0, dcg@2 = 1/log2(3), dcg@3 adds 2/log2(4)."""
    torch = pytest.importorskip("torch")
    from topkeval.backends import matrix

    monkeypatch.setattr(matrix, "DEVICE_COUNTS", True)
    scores = torch.tensor([[0.5, 0.5, 0.5, 0.1]], dtype=torch.float64)
    res = tk.evaluate_matrix(scores, np.array([[1, 0, 2, 0]]), metrics=["dcg@1", "dcg@2", "dcg@3"], ties="pessimistic",
                             threshold=2)
    assert res.summary.iloc[0].tolist() == pytest.approx([0.0, 1 / math.log2(3), 1 / math.log2(3) + 2 / 2])


# --- after the merges: ties, gains of unjudged and negative grades, trec_eval's unjudged measures ------


@pytest.mark.parametrize("path", [1, 2])
def test_first_ties_keep_the_input_order_by_hand(path):
    """ties="first": three tied candidates of grades 1, 3 and 0 keep their row order, so dcg@1 = 1,
    dcg@2 = 1 + 3/log2(3) and rr = 1 (the relevant one is the first row). Both kernel paths."""
    from paths import evaluate_path
    from topkeval.conventions import resolve
    from topkeval.inputs.grouped import build_log
    from topkeval.metrics.names import parse_metrics

    log = build_log(np.zeros(3, int), np.array([1, 3, 0]), {"s": np.full(3, 0.5)}, np.arange(3),
                    names=dict(query="q", relevance="g", item="i"))
    got = evaluate_path(log, parse_metrics(["dcg@1", "dcg@2", "rr"]), resolve(ties="first"), path)
    assert got.summary.iloc[0].tolist() == pytest.approx([1.0, 1.0 + 3 / math.log2(3), 1.0])


def _numba_argsort(keys) -> list[int]:
    """numba's own np.argsort (its quicksort): the order ranx gives a query's rows."""
    pytest.importorskip("numba")
    from reference import numba_argsort

    return numba_argsort(keys)


def test_ranx_ties_keep_the_row_order_of_a_short_list_and_numbas_order_of_a_long_one():
    """ties="ranx" (ranx's Run): numba's quicksort argsort of the negated scores. Below 16 candidates
    it is an insertion sort, which keeps the row order: the relevant first row of three tied ones
    ranks 1st (rr = 1, P@1 = 1). From 16 on, the partitions reorder equal scores: rr of each
    relevant position is 1 / (its place in numba's own argsort of -scores, from 1)."""
    short = {"query": [1, 1, 1], "relevance": [1, 0, 0], "score": [0.5, 0.5, 0.5]}
    assert tk.evaluate(short, ["rr", "P@1"], ties="ranx").summary.iloc[0].tolist() == [1.0, 1.0]
    scores = np.array([0.5, 0.25] * 10 + [0.5, 0.5, 0.25])  # 23 candidates, two scores, many ties
    order = _numba_argsort(-scores)
    assert order[:5] != sorted(order[:5])  # the relevant row below is not where the row order puts it
    for relevant in (0, 4, 9, 20):
        frame = {"query": [1] * len(scores), "relevance": [int(i == relevant) for i in range(len(scores))],
                 "score": scores}
        got = tk.evaluate(frame, ["rr"], ties="ranx").summary.iloc[0, 0]
        assert got == pytest.approx(1 / (order.index(relevant) + 1)), relevant


def test_a_candidate_without_a_judgment_gains_nothing_even_where_grade_0_gains():
    """Judgments kept apart: item b is retrieved first but never judged; the map {0: 1, 1: 3} gives
    judged items of grade 0 a gain, not unjudged ones (trec_eval). DCG = 3 / log2(3) (a at rank 2);
    the ideal ranks the judged gains 3 (a) and 1 (c, grade 0): 3 + 1 / log2(3)."""
    run = {"query": ["q", "q"], "item": ["b", "a"], "score": [0.9, 0.5]}
    qrels = pd.DataFrame({"query": ["q", "q"], "item": ["a", "c"], "relevance": [1, 0]})
    res = tk.evaluate(run, ["dcg(gain={0:1,1:3})", "ndcg(gain={0:1,1:3})"], item="item", qrels=qrels)
    dcg = 3 / math.log2(3)
    assert res.summary.iloc[0].tolist() == pytest.approx([dcg, dcg / (3 + 1 / math.log2(3))])


def test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand():
    """trec_eval's unjudged: no judgment, or a negative grade. Query 1 retrieves a (grade 1), b
    (grade -1), c (no judgment): unj@3 = 2/3, unj@5 = 2/5 (pad) or 2/3 (shrink: over min(5, 3));
    rbp_resid(p=0.5) = (1 - p)(p^1 + p^2) + p^3 = 0.5 over ranks 2 and 3. Query 2 has every candidate
    judged: unj = 0 and rbp_resid = 0 (trec_eval reports no residual there, not p^n)."""
    run = {"query": ["1", "1", "1", "2", "2"], "item": ["a", "b", "c", "a", "b"], "score": [0.9, 0.8, 0.7, 0.9, 0.8]}
    qrels = pd.DataFrame({"query": ["1", "1", "2", "2"], "item": ["a", "b", "a", "b"], "relevance": [1, -1, 1, 0]})
    metrics = ["unj@3", "unj@5", "rbp_resid(p=0.5)", "rbp_resid"]
    pad = tk.evaluate(run, metrics, item="item", qrels=qrels).per_query.set_index("query")[metrics]
    assert pad.loc["1"].tolist() == pytest.approx([2 / 3, 2 / 5, 0.5, 0.1 * (0.9 + 0.81) + 0.9**3])
    assert pad.loc["2"].tolist() == [0.0, 0.0, 0.0, 0.0]
    shrink = tk.evaluate(run, metrics, item="item", qrels=qrels, short_lists="shrink").per_query.set_index("query")
    assert shrink.loc["1", "unj@5"] == pytest.approx(2 / 3)


def test_negative_grades_gain_their_value_as_in_scikit_learn():
    """negative_grades="gain" (scikit-learn's dcg_score, torchmetrics): a grade of -1 ranked first
    costs 1; dcg = -1 + 1/log2(3) + 2/log2(4), scikit-learn's own value."""
    from sklearn.metrics import dcg_score

    frame = {"query": [1, 1, 1], "relevance": [-1, 1, 2], "score": [0.9, 0.5, 0.1]}
    want = dcg_score([[-1, 1, 2]], [[0.9, 0.5, 0.1]])
    assert want == pytest.approx(-1 + 1 / math.log2(3) + 1)
    assert tk.evaluate(frame, ["dcg"], conventions="sklearn").summary.iloc[0, 0] == pytest.approx(want)
    assert tk.evaluate(frame, ["dcg"]).summary.iloc[0, 0] == pytest.approx(1 / math.log2(3) + 1)  # "zero"


def test_matrix_ideal_dcg_under_negative_grades_ranks_the_grade_0_cells_before_the_negative_one():
    """A score matrix row of grades -1, 0, 0, 2 (the 0 cells not stored), in that order:
    dcg = -1 + 2/log2(5). Under negative_grades="gain" the ideal ranks every judged cell: 2, 0, 0, -1,
    so the ideal DCG is 2 - 1/log2(5) (the two unstored cells of grade 0 take ranks 2 and 3)."""
    got = tk.evaluate_matrix(np.array([[0.9, 0.8, 0.7, 0.6]]), np.array([[-1, 0, 0, 2]]), ["dcg", "ndcg"],
                             negative_grades="gain")
    dcg = -1 + 2 / math.log2(5)
    assert got.summary.iloc[0].tolist() == pytest.approx([dcg, dcg / (2 - 1 / math.log2(5))])


# --- score matrices: what a selection of the top leaves out ---------------------------------------


def test_matrix_counted_in_place_counts_an_excluded_cell_below_the_threshold_once():
    """In place (ap looks at the whole row): scores 0.9 (relevant), 0.1 (excluded, and below
    score_threshold=0.2), 0.5 (relevant), 0.3: three candidates, both relevant ones first."""
    got = tk.evaluate_matrix(np.array([[0.9, 0.1, 0.5, 0.3]]), np.array([[1, 0, 1, 0]]),
                             ["ap", "num_ret", "num_rel_ret", "set_precision"], exclude=np.array([[0, 1, 0, 0]]),
                             score_threshold=0.2)
    assert got.summary.iloc[0].tolist() == pytest.approx([1.0, 3.0, 2.0, 2 / 3])


def test_matrix_metrics_of_the_top_still_count_the_whole_row():
    """20 items, relevant at ranks 1, 3 and 4 (R = 3): the metrics look at the top 3 at most (the
    top is selected out), yet num_ret and set_precision count all 20 candidates: 20 and 3/20;
    r_precision counts the relevant items within the top R = 3: 2/3."""
    scores = np.linspace(1.0, 0.05, 20)[None, :]
    grades = np.zeros((1, 20), int)
    grades[0, [0, 2, 3]] = 1
    got = tk.evaluate_matrix(scores, grades, ["precision@1", "r_precision", "num_ret", "set_precision", "fallout@2"])
    assert got.summary.iloc[0].tolist() == pytest.approx([1.0, 2 / 3, 20.0, 3 / 20, 1 / 17])
    assert got.info["matrix"]["candidates_selected"] < 20  # the top was selected, not the whole row


# --- weighted means of extreme values; the best of a column ----------------------------------------


def test_weighted_mean_of_values_whose_sum_overflows():
    """Values of 1e308 and 1.5e308 (a DCG of huge grades): their sum overflows, their mean does not."""
    from fractions import Fraction

    from topkeval.engine.aggregate import weighted_mean

    values = np.array([1.5e308, 1e308, np.nan])
    assert weighted_mean(values, None) == float((Fraction(1.5e308) + Fraction(1e308)) / 2)
    want = float((Fraction(1.5e308) * 1 + Fraction(1e308) * 3) / 4)
    assert weighted_mean(values, np.array([1.0, 3.0, 5.0])) == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize("seed", range(40))
def test_mean_of_defined_values_equals_the_exact_mean(seed):
    """The mean without weights (its quick path for defined values far from overflow, and the general
    one for NaN, infinities and values past 1e300) against the exact mean of the defined values in
    fractions, rounded once: within one rounding of each addition."""
    from fractions import Fraction

    from topkeval.engine.aggregate import weighted_mean

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    values = rng.random(n) * 10.0 ** rng.integers(-5, 6)
    kind = seed % 5
    if kind == 1:
        values[rng.random(n) < 0.3] = np.nan
    elif kind == 2:
        values[rng.integers(0, n)] = rng.choice([1.5e308, -1.2e305, 2e300 * 1.01])
    elif kind == 3:
        values[:] = np.nan
    elif kind == 4:
        values[rng.integers(0, n)] = np.inf
    defined = values[~np.isnan(values)]
    got = weighted_mean(values, None)
    if not len(defined):
        assert math.isnan(got)
    elif not np.isfinite(defined).all():
        assert got == np.inf
    else:
        exact = float(sum(Fraction(float(v)) for v in defined) / len(defined))
        assert got == pytest.approx(exact, rel=1e-13, abs=0)
        with np.errstate(over="ignore"):
            if np.isfinite(defined.sum()):
                assert got == float(np.mean(defined))  # numpy's own mean of the defined values, to the bit


def test_best_rows_count_means_equal_up_to_rounding_as_ties():
    """0.1 + 0.2 and 0.3 are one mean summed in two orders: both models are best; lower is better for fp."""
    from topkeval.outputs.text import best_rows

    summary = pd.DataFrame({"recall@1": [0.1 + 0.2, 0.3, 0.2], "fp@1": [1.0, 2.0, 1.0 + 1e-16]},
                           index=["a", "b", "c"])
    assert best_rows(summary) == {"recall@1": {"a", "b"}, "fp@1": {"a", "c"}}

