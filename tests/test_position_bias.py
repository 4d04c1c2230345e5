"""estimate_position_bias and the intervals of evaluations weighted by an estimated curve.

The fit against the conditional likelihood written here from its definition and maximised by a
general-purpose optimizer (scipy), hand computations, the positions a log cannot estimate, the
resampled curve against the fit of a resampled log; and (slow) a position-based click simulator of
this module's own (:func:`arms_log`, :func:`evaluation_log`; the curve known, ``1 / position``): the
curve's bias per position within its standard error, its intervals' coverage, and the coverage and
wrong-way rate of IPS precision@10 and dcg@10 weighted by the estimated curve, at the tutorial's
size (two arms of 2,000 queries of 20 candidates). benchmarks/position_bias_simulation.py runs the
same simulator at full size for the table in docs/how-to/clicks-curve.md.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

import topkeval as tk
from topkeval.analysis.bias import MIN_CLICKS, MIN_QUERIES, query_counts, refit
from topkeval.errors import DataError, ParameterError

# ---------------------------------------------------------------------------------------------
# the simulator: position-based clicks, examination 1 / position

CANDIDATES = 20
ETA = 1.0
#: how strongly each ranker's score follows relevance (the logger: 0.5); A and A2 are alike
RANKERS = {"A": 0.6, "A2": 0.6, "B": 1.5, "B2": 0.8}


def _relevance(rng, queries: int) -> np.ndarray:
    """Each query's share of relevant candidates drawn from Beta(2, 4); then each candidate."""
    return rng.random((queries, CANDIDATES)) < rng.beta(2.0, 4.0, queries)[:, None]


def _scores(rng, relevant: np.ndarray, strength: float) -> np.ndarray:
    return strength * relevant + rng.normal(size=relevant.shape)


def _page(rng, relevant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The logging ranker's positions (every candidate shown) and the clicks: examined with
    probability ``position ** -ETA``, clicked when examined and relevant."""
    rank = np.argsort(np.argsort(-_scores(rng, relevant, 0.5), axis=1), axis=1) + 1
    return rank, relevant & (rng.random(relevant.shape) < rank ** -ETA)


def arms_log(rng, queries: int, prefix: str = "c") -> pd.DataFrame:
    """An A/B test of two variants of the logging ranker on the same queries: one row per
    impression (query, item, position, click, arm)."""
    relevant = _relevance(rng, queries)
    ids = np.repeat(np.char.add(prefix, np.arange(queries).astype(str)), CANDIDATES)
    frames = []
    for arm in range(2):
        rank, click = _page(rng, relevant)
        frames.append(pd.DataFrame({"query": ids, "item": np.tile(np.arange(CANDIDATES), queries),
                                    "position": rank.ravel(), "click": click.ravel().astype(np.int8), "arm": arm}))
    return pd.concat(frames, ignore_index=True)


def evaluation_log(rng, queries: int, prefix: str = "e") -> pd.DataFrame:
    """One page per query by the logging ranker, the truth (``relevant``) and the scores of the
    rankers to evaluate (RANKERS)."""
    relevant = _relevance(rng, queries)
    rank, click = _page(rng, relevant)
    columns = {"query": np.repeat(np.char.add(prefix, np.arange(queries).astype(str)), CANDIDATES),
               "item": np.tile(np.arange(CANDIDATES), queries), "position": rank.ravel(),
               "click": click.ravel().astype(np.int8), "relevant": relevant.ravel().astype(np.int8)}
    return pd.DataFrame(columns | {name: _scores(rng, relevant, s).ravel() for name, s in RANKERS.items()})


def population_truth(queries: int = 400_000, seed: int = 12345) -> dict:
    """Each ranker's precision@10 and dcg@10 over a large sample of queries, computed here with
    numpy (no ties: continuous scores)."""
    rng = np.random.default_rng(seed)
    relevant = _relevance(rng, queries)
    discount = 1 / np.log2(np.arange(2, 12))
    out = {}
    for name, strength in RANKERS.items():
        order = np.argsort(-_scores(rng, relevant, strength), axis=1)[:, :10]
        top = np.take_along_axis(relevant, order, axis=1)
        out[name] = {"precision@10": top.mean(), "dcg@10": (top * discount).sum(axis=1).mean()}
    return out


TRUE_CURVE = {k: k ** -ETA for k in range(1, CANDIDATES + 1)}

# ---------------------------------------------------------------------------------------------
# the fit against its definition


def _small_log(seed: int, counts: bool = False) -> pd.DataFrame:
    """Three arms over 150 queries of 5 candidates; with ``counts``, rows aggregated to impression
    and click counts per (query, item, position)."""
    rng = np.random.default_rng(seed)
    q, n = 60, 5
    rel = rng.random((q, n)) < 0.5
    frames = []
    for _ in range(3):
        pos = np.argsort(np.argsort(-(rel + rng.normal(size=(q, n))), axis=1), axis=1) + 1
        click = rel & (rng.random((q, n)) < pos ** -0.8)
        frames.append(pd.DataFrame({"query": np.repeat(np.arange(q), n), "item": np.tile(np.arange(n), q),
                                    "position": pos.ravel(), "click": click.ravel().astype(int), "shown": 1}))
    log = pd.concat(frames, ignore_index=True)
    if counts:
        log = log.groupby(["query", "item", "position"], as_index=False).agg(click=("click", "sum"),
                                                                            shown=("shown", "sum"))
    return log


def _pairs(log: pd.DataFrame) -> list:
    """Per (query, item) pair shown at two positions or more: its positions, impressions, clicks."""
    by = log.groupby(["query", "item", "position"]).agg(c=("click", "sum"), n=("shown", "sum")).reset_index()
    out = []
    for rows in by.groupby(["query", "item"]).indices.values():
        if len(rows) > 1:
            part = by.iloc[rows]
            out.append((part["position"].to_numpy(), part["n"].to_numpy(float), part["c"].to_numpy(float)))
    return out


def _conditional_loglik(pairs: list, p: dict) -> float:
    """sum over the pairs of sum_j c_j log(n_j p_j / sum_l n_l p_l), written from the definition."""
    table = np.zeros(max(p) + 1)
    table[list(p)] = list(p.values())
    total = 0.0
    for positions, n, c in pairs:
        if c.any():  # a pair without a click adds 0 log(...) = 0
            weight = n * table[positions]
            total += float((c * np.log(weight / weight.sum())).sum())
    return total


@pytest.mark.parametrize("counts", [False, True])
def test_the_curve_maximises_the_conditional_likelihood(counts):
    log = _small_log(3, counts)
    kw = dict(impressions_column="shown") if counts else {}
    got = tk.estimate_position_bias(log, n_resamples=0, **kw).curve["propensity"]
    positions = sorted(log["position"].unique())
    pairs = _pairs(log if counts else log.assign(shown=1))

    def negative(theta):
        return -_conditional_loglik(pairs, dict(zip(positions, np.exp(np.concatenate([[0.0], theta])))))

    best = optimize.minimize(negative, np.zeros(len(positions) - 1), method="BFGS", options={"gtol": 1e-9})
    want = np.exp(np.concatenate([[0.0], best.x]))
    assert got.to_numpy() == pytest.approx(want, rel=1e-5)
    assert _conditional_loglik(pairs, got.to_dict()) >= -best.fun - 1e-9
    # the power form: the same likelihood along p_k = k ** -eta
    power = tk.estimate_position_bias(log, form="power", n_resamples=0, **kw)
    eta = optimize.minimize_scalar(lambda e: -_conditional_loglik(pairs, {k: k ** -e for k in positions}),
                                   bounds=(0, 5), method="bounded", options={"xatol": 1e-10}).x
    assert power.eta == pytest.approx(eta, abs=1e-6)
    assert power.curve["propensity"].to_numpy() == pytest.approx(np.array(positions, float) ** -eta, rel=1e-6)


def test_a_randomised_log_by_hand_and_its_power_form_by_poisson_regression():
    rng = np.random.default_rng(4)
    n = 20_000
    pos = rng.integers(1, 6, n)
    click = (rng.random(n) < 0.3) & (rng.random(n) < pos ** -0.7)
    frame = pd.DataFrame({"query": np.arange(n) // 5, "item": np.arange(n), "position": pos, "click": click})
    bias = tk.estimate_position_bias(frame, method="randomized", n_resamples=0)
    ctr = frame.groupby("position")["click"].mean()
    assert bias.curve["propensity"].to_numpy() == pytest.approx((ctr / ctr.loc[1]).to_numpy(), rel=1e-12)
    by = frame.groupby("position")["click"].agg(["sum", "size"])
    x = np.log(by.index.to_numpy(float))

    def negative(v):  # Poisson log likelihood of the clicks, log mean = log impressions + a - eta log k
        mu = by["size"].to_numpy() * np.exp(v[0] - v[1] * x)
        return -(by["sum"].to_numpy() * np.log(mu) - mu).sum()

    best = optimize.minimize(negative, [np.log(0.2), 0.5], method="Nelder-Mead",
                             options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 5000})
    assert tk.estimate_position_bias(frame, method="randomized", form="power", n_resamples=0).eta == pytest.approx(
        best.x[1], abs=1e-6)


def test_two_positions_by_hand_pairs_without_a_click_included():
    """Pairs shown at 1 and 2: 3 clicks at 1, 1 at 2 (a pair clicked at both counts at both), two
    pairs never clicked: p_2 = 1 / 3 exactly (the ratio of the clicks; the unclicked pairs change
    nothing, and nothing is dropped for having no click at one end)."""
    log = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3, 4, 4, 5, 5],
                        "item": ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"],
                        "position": [1, 2, 2, 1, 1, 2, 1, 2, 2, 1],
                        "click": [1, 0, 0, 1, 1, 1, 0, 0, 0, 0]})
    assert tk.estimate_position_bias(log, n_resamples=0).propensities == {1: 1.0, 2: pytest.approx(1 / 3)}


def test_every_position_shown_gets_a_row_with_its_reason():
    """Positions 1-3 estimable; 4 shown only beside 5 in pairs without... a click at 4 (MLE 0:
    no click there); 6 and 7 linked only to each other; 8 never shown for an item shown elsewhere."""
    rows = []
    for q in range(40):  # 1, 2 and 3 compared, with clicks everywhere
        rows += [(q, "x", 1, 1), (q, "x", 2, q % 2), (q, "y", 2, 1), (q, "y", 3, q % 3 == 0), (q, "z", 1, 1),
                 (q, "z", 3, q % 4 == 0)]
        rows += [(q, "w", 3, 1), (q, "w", 4, 0)]  # 4: never clicked
        rows += [(q, "u", 6, 1), (q, "u", 7, q % 2)]  # 6 and 7: only with each other
        rows += [(q, "v", 8, 1)]  # 8: shown once per pair
    log = pd.DataFrame(rows, columns=["query", "item", "position", "click"])
    bias = tk.estimate_position_bias(log, n_resamples=0)
    curve = bias.curve
    assert curve.index.tolist() == [1, 2, 3, 4, 6, 7, 8]
    assert curve.loc[[1, 2, 3], "propensity"].notna().all() and (curve.loc[[1, 2, 3], "note"] == "").all()
    assert np.isnan(curve.loc[4, "propensity"]) and "no click here" in curve.loc[4, "note"]
    assert curve.loc[[6, 7], "propensity"].isna().all() and curve.loc[6, "note"].startswith("not linked to position 1")
    assert np.isnan(curve.loc[8, "propensity"]) and "nothing to compare it with" in curve.loc[8, "note"]
    assert set(bias.propensities) == {1, 2, 3}
    # a click at a position the curve cannot place is refused with the curve's reason
    page = pd.DataFrame({"query": [1, 1], "item": ["a", "b"], "click": [0, 1], "position": [1, 6], "s": [0.2, 0.1]})
    with pytest.raises(DataError, match="position 6.*not linked to position 1"):
        tk.evaluate(page, ["precision@1"], relevance="click", score="s", position="position", propensity=bias)


def test_one_query_gets_no_interval_and_is_told_why():
    """Issue 35: one query of 38 clicks gave zero-width intervals (every resample is that query)."""
    log = pd.DataFrame({"query": 1, "item": ["a", "a", "b", "b"], "position": [1, 2, 1, 2],
                        "shown": [30, 30, 30, 30], "click": [12, 7, 11, 8]})
    with pytest.warns(tk.TopkevalWarning, match="no intervals: 1 query of this log has clicks"):
        bias = tk.estimate_position_bias(log, impressions_column="shown")
    assert bias.curve["propensity"].tolist() == [1.0, pytest.approx(15 / 23)]
    assert bias.curve[["low", "high"]].isna().all().all()
    assert (bias.curve["note"] == f"no interval: fewer than {MIN_QUERIES} queries inform the curve").all()


def test_a_position_with_few_clicks_gets_no_interval():
    rng = np.random.default_rng(8)
    log = arms_log(rng, 300)
    bias = tk.estimate_position_bias(log, n_resamples=50)
    few = bias.curve["clicks"] < MIN_CLICKS
    assert few.any() and (~few).sum() >= 5
    assert bias.curve.loc[few, ["low", "high"]].isna().all().all()
    assert bias.curve.loc[few, "note"].str.contains("too few for a bootstrap").all()
    enough = bias.curve[~few].iloc[1:]
    assert ((enough["low"] < enough["propensity"]) & (enough["propensity"] < enough["high"])).all()


def test_the_resampled_curve_is_the_fit_of_the_resampled_log():
    """PositionBias.resampled(counts) against estimate_position_bias of the log whose queries are
    repeated as the counts say (each copy a query of its own)."""
    log = _small_log(5)
    bias = tk.estimate_position_bias(log, n_resamples=0)
    rng = np.random.default_rng(2)
    [counts] = list(query_counts(rng, 3, len(bias.queries)))
    for row in counts:
        copies = [log[log["query"] == q].assign(query=f"{q}-{c}")
                  for q, k in zip(bias.queries, row.astype(int)) for c in range(k)]
        again = tk.estimate_position_bias(pd.concat(copies), n_resamples=0).curve["propensity"]
        got = refit(bias, row[None, :])[0]
        assert got == pytest.approx(np.minimum(again.reindex(bias.curve.index).to_numpy(), 1.0), rel=1e-7)


def test_the_curve_pickles_and_is_refitted_after():
    bias = tk.estimate_position_bias(_small_log(6), n_resamples=20)
    again = pickle.loads(pickle.dumps(bias))
    pd.testing.assert_frame_equal(again.curve, bias.curve)
    counts = np.ones((1, len(bias.queries)))
    assert refit(again, counts) == pytest.approx(refit(bias, counts))


# ---------------------------------------------------------------------------------------------
# evaluations weighted by an estimated curve


@pytest.fixture(scope="module")
def weighted():
    rng = np.random.default_rng(21)
    bias = tk.estimate_position_bias(arms_log(rng, 600), n_resamples=0)
    log = evaluation_log(rng, 600)
    common = dict(relevance="click", score=["A", "B"], item="item", position="position")
    estimated = tk.evaluate(log, ["precision@5", "dcg@5"], propensity=bias, **common)
    known = tk.evaluate(log, ["precision@5", "dcg@5"], propensity=bias.propensities, **common)
    return bias, log, estimated, known


def test_each_query_value_is_its_position_sums_weighed(weighted):
    from topkeval.analysis.curve_ci import position_sums

    bias, log, estimated, _ = weighted
    positions, weights, sums = position_sums(estimated.evaluation)
    assert weights == pytest.approx([1 / min(bias.propensities[int(j)], 1.0) for j in positions])
    for (model, metric), S in sums.items():
        values = estimated.per_query[estimated.per_query["model"] == model].set_index("query")[metric]
        assert S.to_numpy() @ weights == pytest.approx(values.loc[S.index].to_numpy(), abs=1e-12)


def test_a_known_curve_keeps_the_plain_intervals(weighted):
    _, _, estimated, known = weighted
    assert known.evaluation.estimated_curve is None and estimated.evaluation.estimated_curve is not None
    plain = tk.Results.from_per_query(known.per_query)
    pd.testing.assert_frame_equal(known.summary_ci(n_resamples=500), plain.summary_ci(n_resamples=500))
    # a click log's per-query values are terms of the IPS estimate: no wins, ties or losses (engine/terms.py)
    pd.testing.assert_frame_equal(known.compare(n_resamples=500),
                                  plain.compare(n_resamples=500).drop(columns=["wins", "ties", "losses"]))


def test_an_estimated_curve_widens_every_interval(weighted):
    _, _, estimated, known = weighted
    wide, narrow = estimated.summary_ci(n_resamples=1000), known.summary_ci(n_resamples=1000)
    assert (wide["mean"] == narrow["mean"]).all()
    assert ((wide["ci_high"] - wide["ci_low"]) > 1.3 * (narrow["ci_high"] - narrow["ci_low"])).all()
    row = estimated.compare(n_resamples=1000).iloc[0]
    assert row["ci_low"] < row["delta"] < row["ci_high"] and np.isnan(row["detectable_delta"])
    # B is much better than A: found so by the permutation test, whose null adds the curve's own deviation
    assert row["verdict"] == "better" and row["p_value"] < 0.01


def test_quantiles_of_resamples_are_numpy_s_and_take_infinite_draws_as_their_limit():
    from topkeval.analysis.curve_ci import quantiles

    rng = np.random.default_rng(3)
    probs = [0.0, 0.025, 0.3, 0.5, 0.975, 1.0]
    for n in (1, 2, 7, 1000):
        x = rng.normal(size=n)
        assert quantiles(x, probs) == pytest.approx(np.quantile(x, probs), abs=1e-15)
    x = np.array([-np.inf, 1.0, 2.0, 3.0, np.inf])  # order statistics at 0, 1, 2, 3, 4 (p = 0.25 each)
    assert quantiles(x, [0.1, 0.25, 0.5, 0.6, 0.9]) == [-np.inf, 1.0, 2.0, 2.4, np.inf]
    assert np.isnan(quantiles(np.array([-np.inf, np.inf]), [0.5])[0])


def test_pooled_ratios_with_an_estimated_curve_are_refused_with_what_to_use(weighted):
    """A ratio pooled over the queries has no interval that carries the curve (measured: the ratio
    bootstrap with the curve refitted gave no interval or bounds of recall above 1 in many simulated
    logs, docs/how-to/clicks.md); its estimate stands, and the sums beside it are decided apart."""
    bias, log, _, _ = weighted
    common = dict(relevance="click", score=["A", "B"], item="item", position="position")
    res = tk.evaluate(log, ["recall_micro@5", "f1_micro@5", "precision@5"], propensity=bias, **common)
    known = tk.evaluate(log, ["recall_micro@5"], propensity=bias.propensities, **common)
    assert res.summary["recall_micro@5"].equals(known.summary["recall_micro@5"])
    for call in (lambda: res.summary_ci(n_resamples=100), lambda: res.compare(n_resamples=100)):
        with pytest.raises(ParameterError, match=r"^recall_micro@5, f1_micro@5: no interval carries an estimated "
                                                 r"curve's uncertainty for a ratio pooled .* tp@k and precision@k "
                                                 r".*propensity=bias.propensities"):
            call()


@pytest.mark.parametrize("call, words", [
    (lambda r: r.compare(test="t"), "test='t' takes the per-query differences"),
    (lambda r: r.compare(test="wilcoxon"), "test='wilcoxon'"),
    (lambda r: r.compare_all(), "compare_all takes the per-query values as the only source of noise"),
    (lambda r: r.anova("precision@5"), "anova takes"),
    (lambda r: r.queries_needed("precision@5", delta=0.01), "queries_needed takes")])
def test_what_would_leave_the_curve_out_is_refused(weighted, call, words):
    _, _, estimated, _ = weighted
    with pytest.raises(ParameterError, match=words) as caught:
        call(estimated)
    assert "propensity=bias.propensities" in str(caught.value)


def test_one_log_for_curve_and_evaluation_is_resampled_query_by_query():
    """The same query ids in the curve's log and the evaluated one: each resample draws a query once
    for both (its clicks move the curve and the metric together); different ids: apart, each log's
    queries resampled to its own size."""
    from topkeval.analysis.curve_ci import counts

    curve_ids, same = pd.Index(["q1", "q2", "q3", "q4"]), pd.Index(["q3", "q9", "q1"])
    for c, e in counts(curve_ids, same, 500, 0):
        assert (e[:, 0] == c[:, 2]).all() and (e[:, 2] == c[:, 0]).all()  # q3 and q1: one draw for both
        totals = c.sum(axis=1) + e[:, 1]  # the union of 5 queries, 5 drawn per resample
        assert (totals == 5).all()
    apart = pd.Index(["e1", "e2", "e3"])
    for c, e in counts(curve_ids, apart, 500, 0):
        assert (c.sum(axis=1) == 4).all() and (e.sum(axis=1) == 3).all()
        assert abs(np.corrcoef(c[:, 0], e[:, 0])[0, 1]) < 0.15


# ---------------------------------------------------------------------------------------------
# simulation (slow): the tutorial's size


@pytest.mark.slow
def test_the_estimated_curve_and_its_intervals_at_the_tutorials_size():
    """Two arms of 2,000 queries of 20 candidates estimate the curve; a third log of 2,000 queries is
    evaluated with it. Over repeated logs: the curve's bias at every position within half its
    standard error (the old solver, which dropped position pairs without clicks at one end, was +31%
    at position 20, 1.8 standard errors); its intervals cover; IPS precision@10 and dcg@10 intervals
    weighted by the estimated curve cover the population's truth in at least 90% of logs; a truly
    better ranker (B2) is never declared significantly worse, and two alike rankers (A, A2) differ
    significantly at about the test's level."""
    truth = population_truth()
    reps = 40
    estimates, covered_curve, covered, worse, null_rejected = [], [], [], 0, 0
    true_p = np.array(list(TRUE_CURVE.values()))
    for rep in range(reps):
        rng = np.random.default_rng(500 + rep)
        bias = tk.estimate_position_bias(arms_log(rng, 2000), n_resamples=200, seed=rep)
        curve = bias.curve.reindex(range(1, CANDIDATES + 1))
        estimates.append(curve["propensity"].to_numpy())
        covered_curve.append(((curve["low"] <= true_p) & (true_p <= curve["high"])).to_numpy()[1:])
        res = tk.evaluate(evaluation_log(rng, 2000), ["precision@10", "dcg@10"], relevance="click",
                          score=list(RANKERS), item="item", position="position", propensity=bias)
        ci = res.summary_ci(n_resamples=300, seed=rep)
        covered += [lo <= truth[m][metric] <= hi for m, metric, lo, hi in
                    ci[["model", "metric", "ci_low", "ci_high"]].itertuples(index=False)]
        table = res.compare(baseline="A", n_resamples=300, seed=rep, correction=None).set_index(["model", "metric"])
        worse += int((table.loc["B2", "verdict"] == "worse").any())
        null_rejected += int(table.loc["A2", "significant"].iloc[0])
    estimates = np.array(estimates)
    bias_per_position = estimates.mean(axis=0) - true_p
    spread = estimates.std(axis=0, ddof=1)
    assert (np.abs(bias_per_position[1:]) < 0.5 * spread[1:]).all(), (bias_per_position / np.maximum(spread, 1e-9))
    assert np.mean(covered_curve) >= 0.9, np.mean(covered_curve, axis=0)
    assert np.mean(covered) >= 0.9, np.mean(covered)
    assert worse <= 1  # at most 2.5% of the logs
    assert null_rejected <= reps * 0.05 + 3 * np.sqrt(reps * 0.05 * 0.95), null_rejected


def test_curve_intervals_are_the_basic_bootstrap_of_the_refitted_curves():
    """low, high = exp(2 log p - q_high), exp(2 log p - q_low), q the percentiles of the log of the
    curve fitted again on each resample of the queries (the same draws, recomputed here)."""
    log = arms_log(np.random.default_rng(9), 400)
    bias = tk.estimate_position_bias(log, n_resamples=60, seed=3, confidence=0.9)
    draws = np.vstack([refit(bias, c) for c in query_counts(np.random.default_rng(3), 60, len(bias.queries))])
    curve = bias.curve
    given = curve["low"].notna().to_numpy()
    assert given[1:].sum() >= 8
    logs = np.log(draws[:, given])
    centre = np.log(curve["propensity"].to_numpy()[given])
    assert curve["low"].to_numpy()[given] == pytest.approx(np.exp(2 * centre - np.quantile(logs, 0.95, axis=0)))
    assert curve["high"].to_numpy()[given] == pytest.approx(np.exp(2 * centre - np.quantile(logs, 0.05, axis=0)))


def test_estimated_curve_intervals_are_basic_intervals_of_the_resampled_means(weighted):
    from topkeval.analysis import curve_ci

    _, _, estimated, _ = weighted
    ev = estimated.evaluation
    _, _, sums = curve_ci.position_sums(ev)
    pq = ev.per_query[ev.per_query["model"] == "B"]
    q = pd.Index(pq["query"])
    [means], _ = curve_ci.resamples(ev, [(q, sums[("B", "dcg@5")].loc[q].to_numpy(), None)], 400, 7)
    row = estimated.summary_ci(n_resamples=400, seed=7).set_index(["model", "metric"]).loc[("B", "dcg@5")]
    assert row["mean"] == pytest.approx(pq["dcg@5"].mean())
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(2 * row["mean"] - np.quantile(means, [0.975, 0.025]))


def test_the_bootstrap_test_with_an_estimated_curve_is_two_sided(weighted):
    """p = (1 + #{|delta* - delta| >= |delta|}) / (1 + N) over the joint resamples of the paired
    differences (recomputed here from the resampled means of S_A2 - S_A; A and A2 are alike, so p
    is far from its floor and the two tails differ)."""
    from topkeval.analysis import curve_ci

    bias, log, _, _ = weighted
    res = tk.evaluate(log, ["precision@5"], relevance="click", score=["A", "A2"], item="item", position="position",
                      propensity=bias)
    ev = res.evaluation
    _, _, sums = curve_ci.position_sums(ev)
    pq = ev.per_query.pivot(index="query", columns="model", values="precision@5")
    q = pd.Index(pq.index)
    S = sums[("A2", "precision@5")].loc[q].to_numpy() - sums[("A", "precision@5")].loc[q].to_numpy()
    [means], _ = curve_ci.resamples(ev, [(q, S, None)], 2000, 5)
    delta = float((pq["A2"] - pq["A"]).mean())
    want = (1 + np.sum(np.abs(means - delta) >= abs(delta) * (1 - 1e-12))) / 2001
    one_tail = (1 + np.sum((means - delta) * np.sign(delta) >= abs(delta) * (1 - 1e-12))) / 2001
    row = res.compare(test="bootstrap", n_resamples=2000, seed=5).iloc[0]
    assert row["delta"] == pytest.approx(delta)
    assert row["p_value"] == pytest.approx(want)
    assert 0.05 < want and want - one_tail > 0.02


def test_a_clip_caps_the_weights_of_the_refitted_curves(weighted):
    """A clip above every weight of the estimated curve caps no click of the estimate (so decisions are
    not refused for clipping), but it still caps the weights of the resampled curves that fall lower:
    the intervals are narrower than without it; a clip that caps a click refuses the decision."""
    bias, log, _, _ = weighted
    common = dict(relevance="click", score="B", item="item", position="position", propensity=bias)
    clicked = log[log["click"] > 0]["position"].unique()
    top = max(1 / min(bias.propensities[int(j)], 1.0) for j in clicked)
    width = {}
    for clip in (None, top * 1.0001):
        ci = tk.evaluate(log, ["dcg@5"], clip=clip, **common).summary_ci(n_resamples=2000).iloc[0]
        width[clip] = ci["ci_high"] - ci["ci_low"]
    assert width[top * 1.0001] < 0.97 * width[None]
    with pytest.warns(tk.TopkevalWarning, match="capped"):
        capped = tk.evaluate(log, ["dcg@5"], clip=1.0, **common)
    with pytest.raises(tk.ParameterError, match="summary_ci refuses these estimates: clip=1"):
        capped.summary_ci(n_resamples=200)


def test_a_resample_without_a_click_at_a_position_gives_it_zero_or_nothing():
    """A resample whose queries have no click at position 5 (on pairs shown elsewhere): its curve is 0
    there (the maximum of the likelihood: no finite weight), the others estimated; one without a
    click at position 1 has no curve at all (nothing to anchor it)."""
    log = arms_log(np.random.default_rng(12), 300)
    bias = tk.estimate_position_bias(log, n_resamples=0)
    ids = bias.queries

    def without_clicks_at(position):
        clicked = log[(log["position"] == position) & (log["click"] > 0)]["query"].unique()
        return (~ids.isin(clicked)).astype(float)[None, :]

    at5 = refit(bias, without_clicks_at(5))[0]
    assert at5[4] == 0.0 and np.isfinite(at5).all() and (at5[np.arange(20) != 4] > 0).all()
    assert np.isnan(refit(bias, without_clicks_at(1))[0]).all()


def test_the_report_says_the_curve_was_estimated_and_leaves_out_what_would_ignore_it(weighted, tmp_path):
    bias, log, _, _ = weighted
    res = tk.evaluate(log, ["precision@5"], relevance="click", score=["A", "B", "B2"], item="item",
                      position="position", propensity=bias)
    page = (tmp_path / "r.html")
    res.report(page, n_resamples=300, curves=False)
    text = page.read_text(encoding="utf-8")
    assert "weighed by an examination curve estimated by estimate_position_bias" in text
    assert "compare_all takes the per-query values as the only source of noise" in text  # the pairs section's note


def test_segments_and_query_weights_with_an_estimated_curve(weighted):
    """Each segment's interval resamples the curve too, and a weighted mean's interval is that of the
    ratio estimator (resampled sum c u v / sum c u) under each resample's curve."""
    bias, log, _, _ = weighted
    log = log.assign(half=np.where(log["query"].str[1:].astype(int) % 2 == 0, "even", "odd"),
                     traffic=1.0 + (log["query"].str[1:].astype(int) % 3))
    res = tk.evaluate(log, ["precision@5"], relevance="click", score=["A", "B"], item="item", position="position",
                      propensity=bias, by="half", weight="traffic")
    ci = res.summary_ci(n_resamples=400)
    assert set(ci["half"]) == {"even", "odd", "(all)"}
    assert ((ci["ci_low"] < ci["mean"]) & (ci["mean"] < ci["ci_high"])).all()
    table = res.compare(n_resamples=400)
    assert len(table) == 3 and (table["ci_low"] < table["delta"]).all() and (table["delta"] < table["ci_high"]).all()
    overall = ci[ci["half"] == "(all)"].set_index("model")
    assert overall.loc["B", "mean"] == pytest.approx(res.summary.loc["B", "precision@5"])
