"""The one registry of statistical tests (topkeval.stattests): every place that offers or reads a
test reads it, and a test's implementation is found through it. The p-values themselves are tested
against their oracles (scipy, exact enumeration, simulations) in tests/test_compare.py and
tests/test_many.py."""

from __future__ import annotations

import numpy as np
import pytest

import topkeval as tk
from topkeval import stattests
from topkeval.analysis import compare, many
from topkeval.cli import build_parser
from topkeval.engine import terms
from topkeval.params import TEST, check_arguments


def test_every_offer_of_a_test_reads_the_registry():
    assert TEST.values == stattests.PAIRED == compare.TESTS == ("permutation", "t", "wilcoxon", "bootstrap")
    assert many.ALL_TESTS == stattests.ALL_PAIRS == ("tukey", "randomized_tukey")
    assert check_arguments(tk.Results.queries_needed, test="anova") == {"test": "anova"}
    for owner, scope in ((tk.Results.compare, "pair"), (tk.Results.compare_all, "all"),
                         (tk.Results.queries_needed, "power")):
        with pytest.raises(tk.TopkevalError, match="one of " + ", ".join(repr(n) for n in stattests.names(scope))):
            check_arguments(owner, test="no_such_test")
    assert terms.RANK_TESTS == ("wilcoxon",)
    action = next(a for a in build_parser()._subparsers._group_actions[0].choices["compare"]._actions
                  if a.dest == "test")
    assert tuple(action.choices) == stattests.PAIRED + stattests.ALL_PAIRS
    assert all(t.description in action.help for t in stattests.TESTS.values() if t.name in action.choices)


def test_every_paired_test_has_its_implementation_registered():
    for name in stattests.PAIRED:
        assert callable(stattests.implementation(name))
    with pytest.raises(KeyError, match="declare it there first"):
        stattests.implement("no_such_test")


def test_flags_select_the_tests_refusals_name():
    assert stattests.names("pair", weighted=True) == ("permutation", "bootstrap")
    assert stattests.names("pair", refits_curve=True) == ("permutation", "bootstrap")
    assert [t for t in stattests.PAIRED if stattests.TESTS[t].resampled] == ["permutation", "bootstrap"]
    assert stattests.default("pair") == "permutation" and stattests.default("power") == "paired_t"


def _weighted_results():
    rng = np.random.default_rng(3)
    n = 12
    rows = {"query": np.repeat(np.arange(n), 4), "relevance": rng.integers(0, 2, 4 * n),
            "a": rng.random(4 * n), "b": rng.random(4 * n), "w": np.repeat(rng.integers(1, 4, n), 4)}
    return tk.evaluate(rows, ["precision@2"], score=["a", "b"], weight="w")


def test_the_weighted_refusal_names_the_tests_with_a_weighted_form():
    res = _weighted_results()
    for name in stattests.PAIRED:
        if stattests.TESTS[name].weighted:
            assert len(res.compare(baseline="a", test=name, n_resamples=199)) == 1
        else:
            with pytest.raises(tk.TopkevalError, match=r"no weighted form; with query weights \(weight=\) use "
                                                       r"test='permutation' \(weighted sign flips\) or "
                                                       r"test='bootstrap' \(weighted resampling\)\."):
                res.compare(baseline="a", test=name)


def test_a_new_test_is_one_declaration_and_one_implementation(monkeypatch):
    """A toy paired test (the sign test), declared and implemented in a few lines, is dispatched by
    compare's p-value through the registry; its p-value is the exact binomial one (scipy's)."""
    from scipy import stats

    toy = stattests.StatTest("sign", "the sign test", "pair")
    monkeypatch.setitem(stattests.TESTS, "sign", toy)
    monkeypatch.setitem(stattests._IMPLEMENTATIONS, "sign", None)

    @stattests.implement("sign")
    def _sign(d, m, b, wd, w, perm_stats, boot_stats, n_resamples, stud):
        return float(stats.binomtest(int((d > 0).sum()), int((d != 0).sum())).pvalue)

    d = np.array([0.3, 0.1, -0.2, 0.4, 0.5, 0.2, 0.0, 0.1])
    base = np.zeros(len(d))
    p = compare._p_value("sign", d, d + base, base, None, None, 0)
    assert p == pytest.approx(stats.binomtest(6, 7).pvalue)
    assert "sign" in stattests.names("pair")


def test_queries_needed_reads_each_power_computation_from_the_registry():
    """The sizing of each power computation is its registered implementation (no branch in
    queries_needed); the smallest number of models comes from its declaration, and the refusal names
    the computations that size fewer."""
    for name in stattests.POWER:
        assert callable(stattests.implementation(name))
    assert [stattests.TESTS[n].min_models for n in stattests.POWER] == [2, 3]
    rng = np.random.default_rng(4)
    rows = {"query": np.repeat(np.arange(40), 5), "relevance": rng.integers(0, 2, 200),
            "a": rng.random(200), "b": rng.random(200)}
    res = tk.evaluate(rows, ["precision@3"], score=["a", "b"])
    with pytest.raises(tk.TopkevalError, match=r"^test='anova' sizes a comparison of three or more models; with two, "
                                               r"use test='paired_t'\.$"):
        res.queries_needed("precision@3", delta=0.1, test="anova")


def test_a_new_power_computation_is_one_declaration_and_one_implementation(monkeypatch):
    """A toy power computation (the paired z-test: power = Phi(sqrt(n) delta / sd - z) +
    Phi(-sqrt(n) delta / sd - z), z the two-sided critical value) declared and implemented in a few
    lines is what queries_needed reads; the oracle is the smallest n found by a loop over the normal
    distribution of the standard library."""
    from statistics import NormalDist

    toy = stattests.StatTest("paired_z", "the power of a two-sided paired z-test", "power")
    monkeypatch.setitem(stattests.TESTS, "paired_z", toy)
    monkeypatch.setitem(stattests._IMPLEMENTATIONS, "paired_z", None)
    normal = NormalDist()

    def z_power(n, delta, variance, alpha):
        shift, crit = np.sqrt(n) * delta / np.sqrt(variance), normal.inv_cdf(1 - alpha / 2)
        return normal.cdf(shift - crit) + normal.cdf(-shift - crit)

    @stattests.implement("paired_z")
    def _sizing(X, alpha, power):
        return float(np.var(X[:, 1] - X[:, 0], ddof=1)), z_power, lambda n: np.nan

    rng = np.random.default_rng(5)
    rows = {"query": np.repeat(np.arange(60), 5), "relevance": rng.integers(0, 2, 300),
            "a": rng.random(300), "b": rng.random(300)}
    res = tk.evaluate(rows, ["precision@3"], score=["a", "b"])
    row = many.queries_needed(res.evaluation, "precision@3", 0.1, test="paired_z").iloc[0]
    per_query = res.per_query
    d = (per_query[per_query["model"] == "b"]["precision@3"].to_numpy()
         - per_query[per_query["model"] == "a"]["precision@3"].to_numpy())
    variance = float(np.var(d, ddof=1))
    assert row["variance"] == pytest.approx(variance, rel=1e-12)
    n = 2
    while z_power(n, 0.1, variance, 0.05) < 0.8:
        n += 1
    assert row["queries_needed"] == n and row["test"] == "paired_z"


def test_every_offer_of_an_interval_reads_the_registry():
    from topkeval.params import INTERVAL

    assert INTERVAL.values == tuple(stattests.INTERVALS) == compare.INTERVALS == ("bootstrap", "t")
    assert stattests.default_interval() == "bootstrap"
    for owner, key in ((tk.Results.compare, "interval"), (tk.Results.summary_ci, "method")):
        with pytest.raises(tk.TopkevalError, match="one of 'bootstrap', 't'"):
            check_arguments(owner, **{key: "no_such_interval"})
    for command in ("compare", "evaluate"):  # compare's interval of each difference, evaluate's of --ci
        action = next(a for a in build_parser()._subparsers._group_actions[0].choices[command]._actions
                      if a.dest == "interval")
        assert tuple(action.choices) == tuple(stattests.INTERVALS)
        assert all(i.description in action.help for i in stattests.INTERVALS.values())
    for name in stattests.INTERVALS:
        for use in stattests.INTERVAL_USES:
            assert callable(stattests.interval_implementation(name, use))
    with pytest.raises(KeyError, match="declare it there first"):
        stattests.implement_interval("no_such_interval", "mean")


def test_the_interval_refusals_name_the_intervals_with_the_flag():
    res = _weighted_results()
    with pytest.raises(tk.TopkevalError, match=r"^interval='t' has no weighted form; with query weights \(weight=\) "
                                               r"use interval='bootstrap' \(weighted resampling\)\.$"):
        res.compare(baseline="a", interval="t")
    with pytest.raises(tk.TopkevalError, match=r"^method='t' has no weighted form; with query weights \(weight=\) "
                                               r"use method='bootstrap' \(weighted resampling\)\.$"):
        res.summary_ci(method="t")


def test_a_new_interval_is_one_declaration_and_its_implementations(monkeypatch):
    """A toy interval (the normal one, mean +- z sd / sqrt(n)) declared and implemented in a few lines
    is what summary_ci and compare compute; the oracle is the standard library's NormalDist on the
    per-query values and their paired differences."""
    from statistics import NormalDist, fmean, stdev

    toy = stattests.Interval("normal", "the normal interval", "normal interval")
    monkeypatch.setitem(stattests.INTERVALS, "normal", toy)
    z = NormalDist().inv_cdf(0.975)

    def normal(values, confidence):
        v = values[~np.isnan(values)]
        half = NormalDist().inv_cdf((1 + confidence) / 2) * float(np.std(v, ddof=1)) / np.sqrt(len(v))
        return float(np.mean(v)) - half, float(np.mean(v)) + half

    monkeypatch.setitem(stattests._INTERVAL_IMPLEMENTATIONS, ("normal", "mean"), None)
    monkeypatch.setitem(stattests._INTERVAL_IMPLEMENTATIONS, ("normal", "difference"), None)
    stattests.implement_interval("normal", "mean")(
        lambda columns, confidence, n_resamples, rng, weights, keys: [normal(v, confidence) for v in columns])
    stattests.implement_interval("normal", "difference")(lambda d, draws, alpha: normal(d, 1 - alpha))

    rng = np.random.default_rng(6)
    rows = {"query": np.repeat(np.arange(30), 4), "relevance": rng.integers(0, 2, 120),
            "a": rng.random(120), "b": rng.random(120)}
    res = tk.evaluate(rows, ["precision@2"], score=["a", "b"])
    pq = res.per_query
    a = pq[pq["model"] == "a"]["precision@2"].tolist()
    b = pq[pq["model"] == "b"]["precision@2"].tolist()
    ci = compare.summary_ci(res.evaluation, 0.95, 99, 0, "normal").set_index("model")
    half = z * stdev(a) / len(a) ** 0.5
    assert ci.loc["a", ["ci_low", "ci_high"]].tolist() == pytest.approx([fmean(a) - half, fmean(a) + half], rel=1e-12)
    row = compare.compare(res.evaluation, baseline="a", test="t", interval="normal", n_resamples=99).iloc[0]
    d = [y - x for x, y in zip(a, b)]
    half = z * stdev(d) / len(d) ** 0.5
    assert [row["ci_low"], row["ci_high"]] == pytest.approx([fmean(d) - half, fmean(d) + half], rel=1e-9, abs=1e-12)
