"""An Evaluation keeps each metric column's Metric (issue 36): set where the results are built, carried
by every change of columns, read by every consumer instead of the column label parsed again.

The oracle is the parser itself: each column's Metric equals ``parse_metric(label)`` (and its
canonical name is ``info["metric_names"][label]``) on every path that builds results, after a pickle
round trip, a copy, segments, beyond-accuracy columns added or dropped, and for a table read back
(``Results.from_per_query``, the one boundary where a label is all there is). Then, with the parser
made to refuse the labels of the results under test, every output and analysis still answers, with
the same text and numbers as without the refusal: none of them parses a label again.
(tests/test_layout.py holds the static rule: which functions may read a metric's name at all.)
"""

from __future__ import annotations

import copy
import pickle
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.analysis import beyond
from topkeval.metrics import names

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")

#: labels as a user writes them, each unlike its canonical name (P@2 is precision@2), so that a
#: canonical name the code makes itself (a curve's recall@1...) is never one of them
ALIASES = ["P@2", "R@3", "nDCG@3", "map", "FP@1", "success@2", "Rprec"]


def _log(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(q, i, int(rng.integers(0, 3)) if q % 5 else 0) for q in range(12) for i in range(8) if rng.random() < 0.7]
    log = pd.DataFrame(rows, columns=["query", "item", "relevance"])
    log["a"] = rng.integers(0, 4, len(log)).astype(float)
    log["b"] = rng.random(len(log))
    log["device"] = np.where(log["query"] % 2 == 0, "phone", "desktop")
    log["traffic"] = (log["query"] % 3 + 1).astype(float)
    return log


def _click_log() -> pd.DataFrame:
    log = _log()
    log["relevance"] = (log["relevance"] > 0).astype(int)
    log["position"] = log.groupby("query").cumcount() + 1.0
    return log


def _holds_its_metrics(res: tk.Results) -> None:
    """Each column's Metric, in column order, equals the parse of its label and is named as info says."""
    objects = res.evaluation.metric_objects
    assert list(objects) == res.metrics == list(res.info["metrics"])
    for label, metric in objects.items():
        assert isinstance(metric, tk.Metric)
        assert metric == tk.parse_metric(label), label  # the oracle: the parser, on the label
        assert str(metric) == res.info["metric_names"][label]
        assert res.evaluation.metric(label) is metric


def _round_trips(res: tk.Results) -> None:
    _holds_its_metrics(res)
    for back in (pickle.loads(pickle.dumps(res)), pickle.loads(pickle.dumps(res, protocol=2)), copy.copy(res),
                 copy.deepcopy(res)):
        assert back.evaluation.metric_objects == res.evaluation.metric_objects
        _holds_its_metrics(back)


def _paths(tmp_path) -> dict:
    """Results from every way in (the engine's one builder, off_policy's own, a table read back)."""
    log = _log()
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    stacked = pd.concat([log.assign(model="a", score=log["a"]), log.assign(model="b", score=log["b"]).iloc[::2]])
    truth = log[["query", "item", "relevance"]]
    rng = np.random.default_rng(1)
    scores = {"a": rng.random((8, 12)), "b": rng.integers(0, 3, (8, 12)).astype(float)}
    held_out = rng.random((8, 12)) < 0.3
    held_out[:, 0] = True  # every user has a held-out item
    evaluator = tk.MatrixEvaluator(["R@2", "nDCG@3"])
    evaluator.update(scores["a"], held_out)
    evaluator.update(scores["b"], held_out)
    rounds = {"round": [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4], "item": list("abc" * 4),
              "position": [1, 2, None, 2, None, 1, None, 1, 2, 1, None, 2],
              "click": [0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0], "pscore": [1 / 3] * 12,
              "new": [0.1, 0.5, 0.9] * 4}
    table = tk.evaluate(log, ALIASES, score=["a", "b"], item="item")
    return {
        "table": table,
        "segments and weights": tk.evaluate(log, ALIASES, score=["a", "b"], item="item", by="device",
                                            weight="traffic"),
        "stacked": tk.evaluate(stacked, ALIASES, score="score", item="item", model="model"),
        "judgments apart": tk.evaluate(stacked.drop(columns="relevance"), ALIASES, score="score", item="item",
                                       model="model", qrels=truth),
        "streamed in chunks": tk.evaluate(str(path), ALIASES, score=["a", "b"], item="item", chunk_rows=30),
        "streamed, means only": tk.evaluate(str(path), ALIASES, score=["a", "b"], chunk_rows=30,
                                            keep_per_query=False),
        "score matrix": tk.evaluate_matrix(scores, held_out, metrics=["R@2", "nDCG@3", "map"]),
        "matrix evaluator": evaluator.compute(),
        "sampled": tk.evaluate_sampled(scores, held_out, ["R@2", "nDCG@3"], n_negatives=4,
                                       estimator=["full", "sampled", "corrected"]),
        "click log": tk.evaluate(_click_log(), ["P@2", "recall_micro@3"], score=["a", "b"], item="item",
                                 position="position", propensity={p: 1 / p for p in range(1, 20)}),
        "off-policy": tk.off_policy(rounds, ["P@2", "tp@1"], policy="new", query="round", refuse=False),
        "beyond-accuracy columns": table.with_beyond(["novelty@2"]),
        "read back": tk.Results.from_per_query(table.per_query),
    }


def test_every_column_keeps_its_metric_on_every_path_and_round_trip(tmp_path):
    for name, res in _paths(tmp_path).items():
        try:
            _round_trips(res)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from exc
    sampled = _paths(tmp_path)["sampled"].evaluation
    assert sampled.metric("R@2[corrected:bv]").estimate == "corrected:bv"  # the estimate is the Metric's


def test_columns_added_reordered_or_dropped_carry_their_metrics():
    """The changes of columns an Evaluation goes through (beyond-accuracy columns added, a re-evaluation's
    columns put in order, some dropped) keep exactly one Metric per column, in column order."""
    res = tk.evaluate(_log(), ["P@2", "R@3"], score=["a", "b"], item="item")
    wide = res.with_beyond(["novelty@2", "popularity@2"]).evaluation
    assert list(wide.metric_objects) == ["P@2", "R@3", "novelty@2", "popularity@2"]
    ordered = beyond.ordered(wide, ["novelty@2", "P@2"])
    assert list(ordered.metric_objects) == ordered.metrics == ["novelty@2", "P@2"]
    dropped = beyond.without(wide, ["R@3", "popularity@2"])
    assert list(dropped.metric_objects) == dropped.metrics == ["P@2", "novelty@2"]
    for ev in (wide, ordered, dropped):
        assert all(ev.metric(label) == tk.parse_metric(label) for label in ev.metrics)


def test_an_evaluation_without_one_metric_per_column_is_refused():
    """The builders' invariant, checked where an Evaluation is made (replace() included)."""
    import dataclasses

    ev = tk.evaluate(_log(), ["P@2", "R@3"], score=["a", "b"]).evaluation
    with pytest.raises(AssertionError, match="one Metric per metric column"):
        dataclasses.replace(ev, metric_objects={"P@2": ev.metric("P@2")})
    with pytest.raises(AssertionError, match="one Metric per metric column"):
        dataclasses.replace(ev, metric_objects={"R@3": ev.metric("R@3"), "P@2": ev.metric("P@2")})  # order
    with pytest.raises(tk.TopkevalError, match="not a metric column"):
        ev.metric("precision@2")  # a column's label, not any name of it (Results.label finds those)


@contextmanager
def _labels_refused(monkeypatch, *results):
    """The parser refuses the labels of ``results`` (any other text, and Metric objects, pass)."""
    from topkeval.engine import results as built

    labels = {label for res in results for label in res.metrics}
    original = names.parse_metric
    seen: list[str] = []

    def guarded(text):
        if isinstance(text, str) and text in labels:
            seen.append(text)
            raise AssertionError(f"the label {text!r} of the results was parsed again")
        return original(text)

    with monkeypatch.context() as patch:
        patch.setattr(names, "parse_metric", guarded)
        patch.setattr(built, "parse_metric", guarded)
        yield seen


def _answer(call):
    """What a call gives, or the refusal it raises (its class and message)."""
    try:
        return call()
    except tk.TopkevalError as exc:
        return (type(exc).__name__, str(exc))


def _answers(res: tk.Results, tmp_path, name: str) -> dict:
    """What the outputs and analyses of ``res`` give (text, tables, numbers), or the refusals they raise."""
    models = res.models
    label = res.metrics[0]
    per_query = len(res.evaluation.per_query) > 0
    out = {"repr": repr(res), "html": res._repr_html_(), "dict": repr(res.to_dict())}
    for fmt in ("table", "markdown", "csv", "json"):
        out[fmt] = res.to_string(fmt)
    if "sampled" not in res.info and "off_policy" not in res.info:
        out["trec"] = res.to_string("trec", per_query=per_query)
    if per_query:
        out["per_query"] = res.to_string("json", per_query=True)
        out["ci"] = res.to_string("json", ci=0.9)
        out["summary_ci"] = res.summary_ci(n_resamples=200)
    if per_query and len(models) > 1:
        out["compare"] = res.compare(n_resamples=200)
        out["latex"] = res.to_latex(baseline=models[0], n_resamples=200)
        out["latex_letters"] = res.to_latex(n_resamples=200)
        out["queries_needed"] = _answer(lambda: res.queries_needed(label, delta=0.5))
        out["anova"] = _answer(lambda: res.anova(label))
        out["compare_all"] = _answer(lambda: res.compare_all(label, n_resamples=200))
        out["diff"] = _answer(lambda: res.diff(models[0], models[1], label))
    if res.evaluation.rerun is not None:
        out["curves"] = res.curves(ks=[1, 2, 3])
    if res.by:
        out["segments"] = res.segments
    if "clicks" in res.info:
        out["bounds"] = res.bounds()
    if res.evaluation.sources is not None and len(models) > 1 and "clicks" not in res.info:
        page = res.report(tmp_path / f"{name}.html", baseline=models[0], n_resamples=100, overwrite=True)
        out["report"] = Path(page).read_text(encoding="utf-8")
    return out


def _same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    else:
        assert a == b


def test_no_output_or_analysis_parses_a_label_of_the_results_again(tmp_path, monkeypatch):
    """Every output and analysis, with the parser refusing the results' labels, gives what it gives
    without the refusal: the columns' Metric objects told it everything a label would have."""
    log = _log()
    table = tk.evaluate(log, ALIASES, score=["a", "b"], item="item")
    rng = np.random.default_rng(3)
    scores = {"a": rng.random((10, 12)), "b": rng.random((10, 12))}
    held_out = rng.random((10, 12)) < 0.3
    held_out[:, 0] = True
    cases = {
        "table": table,
        "segments": tk.evaluate(log, ALIASES, score=["a", "b"], item="item", by="device", weight="traffic"),
        "read back": tk.Results.from_per_query(table.per_query),
        "sampled": tk.evaluate_sampled(scores, held_out, ["R@2", "nDCG@3"], n_negatives=4,
                                       estimator=["full", "sampled", "corrected"]),
        "click log": tk.evaluate(_click_log(), ["P@2", "R@3"], score=["a", "b"], item="item",
                                 position="position"),
    }
    for name, res in cases.items():
        want = _answers(res, tmp_path, name)
        with _labels_refused(monkeypatch, res) as seen:
            got = _answers(copy.copy(res), tmp_path, name)  # a copy: none of the first answers kept (memoized)
        assert not seen, f"{name}: labels parsed again: {sorted(set(seen))}"
        assert set(got) == set(want)
        for key in want:
            _same(want[key], got[key])


def test_the_refusal_sees_a_label_parsed_again(monkeypatch):
    """The check of the test above can fail: a label of the results given to the parser is caught."""
    res = tk.evaluate(_log(), ["P@2"], score="a")
    with _labels_refused(monkeypatch, res) as seen:
        with pytest.raises(AssertionError, match="parsed again"):
            names.trec_name("P@2")  # what trec_lines did with each label
        assert names.trec_name(res.evaluation.metric("P@2")) == "P_2"  # what it does now
        assert tk.parse_metric("precision@2") == res.evaluation.metric("P@2")  # other text passes
    assert seen == ["P@2"]


def test_spark_partitions_merged_keep_each_columns_metric(spark):
    """On Spark, each partition's sums are merged into one Evaluation: its columns' Metric objects are
    the plan's, and diff reads the items gained and lost through the column's Metric."""
    import pyarrow as pa

    log = _log()
    sdf = spark.createDataFrame(pa.Table.from_pandas(log[["query", "item", "relevance", "a", "b"]],
                                                     preserve_index=False)).repartition(3)
    res = tk.evaluate(sdf, ["P@2", "R@3", "map"], score=["a", "b"], item="item")
    _holds_its_metrics(res)
    local = tk.evaluate(log, ["P@2", "R@3", "map"], score=["a", "b"], item="item")
    assert res.evaluation.metric_objects == local.evaluation.metric_objects
    back = pickle.loads(pickle.dumps(res))  # the per-query table collected, the Metric objects kept
    assert back.evaluation.metric_objects == res.evaluation.metric_objects
    on_spark = res.diff("a", "b", "R@3").sort_values("query").reset_index(drop=True)
    here = local.diff("a", "b", "R@3").sort_values("query").reset_index(drop=True)
    for column in ("gained", "lost"):  # the same items (each side lists them in its own order)
        assert on_spark[column].map(sorted).tolist() == here[column].map(sorted).tolist()
    pd.testing.assert_frame_equal(on_spark.drop(columns=["gained", "lost"]), here.drop(columns=["gained", "lost"]))


def test_the_metric_objects_tell_the_outputs_what_the_labels_tell():
    """The notes and the best values read from each column's Metric equal those read from the labels
    (the text functions' path for a table or info given alone, which parses them): a cutoff beyond every
    list (P@50, nDCG@10 over lists of at most 9; not P@9 or R@5), lower is better for FP@k."""
    from topkeval.outputs.text import best_rows, info_lines

    rng = np.random.default_rng(0)
    sizes = [5, 7, 9] * 10
    log = pd.DataFrame({"query": np.repeat(np.arange(30), sizes), "relevance": (rng.random(sum(sizes)) < 0.3).astype(int),
                        "a": rng.random(sum(sizes)), "b": rng.random(sum(sizes))})
    res = tk.evaluate(log, ["P@50", "R@5", "nDCG@10", "P@9", "FP@3"], score=["a", "b"])
    objects = res.evaluation.metric_objects
    notes = info_lines(res.info, objects)
    assert notes == info_lines(res.info)
    beyond_note = [line for line in notes if line.startswith("cutoffs beyond")]
    assert beyond_note and beyond_note[0].startswith("cutoffs beyond the longest list (9 candidates), so that these "
                                                     "look at whole lists: P@50, nDCG@10;")
    best = best_rows(res.summary, objects)
    assert best == best_rows(res.summary)
    fp = res.summary["FP@3"]
    assert best["FP@3"] == set(fp.index[fp == fp.min()]) and best["R@5"] == set(res.summary.index[
        res.summary["R@5"] == res.summary["R@5"].max()])


def test_results_pickled_before_the_metric_objects_read_their_labels_once():
    """A pickle made before Evaluations kept their Metric objects holds the labels alone (and
    info["metric_names"]): unpickled, each column gets the Metric its canonical name names."""
    from topkeval.engine.results import portable, restore

    res = tk.evaluate(_log(), ALIASES, score=["a", "b"], item="item")
    core, kept, dropped = portable(res.evaluation)
    del vars(core)["metric_objects"]  # what an older version's pickle holds
    old = pickle.loads(pickle.dumps(core))
    assert "metric_objects" not in vars(old)
    back = tk.Results(restore(old, kept, dropped))
    assert back.evaluation.metric_objects == res.evaluation.metric_objects
    _holds_its_metrics(back)
    assert back.to_string("trec") == res.to_string("trec")
