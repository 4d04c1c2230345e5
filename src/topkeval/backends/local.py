"""The CPU backend's paths over data read on this machine: a table in memory (a click log among
them), a stacked table (``model=``), runs with judgments kept apart, files streamed batch by batch,
and the one ranking of ``recall_at_k`` and its siblings. The readers (:mod:`topkeval.inputs.tables`,
:mod:`topkeval.inputs.judgments`, :mod:`topkeval.inputs.stream`) turn the input into grouped logs;
here each log is evaluated by the CPU backend (:data:`topkeval.backends.cpu.CPU`), and the batches go
to the one results builder (:func:`topkeval.engine.build_results`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .. import engine
from ..conventions import Conventions
from ..errors import DataError, ParameterError, TopkevalWarning
from ..inputs.grouped import build_log
from ..inputs.judgments import _PARTIAL_COUNTS, RunApart, read_runs
from ..inputs.stream import NotGrouped, StreamedFile
from .cpu import CPU
from .plugins import BackendPlugin

if TYPE_CHECKING:
    from ..request import Request


def evaluate(r: Request) -> engine.Evaluation:
    """A checked request over local data, to its path: runs with judgments apart (``qrels=``), a file
    streamed in batches, or a table read whole into memory (a click log and a stacked table always)."""
    if r.qrels is not None:
        return evaluate_runs(r.data, r.qrels, r.plan, query=r.query, relevance=r.relevance, scores=r.scores,
                             item=r.item, model=r.model, missing_queries=r.missing_queries, depth=r.depth,
                             judged_only=r.judged_only, threads=r.threads, ascending=r.ascending, by=r.by,
                             weight=r.weight, backend=CPU, own_rows=r.model is not None)
    if streamed(r.data, r.chunk_rows, r.position, r.model):
        return evaluate_file(r.data, r.plan, query=r.query, relevance=r.relevance, scores=r.scores, item=r.item,
                             depth=r.depth, threads=r.threads, chunk_rows=r.chunk_rows, progress=r.progress,
                             keep_per_query=r.keep_per_query, ascending=r.ascending, by=r.by, weight=r.weight,
                             backend=CPU)
    if r.chunk_rows is not None:
        raise ParameterError("chunk_rows streams a parquet or CSV file in batches; data is not such a path. Drop "
                             "chunk_rows, or write the table to parquet first.")
    return evaluate_table(r)


def streamed(data, chunk_rows: int | None, position: str | None, model: str | None) -> bool:
    """Whether a table's data is streamed in batches (a large parquet file, or ``chunk_rows``); a click
    log and a stacked table are read whole (positions and weights go with the grouped rows; each
    model's rows are grouped apart) unless ``chunk_rows`` asks otherwise."""
    from ..inputs import stream

    return (position is None and model is None or chunk_rows is not None) and stream.should_stream(data, chunk_rows)


def evaluate_table(r: Request) -> engine.Evaluation:
    """A table in memory: its columns read once into a grouped log, kept to evaluate other metrics."""
    from ..inputs import read_columns, segments
    from .clicks import click_info, click_rows

    query, item, by, weight = r.query, r.item, r.by, r.weight
    clicks = [r.position] if r.position else []
    clicks += [r.propensity] if isinstance(r.propensity, str) else []
    wanted = ([query, r.relevance, *r.scores] + ([item] if item is not None else []) + ([r.model] if r.model else [])
              + r.attributes + clicks)
    ids = [query] + ([item] if item else []) + ([r.model] if r.model else [])
    roles = (_roles(query, r.relevance, r.scores, item) | {name: "by" for name in by}
             | ({weight: "weight"} if weight else {}) | ({r.position: "position"} if r.position else {})
             | ({r.propensity: "propensity"} if isinstance(r.propensity, str) else {})
             | ({r.model: "model"} if r.model else {}))
    cols = read_columns(r.data, wanted, id_columns=ids, roles=roles)
    if r.model is not None:
        return evaluate_stacked(r, cols)
    rows, ips_info = click_rows(r, cols)
    log = build_log(cols[query], cols[r.relevance], {s: cols[s] for s in r.scores},
                    cols[item] if item is not None else None,
                    names=dict(query=query, relevance=r.relevance, item=item or "item"), ascending=r.ascending,
                    borrowed=cols.borrowed, rows=rows)
    sizes = np.diff(log.offsets)
    if r.position is None and r.propensity is None:  # a click log's pages: the same number on every query
        engine.warn_if_truncated(r.plan, log.n_queries, int(sizes.min()), int(sizes.max()))
    attrs = segments.query_attributes(cols[query], cols, by, weight, query) if r.attributes else None
    run = _TableRerun(log, r.plan.conv, attrs, tuple(by), weight, r.depth, r.threads, query, r.propensity is not None)
    evaluation = run.evaluate(r.plan)
    if r.position is not None or ips_info is not None:
        evaluation = replace(evaluation, info={**evaluation.info, **click_info(log, r, ips_info)})
    if getattr(r.propensity, "statistics", None) is not None:  # estimate_position_bias's curve: intervals refit it
        evaluation = replace(evaluation, estimated_curve=r.propensity)
    # other metrics of the same rows (Results.curves): the grouped log is kept, not read again
    return replace(evaluation, rerun=run)


@dataclass(frozen=True, eq=False, repr=False)
class _TableRerun:
    """A table's grouped log evaluated (again) at other metrics (``Evaluation.rerun``): an object
    holding its inputs, so that the results pickle."""

    log: object
    conv: Conventions
    attrs: pd.DataFrame | None
    by: tuple
    weight: str | None
    depth: int | None
    threads: int | None
    query: str
    weighted: bool  # inverse propensity weights: other metrics (curves) only where they are estimable

    def evaluate(self, plan: engine.Plan) -> engine.Evaluation:
        if self.weighted:
            from ..engine.unbiased import check_families

            check_families(plan.metrics)
        evaluation = evaluate_grouped(self.log, plan, depth=self.depth, threads=self.threads, query_name=self.query)
        return engine.attach(evaluation, self.attrs, self.by, self.weight) if self.attrs is not None else evaluation

    def __call__(self, names, lists: bool = False) -> engine.Evaluation:
        return replace(self.evaluate(engine.make_plan(names, self.conv, clicks=self.weighted, lists=lists)), rerun=self)


def _stacked_counts(batches, queries: int) -> dict:
    """A stacked table's counts: each model's queries evaluated, skipped as empty and without a row
    of its own (they add up to ``queries``), and the top-level ``evaluated`` and ``skipped_empty`` of
    one model, the one with the most evaluated queries (named in ``counts_of_model`` where the models'
    counts differ), so that they too add up."""
    evaluated = {b.models[0].model: b.models[0].evaluated for b in batches}
    skipped = {b.models[0].model: b.skipped_empty for b in batches}
    absent = {m: queries - evaluated[m] - skipped[m] for m in evaluated}
    first = max(evaluated, key=lambda m: evaluated[m])
    info = {"queries": queries, "evaluated": evaluated[first], "skipped_empty": skipped[first],
            "skipped_empty_per_model": skipped, "without_rows_per_model": absent}
    if len({(evaluated[m], skipped[m]) for m in evaluated}) > 1:
        info["counts_of_model"] = first
    return info


def evaluate_grouped(log, plan: engine.Plan, *, depth: int | None = None, threads: int | None = None,
                     query_name: str = "query") -> engine.Evaluation:
    """Evaluate a grouped log held in memory: the engine's batch, then its Evaluation."""
    from ..engine.results import Kept

    batch, sources = engine.evaluate_grouped(log, plan, backend=CPU, depth=depth, threads=threads)
    engine.warn_if_nothing_relevant(plan.conv, batch.relevant)
    return engine.build_results([batch], plan, query_name=query_name, sources=Kept(sources), backend=CPU)


def evaluate_stacked(r: Request, cols) -> engine.Evaluation:
    """A stacked table without judgments apart (``model=``, no ``qrels=``): each model's rows are a
    log of their own, evaluated as that model's table alone would be (R: the relevant candidates
    among its own rows), and the batches go to the one results builder."""
    from ..inputs import segments
    from ..inputs.ids import encode, take_rows
    from ..inputs.judgments import model_rows

    query, item, score, model = r.query, r.item, r.scores[0], str(r.model)
    logs = []
    for name, rows in model_rows(cols[model], model):
        part = {c: take_rows(cols[c], rows) for c in [query, r.relevance, score] + ([item] if item else [])}
        logs.append(build_log(part[query], part[r.relevance], {name: part[score]}, part[item] if item else None,
                              names=dict(query=query, relevance=r.relevance, item=item or "item"),
                              ascending=r.ascending, borrowed=False))  # rows taken: copies, never the caller's
    sizes = np.concatenate([np.diff(log.offsets) for log in logs])
    engine.warn_if_truncated(r.plan, len(sizes), int(sizes.min()), int(sizes.max()))
    codes, labels = encode(cols[query], query, "query")
    distinct = len(labels) if labels is not None else len(np.unique(codes))
    attrs = segments.query_attributes(cols[query], cols, r.by, r.weight, query) if r.attributes else None
    run = _StackedRerun(tuple(logs), r.plan.conv, attrs, tuple(r.by), r.weight, r.depth, r.threads, query, distinct)
    return replace(run.evaluate(r.plan), rerun=run)


@dataclass(frozen=True, eq=False, repr=False)
class _StackedRerun:
    """A stacked table's logs (one per model) evaluated (again) at other metrics: an object holding
    them, so that the results pickle."""

    logs: tuple
    conv: Conventions
    attrs: pd.DataFrame | None
    by: tuple
    weight: str | None
    depth: int | None
    threads: int | None
    query: str
    distinct: int

    def evaluate(self, plan: engine.Plan, warn: bool = True) -> engine.Evaluation:
        from ..engine.results import Kept

        batches, sources = [], []
        for log in self.logs:
            batch, kept = engine.evaluate_grouped(log, plan, backend=CPU, depth=self.depth, threads=self.threads)
            batches.append(batch)
            sources += kept
        if warn:
            engine.warn_if_nothing_relevant(plan.conv, sum(b.relevant for b in batches))
        info = _stacked_counts(batches, self.distinct)
        evaluation = engine.build_results(batches, plan, query_name=self.query, info=info, sources=Kept(sources),
                                          backend=CPU, own_rows=True)
        return engine.attach(evaluation, self.attrs, self.by, self.weight) if self.attrs is not None else evaluation

    def __call__(self, names, lists: bool = False) -> engine.Evaluation:
        return replace(self.evaluate(engine.make_plan(names, self.conv, lists=lists), warn=False), rerun=self)


def one_ranking(relevance: np.ndarray, scores: np.ndarray, items: np.ndarray | None, plan: engine.Plan) -> float:
    """The one metric of ``plan`` on one ranking (``recall_at_k`` and its siblings): a log of one
    query, evaluated by the CPU backend; NaN when the query is skipped."""
    log = build_log(np.zeros(len(relevance), np.int64), relevance, {"score": scores}, items,
                    names=dict(query="query", relevance="relevance", item="items"), borrowed=False)
    batch = engine.evaluate_log(log, plan, backend=CPU, threads=1)
    values = batch.models[0].values[str(plan.metrics[0])]
    return float(values[0]) if len(values) else math.nan


def _roles(query, relevance, scores, item=None) -> dict:
    """Which parameter names each column (for the message when one is missing)."""
    roles = {s: "score" for s in scores}
    roles.update({c: role for c, role in ((query, "query"), (relevance, "relevance"), (item, "item")) if c is not None})
    return roles


def evaluate_run(run: RunApart, plan: engine.Plan, *, backend, depth: int | None = None, judged_only: bool = False,
                 threads: int | None = None):
    """One matched run: truncated to ``depth`` by the kernel's own order (trec_eval -M), then without
    its unjudged items with ``judged_only`` (-J, after -M; num_ret counts the rest), then evaluated.
    Returns the batch and the log evaluated."""
    log = run.log
    if depth is not None:
        log = engine.truncate(log, run.name, depth, plan.conv)
    if judged_only:
        log = run.judged_only(log)
    return evaluate_matched(run, log, plan, backend=backend, judged_only=judged_only, threads=threads), log


def evaluate_matched(run: RunApart, log, plan: engine.Plan, *, backend, judged_only: bool, threads: int | None):
    """The metrics of ``plan`` on one matched run's ``log``; those with ``judged_only=true`` (ir_measures'
    ``AP(judged_only=True)``) on it without its unjudged items, unless ``judged_only`` dropped them already."""
    own = [bool(m.param("judged_only")) for m in plan.metrics]
    if judged_only or not any(own):
        return engine.evaluate_log(log, plan, backend=backend, judgments=run.judgments, threads=threads, rows=run.rows,
                                   judged_only=judged_only)
    parts = [engine.evaluate_log(run.judged_only(log), plan.select(own), backend=backend, judgments=run.judgments,
                                 threads=threads, rows=run.rows, judged_only=True)]
    if not all(own):
        parts.append(engine.evaluate_log(log, plan.select([not o for o in own]), backend=backend,
                                         judgments=run.judgments, threads=threads, rows=run.rows))
    return engine.merge_evaluated(parts, plan.names)


def run_batches(data, qrels, plan: engine.Plan, *, backend, depth: int | None = None, judged_only: bool = False,
                threads: int | None = None, warn: bool = True, kept: list | None = None, **reading):
    """The engine's batches of runs with judgments apart (one per run), the ``(log, R)`` of each, and
    the counts for ``info`` (``reading``: the options of :func:`~topkeval.inputs.judgments.read_runs`).
    ``kept``, when given, receives each run's ``(run, log, judged_only)``, to evaluate again at other
    metrics."""
    runs, info = read_runs(data, qrels, plan.conv, warn=warn, **reading)
    if warn:
        engine.warn_if_nothing_relevant(plan.conv, info["relevant"])
    batches, logs = [], []
    for run in runs:
        batch, log = evaluate_run(run, plan, backend=backend, depth=depth, judged_only=judged_only, threads=threads)
        batches.append(batch)
        logs.append((log, run.judgments.R))
        if kept is not None:
            kept.append((run, log, judged_only))
    return batches, logs, info


def evaluate_runs(data, qrels, plan: engine.Plan, *, query: str, backend, by=None, weight=None, threads=None,
                  own_rows: bool = True, **options) -> engine.Evaluation:
    """evaluate(run, qrels=...): see :mod:`topkeval.inputs.judgments`.

    The evaluation keeps each run's grouped log and judgments: :meth:`Results.curves` evaluates them
    again at other metrics, never the caller's tables (which may have changed since). ``own_rows``:
    each run's rows are its own (stacked runs, TREC run files), not one table of candidates every
    score column ranks (:attr:`~topkeval.engine.Evaluation.own_rows`)."""
    kept: list = []
    batches, logs, info = run_batches(data, qrels, plan, query=query, backend=backend, by=by, weight=weight,
                                      threads=threads, kept=kept, **options)
    for key in _PARTIAL_COUNTS:
        info.pop(key)
    attrs = info.pop("_attrs", None)
    rerun = _RunsRerun(tuple(kept), tuple(logs), plan.conv, info, attrs, tuple(by or []), weight, query, backend,
                       threads, own_rows)
    return rerun.results(plan, batches)


@dataclass(frozen=True, eq=False, repr=False)
class _RunsRerun:
    """Runs with judgments apart, evaluated again at other metrics (Results.curves): an object holding
    each run, its log and its judgments, so that the results pickle."""

    kept: tuple  # (run, log, judged_only) of each run
    logs: tuple  # (log, R) of each run: the Evaluation's sources
    conv: Conventions
    info: dict
    attrs: pd.DataFrame | None
    by: tuple
    weight: str | None
    query: str
    backend: object
    threads: int | None
    own_rows: bool

    def results(self, plan: engine.Plan, batches) -> engine.Evaluation:
        from ..engine.results import Kept

        out = engine.build_results(batches, plan, query_name=self.query, info=dict(self.info),
                                   sources=Kept(list(self.logs)), backend=self.backend, attributes=self.attrs,
                                   by=list(self.by), weight=self.weight, own_rows=self.own_rows)
        return replace(out, rerun=self)

    def __call__(self, names, lists: bool = False) -> engine.Evaluation:
        again = engine.make_plan(names, self.conv, lists=lists)
        return self.results(again, [evaluate_matched(run, log, again, backend=self.backend, judged_only=judged_only,
                                                     threads=self.threads) for run, log, judged_only in self.kept])


def evaluate_file(path, plan: engine.Plan, *, query: str, relevance: str, scores: list[str], item: str | None,
                  depth: int | None, threads: int | None, chunk_rows: int | None, progress=None,
                  keep_per_query: bool = True, ascending: bool = False, by: list[str] | None = None,
                  weight: str | None = None, backend) -> engine.Evaluation:
    """Evaluate a parquet or CSV file batch by batch with ``backend`` (see :mod:`topkeval.inputs.stream`):
    memory holds one batch's rows and, with ``keep_per_query``, the per-query values."""
    attributes = list(by or []) + ([weight] if weight else [])
    if attributes and not keep_per_query:
        raise ParameterError("by= and weight= work on the per-query values, which keep_per_query=False drops: keep "
                             "them (the default), or drop by= and weight=.")
    file = StreamedFile(path, query=query, relevance=relevance, scores=scores, item=item, chunk_rows=chunk_rows,
                        ascending=ascending, by=by, weight=weight)
    attrs: list = []
    sizes: list = []  # (queries, fewest, most candidates) of each table: the top-N warning, decided on the whole

    def evaluate_tables(tables, progress=None) -> tuple[list[engine.Evaluated], int]:
        batches, rows = [], 0
        attrs.clear()
        sizes.clear()
        for table, read in tables:
            if table is not None:
                log = file.to_log(table, attrs)
                lengths = log.offsets[1:] - log.offsets[:-1]
                if len(lengths):
                    sizes.append((log.n_queries, int(lengths.min()), int(lengths.max())))
                batch, _ = engine.evaluate_grouped(log, plan, backend=backend, depth=depth, threads=threads)
                batches.append(batch if keep_per_query else batch.reduce())
                rows += table.num_rows
            if progress and read:
                file.progress(progress, read)
        return batches, rows

    try:
        batches, rows = evaluate_tables(file.tables(), progress)
    except NotGrouped:
        batches, rows = evaluate_tables(file.partitioned(progress))
    if rows == 0:
        raise DataError(f"'{path}' has no rows: there is nothing to evaluate.")
    if sizes:
        engine.warn_if_truncated(plan, sum(n for n, _, _ in sizes), min(lo for _, lo, _ in sizes),
                                 max(hi for _, _, hi in sizes))
    engine.warn_if_nothing_relevant(plan.conv, sum(b.relevant for b in batches))
    whole = None
    if attributes:
        whole = pd.concat(attrs)
        if weight and not (whole[weight] > 0).any():
            raise DataError(f"Every query weight in {weight!r} is 0: a weighted mean needs a positive total weight.")

    rerun = _FileRerun(file, path, plan.conv, dict(query=query, relevance=relevance, scores=scores, item=item,
                                                   depth=depth, threads=threads, chunk_rows=chunk_rows,
                                                   keep_per_query=keep_per_query, ascending=ascending, by=by,
                                                   weight=weight, backend=backend))
    return engine.build_results(batches, plan, query_name=query, info={"rows": rows, "chunks": len(batches)},
                                sources=_FileRows(file), backend=backend, rerun=rerun, attributes=whole,
                                by=list(by or []), weight=weight)


@dataclass(frozen=True, eq=False, repr=False)
class _FileRows:
    """A streamed file's logs read again (``Evaluation.sources``), if it is still the same file."""

    file: StreamedFile

    def __call__(self):
        return self.file.logs_again("this (diff, side_by_side, beyond_accuracy or the report)")


@dataclass(frozen=True, eq=False, repr=False)
class _FileRerun:
    """The same file at other metrics (Results.curves), if it is still the same file: an object holding
    the path and the options, so that the results pickle."""

    file: StreamedFile
    path: object
    conv: Conventions
    options: dict

    def __call__(self, names, lists: bool = False) -> engine.Evaluation:
        self.file.check_unchanged("curves")
        with warnings.catch_warnings():  # said once, by the evaluation itself (as a table in memory does)
            warnings.simplefilter("ignore", TopkevalWarning)
            return evaluate_file(self.path, engine.make_plan(names, self.conv, lists=lists), **self.options)


def accepts(data, plan=None) -> bool:
    """Any data the other backends do not take: a table in memory (pandas, polars, pyarrow, a dict of
    columns), a table file, TREC run files (the readers say what is wrong with anything else)."""
    return True


#: The CPU backend over local data as the dispatcher sees it (registered in :mod:`topkeval.backends`,
#: asked last: it takes what no other backend does).
PLUGIN = BackendPlugin(
    "cpu", "a table in memory, a table file or TREC run files", accepts,
    frozenset({"rows", "clicks", "stacked", "judgments", "segments", "streaming", "lists"}),
    hints={"matrices": "evaluate_matrix takes numpy or torch matrices; evaluate() takes a table of rows"},
    evaluate=evaluate)
