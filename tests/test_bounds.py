"""Results.bounds() against brute force: every completion of a small click log (each subset of its
never-shown candidates made relevant, the clicked ones relevant, the shown unclicked ones not),
evaluated as it is, under every tie rule and every empty_queries rule; the bounds must be the
smallest and the largest of those means (so lower <= upper, and the truth, one of the completions,
inside)."""

import itertools

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.analysis.clicks import extreme_means

BOUNDED = ["precision@2", "tp@2", "fp@2", "hit_rate@2", "dcg@3", "rbp(p=0.8)@3", "rr@3", "recall@2", "f1@2",
           "fbeta(beta=2)@2"]
RATIOS = {"recall@2", "f1@2", "fbeta(beta=2)@2"}
TIES = ["expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc"]
# the brute force stacks completions of a few equal-sized queries: evaluate's truncation notice is not about them
pytestmark = pytest.mark.filterwarnings("ignore:Every query has exactly:topkeval.TopkevalWarning")
RULES = {"skip": dict(empty_queries="skip"), "keep 0": dict(empty_queries="keep", undefined=0.0),
         "keep 1": dict(empty_queries="keep", undefined=1.0), "keep nan": dict(empty_queries="keep", undefined="nan"),
         "error": dict(empty_queries="error")}


def click_log(rng, every_query_clicked: bool, max_never: int = 7) -> pd.DataFrame:
    """A few queries of 2 to 5 candidates: a shown prefix (positions 1..s) with random clicks, the
    rest never shown; two models with coarse scores (ties), item ids of mixed order, query weights."""
    frames, never = [], 0
    for q in range(int(rng.integers(3, 6))):
        n = int(rng.integers(2, 6))
        shown = int(rng.integers(1, n + 1)) if never < max_never else n
        shown = max(shown, n - (max_never - never))
        never += n - shown
        click = (rng.random(n) < 0.4) & (np.arange(n) < shown)
        if every_query_clicked and not click.any():
            click[int(rng.integers(shown))] = True
        position = np.full(n, np.nan)
        position[:shown] = rng.permutation(shown) + 1
        frames.append(pd.DataFrame({"query": q, "item": rng.permutation(n) * 3 + 1, "click": click.astype(int),
                                    "position": position, "a": rng.integers(0, 3, n).astype(float),
                                    "b": rng.integers(0, 4, n).astype(float) / 2, "w": float(rng.integers(1, 4))}))
    return pd.concat(frames, ignore_index=True)


def completion_means(log: pd.DataFrame, metrics, weighted: bool, **conventions) -> pd.DataFrame:
    """Per completion (a subset of the never-shown rows made relevant): each model's mean of each
    metric, as evaluate computes it on that completion: every completion stacked into one log."""
    never = np.flatnonzero(log["position"].isna().to_numpy())
    copies = []
    for c, subset in enumerate(itertools.chain.from_iterable(itertools.combinations(never, r)
                                                             for r in range(len(never) + 1))):
        rel = log["click"].to_numpy().copy()
        rel[list(subset)] = 1
        copies.append(log.assign(relevant=rel, query=log["query"].astype(str) + f"|{c}", completion=c))
    stacked = pd.concat(copies, ignore_index=True)
    res = tk.evaluate(stacked, metrics, relevance="relevant", score=["a", "b"], item="item",
                      weight="w" if weighted else None, **conventions)
    pq = res.per_query.copy()
    pq["completion"] = pq["query"].str.split("|").str[1].astype(int)
    out = {}
    for (model, c), part in pq.groupby(["model", "completion"]):
        w = part["w"].to_numpy(float) if weighted else np.ones(len(part))
        for m in res.metrics:
            v = part[m].to_numpy(float)
            ok = ~np.isnan(v)
            out[(model, c, m)] = (w[ok] * v[ok]).sum() / w[ok].sum() if ok.any() else np.nan
    return pd.Series(out).unstack(level=2)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("rule", list(RULES))
def test_bounds_are_the_extremes_over_every_completion(ties, rule):
    rng = np.random.default_rng(TIES.index(ties) * 10 + list(RULES).index(rule))
    for draw in range(2):
        log = click_log(rng, every_query_clicked=rule == "error")
        conventions = dict(ties=ties, short_lists="shrink" if draw else "pad", **RULES[rule])
        weighted = bool(draw)
        truth = completion_means(log, BOUNDED + ["ap"], weighted, **conventions)
        res = tk.evaluate(log, BOUNDED + ["ap"], relevance="click", score=["a", "b"], item="item",
                          position="position", weight="w" if weighted else None, **conventions)
        b = res.bounds()
        for model in ("a", "b"):
            means = truth.loc[model]
            for m in BOUNDED:
                row = b.loc[(model, m)]
                if m in RATIOS and ties in ("optimistic", "pessimistic"):
                    assert np.isnan(row["lower"]) and "orders ties by relevance" in row["note"]
                    continue
                low, high = means[m].min(), means[m].max()
                assert row["lower"] == pytest.approx(low, abs=1e-12), (model, m, draw)
                assert row["upper"] == pytest.approx(high, abs=1e-12), (model, m, draw)
                assert row["lower"] <= row["upper"]
            assert np.isnan(b.loc[(model, "ap"), "lower"]) and "monotone" in b.loc[(model, "ap"), "note"]


def test_a_query_without_click_counts_in_both_bounds_or_neither():
    """The audit's case: under empty_queries="skip", a query with no click and never-shown
    candidates. It is in a completion's mean only when one of them is relevant: at its lowest with
    only the one the model ranks last relevant (e, third: hit_rate@1 and rr@2 are 0), at its highest
    with all (d, first: 1). Before, it counted in the upper bound alone, which could fall below the
    lower one."""
    log = pd.DataFrame({"query": [1, 1, 2, 2, 2], "item": ["a", "b", "c", "d", "e"], "click": [1, 0, 0, 0, 0],
                        "position": [1, 2, 1, np.nan, np.nan], "s": [0.9, 0.1, 0.5, 0.9, 0.1]})
    b = tk.evaluate(log, ["hit_rate@1", "rr@2"], relevance="click", score="s", position="position").bounds()
    # query 1: 1 whatever the completion; query 2: left out, or 0 (e alone) to 1 (d relevant)
    assert b.loc[("s", "hit_rate@1"), ["lower", "upper"]].tolist() == [0.5, 1.0]
    assert b.loc[("s", "rr@2"), ["lower", "upper"]].tolist() == [0.5, 1.0]


def test_extreme_means_by_hand():
    # a forced query (0.5..1) and an optional one (0..0.2): the min includes it, the max leaves it out
    assert extreme_means(np.array([[0.5, 0.5, 1.0], [np.nan, 0.0, 0.2]])) == (0.25, 1.0)
    # weights: the optional query of weight 3 pulls the min to (0.5 + 3 * 0) / 4
    assert extreme_means(np.array([[0.5, 1.0], [np.nan, 0.0]]), np.array([1.0, 3.0])) == (0.125, 1.0)
    # nothing forced: the min is the smallest option alone, the max the largest
    assert extreme_means(np.array([[np.nan, 0.3, 0.6], [np.nan, 0.1, 0.2]])) == (0.1, 0.6)
    assert all(np.isnan(extreme_means(np.array([[np.nan, np.nan]]))))
