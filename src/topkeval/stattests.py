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
``min_models``           the fewest models it compares (``"anova"``: three; the others two)
=======================  ======================================================================

A power computation (scope ``"power"``) registers its sizing (:func:`implement`, from
``analysis/many.py``): given the per-query values of the models (a queries x models array),
``alpha`` and the power asked for, the variance it reads, its power at ``n`` queries and the
smallest difference it detects; ``queries_needed`` asks it, with no branch of its own.

The confidence intervals (``compare(interval=)``, ``summary_ci(method=)``, the command line's
``--interval``, the report's wording) are a sibling registry, :data:`INTERVALS`: each
:class:`Interval` declares its name, description, the words a sentence names it with, its weighted
form, whether it draws ``n_resamples`` resamples and whether it can refit an estimated examination
curve; its implementations (of a mean, ``"mean"``; of a paired difference, ``"difference"``) are
registered with :func:`implement_interval` from ``analysis/compare.py``.

How to add a test: one :class:`StatTest` line in :data:`TESTS`, and its implementation registered
with :func:`implement` where it is computed. How to add an interval: one :class:`Interval` line in
:data:`INTERVALS`, and its two implementations registered with :func:`implement_interval`.
Nothing else names them.

>>> PAIRED
('permutation', 't', 'wilcoxon', 'bootstrap')
>>> TESTS["bootstrap"].resampled, TESTS["t"].weighted
(True, None)
>>> tuple(INTERVALS), default_interval()
(('bootstrap', 't'), 'bootstrap')
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
    min_models: int = 2

    @property
    def resampled(self) -> bool:
        """Whether its p-value is a Monte Carlo count (its floor ``1 / (1 + n_resamples)``)."""
        return self.draws is not None

    def smallest_p(self, n: int) -> float | None:
        """The smallest two-sided p-value the test can give on ``n`` paired queries, where that is small
        enough to matter: the sign flips of ``n`` queries give ``2 / 2**n`` (0.25 on 3 queries).

        >>> TESTS["permutation"].smallest_p(3), TESTS["t"].smallest_p(3)
        (0.25, None)
        """
        return 2.0 / 2.0 ** n if self.draws == "sign flips" and n < 12 else None


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
    StatTest("anova", "the power of the F-test of three or more models", "power", min_models=3),
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


def choices(tests, key: str = "test") -> str:
    """The tests as a sentence's list of choices: ``test='permutation' or test='bootstrap'`` (with
    ``key="interval"`` or ``"method"``, the intervals of :data:`INTERVALS`).

    >>> choices(names("pair", weighted=True))
    "test='permutation' (weighted sign flips) or test='bootstrap' (weighted resampling)"
    >>> choices(interval_names(weighted=True), key="method")
    "method='bootstrap' (weighted resampling)"
    """
    registry: dict = TESTS if key == "test" else INTERVALS
    parts = [f"{key}={n!r}" + (f" ({registry[n].weighted})" if registry[n].weighted else "") for n in tests]
    return ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1]


@dataclass(frozen=True)
class Interval:
    """One confidence interval, as every caller sees it (see the module docstring): ``label`` is how a
    sentence names it (the report: "the 95% bootstrap percentile interval")."""

    name: str
    description: str
    label: str
    weighted: str | None = None
    draws: bool = False
    refits_curve: bool = False


#: Every interval, in the order the choices are offered; the first is the default.
INTERVALS: dict[str, Interval] = {i.name: i for i in (
    Interval("bootstrap", "the percentile bootstrap interval (of the mean; in compare, of the mean paired difference)",
             "bootstrap percentile interval", weighted="weighted resampling", draws=True, refits_curve=True),
    Interval("t", "Sakai's t interval, mean +- t_{(1 + confidence) / 2}(n - 1) sqrt(V / n)", "t interval"),
)}


def interval_names(**flags) -> tuple[str, ...]:
    """The intervals, those with the given flags only.

    >>> interval_names(), interval_names(refits_curve=True)
    (('bootstrap', 't'), ('bootstrap',))
    """
    return tuple(i.name for i in INTERVALS.values() if all(bool(getattr(i, k)) == bool(v) for k, v in flags.items()))


def default_interval() -> str:
    """The default interval: the first of :data:`INTERVALS`."""
    return next(iter(INTERVALS))


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


#: what an interval is computed of: ``"mean"`` (``summary_ci``: ``(columns, confidence, n_resamples,
#: rng, weights, keys) -> [(low, high)]``) and ``"difference"`` (``compare``: ``(d, draws, alpha) ->
#: (low, high)``, ``draws`` the resampled mean differences or None)
INTERVAL_USES = ("mean", "difference")

_INTERVAL_IMPLEMENTATIONS: dict[tuple[str, str], Callable] = {}


def implement_interval(name: str, use: str) -> Callable[[Callable], Callable]:
    """Register the implementation of the declared interval ``name`` for ``use`` (one of
    :data:`INTERVAL_USES`; a decorator, used by the module that computes it)."""
    if name not in INTERVALS:
        raise KeyError(f"{name!r} is not declared in topkeval.stattests.INTERVALS: declare it there first")
    if use not in INTERVAL_USES:
        raise KeyError(f"an interval is implemented for one of {INTERVAL_USES}, not {use!r}")

    def register(function: Callable) -> Callable:
        _INTERVAL_IMPLEMENTATIONS[(name, use)] = function
        return function

    return register


def interval_implementation(name: str, use: str) -> Callable:
    """The registered implementation of interval ``name`` for ``use``."""
    return _INTERVAL_IMPLEMENTATIONS[(name, use)]


__all__ = ["ALL_PAIRS", "INTERVALS", "INTERVAL_USES", "PAIRED", "POWER", "TESTS", "Interval", "StatTest", "choices",
           "default", "default_interval", "implement", "implement_interval", "implementation", "interval_implementation",
           "interval_names", "names"]
