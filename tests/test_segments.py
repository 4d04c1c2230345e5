"""Segments (by=) and query weights (weight=): every number checked against an evaluation that
does not know about them (the segment's rows alone; each query repeated w times)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topkeval as tk
from strategies import conventions, logs
from topkeval.analysis.compare import adjust
from topkeval.errors import DataError, ParameterError

METRICS = ["recall@2", "ndcg@3", "r_precision"]


def _with_attrs(rows, seed):
    frame = pd.DataFrame(rows)
    rng = np.random.default_rng(seed)
    queries = sorted(frame["query"].unique())
    seg = dict(zip(queries, rng.choice(["m", "d", "t"], len(queries))))
    w = dict(zip(queries, rng.integers(0, 4, len(queries))))
    w[queries[0]] = 1  # a positive total
    return frame.assign(device=frame["query"].map(seg), traffic=frame["query"].map(w))


def _close(a, b) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12 * max(1.0, abs(a))


@settings(max_examples=40, deadline=None)
@given(rows=logs(max_queries=6, max_len=5), conv=conventions(), seed=st.integers(0, 100))
def test_segment_means_equal_each_segment_evaluated_alone(rows, conv, seed):
    frame = _with_attrs(rows, seed)
    res = tk.evaluate(frame, METRICS, relevance="grade", score=["a", "b"], item="item", by="device", **conv)
    seg = res.segments
    for device, part in frame.groupby("device"):
        alone = tk.evaluate(part, METRICS, relevance="grade", score=["a", "b"], item="item", **conv)
        if device not in seg.index.get_level_values(0):
            assert alone.info["evaluated"] == 0
            continue
        for model in ("a", "b"):
            for metric in METRICS:
                assert _close(seg.loc[(device, model), metric], alone.summary.loc[model, metric])
            assert seg.loc[(device, model), "queries"] == alone.info["evaluated_per_model"][model]
    for model in ("a", "b"):
        for metric in METRICS:
            assert _close(seg.loc[("(all)", model), metric], res.summary.loc[model, metric])


@settings(max_examples=40, deadline=None)
@given(rows=logs(max_queries=6, max_len=5), conv=conventions(), seed=st.integers(0, 100))
def test_weighted_means_equal_queries_repeated_by_their_weight(rows, conv, seed):
    frame = _with_attrs(rows, seed)
    res = tk.evaluate(frame, METRICS, relevance="grade", score=["a", "b"], item="item", weight="traffic", **conv)
    copies = [frame[frame["query"] == q].assign(query=f"{q}#{i}")
              for q, w in frame.groupby("query")["traffic"].first().items() for i in range(int(w))]
    repeated = tk.evaluate(pd.concat(copies), METRICS, relevance="grade", score=["a", "b"], item="item", **conv)
    for model in ("a", "b"):
        for metric in METRICS:
            assert _close(res.summary.loc[model, metric], repeated.summary.loc[model, metric])
    assert res.info["weight"]["total"] == frame.groupby("query")["traffic"].first().sum()


def _segment_log(n_queries=14, seed=3):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_queries):
        for j in range(6):
            rows.append({"query": q, "item": j, "rel": int(rng.random() < 0.4), "old": rng.integers(0, 3) / 2,
                         "new": rng.random(), "device": "mobile" if q % 3 else "desktop", "traffic": 1 + q % 4})
    frame = pd.DataFrame(rows)
    frame.loc[frame["item"] == 0, "rel"] = 1
    return frame


def test_compare_by_segment_equals_compare_of_each_segment_and_one_correction():
    frame = _segment_log()
    kw = dict(relevance="rel", score=["old", "new"], item="item")
    res = tk.evaluate(frame, ["recall@2", "ndcg@3"], by="device", **kw)
    table = res.compare(baseline="old", correction="holm", n_resamples=20_000)  # 2**n <= 20000: exact p-values
    for device, part in frame.groupby("device"):
        alone = tk.evaluate(part, ["recall@2", "ndcg@3"], **kw).compare(baseline="old", correction=None,
                                                                         n_resamples=20_000)
        mine = table[table["device"] == device].reset_index(drop=True)
        for column in ("metric", "baseline", "value", "delta", "wins", "ties", "losses", "n_queries", "p_value"):
            assert mine[column].tolist() == alone[column].tolist(), column
    overall = tk.evaluate(frame, ["recall@2", "ndcg@3"], **kw).compare(baseline="old", correction=None,
                                                                        n_resamples=20_000)
    assert table[table["device"] == "(all)"]["p_value"].tolist() == overall["p_value"].tolist()
    # the correction runs over every segment x metric x model row, the overall rows included
    assert np.allclose(table["p_adjusted"], adjust(table["p_value"].to_numpy(), "holm"))
    bonf = res.compare(baseline="old", correction="bonferroni", n_resamples=20_000)
    assert np.allclose(bonf["p_adjusted"], np.minimum(1, bonf["p_value"] * len(bonf)))


def test_weights_of_one_change_nothing_and_integer_weights_repeat_queries():
    frame = _segment_log(40)
    kw = dict(relevance="rel", score=["old", "new"], item="item")
    plain = tk.evaluate(frame, ["recall@2", "ndcg@3"], **kw)
    ones = tk.evaluate(frame.assign(one=1.0), ["recall@2", "ndcg@3"], weight="one", **kw)
    for test in ("permutation", "bootstrap"):
        a = plain.compare(baseline="old", test=test, seed=5)
        b = ones.compare(baseline="old", test=test, seed=5)
        for column in ("delta", "value", "baseline", "ci_low", "ci_high", "effect_size"):
            assert np.allclose(a[column], b[column], rtol=1e-12, atol=1e-12), (test, column)
        assert np.allclose(a["p_value"], b["p_value"], atol=2 / 10_001)
    ci_a, ci_b = plain.summary_ci(seed=2), ones.summary_ci(seed=2)
    assert np.allclose(ci_a[["mean", "ci_low", "ci_high"]], ci_b[["mean", "ci_low", "ci_high"]], rtol=1e-12)
    weighted = tk.evaluate(frame, ["recall@2"], weight="traffic", **kw).compare(baseline="old")
    copies = [frame[frame["query"] == q].assign(query=f"{q}#{i}")
              for q, w in frame.groupby("query")["traffic"].first().items() for i in range(int(w))]
    repeated = tk.evaluate(pd.concat(copies), ["recall@2"], **kw).compare(baseline="old")
    for column in ("delta", "value", "baseline"):
        assert math.isclose(weighted[column].item(), repeated[column].item(), rel_tol=1e-12, abs_tol=1e-15)
    assert weighted["weight"].item() == frame.groupby("query")["traffic"].first().sum()


def test_per_query_report_cli_and_json_carry_the_segments(tmp_path, capsys):
    import json
    import re

    from topkeval.cli import main

    frame = _segment_log(30)
    res = tk.evaluate(frame, ["recall@2"], relevance="rel", score=["old", "new"], item="item", by="device",
                      weight="traffic")
    pq = res.per_query
    assert list(pq.columns[:4]) == ["model", "query", "device", "traffic"]
    assert (pq["device"] == np.where(pq["query"] % 3 == 0, "desktop", "mobile")).all()
    text = Path(res.report(tmp_path / "r.html", n_resamples=300, curves=False)).read_text(encoding="utf-8")
    block = text[text.index('<table class="segments">'):]
    block = block[:block.index("</table>")]
    cells = [float(v) for v in re.findall(r'data-value="([^"]+)"', block)]
    seg = res.segments.reset_index()
    assert cells == [x for _, r in seg.iterrows() for x in (r["recall@2"], r["queries"], round(r["weight"]))]
    path = tmp_path / "log.parquet"
    frame.to_parquet(path)
    assert main(["evaluate", str(path), "--relevance", "rel", "--item", "item", "--score", "old", "--score", "new",
                 "-m", "recall@2", "--by", "device", "--weight", "traffic", "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [r["device"] for r in payload["segments"]] == ["desktop", "desktop", "mobile", "mobile", "(all)", "(all)"]
    assert payload["summary"]["new"]["recall@2"] == res.summary.loc["new", "recall@2"]
    assert main(["compare", str(path), "--relevance", "rel", "--baseline", "old", "--score", "new", "-m", "recall@2",
                 "--by", "device", "--format", "csv"]) == 0
    out = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert out["device"].tolist() == ["desktop", "mobile", "(all)"]


@pytest.mark.parametrize("change,options,exc,pattern", [
    (lambda f: f.assign(device=np.where(f["item"] == 1, "x", f["device"])), dict(by="device"), DataError,
     "same on every row of a query"),
    (lambda f: f.assign(device=f["device"].where(f["query"] != 2)), dict(by="device"), DataError, "missing values"),
    (lambda f: f.assign(device=np.where(f["query"] == 2, "(all)", f["device"])), dict(by="device"), DataError,
     "names every query"),
    (lambda f: f.assign(traffic=np.where(f["query"] == 1, -1, f["traffic"])), dict(weight="traffic"), DataError,
     ">= 0"),
    (lambda f: f.assign(traffic=np.where(f["query"] == 1, np.nan, f["traffic"])), dict(weight="traffic"), DataError,
     "finite"),
    (lambda f: f.assign(traffic=0), dict(weight="traffic"), DataError, "total weight"),
    (lambda f: f.assign(traffic="a lot"), dict(weight="traffic"), DataError, "must hold numbers"),
    (lambda f: f.assign(traffic=np.where(f["item"] == 1, 9, f["traffic"])), dict(weight="traffic"), DataError,
     "same on every row"),
    (lambda f: f.rename(columns={"device": "model"}), dict(by="model"), ParameterError, "cannot be called"),
    (lambda f: f.rename(columns={"device": "delta"}), dict(by="delta"), ParameterError, "cannot be called"),
    (lambda f: f.rename(columns={"device": "weight"}), dict(by="weight", weight="traffic"), ParameterError,
     "cannot be called"),
    (lambda f: f, dict(by="traffic", weight="traffic"), ParameterError, "both a segment"),
    (lambda f: f, dict(by="rel"), ParameterError, "other than the query"),
    (lambda f: f, dict(by="devise"), tk.ColumnError, "devise"),
    (lambda f: f, dict(by=["device", "device"]), ParameterError, "twice"),
])
def test_bad_segments_and_weights_are_refused(change, options, exc, pattern):
    frame = change(_segment_log())
    with pytest.raises(exc, match=pattern):
        tk.evaluate(frame, ["recall@2"], relevance="rel", score=["old", "new"], item="item", **options)


def test_judgments_apart_and_streamed_files_give_the_same_segments(tmp_path):
    frame = _segment_log(30)
    kw = dict(score=["old", "new"], item="item", by="device", weight="traffic")
    joined = tk.evaluate(frame, ["recall@2", "ndcg@3"], relevance="rel", **kw)
    truth = frame[frame.rel > 0][["query", "item"]].assign(relevance=1)
    apart = tk.evaluate(frame.drop(columns="rel"), ["recall@2", "ndcg@3"], qrels=truth, **kw)
    pd.testing.assert_frame_equal(apart.segments, joined.segments)
    pd.testing.assert_frame_equal(apart.compare(baseline="old"), joined.compare(baseline="old"))
    stacked = frame.melt(id_vars=["query", "item", "device", "traffic"], value_vars=["old", "new"], var_name="run",
                         value_name="score")
    runs = tk.evaluate(stacked, ["recall@2"], item="item", qrels=truth, model="run", by="device", weight="traffic")
    assert np.allclose(runs.segments.loc[[("mobile", "new"), ("(all)", "old")], "recall@2"],
                       joined.segments.loc[[("mobile", "new"), ("(all)", "old")], "recall@2"], rtol=1e-12)
    path = tmp_path / "log.parquet"
    frame.sample(frac=1, random_state=1).to_parquet(path)  # shuffled: the streamed path partitions by query
    streamed = tk.evaluate(str(path), ["recall@2", "ndcg@3"], relevance="rel", chunk_rows=40, **kw)
    assert streamed.info["chunks"] > 1
    pd.testing.assert_frame_equal(streamed.segments.sort_index(), joined.segments.sort_index(), rtol=1e-12)
    with pytest.raises(ParameterError, match="keep_per_query=False"):
        tk.evaluate(str(path), ["recall@2"], relevance="rel", chunk_rows=40, keep_per_query=False, **kw)
    one_missing = frame[frame["query"] != 4].drop(columns="rel")
    with pytest.raises(DataError, match="absent from the run"):
        tk.evaluate(one_missing, ["recall@2"], qrels=truth, missing_queries="zero", **kw)


def test_a_stacked_table_without_judgments_apart_is_the_wide_form():
    """model= without qrels=: each model's rows alone. When every model ranks the same candidates, that is
    the wide form (one score column per model), segments, weights, ties, comparison and curves included."""
    frame = _segment_log(30)
    frame["old"] = frame["old"].round(1)  # ties
    kw = dict(item="item", by="device", weight="traffic")
    wide = tk.evaluate(frame, METRICS, relevance="rel", score=["old", "new"], **kw)
    stacked = frame.melt(id_vars=["query", "item", "rel", "device", "traffic"], value_vars=["old", "new"],
                         var_name="run", value_name="score").sample(frac=1, random_state=2)
    res = tk.evaluate(stacked, METRICS, relevance="rel", model="run", **kw)
    assert res.models == list(dict.fromkeys(stacked["run"]))  # in order of first appearance
    pd.testing.assert_frame_equal(res.summary.loc[wide.models], wide.summary, rtol=1e-12)
    pd.testing.assert_frame_equal(res.segments.sort_index(), wide.segments.sort_index(), rtol=1e-12)
    key = ["model", "query"]
    pd.testing.assert_frame_equal(res.per_query.sort_values(key).reset_index(drop=True),
                                  wide.per_query.sort_values(key).reset_index(drop=True), rtol=1e-12)
    assert res.info["queries"] == wide.info["queries"] and res.info["skipped_empty"] == wide.info["skipped_empty"]
    assert res.info["ties_at_cutoff"] == wide.info["ties_at_cutoff"]
    assert np.allclose(res.compare(baseline="old", n_resamples=500)["delta"],
                       wide.compare(baseline="old", n_resamples=500)["delta"], rtol=1e-12)
    curve_key = ["model", "metric", "k"]
    pd.testing.assert_frame_equal(res.curves().sort_values(curve_key).reset_index(drop=True),
                                  wide.curves().sort_values(curve_key).reset_index(drop=True), rtol=1e-12)
    assert (res.diff("old", "new", "recall@2").set_index("query").sort_index()["delta"].tolist()
            == wide.diff("old", "new", "recall@2").set_index("query").sort_index()["delta"].tolist())
    # a model whose list misses a relevant candidate of another has a smaller R: its own rows decide
    short = stacked[~((stacked["run"] == "new") & (stacked["rel"] > 0) & (stacked["query"] == 0))]
    alone = tk.evaluate(short[short["run"] == "new"], METRICS, relevance="rel", item="item")
    both = tk.evaluate(short, METRICS, relevance="rel", item="item", model="run")
    assert np.allclose(both.summary.loc["new"], alone.summary.iloc[0], rtol=1e-12)
    assert both.info["skipped_empty_per_model"]["new"] == alone.info["skipped_empty"]
    with pytest.raises(ParameterError, match="exactly one score column"):
        tk.evaluate(stacked.assign(s2=1.0), METRICS, relevance="rel", model="run", score=["score", "s2"])
    with pytest.raises(ParameterError, match="columns must differ"):
        tk.evaluate(stacked, METRICS, relevance="rel", model="item", item="item")


def test_a_categorical_model_column_names_the_models_it_holds_in_order_of_appearance():
    """A pandas Categorical run column (after a filter) keeps unused categories, in category order: they
    are no models (a model without rows would be a summary of NaN and, first, the default baseline)."""
    frame = pd.DataFrame({"query": [1, 1, 2, 2] * 2, "item": ["x", "y"] * 4, "relevance": [1, 0, 0, 1] * 2,
                          "score": [0.9, 0.1, 0.2, 0.8, 0.1, 0.9, 0.8, 0.2], "run": ["b"] * 4 + ["a"] * 4})
    frame["run"] = pd.Categorical(frame["run"], categories=["z", "a", "b"])
    truth = frame[frame["run"] == "b"][["query", "item", "relevance"]]
    for res in (tk.evaluate(frame, ["P@1"], item="item", model="run"),
                tk.evaluate(frame.drop(columns="relevance"), ["P@1"], item="item", model="run", qrels=truth)):
        assert res.models == ["b", "a"] and res.summary["P@1"].tolist() == [1.0, 0.0]
        assert res.compare(n_resamples=100)[["model", "delta"]].values.tolist() == [["a", -1.0]]


def test_where_segments_and_weights_are_refused():
    frame = _segment_log()
    res = tk.evaluate(frame, ["recall@2"], relevance="rel", score=["old", "new"], item="item", weight="traffic")
    with pytest.raises(ParameterError, match="no weighted form"):
        res.compare(baseline="old", test="t")
    with pytest.raises(ParameterError, match="no segments"):
        _ = res.segments


def test_a_weight_column_called_weight_and_zero_weights():
    frame = _segment_log(30).rename(columns={"traffic": "weight"})
    kw = dict(relevance="rel", score=["old", "new"], item="item")
    res = tk.evaluate(frame, ["recall@2"], weight="weight", **kw)
    assert "weight" in res.per_query.columns and res.compare(baseline="old")["weight"].item() > 0
    # a query of weight 0 counts nowhere: as if its rows were dropped (the repeated-queries reading)
    zero = frame.assign(weight=np.where(frame["query"] < 10, 0, frame["weight"]))
    a = tk.evaluate(zero, ["recall@2"], weight="weight", **kw)
    b = tk.evaluate(zero[zero["query"] >= 10], ["recall@2"], weight="weight", **kw)
    ca, cb = a.compare(baseline="old"), b.compare(baseline="old")
    for column in ("delta", "wins", "ties", "losses", "n_queries", "effect_size", "ci_low", "ci_high", "p_value"):
        assert np.allclose(ca[column], cb[column], rtol=1e-12), column
    sa, sb = a.summary_ci(), b.summary_ci()
    assert np.allclose(sa[["mean", "ci_low", "ci_high", "n_queries"]], sb[["mean", "ci_low", "ci_high", "n_queries"]])
    seg_a = tk.evaluate(zero, ["recall@2"], weight="weight", by="device", **kw).segments
    seg_b = tk.evaluate(zero[zero["query"] >= 10], ["recall@2"], weight="weight", by="device", **kw).segments
    pd.testing.assert_frame_equal(seg_a, seg_b)


def test_two_segment_columns_and_each_models_own_weight_total():
    """by= two columns: one row per pair of values (and the overall rows), each the means of its
    queries alone; with runs that lack different judged queries, each model's weight total and query
    count are those of its own evaluated queries of positive weight (pandas by hand)."""
    rng = np.random.default_rng(12)
    rows = []
    for q in range(24):
        for model in ("r1", "r2"):
            if (model, q % 5) in (("r1", 0), ("r2", 3)):
                continue  # each run misses other judged queries
            rows += [(q, f"d{i}", float(s), model) for i, s in enumerate(rng.permutation(6))]
    run = pd.DataFrame(rows, columns=["query", "item", "score", "model"])
    attrs = pd.DataFrame({"query": range(24), "device": rng.choice(["m", "d"], 24), "market": rng.choice(["us", "uk"], 24),
                          "w": rng.integers(0, 4, 24).astype(float)})
    run = run.merge(attrs, on="query")
    qrels = pd.DataFrame([(q, f"d{i}", int(g)) for q in range(24) for i, g in enumerate(rng.integers(0, 2, 6))],
                         columns=["query", "item", "relevance"])
    qrels.loc[qrels["item"] == "d0", "relevance"] = 1  # every query has a relevant item
    res = tk.evaluate(run, ["recall@3"], item="item", model="model", qrels=qrels, by=["device", "market"], weight="w")
    seg = res.segments.reset_index()
    pq = res.per_query
    for (device, market, model), part in pq.groupby(["device", "market", "model"]):
        got = seg[(seg.device == device) & (seg.market == market) & (seg.model == model)].iloc[0]
        mine = part[part["w"] > 0]
        assert got["queries"] == len(mine) and got["weight"] == mine["w"].sum()
        assert got["recall@3"] == pytest.approx((mine["w"] * mine["recall@3"]).sum() / mine["w"].sum())
    overall = seg[seg.device == "(all)"].set_index("model")
    for model, part in pq.groupby("model"):
        mine = part[part["w"] > 0]
        assert overall.loc[model, "weight"] == mine["w"].sum() and overall.loc[model, "queries"] == len(mine)
    assert len(seg) == 2 * (pq.groupby(["device", "market"]).ngroups + 1)
