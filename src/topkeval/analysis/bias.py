"""Where clicks come from: the examination probability of each position, and the propensity of an
item to be observed in a recommender's log.

:func:`estimate_position_bias` reads a log in which the same (query, item) was shown at different
positions (several rankers, A/B arms, natural variation) and recovers the examination curve by
intervention harvesting (Agarwal et al., WSDM 2019): for two positions j and k, the (query, item)
pairs shown at both have click rates whose sums are in the ratio ``p_j / p_k`` (each click rate is
unbiased for ``p_position x relevance``), so no relevance needs to be modelled per pair. Every such
log ratio is one equation ``log p_j - log p_k = rho_jk``, weighted by its precision, solved by least
squares with ``p_1 = 1``. A free relevance per pair fitted by EM would be biased when pairs have
few impressions; ratios of sums are not. ``method="randomized"`` reads a randomisation experiment
instead (the results shown in random order: ``p_k`` is the click rate at k over that at 1), and
``form="power"`` fits ``p_k = k ** -eta``. Intervals: a bootstrap over queries.

:func:`popularity_propensity` gives, for logs missing not at random, the propensity of Yang et al.
(RecSys 2018, eq. 15): ``p_i ∝ n_i ** ((gamma + 1) / 2)``, ``n_i`` the item's interactions; gamma
given, or fitted as in their section 4.3 from the logging recommender's lists (the slope of the log
of how often items of a popularity are recommended against the log of that popularity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import DataError, ParameterError
from ..params import Column, Given, Int, Options, Real, validate_params


@dataclass(frozen=True)
class PositionBias:
    """An examination curve: what :func:`estimate_position_bias` returns, and what
    ``evaluate(..., propensity=)`` takes.

    Attributes
    ----------
    curve : pandas.DataFrame
        Indexed by position: ``propensity`` (position 1 is 1), ``low`` and ``high`` (the bootstrap
        interval), ``pairs`` (the (query, item) pairs or impressions the estimate rests on).
    method : str
        ``"harvest"`` or ``"randomized"``.
    form : str
        ``"free"`` (one value per position) or ``"power"`` (``p_k = k ** -eta``).
    eta : float or None
        The fitted exponent of the power form.
    confidence : float
    """

    curve: pd.DataFrame
    method: str
    form: str
    eta: float | None
    confidence: float

    @property
    def propensities(self) -> dict[int, float]:
        """Position -> examination probability, capped at 1 (a noisy estimate may pass it) and rounded
        to 12 decimals (the least-squares solution's last bits are noise)."""
        return {int(k): round(float(min(v, 1.0)), 12) for k, v in self.curve["propensity"].items()}

    def __repr__(self) -> str:
        head = f"PositionBias({self.method}, {self.form}" + (f", eta={self.eta:.4f}" if self.eta is not None else "")
        return head + f", {self.confidence:.0%} intervals)\n" + self.curve.to_string(float_format=lambda v: f"{v:.4f}")


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

    ``harvest`` (intervention harvesting): for positions j and k, over the (query, item) pairs
    shown at both, ``rho_jk = log(sum of click rates at j / sum of click rates at k)`` estimates
    ``log p_j - log p_k``; the curve solves these equations by weighted least squares
    (weights ``1 / (1/c_j + 1/c_k)``, c the clicks behind each sum) with ``p_1 = 1``.
    ``randomized``: a log whose results were shown in random order: ``p_k = CTR_k / CTR_1``.
    ``form="power"``: ``p_k = k ** -eta``, eta fitted to the same equations.

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
        ``.curve`` (propensity, low, high, pairs by position), ``.propensities`` for
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
    q_codes, _ = pd.factorize(frame[query].to_numpy()[keep], use_na_sentinel=False)
    pair_codes, _ = pd.factorize(pd.MultiIndex.from_arrays([frame[query].to_numpy()[keep],
                                                            frame[item].to_numpy()[keep]]), use_na_sentinel=False)
    data = pd.DataFrame({"q": q_codes, "pair": pair_codes, "pos": pos[keep], "n": shown[keep], "c": clicks[keep]})
    agg = data.groupby(["pair", "pos"], sort=True).agg(q=("q", "first"), n=("n", "sum"), c=("c", "sum")).reset_index()
    agg = agg[agg["n"] > 0]
    if method == "randomized":
        parts = _randomized_parts(agg)
    else:
        parts = _harvest_parts(agg)
    n_queries = int(q_codes.max()) + 1 if len(q_codes) else 0
    positions, theta, eta, support = _solve(parts, np.ones(n_queries), form, method)
    curve = pd.DataFrame({"propensity": np.exp(theta), "low": np.nan, "high": np.nan,
                          "pairs": np.rint(support).astype(np.int64)},
                         index=pd.Index(positions, name="position"))
    if n_resamples:
        rng = np.random.default_rng(seed)
        draws = np.full((n_resamples, len(positions)), np.nan)
        for b in range(n_resamples):
            counts = np.bincount(rng.integers(0, n_queries, n_queries), minlength=n_queries).astype(np.float64)
            try:
                p_b, t_b, _, _ = _solve(parts, counts, form, method)
            except DataError:  # a resample that cannot reach some position: left out
                continue
            draws[b, np.searchsorted(positions, p_b)] = t_b
        alpha = (1 - confidence) / 2
        drawn = np.isfinite(draws).any(axis=0)  # a position no resample reached keeps NaN bounds
        if drawn.any():
            curve.loc[curve.index[drawn], "low"] = np.exp(np.nanquantile(draws[:, drawn], alpha, axis=0))
            curve.loc[curve.index[drawn], "high"] = np.exp(np.nanquantile(draws[:, drawn], 1 - alpha, axis=0))
    return PositionBias(curve, method, form, eta, confidence)


def _harvest_parts(agg: pd.DataFrame) -> dict:
    """For every pair of positions (j < k) shown for the same (query, item): per query, the sums of
    click rates at j and at k and the clicks behind them (summed over the query's pairs)."""
    agg = agg.assign(rate=agg["c"] / agg["n"])
    multi = agg.groupby("pair")["pos"].transform("size") > 1
    agg = agg[multi]
    if not len(agg):
        raise DataError("No (query, item) was shown at two different positions, so position bias cannot be harvested: "
                        "the log needs several rankers, A/B arms or natural variation (the same query and item at "
                        "different positions). With one ranker's log only: a randomisation experiment "
                        "(method='randomized'), or an assumed curve such as propensity={k: 1 / k} in evaluate.")
    both = agg.merge(agg, on=["pair", "q"], suffixes=("_j", "_k"))
    both = both[both["pos_j"] < both["pos_k"]]
    grouped = both.groupby(["pos_j", "pos_k", "q"], sort=True).agg(rj=("rate_j", "sum"), rk=("rate_k", "sum"),
                                                                   cj=("c_j", "sum"), ck=("c_k", "sum"),
                                                                   m=("pair", "size")).reset_index()
    return {"kind": "harvest", "rows": grouped}


def _randomized_parts(agg: pd.DataFrame) -> dict:
    grouped = agg.groupby(["pos", "q"], sort=True).agg(c=("c", "sum"), n=("n", "sum"), m=("pair", "size")).reset_index()
    return {"kind": "randomized", "rows": grouped}


def _solve(parts: dict, qweight: np.ndarray, form: str, method: str):
    """(positions, log propensities, eta, support) from per-query sums, each query counted
    ``qweight[q]`` times (1 for the estimate; bootstrap counts for a resample)."""
    rows = parts["rows"]
    w = qweight[rows["q"].to_numpy()]
    if parts["kind"] == "randomized":
        sums = pd.DataFrame({"pos": rows["pos"], "c": rows["c"] * w, "n": rows["n"] * w, "m": rows["m"] * w})
        per = sums.groupby("pos").sum()
        per = per[per["n"] > 0]
        if 1 not in per.index or per.loc[1, "c"] <= 0:
            raise DataError("The randomised log has no click at position 1, which the curve is relative to.")
        ctr = per["c"] / per["n"]
        clicked = ctr > 0
        if not clicked.all():
            raise DataError(f"Positions {list(per.index[~clicked])} have no click in the randomised log: their "
                            "examination probability cannot be estimated; set max_position below them.")
        positions = per.index.to_numpy(np.int64)
        theta = np.log(ctr.to_numpy() / ctr.loc[1])
        if form == "power":
            x, y, wt = np.log(positions[1:]), theta[1:], 1.0 / (1.0 / per["c"].to_numpy()[1:] + 1.0 / per.loc[1, "c"])
            eta = float(-(wt * x * y).sum() / (wt * x * x).sum()) if len(x) else 0.0
            theta = -eta * np.log(positions)
            return positions, theta, eta, per["m"].to_numpy()
        return positions, theta, None, per["m"].to_numpy()
    sums = pd.DataFrame({"j": rows["pos_j"], "k": rows["pos_k"], "rj": rows["rj"] * w, "rk": rows["rk"] * w,
                         "cj": rows["cj"] * w, "ck": rows["ck"] * w, "m": rows["m"] * w})
    eq = sums.groupby(["j", "k"]).sum().reset_index()
    eq = eq[(eq["rj"] > 0) & (eq["rk"] > 0)]
    if not len(eq):
        raise DataError("No pair of positions has clicks at both: position bias cannot be estimated from this log.")
    rho = np.log(eq["rj"].to_numpy() / eq["rk"].to_numpy())
    wt = 1.0 / (1.0 / eq["cj"].to_numpy() + 1.0 / eq["ck"].to_numpy())
    positions = np.unique(np.concatenate([eq["j"], eq["k"]])).astype(np.int64)
    if positions[0] != 1:
        raise DataError("No (query, item) shown at position 1 was also shown elsewhere with clicks at both: the curve "
                        "is relative to position 1 and cannot be anchored.")
    index = {p: i for i, p in enumerate(positions)}
    ji = np.array([index[p] for p in eq["j"]])
    ki = np.array([index[p] for p in eq["k"]])
    if form == "power":  # rho = -eta (log j - log k)
        x = np.log(eq["j"].to_numpy(np.float64)) - np.log(eq["k"].to_numpy(np.float64))
        eta = float(-(wt * x * rho).sum() / (wt * x * x).sum())
        support = _support(len(positions), ji, ki, eq["m"].to_numpy())
        return positions, -eta * np.log(positions), eta, support
    A = np.zeros((len(eq), len(positions)))
    A[np.arange(len(eq)), ji] = 1.0
    A[np.arange(len(eq)), ki] = -1.0
    A = A[:, 1:]  # theta_1 = 0
    sw = np.sqrt(wt)
    if np.linalg.matrix_rank(A) < A.shape[1]:
        raise DataError("Some positions are not linked to position 1 by (query, item) pairs shown at both: their "
                        "examination cannot be placed on the curve; set max_position below them.")
    theta, *_ = np.linalg.lstsq(A * sw[:, None], rho * sw, rcond=None)
    return positions, np.concatenate([[0.0], theta]), None, _support(len(positions), ji, ki, eq["m"].to_numpy())


def _support(n: int, ji: np.ndarray, ki: np.ndarray, m: np.ndarray) -> np.ndarray:
    out = np.zeros(n)
    np.add.at(out, ji, m)
    np.add.at(out, ki, m)
    return out


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
