"""Judgments kept apart from runs (TREC style): reading and matching them to the runs.

A run lists what a model retrieved: (query, item, score). Judgments list (query, item, grade),
including relevant items that no model retrieved. For each run the retrieved rows get their grade
(0 when unjudged, and marked unjudged: such a row is never relevant, whatever the relevance
threshold, 0 or less included, as in trec_eval), R counts every judged item with a relevant grade,
and the ideal DCG ranks every judged gain. Queries are those with judgments; a query of the run without judgments is left out
and counted; a judged query missing from the run is left out (``missing_queries="skip"``,
trec_eval's default) or scored as an empty list (``"zero"``, trec_eval ``-c``).

Ids are matched by value: text with text, numbers with numbers (1 and 1.0 are the same id), and
numbers with text by their decimal form (1 and "1"); anything else is refused rather than matched
to nothing. Judgments that share no query with a run are an error. The matched runs are evaluated
by :mod:`topkeval.backends.local` (truncated to a depth there, trec_eval -M, then -J).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ColumnError, DataError, ParameterError, show
from ..errors import warn as warn_user
from ..kernels.grouping import count_duplicates, judge
from . import grouped as logmod
from . import is_trec_path, read_columns, read_qrels
from .grouped import GroupedLog, Judgments
from .ids import (
    Encoded,
    arrow_codes_together,
    arrow_text,
    check_ids,
    encode,
    hashed_as_text,
    shared_codes,
    single_value,
    sorted_codes,
    text_codes_together,
)

#: The grade column of judgments read with ``relevance=None`` (every listed pair relevant, grade 1).
ALL_RELEVANT = "_topkeval_relevance"


def all_relevant_column(*taken) -> str:
    """The name of the grade column of ``relevance=None``: ``ALL_RELEVANT``, lengthened by
    underscores while another column (``taken``: the query, item, score and model columns) has it."""
    name = ALL_RELEVANT
    while name in taken:
        name += "_"
    return name


def _read_judgments(qrels, query: str, item: str, relevance: str | None, allow_empty: bool = False) -> dict:
    if relevance is None:  # a table of the relevant pairs (interactions): grade 1 each
        pairs = read_columns(qrels, [query, item], id_columns=[query, item], roles={query: "query", item: "item"},
                             where="the judgments (qrels=)", allow_empty=allow_empty)
        return {query: pairs[query], item: pairs[item],
                all_relevant_column(query, item): np.ones(len(pairs[query]), np.int8)}
    if is_trec_path(qrels):
        qrels = read_qrels(qrels).rename(columns={"query": query, "item": item, "relevance": relevance})
    return read_columns(qrels, [query, item, relevance], id_columns=[query, item],
                        roles={query: "query", item: "item", relevance: "relevance"},
                        where="the judgments (qrels=)", allow_empty=allow_empty,
                        hint={relevance: " If every pair the judgments list is relevant (interactions), pass "
                                         "relevance=None."})


def trec_runs(paths: list, *, query, item, score, model, qrels=None,
              relevance: str | None = None) -> tuple[pd.DataFrame, str, str, str, str, object]:
    """TREC run files as one run table: ``(table, query, item, score, model, qrels)``: the table, its
    column names, and the judgments: ``qrels`` as given, or, when it is a TREC qrels file (and
    ``relevance`` names its grades), that file read with the runs (their ids coded together, once).

    A run file's fields are fixed (``query Q0 item rank score tag``), so ``query=`` and ``item=``
    name the columns of the judgments when they are a table (a TREC qrels file's fields are fixed
    too), and the query column of the results; the run table takes the same names. ``score=`` and
    ``model=`` name columns of a run table, which run files do not have: each file's tag names its
    model, the fifth field is its score. They are refused, not ignored.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.run"
    >>> _ = p.write_text("q1 Q0 d1 1 0.9 bm25\\n")
    >>> table, query, item, score, model, _ = trec_runs([p], query="user", item="doc", score="score", model=None)
    >>> list(table.columns), query, item, score, model
    (['user', 'doc', 'score', 'run'], 'user', 'doc', 'score', 'run')
    """
    from ..errors import check_column_name
    from .trec import coded_runs

    query = check_column_name(query, "query", "evaluate")
    item = check_column_name(item, "item", "evaluate", optional=True) or "item"
    scores = [score] if isinstance(score, str) else list(score) if isinstance(score, (list, tuple)) else None
    if scores != ["score"]:
        raise ParameterError(f"score= names the score columns of a table; TREC run files have their scores in the fifth "
                             f"field (query Q0 item rank score tag) and each run is a model, named by its tag. Got "
                             f"score={score!r}: drop score= (to evaluate some runs only, give those files).")
    if model is not None:
        raise ParameterError(f"model= names a run-name column of a table; each TREC run is named by its tag. Got "
                             f"model={model!r}: drop model=.")
    if query == item:
        raise ParameterError(f"The query and item columns must differ. Got query={query!r} and item={item!r}.")
    free = [n for n in ("score", "run", "_score", "_run") if n not in (query, item)]
    together = relevance is not None and relevance not in (query, item) and is_trec_path(qrels)
    table, judged = coded_runs(paths, qrels if together else None)
    table.columns = [query, item, free[0], free[1]]  # read_runs gives query, item, score, run
    if judged is not None:
        judged.columns = [query, item, relevance]
        qrels = judged
    return table, query, item, free[0], free[1], qrels


def id_kind(values: np.ndarray) -> str:
    """The kind of an array of ids as :func:`match_ids` matches them: ``"int"``, ``"float"``, ``"text"`` or
    ``"other"``.

    >>> id_kind(np.array([401, 402])), id_kind(np.array(["401"], dtype=object)), id_kind(np.array([401.0]))
    ('int', 'text', 'float')
    """
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
    if len(judged) == 0 or len(run) == 0:  # nothing to match (a partition of a distributed table)
        return judged.astype(run.dtype if len(judged) == 0 else judged.dtype), run.astype(
            judged.dtype if len(run) == 0 else run.dtype)
    kj, kr = id_kind(judged), id_kind(run)
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


def model_rows(values, column: str) -> list[tuple[str, np.ndarray]]:
    """The rows of each model of a stacked table (a run-name column, ``model=``): ``(name, rows)``
    in order of first appearance, each model named by its id as text, its rows in input order.

    Raises
    ------
    ParameterError
        Two models with the same name as text (1 and "1"), or a model named by the empty text.
    """
    codes, names = _distinct(values, column, "run name")
    by_run = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_run], np.arange(len(names) + 1))
    # a label without rows (an unused category of a pandas Categorical) is no model; the labels of a
    # Categorical come in category order, the models in order of first appearance
    out = sorted(((str(name), by_run[bounds[c]:bounds[c + 1]]) for c, name in enumerate(names)
                  if bounds[c + 1] > bounds[c]), key=lambda model: model[1][0])
    if len({name for name, _ in out}) < len(out):
        raise ParameterError(f"Two runs of column {column!r} have the same name as text; rename one.")
    if any(not name for name, _ in out):  # a model named '' could not be named to compare, diff or report
        raise ParameterError(f"Column {column!r} names a run with the empty text '': models are named by text "
                             "(baseline=, diff, the report): give that run a name.")
    return out


def codes_together(judged, run, column: str, role: str, ordered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of the judgments' and the run's ids in one label space, matched by value.

    Each side is encoded on its own (:func:`topkeval.inputs.ids.encode`: Arrow hashes text without Python
    objects), then only the distinct ids of the two sides are matched (:func:`match_ids`) and
    merged; ``ordered`` gives labels in ascending order (the order queries are reported in). Two
    Arrow string columns (TREC files, text tables) are hashed together in one pass instead.
    """
    if arrow_text(judged) and arrow_text(run):
        check_ids(judged, column, role)
        check_ids(run, column, role)
        return arrow_codes_together(judged, run, ordered)
    if hashed_as_text(judged) and hashed_as_text(run):  # TREC files read by the compiled reader
        check_ids(judged, column, role)
        check_ids(run, column, role)
        if isinstance(judged, Encoded) and isinstance(run, Encoded) and judged.labels is run.labels:
            return shared_codes(judged, run, ordered)  # read together: one label space already
        return text_codes_together(judged, run, ordered)
    jc, jl = _distinct(judged, column, role)
    rc, rl = _distinct(run, column, role)
    jl, rl = match_ids(jl, rl, column)
    both = np.concatenate([jl.astype(object) if jl.dtype != rl.dtype else jl,
                           rl.astype(object) if jl.dtype != rl.dtype else rl])
    codes, labels = (sorted_codes if ordered else encode)(both, column, role)
    if labels is None:
        codes, labels = pd.factorize(codes, sort=ordered)
    return codes[: len(jl)][jc], codes[len(jl):][rc], np.asarray(labels)


#: Counts that only the parts of a distributed evaluation need (to decide the warnings on the whole).
_PARTIAL_COUNTS = ("shared_queries", "judged_hits", "relevant")


@dataclass
class RunApart:
    """One run matched with judgments kept apart: its grouped log (each retrieved row graded,
    ``judged`` set), the judgments of its queries in the log's order (R, and the judged items and
    grades per query, CSR), the rows it was read from, and its counts."""

    name: str
    log: GroupedLog
    judgments: Judgments
    judged_items: np.ndarray  # per judged (query, item) of the log's queries, in the order of judgments.offsets
    rows: int
    unjudged: int  # queries of the run without judgments
    missing: int  # judged queries the run lacks

    def judged_only(self, log: GroupedLog) -> GroupedLog:
        """``log`` (this run's, perhaps truncated) without the items that have no judgment or a negative
        grade (trec_eval -J: in the pool but not judged)."""
        if log.items is None:  # matched by item id: a run read here always has them
            raise ParameterError("Judgments are matched to the run by item id: pass item='<column>' with qrels=.")
        grades, found = judge(log.offsets, log.items, self.judgments.offsets, self.judged_items, self.judgments.grades)
        return log.keep_rows(found & (grades >= 0))


def read_runs(data, qrels, conv, *, query: str, relevance: str | None, scores: list[str], item: str | None,
              model: str | None, missing_queries: str, ascending: bool = False, warn: bool = True,
              all_runs: list | None = None, by: list[str] | None = None,
              weight: str | None = None) -> tuple[list[RunApart], dict]:
    """Runs with judgments apart, matched: one :class:`RunApart` per run, and the counts for ``info``
    (``_attrs``: the query-level attributes, with ``by=`` and ``weight=``). ``warn=False`` leaves the
    checks and warnings about the whole to the caller (a partition of a distributed table sees only
    part of it, and is given every run's name in ``all_runs``: a run without rows in the partition
    still has its judged queries there)."""
    if item is None:
        raise ParameterError("Judgments are matched to the run by item id: pass item='<column>' with qrels=.")
    if model is not None and len(scores) != 1:
        raise ParameterError("With model= (a run-name column) give exactly one score column.")
    wanted = [query, item, *scores] + ([model] if model else [])
    if len(set(wanted)) != len(wanted):
        raise ParameterError(f"The query, item, score and model columns must differ. Got {wanted!r}.")
    attributes = list(by or []) + ([weight] if weight else [])
    if set(attributes) & set(wanted):
        raise ParameterError(f"by= and weight= name query-level columns other than the query, item, score and "
                             f"model columns; {sorted(set(attributes) & set(wanted))!r} is one of those.")
    cols = read_columns(data, wanted + attributes, id_columns=[query, item] + ([model] if model else []),
                        roles={c: "score" for c in scores} | {query: "query", item: "item"}
                        | ({model: "model"} if model else {}) | {c: "by" for c in by or []}
                        | ({weight: "weight"} if weight else {}), where="the run", allow_empty=not warn)
    judg = _read_judgments(qrels, query, item, relevance, allow_empty=not warn)
    grade = all_relevant_column(query, item) if relevance is None else relevance
    grades_j = logmod.numeric_column(judg[grade], grade, "grade")
    # query codes over judgments and run together; evaluated queries = judged ones, sorted by id
    jqc, rqc, qlabels = codes_together(judg[query], cols[query], query, "query", ordered=True)
    jic, ric, ilabels = codes_together(judg[item], cols[item], item, "item", ordered=False)
    if relevance is None and len(jqc) > 1:  # relevant pairs: one listed twice (a repeat purchase) counts once
        order = np.lexsort((jic, jqc))
        again = (jqc[order][1:] == jqc[order][:-1]) & (jic[order][1:] == jic[order][:-1])
        keep = np.sort(order[np.concatenate([[True], ~again])])
        jqc, jic, grades_j = jqc[keep], jic[keep], grades_j[keep]
    attrs = None
    if attributes:  # query-level columns of the run, keyed by the same query codes as the results
        from .segments import attributes_by_code

        attrs = attributes_by_code(rqc, qlabels, cols, list(by or []), weight, query)
    # judgments grouped by query, in ascending order of id: R, the ideal DCG, and the lookup of grades
    judged_q = np.flatnonzero(np.bincount(jqc, minlength=len(qlabels)))  # codes: counted, not sorted
    pos = np.full(len(qlabels), -1, np.int64)
    pos[judged_q] = np.arange(len(judged_q))
    Q = len(judged_q)
    j_offsets, j_perm = logmod.counting_groups(pos[jqc], Q)
    j_items, j_grades = jic[j_perm], grades_j[j_perm]
    count, row = count_duplicates(j_offsets, j_items)
    if count:
        q = int(np.searchsorted(j_offsets, row, side="right")) - 1
        raise DataError(f"The judgments list query {show(qlabels[judged_q[q]])}, item {show(ilabels[j_items[row]])} "
                        "twice; keep one grade per pair (interactions with repeats, such as a user who bought "
                        "an item twice: if every listed pair is relevant, a table of the pairs alone with "
                        "relevance=None counts a pair listed twice once; otherwise deduplicate them first, keeping "
                        "the grade you mean).")
    csum = np.concatenate([[0], np.cumsum(conv.is_relevant(j_grades), dtype=np.int64)])
    R = csum[j_offsets[1:]] - csum[j_offsets[:-1]]
    runs: list[tuple[str, np.ndarray | None, str]]
    if model is not None:
        one, name = single_value(cols[model])
        if one and str(name):  # one run (a TREC file): its rows are every row, in place
            runs = [(str(name), None, scores[0])]
        else:
            runs = [(name, rows, scores[0]) for name, rows in model_rows(cols[model], model)]
        if all_runs is not None:
            here = {r[0]: r for r in runs}
            runs = [here.get(str(name), (str(name), np.zeros(0, np.int64), scores[0])) for name in all_runs]
    else:
        runs = [(s, None, s) for s in scores]
    matched, judged_hits, shared = [], 0, 0
    for name, rows, col in runs:
        sel = slice(None) if rows is None else rows
        r_scores = logmod.numeric_column(cols[col][sel], col, "score")
        if ascending:
            r_scores = np.negative(r_scores)
        log, order, unjudged, present = _run_log(rqc[sel], ric[sel], r_scores, name, pos, qlabels, ilabels,
                                                 judged_q, missing_queries, cols.borrowed)
        shared += present
        jo, (ji, jg) = _take_csr(j_offsets, (j_items, j_grades), order)
        log.grades, found = judge(log.offsets, log.items, jo, ji, jg)
        log.judged = found
        judged_hits += int(found.sum())
        matched.append(RunApart(name, log, Judgments(R[order], jo, jg, items=ji), ji, len(r_scores), unjudged,
                                Q - present))
    if shared == 0 and warn:
        from .tables import column_names

        passed = [c for c in ("query_id", "qid", "query") if c != query and c in column_names(data)]
        other = (f" The run also has {' and '.join(map(repr, passed))}, not read as the query id: if that is the id, "
                 f"name it (query={passed[0]!r}).") if passed else ""
        raise DataError(
            f"The judgments and the run share no query: judged queries look like {_sample(qlabels[judged_q])}, the "
            f"run's like {_sample(qlabels[np.unique(rqc[:1000])])}. Check the {query!r} columns (text '1' and the "
            f"number 1 match; '007' and 7 do not).{other}"
        )
    if judged_hits == 0 and warn:
        warn_user(f"No retrieved item has a judgment: check that the {item!r} ids of the run and of the "
                      "judgments are written the same way.")
    skipped = int((R == 0).sum()) if conv.empty_queries == "skip" else 0
    info = {"queries": Q, "skipped_empty": skipped, "judged_queries": Q,
            "run_queries_without_judgments": {r.name: r.unjudged for r in matched},
            "missing_from_run": {r.name: r.missing for r in matched}, "missing_queries": missing_queries,
            "shared_queries": shared, "judged_hits": judged_hits, "relevant": int(R.sum())}
    if attrs is not None:
        info["_attrs"] = attrs
    return matched, info


def _run_log(r_q: np.ndarray, r_i: np.ndarray, r_scores: np.ndarray, name: str, pos: np.ndarray, qlabels, ilabels,
             judged_q: np.ndarray, missing_queries: str, borrowed=()):
    """A run's rows grouped by query, its judged queries only (and, with ``missing_queries="zero"``,
    the judged queries it lacks, as empty lists, last).

    Returns the log (its grades still to look up: none yet), the judged index of each of its queries, the number
    of the run's queries without judgments and the number with. Runs are written query by query, so
    their rows are used in place, queries in the order the run gives them; scores that are still
    the caller's memory (``borrowed``) are then copied, as :func:`topkeval.inputs.grouped.build_log` does.
    """
    offsets, grouping, groups = logmod._group_codes(r_q, np.arange(len(qlabels)), None)
    if grouping is not None:
        r_scores, r_i = grouping.apply_all([r_scores, r_i], release=True)
    count, row = count_duplicates(offsets, r_i)
    if count:
        q = int(np.searchsorted(offsets, row, side="right")) - 1
        raise DataError(f"Run {name!r} lists query {show(qlabels[groups[q]])}, item {show(ilabels[r_i[row]])} twice; "
                        "each item may appear once per query in a run. If the table stacks the rows of several "
                        "models (or runs, or A/B arms), name the column that tells them apart: model='<column>'.")
    jpos = pos[groups]
    present = jpos >= 0
    if not present.all():  # drop the rows of queries without judgments
        keep = np.repeat(present, np.diff(offsets))
        r_scores, r_i = r_scores[keep], r_i[keep]
        offsets = np.concatenate([[0], np.cumsum(np.diff(offsets)[present])]).astype(np.int64)
    order = jpos[present]
    shared = len(order)
    if missing_queries == "zero":
        absent = np.setdiff1d(np.arange(len(judged_q)), order)
        order = np.concatenate([order, absent]).astype(np.int64)
        offsets = np.concatenate([offsets, np.full(len(absent), offsets[-1])]).astype(np.int64)
    r_scores = logmod.owned(r_scores, borrowed)
    # grades: looked up next (the caller's judge), not filled twice
    log = logmod.GroupedLog(offsets, qlabels[judged_q[order]], np.empty(0), {name: r_scores}, r_i, ilabels)
    return log, order, int((~present).sum()), shared


def _take_csr(offsets: np.ndarray, columns: tuple, order: np.ndarray):
    """The groups ``order`` of a CSR layout, in that order: (new offsets, the columns' values)."""
    sizes = np.diff(offsets)[order]
    starts = offsets[:-1][order]
    new_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # row i of new group g comes from starts[g] + (i - new_offsets[g]): no loop over groups
    idx = np.repeat(starts - new_offsets[:-1], sizes) + np.arange(new_offsets[-1], dtype=np.int64)
    return new_offsets, tuple(c[idx] for c in columns)


def _sample(values: np.ndarray) -> str:
    return ", ".join(show(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
