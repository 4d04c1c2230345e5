"""A model's numbers do not depend on the models evaluated beside it.

For every metric family (every form of it: ``Family.examples()``), every default an input falls
back to (the catalogue, the popularity) and every way in (a wide table, a stacked table, a table
with judgments apart, TREC run files, a streamed file, a score matrix, a click log, weighted
queries), model ``a`` evaluated alone and beside other models has the same summary row, the same
per-query rows and the same per-model ``info`` entries, bit for bit; and where a number cannot be
given (an input without an honest default), the refusal is the same alone and beside.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.metrics.registry import FAMILIES

N_ITEMS = 30


def _built_in():
    return [f for f in FAMILIES.values() if getattr(f.function, "__module__", "").startswith("topkeval.")]


def _names(ties: str, beyond: str | None = None) -> list[str]:
    """Every form of every built-in family exact under ``ties``: the accuracy metrics (``beyond=None``),
    the per-query beyond-accuracy ones (``"query"``) or the catalogue-level ones (``"catalog"``);
    unexpectedness (read against a baseline model) apart."""
    out = []
    for fam in _built_in():
        if fam.beyond != beyond or fam.name == "unexpectedness" or fam.ips == "pooled":  # pooled: click logs only
            continue
        if fam.ties is not None and ties not in fam.ties:
            continue
        for name in fam.examples():
            if ties == "expected" and "variant=evidently" in name:  # refused under ties="expected"
                continue
            out.append(name)
    return out


def _truth(rng) -> pd.DataFrame:
    """Graded judgments of (query, item): 0 to 3, some queries without a relevant item."""
    rows = [(q, i, int(rng.integers(0, 4)) if q % 7 else 0) for q in range(24) for i in range(N_ITEMS)
            if rng.random() < 0.5]
    return pd.DataFrame(rows, columns=["query", "item", "relevance"])


def _wide(rng, truth: pd.DataFrame) -> pd.DataFrame:
    """One table of candidates every model ranks: scores with ties (a), without (b), in a few levels (c)."""
    table = truth.copy()
    table["a"] = rng.integers(0, 4, len(table)).astype(float)
    table["b"] = rng.random(len(table))
    table["c"] = rng.integers(0, 2, len(table)) + rng.integers(0, 3, len(table)) / 4
    return table


def _stacked(rng, truth: pd.DataFrame) -> pd.DataFrame:
    """Each model its own rows: a different candidate list per model and query (of the judged pairs),
    some queries missing from a model."""
    parts = []
    for model in ("a", "b", "c"):
        keep = rng.random(len(truth)) < 0.7
        if model == "b":
            keep &= truth["query"].to_numpy() % 5 != 1
        part = truth[keep].copy()
        part["model"] = model
        part["score"] = rng.integers(0, 5, len(part)).astype(float)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _inputs(rng) -> dict:
    items = list(range(N_ITEMS))
    return dict(catalog=items + [100, 101], history={q: [int(i) for i in rng.choice(N_ITEMS, 4, replace=False)]
                                                     for q in range(0, 24, 2)},
                features={i: rng.normal(size=3) for i in items}, categories={i: i % 4 for i in items})


def _same(alone: tk.Results, beside: tk.Results, model: str = "a") -> None:
    """Model ``model``'s summary row, per-query rows and per-model info entries: identical."""
    pd.testing.assert_series_equal(alone.summary.loc[model], beside.summary.loc[model], check_exact=True)
    mine = alone.per_query
    theirs = beside.per_query
    pd.testing.assert_frame_equal(mine[mine["model"] == model].reset_index(drop=True),
                                  theirs[theirs["model"] == model].reset_index(drop=True), check_exact=True)
    checked = 0
    for key, value in alone.info.items():
        if isinstance(value, dict) and set(value) == set(alone.models):  # a per-model entry
            assert _equal(value[model], beside.info[key][model]), (key, value[model], beside.info[key][model])
            checked += 1
    assert checked >= 4  # evaluated, rows, ties, longest list... at least
    assert alone.info.get("beyond_defaults") == beside.info.get("beyond_defaults")


def _equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _outcome(call):
    """The Results of ``call()``, or the error it raised (type and message): refusals compare too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tk.TopkevalWarning)  # a top-N table's note, said alike alone and beside
        try:
            return call()
        except tk.TopkevalError as exc:
            return (type(exc).__name__, str(exc))


def _compare_outcomes(alone, beside, model: str = "a") -> None:
    if isinstance(alone, tuple) or isinstance(beside, tuple):
        assert alone == beside
        return
    _same(alone, beside, model)


def _catalog_rows(alone, beside, model: str = "a") -> None:
    """beyond_accuracy's row of ``model`` (catalogue-level and per-query means), and what it defaulted to."""
    if isinstance(alone, tuple) or isinstance(beside, tuple):
        assert alone == beside
        return
    pd.testing.assert_series_equal(alone.loc[model], beside.loc[model], check_exact=True)
    assert alone.attrs["defaults"] == beside.attrs["defaults"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    truth = _truth(rng)
    return dict(truth=truth, wide=_wide(rng, truth), stacked=_stacked(rng, truth), inputs=_inputs(rng))


TIES = ["expected", "item_desc"]

#: the variants that compare each list with the query's history: no default
_NEEDS_HISTORY = re.compile(r"variant=(replay|recommenders|evidently)")


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("given", [False, True], ids=["defaults", "inputs given"])
def test_wide_table(data, ties, given):
    """One table, one score column per model: ``score="a"`` or ``score=["c", "a", "b"]``, every family,
    with the beyond-accuracy inputs given or left to their defaults (the table's items and relevant
    candidates: the same whichever score columns are named)."""
    inputs = data["inputs"] if given else {k: data["inputs"][k] for k in ("features", "categories")}
    names = _names(ties) + [n for n in _names(ties, "query") if given or not _NEEDS_HISTORY.search(n)]

    def run(scores):
        return _outcome(lambda: tk.evaluate(data["wide"], names, score=scores, item="item", ties=ties, **inputs))

    alone, beside = run(["a"]), run(["c", "a", "b"])
    _compare_outcomes(alone, beside)
    assert not isinstance(alone, tuple)
    if not given:  # what the defaults were, counted here from the table
        wide = data["wide"]
        relevant = wide[wide["relevance"] > 0]
        assert alone.info["beyond_defaults"] == {
            "catalog": {"from": "items of the table", "items": wide["item"].nunique()},
            "popularity": {"from": "relevant candidates", "items": relevant["item"].nunique(),
                           "queries": relevant["query"].nunique()}}
    with_base = [_outcome(lambda s=s: tk.evaluate(data["wide"], ["unexpectedness@3", "unexpectedness@1"], score=s,
                                                  item="item", ties=ties, baseline="b"))
                 for s in (["a", "b"], ["c", "a", "b"])]  # against b, with or without c
    _compare_outcomes(*with_base)
    assert not isinstance(with_base[0], tuple)
    catalog = _names(ties, "catalog") + ["novelty@3", "popularity@3"]
    rows = [_outcome(lambda r=r: r.beyond_accuracy(metrics=catalog, **({k: inputs[k] for k in ("catalog", "history")}
                                                                        if given else {})))
            for r in (alone, beside)]
    _catalog_rows(*rows)
    assert not isinstance(rows[0], tuple)


@pytest.mark.parametrize("ties", TIES)
def test_stacked_table(data, ties):
    """A stacked table (model=): the model's rows alone, or every model's rows. The catalogue and the
    popularity have no default here (refused alike); given, every family's numbers are the same."""
    stacked = data["stacked"]
    names = _names(ties) + _names(ties, "query")
    inputs = data["inputs"]

    def run(table, **kw):
        return _outcome(lambda: tk.evaluate(table, names, score="score", item="item", model="model", ties=ties, **kw))

    alone_rows = stacked[stacked["model"] == "a"]
    beside_rows = pd.concat([stacked[stacked["model"] != "a"], alone_rows])  # other models' rows first
    _compare_outcomes(run(alone_rows, **inputs), run(beside_rows, **inputs))
    without = [n for n in names if not _NEEDS_HISTORY.search(n)]  # these need a history in any case
    refused = [_outcome(lambda t=t: tk.evaluate(t, without, score="score", item="item", model="model", ties=ties,
                                                **{k: v for k, v in inputs.items() if k != "history"}))
               for t in (alone_rows, beside_rows)]
    assert isinstance(refused[0], tuple) and "Pass history=" in refused[0][1], refused[0]
    _compare_outcomes(*refused)
    _compare_outcomes(*[_outcome(lambda t=t: tk.evaluate(t, _names(ties), score="score", item="item", model="model",
                                                         ties=ties)) for t in (alone_rows, beside_rows)])
    catalog = _names(ties, "catalog")
    results = [_outcome(lambda t=t: tk.evaluate(t, ["recall@3"], score="score", item="item", model="model", ties=ties))
               for t in (alone_rows, beside_rows)]
    refused = [_outcome(lambda r=r: r.beyond_accuracy(metrics=catalog)) for r in results]
    assert isinstance(refused[0], tuple) and "Pass catalog=" in refused[0][1]
    _catalog_rows(*refused)
    rows = [_outcome(lambda r=r: r.beyond_accuracy(metrics=catalog, catalog=inputs["catalog"])) for r in results]
    assert not isinstance(rows[0], tuple)
    _catalog_rows(*rows)


@pytest.mark.parametrize("ties", TIES)
def test_judgments_apart(data, ties):
    """Runs with judgments apart: a wide table of candidates with qrels= (defaults: the table's), and
    a stacked table with qrels= (no default), under missing_queries skip and zero."""
    truth = data["truth"]
    wide = data["wide"].drop(columns="relevance")
    stacked = data["stacked"].drop(columns="relevance")
    names = _names(ties) + _names(ties, "query")
    inputs = data["inputs"]
    for missing in ("skip", "zero"):
        def wide_run(scores, missing=missing):
            return _outcome(lambda: tk.evaluate(wide, names, score=scores, item="item", qrels=truth, ties=ties,
                                                missing_queries=missing))

        _compare_outcomes(wide_run(["a"]), wide_run(["b", "a", "c"]))

        def stacked_run(table, missing=missing, **kw):
            return _outcome(lambda: tk.evaluate(table, names, score="score", item="item", model="model", qrels=truth,
                                                ties=ties, missing_queries=missing, **kw))

        _compare_outcomes(stacked_run(stacked[stacked["model"] == "a"], **inputs), stacked_run(stacked, **inputs))
        _compare_outcomes(stacked_run(stacked[stacked["model"] == "a"]), stacked_run(stacked))


def test_trec_run_files(data, tmp_path):
    """TREC run files and a qrels file: one run, or three."""
    truth = data["truth"]
    stacked = data["stacked"]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 d{i} {g}\n" for q, i, g in truth[["query", "item", "relevance"]].itertuples(
        index=False)))
    paths = {}
    for model, part in stacked.groupby("model"):
        path = tmp_path / f"{model}.run"
        ranked = part.sort_values(["query", "score"], ascending=[True, False])
        path.write_text("".join(f"{q} Q0 d{i} {r} {s} {model}\n" for r, (q, i, s) in enumerate(
            ranked[["query", "item", "score"]].itertuples(index=False))))
        paths[model] = str(path)
    names = _names("item_desc")
    history = {str(q): [f"d{i}" for i in items] for q, items in data["inputs"]["history"].items()}

    def run(files, **kw):
        return _outcome(lambda: tk.evaluate(files, names + _names("item_desc", "query") if kw else names,
                                            qrels=str(qrels), conventions="trec_eval", **kw))

    _compare_outcomes(run([paths["a"]]), run([paths["c"], paths["a"], paths["b"]]))
    given = dict(history=history, features={f"d{i}": v for i, v in data["inputs"]["features"].items()},
                 categories={f"d{i}": c for i, c in data["inputs"]["categories"].items()},
                 catalog=[f"d{i}" for i in range(N_ITEMS)])
    _compare_outcomes(run([paths["a"]], **given), run([paths["c"], paths["a"], paths["b"]], **given))


def test_streamed_file(data, tmp_path):
    """A parquet file streamed in batches (chunk_rows=): score="a", or every score column."""
    path = tmp_path / "log.parquet"
    data["wide"].sort_values("query").to_parquet(path)
    names = _names("expected") + [n for n in _names("expected", "query") if not _NEEDS_HISTORY.search(n)]

    def run(scores):
        return _outcome(lambda: tk.evaluate(str(path), names, score=scores, item="item", chunk_rows=97,
                                            features=data["inputs"]["features"],
                                            categories=data["inputs"]["categories"]))

    alone, beside = run(["a"]), run(["c", "a", "b"])
    _compare_outcomes(alone, beside)
    assert not isinstance(alone, tuple) and alone.info["chunks"] > 1


def test_score_matrix():
    """evaluate_matrix with one matrix, or a dict of three: every accuracy family the matrices support."""
    rng = np.random.default_rng(3)
    scores = {m: rng.integers(0, 6, (40, 25)).astype(float) for m in ("a", "b", "c")}
    relevant = (rng.random((40, 25)) < 0.2) * rng.integers(1, 4, (40, 25))
    exclude = rng.random((40, 25)) < 0.1
    names = [n for n in _names("expected")]

    def run(models):
        return _outcome(lambda: tk.evaluate_matrix({m: scores[m] for m in models}, relevant, metrics=names,
                                                   exclude=exclude))

    alone, beside = run(["a"]), run(["c", "a", "b"])
    if isinstance(alone, tuple):  # some family is not supported on matrices: evaluate those that are
        supported = []
        for name in names:
            one = _outcome(lambda name=name: tk.evaluate_matrix({"a": scores["a"]}, relevant, metrics=[name]))
            supported += [name] if not isinstance(one, tuple) else []
        names = supported
        alone, beside = run(["a"]), run(["c", "a", "b"])
    _compare_outcomes(alone, beside)
    assert not isinstance(alone, tuple) and len(alone.metrics) > 50


def test_click_log_and_weights(data):
    """A click log (position=, propensity=: inverse propensity weights, per row, not per model) and
    weighted queries with segments (weight=, by=)."""
    log = data["wide"].copy()
    log["relevance"] = (log["relevance"] > 1).astype(int)
    log["position"] = log.groupby("query").cumcount() + 1
    log["traffic"] = (log["query"] % 3 + 1).astype(float)
    log["device"] = np.where(log["query"] % 2 == 0, "phone", "desktop")
    ips = [n for n in _names("expected") if FAMILIES[tk.parse_metric(n).family].ips == "ips"]
    ips += [n for fam in _built_in() if fam.ips == "pooled" for n in fam.examples()]
    for kw in (dict(position="position", propensity={p: 1 / p for p in range(1, 40)}),
               dict(weight="traffic", by="device")):
        run = [_outcome(lambda s=s, kw=kw: tk.evaluate(log, ips if "position" in kw else _names("expected"),
                                                       score=s, item="item", **kw))
               for s in (["a"], ["b", "a", "c"])]
        _compare_outcomes(*run)
        assert not isinstance(run[0], tuple)
        if "by" in kw:
            seg = [r.segments.xs("a", level="model") for r in run]
            pd.testing.assert_frame_equal(seg[0], seg[1], check_exact=True)
