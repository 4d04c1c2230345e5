"""Registry-wide invariances: row order, query order, monotone score transforms, batch = one at a
time, and every input form (pandas, polars, pyarrow, dict, parquet, csv) gives the same numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import topkeval as tk
from strategies import conventions, logs
from topkeval.metrics.names import FAMILIES

# (the ratios pooled over a click log's queries are not per-query values: tests/test_unbiased.py has them)
ALL_METRICS = [m for fam in FAMILIES.values() if not fam.beyond and fam.ips != "pooled" for m in fam.examples()] + [
    "precision@1", "recall@10", "hit_rate@2"]


def _eval(frame, conv, **kw):
    ties = conv.get("ties", "expected")  # a family exact under some tie rules only is refused under the others
    metrics = [m for m in ALL_METRICS if tk.parse_metric(m).info.ties is None or ties in tk.parse_metric(m).info.ties]
    return tk.evaluate(frame, metrics=metrics, query="query", relevance="grade", score=["a", "b"],
                       item="item", **conv, **kw)


def _sorted(pq):
    return pq.sort_values(["model", "query"]).reset_index(drop=True)


@given(rows=logs(), conv=conventions(), seed=st.integers(0, 2**31))
def test_row_and_query_order(rows, conv, seed):
    frame = pd.DataFrame(rows)
    base = _eval(frame, conv)
    keys = np.random.default_rng(seed).random(len(frame))
    if conv["ties"] in ("first", "ranx"):
        # "first" and "ranx" rank tied rows by their input order by definition: interleave the
        # queries but keep each query's rows in their relative order
        for idx in frame.groupby("query").indices.values():
            keys[idx] = np.sort(keys[idx])
    shuffled = frame.iloc[np.argsort(keys)]
    other = _eval(shuffled, conv)
    # compat(ideal=judgments) is ir_measures' Compat: its ideal ranks equal grades in the judgments' order,
    # here the rows' order, by definition (tests/test_ir_measures_provider.py holds it to ir_measures)
    in_order = [c for c in base.summary.columns if "ideal=judgments" in c]
    # to the last bit: the kernel adds each query's terms in rank order, whatever the row order
    pd.testing.assert_frame_equal(_sorted(base.per_query.drop(columns=in_order)),
                                  _sorted(other.per_query.drop(columns=in_order)), check_exact=True)
    pd.testing.assert_frame_equal(base.summary.drop(columns=in_order), other.summary.drop(columns=in_order),
                                  rtol=1e-12)


@pytest.mark.parametrize("ties", ["expected", "item_desc"])
@pytest.mark.parametrize("path", ["count", "sort"])
def test_long_tied_lists_do_not_depend_on_row_order(ties, path, monkeypatch):
    """Many relevant candidates in large tie groups with gains that are not whole numbers: the
    kernel's sums run in rank order (a stable sort past 64 candidates), so a shuffle of the rows
    changes no bit of any value."""
    from topkeval.kernels import cpu

    monkeypatch.setattr(cpu, "COUNT_MAX_RELEVANT", 10**9 if path == "count" else 0)
    rng = np.random.default_rng(7)
    n = 900
    frame = pd.DataFrame({"query": np.repeat([1, 2, 3], n // 3), "item": np.arange(n),
                          "grade": rng.choice([0, 1, 2, 3], n, p=[0.4, 0.3, 0.2, 0.1]),
                          "s": rng.integers(0, 12, n) / 10})
    metrics = ["ndcg@50", "ndcg(gain={1:0.1,2:0.3,3:0.7})@200", "ap", "rbp(p=0.9)@100", "recall@100", "rr"]
    pq = [tk.evaluate(f, metrics, relevance="grade", score="s", item="item", ties=ties).per_query
          for f in (frame, frame.sample(frac=1, random_state=1))]
    pd.testing.assert_frame_equal(_sorted(pq[0].assign(model="s")), _sorted(pq[1].assign(model="s")),
                                  check_exact=True)


@given(rows=logs(), conv=conventions())
def test_monotone_transform_of_scores(rows, conv):
    frame = pd.DataFrame(rows)
    moved = frame.assign(a=frame["a"] * 3 + 7, b=np.exp(frame["b"]))  # order and ties preserved
    # a threshold, the sign of a score (nonpositive_scores) and float32 rounding are on the raw
    # scale: leave them out here
    conv = dict(conv, score_threshold=None, nonpositive_scores="count", score_precision="exact")
    pd.testing.assert_frame_equal(_eval(frame, conv).per_query, _eval(moved, conv).per_query)


@given(rows=logs(), conv=conventions())
def test_batch_equals_one_query_at_a_time(rows, conv):
    frame = pd.DataFrame(rows)
    batch = _eval(frame, conv).per_query.set_index(["model", "query"])
    for _q, part in frame.groupby("query", sort=False):
        single = _eval(part.reset_index(drop=True), conv).per_query.set_index(["model", "query"])
        for key in single.index:
            pd.testing.assert_series_equal(single.loc[key], batch.loc[key], check_names=False)


def _div(num, den, undefined):
    """``num / den`` per query, ``undefined`` where ``den`` is 0 (the metrics' convention)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den == 0, undefined, num / np.where(den == 0, 1.0, den))


@given(rows=logs(), conv=conventions())
def test_values_in_range(rows, conv):
    """Bounds, and the identities that tie the metrics to the counts they are made of: a wrong
    denominator or a swapped count in one formula breaks one of them."""
    res = _eval(pd.DataFrame(rows), conv)
    for name in res.metrics:
        fam = tk.parse_metric(name).info
        v = res.per_query[name].to_numpy()
        v = v[~np.isnan(v)]
        if fam.name in ("gm_map", "gm_bpref"):  # logs of values in [0.00001, 1]
            assert (v <= 1e-12).all() and (v >= np.log(1e-5) - 1e-12).all(), name
        elif fam.name not in ("utility", "yaap"):  # utility: coefficients of any sign; yaap: a log-odds form
            assert (v >= -1e-12).all(), name
        binary_rbp = fam.name == "rbp" and tk.parse_metric(name).param("gain") == "binary"  # graded rbp is not bounded
        if tk.parse_metric(name).bounded or binary_rbp:
            assert (v <= 1 + 1e-12).all(), name
    pq = res.per_query
    und = conv["undefined"]
    n, R, r = pq["num_ret"], pq["num_rel"], pq["num_rel_ret"]
    N, kk = n - r, np.minimum(3, n)
    den = kk if conv["short_lists"] == "shrink" else np.full(len(pq), 3.0)
    tp, fp, tn = pq["tp@3"], pq["fp@3"], pq["tn@3"]

    def same(name, expected):
        np.testing.assert_allclose(pq[name], expected, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=name)

    assert (r <= n).all() and (r <= R).all()
    same("fn@3", R - tp)
    same("tn@3", N - fp)
    if conv["nonpositive_scores"] == "count":  # "miss" counts fewer found, and no more false positives
        same("fp@3", kk - tp)
        if conv["ties"] != "expected":
            same("hit_rate@3", (tp > 0).astype(float))
    same("precision@3", _div(tp, den, und))
    same("recall@3", _div(tp, R, und))
    same("recall_capped@3", _div(tp, np.minimum(R, 3), und))
    same("f1@3", _div(2 * tp, R + den, und))
    same("fbeta(beta=0.5)@3", _div(1.25 * tp, 0.25 * R + den, und))
    same("specificity@3", _div(tn, N, und))
    same("fallout@3", _div(fp, N, und))
    same("judged@3", _div(kk, den, und))  # every candidate of a log has a judgment (its grade)
    same("set_precision", _div(r, n, und))
    same("set_recall", _div(r, R, und))
    same("set_f", _div(2 * r, R + n, und))
    same("set_f(beta=0.5)", _div(1.25 * r, 0.25 * R + n, und))
    same("set_relative_precision", _div(r, np.minimum(n, R), und))
    same("auc", pq["auc"].where(r * N > 0, und))
    same("set_ap", _div(r * r, n * R, und))  # trec_eval set_map
    same("utility", r - (n - r))
    same("utility(a=-0.5)", -0.5 * r - (n - r))
    same("utility(d=-0.5)", r - (n - r) - 0.5 * (r - n - R))  # docs 0: trec_eval's default
    same("utility(docs=0.5)", r - (n - r))
    same("num_nonrel_judged_ret", N)  # every candidate of a log has a judgment (its grade, >= 0 here)
    if "gm_map" in pq:  # not under ties="expected"
        same("gm_map", np.log(np.maximum(pq["ap"], 1e-5)))
        same("gm_bpref", np.log(np.maximum(pq["bpref"], 1e-5)))
    defined = R > 0
    same("ap_capped@3", (pq["ap@3"] * R / np.minimum(R, 3)).where(defined, pq["ap_capped@3"]))
    for cut, whole in (("rr@3", "rr"), ("ap@3", "ap"), ("dcg@3", "dcg"), ("rbp(p=0.8)@3", "rbp(p=0.8)")):
        ok = pq[whole].notna()
        assert (pq.loc[ok, cut] <= pq.loc[ok, whole] + 1e-12).all(), cut


def test_single_functions_equal_evaluate():
    rng = np.random.default_rng(0)
    rel = rng.integers(0, 2, 12)
    sc = rng.integers(0, 4, 12).astype(float)
    res = tk.evaluate({"query": np.zeros(12), "relevance": rel, "score": sc},
                      metrics=["recall@4", "precision@4", "f1@4", "fbeta(beta=2)@4", "specificity@4", "r_precision"])
    got = res.summary.iloc[0].tolist()
    single = [tk.recall_at_k(rel, sc, 4), tk.precision_at_k(rel, sc, 4), tk.f1_at_k(rel, sc, 4),
              tk.fbeta_at_k(rel, sc, 4, beta=2), tk.specificity_at_k(rel, sc, 4), tk.r_precision(rel, sc)]
    assert got == pytest.approx(single)


def test_input_forms_agree(tmp_path):
    pl = pytest.importorskip("polars")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    n = 500
    frame = pd.DataFrame({"query": rng.choice(["x", "y", "z", "w"], n), "item": rng.permutation(n),
                          "grade": rng.integers(0, 3, n), "a": rng.integers(0, 9, n) / 4, "b": rng.random(n)})
    pq.write_table(pa.Table.from_pandas(frame), tmp_path / "log.parquet")
    frame.to_csv(tmp_path / "log.csv", index=False)
    forms = [frame, pl.from_pandas(frame), pa.Table.from_pandas(frame),
             {c: frame[c].to_numpy() for c in frame}, tmp_path / "log.parquet", str(tmp_path / "log.csv")]
    results = [_eval(f, {}) for f in forms]
    for other in results[1:]:
        pd.testing.assert_frame_equal(results[0].summary, other.summary)
        pd.testing.assert_frame_equal(results[0].per_query, other.per_query)


def test_inputs_not_mutated():
    frame = pd.DataFrame({"query": [2, 1, 2, 1], "item": [1, 2, 3, 4], "grade": [1, 0, 0, 1],
                          "a": [0.1, 0.2, 0.3, 0.4], "b": [1.0, 1.0, 1.0, 1.0]})
    copy = frame.copy()
    _eval(frame, {})
    pd.testing.assert_frame_equal(frame, copy)
