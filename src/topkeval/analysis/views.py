"""What the report shows besides the means: metric@k curves and one query's top k side by side.

Both are computed by the engine, never by hand: a curve is an evaluation of ``family@1 ..
family@K`` under the conventions of the results (the kernel counts every cutoff in one pass); the
side-by-side view orders one query's candidates with the kernel's own ranking function
(:func:`topkeval.kernels.cpu.ranks`) and marks the relevant items a model gained or lost with the
kernel's inclusion probabilities, the same ones :meth:`Results.diff` reads.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..engine.rules import RanksAgain
from ..errors import ParameterError, TopkevalWarning, did_you_mean, show
from ..inputs.ids import find_id


def curve_families(results) -> list[str]:
    """The families of ``results`` that take a cutoff, in the order first requested."""
    out: list[str] = []
    for name in results.metrics:
        m = results.metric(name)
        fam = m.info
        if m.k is not None and fam.cutoff != "none" and str(m).split("@")[0] not in out:
            out.append(str(m).split("@")[0])
    return out


def _families(families: list) -> list:
    """The families a user named (``curves(metrics=)``), each read: one with a cutoff, or one that takes
    none, is refused here, with its reason."""
    from ..metrics.names import parse_metric

    for fam in families:
        if "@" in str(fam):
            raise ParameterError(f"curves takes metric families without a cutoff: {str(fam).split('@')[0]!r}, not "
                                 f"{fam!r} (the cutoffs are ks=).")
        parse_metric(f"{fam}@1")
    return families


def curves(results, metrics=None, ks=None) -> pd.DataFrame:
    """Each model's mean of ``metric@k`` for k = 1..K: the data of the metric@k plot.

    Parameters
    ----------
    results : Results
    metrics : str or list of str, optional
        Metric families with a cutoff (``"recall"``, ``"ndcg"``, ``"fbeta(beta=0.5)"``); by
        default those of ``results``.
    ks : iterable of int, optional
        The cutoffs (default 1..K, K the largest cutoff of ``results``, or 20; beyond 50, fifty cutoffs
        spaced evenly on a log scale, K included).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, metric, k, value`` (``metric`` names the family, ``value`` the mean).
    """
    rerun = results.rerun
    if rerun is None:
        raise ParameterError("These results cannot be evaluated again at other cutoffs (they were built from per-query values, "
                             "or kept only sums): evaluate the log with the cutoffs you want instead.")
    families = curve_families(results) if metrics is None else _families([metrics] if isinstance(metrics, str)
                                                                         else list(metrics))
    if not families:
        raise ParameterError("None of the metrics of these results takes a cutoff (@k): name the families to plot, "
                             "for example metrics=['recall', 'ndcg'].")
    if ks is None:
        cut = [results.metric(n).k for n in results.metrics]
        top = max([k for k in cut if k is not None], default=20)
        # every cutoff up to 50, then 50 cutoffs spaced evenly on a log scale (a curve, not a table of thousands)
        ks = range(1, top + 1) if top <= 50 else sorted({int(round(x)) for x in np.geomspace(1, top, 50)} | {top})
    ks = sorted(set(ks))  # validated by Results.curves: positive ints; a curve runs in increasing k
    names = [f"{fam}@{k}" for fam in families for k in ks]
    with warnings.catch_warnings():  # the warnings of the first evaluation were given already
        warnings.simplefilter("ignore", TopkevalWarning)
        again = rerun(list(dict.fromkeys(names)))
    rows = []
    for fam in families:
        for k in ks:
            name = again.label(f"{fam}@{k}")
            for model in again.models:
                rows.append({"model": model, "metric": fam, "k": k, "value": float(again.summary.loc[model, name])})
    return pd.DataFrame(rows)


def _logs_of(results, model: str):
    sources = results.sources
    if sources is None:
        return None
    return ((log, R) for log, R in sources() if model in log.scores)  # lazily: a streamed file, batch by batch


def side_by_side(results, query, k: int = 20, baseline: str | None = None, model: str | None = None) -> pd.DataFrame:
    """The top ``k`` of one query under two models, position by position (see Results.side_by_side)."""
    from ..conventions import Conventions

    models = results.models
    for name, value in (("baseline", baseline), ("model", model)):
        if value is not None and value not in models:
            raise ParameterError(f"{name} {value!r} is not a model of these results.{did_you_mean(str(value), models)}")
    if baseline is None:
        baseline = models[0]
    if model is None:
        others = [m for m in models if m != baseline]
        model = others[0] if others else None
    shown = [baseline] if model is None or model == baseline else [baseline, model]
    conv: Conventions | None = results.conventions
    backend = results.backend  # the backend that computed the results orders the candidates again
    if conv is None or results.sources is None or not isinstance(backend, RanksAgain):
        raise ParameterError("side_by_side reads each model's candidates again, which these results do not keep "
                             "(a score matrix, a Spark DataFrame, a file streamed with keep_per_query=False, or per-query values "
                             "given to Results.from_per_query): "
                             "evaluate the rows of the queries you want to see as a table in memory.")
    ascending = results.ascending
    columns: dict = {}
    lists = {}
    for name in shown:
        logs = _logs_of(results, name)
        found = None
        kinds: set[str] = set()
        examples: list = []  # a few of the model's query ids, and how many it has, for the message
        count = 0
        for log, R in logs or []:
            kinds |= {type(q).__name__ for q in log.queries[:1].tolist()}
            examples += log.queries[:5 - len(examples)].tolist()
            count += len(log.queries)
            if not log.has_items:
                raise ParameterError("side_by_side shows item ids, but these results were evaluated without them: "
                                     "pass item='<column>' to evaluate.")
            hit = find_id(log.queries, query)
            if hit is not None:
                found = (log, R, hit)
                break
        if found is None:
            plain = type(query.item() if isinstance(query, np.generic) else query).__name__
            # text and whole numbers find each other ("7" finds 7): then the kinds are no reason
            crossed = {plain} | kinds <= {"str", "int"} and str(query).lstrip("-").isdigit() and \
                str(int(str(query))) == str(query)
            hint = (f" The query ids are {' and '.join(sorted(kinds))}; this one is {plain}."
                    if kinds and plain not in kinds and not crossed else "")
            if examples:
                hint += (f" Its queries: {', '.join(map(show, examples))}"
                         + (f", ... ({count:,} in all)." if count > len(examples) else "."))
            raise ParameterError(f"query {show(query)} is not among the queries of model {name!r}.{hint}")
        log, R, q = found
        rank, scores, rel, p, rq = backend.query_ranking(log, R, q, conv, name, k)
        lo, hi = int(log.offsets[q]), int(log.offsets[q + 1])
        ids = log.item_ids(log.items[lo:hi]).tolist()  # Python values, as the per-query tables show them
        raw = log.scores[name][lo:hi]
        shown_score = -raw if ascending else raw
        lists[name] = dict(rank=rank, ids=ids, score=shown_score, cmp=scores, grade=log.grades[lo:hi], rel=rel,
                           p=p, R=rq, judged=None if log.judged is None else log.judged[lo:hi])
    chance = {name: {ids: float(p) for ids, p, r in zip(v["ids"], v["p"], v["rel"]) if r}
              for name, v in lists.items()}
    rank_of = {name: {i: int(r) for i, r in zip(v["ids"], v["rank"]) if r > 0} for name, v in lists.items()}
    # positions past every list show nothing: only the first min(k, longest list) are built
    longest = max(int((v["rank"] > 0).sum()) for v in lists.values())
    positions = min(k, longest)
    columns["rank"] = np.arange(1, positions + 1)
    for name, v in lists.items():
        other = next((o for o in lists if o != name), None)
        by_rank = {int(r): i for i, r in enumerate(v["rank"]) if 0 < r <= k}
        item: list = []
        score: list[float] = []
        grade: list[float] = []
        mark: list[str] = []
        tied: list[str] = []
        elsewhere: list[float] = []
        judged: list = []  # with judgments apart: whether the item has a judgment (None past the list)
        for pos in range(1, positions + 1):
            i = by_rank.get(pos)
            if i is None:
                item.append(None)
                score.append(np.nan)
                grade.append(np.nan)
                mark.append("")
                tied.append("")
                elsewhere.append(np.nan)
                judged.append(None)
                continue
            judged.append(True if v["judged"] is None else bool(v["judged"][i]))
            elsewhere.append(float(rank_of[other].get(v["ids"][i], np.nan)) if other is not None else np.nan)
            item.append(v["ids"][i])
            score.append(float(v["score"][i]))
            grade.append(float(v["grade"][i]))
            same = np.flatnonzero(v["cmp"] == v["cmp"][i])
            ranks = v["rank"][same]
            ranks = ranks[ranks > 0]
            tied.append(f"{ranks.min()}-{ranks.max()}" if len(ranks) > 1 and conv.ties == "expected" else "")
            label = ""
            if other is not None and v["rel"][i]:
                mine, theirs = chance[name].get(v["ids"][i], 0.0), chance[other].get(v["ids"][i], 0.0)
                if name == model and mine > theirs + 1e-12:
                    label = "gained"
                elif name == baseline and mine > theirs + 1e-12:
                    label = "lost"
            mark.append(label)
        columns[(name, "item")] = pd.Series(item, dtype=object)
        columns[(name, "score")] = score
        columns[(name, "relevance")] = grade
        if any(v["judged"] is not None for v in lists.values()):  # judgments apart: unjudged told from grade 0
            columns[(name, "judged")] = pd.Series(judged, dtype=object)
        if conv.ties == "expected":
            columns[(name, "tied_ranks")] = tied
        columns[(name, "change")] = mark
        if other is not None:
            columns[(name, "other_rank")] = elsewhere
    frame = pd.DataFrame({("", "rank") if c == "rank" else c: v for c, v in columns.items()})
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["model", "field"])
    frame.attrs.update(query=query, k=k, baseline=baseline, model=model,
                       relevant={n: v["R"] for n, v in lists.items()})
    return frame
