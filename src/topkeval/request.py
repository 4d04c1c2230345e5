"""The request: what a front door was asked, checked as a whole, and handed to the backend that takes it.

``api.py`` declares the public signatures and checks each parameter alone (``@validate_params``);
everything that involves more than one parameter is here, by subject:

============================  ==========================================================================
:func:`resolve`               ``evaluate()``'s parameters into a :class:`Request`: the metrics and their
                              defaults (:func:`_metrics`), the conventions (:func:`_conventions`), the
                              click log's parameters (:func:`_clicks`), the data as read (paths, other
                              tools' rows, TREC run files: :func:`_data`), a relevance column or none
                              (:func:`_relevance_none`), the columns' roles (:func:`_columns`), segments
                              and weights (:func:`_segments`), judgments apart (:func:`_judgments`)
:func:`dispatch`              a Request to the backend that takes its data (:mod:`topkeval.backends`:
                              the first registered that accepts it; what it does not declare is
                              refused by :func:`_backend` with the message its declarations make)
:func:`evaluate`              ``evaluate()`` itself: the beyond-accuracy metrics split off, progress
                              bars, resolve, dispatch, the beyond-accuracy metrics added back
:func:`evaluate_matrix`       ``evaluate_matrix()``: the conventions, the plan, dispatch
:func:`matrix_update`         one ``update`` of ``MatrixEvaluator`` / ``TopkMetrics``: dispatch to the
                              backend that takes score matrices batch by batch
:func:`one_ranking`           ``recall_at_k`` and its siblings: one ranking's arrays checked, evaluated
============================  ==========================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from . import backends, engine
from .conventions import resolve as resolve_conventions
from .errors import DataError, ParameterError
from .metrics import FAMILIES
from .metrics.names import CLICK_DEFAULT_METRICS, DEFAULT_METRICS

#: The parameters of ``evaluate()`` other than the conventions (named in the message for a misspelt one).
EVALUATE_KEYWORDS = ("conventions", "qrels", "model", "missing_queries", "depth", "judged_only", "chunk_rows",
                     "popularity", "features", "similarity", "distance", "catalog", "categories", "history", "baseline",
                     "progress", "keep_per_query", "threads", "ascending")

#: The inputs of the beyond-accuracy metrics among ``evaluate()``'s parameters.
BEYOND_INPUTS = ("popularity", "features", "similarity", "distance", "catalog", "categories", "history", "baseline")


@dataclass(frozen=True)
class Request:
    """What ``evaluate()`` was asked, once every parameter is checked alone and with the others: the
    conventions resolved into a plan, TREC run files read into a table, the columns' roles decided,
    and the backend that takes the data (``kind``: its name, ``"cpu"`` or ``"spark"``)."""

    kind: str
    data: object
    plan: engine.Plan
    query: str = "query"
    relevance: str = "relevance"  # None (untyped) with judgments apart of relevant pairs only (relevance=None)
    scores: list = ()  # type: ignore[assignment]
    item: str | None = None
    qrels: object = None
    model: str | None = None
    missing_queries: str = "skip"
    depth: int | None = None
    judged_only: bool = False
    chunk_rows: int | None = None
    progress: object = None
    keep_per_query: bool = True
    threads: int | None = None
    ascending: bool = False
    by: list = ()  # type: ignore[assignment]
    weight: str | None = None
    position: str | None = None
    propensity: object = None
    clip: float | None = None

    @property
    def attributes(self) -> list:
        """The query-level columns: the segments, then the weight."""
        return list(self.by) + ([self.weight] if self.weight else [])


# ---------------------------------------------------------------------------------------------
# evaluate()


def evaluate(data, metrics, query, relevance, score, item, *, conventions, qrels, model, missing_queries, depth,
             judged_only, chunk_rows, progress, keep_per_query, threads, ascending, by, weight, position, propensity,
             clip, popularity, features, similarity, catalog, categories, history, baseline, distance,
             **settings) -> engine.Evaluation:
    """``evaluate()`` once its parameters are each checked: see :func:`topkeval.evaluate`."""
    from .analysis import beyond as _beyond
    from .progress import shown

    inputs = _beyond.Inputs(popularity, features, similarity, catalog, categories, history, baseline, owner="evaluate",
                            distance=distance)
    labels, wanted_beyond = _beyond_split(metrics, inputs, propensity)
    with shown(progress is True):
        reading = None
        if isinstance(progress, bool):
            progress = reading = _rows_read(data) if progress else None
        request = resolve(data, metrics, query, relevance, score, item, conventions=conventions, qrels=qrels,
                          model=model, missing_queries=missing_queries, depth=depth, judged_only=judged_only,
                          chunk_rows=chunk_rows, progress=progress, keep_per_query=keep_per_query, threads=threads,
                          ascending=ascending, by=by, weight=weight, position=position, propensity=propensity,
                          clip=clip, **settings)
        try:
            evaluation = dispatch(request)
        finally:
            if reading is not None:
                reading.done()  # the file is read: its bar goes (compare, report... come after)
    rerun = evaluation.rerun or Rerun(replace(request, progress=None))
    if wanted_beyond:
        evaluation = _beyond.with_beyond(replace(evaluation, rerun=rerun), wanted_beyond, inputs)
        evaluation = _beyond.ordered(evaluation, labels)
    return replace(evaluation, rerun=evaluation.rerun or rerun, ascending=bool(ascending))


@dataclass(frozen=True, eq=False, repr=False)
class Rerun:
    """A request evaluated again at other metrics (``Evaluation.rerun``: Results.curves; the data is
    read again): an object holding it, so that the results pickle where its data does."""

    request: Request

    def __call__(self, names, lists: bool = False) -> engine.Evaluation:
        """``lists``: the list-only metrics among ``names`` are the plan's (:attr:`engine.Plan.lists`),
        which the caller adds (:class:`topkeval.analysis.beyond._Again`); elsewhere each is refused."""
        plan = engine.make_plan(names, self.request.plan.conv, clicks=self.request.plan.clicks, lists=lists)
        if plan.lists:
            backends.check_supported(_plugin(self.request.kind), {"lists": f"{plan.list_labels[0]} (a beyond-accuracy metric)"})
        return dispatch(replace(self.request, plan=plan))


class ListsOnly(tuple):
    """Metrics read off each model's lists that the caller computes itself from the results (the command
    line's catalogue-level ones, coverage@10..., shown beside them by ``Results.beyond_accuracy``):
    ``evaluate()`` given only these plans them as list-only metrics (:attr:`engine.Plan.lists`), with
    no column of their own, instead of refusing them as metrics without a per-query value."""


def _beyond_split(metrics, inputs, propensity) -> tuple[tuple[str, ...], list[str]]:
    """(every column label as requested, the per-query beyond-accuracy ones, which the plan holds as
    list-only metrics and :func:`topkeval.analysis.beyond.with_beyond` adds)."""
    from .metrics.names import labelled_metrics

    given = [name for name in BEYOND_INPUTS if getattr(inputs, name) is not None]
    if isinstance(metrics, (str, list, tuple)) or hasattr(metrics, "family"):
        try:
            labels, parsed = labelled_metrics(metrics)
        except Exception:  # an unknown or bad name: the engine's plan says what is wrong with it
            return (), []
    else:
        return (), []
    if isinstance(metrics, ListsOnly):
        return (), []
    beyond = [label for label, m in zip(labels, parsed) if m.info.beyond]
    if given and not beyond:
        raise ParameterError(f"{given[0]}= is read by the beyond-accuracy metrics (novelty@10, diversity@10, ...), none "
                             "of which is among metrics: add one, or drop it.")
    if not beyond:
        return labels, []
    if propensity is not None:
        raise ParameterError(f"{beyond[0]} is not estimated under inverse propensity weights: evaluate it without "
                             "propensity= (on the clicks as they are), or leave it out.")
    return labels, beyond


def _rows_read(data):
    """progress=True: a step counting the rows of a streamed file (a parquet file's total from its metadata)."""
    from pathlib import Path

    from .progress import rows_read

    if not isinstance(data, (str, Path)):
        return None
    total = None
    from .inputs.formats import PARQUET, format_of

    if format_of(data) is PARQUET:
        from .inputs.stream import count_rows

        try:
            total = count_rows(Path(data))
        except Exception:  # the evaluation itself reports an unreadable file, in its words
            total = None
    return rows_read(Path(data).name, total)


# ---------------------------------------------------------------------------------------------
# the parameters together, by subject


def resolve(data, metrics, query, relevance, score, item, *, conventions, qrels, model, missing_queries, depth,
            judged_only, chunk_rows, progress, keep_per_query, threads, ascending, by, weight, position=None,
            propensity=None, clip=None, **settings) -> Request:
    """Every check of ``evaluate()`` that involves more than one of its parameters: the request it makes."""
    metrics = _metrics(metrics, qrels, propensity)
    plan = _conventions(metrics, conventions, propensity, depth, ascending, settings)
    _clicks(plan, position, propensity, clip, item, qrels, depth)
    data, qrels, query, relevance, item, score, model, runs = _data(data, qrels, query, relevance, item, score, model)
    if relevance is None:
        _relevance_none(qrels, plan)
    scores = [score] if isinstance(score, str) else list(score)
    by = _segments(by, weight, query, relevance, scores, item, model, runs, plan)
    kind = _backend(data, plan, chunk_rows, model, qrels, by, weight, position, propensity)
    _columns(query, relevance, scores, item, model, distinct=qrels is None)
    if position is None and propensity is None:  # a click log's arms are its own matter
        _model_column_unnamed(data, runs, model, item, [query, relevance, *scores, *by, weight])
    if qrels is None:
        _judgments(missing_queries, judged_only)
    _clicks_together(plan, kind, model, chunk_rows, position, propensity, query, relevance, scores, item, by, weight,
                     data, qrels)
    return Request(kind, data, plan, query, relevance, scores, item, qrels, model, missing_queries, depth, judged_only,
                   chunk_rows, progress, keep_per_query, threads, ascending, by, weight, position, propensity, clip)


#: column names that say a table stacks several models' (runs', systems') rows
MODEL_COLUMNS = ("model", "run", "system")


def _model_column_unnamed(data, runs, model, item, named: list) -> None:
    """A table read without model= and without item= whose column named 'model' (or 'run', 'system') no
    parameter names: if it stacks several models' rows, they are ranked together as one model's, and with no item
    id nothing finds the repeated items. Said, with what evaluates each model apart."""
    if model is not None or item is not None or runs is not None:
        return
    from .errors import warn
    from .inputs.tables import column_names

    try:
        columns = column_names(data)
    except Exception:  # a table of another kind: read (or refused) by the evaluation, in its words
        return
    taken = {c for c in named if isinstance(c, str)}
    unnamed = [c for c in columns if isinstance(c, str) and c.lower() in MODEL_COLUMNS and c not in taken]
    if unnamed:
        warn(f"The table has a column {unnamed[0]!r} that no parameter names, and no item column (item=): if it "
             f"holds several models' rows, they are ranked together here as one model's list. Pass "
             f"model={unnamed[0]!r} to evaluate each model apart (and item='<column>' to find repeated items).")


def _metrics(metrics, qrels, propensity):
    """The metrics, or the defaults left unsaid (the very object, not the same names given one by one:
    what is named is computed) as they apply to a click log or to judgments apart."""
    if metrics is not DEFAULT_METRICS:
        return metrics
    if propensity is not None:
        # the defaults as estimated from clicks: recall and F1 pooled over the queries, precision (specificity and
        # R-precision have no estimator from clicks)
        return list(CLICK_DEFAULT_METRICS)
    if qrels is not None:
        # judgments apart: the rows are each model's retrieved list (top-N recommendations, a run), without the
        # candidates it left out, so specificity would count only the negatives it retrieved (0 for a list of k or less)
        return [m for m in metrics if not m.startswith("specificity")]
    return metrics


def _conventions(metrics, conventions, propensity, depth, ascending, settings: dict) -> engine.Plan:
    """The conventions resolved (a click log's own defaults) and the plan of the metrics under them."""
    if propensity is not None and conventions is None:
        # an IPS sum is exactly 0 on a query without a click (every query enters its mean: unbiased), and so is
        # its share of a pooled ratio's sums; a pooled ratio without any click in the log is undefined (NaN)
        settings = {"empty_queries": "keep", "undefined": "nan"} | settings
    conv = resolve_conventions(conventions, owner="evaluate", also=EVALUATE_KEYWORDS, **settings)
    plan = engine.make_plan(metrics, conv, clicks=propensity is not None, lists=True)
    if depth is not None:
        engine.check_depth_rule(conv)
    if ascending and conv.score_threshold is not None:
        raise ParameterError("score_threshold removes candidates scoring below it, which is ambiguous for "
                             "ascending scores: filter the rows before evaluating instead.")
    return plan


def _clicks(plan: engine.Plan, position, propensity, clip, item, qrels, depth) -> None:
    """The click log's parameters together (position=, propensity=, clip=)."""
    by_item = getattr(propensity, "by_item", None) is not None
    if propensity is not None and position is None and not by_item:
        raise ParameterError("propensity= gives the examination probability of each position, which needs the "
                             "position at which the logging ranker showed each candidate: pass position='<column>'.")
    if by_item and item is None:
        raise ParameterError("A popularity propensity is given per item: pass item='<column>' as well.")
    if clip is not None and propensity is None:
        raise ParameterError("clip= caps inverse propensity weights, which need propensity=: pass one, or drop clip=.")
    if position is None and propensity is None:
        return
    if qrels is not None or depth is not None:
        raise ParameterError("position= and propensity= read one click log (query, item, click, position, scores): "
                             "drop qrels= and depth=.")
    if propensity is not None:
        from .engine.unbiased import check_families

        check_families(plan.metrics)


def _data(data, qrels, query, relevance, item, score, model):
    """The data and the judgments as read: paths said for what they are, other tools' rows and column
    names recognised, TREC run files read into one table (``runs``: their paths, else None)."""
    from .inputs import input_paths

    data, qrels = input_paths(data, qrels)  # a folder, an empty file, a URL... said for what they are
    from .inputs.ecosystems import recognise

    # ir_datasets' and ir_measures' rows, dicts of dicts, and their and PyTerrier's column names
    data, qrels, query, relevance, item = recognise(data, qrels, query=query, relevance=relevance, item=item)
    runs = _run_paths(data)
    if runs is not None:
        from .inputs.judgments import trec_runs

        if qrels is None:
            raise ParameterError(f"{runs[0]} is read as a TREC run (query Q0 item rank score tag), which needs "
                                 "judgments: pass qrels= (a TREC qrels file or a table).")
        data, query, item, score, model, qrels = trec_runs(runs, query=query, item=item, score=score, model=model,
                                                           qrels=qrels, relevance=relevance)
    return data, qrels, query, relevance, item, score, model, runs


def _run_paths(data) -> list | None:
    """TREC run paths given as data (one path, or a list of paths), else None."""
    from .inputs import is_trec_path

    if is_trec_path(data):
        return [data]
    if isinstance(data, (list, tuple)) and data and all(is_trec_path(p) for p in data):
        return list(data)
    if isinstance(data, (list, tuple)) and data and all(isinstance(p, (str, os.PathLike)) for p in data):
        missing = next(p for p in data if not is_trec_path(p))
        if not os.path.exists(missing):
            from .errors import InputFileError

            raise InputFileError(f"Run file not found: '{missing}'. Check the path.")
        raise ParameterError(f"data is a list of paths, read as TREC run files, but '{missing}' is a table file: "
                             "give TREC run files, or one table.")
    return None


def _relevance_none(qrels, plan: engine.Plan) -> None:
    """relevance=None: the judgments are a table of the relevant pairs, each of grade 1."""
    from .inputs import is_trec_path

    if qrels is None:
        raise ParameterError("relevance=None says that every (query, item) pair the judgments list is relevant, "
                             "which needs judgments apart: pass qrels= (a table of the relevant pairs), or name "
                             "the relevance column of data (relevance='<column>').")
    if is_trec_path(qrels):
        raise ParameterError("relevance=None reads a qrels table of relevant pairs; a TREC qrels file has its own "
                             "grades (its fourth field, 0 for a document judged not relevant): drop relevance=None.")
    from .inputs.tables import ROLE_NAMES, column_names

    conv = plan.conv
    high = [t for t in [conv.threshold] + [part.conv.threshold for part in plan.parts()] if t is not None and t > 1]
    if high:  # grade 1 below the threshold: nothing would be relevant
        raise ParameterError(f"relevance=None gives every listed pair grade 1, below the relevance threshold "
                             f"{max(high):g} of these conventions or metrics (a grade >= {max(high):g} is "
                             "relevant), so nothing would be relevant: give the judgments a grade column and name "
                             "it (relevance='<column>'), or use a threshold of 1 or none.")
    graded = [c for c in column_names(qrels) if c.lower() in ("relevance", *ROLE_NAMES["relevance"])]
    if graded:  # grades that may say "not relevant" would be read as relevant: the user says which
        raise ParameterError(f"relevance=None counts every pair the judgments list as relevant, but they have a "
                             f"column {graded[0]!r} that looks like grades (a pair graded 0 would count as "
                             f"relevant): name it (relevance={graded[0]!r}) to use its grades, or leave it out of "
                             "the table if every listed pair is relevant.")


def _segments(by, weight, query, relevance, scores, item, model, runs, plan: engine.Plan) -> list:
    """The segment columns (``by=``) and the weight: query-level columns of their own."""
    from .inputs import segments

    by = segments.names(by)
    attributes = by + ([weight] if weight else [])
    if weight is not None and weight in by:
        raise ParameterError(f"{weight!r} is both a segment (by=) and the weight (weight=): a column is one or the "
                             "other.")
    engine.check_result_names(query, by, weight, plan.names)
    roles_taken = {query, relevance, *scores, item, model} - {None}
    if set(attributes) & roles_taken:
        raise ParameterError(f"by= and weight= name query-level columns other than the query, relevance, score, item "
                             f"and model columns; {sorted(set(attributes) & roles_taken)!r} is one of those.")
    if attributes and runs is not None:
        raise ParameterError("by= and weight= read query-level columns of a table; TREC run files have none: evaluate "
                             "a table of (query, item, score, segment) rows with qrels= instead.")
    pooled = [label for label, m in zip(plan.names, plan.metrics) if FAMILIES[m.family].ips == "pooled"]
    if pooled and attributes:
        raise ParameterError(f"{pooled[0]} is a ratio pooled over every query of the log (its per-query values are "
                             "each query's share of it), which segments (by=) and query weights (weight=) would split "
                             "or reweigh into other numbers than their own ratios: evaluate each segment's rows apart, "
                             "or use precision@k / tp@k, whose means by segment and weighted are what they say.")
    return by


def _backend(data, plan, chunk_rows, model, qrels, by, weight, position, propensity) -> str:
    """The backend that takes the data (:func:`topkeval.backends.plugin_for`), once it declares every
    capability the request needs; a missing one is refused with the message its declarations make."""
    backend = backends.plugin_for(data, plan)
    needs: dict[str, str | None] = {"rows": None}
    if chunk_rows is not None:
        needs["streaming"] = None
    if model is not None and qrels is None:
        needs["stacked"] = "model= without qrels= (a stacked table with a relevance column)"
    if qrels is not None:
        needs["judgments"] = None
    if by or weight:
        needs["segments"] = "by= and weight=" if by and weight else "by=" if by else "weight="
    if position is not None or propensity is not None:
        needs["clicks"] = "position=" if position is not None else "propensity="
    if plan.lists:
        needs["lists"] = f"{plan.list_labels[0]} (a beyond-accuracy metric)"
    backends.check_supported(backend, needs)
    return backend.name


def _plugin(name: str):
    """The registered backend called ``name`` (a request's ``kind``)."""
    return next(p for p in backends.backends() if p.name == name)


def _judgments(missing_queries, judged_only) -> None:
    """The options of judgments apart, without them."""
    for name, value, hint in (("missing_queries", missing_queries != "skip" or None, "scores missing queries"),
                              ("judged_only", judged_only or None, "drops unjudged items")):
        if value is not None:
            raise ParameterError(f"{name}= {hint}, which needs judgments apart from the run: pass qrels=.")


def _columns(query, relevance, scores, item, model, distinct: bool) -> None:
    """One score column with a run-name column; with the relevance in the rows (``distinct``), one
    column per role."""
    if model is not None and len(scores) != 1:
        raise ParameterError(f"With model= (a run-name column) give exactly one score column; got {len(scores)}: "
                             f"{', '.join(map(repr, scores))}.")
    if not distinct:
        return
    wanted = [query, relevance, *scores] + ([item] if item is not None else []) + ([model] if model else [])
    if len(set(wanted)) != len(wanted):
        raise ParameterError(f"The query, relevance, score, item and model columns must differ. Got {wanted!r}.")


def _clicks_together(plan, kind, model, chunk_rows, position, propensity, query, relevance, scores, item, by, weight,
                     data, qrels) -> None:
    """The click log's columns among the others, and the paths that read a click log."""
    if model is not None and (position is not None or propensity is not None):
        raise ParameterError("position= and propensity= read one click log of one or more score columns; with "
                             "model= (a stacked table) they are not supported: give one score column per model.")
    if model is not None and chunk_rows is not None and qrels is None:
        raise ParameterError("chunk_rows= streams a file in batches; a stacked table (model=) is read whole: "
                             "drop chunk_rows=.")
    if position is not None or propensity is not None:
        from .backends.local import streamed

        if streamed(data, chunk_rows, position, model):
            option = "position=" if position is not None else "propensity="
            raise ParameterError(f"{option} reads a click log held as one table in memory (a DataFrame, an Arrow "
                                 "table, a dict of columns, or a parquet / CSV file small enough to read whole); this "
                                 "data is evaluated as a stream of batches. Read it into a table first.")
    attributes = by + ([weight] if weight else [])
    if position is not None and {position} & {query, relevance, *scores, item, *attributes}:
        raise ParameterError(f"position= names {position!r}, which already has another role; it must be the column "
                             "of the logging ranker's positions.")
    if isinstance(propensity, str) and propensity in {query, relevance, *scores, item, position, *attributes}:
        raise ParameterError(f"propensity= names {propensity!r}, which already has another role; it must be a column "
                             "of per-row examination probabilities.")


# ---------------------------------------------------------------------------------------------
# dispatch


def dispatch(r: Request) -> engine.Evaluation:
    """A checked request to the backend that takes its data (``r.kind``, its name)."""
    return next(b for b in backends.backends() if b.name == r.kind).evaluate(r)


# ---------------------------------------------------------------------------------------------
# evaluate_matrix() and the one-ranking functions


def evaluate_matrix(scores, relevant, metrics, exclude, *, conventions, batch_size, threads,
                    **settings) -> engine.Evaluation:
    """``evaluate_matrix()`` once its parameters are each checked: see :func:`topkeval.evaluate_matrix`."""
    conv = resolve_conventions(conventions, owner="evaluate_matrix", also=("exclude", "batch_size", "threads"),
                               **settings)
    request = MatrixRequest(scores, relevant, engine.make_plan(metrics, conv), exclude, batch_size, threads)
    return backends.with_capability(scores, "matrices").evaluate(request)


def matrix_update(scores, relevant, exclude, plan: engine.Plan, *, batch_size, threads):
    """One ``update`` of :class:`topkeval.MatrixEvaluator` or ``TopkMetrics`` (its parameters each
    checked, the plan made once): the batch's inputs checked by the backend that takes score
    matrices batch by batch (``"updates"``), ready to evaluate (``.evaluate(users)``)."""
    request = MatrixRequest(scores, relevant, plan, exclude, batch_size, threads)
    return backends.with_capability(scores, "updates").prepare(request)


@dataclass(frozen=True)
class MatrixRequest:
    """What ``evaluate_matrix()`` was asked, checked: the matrices, the plan and the options."""

    scores: object
    relevant: object
    plan: engine.Plan
    exclude: object = None
    batch_size: int | None = None
    threads: int | None = None


def read_parquet_with_spark(path, master: str):
    """The command line's ``--spark``: a parquet file or folder read as a Spark DataFrame (in the
    active session, or a new one on ``master``), for :func:`evaluate` to hand to the Spark backend."""
    from .backends.spark import read_parquet

    return read_parquet(path, master)


def one_ranking(family: str, relevance, scores, k, *, params=(), items=None, conventions=None, owner: str,
                **settings) -> float:
    """One metric of one ranking (``recall_at_k`` and its siblings): its arrays checked, then evaluated
    as a log of one query."""
    from .metrics.names import Metric

    conv = resolve_conventions(conventions, owner=owner, also=("items", "conventions"), **settings)
    metric = Metric(family, k, params)
    rel = _as_1d(relevance, "relevance", owner)
    sc = _as_1d(scores, "scores", owner)
    if len(rel) != len(sc):
        raise DataError(f"relevance and scores of {owner} must have the same length; got {len(rel)} and {len(sc)}.")
    if len(rel) == 0:
        raise DataError(f"{owner} got an empty ranking: relevance and scores have no values.")
    if items is not None:
        items = _as_1d(items, "items", owner)
        if len(items) != len(rel):
            raise DataError(f"items of {owner} must have one id per candidate; got {len(items)} for {len(rel)}.")
    from .backends.local import one_ranking as evaluate_one

    return evaluate_one(rel, sc, items, engine.make_plan([metric], conv))


def _as_1d(values, name: str, owner: str) -> np.ndarray:
    """One value per candidate, as given: a Python list of ints beyond 2**53 is refused rather than
    rounded to floats by numpy (two different ids or scores would tie)."""
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    if isinstance(values, (list, tuple)) and any(
            isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 for v in values):
        raise DataError(f"{name} of {owner} holds integers beyond 2**53, which a float cannot hold exactly (two "
                        "different values could become equal, a false tie); rescale them.")
    from .inputs.tables import _sequence

    try:
        arr = _sequence(values)
    except DataError as exc:
        raise DataError(f"{name} of {owner} must be a one-dimensional array of values: {exc}") from None
    if arr.ndim != 1:
        raise DataError(f"{name} of {owner} must be one-dimensional (one value per candidate); got shape {arr.shape}.")
    return arr


__all__ = ["MatrixRequest", "Request", "dispatch", "evaluate", "evaluate_matrix", "matrix_update", "one_ranking",
           "read_parquet_with_spark", "resolve"]
