"""The one registry of statistical tests: each test declared once, here.

A declaration says what a test is and what it takes; every place that offers or reads a test asks
it: the parameter checks (:data:`topkeval.params.TEST`, ``Results.compare_all``'s and
``Results.queries_needed``'s options), the command line's ``--test`` choices and help, the refusals
(weights, terms of an estimate, an estimated curve), the reports' p-value text (a resampled
p-value's floor ``1 / (1 + n_resamples)``), and the dispatch to the implementation.

The declarations live on the foundation floor (the parameter layer reads their names); the
implementations live with the analyses that run them and are registered from there
(:func:`implement`: ``analysis/compare.py`` registers the paired tests' p-values).

=======================  ======================================================================
``scope``                ``"pair"``: one model against a baseline (``compare``); ``"all"``: every
                         pair at once (``compare_all``); ``"power"``: the sample size of a
                         comparison (``queries_needed``)
``weighted``             the weighted form (query weights, ``weight=``), or None without one
``draws``                what its p-value counts over ``n_resamples`` draws (``"sign flips"``,
                         ``"bootstrap-t"``, ``"permutations"``), or None (no Monte Carlo)
``ranks``                it ranks the per-query differences as outcomes (refused on per-query
                         values that are terms of an estimate: :mod:`topkeval.engine.terms`)
``refits_curve``         it can resample an estimated examination curve's queries with the
                         per-query values (clicks weighted by ``estimate_position_bias``'s curve)
``min_n``                the fewest queries that give a p-value (NaN below)
=======================  ======================================================================

How to add a test: one :class:`StatTest` line in :data:`TESTS`, and its implementation registered
with :func:`implement` where it is computed. Nothing else names it.

>>> PAIRED
('permutation', 't', 'wilcoxon', 'bootstrap')
>>> TESTS["bootstrap"].resampled, TESTS["t"].weighted
(True, None)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StatTest:
    """One statistical test, as every caller sees it (see the module docstring)."""

    name: str
    description: str
    scope: str
    weighted: str | None = None
    draws: str | None = None
    ranks: bool = False
    refits_curve: bool = False
    min_n: int = 2

    @property
    def resampled(self) -> bool:
        """Whether its p-value is a Monte Carlo count (its floor ``1 / (1 + n_resamples)``)."""
        return self.draws is not None


#: Every test, in the order the choices are offered; the first of each scope is its default.
TESTS: dict[str, StatTest] = {t.name: t for t in (
    StatTest("permutation", "sign-flip randomisation of the paired differences (exact up to 20 queries)", "pair",
             weighted="weighted sign flips", draws="sign flips", refits_curve=True),
    StatTest("t", "the paired t-test", "pair"),
    StatTest("wilcoxon", "the Wilcoxon signed-rank test", "pair", ranks=True),
    StatTest("bootstrap", "the studentized paired bootstrap test (bootstrap-t)", "pair",
             weighted="weighted resampling", draws="bootstrap-t", refits_curve=True),
    StatTest("tukey", "Tukey's HSD of the randomized block design (studentized range)", "all"),
    StatTest("randomized_tukey", "the randomized Tukey HSD (each query's values permuted across the models)", "all",
             draws="permutations"),
    StatTest("paired_t", "the power of a two-sided paired t-test (noncentral t)", "power"),
    StatTest("anova", "the power of the F-test of three or more models", "power"),
)}


def names(scope: str, **flags) -> tuple[str, ...]:
    """The tests of a scope (``"pair"``, ``"all"``, ``"power"``), those with the given flags only.

    >>> names("all"), names("pair", ranks=True)
    (('tukey', 'randomized_tukey'), ('wilcoxon',))
    """
    return tuple(t.name for t in TESTS.values()
                 if t.scope == scope and all(getattr(t, k) == v if isinstance(v, str) else bool(getattr(t, k)) == bool(v)
                                             for k, v in flags.items()))


#: the paired tests of ``compare`` (its default first)
PAIRED = names("pair")
#: the tests of every pair at once (``compare_all``; its default first)
ALL_PAIRS = names("all")
#: the power computations of ``queries_needed`` (its default first)
POWER = names("power")


def default(scope: str) -> str:
    """The default test of a scope: its first.

    >>> default("pair"), default("all")
    ('permutation', 'tukey')
    """
    return names(scope)[0]


def choices(tests) -> str:
    """The tests as a sentence's list of choices: ``test='permutation' or test='bootstrap'``.

    >>> choices(names("pair", weighted=True))
    "test='permutation' (weighted sign flips) or test='bootstrap' (weighted resampling)"
    """
    parts = [f"test={n!r}" + (f" ({TESTS[n].weighted})" if TESTS[n].weighted else "") for n in tests]
    return ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1]


_IMPLEMENTATIONS: dict[str, Callable] = {}


def implement(name: str) -> Callable[[Callable], Callable]:
    """Register the implementation of the declared test ``name`` (a decorator, used by the module
    that computes it)."""
    if name not in TESTS:
        raise KeyError(f"{name!r} is not declared in topkeval.stattests.TESTS: declare it there first")

    def register(function: Callable) -> Callable:
        _IMPLEMENTATIONS[name] = function
        return function

    return register


def implementation(name: str) -> Callable:
    """The registered implementation of test ``name``."""
    return _IMPLEMENTATIONS[name]


__all__ = ["ALL_PAIRS", "PAIRED", "POWER", "TESTS", "StatTest", "choices", "default", "implement", "implementation",
           "names"]
