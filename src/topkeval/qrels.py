"""Judgments kept apart from runs (TREC style): matching them, truncating runs to a depth.

A run lists what a model retrieved: (query, item, score). Judgments list (query, item, grade),
including relevant items that no model retrieved. For each run the retrieved rows get their grade
(0 when unjudged), R counts every judged item with a relevant grade, and the ideal DCG ranks every
judged gain. Queries are those with judgments; a query of the run without judgments is left out
and counted; a judged query missing from the run is left out (``missing_queries="skip"``,
trec_eval's default) or scored as an empty list (``"zero"``, trec_eval ``-c``).

Ids are matched by value: text with text, numbers with numbers (1 and 1.0 are the same id), and
numbers with text by their decimal form (1 and "1"); anything else is refused rather than matched
to nothing. Judgments that share no query with a run are an error.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from . import engine
from . import log as logmod
from .errors import ColumnError, DataError, ParameterError, TopkevalWarning, show
from .io import is_trec_path, read_columns, read_qrels
from .log import Judgments


def _read_judgments(qrels, query: str, item: str, relevance: str) -> dict:
    if is_trec_path(qrels):
        frame = read_qrels(qrels)
        return {query: frame["query"].to_numpy(), item: frame["item"].to_numpy(),
                relevance: frame["relevance"].to_numpy()}
    return read_columns(qrels, [query, item, relevance], text_columns=[query, item])


def _kind(values: np.ndarray) -> str:
    if values.dtype.kind in "iub":
        return "int"
    if values.dtype.kind == "f":
        return "float"
    if values.dtype.kind in "US":
        return "text"
    if values.dtype.kind == "O":
        kind = pd.api.types.infer_dtype(values, skipna=False)
        if kind in ("string", "bytes"):
            return "text"
        if kind == "integer":
            return "int"
        if kind in ("floating", "mixed-integer-float"):
            return "float"
    return "other"


def _whole(values: np.ndarray, column: str, side: str) -> np.ndarray:
    as_float = values.astype(np.float64)
    if not np.all(np.mod(as_float, 1) == 0) or np.abs(as_float).max() > 2**53:
        bad = values[np.flatnonzero(np.mod(as_float, 1) != 0)[:1]] if not np.all(np.mod(as_float, 1) == 0) \
            else values[:1]
        raise ColumnError(f"Ids of column {column!r} in the {side} are numbers that are not whole ({show(bad[0])}), "
                          "while the other side's are integers or text: they cannot be matched. Use one type of "
                          "id in the run and the judgments.")
    return as_float.astype(np.int64)


def match_ids(judged: np.ndarray, run: np.ndarray, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The two id columns in one comparable type, matched by value (see the module docstring).

    >>> [x.tolist() for x in match_ids(np.array([1.0, 2.0]), np.array([1, 3]), "query")]
    [[1, 2], [1, 3]]
    >>> [x.tolist() for x in match_ids(np.array(["1", "x"], dtype=object), np.array([1, 2]), "query")]
    [['1', 'x'], ['1', '2']]
    """
    kj, kr = _kind(judged), _kind(run)
    if kj == kr and kj != "other":
        return judged, run
    numeric = ("int", "float")
    if kj in numeric and kr in numeric:
        if kj == "float" and kr == "float":
            return judged, run
        return _whole(judged, column, "judgments"), _whole(run, column, "run")
    if "text" in (kj, kr) and (kj in numeric or kr in numeric):
        j = judged if kj == "text" else _whole(judged, column, "judgments").astype(str).astype(object)
        r = run if kr == "text" else _whole(run, column, "run").astype(str).astype(object)
        return j, r
    raise ColumnError(f"The {column!r} ids of the judgments ({judged.dtype}) and of the run ({run.dtype}) cannot "
                      "be matched: use strings or numbers on both sides.")


def evaluate_runs(data, qrels, plan: engine.Plan, *, query: str, relevance: str, scores: list[str], item: str | None,
                  model: str | None, missing_queries: str, depth: int | None, judged_only: bool,
                  threads: int | None, ascending: bool = False):
    """evaluate(run, qrels=...): see the module docstring."""
    conv = plan.conv
    if item is None:
        raise ParameterError("Judgments are matched to the run by item id: pass item='<column>' with qrels=.")
    if model is not None and len(scores) != 1:
        raise ParameterError("With model= (a run-name column) give exactly one score column.")
    wanted = [query, item, *scores] + ([model] if model else [])
    if len(set(wanted)) != len(wanted):
        raise ParameterError(f"The query, item, score and model columns must differ. Got {wanted!r}.")
    cols = read_columns(data, wanted, text_columns=[query, item] + ([model] if model else []))
    judg = _read_judgments(qrels, query, item, relevance)
    logmod.check_ids(cols[query], query, "query")
    logmod.check_ids(cols[item], item, "item")
    logmod.check_ids(judg[query], query, "query")
    logmod.check_ids(judg[item], item, "item")
    jq, rq = match_ids(judg[query], cols[query], query)
    ji, ri = match_ids(judg[item], cols[item], item)
    grades_j = logmod.numeric_column(judg[relevance], relevance, "grade")
    # query codes over judgments and run together; evaluated queries = judged ones, sorted by id
    try:
        qcodes, qlabels = pd.factorize(np.concatenate([jq, rq]), sort=True)
    except TypeError:
        raise ColumnError(f"The {query!r} ids of the run and the judgments cannot be ordered together: use one "
                          "type of id.") from None
    jqc, rqc = qcodes[: len(jq)], qcodes[len(jq):]
    icodes, ilabels = logmod.item_codes(np.concatenate([ji, ri]), item)
    jic, ric = icodes[: len(ji)], icodes[len(ji):]
    n_items = len(ilabels)
    jkey = jqc.astype(np.int64) * n_items + jic
    row, count = logmod.first_duplicate(jkey)
    if count:
        raise DataError(f"The judgments list query {show(jq[row])}, item {show(ji[row])} twice; keep one grade per pair.")
    judged_q = np.unique(jqc)
    if not np.isin(rqc, judged_q).any():
        raise DataError(
            f"The judgments and the run share no query: judged queries look like {_sample(qlabels[judged_q])}, the "
            f"run's like {_sample(qlabels[np.unique(rqc)])}. Check the {query!r} columns (text '1' and the number 1 "
            "match; '007' and 7 do not)."
        )
    pos = np.full(len(qlabels), -1, np.int64)
    pos[judged_q] = np.arange(len(judged_q))
    Q = len(judged_q)
    # judged items per evaluated query, for R and the ideal DCG
    j_offsets, j_perm = logmod.counting_groups(pos[jqc], Q)
    j_grades = grades_j[j_perm]
    rel_j = conv.is_relevant(j_grades)
    csum = np.concatenate([[0], np.cumsum(rel_j, dtype=np.int64)])
    R = csum[j_offsets[1:]] - csum[j_offsets[:-1]]
    lookup = pd.Index(jkey)
    if model is not None:
        logmod.check_ids(cols[model], model, "run name")
        names = pd.unique(cols[model])
        runs: list[tuple[str, np.ndarray | None, str]] = [
            (str(name), np.flatnonzero(cols[model] == name), scores[0]) for name in names]
        if len({r[0] for r in runs}) < len(runs):
            raise ParameterError(f"Two runs of column {model!r} have the same name as text; rename one.")
    else:
        runs = [(s, None, s) for s in scores]
    batches, logs, info_runs, missing, judged_hits = [], [], {}, {}, 0
    for name, rows, col in runs:
        sel = slice(None) if rows is None else rows
        r_q, r_i = rqc[sel], ric[sel]
        r_scores = logmod.numeric_column(cols[col][sel], col, "score")
        if ascending:
            r_scores = np.negative(r_scores)
        key = r_q.astype(np.int64) * n_items + r_i
        row, count = logmod.first_duplicate(key)
        if count:
            raise DataError(f"Run {name!r} lists query {show(qlabels[r_q[row]])}, item {show(ilabels[r_i[row]])} "
                            "twice; each item may appear once per query in a run.")
        found = lookup.get_indexer(key)
        judged_hits += int((found >= 0).sum())
        r_grades = np.where(found >= 0, grades_j[np.maximum(found, 0)], 0)
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
            log = engine.truncate(log, name, depth, conv)
        if judged_only:
            # trec_eval -J, after -M: items without a judgment, or with a negative grade (in the pool
            # but not judged), leave the ranking; num_ret counts the rest
            judged = pd.Index(jkey[grades_j >= 0])
            rows_q = np.repeat(judged_q[keep_q], np.diff(log.offsets)).astype(np.int64)
            log = log.keep_rows(judged.get_indexer(rows_q * n_items + np.asarray(log.items, np.int64)) >= 0)
        jo, jg = _subset_csr(j_offsets, j_grades, keep_q)
        judgments = Judgments(R[keep_q], jo, jg)
        batches.append(engine.evaluate_log(log, plan, judgments=judgments, threads=threads, rows=len(r_q)))
        logs.append((log, judgments.R))
        info_runs[name] = unjudged_queries
        missing[name] = int((~present).sum())
    if judged_hits == 0:
        warnings.warn(f"No retrieved item has a judgment: check that the {item!r} ids of the run and of the "
                      "judgments are written the same way.", TopkevalWarning, stacklevel=3)
    engine.warn_if_nothing_relevant(conv, int(R.sum()))
    skipped = int((R == 0).sum()) if conv.empty_queries == "skip" else 0
    return engine.build_results(
        batches, plan, query_name=query,
        info={"queries": Q, "skipped_empty": skipped, "judged_queries": Q,
              "run_queries_without_judgments": info_runs, "missing_from_run": missing},
        sources=lambda: logs)


def _sample(values: np.ndarray) -> str:
    return ", ".join(show(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")


def _subset_csr(offsets: np.ndarray, values: np.ndarray, keep: np.ndarray):
    sizes = np.diff(offsets)[keep]
    starts = offsets[:-1][keep]
    new_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # row i of kept group q comes from starts[q] + (i - new_offsets[q]): no loop over queries
    idx = np.repeat(starts - new_offsets[:-1], sizes) + np.arange(new_offsets[-1], dtype=np.int64)
    return new_offsets, values[idx]
