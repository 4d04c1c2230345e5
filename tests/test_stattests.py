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
