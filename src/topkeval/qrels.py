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
from .ids import encode, sorted_codes
from .io import is_trec_path, read_columns, read_qrels
from .log import Judgments


def _read_judgments(qrels, query: str, item: str, relevance: str) -> dict:
    if is_trec_path(qrels):
        qrels = read_qrels(qrels).rename(columns={"query": query, "item": item, "relevance": relevance})
    return read_columns(qrels, [query, item, relevance], id_columns=[query, item],
                        roles={query: "query", item: "item", relevance: "relevance"},
                        where="the judgments (qrels=)",
                        hint=" If every pair the judgments list is relevant, give them a column of ones "
                             "(for a DataFrame: truth.assign(relevance=1)).")


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
    """Two arrays of ids in one comparable type, matched by value (see the module docstring).

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


def _distinct(values, column: str, role: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, labels) of an id column, integer ids included (their distinct values as labels)."""
    codes, labels = encode(values, column, role)
    if labels is None:
        codes, labels = pd.factorize(codes)
    return codes.astype(np.int64, copy=False), np.asarray(labels)


def codes_together(judged, run, column: str, role: str, ordered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of the judgments' and the run's ids in one label space, matched by value.

    Each side is encoded on its own (:func:`topkeval.ids.encode`: Arrow hashes text without Python
    objects), then only the distinct ids of the two sides are matched (:func:`match_ids`) and
    merged; ``ordered`` gives labels in ascending order (the order queries are reported in).
    """
    jc, jl = _distinct(judged, column, role)
    rc, rl = _distinct(run, column, role)
    jl, rl = match_ids(jl, rl, column)
    both = np.concatenate([jl.astype(object) if jl.dtype != rl.dtype else jl,
                           rl.astype(object) if jl.dtype != rl.dtype else rl])
    codes, labels = (sorted_codes if ordered else encode)(both, column, role)
    if labels is None:
        codes, labels = pd.factorize(codes, sort=ordered)
    return codes[: len(jl)][jc], codes[len(jl):][rc], np.asarray(labels)


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
    cols = read_columns(data, wanted, id_columns=[query, item] + ([model] if model else []),
                        roles={c: "score" for c in scores} | {query: "query", item: "item"}
                        | ({model: "model"} if model else {}), where="the run")
    judg = _read_judgments(qrels, query, item, relevance)
    grades_j = logmod.numeric_column(judg[relevance], relevance, "grade")
    # query codes over judgments and run together; evaluated queries = judged ones, sorted by id
    jqc, rqc, qlabels = codes_together(judg[query], cols[query], query, "query", ordered=True)
    jic, ric, ilabels = codes_together(judg[item], cols[item], item, "item", ordered=False)
    n_items = len(ilabels)
    jkey = jqc * n_items + jic
    row, count = logmod.first_duplicate(jkey)
    if count:
        raise DataError(f"The judgments list query {show(qlabels[jqc[row]])}, item {show(ilabels[jic[row]])} twice; "
                        "keep one grade per pair.")
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
        run_codes, run_names = _distinct(cols[model], model, "run name")
        by_run = np.argsort(run_codes, kind="stable")
        bounds = np.searchsorted(run_codes[by_run], np.arange(len(run_names) + 1))
        runs: list[tuple[str, np.ndarray | None, str]] = [
            (str(name), by_run[bounds[c]:bounds[c + 1]], scores[0]) for c, name in enumerate(run_names)]
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
        key = r_q * n_items + r_i
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
        _check_run_duplicates(log, name, unkept=key[~rows_kept])
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


def _check_run_duplicates(log, name: str, unkept: np.ndarray) -> None:
    """An item listed twice for one query of a run (a compiled check per query; rows of queries
    without judgments, which are not evaluated, by hashing)."""
    from .kernels.grouping import count_duplicates

    count, row = count_duplicates(log.offsets, log.items)
    if count:
        q = int(np.searchsorted(log.offsets, row, side="right")) - 1
        raise DataError(f"Run {name!r} lists query {show(log.queries[q])}, item {show(log.item_ids(log.items[row:row + 1])[0])} "
                        "twice; each item may appear once per query in a run.")
    if len(unkept):
        row, count = logmod.first_duplicate(unkept)
        if count:
            raise DataError(f"Run {name!r} lists an item twice for a query without judgments; each item may appear "
                            "once per query in a run.")


def _sample(values: np.ndarray) -> str:
    return ", ".join(show(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")


def _subset_csr(offsets: np.ndarray, values: np.ndarray, keep: np.ndarray):
    sizes = np.diff(offsets)[keep]
    starts = offsets[:-1][keep]
    new_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # row i of kept group q comes from starts[q] + (i - new_offsets[q]): no loop over queries
    idx = np.repeat(starts - new_offsets[:-1], sizes) + np.arange(new_offsets[-1], dtype=np.int64)
    return new_offsets, values[idx]
