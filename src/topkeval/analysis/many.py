"""Many models at once: the two-way ANOVA, every pair compared with the family-wise error
controlled, a compact letter display, and how many queries a comparison needs.

The design is the randomized block design of IR evaluation (Sakai, *Statistical Reform in
Information Retrieval*, 2016; Carterette 2012): ``m`` models (treatments) by ``n`` queries
(blocks), one value per cell, over the queries where every model has a value. With ``x_ij`` the
value of model j on query i, ``x_i.``, ``x_.j`` and ``x_..`` the query, model and grand means:

* ``SS_models = n sum_j (x_.j - x_..)^2`` (m - 1 df), ``SS_queries = m sum_i (x_i. - x_..)^2``
  (n - 1 df), ``SS_total = sum_ij (x_ij - x_..)^2`` (nm - 1 df), ``SS_residual`` the rest
  ((m - 1)(n - 1) df); ``V_E = SS_residual / ((m - 1)(n - 1))`` is the residual variance and
  ``F = MS / V_E``.
* Tukey's HSD: ``q = |x_.a - x_.b| / sqrt(V_E / n)``, ``p = P(Q > q)`` for the studentized range
  Q of m means with (m - 1)(n - 1) df (``scipy.stats.studentized_range``); the simultaneous
  interval is ``x_.a - x_.b +- q_{1-alpha} sqrt(V_E / n)``. scipy integrates the studentized range
  numerically, to about 1e-12: below :data:`P_FLOOR` its value is an artefact (6.7e-13 however far
  in the tail, or 0), so such a p is given as :data:`P_FLOOR`, an upper bound, and printed
  ``< 1e-12``.
* The randomized Tukey HSD: each query's m values are permuted across the models (all
  ``(m!)^n`` orders when at most ``n_resamples``, otherwise ``n_resamples`` random ones); for each,
  the largest difference between two model means; ``p`` of a pair is the share of those at least
  its observed difference, ``(1 + #) / (1 + B)`` for random permutations; the interval is the
  difference +- the ``confidence`` quantile of that largest difference.
* Effect size ``es_e`` (Sakai's ``ES_E``): ``(x_.a - x_.b) / sqrt(V_E)``, the difference in units of the
  residual standard deviation of the two-way ANOVA, one scale for every pair of the table. Not
  :meth:`~topkeval.Results.compare`'s ``effect_size`` (Cohen's d of one pair's differences, ``mean(d) / sd(d)``).
* Compact letter display (Piepho 2004, insert-absorb): models sharing a letter are not
  significantly different; letters run from the best mean.
* Topic set size (Sakai 2016, ch. 6): the fewest queries with which a two-sided paired t-test at
  ``alpha`` detects a difference ``delta`` with probability ``power`` (noncentral t, the variance of
  the per-query differences: of the two models, or ``2 V_E`` for more), or with which the ANOVA's
  F-test detects a range ``delta`` between the best and the worst model (noncentral F,
  ``lambda = n delta^2 / (2 V_E)``); and the smallest such difference at the current size.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math

import numpy as np
import pandas as pd

from .. import stattests
from ..engine.aggregate import unscale, value_shift
from ..engine.unbiased import check_decision
from ..errors import ParameterError, plural
from . import curve_ci
from .segments import groups

ALL_TESTS = stattests.ALL_PAIRS

#: the smallest Tukey p-value told apart: scipy's integral of the studentized range is good to
#: about 1e-12 (further in the tail it gives 6.72e-13 whatever q, or 0). A smaller p is given as
#: this number, an upper bound (``frame.attrs["p_floor"]``), and printed "< 1e-12".
P_FLOOR = 1e-12


def _label(results, metric: str | None) -> list[str]:
    if metric is None:
        return list(results.summary.columns)
    return list(dict.fromkeys(results.label(m) for m in ([metric] if isinstance(metric, str) else metric)))


def _blocks(results, metric: str, per_query: pd.DataFrame) -> tuple[np.ndarray, list]:
    """The (queries x models) values of ``metric``, over the queries where every model has one."""
    present = set(per_query["model"].unique())
    models = [m for m in results.models if m in present]
    q_codes, queries = pd.factorize(per_query[results.query_name], use_na_sentinel=False)
    m_codes = pd.Index(models).get_indexer(per_query["model"])
    X = np.full((len(queries), len(models)), np.nan)
    X[q_codes, m_codes] = per_query[metric].to_numpy(np.float64)
    return X[~np.isnan(X).any(axis=1)], models


def _check(results, models: list, what: str) -> None:
    """What no segment can fix: weights, fewer than two models."""
    if results.weight:
        why = ("its t-test and ANOVA count every query once" if what == "queries_needed"
               else "the ANOVA counts every query once")
        raise ParameterError(f"{what} has no weighted form ({why}): evaluate without weight=, or compare each model "
                             "with a baseline (compare(); on the command line, without --all), which weighs queries.")
    if len(models) < 2:
        raise ParameterError(f"{what} compares models: these results have {plural(len(models), 'model')}; evaluate "
                             "several score columns (score=[...]).")


def _too_few(X: np.ndarray, metric: str, key: dict) -> str | None:
    """Why a (segment, metric) cannot be analysed (fewer than 2 complete queries), or None."""
    if len(X) >= 2:
        return None
    where = " in segment " + ", ".join(f"{k}={v!r}" for k, v in key.items()) if key else ""
    return (f"needs at least 2 queries where every model has a value of {metric}{where}; there "
            f"{'is' if len(X) == 1 else 'are'} {len(X)}")


def _whole(key: dict) -> bool:
    """The rows over every query: no segment, or the (all) rows of a breakdown."""
    from .segments import ALL

    return not key or all(v == ALL for v in key.values())


def _segments(results):
    return groups(results) if results.by else [({}, results.per_query)]


def anova_table(X: np.ndarray) -> pd.DataFrame:
    """The two-way ANOVA without replication of a (queries x models) matrix (see the module docstring)."""
    from scipy import stats

    n, m = X.shape
    grand = X.mean()
    model_means, query_means = X.mean(axis=0), X.mean(axis=1)
    ss_models = n * float(((model_means - grand) ** 2).sum())
    ss_queries = m * float(((query_means - grand) ** 2).sum())
    ss_total = float(((X - grand) ** 2).sum())
    # the residuals themselves, not a difference of sums (which loses digits under large query effects)
    ss_resid = float(((X - query_means[:, None] - model_means[None, :] + grand) ** 2).sum())
    if ss_resid <= X.size * (8 * np.finfo(np.float64).eps * float(np.abs(X).max())) ** 2:
        ss_resid = 0.0  # the rounding of the means, not a residual: the models differ by constants (or not at all)
    df_m, df_q, df_e = m - 1, n - 1, (m - 1) * (n - 1)
    v_e = ss_resid / df_e

    def f_test(ss: float, df: int) -> tuple[float, float]:
        if v_e > 0:
            f = (ss / df) / v_e
            return f, float(stats.f.sf(f, df, df_e))
        # no residual: any effect is exact (F infinite, p 0), no effect is none (F 0, p 1)
        return (math.inf, 0.0) if ss > 0 else (0.0, 1.0)

    (f_m, p_m), (f_q, p_q) = f_test(ss_models, df_m), f_test(ss_queries, df_q)
    return pd.DataFrame({"sum_sq": [ss_models, ss_queries, ss_resid, ss_total], "df": [df_m, df_q, df_e, n * m - 1],
                         "mean_sq": [ss_models / df_m, ss_queries / df_q, v_e, ss_total / (n * m - 1)],
                         "F": [f_m, f_q, math.nan, math.nan], "p_value": [p_m, p_q, math.nan, math.nan]},
                        index=pd.Index(["models", "queries", "residual", "total"], name="source"))


def anova(results, metric: str) -> pd.DataFrame:
    """See :meth:`topkeval.Results.anova`."""
    results.require_rows("anova")
    # click estimates clipped or too skewed: no interval, no verdict
    check_decision(results.info, "anova", _label(results, metric))
    curve_ci.refuse(results, "anova")
    label = _label(results, metric)[0]
    out = []
    for key, per_query in _segments(results):
        X, models = _blocks(results, label, per_query)
        _check(results, models, "anova")
        reason = _too_few(X, label, key)
        if reason and _whole(key):
            raise ParameterError(f"anova {reason}.")
        shift = value_shift(X.ravel())  # values of 1e300 divided by a power of 2 (exact): F and p as they are
        table = anova_table(np.ldexp(X, -shift)) if not reason else None
        if shift and table is not None:  # the sums of squares scaled back: inf beyond the largest float
            for column in ("sum_sq", "mean_sq"):
                table[column] = unscale(table[column], 2 * shift)
        table = table.reset_index() if table is not None else pd.DataFrame(
            {"source": ["models", "queries", "residual", "total"], "sum_sq": math.nan, "df": math.nan,
             "mean_sq": math.nan, "F": math.nan, "p_value": math.nan})
        for i, (name, value) in enumerate(key.items()):
            table.insert(i, name, value)
        table.insert(len(key), "metric", label)
        table["queries"] = len(X)
        out.append(table)
    return pd.concat(out, ignore_index=True)


def compare_all(results, metric=None, *, test: str = "tukey", confidence: float = 0.95, n_resamples: int = 10_000,
                seed: int | None = 0) -> pd.DataFrame:
    """See :meth:`topkeval.Results.compare_all`."""
    results.require_rows("compare_all")
    # click estimates clipped or too skewed: no interval, no verdict
    check_decision(results.info, "compare_all", _label(results, metric))
    curve_ci.refuse(results, "compare_all")
    rng = np.random.default_rng(seed)
    rows = []
    for key, per_query in _segments(results):
        for label in _label(results, metric):
            X, models = _blocks(results, label, per_query)
            _check(results, models, "compare_all")
            n, m = X.shape
            pairs = list(itertools.combinations(range(m), 2))
            reason = _too_few(X, label, key)
            if reason:
                if _whole(key):
                    raise ParameterError(f"compare_all {reason}.")
                rows += [{**key, "metric": label, "model_a": models[a], "model_b": models[b], "mean_a": math.nan,
                          "mean_b": math.nan, "delta": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                          "p_value": math.nan, "significant": False, "es_e": math.nan, "letters_a": "",
                          "letters_b": "", "n_queries": n} for a, b in pairs]
                continue
            shift = value_shift(X.ravel())  # values of 1e300 divided by a power of 2 (exact), the means scaled back
            X = np.ldexp(X, -shift)
            v_e = float(anova_table(X).loc["residual", "mean_sq"])
            means = X.mean(axis=0)
            diffs = np.array([means[a] - means[b] for a, b in pairs])
            studentized = not stattests.TESTS[test].resampled  # Tukey's HSD; else the randomized one
            if studentized and not v_e > 0:
                # no residual: every query moves every model alike, and each difference is exact
                p = np.where(np.abs(diffs) > 0, 0.0, 1.0)
                halves = np.zeros(len(pairs))
            elif studentized:
                se = math.sqrt(v_e / n)
                p = np.maximum(_studentized_sf(np.abs(diffs) / se, m, (m - 1) * (n - 1)), P_FLOOR)
                halves = np.full(len(pairs), _q_critical(float(confidence), m, (m - 1) * (n - 1)) * se)
            else:
                p, halves = _randomized(X, np.abs(diffs), confidence, n_resamples, rng)
            p = np.minimum(np.asarray(p, np.float64), 1.0)
            significant = p < 1 - confidence
            letters = letter_display(models, means, {pairs[i] for i in range(len(pairs)) if significant[i]})
            for i, (a, b) in enumerate(pairs):
                mean_a, mean_b, delta, low, high = unscale([means[a], means[b], diffs[i], diffs[i] - halves[i],
                                                            diffs[i] + halves[i]], shift)
                rows.append({**key, "metric": label, "model_a": models[a], "model_b": models[b],
                             "mean_a": mean_a, "mean_b": mean_b, "delta": delta, "ci_low": low, "ci_high": high,
                             "p_value": float(p[i]), "significant": bool(significant[i]),
                             "es_e": float(diffs[i] / math.sqrt(v_e)) if v_e > 0 else math.nan,
                             "letters_a": letters[models[a]], "letters_b": letters[models[b]], "n_queries": n})
    frame = pd.DataFrame(rows)
    frame.attrs.update(test=test, confidence=confidence, n_resamples=n_resamples,
                       p_floor=1.0 / (1 + n_resamples) if stattests.TESTS[test].resampled else P_FLOOR)
    return frame


@functools.lru_cache(maxsize=256)
def _q_critical(confidence: float, m: int, df: int) -> float:
    """The ``confidence`` quantile of the studentized range of m means with df degrees of freedom
    (scipy integrates it numerically: a tenth of a second, kept)."""
    from scipy import stats

    with _quiet_integration():
        return float(stats.studentized_range.ppf(confidence, m, df))


def _studentized_sf(q: np.ndarray, m: int, df: int) -> np.ndarray:
    """P(Q > q) of the studentized range of m means with df degrees of freedom, for each q."""
    from scipy import stats

    with _quiet_integration():
        return np.asarray(stats.studentized_range.sf(q, m, df), np.float64)


@contextlib.contextmanager
def _quiet_integration():
    """scipy's quadrature warns that the studentized range's integral 'is probably divergent' far in
    its tail, where its value (p near 1 or 0) is still right: silenced there only."""
    import warnings

    from scipy.integrate import IntegrationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        yield


def _randomized(X: np.ndarray, observed: np.ndarray, confidence: float, n_resamples: int, rng):
    """p-values of the randomized Tukey HSD and the half-width of its simultaneous intervals."""
    n, m = X.shape
    Xc = X - X.mean(axis=1, keepdims=True)  # a query's level moves every model alike: out
    limit = min(n_resamples, _EXACT_MAX_ORDERS)
    total = math.factorial(m) ** n if n * math.log(math.factorial(m)) < math.log(limit + 1) else None
    if total is not None and total <= limit:  # every order of every query's values
        ranges = _every_order_ranges(Xc, total)
        ranges.sort()
        count = len(ranges) - np.searchsorted(ranges, observed - 1e-12, side="left")
        return count / total, np.full(len(observed), float(np.quantile(ranges, confidence)))
    from ..kernels.jit import first_calls
    from ..kernels.resample import permuted_ranges
    from ..kernels.threads import run_parallel
    from ..progress import step

    # the chunks depend on n_resamples only, never on the threads: a seed gives the same numbers everywhere
    chunks = max(1, min(16, n_resamples // 64))
    sizes = [n_resamples // chunks + (c < n_resamples % chunks) for c in range(chunks)]
    seeds = rng.integers(1, 2**63 - 1, size=chunks)
    parts = [np.empty(s) for s in sizes]
    Xc = np.ascontiguousarray(Xc)
    with step("randomized Tukey resamples", total=chunks) as bar, first_calls(permuted_ranges):
        def one(c):
            permuted_ranges(Xc, int(seeds[c]), parts[c])
            bar.advance()

        run_parallel(one, list(range(chunks)))
    ranges = np.concatenate(parts)
    ranges.sort()
    count = len(ranges) - np.searchsorted(ranges, observed - 1e-12, side="left")
    return (1 + count) / (1 + n_resamples), np.full(len(observed), float(np.quantile(ranges, confidence)))


#: The randomized Tukey HSD enumerates every order of every query's values when there are at most
#: this many (and at most n_resamples); beyond, it draws n_resamples of them.
_EXACT_MAX_ORDERS = 1 << 22


def _every_order_ranges(Xc: np.ndarray, total: int) -> np.ndarray:
    """For each of the ``(m!)^n`` orders (query i's values in permutation ``t // P^i % P``), the
    largest minus the smallest model mean; in chunks, each query one vectorised step."""
    n, m = Xc.shape
    perms = np.array(list(itertools.permutations(range(m))), np.int64)
    P = len(perms)
    out = np.empty(total)
    chunk = 1 << 16
    for start in range(0, total, chunk):
        t = np.arange(start, min(start + chunk, total), dtype=np.int64)
        sums = np.zeros((len(t), m))
        for i in range(n):
            sums += Xc[i][perms[t % P]]
            t = t // P
        out[start:start + len(sums)] = (sums.max(axis=1) - sums.min(axis=1)) / n
    return out


def letter_display(models: list, means: np.ndarray, different: set) -> dict:
    """Letters per model (insert-absorb, Piepho 2004): two models share a letter unless the pair of
    their indices is in ``different``; letters run from the model with the best mean."""
    m = len(models)
    columns = [set(range(m))]
    for a, b in sorted(different):
        split = []
        for col in columns:
            if a in col and b in col:
                split += [col - {a}, col - {b}]
            else:
                split.append(col)
        columns = [c for i, c in enumerate(split)
                   if not any(i != j and (c < d or (c == d and j < i)) for j, d in enumerate(split))]
    order = list(np.argsort(-np.asarray(means), kind="stable"))
    rank = {j: r for r, j in enumerate(order)}
    columns.sort(key=lambda c: (min(rank[j] for j in c), sorted(rank[j] for j in c)))
    names = [_letters(i) for i in range(len(columns))]
    return {models[j]: "".join(names[k] for k, c in enumerate(columns) if j in c) for j in range(m)}


def _letters(i: int) -> str:
    """a, b, ..., z, aa, ab, ...: the i-th group's letters."""
    text = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        text = chr(ord("a") + r) + text
    return text


def queries_needed(results, metric: str, delta: float, *, power: float = 0.8, alpha: float = 0.05,
                   test: str = "paired_t") -> pd.DataFrame:
    """See :meth:`topkeval.Results.queries_needed`."""
    results.require_rows("queries_needed")
    # click estimates clipped or too skewed: no interval, no verdict
    check_decision(results.info, "queries_needed", _label(results, metric))
    curve_ci.refuse(results, "queries_needed")
    label = _label(results, metric)[0]
    rows = []
    for key, per_query in _segments(results):
        X, models = _blocks(results, label, per_query)
        _check(results, models, "queries_needed")
        n, m = X.shape
        reason = _too_few(X, label, key)
        if reason:
            if _whole(key):
                raise ParameterError(f"queries_needed {reason}.")
            rows.append({**key, "metric": label, "test": test, "delta": delta, "power": power, "alpha": alpha,
                         "variance": math.nan, "queries_needed": math.nan, "queries_now": n, "power_now": math.nan,
                         "detectable_delta": math.nan})
            continue
        fewest = stattests.TESTS[test].min_models
        if m < fewest:
            usable = stattests.choices([t for t in stattests.POWER if stattests.TESTS[t].min_models <= m])
            raise ParameterError(f"test={test!r} sizes a comparison of {_WORDS.get(fewest, fewest)} or more models; "
                                 f"with {_WORDS.get(m, m)}, use {usable}.")
        variance, power_at, detectable_at = stattests.implementation(test)(X, alpha, power)
        if not variance > 0 or (m == 2 and all_equal(X[:, 1] - X[:, 0])):  # equal differences, to rounding
            raise ParameterError(f"{label} does not vary between the models from query to query (variance 0): any "
                                 "difference is detected with 2 queries, and none can be sized.")
        needed = _fewest(lambda k, f=power_at, v=variance: f(k, delta, v, alpha), power)
        detectable = detectable_at(n)
        if detectable > 1 and unit_range(results, label, X):  # more than such a metric can differ: none is
            detectable = math.inf
        rows.append({**key, "metric": label, "test": test, "delta": delta, "power": power, "alpha": alpha,
                     "variance": variance, "queries_needed": needed, "queries_now": n,
                     "power_now": float(power_at(n, delta, variance, alpha)), "detectable_delta": detectable})
    return pd.DataFrame(rows)


_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


@stattests.implement("paired_t")
def _paired_t_sizing(X: np.ndarray, alpha: float, power: float):
    """The paired t-test's sizing (:func:`queries_needed`): the variance of the per-query differences
    of two models (twice the ANOVA's residual variance for more), its power at n queries (noncentral
    t) and, at n queries, the smallest difference detected (:func:`detectable_nc`)."""
    m = X.shape[1]
    variance = float(np.var(X[:, 1] - X[:, 0], ddof=1)) if m == 2 else 2 * float(
        anova_table(X).loc["residual", "mean_sq"])

    def detectable(n: int) -> float:
        return detectable_nc(n - 1, float(alpha), float(power)) * math.sqrt(variance / n)

    return variance, _paired_t_power, detectable


@stattests.implement("anova")
def _anova_sizing(X: np.ndarray, alpha: float, power: float):
    """The F-test's sizing (:func:`queries_needed`): the ANOVA's residual variance, its power at n
    queries (noncentral F) and, at n queries, the smallest range detected (a root search)."""
    variance = float(anova_table(X).loc["residual", "mean_sq"])
    power_at = _anova_power(X.shape[1])

    def detectable(n: int) -> float:
        return _smallest_delta(lambda d: power_at(n, d, variance, alpha), power, math.sqrt(variance))

    return variance, power_at, detectable


def unit_range(results, label: str, *values: np.ndarray) -> bool:
    """Whether the metric of a column takes its values in [0, 1] here, so that two models differ by at
    most 1: its Metric says so (:attr:`topkeval.metrics.names.Metric.bounded`; a metric defined with
    ``define_metric`` unless ``bounded=False``), it is not estimated by inverse propensity weighting
    (an unbiased sum may exceed 1; nor off-policy), and every value given lies in [0, 1] (a gain map with negative
    gains gives an nDCG below 0)."""
    info = results.info
    if not results.metric(label).bounded or (info or {}).get("ips") or (info or {}).get("off_policy"):
        return False
    return all(not len(v) or (np.nanmin(v) >= 0 and np.nanmax(v) <= 1) for v in values if not np.isnan(v).all())


def _paired_t_power(n: int, delta: float, variance: float, alpha: float) -> float:

    return _t_power(n - 1, math.sqrt(n) * delta / math.sqrt(variance), alpha)


def _t_power(df: int, nc: float, alpha: float) -> float:
    """Power of the two-sided t-test at level ``alpha`` with noncentrality ``nc``."""
    from scipy import stats

    crit = stats.t.ppf(1 - alpha / 2, df)
    upper = float(stats.nct.sf(crit, df, nc))
    lower = float(stats.nct.cdf(-crit, df, nc))  # NaN from scipy far in the tail, where it is 0
    if math.isnan(upper):
        upper = float(stats.norm.sf(crit - nc))
    return upper + (0.0 if math.isnan(lower) else lower)


@functools.lru_cache(maxsize=256)
def detectable_nc(df: int, alpha: float, power: float) -> float:
    """The noncentrality at which the two-sided t-test with ``df`` degrees of freedom has ``power``:
    the smallest detectable paired difference is this times ``sd / sqrt(n)``."""
    from scipy.optimize import brentq

    if _t_power(df, 0.0, alpha) >= power:  # a power at most alpha: reached with no difference at all
        return 0.0
    hi = 40.0
    while _t_power(df, hi, alpha) < power:
        hi *= 4
        if hi > 1e7:
            raise ParameterError(f"no difference reaches power {power:g} at alpha={alpha:g} with {df + 1} queries: "
                                 "choose a larger alpha or a smaller power.")
    return float(brentq(lambda nc: _t_power(df, nc, alpha) - power, 0.0, hi, xtol=1e-12))


#: Two per-query values closer than this are a tie (wins / ties / losses, and the plot of the deltas).
TIE = 1e-12


def all_equal(d: np.ndarray) -> bool:
    """Whether every difference is the same, to rounding (their spread is then no spread: sd 0;
    0.1 - 0.2 + 0.2 is not 0.1 in float64)."""
    mean = float(d.mean())
    return bool(np.max(np.abs(d - mean)) <= TIE * max(1.0, abs(mean)))


def detectable_delta(differences: np.ndarray, alpha: float, power: float = 0.8) -> float:
    """The smallest mean of paired ``differences`` that a two-sided paired t-test at ``alpha`` finds
    with probability ``power``, given their standard deviation and number (NaN below 2 or without
    spread: equal to rounding, :func:`all_equal`)."""
    n = len(differences)
    sd = float(np.std(differences, ddof=1)) if n > 1 and not all_equal(differences) else math.nan
    if not sd > 0:
        return math.nan
    return detectable_nc(n - 1, float(alpha), float(power)) * sd / math.sqrt(n)


def _anova_power(m: int):
    def power(n: int, delta: float, variance: float, alpha: float) -> float:
        from scipy import stats

        d1, d2 = m - 1, (m - 1) * (n - 1)
        crit = stats.f.ppf(1 - alpha, d1, d2)
        return float(stats.ncf.sf(crit, d1, d2, n * delta * delta / (2 * variance)))

    return power


def _fewest(power_at, target: float, cap: int = 10_000_000) -> int:
    """The smallest n >= 2 with ``power_at(n) >= target`` (power grows with n): doubling, then bisection."""
    lo, hi = 2, 2
    while power_at(hi) < target:
        lo, hi = hi, hi * 2
        if hi > cap:
            raise ParameterError(f"more than {cap:,} queries would be needed: the difference is too small for the "
                                 "variance observed, or alpha too small, or power too close to 1.")
    if power_at(lo) >= target:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= target else (mid, hi)
    return hi


def _smallest_delta(power_at, target: float, scale: float) -> float:
    """The smallest difference detected with probability ``target`` (power grows with it)."""
    from scipy.optimize import brentq

    if power_at(0.0) >= target:
        return 0.0
    hi = scale
    while power_at(hi) < target:
        hi *= 2
        if hi > 1e7 * scale:
            raise ParameterError(f"no difference reaches power {target:g} at this alpha: choose a larger alpha or a "
                                 "smaller power.")
    return float(brentq(lambda d: power_at(d) - target, 0.0, hi, xtol=1e-12 * scale))
