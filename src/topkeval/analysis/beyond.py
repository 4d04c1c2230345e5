"""Beyond accuracy: what each model shows in its top k, per query and over all of them.

The recommender teams' view of a model (RecTools, RePlay, RecBole, Evidently, Microsoft
Recommenders, LensKit): novelty, popularity, diversity, serendipity... Every number is read off
the rows again through ``Evaluation.sources``, ranked as the kernel ranks them
(:func:`topkeval.kernels.beyond.ranked_rows`), under the conventions of the evaluation.

Which candidates are "in the top k" of a query: those of the evaluated queries (queries skipped as
empty are left out, as in ``per_query``) that survive ``score_threshold`` and rank within the
first k under the tie rule; a list holds ``L = min(k, n)`` of them. Under ``ties="expected"`` each
candidate is in the top k with its probability ``p`` (the exact share of the orders of its tie
group that put it there), and every per-query value is the exact mean over all orders of the tied
candidates; the catalogue-level values (coverage, Gini, entropy, personalization) are those of
the expected exposures, except coverage and personalization, which are exact expectations too.

Two entry points: :func:`with_beyond` adds the per-query families (registry entries with
``beyond="query"``, :mod:`topkeval.metrics.beyond`) to an evaluation as metric columns, so that
means, compare, summary_ci, segments, weights and the report treat them as any metric;
:func:`beyond_accuracy` gives one row of means per model, the catalogue-level families included
(they have no per-query value). Everything runs on arrays: one ranking kernel per model and cutoff,
then per-query sums (``np.bincount``) and small kernels (:mod:`topkeval.kernels.beyond`); only a
``similarity=`` function is called pair by pair, in Python.

The formulas are not here: each family's is its registered function in
:mod:`topkeval.metrics.beyond`, found through the one registry (``FAMILIES[family].function``).
This module supplies what they read: each model's top k per log and cutoff (:class:`_TopK`, the
shown rows' statistics and what the caller's inputs give of their items) and each model's lists
all together (:class:`_Exposures`, for the catalogue-level families).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import NoReturn

import numpy as np
import pandas as pd

from ..engine.rules import RanksAgain
from ..errors import ParameterError, show, warn
from ..metrics import FAMILIES
from ..metrics.registry import exact_under

_WHO = "beyond_accuracy"

#: the columns of beyond_accuracy without metrics=: as before issue 25
DEFAULT_COLUMNS = ("coverage", "novelty", "popularity", "gini")


@dataclass
class Inputs:
    """What the caller gave besides the lists (each checked where it is read, below)."""

    popularity: object = None
    features: object = None
    similarity: Callable | None = None
    catalog: object = None
    categories: object = None
    history: object = None
    baseline: str | None = None
    owner: str = _WHO
    distance: Callable | None = None  # (item, item) -> a distance >= 0, for diversity (RecTools' distance calculators)


#: what to pass for an input a family reads without a default (the registry's ``reads``)
_READ = {"baseline": "'<model>' (a model of these results, whose top k each list is compared with)"}


# ------------------------------------------------------------------------------------------------
# entry points


def with_beyond(evaluation, metrics, inputs: Inputs):
    """``evaluation`` with the per-query beyond-accuracy metrics ``metrics`` as more columns: its
    summary (weighted with ``weight=``), per-query table, ``info["metrics"]`` and
    ``info["metric_names"]``; and a ``rerun`` that evaluates them at other cutoffs too (curves)."""
    from ..engine.aggregate import weighted_summary
    from ..metrics.names import labelled_metrics

    labels, parsed = labelled_metrics(metrics)
    for label, m in zip(labels, parsed):
        beyond = m.info.beyond
        if beyond is None:
            raise ParameterError(f"{label} is not a beyond-accuracy metric: evaluate it with tk.evaluate (with_beyond "
                                 "adds metrics that read each top k's items, such as novelty@10).")
        if beyond == "catalog":
            raise ParameterError(f"{label} describes a model's lists all together, not each query: it has no per-query "
                                 f"value. Ask Results.beyond_accuracy(metrics=[{label!r}]) for it.")
        if label in evaluation.metrics:
            raise ParameterError(f"{label} is evaluated already: ask for it once.")
    taken = [label for label, m in zip(labels, parsed)
             if str(m) in {str(known) for known in evaluation.metric_objects.values()}]
    if taken:
        raise ParameterError(f"{taken[0]} is evaluated already (under another name): ask for it once.")
    evaluation.require_rows(inputs.owner)
    defaults: dict = {}
    values = compute(evaluation, list(zip(labels, parsed)), inputs, defaults)
    base = evaluation.per_query
    table = base.copy(deep=False)
    models = table["model"].to_numpy(object)
    queries = table[evaluation.query_name].to_numpy(object)
    for label, _ in zip(labels, parsed):
        column = np.full(len(table), np.nan)
        for model, (ids, per) in values.items():
            at = np.flatnonzero(models == model)
            if not len(at):
                continue
            column[at] = _aligned(ids, per[label], queries[at])
        table[label] = column
    summary = pd.concat([evaluation.summary,
                         weighted_summary(table, evaluation.models, list(labels), evaluation.weight)], axis=1)
    summary.index.name = "model"
    info = dict(evaluation.info)
    info["metrics"] = [*evaluation.metrics, *labels]
    info["metric_names"] = {**(info.get("metric_names") or {}), **{label: str(m) for label, m in zip(labels, parsed)}}
    if defaults:  # what was read in place of an input not given, said (outputs/text.py: default_lines)
        info["beyond_defaults"] = {**(info.get("beyond_defaults") or {}), **defaults}
    rerun = evaluation.rerun
    return replace(evaluation, summary=summary, info=info, _per_query=[table],
                   metric_objects={**evaluation.metric_objects, **dict(zip(labels, parsed))},
                   rerun=_Again(rerun, inputs) if rerun is not None else None)


@dataclass(frozen=True, eq=False, repr=False)
class _Again:
    """The same evaluation at other metrics (curves): the beyond-accuracy ones here, with the same
    inputs (an object holding them, so that the results pickle where the inputs do)."""

    rerun: Callable
    inputs: Inputs

    def __call__(self, names):
        from ..metrics.names import labelled_metrics

        lab, met = labelled_metrics(names)
        mine = [n for n, m in zip(lab, met) if m.info.beyond]
        # the list-only metrics are the plan's (a plan of them alone is valid), added here
        first = self.rerun(names, lists=True) if mine else self.rerun(names)
        return ordered(with_beyond(first, mine, self.inputs), lab) if mine else first


def ordered(evaluation, labels):
    """``evaluation`` with exactly the metric columns ``labels``, in that order."""
    out = without(evaluation, [n for n in evaluation.metrics if n not in labels])
    info = dict(out.info)
    info["metrics"] = list(labels)
    per_query = out.per_query
    others = [c for c in per_query.columns if c not in labels]
    return replace(out, summary=out.summary[list(labels)], info=info, _per_query=[per_query[others + list(labels)]],
                   metric_objects={label: out.metric_objects[label] for label in labels})


def without(evaluation, labels):
    """``evaluation`` without the metric columns ``labels``."""
    keep = [n for n in evaluation.metrics if n not in labels]
    info = dict(evaluation.info)
    info["metrics"] = keep
    info["metric_names"] = {n: c for n, c in (info.get("metric_names") or {}).items() if n in keep}
    per_query = evaluation.per_query.drop(columns=[n for n in labels if n in evaluation.per_query.columns])
    return replace(evaluation, summary=evaluation.summary[keep], info=info, _per_query=[per_query],
                   metric_objects={n: evaluation.metric_objects[n] for n in keep})


def beyond_accuracy(evaluation, k: int = 10, inputs: Inputs | None = None, metrics=None) -> pd.DataFrame:
    """One row per model: the mean over queries of each per-query family and each catalogue-level
    value (see :meth:`topkeval.Results.beyond_accuracy` for the definitions)."""
    from ..metrics.names import labelled_metrics, parse_metric

    inputs = inputs or Inputs()
    if evaluation.weight or evaluation.by:
        warn("beyond_accuracy counts every evaluated query once, over all of them: it ignores weight= and "
             "by= (Results.with_beyond gives per-query values, which segments and weights apply to).")
    if metrics is None:
        names = [f"{n}@{k}" for n in DEFAULT_COLUMNS]
        if inputs.features is not None or inputs.similarity is not None:
            names.append(f"diversity@{k}")
        labels, parsed = tuple(names), tuple(parse_metric(n) for n in names)
    else:
        labels, parsed = labelled_metrics(metrics)
        for label, m in zip(labels, parsed):
            if m.info.beyond is None:
                raise ParameterError(f"{label} is not a beyond-accuracy metric: its means are in Results.summary "
                                     "(tk.evaluate(..., metrics=[...])).")
    per_query = [(label, m) for label, m in zip(labels, parsed) if m.info.beyond == "query"]
    catalog = [(label, m) for label, m in zip(labels, parsed) if m.info.beyond == "catalog"]
    defaults: dict = {}
    values = compute(evaluation, per_query + catalog, inputs, defaults)
    rows = {}
    for model in evaluation.models:
        ids, per = values.get(model, (np.zeros(0, object), {}))
        row = {}
        for label, m in zip(labels, parsed):
            v = per.get(label)
            if m.info.beyond == "catalog":
                row[label] = float(v) if v is not None else float("nan")
            else:
                row[label] = _nanmean(v) if v is not None else float("nan")
        rows[model] = row
    out = pd.DataFrame.from_dict(rows, orient="index", columns=list(labels))
    out.index.name = "model"
    out.attrs["defaults"] = defaults  # what was read in place of an input not given (as info["beyond_defaults"])
    out.attrs["metric_names"] = {label: str(m) for label, m in zip(labels, parsed)}  # as info["metric_names"]
    return out


def _nanmean(v: np.ndarray) -> float:
    ok = ~np.isnan(v)
    return float(v[ok].mean()) if ok.any() else float("nan")


def _aligned(ids: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values`` (one per query id of ``ids``) in the order of ``wanted``; NaN for a query not
    in ``ids`` (a judged query a run lacks, scored by missing_queries="zero": it shows nothing)."""
    if len(ids) == len(wanted) and (ids is wanted or np.array_equal(ids, wanted)):
        return values
    at = pd.Index(ids).get_indexer(pd.Index(wanted))
    out = np.full(len(wanted), np.nan)
    found = at >= 0
    out[found] = values[at[found]]
    return out


# ------------------------------------------------------------------------------------------------
# the lists


@dataclass
class _Part:
    """One model's top k within one log: its shown rows (``p > 0``) and per-query counts."""

    log_index: int
    rows: np.ndarray  # the rows shown, grouped by query, each query's in rank order
    qix: np.ndarray  # their query (index into the log's queries)
    p: np.ndarray
    g: np.ndarray
    e: np.ndarray
    b: np.ndarray
    rel: np.ndarray  # relevant rows among them
    L: np.ndarray  # per query of the log: min(k, candidates at or above score_threshold)
    keep: np.ndarray  # per query of the log: evaluated (not skipped as empty)
    R: np.ndarray  # per query of the log: relevant items
    soff: np.ndarray  # shown rows of query q: soff[q]:soff[q + 1]
    item: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # global item codes


class _Lists:
    """Each model's top k at each cutoff, over every log of the evaluation, read once."""

    def __init__(self, evaluation, owner: str):
        conv = evaluation.conventions
        sources = evaluation.sources
        # the backends that can rank a query's rows again (query_ranking: side_by_side's) keep them
        if conv is None or sources is None or not isinstance(evaluation.backend, RanksAgain):
            raise ParameterError(f"{owner} reads each model's top k again, which these results do not keep "
                                 "(a score matrix, a Spark DataFrame, a file streamed with keep_per_query=False, or "
                                 "per-query values given to Results.from_per_query): evaluate the log as a table in "
                                 "memory, with item='<column>'.")
        self.conv = conv
        self.owner = owner
        self.own_rows = bool(getattr(evaluation, "own_rows", False))
        self.logs = list(sources())
        for log, _ in self.logs:
            if not log.has_items:
                raise ParameterError(f"{owner} counts the items of each top k, which these results do not have: "
                                     "pass item='<column>' to evaluate.")
        self.models = list(evaluation.models)
        self.inputs_baseline: str | None = None
        self.parts: dict[tuple[str, int], list[_Part]] = {}
        self.ids: pd.Index = pd.Index([], dtype=object)
        self._space: dict[int, pd.Index] = {}

    def read(self, ks) -> None:
        """Rank every model at every cutoff of ``ks``, then give every shown item a global code."""
        from ..engine.rules import comparable_scores, threshold, tie_rule
        from ..kernels.beyond import ranked_rows

        conv = self.conv
        thr = threshold(conv)
        for index, (log, R) in enumerate(self.logs):
            rel = log.relevant(conv)
            R = log.per_query_sum(rel) if R is None else np.asarray(R)
            keep = R > 0 if conv.empty_queries == "skip" else np.ones(log.n_queries, bool)
            grades = log.grades.astype(np.float64, copy=False)
            codes = self._local_codes(index)
            for model in self.models:
                if model not in log.scores:
                    continue
                scores = comparable_scores(log.scores[model], conv)
                tie, items = tie_rule(log, conv, scores)
                n_kept = log.per_query_sum(scores >= thr)
                for k in ks:
                    soff, rows, qix, ps, gs, es, bs, rels, its = ranked_rows(
                        log.offsets, scores, rel, grades, items, codes, thr, tie, k,
                        np.full(log.n_queries, k, np.int64), keep)
                    part = _Part(index, rows, qix, ps, gs, es, bs, rels, np.minimum(k, n_kept).astype(np.int64),
                                 keep, R, soff, its)
                    self.parts.setdefault((model, k), []).append(part)
        self._codes()

    def _local_codes(self, index: int) -> np.ndarray:
        """Per row of log ``index``: a code of its item in the log's own table of ids
        (``self._space[index]``): the log's codes when they are dense (text ids, or small
        non-negative integers), else a factorization of them."""
        log = self.logs[index][0]
        raw = log.items
        if log.item_labels is not None:
            self._space[index] = pd.Index(log.item_labels, dtype=object)
            return raw
        top = int(raw.max()) if len(raw) else -1
        if len(raw) and int(raw.min()) >= 0 and top < 4 * len(raw) + 1024:
            self._space[index] = pd.Index(np.arange(top + 1), dtype=object)
            return raw
        local, uniques = pd.factorize(raw)
        self._space[index] = pd.Index(log.item_ids(uniques), dtype=object)
        return local.astype(np.int64)

    def _codes(self) -> None:
        """Global item codes: the items shown by some model at some cutoff, numbered 0..n-1 (ids of
        every log in one index)."""
        per_log: list[list[_Part]] = [[] for _ in self.logs]
        for parts in self.parts.values():
            for part in parts:
                per_log[part.log_index].append(part)
        kept = []
        for index, parts in enumerate(per_log):
            space = self._space.get(index, pd.Index([], dtype=object))
            used = np.zeros(len(space), bool)
            for part in parts:
                used[part.item] = True
            remap = np.cumsum(used) - 1
            for part in parts:
                part.item = remap[part.item]
            kept.append(space[used])
        if len(kept) == 1:
            self.ids = kept[0]
            return
        every = pd.Index(np.concatenate([i.to_numpy(object) for i in kept]) if kept else [], dtype=object).unique()
        self.ids = every
        for index, parts in enumerate(per_log):
            to_global = every.get_indexer(kept[index])
            for part in parts:
                part.item = to_global[part.item]

    def query_ids(self, model: str, k: int) -> np.ndarray:
        """The evaluated query ids of ``model``, in the order of its logs."""
        ids = [self.logs[part.log_index][0].queries[part.keep] for part in self.parts.get((model, k), [])]
        return np.concatenate(ids) if ids else np.zeros(0, object)


# ------------------------------------------------------------------------------------------------
# what the caller gave: popularity, catalogue, features, categories, history


class _Given:
    """The caller's inputs made into arrays over the global item codes (built when first needed)."""

    def __init__(self, lists: _Lists, inputs: Inputs, query: str):
        self.lists = lists
        self.inputs = inputs
        self.query = query
        self.owner = inputs.owner
        if inputs.features is not None and inputs.similarity is not None:
            raise ParameterError(f"{self.owner} takes features= or similarity=, not both.")
        if inputs.distance is not None and not callable(inputs.distance):
            raise ParameterError(f"distance must be a function (item, item) -> float >= 0, got "
                                 f"{type(inputs.distance).__name__}.")
        if inputs.similarity is not None and not callable(inputs.similarity):
            raise ParameterError(f"similarity must be a function (item, item) -> float, got "
                                 f"{type(inputs.similarity).__name__}.")
        self._cache: dict = {}
        #: the defaults read in place of an input not given (info["beyond_defaults"]): what each was
        self.defaults: dict = {}

    def once(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # popularity ----------------------------------------------------------------------------------

    def popularity(self) -> tuple[pd.Series, float, str]:
        """(share of each item with one, the share a cold item counts as for novelty, where from)."""
        return self.once("pop", self._popularity)

    def _popularity(self):
        given = self.inputs.popularity
        if given is None and self.inputs.history is not None:
            hq, hi = self.history_pairs()
            n = len(pd.unique(hq))
            if n == 0:
                return pd.Series(dtype=float), math.nan, "history"
            counts = pd.Series(hi).value_counts(sort=False)
            return pd.Series(counts.to_numpy() / n, index=pd.Index(counts.index, dtype=object)), 1.0 / n, "history"
        if given is None:
            if self.lists.own_rows:
                raise _NoDefault("popularity")
            pop, cold = _log_popularity(self.lists)
            self.defaults["popularity"] = {"from": "relevant candidates", "items": len(pop),
                                           "queries": 0 if math.isnan(cold) else round(1.0 / cold)}
            return pop, cold, "relevant candidates"
        if isinstance(given, pd.Series):
            pop = given
        elif isinstance(given, Mapping):
            pop = pd.Series(list(given.values()), index=pd.Index(list(given.keys()), dtype=object), dtype=object)
        else:
            raise ParameterError(f"The 'popularity' parameter of {self.owner} must be a mapping or a pandas Series "
                                 f"item -> share of queries. Got {type(given).__name__} instead.")
        pop = pd.Series(_numbers(pop.to_numpy(), "popularity", pop.index), index=pd.Index(pop.index, dtype=object))
        if pop.index.has_duplicates:
            twice = pop.index[pop.index.duplicated()][0]
            raise ParameterError(f"popularity gives item {show(twice)} more than one share; give each item one.")
        bad = pop[~((pop > 0) & (pop <= 1))]
        if len(bad):
            raise ParameterError(f"popularity must be a share in (0, 1] for every item (novelty takes -log2 of it); "
                                 f"item {show(bad.index[0])} has {show(bad.iloc[0])}. Give items never seen a small "
                                 "share (RecTools counts them as seen once).")
        matched(self.lists.ids, pop.index, what="items shown in a top k", where="popularity=", every=True,
                absent="have no popularity", fix="Give every item a share in (0, 1].")
        return pop, math.nan, "given"

    def shares(self) -> np.ndarray:
        """Per global item: its share (NaN without one)."""
        return self.once("shares", lambda: _on(self.popularity()[0], self.lists.ids))

    def novelty_values(self) -> np.ndarray:
        """Per global item: -log2 of its share, a cold item counted at the cold share."""
        def build():
            share = self.shares()
            cold = self.popularity()[1]
            with np.errstate(divide="ignore"):
                return -np.log2(np.where(np.isnan(share), cold, share))
        return self.once("novelty", build)

    def tail(self, cut: float) -> np.ndarray:
        """Per global item: 1 if it is among the least popular ``max(floor(cut n), 1)`` of the n items
        with a popularity (ties at the cut: the smaller item id first; RecBole TailPercentage)."""
        def build():
            pop = self.popularity()[0]
            if not len(pop):
                return np.zeros(len(self.lists.ids))
            try:
                pop = pop.sort_index(kind="stable")
            except TypeError:  # ids of mixed kinds: their order as given
                pass
            order = np.argsort(pop.to_numpy(np.float64), kind="stable")
            size = max(int(len(pop) * cut), 1)
            tail = pd.Index(pop.index[order[:size]], dtype=object)
            return (tail.get_indexer(self.lists.ids) >= 0).astype(np.float64)
        return self.once(("tail", cut), build)

    def quantiles(self) -> np.ndarray:
        """Per global item: LensKit's popularity quantile, the average ascending rank of its share among
        the items with one over their number (1: the most popular), 0 without one."""
        def build():
            pop = self.popularity()[0]
            ranks = pop.rank(method="average") / len(pop) if len(pop) else pop
            out = _on(ranks, self.lists.ids)
            return np.where(np.isnan(out), 0.0, out)
        return self.once("quantiles", build)

    def any_user_chance(self, n_items: int) -> np.ndarray:
        """Per global item: RecTools' ``(N + 1 - popularity rank) / N`` (dense ranks of the shares,
        1 the most popular), 0 for an item without popularity (cold)."""
        def build():
            pop = self.popularity()[0]
            rank = pop.rank(method="dense", ascending=False)
            out = (n_items + 1 - _on(rank, self.lists.ids)) / n_items
            return np.where(np.isnan(out), 0.0, out)
        return self.once(("pu", n_items), build)

    # catalogue -------------------------------------------------------------------------------------

    def catalog_size(self) -> int:
        return self.once("catalog", self._catalog_size)

    def _catalog_size(self) -> int:
        catalog = self.inputs.catalog
        shown = self.lists.ids
        if catalog is None:
            if self.lists.own_rows:
                raise _NoDefault("catalog")
            ids = [pd.unique(pd.Series(log.item_ids(pd.unique(log.items)), dtype=object)) for log, _ in self.lists.logs]
            size = len(pd.unique(np.concatenate(ids))) if ids else 0
            self.defaults["catalog"] = {"from": "items of the table", "items": size}
            return size
        if isinstance(catalog, (int, np.integer)) and not isinstance(catalog, bool):
            size = int(catalog)
            if size < len(shown):
                raise ParameterError(f"catalog={size}, but the models show {len(shown)} distinct items in their top k: "
                                     "pass the catalogue size (at least that), or the catalogue's items.")
            return size
        if isinstance(catalog, (str, bytes)) or not hasattr(catalog, "__iter__"):
            raise ParameterError(f"The 'catalog' parameter of {self.owner} must be a number of items or a collection "
                                 f"of item ids. Got {catalog!r} instead.")
        try:
            known = pd.Index(list(set(catalog)), dtype=object)
        except TypeError as exc:
            raise ParameterError(f"The 'catalog' parameter of {self.owner} must be a number of items or a collection "
                                 f"of item ids (strings or numbers): {exc}.") from None
        matched(shown, known, what="items shown in a top k", where="catalog=", every=True,
                fix="Give catalog= every item of the catalogue.")
        return len(known)

    # features and similarity ---------------------------------------------------------------------------

    def units(self, ids: pd.Index, what: str = "items shown in a top k") -> np.ndarray:
        """Unit feature vectors of ``ids`` (one row each), scale-safely."""
        features = self.inputs.features
        if isinstance(features, (pd.DataFrame, pd.Series)) and features.index.has_duplicates:
            twice = features.index[features.index.duplicated()][0]
            raise ParameterError(f"features list item {show(twice)} more than once; give each item one vector.")
        if isinstance(features, pd.DataFrame):
            at = pd.Index(features.index, dtype=object).get_indexer(ids)
            missing = np.flatnonzero(at < 0)
            if len(missing):
                raise ParameterError(f"{len(missing)} {what} have no features (for example "
                                     f"{', '.join(show(ids[i]) for i in missing[:5])}).")
            try:
                block = features.to_numpy()[at] if len(at) else np.zeros((0, features.shape[1]))
                matrix = _matrix(block, ids)
            except ParameterError:
                raise
            return _unit_rows(matrix, ids)
        if isinstance(features, (Mapping, pd.Series)):
            keys = pd.Index(list(features.keys()), dtype=object)
            at = keys.get_indexer(ids)
            missing = np.flatnonzero(at < 0)
            if len(missing):
                raise ParameterError(f"{len(missing)} {what} have no features (for example "
                                     f"{', '.join(show(ids[i]) for i in missing[:5])}).")
            values = list(features.values()) if isinstance(features, Mapping) else list(features.to_numpy())
            vectors = [_vector(values[j], ids[i]) for i, j in enumerate(at)]
            lengths = sorted({len(v) for v in vectors})
            if len(lengths) > 1:
                raise ParameterError(f"features must all have one length; got lengths {lengths}.")
            matrix = np.stack(vectors) if vectors else np.zeros((0, 1))
            return _unit_rows(matrix, ids)
        raise ParameterError(f"The 'features' parameter of {self.owner} must be a mapping item -> vector or a "
                             f"DataFrame indexed by item. Got {type(features).__name__} instead.")

    def shown_units(self) -> np.ndarray:
        return self.once("units", lambda: self.units(self.lists.ids))

    def needs_similarity(self, label: str, distance: bool = False) -> None:
        """``label`` compares items: features= or similarity= (or, for ``distance``: diversity, distance=)."""
        if distance and self.inputs.distance is not None:
            return
        if self.inputs.features is None and self.inputs.similarity is None:
            if distance:
                raise ParameterError(f"{label} compares items: pass features= (item -> vector, for the cosine "
                                     "similarity), similarity= (a function (item, item) -> float in [-1, 1]) or "
                                     "distance= (a function (item, item) -> a distance >= 0, such as a Hamming "
                                     "distance).")
            raise ParameterError(f"{label} compares items: pass features= (item -> vector, for the cosine similarity) "
                                 "or similarity= (a function (item, item) -> float in [-1, 1]).")

    # categories ----------------------------------------------------------------------------------------

    def categories(self, label: str) -> np.ndarray:
        """Per global item: a category code."""
        def build():
            given = self.inputs.categories
            if given is None:
                raise ParameterError(f"{label} counts categories: pass categories= (a mapping or a pandas Series "
                                     "item -> category).")
            if isinstance(given, pd.Series):
                series = given
            elif isinstance(given, Mapping):
                series = pd.Series(list(given.values()), index=pd.Index(list(given.keys()), dtype=object),
                                   dtype=object)
            else:
                raise ParameterError(f"The 'categories' parameter of {self.owner} must be a mapping or a pandas Series "
                                     f"item -> category. Got {type(given).__name__} instead.")
            if series.index.has_duplicates:
                twice = series.index[series.index.duplicated()][0]
                raise ParameterError(f"categories give item {show(twice)} more than one category; give each item one.")
            if series.isna().any():
                raise ParameterError(f"categories give item {show(series.index[series.isna().to_numpy()][0])} no "
                                     "category (None or NaN): give every item one.")
            at = pd.Index(series.index, dtype=object).get_indexer(self.lists.ids)
            missing = np.flatnonzero(at < 0)
            if len(missing):
                raise ParameterError(f"{len(missing)} items shown in a top k have no category (for example "
                                     f"{', '.join(show(self.lists.ids[i]) for i in missing[:5])}).")
            try:
                codes, _ = pd.factorize(series.to_numpy(object))
            except TypeError as exc:
                raise ParameterError(f"categories must be hashable values (text or numbers): {exc}.") from None
            return codes[at].astype(np.int64)
        return self.once("categories", build)

    # history -------------------------------------------------------------------------------------------

    def history_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(query ids, item ids) of the queries' past interactions, each pair once."""
        return self.once("history", self._history_pairs)

    def _history_pairs(self):
        given = self.inputs.history
        query = self.query
        if isinstance(given, pd.DataFrame):
            if query not in given.columns or len(given.columns) != 2:
                raise ParameterError(f"history must hold two columns, the query column {query!r} (as in per_query) "
                                     f"and the item column; it has {', '.join(map(repr, map(str, given.columns)))}.")
            other = next(c for c in given.columns if c != query)
            frame = pd.DataFrame({"q": given[query].to_numpy(), "i": given[other].to_numpy()})
        elif isinstance(given, Mapping):
            qs, its = [], []
            for q, items in given.items():
                if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
                    raise ParameterError(f"history maps each query to a list of items; query {show(q)} has "
                                         f"{show(items)}.")
                for i in items:
                    qs.append(q)
                    its.append(i)
            frame = pd.DataFrame({"q": pd.Series(qs, dtype=object).infer_objects(),
                                  "i": pd.Series(its, dtype=object).infer_objects()})
        else:
            raise ParameterError(f"The 'history' parameter of {self.owner} must be a DataFrame of (query, item) rows or a "
                                 f"mapping query -> items. Got {type(given).__name__} instead.")
        if frame.isna().to_numpy().any():
            raise ParameterError("history has a missing query or item id (None or NaN): every row needs both.")
        try:
            frame = frame.drop_duplicates()
        except TypeError as exc:
            raise ParameterError(f"history ids must be hashable values (text or numbers): {exc}.") from None
        return frame["q"].to_numpy(), frame["i"].to_numpy()

    def needs_history(self, label: str) -> None:
        """``label`` reads each query's own past: history= given, and some query of the log in it."""
        if self.inputs.history is None:
            raise ParameterError(f"{label} compares each list with the query's past interactions: pass history= (a "
                                 f"DataFrame with the query column and an item column, or a mapping query -> items).")
        self.once("history queries", self._history_queries)

    def _history_queries(self) -> bool:
        queries = [pd.Index(log.queries, dtype=object) for log, _ in self.lists.logs]
        every = pd.Index(np.concatenate([q.to_numpy(object) for q in queries]) if queries else [], dtype=object)
        matched(every.unique(), pd.unique(self.history_pairs()[0]), what="queries of the log", where="history=",
                every=False)
        return True

    def check_history(self) -> None:
        """history= shares items with the log: with none of the log's items in it, its ids are not
        the log's (each item would count as never seen). The log's items, not only those some model
        shows: a model that shows only items never seen is taken, alone or beside others."""
        def check() -> bool:
            if not len(self.lists.ids):  # nothing shown: nothing read of the history's items
                return True
            ids = [pd.Index(log.item_ids(pd.unique(log.items)), dtype=object) for log, _ in self.lists.logs]
            every = pd.Index(np.concatenate([i.to_numpy(object) for i in ids]), dtype=object).unique()
            matched(every, pd.unique(self.history_pairs()[1]), what="items of the log", where="history=", every=False)
            return True
        self.once("history items", check)


class _NoDefault(Exception):
    """An input read by a metric, not given, whose default the rows cannot give: each model's rows are
    its own (a stacked table, runs with judgments apart), so that the items of all of them would make
    a model's number depend on the models beside it, and the items of its own rows are its own lists."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what

    def message(self, label: str) -> str:
        where = ("each model's rows here are its own (a stacked table with model=, or runs with judgments apart): "
                 "their items are the models' own lists, not the catalogue, and the items of all of them would make "
                 "a model's value depend on the models evaluated beside it")
        if self.what == "catalog":
            return (f"{label} divide{'s' * (' and ' not in label)} by the catalogue's size, which these results cannot "
                    f"tell: {where}. Pass catalog= (the catalogue's item ids, or its number of items).")
        return (f"{label} read{'s' * (' and ' not in label)} each item's popularity, which these results cannot tell: "
                f"{where}. Pass history= (the queries' past interactions, as RecTools' MeanInvUserFreq counts them) or "
                "popularity= (item -> share of queries).")


def _find(keys, wanted) -> np.ndarray:
    """The position in ``keys`` (ids) of each of ``wanted`` (-1 where absent). Ids match by value,
    as pandas' object indexes match them; integers on both sides by an int64 hash (10x faster on
    the millions of pairs of a history)."""
    keys, wanted = pd.Index(keys), pd.Index(wanted)
    if _integers(keys) and _integers(wanted):
        try:
            return pd.Index(keys.to_numpy(np.int64)).get_indexer(wanted.to_numpy(np.int64))
        except (OverflowError, ValueError):  # beyond int64
            pass
    return pd.Index(keys, dtype=object).get_indexer(pd.Index(wanted, dtype=object))


def matched(wanted, known, *, what: str, where: str, every: bool, absent: str = "", fix: str = "") -> np.ndarray:
    """The one id-matching path of the inputs given beside the log (``catalog=``, ``popularity=``,
    ``history=``): the position in ``known`` of each of ``wanted`` (-1 where absent), ids matching by
    value as :func:`_find` matches them (7 is not '7', '007' is not '7').

    Refused, with how many matched and how to fix it, when one of ``wanted`` is absent and each must
    be there (``every``: the catalogue, the popularity of each item shown), or when none of them is
    there (``every=False``: the history, where an item never seen is cold and a query may have no
    past, but where nothing in common is an id mismatch, whose numbers would be those of an empty
    history). ``what``: the ids wanted, in words ("items shown in a top k"); ``where``: the input
    (``"history="``, which the command line names as its flag); ``absent``: what an id missing lacks
    ("have no popularity"); ``fix``: what to do when some ids match, of the same kind."""
    wanted = pd.Index(wanted, dtype=object)
    if not len(wanted):
        return np.zeros(0, np.int64)
    at = _find(known, wanted)
    missing = np.flatnonzero(at < 0)
    if not len(missing) or (not every and len(missing) < len(wanted)):
        return at
    known = pd.Index(pd.unique(pd.Index(known, dtype=object)), dtype=object)
    example = ", ".join(show(wanted[i]) for i in missing[:5])
    if every:
        absent = absent or f"are not in {where}"
        if len(missing) == 1:  # one id: said in the singular
            what = what.replace("items", "item", 1).replace("queries", "query", 1)
            absent = absent.replace("are ", "is ", 1).replace("have ", "has ", 1)
        head = (f"{len(missing)} {what} {absent} (for example {example}); "
                f"{len(wanted) - len(missing)} of the {len(wanted)} match.")
    else:
        head = f"none of the {len(wanted)} {what} is in {where} (its {len(known)} distinct ids)."
    _refuse_ids(head, wanted, known, where, fix if len(missing) < len(wanted) else "")


def _refuse_ids(head: str, wanted: pd.Index, known: pd.Index, where: str, fix: str) -> NoReturn:
    """Raise ``head`` with what the two sides' ids look like and how to make them match."""
    def kind(ids: pd.Index) -> str:
        kinds = {"text" if isinstance(v, str) else "whole numbers" if isinstance(v, numbers.Integral)
                 and not isinstance(v, bool) else "numbers" if isinstance(v, numbers.Real) else type(v).__name__
                 for v in ids[:1000]}
        return " and ".join(sorted(kinds)) or "none"

    def some(ids: pd.Index) -> str:
        return ", ".join(show(v) for v in ids[:3]) + (", ..." if len(ids) > 3 else "")

    mine, theirs = kind(wanted), kind(known)
    if fix and mine == theirs:
        tail = f" {fix}"
    elif not len(known):
        tail = f" {where} has no ids: give the ids of the log."
    elif mine != theirs:
        tail = (f" The log's ids are {mine} ({some(wanted)}), those of {where} {theirs} ({some(known)}): ids match "
                f"by value and kind (7 is not '7'). Give {where} ids of the log's kind (a CSV file's ids are text as "
                "written to topkeval, numbers to pandas.read_csv without dtype=str).")
    else:
        tail = (f" The log's ids look like {some(wanted)}, those of {where} like {some(known)}: ids match as written "
                f"('007' is not '7'). Give {where} the log's ids.")
    raise ParameterError(head + tail)


def _integers(index: pd.Index) -> bool:
    if index.dtype.kind == "i":
        return True
    return index.dtype == object and index.inferred_type == "integer"


def _on(series: pd.Series, ids: pd.Index) -> np.ndarray:
    """``series`` (indexed by item id) at ``ids``, NaN where it has no value."""
    if not len(ids):
        return np.zeros(0)
    at = pd.Index(series.index, dtype=object).get_indexer(ids)
    out = np.full(len(ids), np.nan)
    found = at >= 0
    out[found] = series.to_numpy(np.float64)[at[found]]
    return out


def _log_popularity(lists: _Lists) -> tuple[pd.Series, float]:
    """By default, RecTools' MeanInvUserFreq over the log's relevant candidates: the share of the
    queries with a relevant candidate in which the item is relevant; a cold item counts once."""
    conv = lists.conv
    if len(lists.logs) == 1:  # (query, item) pairs are unique within a log: count item codes
        log = lists.logs[0][0]
        rows = np.flatnonzero(log.relevant(conv))
        if not len(rows):
            return pd.Series(dtype=float), math.nan
        n_queries = int(np.count_nonzero(log.per_query_sum(log.relevant(conv))))
        codes, counts = np.unique(log.items[rows], return_counts=True)
        return pd.Series(counts / n_queries, index=pd.Index(log.item_ids(codes), dtype=object)), 1.0 / n_queries
    pairs = []
    for log, _ in lists.logs:
        rows = np.flatnonzero(log.relevant(conv))
        q_of_row = np.searchsorted(log.offsets, rows, side="right") - 1
        pairs.append(pd.DataFrame({"query": pd.Series(log.queries[q_of_row], dtype=object),
                                   "item": pd.Series(log.item_ids(log.items[rows]), dtype=object)}))
    both = pd.concat(pairs, ignore_index=True).drop_duplicates() if pairs else pd.DataFrame({"query": [], "item": []})
    n_queries = both["query"].nunique()
    if n_queries == 0:
        return pd.Series(dtype=float), math.nan
    counts = both["item"].value_counts(sort=False)
    return pd.Series(counts.to_numpy() / n_queries, index=pd.Index(counts.index, dtype=object)), 1.0 / n_queries


def _numbers(values: np.ndarray, what: str, labels) -> np.ndarray:
    """``values`` as float64, refusing text (even "0.5"), booleans and anything else that is not a
    real number, naming the item."""
    values = np.asarray(values)
    if values.dtype.kind in "iuf":
        return values.astype(np.float64)
    for label, v in zip(labels, values):
        if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
            raise ParameterError(f"{what} must be numbers; item {show(label)} has {show(v)} "
                                 f"({type(v).__name__}). Convert them to numbers first.")
    return values.astype(np.float64)


def _vector(raw, item) -> np.ndarray:
    try:
        v = np.asarray(raw)
        if v.dtype.kind not in "biuf" and not all(isinstance(x, numbers.Real) for x in v.ravel()):
            raise TypeError("text or other values")
        if v.dtype.kind == "b" or any(isinstance(x, (bool, np.bool_)) for x in v.ravel()):
            raise TypeError("booleans")
        return v.astype(np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"features of item {show(item)} are not a vector of numbers ({exc}).") from None


def _matrix(block: np.ndarray, ids) -> np.ndarray:
    if block.dtype.kind in "iuf":
        return block.astype(np.float64)
    return np.stack([_vector(row, ids[i]) for i, row in enumerate(block)]) if len(block) else block.astype(float)


def _unit_rows(matrix: np.ndarray, ids) -> np.ndarray:
    """Each row scaled to norm 1, scale-safely: divided by its largest absolute value first, so that
    vectors of 1e-170 (whose squares underflow to a norm of 0) or of 1e200 (whose norm overflows)
    have the direction they have."""
    if not len(matrix):
        return np.zeros((0, matrix.shape[1] if matrix.ndim == 2 else 1))
    bad = ~np.isfinite(matrix).all(axis=1)
    if bad.any():
        raise ParameterError(f"features of item {show(ids[int(np.argmax(bad))])} hold NaN or infinite values: the "
                             "cosine similarity is undefined.")
    top = np.abs(matrix).max(axis=1) if matrix.shape[1] else np.zeros(len(matrix))
    zero = top == 0
    if zero.any():
        raise ParameterError(f"features of item {show(ids[int(np.argmax(zero))])} are all 0 (norm 0.0): the cosine "
                             "similarity is undefined.")
    scaled = matrix / top[:, None]
    return scaled / np.linalg.norm(scaled, axis=1)[:, None]


def _called(fn: Callable, name: str, a, b) -> float:
    """``fn(a, b)`` of the user's ``similarity=`` or ``distance=`` (``name``) as a finite real number; its
    error, or any other value, is refused, naming the pair."""
    try:
        value = fn(a, b)
    except Exception as exc:  # the user's function: its error, with the pair that raised it
        raise ParameterError(f"{name}({show(a)}, {show(b)}) raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)) or not np.isfinite(float(value)):
        raise ParameterError(f"{name} must return a finite number; {name}({show(a)}, {show(b)}) returned "
                             f"{show(value)} ({type(value).__name__}).")
    return float(value)


def _similarity(sim: Callable, a, b) -> float:
    """``sim(a, b)`` as a finite real number in [-1, 1]; anything else is refused, naming the pair."""
    number = _called(sim, "similarity", a, b)
    if not -1 - 1e-9 <= number <= 1 + 1e-9:  # diversity is 1 - sim: a distance in [0, 2]
        raise ParameterError(f"similarity must return a value in [-1, 1] (a cosine; 1 - similarity is the distance "
                             f"diversity averages); similarity({show(a)}, {show(b)}) returned {show(number)}.")
    return number


def _distance(dist: Callable, a, b) -> float:
    """``dist(a, b)`` as a finite real number >= 0 (a distance; any size: RecTools' Hamming distance
    counts the features that differ); anything else is refused, naming the pair."""
    number = _called(dist, "distance", a, b)
    if number < 0:
        raise ParameterError(f"distance must return a value >= 0 (a distance: diversity averages it over the pairs "
                             f"of a list); distance({show(a)}, {show(b)}) returned {show(number)}.")
    return number


# ------------------------------------------------------------------------------------------------
# the values


def compute(evaluation, metrics, inputs: Inputs, defaults: dict | None = None) -> dict:
    """``{model: (query ids, {label: per-query values or, for a catalogue-level family, one value})}``;
    ``defaults``, when given, receives what was read in place of an input not given
    (``{"catalog": {...}, "popularity": {...}}``: the same for every model, by construction)."""
    lists = _Lists(evaluation, inputs.owner)
    given = _Given(lists, inputs, evaluation.query_name)
    conv = lists.conv
    if inputs.baseline is not None and inputs.baseline not in lists.models:
        from ..errors import did_you_mean

        raise ParameterError(f"baseline {inputs.baseline!r} is not a model of these results."
                             f"{did_you_mean(str(inputs.baseline), lists.models)}")
    for label, m in metrics:  # what each family declares (topkeval.metrics.beyond): its tie rules, its inputs
        inexact = exact_under(m, conv.ties)
        if inexact is not None:
            allowed, why = inexact
            raise ParameterError(f"{label} is not computed exactly under ties={conv.ties!r}" + (f" ({why})" if why else "")
                                 + f": pass ties= one of {', '.join(repr(t) for t in allowed)}.")
        for name in m.info.reads:
            if getattr(inputs, name) is None:
                raise ParameterError(f"{label} reads {name}=, which has no default: pass {name}={_READ.get(name, '...')}.")
    lists.read(sorted({m.k for _, m in metrics}))
    lists.inputs_baseline = inputs.baseline
    # what was given is checked whatever the metrics read of it
    if inputs.history is not None:
        given.check_history()
    if inputs.popularity is not None or inputs.history is not None:
        given.popularity()
    if inputs.features is not None:
        given.shown_units()
    if inputs.categories is not None:
        given.categories("categories")
    if inputs.catalog is not None:
        given.catalog_size()
    out: dict = {}
    missing: dict[str, list[str]] = {}  # input -> the labels that read it, without a default
    for model in lists.models:
        per: dict = {}
        ids = None
        for label, m in metrics:
            parts = lists.parts.get((model, m.k), [])
            if ids is None:
                ids = lists.query_ids(model, m.k)
            formula = FAMILIES[m.family].function  # the family's registered formula (topkeval.metrics.beyond)
            try:
                if m.info.beyond == "catalog":
                    per[label] = formula(_Exposures(parts, lists, given), m, conv)
                else:
                    per[label] = np.concatenate([formula(_TopK(part, model, label, m.k, lists, given), m, conv)
                                                 for part in parts]) if parts else np.zeros(0)
            except _NoDefault as no:
                labels = missing.setdefault(no.what, [])
                labels += [label] if label not in labels else []
        if missing:  # every input missing, said at once
            raise ParameterError(" ".join(_NoDefault(what).message(" and ".join(labels))
                                          for what, labels in missing.items()))
        out[model] = (ids if ids is not None else np.zeros(0, object), per)
    if defaults is not None:
        defaults.update(given.defaults)
    return out


class _TopK:
    """One model's top k in one log, as the formulas of :mod:`topkeval.metrics.beyond` read it: the
    shown rows' statistics (of :class:`_Part`) and, per shown row or per query, what the caller's
    inputs give (each input checked, and built once, where first read)."""

    def __init__(self, part: _Part, model: str, label: str, k: int, lists: _Lists, given: _Given):
        self.part, self.model, self.label, self.lists, self.given = part, model, label, lists, given
        self._k = k
        self.log = lists.logs[part.log_index][0]
        self.qix, self.p, self.g, self.e, self.b = part.qix, part.p, part.g, part.e, part.b
        self.rel, self.L, self.keep, self.R, self.soff, self.item = part.rel, part.L, part.keep, part.R, part.soff, part.item

    # per shown row: what the inputs give of its item
    def novelty_values(self) -> np.ndarray:
        return self.given.novelty_values()[self.item]

    def shares(self) -> np.ndarray:
        return self.given.shares()[self.item]

    def tail(self, share: float) -> np.ndarray:
        return self.given.tail(share)[self.item]

    def quantiles(self) -> np.ndarray:
        return self.given.quantiles()[self.item]

    def categories(self) -> np.ndarray:
        return self.given.categories(self.label)[self.item]

    def any_user_chance(self, n_items: int) -> np.ndarray:
        return self.given.any_user_chance(n_items)[self.item]

    def catalog_size(self) -> int:
        return self.given.catalog_size()

    # per query
    def needs_history(self) -> None:
        self.given.needs_history(self.label)

    def seen_in_history(self) -> tuple[np.ndarray, np.ndarray]:
        """(per shown row: 1.0 if the query's history holds the item, per query of the log: whether the
        query has a history)."""
        return _seen(self.part, self.log, self.lists, self.given)

    def history_similarities(self) -> tuple[np.ndarray, np.ndarray]:
        """(per shown row: for a relevant one, the sum of its similarity to its query's history items,
        per query of the log: its history's size): the cosines of features= (a kernel), or the
        caller's similarity= called pair by pair."""
        given = self.given
        given.needs_history(self.label)
        given.needs_similarity(self.label)
        if given.inputs.features is not None:
            from ..kernels.beyond import row_dots

            hist, count = _history_sums(self.part, self.log, given)
            relevant = np.flatnonzero(self.rel)
            dots = np.zeros(len(relevant))
            row_dots(self.qix[relevant], self.item[relevant], given.shown_units(), hist, dots)
            sims = np.zeros(len(self.qix))
            sims[relevant] = dots
            return sims, count
        return _history_sims_by_function(self.part, self.log, self.lists, given)

    def diversity(self) -> np.ndarray:
        """Per evaluated query: the mean over the pairs of items shown of 1 - similarity (or of the
        distance), each pair weighted by the chance that both are shown."""
        self.given.needs_similarity(self.label, distance=True)
        return _diversity(self.part, self.log, self.lists, self.given)

    def baseline_overlap(self) -> tuple[np.ndarray, np.ndarray]:
        """Per query of the log: the expected number of items shown by both this model and the
        baseline (the two models' orders of tied candidates independent), and the baseline's L."""
        return _baseline_overlap(self.part, self._k, self.lists)

    def auc_numerators(self) -> tuple[np.ndarray, np.ndarray]:
        """Per query of the log: RecTools' partial AUC and PAP numerators (every relevant item, and the
        first min(k, R) relevant, against the top k non-relevant ones); once per model, log and k."""
        from ..engine.rules import comparable_scores, threshold, tie_rule
        from ..kernels.beyond import auc_numerators

        lists, log, k = self.lists, self.log, self._k
        conv = lists.conv
        key = (self.model, self.part.log_index, k)
        cache = lists.__dict__.setdefault("_auc", {})
        if key not in cache:
            scores = comparable_scores(log.scores[self.model], conv)
            tie, items = tie_rule(log, conv, scores)
            thr = threshold(conv)
            rel = log.relevant(conv)
            depth = log.per_query_sum(rel & (scores >= thr)).astype(np.int64) + k
            cache[key] = auc_numerators(log.offsets, scores, rel, log.grades.astype(np.float64, copy=False), items,
                                        thr, tie, k, depth)
        return cache[key]


class _Exposures:
    """One model's lists all together, as the catalogue-level formulas of
    :mod:`topkeval.metrics.beyond` read them: every shown row's item and chance, the exposure of
    each item (over every model's items: ``lists.ids``), the evaluated queries with a non-empty list."""

    def __init__(self, parts: list[_Part], lists: _Lists, given: _Given):
        n_items = len(lists.ids)
        if parts:
            self.item = np.concatenate([p.item for p in parts])
            self.p = np.concatenate([x.p for x in parts])
        else:
            self.item, self.p = np.zeros(0, np.int64), np.zeros(0)
        self.exposure = np.bincount(self.item, weights=self.p, minlength=n_items)
        self.lists = sum(int(np.count_nonzero(x.L[x.keep] > 0)) for x in parts)
        self.given = given

    def catalog_size(self) -> int:
        return self.given.catalog_size()


def _seen(part: _Part, log, lists: _Lists, given: _Given) -> tuple[np.ndarray, np.ndarray]:
    """(per shown row: 1.0 if the query's history holds the item, per query of the log: whether the
    query has a history)."""
    hq, hi = given.history_pairs()
    qpos = _find(log.queries, hq)
    ipos = _find(lists.ids, hi) if len(lists.ids) else np.full(len(hi), -1)
    in_history = np.zeros(log.n_queries, bool)
    in_history[qpos[qpos >= 0]] = True
    ok = (qpos >= 0) & (ipos >= 0)
    n_items = max(len(lists.ids), 1)
    keys = np.sort(qpos[ok].astype(np.int64) * n_items + ipos[ok])
    shown = part.qix.astype(np.int64) * n_items + part.item
    at = np.searchsorted(keys, shown)
    seen = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == shown) if len(keys) else np.zeros(len(shown), bool)
    return seen.astype(np.float64), in_history


def _history_sums(part: _Part, log, given: _Given) -> tuple[np.ndarray, np.ndarray]:
    """Per query of the log: the sum of its history items' unit vectors, and their number (once per log)."""
    return given.once(("history sums", part.log_index), lambda: _sums_of_history(log, given))


def _sums_of_history(log, given: _Given) -> tuple[np.ndarray, np.ndarray]:
    from ..kernels.beyond import add_rows

    hq, hi = given.history_pairs()
    qpos = _find(log.queries, hq)
    ok = qpos >= 0
    codes, uniques = pd.factorize(hi[ok])
    units = given.units(pd.Index(uniques, dtype=object), "items in history") if len(uniques) else np.zeros((0, 1))
    d = given.shown_units().shape[1] if len(given.lists.ids) else units.shape[1]
    if units.shape[1] != d and len(units) and len(given.lists.ids):
        raise ParameterError(f"features must all have one length; got lengths {sorted({units.shape[1], d})}.")
    sums = np.zeros((log.n_queries, units.shape[1] if len(units) else d))
    add_rows(qpos[ok].astype(np.int64), codes.astype(np.int64), units, sums)
    count = np.bincount(qpos[ok], minlength=log.n_queries).astype(np.float64)
    return sums, count


def _history_sims_by_function(part: _Part, log, lists: _Lists, given: _Given):
    """Per shown relevant row: the sum of ``similarity(history item, item)`` over its query's history
    (the function called pair by pair); and per query of the log, its history's size."""
    hq, hi = given.history_pairs()
    qpos = _find(log.queries, hq)
    by_query: dict = {}
    for q, i in zip(qpos, hi):
        if q >= 0:
            by_query.setdefault(int(q), []).append(i)
    count = np.zeros(log.n_queries)
    for q, items in by_query.items():
        count[q] = len(items)
    sims = np.zeros(len(part.qix))
    sim = given.inputs.similarity
    assert sim is not None  # needs_similarity: features or similarity
    for j in np.flatnonzero(part.rel):
        item = lists.ids[part.item[j]]
        sims[j] = sum((_similarity(sim, h, item) for h in by_query.get(int(part.qix[j]), [])), 0.0)
    return sims, count


def _diversity(part: _Part, log, lists: _Lists, given: _Given) -> np.ndarray:
    n_q = len(part.L)
    out = np.full(n_q, np.nan)
    distance = given.inputs.distance
    if given.inputs.features is not None and distance is None:
        from ..kernels.beyond import cosine_diversity

        cosine_diversity(part.soff, part.p, part.e, part.item, given.shown_units(), part.L, out)
        return out[part.keep]
    sim = given.inputs.similarity
    assert sim is not None or distance is not None  # needs_similarity: features, similarity or distance
    expected = lists.conv.ties == "expected"
    ids = lists.ids
    for q in np.flatnonzero(part.keep & (part.L >= 2)):
        a, z = part.soff[q], part.soff[q + 1]
        items = [ids[c] for c in part.item[a:z]]
        p, g, e = part.p[a:z], part.g[a:z], part.e[a:z]
        total = 0.0
        for x in range(len(items)):
            for y in range(x + 1, len(items)):
                if expected and g[x] == g[y]:
                    slots = round(p[x] * e[x])
                    both = slots * (slots - 1) / (e[x] * (e[x] - 1))
                else:
                    both = p[x] * p[y]
                if both > 0:
                    if distance is not None:
                        total += both * _distance(distance, items[x], items[y])
                    else:
                        assert sim is not None
                        total += both * (1.0 - _similarity(sim, items[x], items[y]))
        L = int(part.L[q])
        out[q] = total / (L * (L - 1) / 2)
    return out[part.keep]


def _baseline_overlap(part: _Part, k: int, lists: _Lists) -> tuple[np.ndarray, np.ndarray]:
    """Per query of the log: the expected overlap of this top k with the baseline model's (the two
    models' orders of tied candidates are independent), and the baseline's L (unexpectedness)."""
    log, _ = lists.logs[part.log_index]
    baseline = lists.inputs_baseline
    assert baseline is not None  # compute() refuses unexpectedness without one
    n_q = len(part.L)
    overlap: np.ndarray = np.zeros(n_q)
    base_L = np.zeros(n_q, np.int64)
    theirs = [b for b in lists.parts.get((baseline, k), [])]
    same = [b for b in theirs if b.log_index == part.log_index]
    if same:  # the same rows (one score column per model): match rows
        other = same[0]
        theirs_p = np.zeros(log.n_rows)
        theirs_p[other.rows] = other.p
        overlap = np.bincount(part.qix, weights=part.p * theirs_p[part.rows], minlength=n_q)
        base_L = other.L
    else:  # runs kept apart: match (query id, item id)
        mine = pd.Index(log.queries)
        n_items = max(len(lists.ids), 1)
        key = part.qix.astype(np.int64) * n_items + part.item
        order = np.argsort(key)
        for other in theirs:
            olog = lists.logs[other.log_index][0]
            qpos = mine.get_indexer(pd.Index(olog.queries))
            oq = qpos[other.qix]
            ok = oq >= 0
            okey = oq[ok].astype(np.int64) * n_items + other.item[ok]
            at = np.searchsorted(key, okey, sorter=order)
            at = np.minimum(at, max(len(key) - 1, 0))
            hit = (key[order[at]] == okey) if len(key) else np.zeros(len(okey), bool)
            rows = order[at[hit]]
            overlap += np.bincount(part.qix[rows], weights=part.p[rows] * other.p[ok][hit], minlength=n_q)
            found = qpos >= 0
            base_L[qpos[found]] = other.L[found]
    return overlap, base_L
