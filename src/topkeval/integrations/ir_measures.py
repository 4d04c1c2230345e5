"""topkeval as an ir_measures provider, named ``"topkeval"`` (the ``ir_measures`` extra).

``import topkeval.integrations.ir_measures`` registers :data:`provider` in ir_measures' registry
(``ir_measures.providers.registry["topkeval"]``) and as ``ir_measures.topkeval``, beside
``ir_measures.pytrec_eval`` and the other providers. ir_measures finds its providers by importing
them (its ``providers/__init__.py``) and reads no entry points, so nothing can make
``ir_measures.topkeval`` exist before this module is imported; ``import topkeval`` never imports
ir_measures.

Used explicitly::

    import ir_measures
    import topkeval.integrations.ir_measures
    ir_measures.topkeval.calc_aggregate([ir_measures.nDCG@10, ir_measures.AP], qrels, run)

or first in a fallback pipeline, measures topkeval does not compute going on to ir_measures' own::

    pipeline = ir_measures.providers.FallbackProvider([ir_measures.topkeval, *ir_measures.DefaultPipeline.providers])

Semantics. ir_measures' default pipeline hands each measure to the first of its providers that
supports it, and each provider ranks, keeps queries and averages in its own way (pytrec_eval breaks
tied scores by document id descending, msmarco and judged ascending, cwl_eval keeps the run's
order). This provider computes each measure under the conventions of that same provider
(:data:`PROVIDERS`, :meth:`TopkevalProvider.follows`), so that its numbers are the default
pipeline's; ``TopkevalProvider(ties=...)`` computes every measure under one tie rule instead
(``ties="expected"``: the exact mean over the orders of tied documents). A measure is supported
when that provider is one of :data:`PROVIDERS` and topkeval's name parser reads the measure's
``str()`` into a metric it computes under those conventions: the list is derived, never kept by
hand. Some measures are computed apart from the parser's reading, as their provider computes them:
cwl_eval's ``RBP(rel=r)`` normalises its weights over 1000 ranks (``rbp@1000 / (1 - p^1000)``), and
reads a negative grade as 0 (under ``rel <= 0`` every judged document is relevant); ``Judged``
without a cutoff is judged@k over the whole list; ``nDCG(gains={...})`` rewrites the grades by the
map, as ir_measures does before pytrec_eval reads them, so that a negative gain gains 0; and
``Compat``'s ideal orders equal grades by the run's score, then in the judgments' order
(``compat(ideal=judgments)``). A relevance level of 0 or less is refused for the measures that
pytrec_eval computes (it refuses ``rel=0`` and gives 0 below it) and for ``Accuracy`` (whose
provider counts unjudged documents relevant there); a document without a judgment is never
relevant. docs/conventions.md lists where the providers differ from each other and from themselves.

Records. ``iter_calc`` yields ir_measures' ``Metric(query_id, measure, value)`` for each query of
the run that has judgments, then the measure's ``DEFAULT`` for each judged query the run misses,
as ir_measures' ``Evaluator`` does; ``Accuracy`` reports only the queries where it is defined, as
its provider does. ``calc_aggregate`` and ``calc`` aggregate them with each measure's own
aggregator (the mean; the sum for ``NumRet``, ``NumRel``). The run and the judgments are read by
:func:`topkeval.evaluate` in any form it takes: ir_measures' (namedtuples, pandas frames with
``query_id``, ``doc_id``, ``score`` / ``relevance``, dicts of dicts), PyTerrier's frames, Arrow and
polars tables; empty ones as ir_measures reads them. Query ids are matched as evaluate matches them
(the number 401 and the text "401" are one id; the records carry the judgments' ids), and ids it
refuses are refused, never scored 0. Unlike ir_measures, a document listed twice for a query is
refused, not overwritten.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..conventions import resolve
from ..errors import ParameterError, TopkevalError
from ..params import Given, Options, validate_params

#: what this module needs, in the one line raised without it
MISSING = ("topkeval.integrations.ir_measures needs ir_measures, which is not installed: pip install ir-measures "
           "(or, in topkeval's source checkout, pip install '.[ir_measures]').")

#: The name the provider is registered under.
NAME = "topkeval"


@dataclass(frozen=True)
class Rule:
    """How an ir_measures provider ranks, keeps queries and reports: the conventions of
    :func:`topkeval.evaluate` that reproduce it, and whether a judged query it does not report
    gets the measure's DEFAULT (ir_measures' ``Evaluator``) or stays unreported (``Accuracy``)."""

    settings: dict = field(default_factory=dict)
    fills_missing: bool = True
    why: str = ""
    #: topkeval families whose definition in this provider differs from topkeval's: not supported
    #: (``{family: how the provider defines it}``)
    differs: dict = field(default_factory=dict)


#: The ir_measures providers whose semantics topkeval reproduces, each tested against it. Every
#: one keeps a judged query with no relevant document (scored, not skipped); a grade >= 1 is
#: relevant unless a measure says ``rel=``.
PROVIDERS: dict[str, Rule] = {
    "pytrec_eval": Rule(dict(conventions="pytrec_eval"),
                        why="trec_eval: ties by document id descending (text), scores as C floats",
                        differs={"iprec": "pytrec_eval embeds trec_eval 9, whose interpolated precision at recall x "
                                          "starts at the int(x R + 0.9)-th relevant document; topkeval's iprec is "
                                          "trec_eval 10's, lround(x R)"}),
    "cwl_eval": Rule(dict(ties="first", empty_queries="keep", undefined=0.0, threshold=1.0),
                     why="cwl-eval: the run's own order among tied scores (a stable sort), lists cut at 1000 ranks"),
    "compat": Rule(dict(ties="item_asc", item_order="text", empty_queries="keep", undefined=0.0, threshold=1.0),
                   why="ties by document id ascending"),
    "judged": Rule(dict(ties="item_asc", item_order="text", short_lists="shrink", empty_queries="keep", undefined=0.0,
                        threshold=1.0), why="ties by document id ascending; a short list divides by its length"),
    "msmarco": Rule(dict(ties="item_asc", item_order="text", empty_queries="keep", undefined=0.0, threshold=1.0),
                    why="MS MARCO's script: ties by document id ascending"),
    "gdeval": Rule(dict(ties="item_desc", item_order="text", empty_queries="keep", undefined=0.0, threshold=1.0),
                   why="gdeval.pl: ties by document id descending"),
    "accuracy": Rule(dict(ties="first", empty_queries="keep", undefined="nan", threshold=1.0), fills_missing=False,
                     why="the run's own order among tied scores; a query without a relevant and a non-relevant "
                         "document is not reported"),
    "ranx": Rule(dict(conventions="ranx"), why="ranx: numba's quicksort of the negated scores in the run's order"),
}

#: cwl_eval's lists end at 1000 ranks (its RankingMaker's max_n)
CWL_RANKS = 1000

#: cwl_eval's RBP(rel=r) with r <= 0 counts every judged document relevant (it reads a negative grade as
#: 0): a relevance threshold below any grade, -CWL_ANY_GRADE, says so
CWL_ANY_GRADE = 1e300

#: The tie rules a provider may be given for every measure (``TopkevalProvider(ties=...)``).
TIES = ("expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc")


@dataclass(frozen=True)
class Computed:
    """How one measure is computed: the topkeval metric, under which ir_measures provider's
    conventions, and the factor its value is multiplied by (cwl_eval's RBP)."""

    metric: Any
    follows: str
    settings: dict
    fills_missing: bool
    factor: float = 1.0


try:
    import ir_measures
    from ir_measures.providers.base import Evaluator, Provider
    from ir_measures.util import CalcResults
    from ir_measures.util import Metric as IrMetric
except ImportError:
    def __getattr__(name: str) -> Any:
        if name in ("TopkevalProvider", "provider", "TopkevalEvaluator"):
            raise TopkevalError(MISSING)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
else:
    class TopkevalEvaluator(Evaluator):
        """The judgments read once, evaluated against each run given to ``iter_calc``."""

        def __init__(self, measures: list, computed: dict, qrels, qrel_qids: set, judged_ids=None):
            super().__init__(measures, qrel_qids)
            self.listed = list(measures)  # (ir_measures types its measures as an iterable)
            self.computed = computed
            self.qrels = qrels
            #: the distinct query ids of the judgments' rows (an array, matched to a run's as evaluate matches them)
            self.judged_ids = judged_ids

        @validate_params(run=Given("a run in a form topkeval.evaluate reads, checked where it is read"))
        def iter_calc(self, run):
            """Per-query records of the run: each judged query of the run, then the measure's DEFAULT for
            each judged query it misses (not for measures whose provider leaves them unreported)."""
            return (record for _, record in self._numbered(run))

        @validate_params(run=Given("a run in a form topkeval.evaluate reads, checked where it is read"))
        def calc_aggregate(self, run):
            """Each measure's aggregate (its own aggregator: the mean, the sum for counts) over the records."""
            aggregators = [m.aggregator() for m in self.measures]
            for i, record in self._numbered(run):
                aggregators[i].add(record.value)
            return {m: agg.result() for m, agg in zip(self.measures, aggregators)}

        @validate_params(run=Given("a run in a form topkeval.evaluate reads, checked where it is read"))
        def calc(self, run):
            """The aggregates and the per-query records."""
            aggregators = [m.aggregator() for m in self.measures]
            records = []
            for i, record in self._numbered(run):
                aggregators[i].add(record.value)
                records.append(record)
            return CalcResults({m: agg.result() for m, agg in zip(self.measures, aggregators)}, records)

        def _numbered(self, run) -> Iterator[tuple[int, Any]]:
            """(position of the measure, record): the run's records, then the DEFAULTs (in ir_measures'
            order: by measure, then query)."""
            seen = set()
            for i, record in self._records(run):
                seen.add((i, record.query_id))
                yield i, record
            names = [str(m) for m in self.listed]
            missing = [(names[i], str(q), i, q) for i, m in enumerate(self.listed) if self.computed[m].fills_missing
                       for q in self.qrel_qids if (i, q) not in seen]
            for _, _, i, q in sorted(missing, key=lambda x: x[:2]):
                yield i, IrMetric(query_id=q, measure=self.listed[i], value=self.listed[i].DEFAULT)

        def _records(self, run) -> Iterator[tuple[int, Any]]:
            from ..api import evaluate
            from ..inputs.ecosystems import as_table
            from ..inputs.judgments import id_kind, match_ids

            table = as_table(run, "run", empty=True)
            if self.judged_ids is None or not len(self.judged_ids) or _is_empty(table):
                return  # every record is a DEFAULT
            query, item, score = _run_names(table)
            run_ids = _id_values(table, query)
            # the query ids of both sides in one comparable form, as evaluate matches them (1 and "1" one id; a
            # ColumnError for ids that cannot be matched, 401.5 and "401"); the records carry the judgments' ids
            judged, ran = match_ids(self.judged_ids, run_ids, query)
            original = dict(zip(judged.tolist(), self.judged_ids.tolist()))
            if not set(judged.tolist()) & set(ran.tolist()) and id_kind(self.judged_ids) == id_kind(run_ids):
                return  # ids of one kind, no judged query in the run: every record is a DEFAULT (as in ir_measures)
            # (ids of two kinds that share no query: evaluate refuses them, with what each side looks like)
            groups: dict[tuple, list[int]] = {}
            for i, measure in enumerate(self.listed):
                c = self.computed[measure]
                groups.setdefault((c.follows, tuple(sorted(c.settings.items()))), []).append(i)
            for (_, settings), positions in groups.items():
                metrics = list(dict.fromkeys(self.computed[self.listed[i]].metric for i in positions))
                res = evaluate(table, metrics=metrics, query=query, item=item, score=score, qrels=self.qrels,
                               relevance="relevance", **dict(settings))
                pq = res.per_query
                ids = pq[query].tolist()
                for i in positions:
                    measure = self.listed[i]
                    c = self.computed[measure]
                    for qid, value in zip(ids, pq[str(c.metric)].tolist()):
                        if value == value:  # NaN: not reported (Accuracy where it is undefined)
                            yield i, IrMetric(query_id=original.get(qid, qid), measure=measure,
                                              value=float(value) * c.factor)

    class TopkevalProvider(Provider):
        """topkeval as an ir_measures provider (see the module docstring).

        Parameters
        ----------
        ties : str, optional
            None (default): each measure under the tie rule of the ir_measures provider that the
            default pipeline gives it (:data:`PROVIDERS`), so that the numbers are the default
            pipeline's. A rule of :data:`TIES`: every measure under it (``"expected"``: the exact mean
            over the orders of tied documents; measures with no closed form under it are then not
            supported, and a fallback pipeline sends them on).

        Examples
        --------
        >>> import ir_measures
        >>> from topkeval.integrations.ir_measures import provider
        >>> qrels = [ir_measures.Qrel("q1", "d1", 1), ir_measures.Qrel("q1", "d2", 0), ir_measures.Qrel("q2", "d3", 2)]
        >>> run = [ir_measures.ScoredDoc("q1", "d1", 0.5), ir_measures.ScoredDoc("q1", "d2", 0.5),
        ...        ir_measures.ScoredDoc("q2", "d3", 1.0)]
        >>> provider.supports(ir_measures.P@1), provider.follows(ir_measures.P@1)
        (True, 'pytrec_eval')
        >>> provider.calc_aggregate([ir_measures.P@1, ir_measures.RR@1], qrels, run)
        {P@1: 0.5, RR@1: 1.0}

        P@1 follows trec_eval (d2 before d1: id descending), RR@1 MS MARCO's script (d1 first), as in
        ir_measures' default pipeline. Under one rule for both:

        >>> from topkeval.integrations.ir_measures import TopkevalProvider
        >>> TopkevalProvider(ties="expected").calc_aggregate([ir_measures.P@1, ir_measures.RR@1], qrels, run)
        {P@1: 0.75, RR@1: 0.75}
        """

        NAME = NAME

        @validate_params(ties=[Options(*TIES), None])
        def __init__(self, ties: str | None = None):
            super().__init__()
            self.ties = ties

        def __repr__(self) -> str:
            return f"TopkevalProvider(ties={self.ties!r})"

        @validate_params(measure=Given("an ir_measures measure, checked by supports"))
        def supports(self, measure) -> bool:
            """Whether this provider computes ``measure`` (an ir_measures measure) with the numbers of
            the ir_measures provider it follows (:meth:`follows`)."""
            return self._computed(measure) is not None

        @validate_params(measure=Given("an ir_measures measure, checked by follows"))
        def follows(self, measure) -> str | None:
            """The ir_measures provider whose semantics ``measure`` is computed under (the first of
            the default pipeline that supports it), or None when this provider does not support it."""
            c = self._computed(measure)
            return None if c is None else c.follows

        def _computed(self, measure) -> Computed | None:
            if not isinstance(measure, ir_measures.Measure):
                return None
            return _computed(measure, self.ties)

        def _evaluator(self, measures, qrels):
            from ..inputs.ecosystems import as_table

            if isinstance(measures, ir_measures.Measure):
                raise ParameterError(f"measures must be a list of ir_measures measures; got the single measure "
                                     f"{measures!r}: pass [{measures!r}].")
            try:
                measures = list(measures)
            except TypeError:
                raise ParameterError(f"measures must be a list of ir_measures measures such as [ir_measures.nDCG@10]. "
                                     f"Got {type(measures).__name__}.") from None
            odd = next((m for m in measures if not isinstance(m, ir_measures.Measure)), None)
            if odd is not None:
                raise ParameterError(f"measures must be ir_measures measures such as ir_measures.nDCG@10; {odd!r} is a "
                                     f"{type(odd).__name__} (ir_measures.parse_measure reads a name).")
            measures = list(dict.fromkeys(measures))  # one record per measure and query, as ir_measures keeps them
            computed = {}
            for measure in measures:
                c = self._computed(measure)
                if c is None:
                    raise ParameterError(f"{measure!r} is not supported by the topkeval provider{_why(measure, self.ties)}; "
                                         "to have such measures computed by ir_measures' own providers, put topkeval "
                                         "first in a fallback pipeline: ir_measures.providers.FallbackProvider("
                                         "[ir_measures.topkeval, *ir_measures.DefaultPipeline.providers]).")
                computed[measure] = c
            # judged queries without a judged document ({"q": {}}): judged queries all the same (their DEFAULTs)
            bare = {q for q, docs in qrels.items() if isinstance(docs, Mapping) and not docs} \
                if isinstance(qrels, Mapping) and all(isinstance(v, Mapping) for v in qrels.values()) else set()
            table = as_table(qrels, "qrels", empty=True)
            if _is_empty(table):
                return TopkevalEvaluator(measures, computed, table, bare)
            names = _qrel_names(table)
            if names != ("query_id", "doc_id", "relevance"):
                table = _renamed(table, names)
            ids = _id_values(table, "query_id")
            return TopkevalEvaluator(measures, computed, table, set(ids.tolist()) | bare, ids)

    def _canonical(measure) -> str | None:
        """The ir_measures provider the default pipeline gives ``measure`` to (declarations, not
        availability), when its semantics are reproduced here."""
        for candidate in ir_measures.DefaultPipeline.providers:
            if candidate.NAME == NAME or not candidate.supports(measure):
                continue
            return candidate.NAME if candidate.NAME in PROVIDERS else None
        return None

    @functools.lru_cache(maxsize=4096)
    def _computed(measure, ties: str | None) -> Computed | None:
        from ..engine import make_plan
        from ..metrics.names import MAX_CUTOFF, parse_metric

        try:
            measure.validate_params()
        except AssertionError:  # ir_measures checks its parameters with assert
            return None
        follows = _canonical(measure)
        if follows is None or _refused_level(measure, follows) is not None:
            return None
        rule = PROVIDERS[follows]
        factor = 1.0
        try:
            if follows == "judged" and measure["cutoff"] is ir_measures.providers.base.NOT_PROVIDED:
                from ..metrics.names import Metric

                metric = Metric("judged", MAX_CUTOFF)  # the whole list (its provider's cutoff = the run's length)
            else:
                metric = parse_metric(measure)
            if follows == "cwl_eval" and measure.NAME == "RBP":  # weights normalised over cwl_eval's 1000 ranks
                metric = replace(metric, k=CWL_RANKS)
                factor = 1.0 / (1.0 - metric.param("p") ** CWL_RANKS)
                if _rel(measure) <= 0:  # cwl_eval reads a negative grade as 0: every judged document is relevant
                    metric = _with(metric, rel=-CWL_ANY_GRADE)
            gains = metric.param("gain") if metric.family == "ndcg" else None
            if follows == "pytrec_eval" and isinstance(gains, tuple) and any(g < 0 for _, g in gains):
                # ir_measures rewrites the judgments' grades by the map, and trec_eval gives a negative grade no gain
                metric = _with(metric, gain=tuple((grade, max(g, 0.0)) for grade, g in gains))
            if follows == "compat":  # its ideal: equal grades by the run's score, then in the judgments' order
                metric = _with(metric, ideal="judgments")
            if metric.family in rule.differs:
                return None
            settings = dict(rule.settings)
            if ties is not None:
                settings["ties"] = ties
            make_plan([metric], resolve(settings.pop("conventions", None), **settings))
        except TopkevalError:
            return None
        return Computed(metric, follows, dict(rule.settings) | ({"ties": ties} if ties else {}), rule.fills_missing,
                        factor)

    def _rel(measure) -> float:
        """A measure's ``rel=`` (1 when it has none or leaves it out)."""
        try:
            rel = measure["rel"]
        except (KeyError, TypeError):
            return 1.0
        return 1.0 if rel is ir_measures.providers.base.NOT_PROVIDED or rel is None else float(rel)

    def _refused_level(measure, follows: str) -> str | None:
        """Why a relevance level of 0 or less is not reproduced for ``measure`` (None when it is)."""
        if _rel(measure) > 0:
            return None
        if follows == "pytrec_eval":
            return ("pytrec_eval refuses a relevance level of 0 (\"relevance_level should be positive\") and counts no "
                    "document relevant below 0, so its numbers there are an accident, not a definition; to count "
                    "grade 0 relevant, use tk.evaluate(run, qrels=..., threshold=0), under which a judged document "
                    "of grade 0 or more is relevant and an unjudged one never is")
        if follows == "accuracy":
            return ("ir_measures' accuracy provider reads a document without a judgment as grade 0, so under "
                    "rel <= 0 it counts unjudged documents as relevant; topkeval never does")
        return None

    def _with(metric, **values):
        """``metric`` with some parameters set, read again by the parser (its canonical form)."""
        from ..metrics.names import Metric, parse_metric

        params = dict(metric.params) | values
        return parse_metric(str(Metric(metric.family, metric.k, tuple(params.items()))))

    def _why(measure, ties: str | None) -> str:
        follows = _canonical(measure)
        if follows is None:
            try:
                anywhere = any(p.supports(measure) for p in ir_measures.DefaultPipeline.providers if p.NAME != NAME)
            except AssertionError:  # parameters ir_measures refuses
                anywhere = False
            if not anywhere:
                return " (no provider of ir_measures' default pipeline supports it either)"
            return (" (the first provider of ir_measures' default pipeline that supports it is not one whose "
                    f"semantics topkeval reproduces: {', '.join(PROVIDERS)})")
        level = _refused_level(measure, follows)
        if level is not None:
            return f" (it follows {follows}: {level})"
        if ties is not None:
            return f" under ties={ties!r}"
        try:
            from ..metrics.names import parse_metric

            family = parse_metric(measure).family
        except TopkevalError:
            family = None
        if family in PROVIDERS[follows].differs:
            return f" (the default pipeline gives it to {follows}: {PROVIDERS[follows].differs[family]})"
        return f" (it follows {follows}, and topkeval does not read {str(measure)!r} as one of its metrics)"

    provider = TopkevalProvider()
    ir_measures.providers.register(provider)
    ir_measures.topkeval = provider  # type: ignore[attr-defined]  # beside ir_measures.pytrec_eval and the others


def _is_empty(table) -> bool:
    """An empty run or judgments (ir_measures takes them: no records)."""
    if isinstance(table, dict):
        return not table or all(len(v) == 0 for v in table.values())
    if isinstance(table, (list, tuple)):
        return len(table) == 0
    try:
        return len(table) == 0
    except TypeError:
        return False


def _columns(table) -> list[str]:
    from ..inputs.tables import column_names

    return column_names(table)


def _run_names(table) -> tuple[str, str, str]:
    """The run's query, document and score columns: ir_measures' names, or PyTerrier's."""
    from ..errors import ColumnError
    from ..inputs.ecosystems import SHAPES

    columns = _columns(table)
    for shape in SHAPES:
        if shape.query in columns and shape.item in columns and "score" in columns:
            return shape.query, shape.item, "score"
    raise ColumnError(f"The run has columns {', '.join(map(repr, columns))}; the topkeval provider reads ir_measures' "
                      "query_id, doc_id and score (or PyTerrier's qid, docno and score).")


def _qrel_names(table) -> tuple[str, str, str]:
    from ..errors import ColumnError
    from ..inputs.ecosystems import SHAPES

    columns = _columns(table)
    for shape in SHAPES:
        if shape.query in columns and shape.item in columns and shape.relevance in columns:
            return shape.query, shape.item, shape.relevance
    raise ColumnError(f"The judgments have columns {', '.join(map(repr, columns))}; the topkeval provider reads "
                      "ir_measures' query_id, doc_id and relevance (or PyTerrier's qid, docno and label).")


def _renamed(table, names: tuple[str, str, str]):
    from ..inputs.ecosystems import _renamed as renamed

    return renamed(table, dict(zip(names, ("query_id", "doc_id", "relevance"))))


def _id_values(table, column: str):
    """The distinct values of an id column, as an array (its ``tolist()`` gives them as ir_measures'
    records carry them); missing ids and ids of mixed kinds are refused as evaluate refuses them."""
    import numpy as np
    import pandas as pd

    from ..inputs.ids import Encoded, check_ids, is_arrow
    from ..inputs.tables import read_columns

    values = read_columns(table, [column], id_columns=[column], allow_empty=True)[column]
    check_ids(values, column, "query")
    if isinstance(values, Encoded):
        return np.asarray(values.labels[pd.unique(values.codes[values.codes >= 0])])
    if is_arrow(values):
        return np.asarray(values.unique().to_pylist(), dtype=object)
    return np.asarray(pd.unique(np.asarray(values)))
