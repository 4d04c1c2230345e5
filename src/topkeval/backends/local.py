"""The CPU backend's paths over data read locally: runs with judgments kept apart, and files
streamed batch by batch. The readers (:mod:`topkeval.inputs.judgments`, :mod:`topkeval.inputs.stream`)
turn the input into grouped logs; here each log is evaluated by the backend the front door chose,
and the batches go to the one results builder (:func:`topkeval.engine.build_results`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import pandas as pd

from .. import engine
from ..conventions import Conventions
from ..errors import DataError, ParameterError, TopkevalWarning
from ..inputs.judgments import _PARTIAL_COUNTS, RunApart, read_runs
from ..inputs.stream import NotGrouped, StreamedFile


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

    def __call__(self, names) -> engine.Evaluation:
        again = engine.make_plan(names, self.conv)
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

    def __call__(self, names) -> engine.Evaluation:
        self.file.check_unchanged("curves")
        with warnings.catch_warnings():  # said once, by the evaluation itself (as a table in memory does)
            warnings.simplefilter("ignore", TopkevalWarning)
            return evaluate_file(self.path, engine.make_plan(names, self.conv), **self.options)
