"""evaluate() and the single-ranking functions: inputs -> grouped log -> statistics -> Results."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd

from . import log as logmod
from .conventions import UNSET, Conventions, resolve
from .errors import DataError, EmptyQueryError, ParameterError, ShortListError, show
from .io import read_columns
from .kernels.stats import QueryStats
from .metrics import RANK_FAMILIES, metric_values
from .names import Metric, parse_metrics
from .results import Results

DEFAULT_METRICS = ("recall@20", "precision@20", "f1@20", "specificity@20", "r_precision")


def _cutoffs(metrics: Sequence[Metric]) -> np.ndarray:
    from .kernels.cpu import NO_CUTOFF

    ks = {m.k for m in metrics if m.k is not None}
    if any(m.k is None and m.family in RANK_FAMILIES for m in metrics):
        ks.add(NO_CUTOFF)
    return np.asarray(sorted(ks) or [1], dtype=np.int64)


def gains_of(grades: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear (the grade) and exponential (2**grade - 1) gains; 0 for grades <= 0."""
    positive = grades > 0
    lin = np.where(positive, grades, 0.0).astype(np.float64)
    exp = np.where(positive, np.exp2(np.where(positive, grades, 0.0)) - 1.0, 0.0)
    return lin, exp


def compute_stats(log: logmod.GroupedLog, model: str, rel: np.ndarray, R: np.ndarray,
                  metrics: Sequence[Metric], conv: Conventions, *, threads=None,
                  force_path: int = 0, judged=None) -> QueryStats:
    """Run the CPU kernel for one model of a grouped log.

    ``judged`` = (offsets, grades) of every judged item per query, for the ideal DCG; by default
    the log's own candidates.
    """
    from .kernels import cpu

    cutoffs = _cutoffs(metrics)
    want_r = any(m.family == "r_precision" for m in metrics)
    want_rank = any(m.family in RANK_FAMILIES for m in metrics)
    gains = gains_of(log.grades) if want_rank else (None, None)
    # the kernel reads grades only to order ties by relevance (optimistic / pessimistic)
    grade = log.grades.astype(np.float64, copy=False) if conv.ties in ("optimistic", "pessimistic") else np.zeros(0)
    out = cpu.compute(log.offsets, log.scores[model], rel, grade, log.items, R, cutoffs,
                      thr=conv.score_threshold, tie=conv.ties, want_r=want_r, gains=gains[0], gains2=gains[1],
                      threads=threads, force_path=force_path)
    st = QueryStats(cutoffs, out["h"], out["hit"], out["h_at_r"], out["n"], out["rel_ret"], R, out["tie"])
    if want_rank:
        j_offsets, j_grades = judged if judged is not None else (log.offsets, log.grades)
        j_lin, j_exp = gains_of(j_grades)
        longest = int(np.diff(j_offsets).max()) if len(j_offsets) > 1 else 0
        disc = cpu.discount_prefix(longest)
        st.rr, st.ap, st.dcg, st.dcg_exp = out["rr"], out["ap"], out["dcg"], out["dcg2"]
        st.idcg = cpu.ideal_dcg(j_offsets, j_lin, cutoffs, disc)
        st.idcg_exp = cpu.ideal_dcg(j_offsets, j_exp, cutoffs, disc)
    return st


def _check_short(st: QueryStats, metrics, queries, model: str) -> None:
    for m in metrics:
        need = st.R if m.family == "r_precision" else (m.k if m.k is not None else None)
        if need is None:
            continue
        short = st.n < need
        if short.any():
            q = int(np.argmax(short))
            k = int(need if np.isscalar(need) else need[q])
            raise ShortListError(
                f"{m} looks at the top {k}, but query {show(queries[q])} has only {int(st.n[q])} "
                f"candidates{' for model ' + repr(model) if model else ''} ({int(short.sum())} queries "
                "are that short). Use short_lists='pad' to count the missing slots as non-relevant, "
                "short_lists='shrink' to divide by the list length, or a smaller k."
            )


def evaluate_log(log: logmod.GroupedLog, metrics: Sequence[Metric], conv: Conventions, *,
                 n_rows: int, threads=None, force_path: int = 0, R: np.ndarray | None = None,
                 judged=None, extra_info: dict | None = None, list_sizes=None) -> Results:
    """Evaluate an already grouped log (the engine behind evaluate and the single functions).

    ``R`` (relevant items per query) and ``judged`` (offsets, grades of every judged item) come
    from the judgments when they are kept apart from the run; by default, from the log itself.
    ``list_sizes`` = (n, relevant among n) per query, when the log holds only the top of each list
    (score matrices): the statistics of the rows beyond it are known without the rows.
    """
    if conv.ties in ("item_desc", "item_asc") and log.items is None:
        raise ParameterError(
            f"ties={conv.ties!r} orders tied candidates by item id, but no item ids were given: "
            "pass item='<column>' (or items= for one ranking), or choose another tie rule."
        )
    rel = log.relevant(conv.threshold)
    if R is None:
        R = log.per_query_sum(rel)
    empty = R == 0
    if conv.empty_queries == "error" and empty.any():
        ids = ", ".join(show(q) for q in log.queries[empty][:5])
        raise EmptyQueryError(
            f"{int(empty.sum())} queries have no relevant item (for example {ids}) and "
            "empty_queries='error'. Use empty_queries='skip' to leave them out of the means or "
            "'keep' to score them with the 'undefined' value."
        )
    keep = ~empty if conv.empty_queries == "skip" else np.ones(len(R), bool)
    names = [str(m) for m in metrics]
    per_model = {}
    summary = {}
    ties_at_cutoff = {}
    for model in log.scores:
        st = compute_stats(log, model, rel, R, metrics, conv, threads=threads, force_path=force_path,
                           judged=judged)
        if list_sizes is not None:
            st.n, st.rel_ret = list_sizes
        if not keep.all():
            st = st.take(keep)
        if conv.short_lists == "error":
            _check_short(st, metrics, log.queries[keep], model if len(log.scores) > 1 else "")
        values = {name: metric_values(st, m, conv) for name, m in zip(names, metrics)}
        summary[model] = {name: (float(np.nanmean(v)) if np.isfinite(v).any() else math.nan)
                          for name, v in values.items()}
        ties_at_cutoff[model] = int(st.tie_at_cutoff.sum())
        per_model[model] = values
    summary_df = pd.DataFrame.from_dict(summary, orient="index", columns=names)
    summary_df.index.name = "model"
    info = {
        "queries": int(len(R)),
        "evaluated": int(keep.sum()),
        "skipped_empty": int((~keep).sum()),
        "ties_at_cutoff": ties_at_cutoff,
        "rows": int(n_rows),
        "models": list(log.scores),
        "metrics": names,
        "conventions": conv.as_dict(),
        **(extra_info or {}),
    }
    queries = log.queries[keep]
    return Results(summary_df, lambda: _per_query_frame(per_model, queries, names), info,
                   context={"log": log, "conv": conv, "rel": rel, "R": R})


def _per_query_frame(per_model: dict, queries: np.ndarray, names: list) -> pd.DataFrame:
    """Columns model, query, then one per metric; the models one after the other."""
    M, Q = len(per_model), len(queries)
    columns = {"model": pd.Series(np.repeat(np.asarray(list(per_model), dtype=object), Q), dtype=object),
               "query": np.tile(queries, M) if M > 1 else queries}
    for name in names:
        columns[name] = np.concatenate([values[name] for values in per_model.values()]) if M > 1 else \
            next(iter(per_model.values()))[name]
    return pd.DataFrame(columns)


def evaluate(
    data,
    metrics=DEFAULT_METRICS,
    query: str = "query",
    relevance: str = "relevance",
    score: str | Sequence[str] = "score",
    item: str | None = None,
    *,
    conventions: str | Conventions | None = None,
    ties=UNSET,
    empty_queries=UNSET,
    undefined=UNSET,
    short_lists=UNSET,
    threshold=UNSET,
    score_threshold=UNSET,
    qrels=None,
    model: str | None = None,
    missing_queries: str = "skip",
    depth: int | None = None,
    chunk_rows: int | None = None,
    progress=None,
    keep_per_query: bool = True,
    threads: int | None = None,
) -> Results:
    """Evaluate one or more models on a log of many queries.

    Each row of ``data`` is a candidate: a query id, a relevance grade and one score column per
    model. For every model and query the kernel computes h(k) (relevant candidates among the top
    k) for all requested cutoffs in one pass; metrics are functions of h(k), R (relevant items)
    and N (non-relevant candidates), for example ``recall@k = h(k) / R`` and
    ``precision@k = h(k) / k``. The summary is the mean over the evaluated queries.

    Parameters
    ----------
    data : pandas.DataFrame, polars.DataFrame, pyarrow.Table, dict of arrays, str or Path
        The log, or a path to a .parquet file (or directory) or a .csv file. Rows of a query need
        not be contiguous.
    metrics : str or list of str
        Metric names such as ``"recall@20"``, ``"fbeta(beta=0.5)@10"``, ``"r_precision"``;
        aliases (``P@10``, ``Rprec``, ``success@5``) are accepted.
    query, relevance : str
        Column names of the query id and the relevance grade.
    score : str or list of str
        One score column per model (higher is better); the column name is the model name.
    item : str, optional
        Item id column: checks that no item appears twice in a query, and is needed by
        ``ties="item_desc"`` / ``"item_asc"``.
    conventions : str or Conventions, optional
        A preset (``"trec_eval"``, ``"surprise"``); the keywords below override it.
    ties, empty_queries, undefined, short_lists, threshold, score_threshold
        The conventions of :mod:`topkeval.conventions` (defaults: ``"expected"``, ``"skip"``,
        ``0.0``, ``"pad"``, ``None``, ``None``).
    qrels : table or path, optional
        Judgments kept apart from the run (TREC style): columns ``query``, ``item`` and
        ``relevance`` (same names as above), or a TREC qrels file. Then ``data`` is a run (query,
        item, score; or a TREC run file), R counts every judged-relevant item, retrieved or not,
        and a retrieved item without a judgment is non-relevant. Queries of the run without any
        judgment are left out (counted in ``info``).
    model : str, optional
        A run-name column of ``data``: each of its values is a model (with one ``score`` column).
    missing_queries : {"skip", "zero"}
        With ``qrels``: a judged query absent from a run is left out (trec_eval) or scored as an
        empty list (trec_eval ``-c``).
    depth : int, optional
        Keep only the first ``depth`` candidates of each query under the tie rule (trec_eval
        ``-M``); needs a deterministic tie rule.
    chunk_rows : int, optional
        For a parquet path: read and evaluate it in batches of this many rows, in bounded memory
        (see :mod:`topkeval.stream`); by default files of more than 20 million rows are streamed
        in batches of 5 million. Results equal the in-memory path.
    progress : callable, optional
        Called with the number of rows read after each batch of a streamed file.
    keep_per_query : bool
        For a streamed file: False keeps only running sums, so memory does not grow with the
        number of queries (``per_query`` is then empty).
    threads : int, optional
        Threads for the kernel (default: the CPUs available, or ``TOPKEVAL_THREADS``).

    Returns
    -------
    Results
        ``summary`` (model x metric means), ``per_query`` and ``info``.

    Raises
    ------
    TopkevalError
        A ValueError subclass for every user error: missing columns, NaN scores, unknown metrics or
        conventions, duplicate (query, item) rows, an empty table, a missing file.

    Examples
    --------
    >>> import topkeval as tk
    >>> log = {"query": [1, 1, 1, 2, 2], "relevance": [1, 0, 1, 0, 1],
    ...        "score": [0.9, 0.8, 0.1, 0.5, 0.4]}
    >>> res = tk.evaluate(log, metrics=["recall@2", "precision@2"])
    >>> res.summary
           recall@2  precision@2
    model
    score      0.75          0.5
    """
    conv = resolve(conventions, owner="evaluate", ties=ties, empty_queries=empty_queries,
                   undefined=undefined, short_lists=short_lists, threshold=threshold,
                   score_threshold=score_threshold)
    mets = parse_metrics(metrics)
    if missing_queries not in ("skip", "zero"):
        raise ParameterError(f"The 'missing_queries' parameter of evaluate must be 'skip' or 'zero'. Got {missing_queries!r} instead.")
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
            raise ParameterError(f"The 'depth' parameter of evaluate must be None or a positive int. Got {depth!r} instead.")
        if conv.ties == "expected":
            raise ParameterError("depth keeps the first N candidates of each query, which needs a deterministic tie "
                                 "rule: pass ties='first', 'item_desc' (trec_eval), 'optimistic' or 'pessimistic'.")
    if _is_trec_file(data):
        from .io import read_run

        if qrels is None:
            raise ParameterError(f"{data} is read as a TREC run (query Q0 item rank score tag), which needs "
                                 "judgments: pass qrels= (a TREC qrels file or a table).")
        data, query, item, score, model = read_run(data), "query", "item", "score", "run"
    if qrels is not None:
        from .qrels import evaluate_with_qrels

        return evaluate_with_qrels(data, qrels, mets, conv, query=query, relevance=relevance, score=score,
                                   item=item, model=model, missing_queries=missing_queries, depth=depth,
                                   threads=threads)
    if model is not None:
        raise ParameterError("model= names a run column, which needs judgments apart from the run: pass qrels=.")
    if missing_queries != "skip":
        raise ParameterError("missing_queries='zero' needs judgments apart from the run: pass qrels=.")
    scores = [score] if isinstance(score, str) else list(score)
    if not scores or not all(isinstance(s, str) for s in scores):
        raise ParameterError(f"score must be a column name or a list of column names. Got {score!r}.")
    if len(set(scores)) != len(scores):
        raise ParameterError(f"score lists a column twice: {scores!r}.")
    for name, value in (("query", query), ("relevance", relevance)):
        if not isinstance(value, str):
            raise ParameterError(f"{name} must be a column name. Got {value!r}.")
    wanted = [query, relevance, *scores] + ([item] if item is not None else [])
    if len(set(wanted)) != len(wanted):
        raise ParameterError(f"The query, relevance, score and item columns must differ. Got {wanted!r}.")
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, numbers.Integral)
                                   or chunk_rows < 1):
        raise ParameterError(f"The 'chunk_rows' parameter of evaluate must be None or a positive int. Got {chunk_rows!r} instead.")
    streamed = _maybe_stream(data, wanted, mets, conv, query, relevance, scores, item, depth, threads, chunk_rows,
                             progress, keep_per_query)
    if streamed is not None:
        return streamed
    cols = read_columns(data, wanted)
    log = build_log(cols[query], cols[relevance], {s: cols[s] for s in scores},
                    cols[item] if item is not None else None,
                    names=dict(query=query, relevance=relevance, item=item or "item"))
    if depth is not None:
        # each model keeps its own first `depth` candidates; R and the ideal DCG still count the
        # relevant items cut off, as trec_eval -M does
        from .qrels import merge_results, truncate

        R = log.per_query_sum(log.relevant(conv.threshold))
        return merge_results([evaluate_log(truncate(log, m, depth, conv), mets, conv, n_rows=len(cols[query]),
                                           threads=threads, R=R, judged=(log.offsets, log.grades))
                              for m in log.scores])
    return evaluate_log(log, mets, conv, n_rows=len(cols[query]), threads=threads)


STREAM_ABOVE_ROWS = 20_000_000
STREAM_CHUNK_ROWS = 5_000_000


def _maybe_stream(data, wanted, mets, conv, query, relevance, scores, item, depth, threads, chunk_rows, progress,
                  keep_per_query=True):
    """Stream a large parquet path in batches; None when the in-memory path applies."""
    import os
    from pathlib import Path

    if not isinstance(data, (str, os.PathLike)):
        return None
    path = Path(data)
    if not path.exists() or not ("".join(path.suffixes).lower().endswith((".parquet", ".pq")) or path.is_dir()):
        return None
    from . import stream

    try:
        total = stream.count_rows(path)
    except Exception:  # unreadable: let the in-memory reader word the error
        return None
    if chunk_rows is None:
        if total <= STREAM_ABOVE_ROWS:
            return None
        chunk_rows = STREAM_CHUNK_ROWS
    import pyarrow.parquet as pq

    from .io.tables import _check_columns

    names = pq.read_schema(path).names if path.is_file() else pq.ParquetDataset(path).schema.names
    _check_columns(wanted, names, f"file '{path}'")

    def evaluate_table(table):
        return evaluate(table, metrics=mets, query=query, relevance=relevance, score=scores, item=item,
                        conventions=conv, depth=depth, threads=threads)

    return stream.evaluate_parquet(path, wanted, evaluate_table, chunk_rows=chunk_rows, progress=progress,
                                   keep_per_query=keep_per_query)


def _is_trec_file(data) -> bool:
    """A path that is not a parquet / csv / tsv file (nor a directory) is read as a TREC run."""
    import os
    from pathlib import Path

    if not isinstance(data, (str, os.PathLike)):
        return False
    path = Path(data)
    suffixes = "".join(path.suffixes).lower()
    tables = (".parquet", ".pq", ".csv", ".csv.gz", ".tsv", ".tsv.gz")
    other = (".xlsx", ".xls", ".json", ".jsonl", ".feather", ".arrow", ".ipc", ".orc", ".avro", ".pkl", ".pickle",
             ".h5", ".hdf5", ".zip", ".npy", ".npz")
    return path.is_file() and not suffixes.endswith(tables + other)


def build_log(query: np.ndarray, grades: np.ndarray, scores: dict, items: np.ndarray | None,
              names: dict) -> logmod.GroupedLog:
    """Validate columns and group them by query."""
    grades = logmod.numeric_column(grades, names["relevance"], "grade")
    scores = {m: logmod.numeric_column(v, m, "score") for m, v in scores.items()}
    offsets, grouping, labels = logmod.group_rows(query, names["query"])
    codes = item_labels = None
    if items is not None:
        codes, item_labels = logmod.item_codes(items, names["item"])
    if grouping is not None:
        columns = grouping.apply_all([grades, *scores.values(), *([codes] if codes is not None else [])],
                                     release=True)
        grades = columns[0]
        scores = dict(zip(scores, columns[1:1 + len(scores)]))
        codes = columns[-1] if codes is not None else None
        del grouping, columns
    if codes is not None:
        logmod.check_duplicates(offsets, codes, item_labels, labels, names["item"])
    return logmod.GroupedLog(offsets, labels, grades, scores, codes, item_labels)


# ---------------------------------------------------------------------------------------------
# one ranking


def _as_1d(values, name: str, owner: str) -> np.ndarray:
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"{name} of {owner} must be one-dimensional (one value per candidate); got shape {arr.shape}.")
    return arr


def _check_k(k, owner: str) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ParameterError(f"The 'k' parameter of {owner} must be a positive int. Got {k!r} instead.")
    return int(k)


def _single(family: str, relevance, scores, k, *, beta=None, items=None, conventions=None,
            owner: str, **settings) -> float:
    conv = resolve(conventions, owner=owner, **settings)
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
    metric = Metric(family, None if k is None else _check_k(k, owner), beta)
    log = build_log(np.zeros(len(rel), np.int64), rel, {"score": sc}, items,
                    names=dict(query="query", relevance="relevance", item="items"))
    res = evaluate_log(log, [metric], conv, n_rows=len(rel), threads=1)
    if res.info["evaluated"] == 0:
        return math.nan
    return float(res.per_query.iloc[0, 2])


_SINGLE_PARAMS = """
    Parameters
    ----------
    relevance : array-like of shape (n,)
        Relevance grade of each candidate (1/0 clicks, ratings, TREC grades).
    scores : array-like of shape (n,)
        The model's score of each candidate; higher ranks first. Must be finite.
    k : int
        The cutoff, a positive integer.
    ties, empty_queries, undefined, short_lists, threshold, score_threshold, conventions
        The conventions of :mod:`topkeval.conventions`, keyword-only.
    items : array-like of shape (n,), optional
        Item ids, for ``ties="item_desc"`` / ``"item_asc"``.

    Returns
    -------
    float
        nan when the ranking has no relevant item and ``empty_queries="skip"`` (nothing to
        average), the ``undefined`` value under ``"keep"``.

    Raises
    ------
    TopkevalError
        Lengths differ, k is not a positive int, NaN scores, ``empty_queries="error"`` with no
        relevant item, ``short_lists="error"`` with k > n.
"""


def _conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold):
    return dict(ties=ties, empty_queries=empty_queries, undefined=undefined, short_lists=short_lists,
                threshold=threshold, score_threshold=score_threshold)


def recall_at_k(relevance, scores, k, *, ties=UNSET, empty_queries=UNSET, undefined=UNSET,
                short_lists=UNSET, threshold=UNSET, score_threshold=UNSET, items=None,
                conventions=None) -> float:
    """Recall at k of one ranking: the share of the relevant items found in the top k.

    ``recall@k = h(k) / R`` where h(k) counts the relevant candidates among the top k (its
    expected value over tie orders under ``ties="expected"``) and R the relevant items.
    {params}
    Examples
    --------
    >>> recall_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)  # ranks: 0.5, 0.4, 0.3
    0.6666666666666666
    >>> recall_at_k([1, 0, 0], [0.5, 0.5, 0.1], 1)  # a tie across the cutoff: expected value
    0.5
    """
    return _single("recall", relevance, scores, k, items=items, conventions=conventions, owner="recall_at_k",
                   **_conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold))


def precision_at_k(relevance, scores, k, *, ties=UNSET, empty_queries=UNSET, undefined=UNSET,
                   short_lists=UNSET, threshold=UNSET, score_threshold=UNSET, items=None,
                   conventions=None) -> float:
    """Precision at k of one ranking: the share of relevant candidates in the top k.

    ``precision@k = h(k) / k``; with ``short_lists="shrink"`` the denominator is min(k, n).
    {params}
    Examples
    --------
    >>> precision_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)
    0.6666666666666666
    >>> precision_at_k([1, 0], [0.9, 0.1], 4), precision_at_k([1, 0], [0.9, 0.1], 4, short_lists="shrink")
    (0.25, 0.5)
    """
    return _single("precision", relevance, scores, k, items=items, conventions=conventions,
                   owner="precision_at_k",
                   **_conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold))


def fbeta_at_k(relevance, scores, k, *, beta=1.0, ties=UNSET, empty_queries=UNSET, undefined=UNSET,
               short_lists=UNSET, threshold=UNSET, score_threshold=UNSET, items=None,
               conventions=None) -> float:
    """F-beta at k of one ranking: the weighted harmonic mean of precision@k and recall@k.

    ``fbeta@k = (1 + b^2) h(k) / (b^2 R + k)``, which equals
    ``(1 + b^2) P R / (b^2 P + R)`` and is 0 (not undefined) when h(k) = 0.
    {params}
    beta : float
        Weight of recall relative to precision (positive).

    Examples
    --------
    >>> fbeta_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3, beta=2.0)
    0.6666666666666666
    """
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (math.isfinite(beta) and beta > 0):
        raise ParameterError(f"The 'beta' parameter of fbeta_at_k must be a positive number. Got {beta!r} instead.")
    family, b = ("f1", None) if float(beta) == 1.0 else ("fbeta", float(beta))
    return _single(family, relevance, scores, k, beta=b, items=items, conventions=conventions,
                   owner="fbeta_at_k",
                   **_conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold))


def f1_at_k(relevance, scores, k, *, ties=UNSET, empty_queries=UNSET, undefined=UNSET,
            short_lists=UNSET, threshold=UNSET, score_threshold=UNSET, items=None,
            conventions=None) -> float:
    """F1 at k of one ranking: the harmonic mean of precision@k and recall@k.

    ``f1@k = 2 h(k) / (k + R)``; 0 when no relevant candidate is in the top k.
    {params}
    Examples
    --------
    >>> f1_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)
    0.6666666666666666
    """
    return _single("f1", relevance, scores, k, items=items, conventions=conventions, owner="f1_at_k",
                   **_conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold))


def specificity_at_k(relevance, scores, k, *, ties=UNSET, empty_queries=UNSET, undefined=UNSET,
                     short_lists=UNSET, threshold=UNSET, score_threshold=UNSET, items=None,
                     conventions=None) -> float:
    """Specificity at k of one ranking: the share of non-relevant candidates kept out of the top k.

    ``specificity@k = (N - (min(k, n) - h(k))) / N`` with N the non-relevant candidates
    (true negatives over all negatives); undefined when N = 0.
    {params}
    Examples
    --------
    >>> specificity_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)  # one negative in the top 3
    0.5
    """
    return _single("specificity", relevance, scores, k, items=items, conventions=conventions,
                   owner="specificity_at_k",
                   **_conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold))


def r_precision(relevance, scores, *, ties=UNSET, empty_queries=UNSET, undefined=UNSET,
                short_lists=UNSET, threshold=UNSET, score_threshold=UNSET, items=None,
                conventions=None) -> float:
    """R-precision of one ranking: precision at rank R, R being the number of relevant items.

    ``r_precision = h(R) / R`` (TREC ``Rprec``). Not the min(k, R) variants some tools call
    R-precision.
    {params}
    Examples
    --------
    >>> r_precision([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3])  # R = 3, top 3 holds 2
    0.6666666666666666
    """
    return _single("r_precision", relevance, scores, None, items=items, conventions=conventions,
                   owner="r_precision",
                   **_conv_kwargs(ties, empty_queries, undefined, short_lists, threshold, score_threshold))


for _f in (recall_at_k, precision_at_k, fbeta_at_k, f1_at_k, specificity_at_k, r_precision):
    _f.__doc__ = _f.__doc__.replace("    {params}", _SINGLE_PARAMS.rstrip("\n"))
