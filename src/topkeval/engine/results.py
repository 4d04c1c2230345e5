"""The one results builder: evaluated batches -> :class:`Evaluation`, whatever path computed them.

Every path (a table in memory, a streamed file, runs with judgments apart, a score matrix, the
training-loop evaluator, Spark) hands its batches to :func:`build_results`, which computes the means,
the per-query table and the same ``info`` keys, joins the query-level attributes (segments and
weights) and records how to read the rows again (``sources``) and how to evaluate the same data at
other metrics (``rerun``). :class:`~topkeval.results.Results`, the front doors' return type, shows an
Evaluation; nothing else builds or changes one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..conventions import Conventions
from ..errors import DataError, ParameterError, TopkevalError, show
from ..metrics.names import Metric, canonical_name, label_of, parse_metric
from .aggregate import mean, total_weight, weighted_summary
from .evaluate import Evaluated, LogSource, ModelValues, longest_of, short_of
from .plan import Plan

#: column names of the tables segments appear in (per_query, segments, compare, summary_ci): a
#: segment or weight column may not take one of them
RESERVED = ("model", "metric", "verdict", "baseline", "value", "delta", "relative_delta", "ci_low", "ci_high",
            "p_value", "p_adjusted", "significant", "wins", "ties", "losses", "effect_size", "es_e", "n_queries",
            "left_out", "weight", "queries", "mean")

#: column names of the tables the query column appears in beside fixed columns (per_query: ``model``;
#: Results.diff: ``baseline``, ``model``, ``delta``, ``gained``, ``lost``)
QUERY_TAKEN = ("model", "baseline", "delta", "gained", "lost")


class Kept:
    """A value handed back when called: ``Evaluation.sources`` of rows held in memory. A module-level
    callable holding its value, so that an Evaluation pickles (a lambda does not)."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value

    def __call__(self):
        return self.value


class Dropped:
    """What an unpickled Evaluation has in place of a capability that could not be pickled (``sources``
    or ``rerun`` reading a Spark DataFrame, a user's lambda among the inputs...): calling it says so."""

    __slots__ = ("what", "why")

    def __init__(self, what: str, why: str) -> None:
        self.what = what
        self.why = why

    def __call__(self, *args, **kwargs):
        uses = {"sources": "its rows (diff's items, side_by_side, beyond_accuracy, bounds, the report's side-by-side "
                           "view)",
                "rerun": "how to evaluate its data at other metrics (curves, the report's curves, with_beyond's "
                         "curves)"}[self.what]
        raise ParameterError(f"These results were unpickled without {uses}, which could not be pickled "
                             f"({self.why}): evaluate the data again in this process for this, or use what the results "
                             "hold (summary, per_query, info, compare, summary_ci, segments...).")

    def __reduce__(self):
        return (Dropped, (self.what, self.why))


def portable(evaluation: Evaluation, protocol: int = 4) -> tuple:
    """``evaluation`` in parts that pickle: the per-query table built (a Spark evaluation's collected),
    and its capabilities (``sources``, ``rerun``, the backend) pickled together, or, those that cannot
    be, dropped (:class:`Dropped`: the backend becomes None, as for results that never had one).
    :func:`restore` puts them back together."""
    import pickle

    core = replace(evaluation, sources=None, rerun=None, backend=None, _per_query=[evaluation.per_query])
    kept = {"sources": evaluation.sources, "rerun": evaluation.rerun, "backend": evaluation.backend}
    try:  # together: a log that sources and rerun both hold is pickled once
        return core, pickle.dumps(kept, protocol), {}
    except Exception:  # each on its own: what cannot be pickled is dropped, and said when used
        held, dropped = {}, {}
        for name, value in kept.items():
            try:
                pickle.dumps(value, protocol)
                held[name] = value
            except Exception as exc:  # anything a pickler raises (PicklingError, TypeError, AttributeError...)
                dropped[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return core, pickle.dumps(held, protocol), dropped


def deep_copied(evaluation: Evaluation, memo: dict | None = None) -> Evaluation:
    """``evaluation`` with tables and counts of its own (``copy.deepcopy``); what it reads again (the
    rows, the re-evaluation, the backend), which never changes, shared."""
    import copy

    held = evaluation._per_query[0]
    return replace(evaluation, summary=copy.deepcopy(evaluation.summary, memo),
                   info=copy.deepcopy(dict(evaluation.info), memo), attributes=copy.deepcopy(evaluation.attributes, memo),
                   _per_query=[held if callable(held) else copy.deepcopy(held, memo)])


def restore(core: Evaluation, kept: bytes, dropped: dict) -> Evaluation:
    """The Evaluation :func:`portable` took apart. One pickled before Evaluations kept their Metric
    objects holds its labels alone: each is read here, once, as a table read back is
    (:func:`from_per_query`), by its canonical name."""
    import pickle

    if "metric_objects" not in vars(core):
        names = core.info.get("metric_names") or {}
        object.__setattr__(core, "metric_objects", {label: parse_metric(names.get(label, label))
                                                    for label in core.summary.columns})
    parts = pickle.loads(kept)
    for name, why in dropped.items():
        parts[name] = None if name == "backend" else Dropped(name, why)
    return replace(core, **parts)


@dataclass(frozen=True, eq=False)
class Evaluation:
    """What an evaluation computed, as :func:`build_results` made it (read-only).

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per model (index ``model``), one column per metric label: the (weighted) means.
    info : Mapping
        The counts (see :class:`~topkeval.results.Results`).
    query_name : str
        The query column of the per-query table.
    conventions : Conventions or None
        None for per-query values computed elsewhere (:meth:`Results.from_per_query`).
    by : tuple of str
        The segment columns (``evaluate(..., by=)``).
    weight : str or None
        The query-weight column (``evaluate(..., weight=)``).
    attributes : pandas.DataFrame or None
        One row per query (indexed by query id): the segment and weight columns.
    ascending : bool
        The scores were ranks or distances (lower is better), negated inside.
    sources : callable or None
        ``() -> iterable of (GroupedLog, R or None)``: the rows again (diff's items, side_by_side,
        beyond_accuracy); None when they are not kept (a matrix, Spark, a stream of sums).
    rerun : callable or None
        ``metric names -> Evaluation``: the same data at other metrics (curves); None when the
        data cannot be read again.
    backend : object or None
        The backend that computed the results, asked again for what reads the rows (diff's items,
        side_by_side, beyond_accuracy: :class:`~topkeval.engine.rules.Backend`).
    own_rows : bool
        Each model's rows are its own (a stacked table, runs with judgments apart), not one table
        of candidates every model ranks: what the rows say about the items (the catalogue, their
        popularity) differs by model, and is no default of a model's beyond-accuracy numbers.
    estimated_curve : object or None
        The examination curve the clicks were weighed by when it was estimated
        (:class:`~topkeval.analysis.bias.PositionBias`): intervals fit it again on resampled queries
        (:mod:`topkeval.analysis.curve_ci`); None for a known curve or no weights.
    metric_objects : Mapping of str to Metric
        Each metric column's label -> the :class:`~topkeval.metrics.names.Metric` it was planned
        from (exactly the columns of ``summary``): what every consumer reads to learn a column's
        family, cutoff, parameters, estimate, direction or trec_eval name (:meth:`metric`), instead
        of parsing its label again. Set once where the results are built (from the plan; parsed
        once at the boundary of :func:`from_per_query`), carried along by every change of columns.
    """

    summary: pd.DataFrame
    info: Mapping
    query_name: str
    conventions: Conventions | None
    by: tuple[str, ...] = ()
    weight: str | None = None
    attributes: pd.DataFrame | None = None
    ascending: bool = False
    sources: LogSource | None = None
    rerun: Callable[[list[str]], Evaluation] | None = None
    backend: object | None = None
    own_rows: bool = False
    estimated_curve: object | None = None
    metric_objects: Mapping[str, Metric] = field(default_factory=dict, repr=False)
    _per_query: list = field(default_factory=list, repr=False)  # [DataFrame or its builder], built once

    def __post_init__(self) -> None:
        columns = list(self.summary.columns)
        if list(self.metric_objects) != columns or not all(isinstance(m, Metric) for m in self.metric_objects.values()):
            # a broken invariant of the builders, never a user's error
            raise AssertionError(f"an Evaluation holds one Metric per metric column, in their order: columns "
                                 f"{columns}, metric objects {dict(self.metric_objects)}")

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per (model, query) evaluated, with the segment and weight columns; built on first use."""
        held = self._per_query[0]
        if callable(held):
            held = self._per_query[0] = held()
        return held

    @property
    def models(self) -> list[str]:
        return list(self.summary.index)

    @property
    def metrics(self) -> list[str]:
        return list(self.summary.columns)

    def metric(self, label: str) -> Metric:
        """The :class:`~topkeval.metrics.names.Metric` of a metric column, by its label (as in
        :attr:`metrics`); see :meth:`label` for a name the user wrote."""
        try:
            return self.metric_objects[label]
        except KeyError:
            raise ParameterError(f"{label!r} is not a metric column of these results; they have "
                                 f"{', '.join(self.metrics)} (Results.label finds a column by any of its names).") from None

    def require_rows(self, owner: str) -> None:
        """Refuse an analysis of the per-query values on results that kept only the means: it would
        compare nothing and say "no detectable difference", or give intervals of nothing."""
        if len(self.per_query) == 0 and self.info.get("evaluated", 0) > 0:
            raise ParameterError(f"{owner} works on the per-query values, which these results do not keep (a file "
                                 "streamed with keep_per_query=False keeps only the means): evaluate again with "
                                 "keep_per_query=True (the default).")

    def label(self, metric) -> str:
        """The column label of an evaluated metric, found by any of its names: the label itself (the
        name as requested), the canonical name or another alias (see :meth:`Results.label`)."""
        labels = self.metrics
        if isinstance(metric, str) and label_of(metric) in labels:
            return label_of(metric)
        try:  # the user's name, read (an input boundary); the columns' own metrics are known
            wanted = str(parse_metric(metric))
        except TopkevalError as exc:
            raise ParameterError(f"metric {metric!r} was not evaluated ({exc}); these results have "
                                 f"{', '.join(labels)}.") from None
        for name in labels:
            if str(self.metric_objects[name]) == wanted:
                return name
        raise ParameterError(f"metric {metric!r} was not evaluated; these results have {', '.join(labels)}.")


def check_result_names(query: str, by: Sequence[str], weight: str | None, metrics: Sequence[str]) -> None:
    """Refuse column names that would collide with the columns of the results.

    ``per_query`` holds ``model``, the query column, the segment and weight columns and one column
    per metric; :meth:`Results.diff` holds the query column beside ``baseline``, ``model``,
    ``delta``, ``gained`` and ``lost``; the segment columns appear beside every column of
    :data:`RESERVED`. A column of the input named like one of them would be overwritten or read as
    the other (a comparison of NaN, an empty diff), so it is refused, with the name to change.
    """
    metric_names = set(metrics)
    clash = (query in QUERY_TAKEN or query in metric_names or _metric_name(query)) and query
    if clash:
        what = "a metric" if clash not in QUERY_TAKEN else f"the column {clash!r} of per_query or Results.diff"
        raise ParameterError(f"The query column is called {clash!r}, which is also the name of {what}: the results "
                             f"could not hold both. Name it otherwise: for a table, rename the column (for pandas: "
                             f"df.rename(columns={{{clash!r}: 'query'}})) and pass query='query'; for TREC files (whose "
                             "query column query= names), pass query='query'.")
    taken = sorted({n for n in by if n in RESERVED or n in metric_names or _metric_name(n)}
                   | ({weight} if weight and (weight == "model" or weight in metric_names or _metric_name(weight))
                      else set()))
    if taken:
        raise ParameterError(f"by= and weight= columns appear beside the columns of the results (model, the metrics; "
                             f"for segments also compare's and summary_ci's columns), so they cannot be called "
                             f"{taken!r}: rename the column.")


def _parsed(name: str) -> Metric | None:
    """The metric a column label of a table read back names (None for a label that is no metric name):
    a topkeval name, else ir_measures' spelling, under which evaluate labels the columns of the
    ir_measures measures it is given (``RBP`` is ``RBP(p=0.8)``, whose topkeval ``rbp`` needs a p)."""
    for text in (name, "ir_measures:" + name):
        try:
            return parse_metric(text)
        except TopkevalError:
            continue
    return None


def _metric_name(name: str) -> bool:
    """Whether ``name`` is the canonical name of a metric (a column of per_query, of every curve)."""
    return canonical_name(name) == name


def build_results(batches: Sequence[Evaluated], plan: Plan, *, query_name: str = "query", info: dict | None = None,
                  sources: LogSource | None = None, rerun: Callable[[list[str]], Evaluation] | None = None,
                  attributes: pd.DataFrame | None = None, by: Sequence[str] = (), weight: str | None = None,
                  ascending: bool = False, backend: object | None = None,
                  per_query: Callable[[], pd.DataFrame] | None = None, own_rows: bool = False) -> Evaluation:
    """One :class:`Evaluation` from the batches of an evaluation, whatever the path.

    The summary is each model's mean over its evaluated queries (NaN values left out; weighted with
    ``weight``), the per-query table lists each model's queries in batch order (with the segment and
    weight columns of ``attributes``), and ``info`` has the same keys on every path: ``queries``,
    ``evaluated``, ``skipped_empty``, ``rows`` (ints: totals), ``evaluated_per_model``,
    ``rows_per_model``, ``ties_at_cutoff``, ``longest_list`` (per model: the candidates of its
    longest evaluated list, None where not counted) and ``shorter_than_k`` (per model, for each
    metric that pads a short list: the evaluated queries with fewer candidates than its k; None where
    not counted), ``models``, ``metrics`` (the column labels:
    the names as requested), ``metric_names`` (each label -> the canonical name), ``conventions``,
    with ``weight`` and ``segments`` when given, and what the front door adds (``info``).
    ``per_query`` replaces the per-query table built from the batches (Spark collects its own);
    ``own_rows``: each model's rows are its own (:attr:`Evaluation.own_rows`).
    """
    names = plan.names
    by_model: dict[str, list[ModelValues]] = {}
    for batch in batches:
        for mv in batch.models:
            by_model.setdefault(mv.model, []).append(mv)
    kept = all(p.sums is None for parts in by_model.values() for p in parts)
    summary: dict[str, dict[str, float]] = {}
    for model, parts in by_model.items():
        summary[model] = {}
        for name in names:
            if kept:
                v = np.concatenate([p.values[name] for p in parts]) if len(parts) > 1 else parts[0].values[name]
                summary[model][name] = mean(v)
            else:
                sums = [p.sums[name] for p in parts if p.sums is not None]
                count = sum(c for _, c in sums)
                summary[model][name] = sum(t for t, _ in sums) / count if count else math.nan
    summary_df = pd.DataFrame.from_dict(summary, orient="index", columns=names)
    summary_df.index.name = "model"
    evaluated = {m: sum(p.evaluated for p in parts) for m, parts in by_model.items()}
    rows = {m: sum(p.rows for p in parts) for m, parts in by_model.items()}
    base = {
        "queries": sum(b.queries for b in batches),
        "evaluated": max(evaluated.values(), default=0),
        "skipped_empty": sum(b.skipped_empty for b in batches),
        # rows read: one table's rows, which every model ranks; or, where each model's rows are its own (stacked
        # models, runs), all of them
        "rows": sum(rows.values()) if own_rows else max(rows.values(), default=0),
        "evaluated_per_model": evaluated,
        "rows_per_model": rows,
        "ties_at_cutoff": {m: sum(p.ties for p in parts) for m, parts in by_model.items()},
        "longest_list": {m: longest_of(parts) for m, parts in by_model.items()},
        "shorter_than_k": {m: short_of(parts) for m, parts in by_model.items()},
        "models": list(by_model),
        "metrics": names,
        "metric_names": plan.canonical,
        "conventions": plan.conv.as_dict(),
    }
    base.update(info or {})

    def from_batches() -> pd.DataFrame:
        """Model by model, each model's queries in batch order (empty when only sums were kept)."""
        columns: dict = {}
        if not kept:
            return pd.DataFrame({"model": pd.Series([], dtype=object), query_name: pd.Series([], dtype=object),
                                 **{n: pd.Series([], dtype=np.float64) for n in names}})
        queries = [p.queries for parts in by_model.values() for p in parts]
        counts = [sum(len(p.queries) for p in parts) for parts in by_model.values()]
        columns["model"] = pd.Series(np.repeat(np.array(list(by_model), dtype=object), counts), dtype=object)
        columns[query_name] = np.concatenate(queries) if len(queries) > 1 else queries[0]
        for name in names:
            vals = [p.values[name] for parts in by_model.values() for p in parts]
            columns[name] = np.concatenate(vals) if len(vals) > 1 else vals[0]
        return pd.DataFrame(columns)

    table: Callable[[], pd.DataFrame] = per_query or from_batches
    evaluation = Evaluation(summary_df, base, query_name, plan.conv, ascending=bool(ascending), sources=sources,
                            rerun=rerun, backend=backend, own_rows=own_rows,
                            metric_objects=dict(zip(names, plan.metrics)), _per_query=[table])
    return attach(evaluation, attributes, by, weight) if attributes is not None else evaluation


def attach(evaluation: Evaluation, attributes: pd.DataFrame, by: Sequence[str], weight: str | None) -> Evaluation:
    """The same evaluation with query-level attributes: the segment and weight columns in the
    per-query table, the summary weighted with ``weight``, ``info["weight"]`` and ``info["segments"]``.

    ``attributes`` holds one row per query (indexed by query id); a query of the per-query table
    without a row is refused (a judged query the run lacks has no attribute to read).
    """
    by = tuple(by)
    table = _with_attributes(lambda: evaluation.per_query, attributes, evaluation.query_name, by, weight)
    info = dict(evaluation.info)
    out = replace(evaluation, summary=evaluation.summary.copy(), info=info, by=by, weight=weight,
                  attributes=attributes, _per_query=[table])
    _weigh(out, info, attributes, by, weight)
    return out


def from_per_query(frame: pd.DataFrame, query: str = "query") -> Evaluation:
    """An :class:`Evaluation` of per-query values computed elsewhere: a ``model`` column (model names,
    text), the query column (ids: all numbers or all text), one column per metric, named as topkeval
    names the metric (``recall@10``: the reports read each metric's direction from its name),
    holding finite numbers or NaN (undefined: left out of the mean)."""
    where = "Results.from_per_query"
    if not isinstance(frame, pd.DataFrame):
        hint = " (a Spark DataFrame: collect it first, with .toPandas())" if _is_spark_frame(frame) else ""
        raise ParameterError(f"{where} takes a pandas DataFrame with a 'model' column, the query column and one "
                             f"column per metric; got {type(frame).__name__}{hint}.")
    if isinstance(frame.columns, pd.MultiIndex) or isinstance(frame.index, pd.MultiIndex):
        raise ParameterError(f"{where}: the frame has a MultiIndex; pass one column per field (model, the query, one "
                             "per metric): frame.reset_index(), and flatten the column labels.")
    missing = [c for c in ("model", query) if c not in frame.columns]
    if missing:
        names_in = [str(c) for c in frame.columns]
        hint = " (they are in the index: pass frame.reset_index())" if missing[0] in (frame.index.names or []) else ""
        raise ParameterError(f"{where}: the frame has no {missing[0]!r} column{hint} (it needs 'model', the query "
                             f"column {query!r} and one column per metric); it has "
                             f"{', '.join(map(repr, names_in)) or 'no column'}.")
    if frame.columns.duplicated().any():
        raise ParameterError(f"{where}: the column {frame.columns[frame.columns.duplicated()][0]!r} appears twice.")
    if len(frame) == 0:
        raise DataError(f"{where}: the frame has no rows: there is nothing to show.")
    names = [c for c in frame.columns if c not in ("model", query)]
    if not names:
        raise ParameterError(f"{where}: the frame has no metric column (one column per metric, beside 'model' and "
                             "the query column).")
    canonical: dict[str, str] = {}
    parsed: dict[str, Metric] = {}
    for name in names:
        # the one parse of these labels: a table read back (from a file, or made elsewhere) has nothing else
        found = _parsed(name) if isinstance(name, str) and label_of(name) == name else None
        if found is None:
            raise ParameterError(f"{where}: the column {name!r} is not named as a metric (recall@10, ndcg@5, ap...): "
                                 "reports and tables read each metric's direction from its name. Rename it; a metric "
                                 "of your own is named once it is registered.")
        metric = str(found)
        if metric in canonical.values():
            other = next(n for n, c in canonical.items() if c == metric)
            raise ParameterError(f"{where}: the columns {other!r} and {name!r} name the same metric ({metric}): keep one.")
        canonical[name] = metric
        parsed[name] = found
        values = frame[name]
        if (not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)
                or pd.api.types.is_complex_dtype(values)):
            raise ParameterError(f"{where}: the metric column {name!r} holds {values.dtype} values; metric values "
                                 "are real numbers (NaN where undefined).")
        if np.isinf(values.to_numpy(np.float64)).any():
            raise DataError(f"{where}: the metric column {name!r} holds an infinite value; a metric value is finite, "
                            "or NaN where undefined.")
    for column, what in (("model", "model name"), (query, "query id")):
        if frame[column].isna().any():
            raise DataError(f"{where}: the {column!r} column has a missing {what} (None or NaN): every row needs one.")
    if not all(isinstance(m, str) for m in frame["model"]):
        raise ParameterError(f"{where}: model names are text; the 'model' column holds "
                             f"{type(next(m for m in frame['model'] if not isinstance(m, str))).__name__} values. "
                             "Pass frame.assign(model=frame['model'].astype(str)).")
    kinds = {isinstance(q, str) for q in frame[query]}
    if len(kinds) > 1:
        raise DataError(f"{where}: the query column {query!r} mixes text and numbers (1 and '1' would be two "
                        "queries): write every id the same way.")
    check_result_names(query, (), None, [str(n) for n in names])
    if frame.duplicated(["model", query]).any():
        row = frame[frame.duplicated(["model", query])].iloc[0]
        raise ParameterError(f"{where}: model {show(row['model'])} has query {show(row[query])} twice; one row per "
                             "(model, query).")
    table = frame.reset_index(drop=True).copy()
    table["model"] = table["model"].astype(object)
    for name in names:
        table[name] = table[name].astype(np.float64)
    models = list(dict.fromkeys(table["model"]))
    summary = pd.DataFrame({name: [mean(table.loc[table["model"] == m, name].to_numpy(np.float64)) for m in models]
                            for name in names}, index=pd.Index(models, name="model"), columns=names)
    evaluated = {m: int((table["model"] == m).sum()) for m in models}
    # what the values were computed from (rows read, ties at a cutoff) is not known here: None, not 0
    info = {"queries": int(table[query].nunique()), "evaluated": max(evaluated.values(), default=0),
            "skipped_empty": 0, "rows": None, "evaluated_per_model": evaluated,
            "rows_per_model": {m: None for m in models},
            "ties_at_cutoff": {m: None for m in models}, "longest_list": {m: None for m in models},
            "shorter_than_k": {m: None for m in models}, "models": models,
            "metrics": names, "metric_names": canonical}
    # computed elsewhere: conventions unknown
    return Evaluation(summary, info, query, None, metric_objects=parsed, _per_query=[table])


def _is_spark_frame(data) -> bool:
    return type(data).__module__.startswith("pyspark.")


def _with_attributes(build: Callable[[], pd.DataFrame], attrs: pd.DataFrame, query_name: str, by: tuple,
                     weight: str | None) -> Callable[[], pd.DataFrame]:
    """The per-query table with the segment and weight columns after the query column."""

    def per_query() -> pd.DataFrame:
        frame = build().copy(deep=False)  # the columns are added to a new frame, never to the one it reads
        position = frame.columns.get_loc(query_name) + 1
        keys = frame[query_name]
        known = pd.Index(keys).isin(attrs.index)
        if not known.all():
            q = keys[~known].iloc[0] if hasattr(keys, "iloc") else keys[~known][0]
            raise DataError(f"Query {show(q)} has no segment or weight: it is judged but absent from the run "
                            "(missing_queries='zero' scores it), and its attributes are read from the run's rows. "
                            "Use missing_queries='skip', or add the query to the run.")
        for offset, name in enumerate([*by, *([weight] if weight else [])]):
            frame.insert(position + offset, name, attrs[name].reindex(keys).to_numpy())
        return frame

    return per_query


def _weigh(evaluation: Evaluation, info: dict, attrs: pd.DataFrame, by: tuple, weight: str | None) -> None:
    """The weighted summary and the counts of ``info`` (at build time: a query without attributes is
    refused by the evaluation itself)."""
    per_query = evaluation.per_query
    if weight:
        weighted = weighted_summary(per_query, evaluation.models, evaluation.metrics, weight)
        evaluation.summary.loc[:, :] = weighted.to_numpy()
        info["weight"] = {"column": weight, "total": total_weight(attrs[weight]),
                          "evaluated_per_model": {m: total_weight(per_query.loc[per_query["model"] == m, weight])
                                                  for m in evaluation.models}}
    if by:
        info["segments"] = {"columns": list(by), "count": int(attrs.groupby(list(by), sort=False).ngroups)}
