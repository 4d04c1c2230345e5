"""Where clicks come from: the examination probability of each position, and the propensity of an
item to be observed in a recommender's log.

:func:`estimate_position_bias` reads a log in which the same (query, item) was shown at different
positions (several rankers, A/B arms, natural variation) and recovers the examination curve by
intervention harvesting (Agarwal et al., WSDM 2019): given how many clicks a (query, item) pair got in
all, the positions they fell on depend on the examination of those positions only, not on the pair's
relevance, and the curve maximises that conditional likelihood over every such pair, those without
a click included (:mod:`topkeval.analysis.curve_fit`). ``method="randomized"`` reads a
randomisation experiment instead (the results shown in random order: ``p_k`` is the click rate at k
over that at 1), and ``form="power"`` fits ``p_k = k ** -eta``. Intervals: a bootstrap over queries
(the curve fitted again on each resample), which :class:`PositionBias` keeps the statistics for, so
that evaluations with an estimated curve carry its uncertainty into their intervals.

:func:`popularity_propensity` gives, for logs missing not at random, the propensity of Yang et al.
(RecSys 2018, eq. 15): ``p_i ∝ n_i ** ((gamma + 1) / 2)``, ``n_i`` the item's interactions; gamma
given, or fitted as in their section 4.3 from the logging recommender's lists (the slope of the log
of how often items of a popularity are recommended against the log of that popularity).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import DataError, ParameterError, plural, warn
from ..params import Column, Given, Int, Options, Real, validate_params
from .curve_fit import Statistics, harvest_statistics, randomized_statistics


@dataclass(frozen=True)
class PositionBias:
    """An examination curve: what :func:`estimate_position_bias` returns, and what
    ``evaluate(..., propensity=)`` takes.

    Given as it is (``propensity=bias``), the curve is an estimate: every interval of that
    evaluation (``summary_ci``, ``compare``, the report) resamples the queries of this log, fits
    the curve again and weighs the clicks with it, so that the curve's own uncertainty is in them.
    Given as ``bias.propensities`` (a mapping), it is taken as known.

    Attributes
    ----------
    curve : pandas.DataFrame
        Indexed by every position shown: ``propensity`` (position 1 is 1; NaN where this log cannot
        estimate it, with the reason in ``note``), ``low`` and ``high`` (the bootstrap interval),
        ``pairs`` (the (query, item) pairs shown there and at another position; for
        ``randomized``, shown there), ``clicks`` (their clicks there), ``note``.
    method : str
        ``"harvest"`` or ``"randomized"``.
    form : str
        ``"free"`` (one value per position) or ``"power"`` (``p_k = k ** -eta``).
    eta : float or None
        The fitted exponent of the power form.
    confidence : float
    queries : pandas.Index or None
        The query ids of the log the curve was estimated from (to resample them).
    statistics : object or None
        Per query, what fitting the curve needs (:class:`topkeval.analysis.curve_fit.Statistics`).
    """

    curve: pd.DataFrame
    method: str
    form: str
    eta: float | None
    confidence: float
    queries: pd.Index | None = field(default=None, repr=False, compare=False)
    statistics: Statistics | None = field(default=None, repr=False, compare=False)

    @property
    def propensities(self) -> dict[int, float]:
        """Position -> examination probability, for the positions with an estimate, capped at 1 (a
        noisy estimate may pass it) and rounded to 12 decimals (the fit's last bits are noise)."""
        return {int(k): round(float(min(v, 1.0)), 12) for k, v in self.curve["propensity"].items() if v > 0}

    def __repr__(self) -> str:
        head = f"PositionBias({self.method}, {self.form}" + (f", eta={self.eta:.4f}" if self.eta is not None else "")
        return head + f", {self.confidence:.0%} intervals)\n" + self.curve.to_string(float_format=lambda v: f"{v:.4f}")


def refit(bias: PositionBias, counts: np.ndarray) -> np.ndarray:
    """The curve fitted again with each query of its log counted ``counts[b, q]`` times (one row per
    resample, one column per position of ``bias.curve``; capped at 1 as :attr:`PositionBias.propensities`):
    0 where a resample has no click to place a position, NaN where it cannot place it."""
    if bias.statistics is None:
        raise ParameterError("This PositionBias keeps no per-query statistics (it was built by hand): it cannot be "
                             "fitted again on resampled queries; pass its propensities (a mapping) instead.")
    return np.minimum(bias.statistics.fit(counts, bias.curve["propensity"].to_numpy()), 1.0)


@dataclass(frozen=True)
class ItemPropensity:
    """Per-item observation propensities (:func:`popularity_propensity`), for
    ``evaluate(..., item=, propensity=)``: ``by_item`` (item -> propensity in (0, 1]), ``unseen``
    (the propensity of an item without interactions), ``gamma``."""

    by_item: pd.Series
    unseen: float
    gamma: float

    def __repr__(self) -> str:
        return (f"ItemPropensity(gamma={self.gamma:.4f}, {len(self.by_item)} items, propensities "
                f"{self.by_item.min():.4g}..{self.by_item.max():.4g}, unseen {self.unseen:.4g})")


def _table(data, columns: list[str], parameter: str, roles: dict | None = None, ids: tuple = ()) -> pd.DataFrame:
    """The ``columns`` of a table (pandas, polars, Arrow, a dict of columns, a .parquet / .csv
    path) as a pandas DataFrame; ``ids``: the id columns, which a text file gives as text ("007" is
    not 7)."""
    import os

    from ..errors import ColumnError, did_you_mean

    if isinstance(data, (str, os.PathLike)):
        from ..inputs import input_paths, read_columns

        path, _ = input_paths(data, None)
        read = read_columns(path, columns, id_columns=[c for c in ids if c in columns],
                            roles=roles or {c: c for c in columns})
        from ..inputs.ids import ids_as_objects

        data = {c: ids_as_objects(v) if c in ids else np.asarray(v) for c, v in read.items()}
    if isinstance(data, dict):
        names = list(data)
    elif hasattr(data, "columns") or hasattr(data, "column_names"):
        if type(data).__name__ == "LazyFrame":
            data = data.collect()
        names = list(getattr(data, "column_names", None) or data.columns)
    else:
        raise ParameterError(f"{parameter} must be a table (pandas, polars, Arrow or a dict of columns); got "
                             f"{type(data).__name__}.")
    for c in columns:
        if c not in names:
            raise ColumnError(f"Column {c!r} is not in {parameter}{did_you_mean(c, [str(n) for n in names])}; its "
                              f"columns are {[str(n) for n in names][:20]}.")
    if isinstance(data, dict):
        try:
            return pd.DataFrame({c: np.asarray(data[c]) for c in columns})
        except ValueError as exc:
            raise ParameterError(f"{parameter}: the columns must be one-dimensional and of one length ({exc}).") from None
    if isinstance(data, pd.DataFrame):
        return data[columns]
    picked = data.select(columns)
    return picked.to_pandas()


def _positions(values: pd.Series, column: str) -> np.ndarray:
    if pd.api.types.is_bool_dtype(values.dtype):
        raise DataError(f"Column {column!r} must hold the 1-based position of each impression; it holds booleans.")
    pos = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
    bad = ~((pos >= 1) & (pos == np.floor(pos)) & np.isfinite(pos))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"Column {column!r} must hold the 1-based position of each impression; row {row} has "
                        f"{values.iloc[row]!r}.")
    return pos.astype(np.int64)


def _clicks(values: pd.Series, column: str, shown: np.ndarray | None) -> np.ndarray:
    c = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
    if not (np.isfinite(c) & (c >= 0)).all():
        raise DataError(f"Column {column!r} must hold the clicks of each row (0/1, or counts >= 0), every value a "
                        "finite number.")
    if shown is not None and (c > shown).any():
        raise DataError(f"A row has more clicks ({column!r}) than impressions.")
    return c


@validate_params(impressions=Given("a table, checked by estimate_position_bias"), query=Column(), item=Column(),
                 position=Column(), click=Column(), impressions_column=[Column(), None],
                 method=Options("harvest", "randomized"), form=Options("free", "power"),
                 max_position=[Int(1), None], confidence=Real(0, 1, low_open=True, high_open=True),
                 n_resamples=Int(0, 100_000), seed=[Int(0), None])
def estimate_position_bias(impressions, query: str = "query", item: str = "item", position: str = "position",
                           click: str = "click", *, impressions_column: str | None = None, method: str = "harvest",
                           form: str = "free", max_position: int | None = None, confidence: float = 0.95,
                           n_resamples: int = 200, seed: int | None = 0) -> PositionBias:
    """The examination probability of each position, from a log of impressions and clicks.

    ``harvest`` (intervention harvesting, by conditional likelihood): a (query, item) pair g
    shown ``n_gj`` times at position j gets clicks with expectation ``n_gj p_j r_g`` (``r_g`` its
    unknown relevance); given its total clicks ``T_g``, they fall on its positions with
    probabilities ``pi_gj = n_gj p_j / sum_l n_gl p_l``, and the curve (``p_1 = 1``) maximises
    ``sum_g sum_j c_gj log pi_gj`` over every pair shown at two positions or more, those without a
    click included. ``randomized``: a log whose results were shown in random order:
    ``p_k = CTR_k / CTR_1``. ``form="power"``: ``p_k = k ** -eta``, eta fitted by the same
    likelihood (for ``randomized``, a Poisson regression of the clicks on ``log k``). See
    :mod:`topkeval.analysis.curve_fit` and docs/conventions.md.

    Every position shown gets a row; one the log cannot estimate (no click there on pairs shown
    elsewhere, or no pair with clicks linking it to position 1) gets NaN and the reason in
    ``note``, and no propensity (a click there is refused by ``evaluate``). Intervals: the basic
    bootstrap on the log scale (``exp(2 log p - q)``, q the percentiles of the log of the curve fitted
    again on ``n_resamples`` bootstrap resamples of the queries); none (NaN, with the reason in
    ``note``) at a position with fewer than :data:`MIN_CLICKS` clicks, and none at all (and a
    TopkevalWarning) when fewer than :data:`MIN_QUERIES` queries have clicks that inform the curve.

    Parameters
    ----------
    impressions : table
        One row per impression of an item for a query (or per (query, item, position) with counts:
        ``impressions_column`` holds how many, ``click`` how many were clicked).
    query : str
        Column of the query (or session) id.
    item : str
        Column of the item id.
    position : str
        Column of the 1-based position shown.
    click : str
        Column of the clicks.
    method : {"harvest", "randomized"}
    form : {"free", "power"}
    max_position : int, optional
        Positions beyond it are left out.
    confidence : float
        Of the bootstrap intervals, in (0, 1).
    n_resamples : int
        Bootstrap resamples of the queries behind the intervals, 0 to 100,000 (0: no intervals, ``low`` and ``high`` NaN).
    seed : int, optional

    Returns
    -------
    PositionBias
        ``.curve`` (propensity, low, high, pairs, clicks, note by position), ``.propensities`` for
        ``evaluate(..., propensity=)``.

    Examples
    --------
    >>> import pandas as pd, topkeval as tk
    >>> log = pd.DataFrame({"query": [1, 1, 1, 1], "item": ["a", "b", "a", "b"],  # two arms' pages
    ...                     "position": [1, 2, 2, 1], "click": [1, 0, 1, 1]})
    >>> tk.estimate_position_bias(log, n_resamples=0).propensities  # (1 + 1) / (1 + 0) at 1 vs 2
    {1: 1.0, 2: 0.5}
    """
    cols = [query, item, position, click] + ([impressions_column] if impressions_column else [])
    if len(set(cols)) != len(cols):
        raise ParameterError(f"The query, item, position and click columns must differ; got {cols}.")
    roles = {query: "query", item: "item", position: "position", click: "click"} | (
        {impressions_column: "impressions_column"} if impressions_column else {})
    frame = _table(impressions, cols, "impressions", roles, ids=(query, item))
    if not len(frame):
        raise DataError("The impressions table has no rows.")
    pos = _positions(frame[position], position)
    shown = pd.to_numeric(frame[impressions_column], errors="coerce").to_numpy(np.float64) if impressions_column \
        else np.ones(len(frame))
    if impressions_column and not (np.isfinite(shown) & (shown >= 0)).all():
        raise DataError(f"Column {impressions_column!r} must hold impression counts (finite numbers >= 0).")
    clicks = _clicks(frame[click], click, shown)
    keep = pos <= max_position if max_position else np.ones(len(pos), bool)
    q_codes, q_ids = pd.factorize(frame[query].to_numpy()[keep], use_na_sentinel=False)
    pair_codes, _ = pd.factorize(pd.MultiIndex.from_arrays([frame[query].to_numpy()[keep],
                                                            frame[item].to_numpy()[keep]]), use_na_sentinel=False)
    data = pd.DataFrame({"q": q_codes, "pair": pair_codes, "pos": pos[keep], "n": shown[keep], "c": clicks[keep]})
    agg = data.groupby(["pair", "pos"], sort=True).agg(q=("q", "first"), n=("n", "sum"), c=("c", "sum")).reset_index()
    agg = agg[agg["n"] > 0]
    positions = np.unique(agg["pos"].to_numpy()).astype(np.int64)
    if not len(positions):
        raise DataError("The impressions table has no impression (every impression count is 0).")
    if positions[0] != 1:
        raise DataError(f"No impression at position 1 (the first is at {positions[0]}): the curve is relative to "
                        "position 1 (examination 1 there) and cannot be anchored.")
    n_queries = len(q_ids)
    if method == "randomized":
        stats = randomized_statistics(agg, n_queries, positions, form)
        support = agg.groupby("pos").size().reindex(positions, fill_value=0).to_numpy()
        behind = agg.groupby("pos")["c"].sum().reindex(positions, fill_value=0).to_numpy()
    else:
        stats = harvest_statistics(agg, n_queries, positions, form)
        multi = agg[agg.groupby("pair")["pos"].transform("size") > 1]
        support = multi.groupby("pos").size().reindex(positions, fill_value=0).to_numpy()
        behind = multi.groupby("pos")["c"].sum().reindex(positions, fill_value=0).to_numpy()
    estimate = stats.fit()[0]
    notes = _notes(estimate, support, behind, method, form)
    _refuse_empty(estimate, method)
    shown_estimate = np.where(estimate > 0, estimate, np.nan)
    low = np.full(len(positions), np.nan)
    high = np.full(len(positions), np.nan)
    informative = len(stats.rows)
    if n_resamples and informative < MIN_QUERIES:
        warn(f"estimate_position_bias gives no intervals: {plural(informative, 'query', 'queries')} of this log "
             f"{'has' if informative == 1 else 'have'} clicks that inform the curve, and a bootstrap over fewer "
             f"than {MIN_QUERIES} cannot show how the curve varies (with one query every resample is the same, "
             "and the interval would have no width). Log more queries; the estimate itself is given.")
        notes = [n or f"no interval: fewer than {MIN_QUERIES} queries inform the curve" for n in notes]
    elif n_resamples:
        with np.errstate(divide="ignore"):
            draws = np.log(np.vstack([stats.fit(counts, estimate) for counts in
                                      query_counts(np.random.default_rng(seed), n_resamples, n_queries)]))
        alpha = (1 - confidence) / 2
        placed = ~np.isnan(draws).any(axis=0) & np.isfinite(shown_estimate)
        few = placed & (behind < MIN_CLICKS) & (form == "free")
        placed &= ~few
        # the basic bootstrap on the log scale: 2 log p - the upper (lower) percentile, which keeps
        # its level where the percentiles themselves do not (measured: docs/conventions.md)
        centre = np.log(np.where(placed, shown_estimate, 1.0))
        q_low, q_high = np.quantile(draws[:, placed], [alpha, 1 - alpha], axis=0)
        with np.errstate(over="ignore"):
            low[placed] = np.exp(2 * centre[placed] - q_high)
            high[placed] = np.exp(2 * centre[placed] - q_low)
        for j in np.flatnonzero(few):
            notes[j] = (f"no interval: {behind[j]:g} clicks here (fewer than {MIN_CLICKS}), too few for a bootstrap "
                        "interval to keep its level")
        for j in np.flatnonzero(np.isfinite(shown_estimate) & np.isnan(draws).any(axis=0)):
            missed = int(np.isnan(draws[:, j]).sum())
            notes[j] = (f"no interval: {missed} of {n_resamples} resamples of the queries cannot place it (the pairs "
                        "linking it to position 1 are few)")
    eta = None
    if form == "power":
        eta = float(-np.log(estimate[1]) / np.log(positions[1])) if len(positions) > 1 else 0.0
    curve = pd.DataFrame({"propensity": shown_estimate, "low": low, "high": high,
                          "pairs": np.asarray(support, np.int64), "clicks": np.asarray(behind, np.float64),
                          "note": notes}, index=pd.Index(positions, name="position"))
    return PositionBias(curve, method, form, eta, confidence, queries=pd.Index(q_ids), statistics=stats)


#: Fewer queries with clicks that inform the curve than this, and estimate_position_bias gives no
#: intervals (a bootstrap over so few queries cannot show how the curve varies).
MIN_QUERIES = 20

#: A position with fewer clicks (on pairs shown elsewhere; in a randomised log, in all) gets no
#: interval: in simulation, intervals resting on 5 clicks or fewer covered about 60% of the time,
#: on 6 to 100 clicks 89 to 97% (benchmarks/position_bias_simulation.py).
MIN_CLICKS = 10


def query_counts(rng: np.random.Generator, n_resamples: int, n_queries: int, per: int | None = None):
    """Bootstrap counts of ``n_queries`` queries (each resample draws as many with replacement): arrays
    of ``per`` resamples (the last fewer; by default as many as make about 4 million numbers)."""
    per = per or max(1, (1 << 22) // max(n_queries, 1))
    for start in range(0, n_resamples, per):
        b = min(per, n_resamples - start)
        draws = rng.integers(0, n_queries, (b, n_queries)) + n_queries * np.arange(b)[:, None]
        yield np.bincount(draws.ravel(), minlength=b * n_queries).reshape(b, n_queries).astype(np.float64)


def _notes(estimate: np.ndarray, support: np.ndarray, behind: np.ndarray, method: str, form: str) -> list[str]:
    """Why a position has no estimate ("" where it has one)."""
    out = []
    for p, m, c in zip(estimate, support, behind):
        if np.isfinite(p) and p > 0:
            out.append("")
        elif method == "harvest" and m == 0:
            out.append("no (query, item) shown here was also shown at another position: nothing to compare it with")
        elif c == 0 or p == 0:
            where = "on the pairs also shown elsewhere" if method == "harvest" else "in the randomised log"
            out.append(f"no click here {where}: examined too rarely for this log to measure")
        else:
            out.append("not linked to position 1 by pairs with clicks at both ends: no finite estimate")
    return out


def _refuse_empty(estimate: np.ndarray, method: str) -> None:
    if not (np.isfinite(estimate[0]) and estimate[0] > 0):
        if method == "randomized":
            raise DataError("The randomised log has no click at position 1, which the curve is relative to.")
        raise DataError("No (query, item) shown at position 1 and elsewhere has a click, or none links position 1 to "
                        "another: the curve is relative to position 1 and cannot be anchored.")
    if not (np.isfinite(estimate[1:]) & (estimate[1:] > 0)).any() and len(estimate) > 1:
        raise DataError("No position other than 1 can be estimated: no pair of positions has clicks at both. The log "
                        "needs more clicks on (query, item) pairs shown at several positions.")


@validate_params(interactions=Given("a table, checked by popularity_propensity"), item=Column(),
                 gamma=[Real(-1), None], recommendations=[Given("a table of recommended items"), None],
                 recommended_item=[Column(), None], exclude_top=Real(0, 1, high_open=True))
def popularity_propensity(interactions, item: str = "item", *, gamma: float | None = None, recommendations=None,
                          recommended_item: str | None = None, exclude_top: float = 0.005) -> ItemPropensity:
    """Observation propensities from item popularity for logs missing not at random (Yang et al. 2018).

    ``p_i = (n_i / n_max) ** ((gamma + 1) / 2)``, ``n_i`` the interactions of item i in
    ``interactions`` (normally the training data; an item without any counts as 1), so the most
    popular item has propensity 1 and every weight is at least 1. Without ``gamma``, it is fitted
    from ``recommendations`` (the logging recommender's lists) as in the paper's section 4.3: the
    least-squares slope of ``log f(n)`` on ``log n``, f(n) the mean number of times an item of
    popularity n is recommended, the ``exclude_top`` share of the most popular items left out.

    Examples
    --------
    >>> import pandas as pd, topkeval as tk
    >>> train = pd.DataFrame({"item": ["a", "a", "a", "a", "b"]})
    >>> tk.popularity_propensity(train, gamma=1.0).by_item.to_dict()
    {'a': 1.0, 'b': 0.25}
    """
    items = pd.Series(_table(interactions, [item], "interactions", {item: "item"}, ids=(item,))[item].to_numpy()).dropna()
    if not len(items):
        raise DataError(f"Column {item!r} of interactions has no item ids (no rows, or every one missing): item "
                        "popularity cannot be counted.")
    counts = items.value_counts().astype(np.float64)
    if gamma is None:
        if recommendations is None:
            raise ParameterError("popularity_propensity needs gamma=, or recommendations= (the logging recommender's "
                                 "lists) to fit it from.")
        column = recommended_item or item
        shown = pd.Series(_table(recommendations, [column], "recommendations", {column: "recommended_item"}, ids=(column,))[column].to_numpy()).value_counts()
        freq = shown.reindex(counts.index, fill_value=0).astype(np.float64)
        keep = counts <= counts.quantile(1 - exclude_top) if exclude_top else counts > 0
        level = freq[keep].groupby(counts[keep]).mean()
        level = level[level > 0]
        if len(level) < 2:
            raise DataError("Fitting gamma needs recommended items of at least two popularity levels; pass gamma=.")
        x, y = np.log(level.index.to_numpy(np.float64)), np.log(level.to_numpy())
        x = x - x.mean()
        gamma = float(x @ (y - y.mean()) / (x @ x))
        if gamma < -1:
            raise DataError(f"The fitted gamma is {gamma:.3f} < -1 (rarer items recommended more): propensities "
                            "would fall with popularity. Pass gamma= yourself.")
    exponent = (gamma + 1) / 2
    top = counts.max()
    by_item = (counts / top) ** exponent
    return ItemPropensity(by_item.rename("propensity"), float((1 / top) ** exponent), float(gamma))
