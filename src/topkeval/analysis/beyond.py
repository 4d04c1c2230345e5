"""Beyond accuracy: what each model shows in its top k over all evaluated queries.

Coverage, novelty, average popularity, the Gini index of exposures and intra-list diversity: the
recommender teams' view of a model (RecTools, Evidently, RePlay). Every number is read off the
rows again through ``Results._sources`` and the kernel's own ranking
(:func:`topkeval.kernels.cpu.exposure`), under the conventions of the evaluation.

Which candidates are "in the top k" of a query: those of the evaluated queries (queries skipped as
empty are left out, as in ``per_query``) that survive ``score_threshold`` and rank within the
first k under the tie rule. Under ``ties="expected"`` each candidate is in the top k with its
probability ``p`` (the exact share of the orders of its tie group that put it there), and every
value below is the exact mean over all orders of the tied candidates, except ``gini@k``, which is
the Gini index of the expected exposures. Under a deterministic tie rule ``p`` is 0 or 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from ..errors import ParameterError, check_int, show, warn

_WHO = "beyond_accuracy"


def beyond_accuracy(results, k: int = 10, popularity=None, features=None,
                    similarity: Callable | None = None, catalog=None) -> pd.DataFrame:
    """Coverage, novelty, popularity, Gini and diversity of each model's top k (see
    :meth:`topkeval.Results.beyond_accuracy` for the definitions)."""
    if results.weight or results.by:
        warn("beyond_accuracy counts every evaluated query once, over all of them: it ignores weight= and "
                      "by= (evaluate each segment's rows on their own for a breakdown).")
    k = check_int(k, "k", _WHO, low=1)
    conv = results.conventions
    sources = results.sources
    if conv is None or sources is None or not hasattr(results.backend, "exposure"):
        raise ParameterError("beyond_accuracy reads each model's top k again, which these results do not keep "
                             "(a score matrix, a Spark DataFrame, a file streamed with keep_per_query=False, or per-query values "
                             "given to Results.from_per_query): "
                             "evaluate the log as a table in memory, with item='<column>'.")
    if features is not None and similarity is not None:
        raise ParameterError("beyond_accuracy takes features= or similarity=, not both.")
    if similarity is not None and not callable(similarity):
        raise ParameterError(f"similarity must be a function (item, item) -> float, got {type(similarity).__name__}.")
    logs = list(sources())
    for log, _ in logs:
        if not log.has_items:
            raise ParameterError("beyond_accuracy counts items, but these results were evaluated without item ids: "
                                 "pass item='<column>' to evaluate.")
    shown = {model: _shown(results.backend, logs, conv, model, k) for model in results.models}
    every_shown = pd.unique(np.concatenate([s["item"].to_numpy(object) for s in shown.values()] or [np.zeros(0, object)]))
    size = _catalog_size(logs, catalog, every_shown)
    pop, cold = _popularity(logs, conv, popularity, every_shown)
    sim = None
    if features is not None:
        sim = _cosine(features, every_shown)
    elif similarity is not None:
        sim = similarity
    rows = {}
    for model in results.models:
        s = shown[model]
        row = {f"coverage@{k}": _coverage(s, size),
               f"novelty@{k}": _list_mean(s, -np.log2(s["item"].map(pop).fillna(cold).to_numpy(float))),
               f"popularity@{k}": _list_mean(s, s["item"].map(pop).fillna(0.0).to_numpy(float)),
               f"gini@{k}": _gini(s.groupby("item", sort=False)["p"].sum().to_numpy(float), size)}
        if sim is not None:
            row[f"diversity@{k}"] = _diversity(s, sim, conv.ties == "expected")
        rows[model] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "model"
    return out


def _shown(backend, logs, conv, model: str, k: int) -> pd.DataFrame:
    """The candidates of ``model`` that may be in the top k of an evaluated query: one row each, with
    ``query`` (a number per query), ``item``, ``p`` (the chance it is in the top k), its tie group
    ``g``, ``e``, and ``L`` = min(k, candidates of the query above score_threshold): the backend's
    :meth:`~topkeval.backends.cpu.CpuBackend.exposure` of each log, queries numbered across logs."""
    parts = []
    base = 0
    for log, R in logs:
        if model not in log.scores:
            continue
        part = backend.exposure(log, R, conv, model, k)
        parts.append(part.assign(query=part["query"] + base))
        base += log.n_queries
    if not parts:
        return pd.DataFrame({"query": np.zeros(0, np.int64), "item": pd.Series([], dtype=object),
                             "p": np.zeros(0), "g": np.zeros(0, np.int64), "e": np.zeros(0, np.int64),
                             "L": np.zeros(0, np.int64)})
    return pd.concat(parts, ignore_index=True)


def _catalog_size(logs, catalog, every_shown) -> int:
    """The number of items in the catalogue: given, the length of a given collection, or the distinct
    items of the log (every model's candidates)."""
    if catalog is None:
        ids = [pd.unique(pd.Series(log.item_ids(np.unique(log.items)), dtype=object)) for log, _ in logs]
        return len(pd.unique(np.concatenate(ids))) if ids else 0
    if isinstance(catalog, (int, np.integer)) and not isinstance(catalog, bool):
        size = check_int(catalog, "catalog", _WHO, low=1)
        if size < len(every_shown):
            raise ParameterError(f"catalog={size}, but the models show {len(every_shown)} distinct items in their top k: "
                                 "pass the catalogue size (at least that), or the catalogue's items.")
        return size
    if isinstance(catalog, (str, bytes)) or not hasattr(catalog, "__iter__"):
        raise ParameterError(f"The 'catalog' parameter of {_WHO} must be a number of items or a collection of item "
                             f"ids. Got {catalog!r} instead.")
    try:
        known = set(catalog)
    except TypeError as exc:
        raise ParameterError(f"The 'catalog' parameter of {_WHO} must be a number of items or a collection of item "
                             f"ids (strings or numbers): {exc}.") from None
    missing = [i for i in every_shown if i not in known]
    if missing:
        raise ParameterError(f"{len(missing)} items shown in a top k are not in catalog (for example "
                             f"{', '.join(show(i) for i in missing[:5])}).")
    return len(known)


def _popularity(logs, conv, popularity, every_shown) -> tuple[pd.Series, float]:
    """(share of each item, the share given to items never relevant for novelty).

    By default, RecTools' MeanInvUserFreq: the share of the queries with a relevant candidate in
    which the item is relevant; an item relevant nowhere counts as relevant in one query.
    """
    if popularity is None:
        pairs = []
        for log, _ in logs:
            rows = np.flatnonzero(log.relevant(conv))
            q_of_row = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
            pairs.append(pd.DataFrame({"query": pd.Series(log.queries[q_of_row[rows]], dtype=object),
                                       "item": pd.Series(log.item_ids(log.items[rows]), dtype=object)}))
        both = pd.concat(pairs, ignore_index=True).drop_duplicates() if pairs else pd.DataFrame({"query": [], "item": []})
        n_queries = both["query"].nunique()
        if n_queries == 0:
            return pd.Series(dtype=float), np.nan  # nothing relevant anywhere: novelty undefined, popularity 0
        return both["item"].value_counts(sort=False) / n_queries, 1.0 / n_queries
    if isinstance(popularity, pd.Series):
        pop = popularity
    elif isinstance(popularity, Mapping):
        pop = pd.Series(list(popularity.values()), index=pd.Index(list(popularity.keys()), dtype=object),
                        dtype=object)
    else:
        raise ParameterError(f"The 'popularity' parameter of {_WHO} must be a mapping or a pandas Series item -> "
                             f"share of queries. Got {type(popularity).__name__} instead.")
    pop = pd.Series(_numbers(pop.to_numpy(), "popularity", pop.index), index=pd.Index(pop.index, dtype=object))
    if pop.index.has_duplicates:
        twice = pop.index[pop.index.duplicated()][0]
        raise ParameterError(f"popularity gives item {show(twice)} more than one share; give each item one.")
    missing = [i for i in every_shown if i not in pop.index]
    if missing:
        raise ParameterError(f"{len(missing)} items shown in a top k have no popularity (for example "
                             f"{', '.join(show(i) for i in missing[:5])}): give every item a share in (0, 1].")
    bad = pop[~((pop > 0) & (pop <= 1))]
    if len(bad):
        raise ParameterError(f"popularity must be a share in (0, 1] for every item (novelty takes -log2 of it); "
                             f"item {show(bad.index[0])} has {show(bad.iloc[0])}. Give items never seen a small share "
                             "(RecTools counts them as seen once).")
    return pop, np.nan


def _numbers(values: np.ndarray, what: str, labels) -> np.ndarray:
    """``values`` as float64, refusing text (even "0.5"), booleans and anything else that is not a
    real number, naming the item."""
    import numbers

    values = np.asarray(values)
    if values.dtype.kind in "iuf":
        return values.astype(np.float64)
    for label, v in zip(labels, values):
        if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
            raise ParameterError(f"{what} must be numbers; item {show(label)} has {show(v)} "
                                 f"({type(v).__name__}). Convert them to numbers first.")
    return values.astype(np.float64)


def _list_mean(s: pd.DataFrame, value: np.ndarray) -> float:
    """Mean over queries with a list of ``sum(p * value) / L``: the expected mean of ``value`` over the
    L items shown (sum(p) = L)."""
    if not len(s):
        return float("nan")
    codes, _ = pd.factorize(s["query"])
    per = np.bincount(codes, weights=s["p"].to_numpy() * value)  # a NaN value (no popularity) stays NaN
    L = np.zeros(len(per))
    L[codes] = s["L"].to_numpy()
    return float(np.mean(per / L))


def _coverage(s: pd.DataFrame, size: int) -> float:
    """Expected number of distinct items in some top k, over the catalogue size: each item counts
    ``1 - prod_q (1 - p_iq)`` (the queries' orders are independent)."""
    if size == 0:
        return float("nan")
    missed = (1.0 - s["p"]).groupby(s["item"], sort=False).prod()
    return float((1.0 - missed).sum() / size)


def _gini(exposures: np.ndarray, size: int) -> float:
    """Gini index of the exposures of the ``size`` items of the catalogue (items never shown: 0):
    ``sum_i (2i - n - 1) x_(i) / (n sum x)`` over the exposures sorted ascending, i = 1..n."""
    total = exposures.sum()
    if size == 0 or total <= 0:
        return float("nan")
    # the items never shown take the first size - m places with x = 0: only the m shown are summed
    # (a catalogue of 10**12 items is never materialised)
    x = np.sort(exposures)
    i = np.arange(size - len(x) + 1, size + 1, dtype=np.float64)
    return float(((2 * i - size - 1) * x).sum() / (float(size) * total))


def _cosine(features, every_shown) -> Callable:
    """A cosine similarity over ``features`` (item -> vector) for the items shown."""
    if isinstance(features, (pd.DataFrame, pd.Series)) and features.index.has_duplicates:
        twice = features.index[features.index.duplicated()][0]
        raise ParameterError(f"features list item {show(twice)} more than once; give each item one vector.")
    if isinstance(features, pd.DataFrame):
        shown = set(every_shown)
        known = set(features.index)
        rows = [i for i in features.index if i in shown]
        table = {i: features.loc[i].to_numpy() for i in rows}
    elif isinstance(features, (Mapping, pd.Series)):
        known = set(features.keys())
        table = {i: features[i] for i in every_shown if i in known}
    else:
        raise ParameterError(f"The 'features' parameter of {_WHO} must be a mapping item -> vector or a DataFrame "
                             f"indexed by item. Got {type(features).__name__} instead.")
    missing = [i for i in every_shown if i not in known]
    if missing:
        raise ParameterError(f"{len(missing)} items shown in a top k have no features (for example "
                             f"{', '.join(show(i) for i in missing[:5])}).")
    unit = {}
    for i, raw in table.items():
        unit[i] = _unit(raw, i)
    dims = {v.shape for v in unit.values()}
    if len(dims) > 1:
        raise ParameterError(f"features must all have one length; got lengths {sorted(d[0] for d in dims)}.")

    def cosine(a, b) -> float:
        return float(unit[a] @ unit[b])

    cosine.unit = unit  # type: ignore[attr-defined]  # the unit vectors: _diversity uses them a query at a time
    return cosine


def _unit(raw, item) -> np.ndarray:
    """The feature vector of ``item`` scaled to norm 1, scale-safely: divided by its largest absolute
    value first, so that vectors of 1e-170 (whose squares underflow to a norm of 0) or of 1e200
    (whose norm overflows) have the direction they have."""
    import numbers

    try:
        v = np.asarray(raw)
        if v.dtype.kind not in "biuf" and not all(isinstance(x, numbers.Real) for x in v.ravel()):
            raise TypeError("text or other values")
        v = v.astype(np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"features of item {show(item)} are not a vector of numbers ({exc}).") from None
    if v.dtype.kind == "b" or not np.isfinite(v).all():
        raise ParameterError(f"features of item {show(item)} hold NaN or infinite values: the cosine similarity "
                             "is undefined.")
    top = float(np.abs(v).max()) if v.size else 0.0
    if top == 0:
        raise ParameterError(f"features of item {show(item)} are all 0 (norm 0.0): the cosine similarity is undefined.")
    v = v / top
    return v / float(np.linalg.norm(v))


def _similarity(sim: Callable, a, b) -> float:
    """``sim(a, b)`` as a finite real number; anything else is refused, naming the pair."""
    import numbers

    try:
        value = sim(a, b)
    except Exception as exc:  # the user's function: its error, with the pair that raised it
        raise ParameterError(f"similarity({show(a)}, {show(b)}) raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)) or not np.isfinite(float(value)):
        raise ParameterError(f"similarity must return a finite number; similarity({show(a)}, {show(b)}) returned "
                             f"{show(value)} ({type(value).__name__}).")
    number = float(value)
    if not -1 - 1e-9 <= number <= 1 + 1e-9:  # diversity is 1 - sim: a distance in [0, 2]
        raise ParameterError(f"similarity must return a value in [-1, 1] (a cosine; 1 - similarity is the distance "
                             f"diversity averages); similarity({show(a)}, {show(b)}) returned {show(value)}.")
    return number


def _diversity(s: pd.DataFrame, sim: Callable, expected: bool) -> float:
    """Mean over queries with at least two items shown of the expected mean pairwise ``1 - sim``.

    Two candidates are both in the top k with probability ``p_i p_j``, or, in one tie group of
    ``e`` members that takes ``s`` slots under ``ties="expected"``, ``s (s - 1) / (e (e - 1))``."""
    unit = getattr(sim, "unit", None)
    if unit is not None:
        return _cosine_diversity(s, unit, expected)
    values = []
    for _, part in s.groupby("query", sort=False):
        L = int(part["L"].iloc[0])
        if L < 2:
            continue
        items = part["item"].tolist()
        p = part["p"].to_numpy()
        g = part["g"].to_numpy()
        e = part["e"].to_numpy()
        total = 0.0
        for a in range(len(items)):
            for b in range(a + 1, len(items)):
                if expected and g[a] == g[b]:
                    slots = round(p[a] * e[a])
                    both = slots * (slots - 1) / (e[a] * (e[a] - 1))
                else:
                    both = p[a] * p[b]
                if both > 0:
                    total += both * (1.0 - _similarity(sim, items[a], items[b]))
        values.append(total / (L * (L - 1) / 2))
    return float(np.mean(values)) if values else float("nan")


#: Pairs of shown candidates handled at once by :func:`_cosine_diversity`.
PAIRS_AT_ONCE = 1 << 21


def _cosine_diversity(s: pd.DataFrame, unit: dict, expected: bool) -> float:
    """:func:`_diversity` for the cosine over feature vectors: every pair of candidates of a query
    at once, queries in chunks (``s`` holds each query's rows together, queries ascending)."""
    s = s[s["L"].to_numpy() >= 2]
    if not len(s):
        return float("nan")
    q = s["query"].to_numpy()
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    ends = np.r_[starts[1:], len(q)]
    L = s["L"].to_numpy()[starts].astype(np.float64)
    V = np.stack([unit[i] for i in s["item"]])
    p, g, e = s["p"].to_numpy(), s["g"].to_numpy(), s["e"].to_numpy()
    filled = np.round(p * e)
    within = filled * (filled - 1) / np.where(e > 1, e * (e - 1), 1)  # both in one tie group's slots
    query_of = np.repeat(np.arange(len(starts)), ends - starts)
    partners = np.repeat(ends, ends - starts) - np.arange(len(q)) - 1  # later rows of the same query
    totals = np.zeros(len(starts))
    lo = 0
    while lo < len(q):  # rows lo..hi: about PAIRS_AT_ONCE pairs
        hi = lo + 1 + int(np.searchsorted(np.cumsum(partners[lo:]), PAIRS_AT_ONCE))
        hi = min(hi, len(q))
        count = partners[lo:hi]
        ia = np.repeat(np.arange(lo, hi), count)
        ib = ia + 1 + np.arange(len(ia)) - np.repeat(np.cumsum(count) - count, count)
        pair = p[ia] * p[ib]
        if expected:
            pair = np.where(g[ia] == g[ib], within[ia], pair)
        dis = 1.0 - np.einsum("ij,ij->i", V[ia], V[ib])
        totals += np.bincount(query_of[ia], weights=pair * dis, minlength=len(starts))
        lo = hi
    return float(np.mean(totals / (L * (L - 1) / 2)))
