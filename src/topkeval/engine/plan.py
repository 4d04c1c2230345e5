"""The plan: parsed metrics and resolved conventions -> the statistics, cutoffs, gain variants and
depth an evaluation needs. Everything here is read from the metric registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..conventions import Conventions
from ..errors import ParameterError
from ..kernels.stats import NO_CUTOFF
from ..metrics import FAMILIES, DcgSpec
from ..metrics.names import Metric, labelled_metrics
from ..metrics.registry import RANKED_STATISTICS


@dataclass(frozen=True)
class Plan:
    """What an evaluation computes: the metrics, the conventions, and the statistics they need.

    Attributes
    ----------
    metrics : tuple of Metric
    conv : Conventions
    cutoffs : ndarray of int64
        Every distinct cutoff, ascending; :data:`~topkeval.kernels.stats.NO_CUTOFF` when an uncut
        rank metric looks at the whole list.
    want_r : bool
        h(R) is needed (R-precision).
    want_rank : bool
        Reciprocal ranks and AP sums are needed.
    dcg_specs : tuple of DcgSpec
        The discounted-gain statistics needed (one per gain and discount in use).
    positive_hits : bool
        Relevant candidates scoring 0 or less are not counted as found (``nonpositive_scores="miss"``,
        for the families that count what they find).
    ranked : frozenset of str
        The statistics of the second pass (:data:`~topkeval.metrics.registry.RANKED_STATISTICS`)
        needed.
    iprec_levels : tuple of float
        The recall levels of interpolated precision needed, ascending.
    err_grades : tuple of float
        The maximum grades of the expected reciprocal ranks needed.
    mults : tuple of float
        The multipliers of R of trec_eval's Rprec_mult needed, ascending.
    walk_specs : tuple of DcgSpec
        The gain variants of trec_eval's G, Rndcg and ndcg_rel needed (the second pass's walk).
    seq_specs : tuple
        The sequence statistics needed (the registry's ``seq``: one spec per distinct one).
    labels : tuple of str
        Each metric's column label: the name as the user wrote it, blanks removed
        (:func:`topkeval.metrics.names.labelled_metrics`); by default its canonical name.
    clicks : bool
        The plan of a click log evaluated whole under inverse propensity weights (``evaluate(...,
        propensity=)``): the only evaluation where the ratios pooled over its queries
        (:mod:`topkeval.metrics.pooled`) may be computed.
    lists : tuple of Metric
        The list-only metrics (the registry's ``beyond``: novelty@10, coverage@10...), read off each
        model's top k rather than computed from the statistics: no kernel statistic, no column of the
        engine's; the backend that evaluates the plan declares the ``lists`` capability
        (:mod:`topkeval.backends.plugins`) and the front door adds their values
        (:mod:`topkeval.analysis.beyond`). A plan of list-only metrics alone is valid: its
        ``metrics`` are empty, and the engine still counts the queries, rows and ties (at cutoff 1).
    list_labels : tuple of str
        Their column labels, as requested.
    """

    metrics: tuple[Metric, ...]
    conv: Conventions
    cutoffs: np.ndarray = field(compare=False)
    want_r: bool = False
    want_rank: bool = False
    dcg_specs: tuple[DcgSpec, ...] = ()
    positive_hits: bool = False
    ranked: frozenset = frozenset()
    iprec_levels: tuple[float, ...] = ()
    err_grades: tuple[float, ...] = ()
    labels: tuple[str, ...] = ()
    mults: tuple[float, ...] = ()
    walk_specs: tuple[DcgSpec, ...] = ()
    seq_specs: tuple = ()
    clicks: bool = False
    lists: tuple[Metric, ...] = ()
    list_labels: tuple[str, ...] = ()

    def parts(self) -> list[Plan]:
        """The plans whose statistics one kernel pass gives: this plan, or one per relevance
        threshold of the metrics (a metric's own ``rel=``, :func:`conventions_of`) and, under
        ``nonpositive_scores="miss"``, per kind: the metrics that count what they find (with
        ``positive_hits``) and the others."""
        miss = self.conv.nonpositive_scores == "miss"
        keys = [(m.param("rel"), miss and FAMILIES[m.family].counts_found) for m in self.metrics]
        if all(key == (None, False) for key in keys):
            return [self]
        out = []
        for key in dict.fromkeys(keys):
            part = [(n, m) for n, m, k in zip(self.names, self.metrics, keys) if k == key]
            out.append(_plan([m for _, m in part], conventions_of(part[0][1], self.conv), positive_hits=key[1],
                             labels=tuple(n for n, _ in part)))
        return out

    def select(self, keep: list[bool]) -> Plan:
        """The plan of some of its metrics (``keep``: one flag per metric), labels kept."""
        return _plan([m for m, k in zip(self.metrics, keep) if k], self.conv, self.positive_hits,
                     tuple(n for n, k in zip(self.names, keep) if k))

    @property
    def names(self) -> list[str]:
        """The metrics' column labels (the names as requested), in the order requested."""
        return list(self.labels) if self.labels else [str(m) for m in self.metrics]

    @property
    def canonical(self) -> dict[str, str]:
        """Each column label -> the metric's canonical name."""
        return {name: str(m) for name, m in zip(self.names, self.metrics)}

    def depth(self, R_max: int, n_max: int) -> int:
        """How deep into a list of ``n_max`` candidates the metrics look (the top T that decides
        every value): the largest cutoff, the largest R for R-precision, the whole list for the
        uncut rank metrics; at least 1 and at most ``n_max``."""
        deepest = 1
        for m in self.metrics:
            fam = FAMILIES[m.family]
            if m.k is not None:
                deepest = max(deepest, m.k)
            elif fam.depth == "R":
                deepest = max(deepest, R_max)
            elif fam.depth == "list":
                return n_max
        return min(deepest, n_max)


def conventions_of(metric: Metric, conv: Conventions) -> Conventions:
    """The conventions one metric is computed under: ``conv``, with the metric's own relevance
    threshold when it has one (ir_measures' ``P(rel=2)@5``: a grade >= 2 is relevant)."""
    rel = metric.param("rel")
    return conv if rel is None or rel == conv.threshold else replace(conv, threshold=float(rel))


def judged_only_metrics(plan: Plan) -> list[Metric]:
    """The metrics of ``plan`` computed on the run without its unjudged items (``judged_only=true``)."""
    return [m for m in plan.metrics if m.param("judged_only")]


def make_plan(metrics, conv: Conventions, *, clicks: bool = False, lists: bool = False) -> Plan:
    """Parse ``metrics`` (labelled as written: :func:`topkeval.metrics.names.labelled_metrics`) and derive
    the statistics, cutoffs and gain variants they need. ``clicks``: the plan of a click log evaluated
    whole under inverse propensity weights (see :class:`Plan`); elsewhere a pooled ratio is refused.
    ``lists``: the caller's backend declares the ``lists`` capability, so the list-only metrics are
    the plan's :attr:`Plan.lists` (elsewhere each is refused, saying where it is computed)."""
    labels, mets = labelled_metrics(metrics)
    return plan_of(dict(zip(labels, mets)), conv, clicks=clicks, lists=lists)


def plan_of(metrics: Mapping[str, Metric], conv: Conventions, *, clicks: bool = False, lists: bool = False) -> Plan:
    """The plan of metrics parsed already, each under its column label (an Evaluation's
    ``metric_objects``: evaluating its own metrics again reads none of its labels); ``clicks`` and
    ``lists`` as in :func:`make_plan`, which parses the names and calls this."""
    labels, mets = tuple(metrics), tuple(metrics.values())
    listed: tuple[tuple[str, Metric], ...] = ()
    if lists:
        pairs = list(zip(labels or [str(m) for m in mets], mets))
        listed = tuple((label, m) for label, m in pairs if FAMILIES[m.family].beyond)
        kept = [(label, m) for label, m in pairs if not FAMILIES[m.family].beyond]
        labels, mets = tuple(label for label, _ in kept), tuple(m for _, m in kept)
    if not clicks:
        pooled = [(label, m) for label, m in zip(labels or [str(m) for m in mets], mets)
                  if FAMILIES[m.family].ips == "pooled"]
        if pooled:
            label, m = pooled[0]
            per_query = {"recall_micro": "recall", "f1_micro": "f1", "fbeta_micro": "fbeta"}[m.family]
            raise ParameterError(
                f"{label} is recall or F-beta pooled over every query of a click log, estimated from the clicks with "
                f"inverse propensity weights (evaluate(log, ..., position=, propensity=)); it is computed nowhere "
                f"else. With relevance judgments use {str(m).replace(m.family, per_query, 1)} (the mean over "
                "queries), or evaluate the click log with position= and propensity=.")
    return replace(_plan(mets, conv, labels=labels), clicks=clicks, lists=tuple(m for _, m in listed),
                   list_labels=tuple(label for label, _ in listed))


def _plan(mets, conv: Conventions, positive_hits: bool = False, labels: tuple[str, ...] = ()) -> Plan:
    mets = tuple(mets)
    for m in mets:
        if m.estimate:
            raise ParameterError(f"{m} names an estimate of {str(m).split('[')[0]} that evaluate_sampled computes (on "
                                 "sampled negatives, or corrected from them), not a metric to evaluate: ask for "
                                 f"{str(m).split('[')[0]!r}, and for the estimate with "
                                 "tk.evaluate_sampled(..., estimator=...).")
        if FAMILIES[m.family].beyond:
            raise ParameterError(f"{m} is a beyond-accuracy metric: it reads the items of each top k again, which this "
                                 "evaluation cannot. Evaluate a table in memory with item='<column>' (tk.evaluate), or "
                                 "add it to such results with res.with_beyond([...]).")
        allowed = FAMILIES[m.family].ties
        if allowed is not None and conv.ties not in allowed:
            raise ParameterError(
                f"{m} is not computed exactly under ties={conv.ties!r} (the mean over the orders of tied "
                f"candidates of this metric has no closed form here): pass ties= one of "
                f"{', '.join(repr(t) for t in allowed)} (trec_eval's rule is 'item_desc').")
    needs = set().union(*(FAMILIES[m.family].needs for m in mets))
    ks = {m.k for m in mets if m.k is not None}
    if any(m.k is None and FAMILIES[m.family].depth == "list" and FAMILIES[m.family].needs & {"rank", "dcg", "err"}
           for m in mets):
        ks.add(NO_CUTOFF)
    specs: list[DcgSpec] = []
    for m in mets:
        fam = FAMILIES[m.family]
        wanted = () if fam.dcg is None else fam.dcg(m, conv)
        for spec in wanted if isinstance(wanted, tuple) else (wanted,):
            if spec not in specs:
                specs.append(spec)
    levels: set[float] = set()
    grades: set[float] = set()
    mults: set[float] = set()
    walks: list[DcgSpec] = []
    sequences: list = []
    for m in mets:
        fam = FAMILIES[m.family]
        if fam.levels is not None:
            levels.update(fam.levels(m))
        if fam.err is not None:
            grades.add(fam.err(m))
        if fam.mults is not None:
            mults.update(fam.mults(m))
        if fam.walk is not None and fam.walk(m, conv) not in walks:
            walks.append(fam.walk(m, conv))
        if fam.seq is not None and fam.seq(m) not in sequences:
            sequences.append(fam.seq(m))
    return Plan(mets, conv, np.asarray(sorted(ks) or [1], dtype=np.int64), "h_at_r" in needs, "rank" in needs,
                tuple(specs), positive_hits, frozenset(needs & RANKED_STATISTICS), tuple(sorted(levels)),
                tuple(sorted(grades)), labels, tuple(sorted(mults)), tuple(walks), tuple(sequences))
