"""Inverse propensity weighted metrics of a click log (evaluate(position=, propensity=)) against a
brute-force definition written here from the formulas (every order of the tied candidates
enumerated under ties="expected"), hand computations, and the bad inputs the issue lists; the ratios
pooled over the queries (recall_micro...) against the same brute force and an independent bootstrap of
the ratio; the refusals and warnings of estimates from clicks. The simulation suite with known truth
is tests/test_clicks_simulation.py."""

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.errors import DataError, ParameterError

METRICS = ["precision@2", "precision@4", "tp@3", "dcg@3", "dcg", "rbp(p=0.8)@4"]
#: the ratios pooled over the queries, each (numerator, denominator) per query from _values' terms
POOLED = {"recall_micro@2": ("h2", "Rw"), "recall_micro@3": ("h3", "Rw"), "f1_micro@3": ("2h3", "Rw+3"),
          "fbeta_micro(beta=0.5)@2": ("1.25h2", "0.25Rw+2"), "fbeta_micro(beta=2)@3": ("5h3", "4Rw+3")}


def _values(order, click, w):
    """Every metric of METRICS, and the per-query terms of POOLED, for one order of the candidates
    (a list of row indices)."""
    cw = np.where(click, w, 0.0)
    rw = cw[order]
    Rw = float(cw.sum())

    def h(k):
        return float(rw[:k].sum())

    def dcg(k):
        return float(sum(rw[i] / math.log2(i + 2) for i in range(min(k, len(rw)))))

    n = len(order)
    return {"precision@2": h(2) / 2, "precision@4": h(4) / 4, "tp@3": h(3), "dcg@3": dcg(3), "dcg": dcg(n),
            "rbp(p=0.8)@4": 0.2 * sum(rw[i] * 0.8 ** i for i in range(min(4, n))),
            "h2": h(2), "h3": h(3), "2h3": 2 * h(3), "1.25h2": 1.25 * h(2), "Rw": Rw, "Rw+3": Rw + 3,
            "0.25Rw+2": 0.25 * Rw + 2, "5h3": 5 * h(3), "4Rw+3": 4 * Rw + 3}


def brute_force(scores, click, w, ties):
    """Each metric of one query: under "first" the rows in input order within a tie, under
    "expected" the mean over every order of the tied candidates."""
    rows = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if ties == "first":
        return _values(rows, click, w)
    groups = [list(g) for _, g in itertools.groupby(rows, key=lambda i: scores[i])]
    totals, count = {}, 0
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        values = _values([i for p in parts for i in p], click, w)
        for name, v in values.items():
            totals[name] = totals.get(name, 0.0) + v
        count += 1
    return {name: v / count for name, v in totals.items()}


def random_log(rng, queries=40):
    frames = []
    for q in range(queries):
        n = int(rng.integers(2, 7))
        click = rng.random(n) < 0.45
        if not click.any():
            click[int(rng.integers(n))] = True
        frames.append(pd.DataFrame({"query": q, "item": np.arange(n), "click": click.astype(int),
                                    "position": rng.permutation(n) + 1,
                                    "p": rng.choice([1.0, 0.5, 0.3, 0.125], n),
                                    "new": rng.integers(0, 3, n).astype(float)}))  # ties
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("ties", ["first", "expected"])
@pytest.mark.parametrize("seed", range(4))
def test_ips_equals_the_brute_force_definition(seed, ties):
    log = random_log(np.random.default_rng(seed))
    res = tk.evaluate(log, METRICS + list(POOLED), relevance="click", score="new", item="item", position="position",
                      propensity="p", ties=ties)
    per_query = res.per_query.set_index("query")
    terms = {}
    for q, rows in log.groupby("query"):
        want = brute_force(rows["new"].to_numpy(), rows["click"].to_numpy().astype(bool), 1.0 / rows["p"].to_numpy(),
                           ties)
        terms[q] = want
        for name in METRICS:
            assert per_query.loc[q, name] == pytest.approx(want[name], rel=1e-12, abs=1e-12), (q, name)
    # a pooled ratio: sum of numerators over sum of denominators, each query's value its linearised share
    for name, (num, den) in POOLED.items():
        a = np.array([terms[q][num] for q in per_query.index])
        b = np.array([terms[q][den] for q in per_query.index])
        r = a.sum() / b.sum()
        assert res.summary.iloc[0][name] == pytest.approx(r, rel=1e-12), name
        assert per_query[name].to_numpy() == pytest.approx(r + (a - r * b) / b.mean(), rel=1e-12, abs=1e-12), name


def test_weights_of_one_equal_the_clicks_as_relevance():
    log = random_log(np.random.default_rng(7))
    log["p"] = 1.0
    plain = tk.evaluate(log, METRICS + ["recall@3", "f1@3"], relevance="click", score="new", item="item")
    ips = tk.evaluate(log, METRICS + ["recall_micro@3", "f1_micro@3"], relevance="click", score="new", item="item",
                      position="position", propensity="p")
    pd.testing.assert_frame_equal(plain.per_query[["query"] + METRICS], ips.per_query[["query"] + METRICS],
                                  check_exact=False, rtol=1e-12)
    # the pooled ratios with every weight 1: the click counts pooled over the queries (every query has a click)
    stats = tk.evaluate(log, ["tp@3", "num_rel"], relevance="click", score="new", item="item").per_query
    assert ips.summary.iloc[0]["recall_micro@3"] == pytest.approx(stats["tp@3"].sum() / stats["num_rel"].sum())
    assert ips.summary.iloc[0]["f1_micro@3"] == pytest.approx(
        2 * stats["tp@3"].sum() / (stats["num_rel"].sum() + 3 * len(stats)))


def test_hand_computed_log():
    # query 1: clicks at old positions 1 (p=1) and 3 (p=0.25); the new ranker puts them at ranks 2 and 1
    log = pd.DataFrame({"query": [1, 1, 1], "item": ["a", "b", "c"], "click": [1, 0, 1], "position": [1, 2, 3],
                        "new": [0.5, 0.1, 0.9]})
    res = tk.evaluate(log, ["precision@1", "precision@2", "recall_micro@1", "dcg@2"], relevance="click", score="new",
                      item="item", position="position", propensity={1: 1.0, 2: 0.5, 3: 0.25})
    row = res.per_query.iloc[0]
    assert row["precision@1"] == 4.0            # 1/0.25 at rank 1
    assert row["precision@2"] == (4 + 1) / 2
    assert row["recall_micro@1"] == 4 / 5       # one query: its share is the ratio
    assert row["dcg@2"] == pytest.approx(4 + 1 / math.log2(3))
    info = res.info["ips"]
    assert info["clicks"] == 2 and info["effective_sample_size"] == pytest.approx(25 / 17)
    assert info["estimators"]["recall_micro@1"] == "pooled" and info["estimators"]["precision@1"] == "ips"


def test_clip_caps_the_weights():
    log = pd.DataFrame({"query": [1, 1], "item": ["a", "b"], "click": [1, 0], "position": [5, 1], "new": [1.0, 0.0]})
    with pytest.warns(tk.TopkevalWarning, match=r"clip=4 capped the weights of 1 click of 1: every estimate is "
                                                r"biased.*in favour of the logging ranker"):
        res = tk.evaluate(log, ["precision@1"], relevance="click", score="new", item="item", position="position",
                          propensity={1: 1.0, 5: 0.1}, clip=4)
    assert res.summary.iloc[0, 0] == 4.0
    assert res.info["ips"]["clipped"] == 1


BASE = dict(relevance="click", score="new", item="item")


def _log():
    return pd.DataFrame({"query": [1, 1, 2, 2], "item": ["a", "b", "a", "c"], "click": [1, 0, 0, 1],
                         "position": [1.0, 2.0, 2.0, 1.0], "new": [0.3, 0.2, 0.5, 0.1]})


@pytest.mark.parametrize("change, kwargs, error, words", [
    (lambda d: d.assign(position=[0.0, 1, 2, 1]), {}, DataError, "1-based position"),
    (lambda d: d.assign(position=[1.5, 1, 2, 1]), {}, DataError, "1-based position"),
    (lambda d: d.assign(position=[-1.0, 1, 2, 1]), {}, DataError, "1-based position"),
    (lambda d: d.assign(position=[np.nan, 1, 2, 1]), {}, DataError, "never showed"),
    (lambda d: d, {"propensity": {1: 0.0, 2: 0.5}}, DataError, "(0, 1]"),
    (lambda d: d, {"propensity": {1: 1.5, 2: 0.5}}, DataError, "(0, 1]"),
    (lambda d: d, {"propensity": {2: 0.5}}, DataError, "without a propensity"),
    (lambda d: d, {"propensity": {0: 0.5}}, ParameterError, "whole numbers from 1"),
    (lambda d: d, {"propensity": [0.5]}, ParameterError, "mapping position"),
])
def test_bad_click_logs_are_clear_errors(change, kwargs, error, words):
    kwargs = {"propensity": {1: 1.0, 2: 0.5}} | kwargs
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        tk.evaluate(change(_log()), ["precision@1"], position="position", **BASE, **kwargs)


def test_propensity_needs_position_and_ips_metrics():
    with pytest.raises(ParameterError, match="position="):
        tk.evaluate(_log(), ["precision@1"], propensity={1: 1.0}, **BASE)
    with pytest.raises(ParameterError, match="hit_rate.*per-item"):
        tk.evaluate(_log(), ["hit_rate@1", "precision@1"], position="position", propensity={1: 1.0, 2: 0.5}, **BASE)
    with pytest.raises(ParameterError, match="clip="):
        tk.evaluate(_log(), ["precision@1"], clip=3, **BASE)
    with pytest.raises(ParameterError, match="clip"):
        tk.evaluate(_log(), ["precision@1"], position="position", propensity={1: 1.0, 2: 0.5}, clip=0.5, **BASE)


# --- simulations with known truth (topkeval.demo.click_log: position-based clicks, examination k ** -eta) ---

from topkeval.demo import click_log  # noqa: E402

CURVE = {k: 1.0 / k for k in range(1, 21)}
KEEP = dict(empty_queries="keep", undefined="nan")


def _truth_naive_ips(log, metrics):
    truth = tk.evaluate(log, metrics, relevance="relevant", score="new_ranker", item="image", **KEEP)
    naive = tk.evaluate(log, metrics, relevance="click", score="new_ranker", item="image", **KEEP)
    ips = tk.evaluate(log, metrics, relevance="click", score="new_ranker", item="image", position="position",
                      propensity=CURVE)
    return truth, naive, ips


def test_ips_recovers_precision_and_dcg_that_clicks_get_wrong():
    """The issue's criterion: within 4 standard errors of the truth, where the naive number is more
    than 10 off."""
    log = click_log(20_000, seed=11)
    metrics = ["precision@10", "dcg@10"]
    truth, naive, ips = _truth_naive_ips(log, metrics)
    per_query = ips.per_query
    for name in metrics:
        se = per_query[name].std(ddof=1) / np.sqrt(len(per_query))
        true = truth.summary.iloc[0][name]
        assert abs(ips.summary.iloc[0][name] - true) < 4 * se, name
        assert abs(naive.summary.iloc[0][name] - true) > 10 * se, name
    assert ips.info["queries"] == 20_000  # an IPS sum's mean runs over every query (0 without a click)
    assert 0 < ips.info["ips"]["effective_sample_size"] < ips.info["ips"]["clicks"]


def test_ips_with_the_right_curve_beats_a_wrong_one():
    log = click_log(20_000, eta=1.5, seed=12)
    truth = tk.evaluate(log, ["precision@10"], relevance="relevant", score="new_ranker", **KEEP).summary.iloc[0, 0]
    right = tk.evaluate(log, ["precision@10"], relevance="click", score="new_ranker", position="position",
                        propensity={k: k ** -1.5 for k in range(1, 21)}).summary.iloc[0, 0]
    wrong = tk.evaluate(log, ["precision@10"], relevance="click", score="new_ranker", position="position",
                        propensity=CURVE).summary.iloc[0, 0]
    assert abs(right - truth) < abs(wrong - truth) / 5


def test_position_bias_is_recovered_by_intervention_harvesting():
    impressions = click_log(12_000, arms=2, seed=13)
    bias = tk.estimate_position_bias(impressions, item="image", n_resamples=20, seed=1)
    est = bias.curve["propensity"].loc[1:10].to_numpy()
    assert np.abs(est - 1.0 / np.arange(1, 11)).max() < 0.05
    assert bias.curve.loc[1, "propensity"] == 1.0
    inside = (bias.curve["low"] <= bias.curve["propensity"]) & (bias.curve["propensity"] <= bias.curve["high"])
    assert inside.all()
    power = tk.estimate_position_bias(impressions, item="image", form="power", n_resamples=0)
    assert power.eta == pytest.approx(1.0, abs=0.1)
    # the estimate goes into evaluate as it is
    log = impressions[impressions["arm"] == 0]
    res = tk.evaluate(log, ["precision@10"], relevance="click", score="new_ranker", item="image",
                      position="position", propensity=bias)
    assert res.info["ips"]["clicks"] == int(log["click"].sum())


def test_position_bias_from_a_randomisation_experiment():
    rng = np.random.default_rng(5)
    n = 200_000
    pos = rng.integers(1, 11, n)
    rel = rng.random(n) < 0.3  # the results in random order: relevance independent of position
    click = rel & (rng.random(n) < pos ** -0.8)
    frame = pd.DataFrame({"query": np.arange(n) // 10, "item": np.arange(n), "position": pos, "click": click})
    bias = tk.estimate_position_bias(frame, method="randomized", n_resamples=0)
    assert np.abs(bias.curve["propensity"].to_numpy() - np.arange(1, 11) ** -0.8).max() < 0.05
    assert tk.estimate_position_bias(frame, method="randomized", form="power", n_resamples=0).eta == pytest.approx(
        0.8, abs=0.05)


def test_position_bias_hand_computed_and_bad_logs():
    log = pd.DataFrame({"query": [1, 1, 1, 1], "item": ["a", "b", "a", "b"], "position": [1, 2, 2, 1],
                        "click": [1, 0, 1, 1]})
    assert tk.estimate_position_bias(log, n_resamples=0).propensities == {1: 1.0, 2: 0.5}
    once = log.iloc[:2]
    with pytest.raises(DataError, match="two different positions"):
        tk.estimate_position_bias(once, n_resamples=0)
    with pytest.raises(DataError, match="1-based position"):
        tk.estimate_position_bias(log.assign(position=[0, 1, 2, 1]), n_resamples=0)
    with pytest.raises(DataError, match="clicks"):
        tk.estimate_position_bias(log.assign(click=[1, -1, 0, 0]), n_resamples=0)
    with pytest.raises(ParameterError, match="method"):
        tk.estimate_position_bias(log, method="em")


def test_popularity_propensity_by_hand_and_fitted():
    train = pd.DataFrame({"item": ["a"] * 4 + ["b"] * 2 + ["c"]})
    prop = tk.popularity_propensity(train, gamma=1.0)
    assert prop.by_item.to_dict() == {"a": 1.0, "b": 0.5, "c": 0.25}
    assert prop.unseen == 0.25
    assert tk.popularity_propensity(train, gamma=3.0).by_item.to_dict() == {"a": 1.0, "b": 0.25, "c": 0.0625}
    # gamma fitted: items recommended in proportion to popularity ** 2 give a slope of 2
    counts = {f"i{j}": j for j in range(1, 40)}
    train = pd.DataFrame({"item": [i for i, n in counts.items() for _ in range(n)]})
    recs = pd.DataFrame({"item": [i for i, n in counts.items() for _ in range(n * n)]})
    assert tk.popularity_propensity(train, recommendations=recs, exclude_top=0).gamma == pytest.approx(2.0)
    # and used per item: a click on b weighs 1 / 0.5
    log = pd.DataFrame({"query": [1, 1], "item": ["b", "z"], "click": [1, 0], "s": [1.0, 0.0]})
    res = tk.evaluate(log, ["precision@1"], relevance="click", score="s", item="item",
                      propensity=tk.popularity_propensity(pd.DataFrame({"item": ["a"] * 4 + ["b"] * 2}), gamma=1.0))
    assert res.summary.iloc[0, 0] == 2.0
    with pytest.raises(ParameterError, match="gamma="):
        tk.popularity_propensity(train)


def test_popularity_propensity_corrects_a_log_missing_not_at_random():
    """Items are observed with probability proportional to popularity ** 0.5 (Yang et al.'s model with
    gamma = 0): IPS with those propensities recovers the true precision, the naive one does not."""
    rng = np.random.default_rng(21)
    users, items = 4000, 50
    pop = np.arange(1, items + 1, dtype=float)
    observe = (pop / pop.max()) ** 0.5
    rel = rng.random((users, items)) < 0.2
    seen = rel & (rng.random((users, items)) < observe)
    scores = rel * 0.5 + rng.random((users, items))
    frame = pd.DataFrame({"user": np.repeat(np.arange(users), items), "item": np.tile(np.arange(items), users),
                          "relevant": rel.ravel().astype(int), "click": seen.ravel().astype(int),
                          "s": scores.ravel()})
    prop = tk.ItemPropensity(pd.Series(observe, index=np.arange(items)), float(observe.min()), 0.0)
    truth = tk.evaluate(frame, ["precision@5"], query="user", relevance="relevant", score="s", **KEEP)
    naive = tk.evaluate(frame, ["precision@5"], query="user", relevance="click", score="s", **KEEP)
    ips = tk.evaluate(frame, ["precision@5"], query="user", relevance="click", score="s", item="item", propensity=prop)
    se = ips.per_query["precision@5"].std() / np.sqrt(users)
    assert abs(ips.summary.iloc[0, 0] - truth.summary.iloc[0, 0]) < 4 * se
    assert abs(naive.summary.iloc[0, 0] - truth.summary.iloc[0, 0]) > 10 * se


@pytest.mark.parametrize("ties", ["expected", "first", "item_asc"])
def test_bounds_contain_the_truth(ties):
    """Every shown candidate examined (eta = 0): clicks are the truth on the page, and the never-shown
    candidates are the only unknowns; the bounds must hold the truth, the naive value is the lower one."""
    log = click_log(3000, shown=8, eta=0.0, seed=3)
    log["new_ranker"] = log["new_ranker"].round(1)  # ties
    metrics = ["precision@10", "recall@10", "f1@10", "fbeta(beta=2)@5", "dcg@10", "hit_rate@5", "rr", "fp@10", "ap"]
    truth = tk.evaluate(log, metrics, relevance="relevant", score="new_ranker", item="image", ties=ties, **KEEP)
    res = tk.evaluate(log, metrics, relevance="click", score="new_ranker", item="image", position="position",
                      ties=ties, **KEEP)
    b = res.bounds()
    for name in metrics:
        row = b.loc[("new_ranker", name)]
        if name == "ap":
            assert np.isnan(row["lower"]) and "monotone" in row["note"]
            continue
        assert row["lower"] <= truth.summary.iloc[0][name] <= row["upper"], name
        assert row["lower"] < row["upper"]
    assert b.loc[("new_ranker", "precision@10"), "naive"] == b.loc[("new_ranker", "precision@10"), "lower"]
    assert 0.3 < b.loc[("new_ranker", "precision@10"), "never_shown"] < 0.7


def test_bounds_by_hand():
    # shown: a (clicked, position 1), b (position 2); c never shown, ranked first by the new model
    log = {"query": [1, 1, 1], "item": ["a", "b", "c"], "click": [1, 0, 0], "position": [1, 2, None],
           "new": [0.5, 0.1, 0.9]}
    res = tk.evaluate(log, ["precision@1", "recall@1", "recall@3"], relevance="click", score="new", item="item",
                      position="position")
    b = res.bounds()
    assert b.loc[("new", "precision@1"), ["lower", "upper", "never_shown"]].tolist() == [0.0, 1.0, 1.0]
    assert b.loc[("new", "recall@1"), ["lower", "upper"]].tolist() == [0.0, 0.5]   # c relevant: 1 of 2
    assert b.loc[("new", "recall@3"), ["lower", "upper"]].tolist() == [1.0, 1.0]
    with pytest.raises(ParameterError, match="position="):
        tk.evaluate(log, ["precision@1"], relevance="click", score="new").bounds()
    # two never-shown candidates: c at rank 1 (in the top 1), d at rank 3; a clicked at rank 2
    log = {"query": [1, 1, 1], "item": ["a", "c", "d"], "click": [1, 0, 0], "position": [1, None, None],
           "new": [0.5, 0.9, 0.1]}
    b = tk.evaluate(log, ["recall@1"], relevance="click", score="new", item="item", position="position").bounds()
    assert b.loc[("new", "recall@1"), ["lower", "upper"]].tolist() == [0.0, 0.5]   # upper: c relevant, d not
    # a clicked at rank 1 and two never-shown below the top 1: at worst both relevant, recall 1/3
    log = {"query": [1, 1, 1], "item": ["a", "c", "d"], "click": [1, 0, 0], "position": [1, None, None],
           "new": [0.9, 0.5, 0.1]}
    b = tk.evaluate(log, ["recall@1"], relevance="click", score="new", item="item", position="position").bounds()
    assert b.loc[("new", "recall@1"), ["lower", "upper"]].tolist() == [pytest.approx(1 / 3), 1.0]


def test_ips_precision_at_1_is_jurity_ips_ctr():
    """jurity's IPS estimate of a click-through rate (its documented formula: (1/n) sum over users of
    r_a I(top recommendation = logged a) / p(a)) is IPS precision@1 over a log with one logged item per
    user. (jurity 2.1.0 itself returns NaN under pandas 3: its fillna(inplace=True) acts on a copy.)"""
    rng = np.random.default_rng(0)
    users, items = 300, 5
    score = rng.random((users, items))
    logged = rng.integers(0, items, users)
    click = rng.random(users) < 0.4
    p = rng.choice([0.2, 0.5, 0.8], users)
    jurity_ips = np.mean(np.where(score.argmax(axis=1) == logged, click / p, 0.0))
    on_page = np.zeros((users, items), bool)
    on_page[np.arange(users), logged] = True
    frame = pd.DataFrame({"user": np.repeat(np.arange(users), items), "item": np.tile(np.arange(items), users),
                          "score": score.ravel(), "click": (on_page & click[:, None]).ravel().astype(int),
                          "position": np.where(on_page.ravel(), 1.0, np.nan), "p": np.repeat(p, items)})
    res = tk.evaluate(frame, ["precision@1"], query="user", relevance="click", item="item", position="position",
                      propensity="p")
    assert res.summary.iloc[0, 0] == pytest.approx(jurity_ips, rel=1e-12)


@pytest.mark.slow
def test_ips_intervals_cover_the_truth_about_95_percent_of_the_time():
    """Fresh logs (new queries and clicks) again and again: the bootstrap interval of the IPS mean
    (summary_ci) covers the population's true precision@10 / dcg@10 in about 95% of them; the naive
    one almost never."""
    population = tk.evaluate(click_log(200_000, seed=999), ["precision@10", "dcg@10"], relevance="relevant",
                             score="new_ranker", **KEEP).summary.iloc[0]
    reps, covered, naive_covered = 120, {"precision@10": 0, "dcg@10": 0}, 0
    for rep in range(reps):
        log = click_log(2000, seed=10_000 + rep)
        ips = tk.evaluate(log, ["precision@10", "dcg@10"], relevance="click", score="new_ranker", position="position",
                          propensity=CURVE)
        ci = ips.summary_ci(n_resamples=1000, seed=rep).set_index("metric")
        for name in covered:
            covered[name] += ci.loc[name, "ci_low"] <= population[name] <= ci.loc[name, "ci_high"]
        naive = tk.evaluate(log, ["precision@10"], relevance="click", score="new_ranker", **KEEP)
        low, high = naive.summary_ci(n_resamples=1000, seed=rep).iloc[0][["ci_low", "ci_high"]]
        naive_covered += low <= population["precision@10"] <= high
    for name, hits in covered.items():
        assert 0.88 <= hits / reps <= 0.995, (name, hits / reps)
    assert naive_covered == 0


def test_compare_on_ips_estimates_finds_the_better_ranker_that_clicks_hide():
    """The old ranker's own clicks favour it (its top holds every examined position); weighted by
    the inverse propensities, the paired comparison sees the new ranker's gain, and segments and
    intervals flow from the same per-query estimates."""
    log = click_log(6000, seed=31)
    log["half"] = np.where(log["query"] % 2 == 0, "even", "odd")
    truth = tk.evaluate(log, ["precision@5"], relevance="relevant", score=["old_ranker", "new_ranker"], **KEEP)
    assert truth.summary.loc["new_ranker"].iloc[0] > truth.summary.loc["old_ranker"].iloc[0] + 0.1
    naive = tk.evaluate(log, ["precision@5"], relevance="click", score=["old_ranker", "new_ranker"], **KEEP)
    ips = tk.evaluate(log, ["precision@5"], relevance="click", score=["old_ranker", "new_ranker"],
                      position="position", propensity=CURVE, by="half")
    naive_row = naive.compare(baseline="old_ranker", n_resamples=2000).iloc[0]
    ips_row = ips.compare(baseline="old_ranker", n_resamples=2000)
    ips_all = ips_row[ips_row["half"] == "(all)"].iloc[0] if "half" in ips_row else ips_row.iloc[0]
    assert ips_all["verdict"] == "better" and ips_all["ci_low"] > 0
    assert naive_row["delta"] < ips_all["delta"]
    true_delta = truth.summary.loc["new_ranker"].iloc[0] - truth.summary.loc["old_ranker"].iloc[0]
    assert ips_all["ci_low"] <= true_delta <= ips_all["ci_high"]
    assert set(ips.segments.reset_index()["half"]) >= {"even", "odd"}


# --- hostile but ordinary click logs (found by an attack on the feature) ---

def _page(pos, click=None):
    n = len(pos)
    return pd.DataFrame({"query": [1] * n, "item": [f"i{j}" for j in range(n)], "click": click or [1] + [0] * (n - 1),
                         "position": pos, "new": np.linspace(1, 0, n)})


def _ips(frame, **kw):
    return tk.evaluate(frame, ["precision@2"], relevance="click", score="new", item="item", position="position",
                       **{"propensity": {1: 1.0, 2: 0.5, 3: 0.25}, **kw}).summary.iloc[0, 0]


@pytest.mark.parametrize("pos", [["a", "b", "c"], pd.Categorical(["x", "y", "z"]), [True, True, True],
                                 pd.array(["1", "2", None], dtype="string"), np.array([1, 2, 3], dtype=complex),
                                 pd.to_datetime(["2020-01-01"] * 3), ["1", "2", "3"]])
def test_a_position_column_that_is_not_numbers_is_refused(pos):
    with pytest.raises(tk.ColumnError, match="position=.*numbers"):
        _ips(_page(pos))


def test_positions_with_missing_values_of_every_kind():
    for pos in ([1, 2, None], [1.0, 2.0, np.nan], pd.array([1, 2, pd.NA], dtype="Int64"),
                pd.array([1, 2, pd.NA], dtype=object)):
        assert _ips(_page(pos)) == 0.5  # the click at position 1, in the new top 2


def test_propensity_mappings_functions_and_columns_that_are_wrong():
    assert _ips(_page([1, 2, 3]), propensity={1: 1.0, 10**12: 0.1}) == 0.5  # huge keys: no dense table
    with pytest.raises(ParameterError, match="key True"):
        _ips(_page([1, 2, 3]), propensity={True: 1.0, 2: 0.5})
    with pytest.raises(ParameterError, match="raised ZeroDivisionError"):
        _ips(_page([1, 2, 3]), propensity=lambda x: 1 / 0)
    with pytest.raises(ParameterError, match="function"):
        _ips(_page([1, 2, 3]), propensity=lambda x: np.array(["a"] * len(x)))
    assert _ips(_page([1, 2, 3]), propensity=lambda x: 1 / x) == 0.5
    with pytest.raises(tk.ColumnError, match="propensity=.*numbers"):
        _ips(_page([1, 2, 3]).assign(pr=["1", "0.5", "x"]), propensity="pr")
    with pytest.raises(tk.ColumnError, match="position"):
        tk.evaluate(_page([1, 2, 3]), ["precision@2"], relevance="click", score="new", position="pos",
                    propensity={1: 1.0})


def test_a_click_never_shown_is_refused_with_or_without_propensity():
    frame = _page([1, None, 3], click=[0, 1, 0])
    with pytest.raises(DataError, match="never showed"):
        tk.evaluate(frame, ["precision@2"], relevance="click", score="new", position="position")


def test_pooled_ratios_count_every_query_by_hand():
    """Query 1: its click (weight 1) at rank 1; query 2: no click. Pooled over both: recall 1/1, F1
    2 * 1 / (1 + 1 + 1) (each query adds k = 1 to the denominator); query 2's share of recall is the
    ratio itself (0 - 1 * 0 over a mean denominator of 1/2), its share of F1 2/3 + (0 - 2/3 * 1) / 1.5."""
    frame = pd.DataFrame({"query": [1, 1, 2, 2, 2], "item": list("abcde"), "click": [1, 0, 0, 0, 0],
                          "position": [1, 2, 1, 2, 3], "new": [.9, .1, .9, .1, 0]})
    res = tk.evaluate(frame, ["f1_micro@1", "recall_micro@1", "precision@1"], relevance="click", score="new",
                      item="item", position="position", propensity={1: 1.0, 2: 1.0, 3: 1.0})
    assert res.summary.iloc[0].tolist() == pytest.approx([2 / 3, 1.0, 0.5])
    per_query = res.per_query.set_index("query")
    assert per_query.loc[2, "recall_micro@1"] == 1.0
    assert per_query.loc[2, "f1_micro@1"] == pytest.approx(2 / 3 - (2 / 3) / 1.5)
    assert per_query.loc[1, "f1_micro@1"] == pytest.approx(2 / 3 + (2 - 2 / 3 * 2) / 1.5)
    # skipping the queries without a click leaves recall's ratio as it is (they add nothing to either sum), and
    # the shares are those of the queries kept: query 3 (a click at rank 2) joins, query 2 is skipped
    third = pd.DataFrame({"query": [3, 3], "item": ["f", "g"], "click": [0, 1], "position": [1, 2], "new": [.9, .1]})
    frame = pd.concat([frame, third], ignore_index=True)
    kw = dict(relevance="click", score="new", item="item", position="position", propensity={1: 1.0, 2: 1.0, 3: 1.0})
    keep = tk.evaluate(frame, ["recall_micro@1"], **kw)
    skip = tk.evaluate(frame, ["recall_micro@1"], **kw, empty_queries="skip")
    assert keep.summary.iloc[0, 0] == skip.summary.iloc[0, 0] == 0.5
    assert skip.per_query["recall_micro@1"].tolist() == [1.0, 0.0]  # 1/2 + (1 - 1/2) / 1, 1/2 + (0 - 1/2) / 1
    assert keep.per_query["recall_micro@1"].tolist() == pytest.approx([1.25, 0.5, -0.25])  # mean(b) = 2/3
    # short lists under shrink: each query adds min(k, n) to F1's denominator (lists of 2 and 3 at k = 5)
    shrink = tk.evaluate(frame, ["f1_micro@5"], **kw, short_lists="shrink")
    assert shrink.summary.iloc[0, 0] == pytest.approx(2 * 2 / (2 + 2 + 3 + 2))


def test_curves_refuse_what_ips_cannot_estimate():
    res = tk.evaluate(click_log(50), ["precision@5"], relevance="click", score="new_ranker", position="position",
                      propensity=CURVE)
    with pytest.raises(ParameterError, match="hit_rate"):
        res.curves(["hit_rate"], ks=[1, 5])
    assert len(res.curves(["precision"], ks=[1, 5])) > 0


def test_bounds_follow_weights_aliases_and_metrics_not_evaluated():
    frame = pd.DataFrame({"query": [1, 1, 2, 2], "item": list("abcd"), "click": [1, 0, 0, 0],
                          "position": [1, None, 1, None], "new": [.9, .1, .9, .1], "w": [9., 9., 1., 1.]})
    res = tk.evaluate(frame, ["precision@1"], relevance="click", score="new", item="item", position="position",
                      weight="w", empty_queries="keep")
    row = res.bounds().loc[("new", "precision@1")]
    assert row["naive"] == row["estimate"] == row["lower"] == pytest.approx(0.9)  # weighted: 9 of 10
    assert row["upper"] == pytest.approx(0.9)
    b = res.bounds(metrics=["p@1", "precision@2"])
    assert b.loc[("new", "p@1"), "estimate"] == pytest.approx(0.9)
    assert b.loc[("new", "precision@2"), "estimate"] == pytest.approx(0.45)  # evaluated again


def test_popularity_propensity_ids_must_match_and_any_id_column_works():
    pp = tk.popularity_propensity(pd.DataFrame({"item": ["a", "a", "b"]}), gamma=1.0)
    log = pd.DataFrame({"query": [1, 1, 2], "item": [1, 2, 3], "click": [1, 1, 1], "new": [2.0, 1.0, 1.0]})
    with pytest.raises(DataError, match="same type"):
        tk.evaluate(log, ["precision@2"], relevance="click", score="new", item="item", propensity=pp)
    log = pd.DataFrame({"query": [1, 1], "item": pd.Categorical(["b", "z"]), "click": [1, 0], "new": [1.0, 0.0]})
    res = tk.evaluate(log, ["precision@1"], relevance="click", score="new", item="item", propensity=pp)
    assert res.summary.iloc[0, 0] == 2.0  # b: (1/2) ** 1
    with pytest.raises(DataError, match="no item ids"):
        tk.popularity_propensity(pd.DataFrame({"item": [None, None]}), gamma=1.0)


def test_estimate_position_bias_reads_any_table_and_stays_silent():
    import pyarrow as pa

    frame = pd.DataFrame(dict(query=[1, 1, 1, 1, 2, 2, 2, 2], item=list("ababcdcd"), position=[1, 2, 2, 1, 2, 3, 3, 2],
                              click=[1] * 8))
    with pytest.warns(tk.TopkevalWarning, match="no intervals: 2 queries") as caught:  # 2 queries cannot show the noise
        tk.estimate_position_bias(frame, n_resamples=1, seed=0)
    assert len(caught) == 1  # and nothing else (no numpy warning from the resamples)
    with pytest.raises(tk.ColumnError, match="'clicks' is not in impressions"):
        tk.estimate_position_bias(pa.Table.from_pandas(frame), click="clicks")
    arrow = tk.estimate_position_bias(pa.Table.from_pandas(frame), n_resamples=0).propensities
    assert arrow == tk.estimate_position_bias(frame, n_resamples=0).propensities


def test_ips_rbp_is_lenskit_ipsrbp_numerator():
    """LensKit's IPSRBP (PR 1182, after Yang et al. 2018) with self_normalized=False is
    ``sum over the observed relevant items in the top n of w_i (1 - p) p^(rank - 1)``, which is
    topkeval's rbp under per-item propensities. Its self-normalised form divides each user's sum by
    that user's clicks' weight, the per-query ratio topkeval refuses (rbp is not a ratio: kept)."""
    rng = np.random.default_rng(3)
    users, items = 60, 8
    observe = rng.choice([0.25, 0.5, 1.0], items)
    frame = pd.DataFrame({"user": np.repeat(np.arange(users), items), "item": np.tile(np.arange(items), users),
                          "click": (rng.random(users * items) < 0.3).astype(int), "s": rng.random(users * items)})
    prop = tk.ItemPropensity(pd.Series(observe, index=np.arange(items)), 1.0, 0.0)
    res = tk.evaluate(frame, ["rbp(p=0.85)@5", "tp@8"], query="user", relevance="click", score="s", item="item",
                      propensity=prop)
    per_user = res.per_query.set_index("user")
    for user, rows in frame.groupby("user"):
        ranked = rows.sort_values("s", ascending=False).reset_index(drop=True)
        w = 1 / observe[ranked["item"].to_numpy()]
        hits = ranked["click"].to_numpy() == 1
        numerator = sum(w[r] * 0.15 * 0.85 ** r for r in range(5) if hits[r])
        assert per_user.loc[user, "rbp(p=0.85)@5"] == pytest.approx(numerator, rel=1e-12, abs=1e-15)
        assert per_user.loc[user, "tp@8"] == pytest.approx(w[hits].sum(), rel=1e-12)  # every item: the clicks' weight


def test_the_output_says_how_it_estimated_and_what_was_never_shown(tmp_path, capsys):
    from topkeval.cli import main

    log = click_log(400, shown=10, seed=8)
    with pytest.warns(tk.TopkevalWarning, match=r"never showed fill part of a model's top 10 \(new_ranker: "):
        res = tk.evaluate(log, ["precision@10", "recall_micro@10"], relevance="click",
                          score=["new_ranker", "old_ranker"], item="image", position="position", propensity=CURVE)
    share = res.info["clicks"]["never_shown"]
    assert share["old_ranker"] == 0 and share["new_ranker"] == pytest.approx(
        res.bounds().loc[("new_ranker", "precision@10"), "never_shown"])
    assert res.info["ips"]["queries_with_clicks"] == int(log.groupby("query")["click"].max().sum())
    path = tmp_path / "clicks.csv"
    log.to_csv(path, index=False)
    assert main(["evaluate", str(path), "--relevance", "click", "--score", "new_ranker", "--item", "image",
                 "--position", "position", "--propensity", "power:1"]) == 0
    out = capsys.readouterr().out
    assert "inverse propensity weighted" in out and "never showed" in out
    # the default metrics as estimated from clicks (specificity and R-precision have no such estimate)
    assert "recall_micro@20" in out and "f1_micro@20" in out and "specificity" not in out
    assert main(["evaluate", str(path), "--relevance", "click", "--score", "new_ranker", "--position", "position",
                 "-m", "precision@5"]) == 0
    assert "clicks taken as relevance" in capsys.readouterr().out


def test_a_cascade_log_is_unbiased_with_each_rows_examination_given_the_clicks_above():
    """A dependent click model (users go on less often after a click): each row's examination
    probability depends on the clicks above it, which the log shows; passed as a column, IPS stays
    unbiased (given the clicks above, a click divided by that probability has expectation the
    relevance). A curve of positions alone, the position-based model's, is far off here."""
    log = click_log(20_000, model="cascade", seed=5)
    metrics = ["precision@10", "dcg@10"]
    truth = tk.evaluate(log, metrics, relevance="relevant", score="new_ranker", **KEEP).summary.iloc[0]
    naive = tk.evaluate(log, metrics, relevance="click", score="new_ranker", **KEEP).summary.iloc[0]
    rows = tk.evaluate(log, metrics, relevance="click", score="new_ranker", position="position",
                       propensity="examination")
    curve = tk.evaluate(log, metrics, relevance="click", score="new_ranker", position="position",
                        propensity={k: 0.85 ** (k - 1) for k in range(1, 21)}).summary.iloc[0]
    for name in metrics:
        se = rows.per_query[name].std(ddof=1) / np.sqrt(len(rows.per_query))
        assert abs(rows.summary.iloc[0][name] - truth[name]) < 4 * se, name
        assert abs(naive[name] - truth[name]) > 10 * se and abs(curve[name] - truth[name]) > 10 * se, name


def test_the_report_puts_naive_estimate_and_bounds_side_by_side(tmp_path):
    log = click_log(300, shown=10, seed=9)
    with pytest.warns(tk.TopkevalWarning, match="never showed"):
        res = tk.evaluate(log, ["precision@10", "recall_micro@10"], relevance="click",
                          score=["new_ranker", "old_ranker"], item="image", position="position", propensity=CURVE)
    path = tmp_path / "r.html"
    res.report(path, n_resamples=200, curves=False)
    page = path.read_text(encoding="utf-8")
    section = page[page.index('<section id="clicks">'):]
    section = section[:section.index("</section>")]
    b = res.bounds()
    for model, metric in b.index:
        assert f"{b.loc[(model, metric), 'naive']:.4f}" in section
    assert f"{b.loc[('new_ranker', 'precision@10'), 'upper']:.4f}" in section
    assert "was never shown" in section and "effective sample size" in section
    assert "not monotone" in section  # recall_micro: no bound, and why
    assert "May be unreliable: The estimates from clicks are too skewed" in section  # evaluate's warning, again
    plain = tk.evaluate(log, ["precision@10"], relevance="click", score="new_ranker")
    plain.report(tmp_path / "p.html", n_resamples=200, curves=False)
    assert 'id="clicks"' not in (tmp_path / "p.html").read_text(encoding="utf-8")


def test_the_command_line_estimates_a_curve_and_evaluates_with_it(tmp_path, capsys):
    from topkeval.cli import main

    arms, log = tmp_path / "arms.csv", tmp_path / "log.csv"
    click_log(3000, arms=2, seed=2).to_csv(arms, index=False)
    click_log(1000, seed=1).to_csv(log, index=False)
    assert main(["bias", str(arms), "--item", "image", "--resamples", "20", "--format", "csv"]) == 0
    curve = tmp_path / "curve.csv"
    curve.write_text(capsys.readouterr().out)
    expected = tk.estimate_position_bias(str(arms), item="image", n_resamples=20)
    assert pd.read_csv(curve)["propensity"].tolist() == pytest.approx(expected.curve["propensity"].tolist())
    assert main(["evaluate", str(log), "--relevance", "click", "--score", "new_ranker", "--item", "image", "-m",
                 "precision@10", "--position", "position", "--propensity", str(curve), "--format", "json"]) == 0
    import json

    got = json.loads(capsys.readouterr().out)["summary"]["new_ranker"]["precision@10"]
    want = tk.evaluate(pd.read_csv(log), ["precision@10"], relevance="click", score="new_ranker", item="image",
                       position="position", propensity=expected).summary.iloc[0, 0]
    assert got == pytest.approx(want)
    assert main(["bias", str(log), "--item", "image"]) == 2
    assert "--method randomized" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("pos,p\n1,1\n")
    assert main(["evaluate", str(log), "--relevance", "click", "--score", "new_ranker", "--position", "position",
                 "--propensity", str(tmp_path / "bad.csv")]) == 2
    assert "position and propensity" in capsys.readouterr().err


def test_ids_read_from_a_csv_file_stay_text(tmp_path):
    """'007' and '7' are two items: estimate_position_bias and popularity_propensity read a CSV
    path's id columns as text, as evaluate does."""
    path = tmp_path / "impressions.csv"
    path.write_text("query,item,position,click\nq1,007,1,1\nq1,7,2,0\nq1,007,2,1\nq1,7,1,1\n")
    assert tk.estimate_position_bias(str(path), n_resamples=0).curve["pairs"].tolist() == [2, 2]
    train = tmp_path / "train.csv"
    train.write_text("item\n007\n007\n7\n")
    assert tk.popularity_propensity(str(train), gamma=1.0).by_item.to_dict() == {"007": 1.0, "7": 0.5}


@pytest.mark.parametrize("ties", ["item_asc", "first"])
def test_the_never_shown_share_under_rules_that_read_item_ids(ties):
    log = click_log(300, shown=10, seed=12)
    log["new_ranker"] = log["new_ranker"].round(1)
    log["image"] = "img" + log["image"].astype(str)  # text ids, ordered by the item rules
    res = tk.evaluate(log, ["precision@10"], relevance="click", score="new_ranker", item="image",
                      position="position", ties=ties)
    assert res.info["clicks"]["never_shown"]["new_ranker"] == pytest.approx(
        res.bounds().loc[("new_ranker", "precision@10"), "never_shown"])


def test_graded_clicks_weigh_their_gains_by_hand():
    """Graded clicks (gain = grade, or 2**grade - 1): each click's gain is weighed by w = 1/p."""
    log = pd.DataFrame({"query": [1, 1, 1], "item": ["a", "b", "c"], "grade": [1, 2, 0], "position": [1, 2, 3],
                        "new": [0.9, 0.5, 0.1]})
    res = tk.evaluate(log, ["dcg@3", "dcg(gain=exp)@3"], relevance="grade", score="new", item="item",
                      position="position", propensity={1: 1.0, 2: 0.4, 3: 1.0})  # b (grade 2) weighs 2.5
    d = [1 / math.log2(r + 1) for r in (1, 2, 3)]
    row = res.per_query.iloc[0]
    assert row["dcg@3"] == pytest.approx(1 * 1 * d[0] + 2.5 * 2 * d[1])
    assert row["dcg(gain=exp)@3"] == pytest.approx(1 * 1 * d[0] + 2.5 * 3 * d[1])
    with pytest.raises(ParameterError, match=r"ndcg@3 -> dcg@3"):
        tk.evaluate(log, ["ndcg@3"], relevance="grade", score="new", position="position", propensity={1: 1.0, 2: 0.4})


# --- what is offered from clicks, and what is refused or warned of (issue 34) ---

def _clicks(rng, queries=300, shown=20, eta=1.0):
    """A position-based click log: relevance at random, examination position ** -eta."""
    n = queries * 20
    pos = np.tile(np.arange(1, 21), queries).astype(float)
    rel = rng.random(n) < 0.3
    click = rel & (rng.random(n) < pos ** -eta)
    pos[pos > shown] = np.nan
    click &= ~np.isnan(pos)
    return pd.DataFrame({"query": np.repeat(np.arange(queries), 20), "item": np.tile(np.arange(20), queries),
                         "click": click.astype(int), "position": pos, "p": pos ** -eta,
                         "a": rng.random(n), "b": rng.random(n)})


CURVE_ETA1 = {k: 1.0 / k for k in range(1, 21)}


def test_the_pooled_ratios_are_refused_outside_a_click_log_with_propensities():
    log = _clicks(np.random.default_rng(1), queries=40)
    for call in (lambda: tk.evaluate(log, ["recall_micro@5"], relevance="click", score="a"),
                 lambda: tk.evaluate(log, ["f1_micro@5"], relevance="click", score="a", position="position"),
                 lambda: tk.evaluate_matrix(np.random.default_rng(0).random((3, 4)), np.eye(3, 4), ["recall_micro@2"]),
                 lambda: tk.MatrixEvaluator(["fbeta_micro(beta=2)@2"])):
        with pytest.raises(ParameterError, match=r"pooled over every query of a click log.*use (recall|f1|fbeta)"):
            call()
    for extra in ({"by": "seg"}, {"weight": "w"}):
        with pytest.raises(ParameterError, match="recall_micro@5 is a ratio pooled over every query.*apart"):
            tk.evaluate(log.assign(seg=log["query"] % 2, w=1.0), ["recall_micro@5"], relevance="click", score="a",
                        position="position", propensity=CURVE_ETA1, **extra)
    # fbeta_micro(beta=1) is f1_micro, as fbeta(beta=1) is f1
    assert str(tk.parse_metric("fbeta_micro(beta=1)@5")) == "f1_micro@5"


def test_propensities_of_a_stream_are_refused(tmp_path):
    path = tmp_path / "clicks.parquet"
    _clicks(np.random.default_rng(2), queries=20).to_parquet(path)
    with pytest.raises(ParameterError, match="propensity= reads a click log held as one table in memory"):
        tk.evaluate(str(path), ["precision@5"], relevance="click", score="a", item="item", chunk_rows=100,
                    propensity=tk.ItemPropensity(pd.Series([0.5] * 20, index=range(20)), 0.5, 1.0))


@pytest.mark.parametrize("p, words", [(1e-320, "beyond the largest float"), (1e-308, "summed with the others")])
def test_propensities_whose_weights_overflow_are_refused(p, words):
    log = pd.DataFrame({"query": [1, 1, 2, 2], "item": list("abab"), "click": [1, 0, 1, 0],
                        "position": [2, 1, 2, 1], "s": [1.0, 0.0, 1.0, 0.0]})
    with pytest.raises(DataError, match=f"propensity {p:g}: its weight 1/p \\({words}\\) overflows"):
        tk.evaluate(log, ["precision@2"], relevance="click", score="s", position="position",
                    propensity={1: 1.0, 2: p})


def test_the_pooled_ratio_s_intervals_are_its_delta_method_and_its_bootstrap():
    """The t interval of the per-query shares is the delta-method interval of the ratio, computed here
    from the weighted sums; summary_ci's bootstrap of their mean agrees with a bootstrap of the ratio
    itself (queries resampled, sums divided), written here with numpy."""
    from scipy import stats

    log = _clicks(np.random.default_rng(3), queries=800)
    res = tk.evaluate(log, ["recall_micro@5"], relevance="click", score="a", item="item", position="position",
                      propensity=CURVE_ETA1)
    w = np.where(log["click"] == 1, 1 / log["p"], 0.0).reshape(800, 20)
    order = np.argsort(-log["a"].to_numpy().reshape(800, 20), axis=1)
    num = np.take_along_axis(w, order, axis=1)[:, :5].sum(axis=1)
    den = w.sum(axis=1)
    r = num.sum() / den.sum()
    delta_se = np.sqrt(((num - r * den) ** 2).sum() / (800 * 799)) / den.mean()
    psi = res.per_query["recall_micro@5"].to_numpy()
    assert res.summary.iloc[0, 0] == pytest.approx(r, rel=1e-12)
    assert stats.sem(psi) == pytest.approx(delta_se, rel=1e-9)
    idx = np.random.default_rng(0).integers(0, 800, (4000, 800))
    lo, hi = np.quantile(num[idx].sum(axis=1) / den[idx].sum(axis=1), [0.025, 0.975])
    ci = res.summary_ci(n_resamples=4000, seed=1).iloc[0]
    assert ci["ci_low"] == pytest.approx(lo, abs=0.1 * (hi - lo)) and ci["ci_high"] == pytest.approx(hi, abs=0.1 * (hi - lo))


def test_the_skewness_of_the_weighted_total_is_what_a_simulation_of_its_clicks_gives():
    """skewness() from the propensities and one relevance rate fitted to the clicks, against the
    skewness of the total of simulated clicks (Bernoulli p * rho, weighted 1/p) by scipy."""
    from scipy import stats

    from topkeval.engine.unbiased import skewness

    rng = np.random.default_rng(4)
    p = rng.choice([1.0, 0.5, 0.2, 0.05, 0.01], 400)
    rho = 0.3
    clicks = rng.random(p.shape) < p * rho
    g = skewness(p, 1 / p[clicks], None)
    fitted = (1 / p[clicks]).sum() / len(p)  # the relevance rate skewness() fits: sum w over clicks / sum p w
    sims = (rng.random((50_000, len(p))) < p * fitted) @ (1 / p)
    assert g == pytest.approx(stats.skew(sims), rel=0.05)
    # capped weights: the total of min(1/p, clip), its rate fitted so that sum p w rho is the clicks' weight
    w = np.minimum(1 / p, 20.0)
    fitted = w[clicks].sum() / (p * w).sum()
    sims = (rng.random((50_000, len(p))) < p * fitted) @ w
    assert skewness(p, w[clicks], 20.0) == pytest.approx(stats.skew(sims), rel=0.05)
    # clicks so likely (q near 1/2 and above) that the third cumulant's (1 - 2q) turns them symmetric or left-skewed
    p = np.r_[np.ones(300), np.full(100, 0.5)]
    clicks = rng.random(p.shape) < p * 0.8
    fitted = (1 / p[clicks]).sum() / len(p)
    sims = (rng.random((50_000, len(p))) < p * fitted) @ (1 / p)
    assert skewness(p, 1 / p[clicks], None) == pytest.approx(stats.skew(sims), abs=0.04)  # 3.6 Monte Carlo SE
    assert skewness(np.array([0.5, np.nan]), np.array([2.0]), None) is None  # a shown candidate without one
    assert np.isnan(skewness(p, np.array([]), None))


def test_skewed_estimates_are_warned_of_with_their_limits():
    rng = np.random.default_rng(5)
    small = _clicks(rng, queries=60, eta=1.5)
    with pytest.warns(tk.TopkevalWarning, match=r"too skewed .* precision@10 \(limit 0.3\), recall_micro@10 \(limit "
                                                r"0.08: a pooled ratio\).* about [\d,]+ queries would"):
        res = tk.evaluate(small, ["precision@10", "recall_micro@10"], relevance="click", score="a",
                          position="position", propensity={k: k ** -1.5 for k in range(1, 21)})
    assert res.info["ips"]["skewness"] > 0.3 and set(res.info["ips"]["warnings"]) == {"skewed"}
    from topkeval.engine.unbiased import skewness

    shown = small["position"].notna()  # judged from every shown candidate's propensity, the clicks' weights
    assert res.info["ips"]["skewness"] == pytest.approx(skewness(small.loc[shown, "position"].to_numpy() ** -1.5,
                                                                 small.loc[small["click"] == 1, "position"] ** 1.5,
                                                                 None), rel=1e-12)
    # a larger log: the sums are not warned of, the pooled ratio still is at this skewness
    big = _clicks(rng, queries=1000, eta=1.5)
    with pytest.warns(tk.TopkevalWarning, match=r"too skewed .*above what recall_micro@10 \(limit 0.08: a pooled "
                                                r"ratio\) can take") as caught:
        res = tk.evaluate(big, ["precision@10", "recall_micro@10"], relevance="click", score="a",
                          position="position", propensity={k: k ** -1.5 for k in range(1, 21)})
    assert 0.08 < res.info["ips"]["skewness"] < 0.3 and "precision@10 (limit" not in str(caught[0].message)
    tk.evaluate(big, ["precision@10"], relevance="click", score="a", position="position",
                propensity={k: k ** -1.5 for k in range(1, 21)})  # no warning (warnings are errors here)
    # a column given at the clicks only: the skewness cannot be judged, nothing is said
    at_clicks = big.assign(p=np.where(big["click"] == 1, big["p"], np.nan))
    res = tk.evaluate(at_clicks, ["recall_micro@10"], relevance="click", score="a", position="position",
                      propensity="p")
    assert res.info["ips"]["skewness"] is None and res.info["ips"]["warnings"] == {}


def test_decisions_are_refused_above_the_skewness_refusal_limit_and_only_for_what_is_over_it():
    """Above REFUSAL_LIMIT (calibrated: docs/how-to/clicks.md) summary_ci, compare and the other decisions
    refuse the estimates, naming them, the skewness, what simulation measured there and how many
    queries would do; compare(metrics=) of the estimates under their limit still decides."""
    from topkeval.engine.unbiased import POOLED_SKEWNESS_LIMIT, REFUSAL_LIMIT, SKEWNESS_LIMIT

    assert SKEWNESS_LIMIT < REFUSAL_LIMIT["ips"] and POOLED_SKEWNESS_LIMIT < REFUSAL_LIMIT["pooled"]
    rng = np.random.default_rng(5)
    curve = {k: k ** -1.5 for k in range(1, 21)}
    small = _clicks(rng, queries=60, eta=1.5)
    with pytest.warns(tk.TopkevalWarning, match=r"decisions refuse precision@10, recall_micro@10 \(skewness above "
                                                r"0.35 for the sums and 0.18 for the pooled ratios"):
        res = tk.evaluate(small, ["precision@10", "recall_micro@10"], relevance="click", score=["a", "b"],
                          position="position", propensity=curve)
    g = res.info["ips"]["skewness"]
    assert g > REFUSAL_LIMIT["ips"]
    for owner, call in [("summary_ci", lambda: res.summary_ci(n_resamples=100)),
                        ("compare", lambda: res.compare(n_resamples=100)), ("compare_all", lambda: res.compare_all()),
                        ("anova", lambda: res.anova("precision@10")),
                        ("queries_needed", lambda: res.queries_needed("precision@10", delta=0.01))]:
        with pytest.raises(tk.ParameterError, match=rf"^{owner} refuses precision@10") as caught:
            call()
        text = str(caught.value)
        assert f"about {g:.2f}" in text and "84-89% of logs" in text and "(res.summary)" in text
        # the smaller limit of the kinds over theirs among the metrics asked for (anova's: precision@10 alone)
        needed = 60 * (g / REFUSAL_LIMIT["ips" if owner in ("anova", "queries_needed") else "pooled"]) ** 2
        assert f"About {needed:,.0f} queries (this log has 60)" in text
    # between the limits: the pooled ratio refused, the sum decided on its own
    rng = np.random.default_rng(8)
    for _ in range(20):
        mid = _clicks(rng, queries=300, eta=1.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tk.TopkevalWarning)
            res = tk.evaluate(mid, ["precision@10", "recall_micro@10"], relevance="click", score=["a", "b"],
                              position="position", propensity=curve)
        if REFUSAL_LIMIT["pooled"] < res.info["ips"]["skewness"] < SKEWNESS_LIMIT:
            break
    else:
        pytest.fail("no log between the limits")
    assert "summary_ci and compare may be overconfident" not in res.info["ips"]["warnings"]["skewed"]
    assert "refuse recall_micro@10" in res.info["ips"]["warnings"]["skewed"]
    with pytest.raises(tk.ParameterError, match=r"compare refuses recall_micro@10: .*evaluate precision@10 alone.*"
                                                r"tp@k and precision@k order the models as recall_micro@k does"):
        res.compare(n_resamples=100)
    with pytest.raises(tk.ParameterError, match="summary_ci refuses recall_micro@10"):
        res.summary_ci(n_resamples=100)
    kept = res.compare(metrics=["precision@10"], n_resamples=100)
    assert list(kept["metric"]) == ["precision@10"] and kept["p_value"].notna().all()
    assert not res.queries_needed("precision@10", delta=0.05).empty


def test_never_shown_candidates_are_warned_of_unless_a_column_gives_them_a_chance():
    log = _clicks(np.random.default_rng(6), queries=2000, shown=10)
    with pytest.warns(tk.TopkevalWarning, match=r"never showed fill part of a model's top 10 \(a: \d+\.\d%, "
                                                r"b: \d+\.\d%\).*biased low"):
        res = tk.evaluate(log, ["precision@10"], relevance="click", score=["a", "b"], position="position",
                          propensity=CURVE_ETA1)
    assert "never_shown" in res.info["ips"]["warnings"]
    # a randomised logger's column: every never-shown candidate had its chance of being shown
    res = tk.evaluate(log.assign(p=log["p"].fillna(0.05)), ["precision@10"], relevance="click", score=["a", "b"],
                      position="position", propensity="p")
    assert res.info["ips"]["never_shown_examinable"] and res.info["ips"]["warnings"] == {}


def test_an_estimated_curve_resting_on_few_pairs_is_warned_of():
    log = _clicks(np.random.default_rng(7), queries=2000)
    pairs = pd.Series([5000] * 15 + [40] * 5, index=range(1, 21))
    curve = tk.PositionBias(pd.DataFrame({"propensity": [1 / k for k in range(1, 21)], "low": np.nan,
                                          "high": np.nan, "pairs": pairs},
                                         index=pd.Index(range(1, 21), name="position")), "harvest", "free", None, 0.95)
    clicked = log.loc[(log["click"] == 1) & (log["position"] > 15)]
    with pytest.warns(tk.TopkevalWarning, match=rf"fewer than 100 \(query, item\) pairs at 5 positions "
                                                rf"\(16, 17, 18, 19, 20\), which weigh {len(clicked)} clicks"):
        tk.evaluate(log, ["precision@10"], relevance="click", score="a", position="position", propensity=curve)
    log = log[log["position"] <= 15]  # no click weighed there: nothing to say
    tk.evaluate(log, ["precision@10"], relevance="click", score="a", position="position", propensity=curve)


def test_decisions_are_refused_on_clipped_estimates_only_when_a_weight_was_clipped():
    log = _clicks(np.random.default_rng(8), queries=1000)
    res = tk.evaluate(log, ["precision@10"], relevance="click", score=["a", "b"], position="position",
                      propensity=CURVE_ETA1, clip=20)  # no weight above 20: nothing clipped, nothing said
    assert res.info["ips"]["clipped"] == 0
    res.compare(n_resamples=100)
    with pytest.warns(tk.TopkevalWarning, match="clip=3 capped the weights of"):
        clipped = tk.evaluate(log, ["precision@10"], relevance="click", score=["a", "b"], position="position",
                              propensity=CURVE_ETA1, clip=3)
    with pytest.raises(ParameterError, match="summary_ci refuses these estimates: clip=3"):
        clipped.summary_ci()
    assert clipped.summary.shape == (2, 1)  # the estimate itself is given (with the warning)


def test_the_command_line_and_the_report_repeat_the_warnings(tmp_path, capsys):
    from topkeval.cli import main

    path = tmp_path / "clicks.csv"
    _clicks(np.random.default_rng(9), queries=60, eta=1.5).to_csv(path, index=False)
    assert main(["evaluate", str(path), "--relevance", "click", "--score", "a", "--position", "position",
                 "--propensity", "power:1.5", "-m", "precision@10"]) == 0
    captured = capsys.readouterr()
    assert "may be unreliable: The estimates from clicks are too skewed" in captured.out
    assert "topkeval: warning: The estimates from clicks are too skewed" in captured.err


def test_a_log_without_a_click_leaves_the_pooled_ratios_undefined():
    log = _clicks(np.random.default_rng(10), queries=5).assign(click=0)
    with pytest.warns(tk.TopkevalWarning, match="No item is relevant"):
        res = tk.evaluate(log, ["recall_micro@5", "f1_micro@5", "precision@5"], relevance="click", score="a",
                          position="position", propensity=CURVE_ETA1, empty_queries="keep", undefined=0.0)
    assert res.per_query["recall_micro@5"].tolist() == [0.0] * 5  # the undefined value, everywhere
    assert res.per_query["f1_micro@5"].tolist() == [0.0] * 5  # 0 / (0 + 5 k): defined, 0
    with pytest.warns(tk.TopkevalWarning, match="No item is relevant"):
        res = tk.evaluate(log, ["recall_micro@5"], relevance="click", score="a", position="position",
                          propensity=CURVE_ETA1, empty_queries="keep")
    assert np.isnan(res.summary.iloc[0, 0])  # undefined="nan" by default under propensity=


def test_a_shown_candidate_whose_weight_would_overflow_makes_the_skewness_unbounded():
    """Not clicked, it weighs nothing, but its propensity says a click there would weigh beyond the
    largest float: the tail is unbounded, said without a numpy warning (warnings are errors here)."""
    log = pd.DataFrame({"query": [1, 1, 2, 2], "item": list("abab"), "click": [1, 0, 1, 0], "position": [1, 2, 1, 2],
                        "p": [1.0, 1e-320, 1.0, 1e-320], "s": [1.0, 0.0, 0.0, 1.0]})
    with pytest.warns(tk.TopkevalWarning, match=r"skewness is about inf.*weight 1/p overflows; check the propensities"):
        res = tk.evaluate(log, ["precision@1"], relevance="click", score="s", position="position", propensity="p")
    assert res.info["ips"]["skewness"] == math.inf and res.summary.iloc[0, 0] == 0.5
