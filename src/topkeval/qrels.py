"""Judgments kept apart from runs (TREC style), truncation to a depth, and merging per-run results.

A run lists what a model retrieved: (query, item, score). Judgments list (query, item, grade),
including relevant items that no model retrieved. For each run the retrieved rows get their grade
(0 when unjudged), R counts every judged item with a relevant grade, and the ideal DCG ranks every
judged gain. Queries are those with judgments; a query of the run without judgments is left out
and counted; a judged query missing from the run is left out (``missing_queries="skip"``,
trec_eval's default) or scored as an empty list (``"zero"``, trec_eval ``-c``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import log as logmod
from .conventions import Conventions
from .errors import DataError, ParameterError, show
from .io import read_columns, read_qrels
from .results import Results


def _read_judgments(qrels, query: str, item: str, relevance: str) -> dict:
    from .api import _is_trec_file

    if _is_trec_file(qrels):
        return {c: v.to_numpy() for c, v in read_qrels(qrels).rename(
            columns={"query": query, "item": item, "relevance": relevance}).items()}
    return read_columns(qrels, [query, item, relevance])


def _as_text(values: np.ndarray) -> np.ndarray:
    """Ids of runs and judgments are matched as text when their types differ (TREC ids are text)."""
    return values.astype(str).astype(object)


def evaluate_with_qrels(data, qrels, metrics, conv: Conventions, *, query, relevance, score, item, model,
                        missing_queries, depth, threads) -> Results:
    """evaluate(run, qrels=...): see the module docstring."""
    from .api import evaluate_log

    if item is None:
        raise ParameterError("Judgments are matched to the run by item id: pass item='<column>' with qrels=.")
    scores = [score] if isinstance(score, str) else list(score)
    if model is not None and len(scores) != 1:
        raise ParameterError("With model= (a run-name column) give exactly one score column.")
    cols = read_columns(data, [query, item, *scores] + ([model] if model else []))
    judg = _read_judgments(qrels, query, item, relevance)
    jq, ji = judg[query], judg[item]
    rq, ri = cols[query], cols[item]
    if jq.dtype != rq.dtype:
        jq, rq = _as_text(jq), _as_text(rq)
    if ji.dtype != ri.dtype:
        ji, ri = _as_text(ji), _as_text(ri)
    grades_j = logmod.numeric_column(judg[relevance], relevance, "grade")
    # query codes over judgments and run together; evaluated queries = judged ones, sorted by id
    qcodes, qlabels = pd.factorize(np.concatenate([jq, rq]), sort=True)
    jqc, rqc = qcodes[: len(jq)], qcodes[len(jq):]
    icodes, ilabels = logmod.item_codes(np.concatenate([ji, ri]), item)
    jic, ric = icodes[: len(ji)], icodes[len(ji):]
    n_items = len(ilabels)
    jkey = jqc.astype(np.int64) * n_items + jic
    row, count = logmod.first_duplicate(jkey)
    if count:
        raise DataError(f"The judgments list query {show(jq[row])}, item {show(ji[row])} twice; keep one grade per pair.")
    judged_q = np.unique(jqc)
    pos = np.full(len(qlabels), -1, np.int64)
    pos[judged_q] = np.arange(len(judged_q))
    Q = len(judged_q)
    # judged items per evaluated query, for R and the ideal DCG
    j_offsets, j_perm = logmod.counting_groups(pos[jqc], Q)
    j_grades = grades_j[j_perm]
    rel_j = j_grades > 0 if conv.threshold is None else j_grades >= conv.threshold
    csum = np.concatenate([[0], np.cumsum(rel_j, dtype=np.int64)])
    R = csum[j_offsets[1:]] - csum[j_offsets[:-1]]
    lookup = pd.Index(jkey)
    if model is not None:
        names = pd.unique(cols[model])
        runs = [(str(name), np.flatnonzero(cols[model] == name), scores[0]) for name in names]
    else:
        runs = [(s, None, s) for s in scores]
    results = []
    for name, rows, col in runs:
        sel = slice(None) if rows is None else rows
        r_q, r_i = rqc[sel], ric[sel]
        r_scores = logmod.numeric_column(cols[col][sel], col, "score")
        key = r_q.astype(np.int64) * n_items + r_i
        row, count = logmod.first_duplicate(key)
        if count:
            raise DataError(f"Run {name!r} lists query {show(qlabels[r_q[row]])}, item {show(ilabels[r_i[row]])} "
                            "twice; each item may appear once per query in a run.")
        found = lookup.get_indexer(key)
        r_grades = np.where(found >= 0, grades_j[np.maximum(found, 0)], 0.0)
        r_pos = pos[r_q]
        judged_rows = r_pos >= 0
        unjudged_queries = int(len(np.unique(r_q[~judged_rows])))
        present = np.zeros(Q, bool)
        present[r_pos[judged_rows]] = True
        keep_q = np.ones(Q, bool) if missing_queries == "zero" else present
        new_pos = np.cumsum(keep_q) - 1
        rows_kept = judged_rows & keep_q[np.where(judged_rows, r_pos, 0)]
        offsets, perm = logmod.counting_groups(new_pos[r_pos[rows_kept]], int(keep_q.sum()))
        idx = np.flatnonzero(rows_kept)[perm]
        log = logmod.GroupedLog(offsets, qlabels[judged_q[keep_q]], r_grades[idx], {name: r_scores[idx]},
                                r_i[idx], ilabels)
        if depth is not None:
            log = truncate(log, name, depth, conv)
        jo, jg = _subset_csr(j_offsets, j_grades, keep_q)
        res = evaluate_log(log, metrics, conv, n_rows=len(idx), threads=threads, R=R[keep_q], judged=(jo, jg),
                           extra_info={"judged_queries": Q,
                                       "run_queries_without_judgments": {name: unjudged_queries},
                                       "missing_from_run": {name: int((~present).sum())}})
        results.append(res)
    return merge_results(results)


def _subset_csr(offsets: np.ndarray, values: np.ndarray, keep: np.ndarray):
    sizes = np.diff(offsets)[keep]
    starts = offsets[:-1][keep]
    new_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # row i of kept group q comes from starts[q] + (i - new_offsets[q]): no loop over queries
    idx = np.repeat(starts - new_offsets[:-1], sizes) + np.arange(new_offsets[-1], dtype=np.int64)
    return new_offsets, values[idx]


def truncate(log: logmod.GroupedLog, model: str, depth: int, conv: Conventions) -> logmod.GroupedLog:
    """Keep the first ``depth`` candidates of each query of one model under the tie rule (trec_eval -M)."""
    n = len(log.grades)
    qpos = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    scores = log.scores[model]
    order_in = np.arange(n)
    rel = log.relevant(conv.threshold)
    if conv.ties == "first":
        tiekeys = (order_in,)
    elif conv.ties in ("item_desc", "item_asc"):
        if log.items is None:
            raise ParameterError(f"ties={conv.ties!r} needs item ids.")
        tiekeys = (order_in, -log.items if conv.ties == "item_desc" else log.items)
    elif conv.ties == "optimistic":
        tiekeys = (order_in, -log.grades.astype(np.float64), ~rel)  # float: no overflow of -int8
    else:
        tiekeys = (order_in, log.grades, rel)
    order = np.lexsort((*tiekeys, -scores, qpos))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - log.offsets[qpos[order]]
    keep = rank < depth
    kept_per_query = np.bincount(qpos[keep], minlength=log.n_queries)
    offsets = np.concatenate([[0], np.cumsum(kept_per_query)]).astype(np.int64)
    return logmod.GroupedLog(offsets, log.queries, log.grades[keep], {model: scores[keep]},
                             None if log.items is None else log.items[keep], log.item_labels)


def merge_results(results: list[Results]) -> Results:
    """One Results from per-model Results (runs that retrieved different items)."""
    if len(results) == 1:
        return results[0]
    summary = pd.concat([r.summary for r in results])
    per_query = pd.concat([r.per_query for r in results], ignore_index=True)
    info = dict(results[0].info)
    for key in ("evaluated", "skipped_empty", "rows"):
        values = {m: r.info[key] for r in results for m in r.models}
        info[key] = next(iter(values.values())) if len(set(values.values())) == 1 else values
    for key in ("ties_at_cutoff", "run_queries_without_judgments", "missing_from_run"):
        if key in info:
            info[key] = {m: c for r in results for m, c in r.info[key].items()}
    info["models"] = list(summary.index)
    if len(set(summary.index)) != len(summary.index):
        raise ParameterError(f"Two runs share a name: {list(summary.index)}; rename one.")
    return Results(summary, per_query, info)
