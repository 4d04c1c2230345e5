"""The metric registry: one entry per family, declared next to its function.

An entry says everything the rest of the package needs to know about a family: its function
(per-query statistics -> per-query values), the statistics it reads from the kernel, how deep it
looks into a list, whether it takes a cutoff and parameters, its names in other tools, and how
trec_eval aggregates it. The parser (:mod:`topkeval.metrics.names`), the engine's plan
(:mod:`topkeval.engine`), the matrix selection depth, the CLI listing and the TREC output all read
the registry; none keeps a list of its own.

Adding a metric computed from existing statistics is one decorated function in
``setbased.py`` or ``rankbased.py`` (and one reference definition in ``tests/reference.py``)::

    @register("hit_rate", undefined="never", cutoff="required", needs=("hit",), aliases=("success",), trec="success",
              summary="1 if any relevant item is in the top k", formula="1 if h(k) >= 1 else 0")
    def hit_rate(st, m, conv):
        return st.hit[:, st.column(m.k)].copy()

Statistics (:class:`~topkeval.kernels.stats.QueryStats`): ``h`` (relevant in the top k, every
cutoff), ``hit`` (a relevant in the top k), ``h_at_r`` (relevant in the top R), ``rank`` (reciprocal
rank and the sum of precisions at relevant ranks), ``dcg`` (discounted gains under the variants the
metrics declare: gain x discount), and the counts ``n``, ``rel_ret``, ``R`` that every kernel gives.
A second pass over the whole order of each list (:mod:`topkeval.kernels.ranked`) gives ``judged``
(judged candidates in the top k), ``bpref`` (trec_eval's bpref sum), ``iprec`` (interpolated
precision at the recall levels the metrics declare), ``auc`` (correctly ordered pairs), ``err``
(expected reciprocal rank under the maximum grades the metrics declare) and ``infap`` (trec_eval's
inferred AP sum), ``h_mult`` (relevant in the top floor(mult R + 0.9): trec_eval's Rprec_mult),
``bin_g`` (trec_eval's binG sum), ``gain_walk`` (trec_eval's G, Rndcg and ndcg_rel under the gain
variants the metrics declare: a walk over the ranked gains beside the ideal ones) and
``nonrel_judged`` (judged non-relevant candidates retrieved). ``seq`` is one value per query for each
sequence the metrics declare (``seq=``: a metric -> a hashable spec), computed from each list in rank
order (:mod:`topkeval.kernels.sequence`): the C/W/L measures whose user model adapts to the gains
seen, Clarke et al.'s compatibility, ir_measures' Accuracy.

A family that is exact only under some tie rules lists them in ``ties``; the plan refuses the
others with a :class:`~topkeval.errors.ParameterError` rather than give an inexact number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

#: The statistics a family may ask of the kernel (besides the counts every kernel returns).
STATISTICS = frozenset({"h", "hit", "h_at_r", "rank", "dcg", "judged", "bpref", "iprec", "auc", "err", "infap",
                        "h_mult", "bin_g", "gain_walk", "nonrel_judged", "seq"})

#: The statistics of the second pass (:mod:`topkeval.kernels.ranked`).
RANKED_STATISTICS = frozenset({"judged", "bpref", "iprec", "auc", "err", "infap", "h_mult", "bin_g", "gain_walk",
                               "nonrel_judged"})


@dataclass(frozen=True)
class Param:
    """A parameter of a family: ``fbeta(beta=0.5)``, ``ndcg(gain=exp)``, ``rbp(p=0.8)``.

    ``kind`` is ``"positive"`` (a finite number > 0), ``"unit"`` (a number in (0, 1)),
    ``"fraction"`` (a number in [0, 1]), ``"grade"`` (a finite number > 0, the largest grade), ``"gain"`` (``linear``,
    ``exp``, ``binary`` or a map of grades to gains, ``{1:3,2:7}``), ``"real"`` (any finite number: trec_eval's
    parameters), ``"number"`` (any finite number, or unset when its default is None: ir_measures' ``rel=``),
    ``"bool"`` (true or false), ``"levels"`` (distinct numbers in [0, 1], ``{0.25,0.5}``, kept ascending),
    ``"weights"`` (finite numbers >= 0 in rank order, ``{1,0.5,0.25}``: a weight per rank) or
    ``"choice"`` (one of the words of ``choices``: which peer's definition, ``variant=replay``). A parameter with
    a ``default`` may be left out, and is left out of the canonical name when it has that value.
    """

    name: str
    kind: str
    default: object = None
    required: bool = True
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class DcgSpec:
    """One discounted-gain statistic: a gain per candidate times a discount per rank.

    ``gain``: ``"linear"`` (the grade, 0 for grades <= 0), ``"exp"`` (2**grade - 1),
    ``"binary"`` (1 for a relevant candidate), ``"unjudged"`` (1 for a candidate without a
    judgment: RBP's residual), ``"unknown"`` (1 for a candidate without a judgment or with a
    negative grade, trec_eval's "unjudged": rbp_resid, unj) or a tuple of ``(grade, gain)`` pairs
    (other grades gain their own value when positive, as trec_eval's ``ndcg.1=3,2=7``). ``discount``:
    ``"log2"`` (1 / log2(rank + 1)), ``"lenskit"`` (1 / log2(max(rank, 2))) or ``("rbp", p)``
    (p ** (rank - 1)). ``signed`` (``negative_grades="gain"``): a negative grade gains its own,
    negative, value (linear, unlisted in a map; ``2**grade - 1`` under exp), and the ideal DCG
    ranks every judged item's gain, zero and negative ones included (torchmetrics). A
    :class:`ScaledGain` is cwl_eval's gain (the grade clipped to a range and scaled to [0, 1]);
    ``("cwl", kind, param)`` a discount of cwl_eval's measures (:func:`topkeval.engine.rules.discounts`).
    """

    gain: object = "linear"
    discount: object = "log2"
    signed: bool = False


#: The depth cwl_eval evaluates every list to (its ``max_n``): gains are padded with 0 to it, ranks
#: beyond it are cut, and the measures that continue past a list normalise over it.
CWL_DEPTH = 1000


@dataclass(frozen=True)
class ScaledGain:
    """cwl_eval's gain of a judged candidate (as ir_measures passes grades to it): the grade (negative
    grades 0) clipped to ``[low, high]`` and scaled to [0, 1], ``(min(max(max(grade, 0), low), high) -
    low) / (high - low)``; 0 for a candidate without a judgment."""

    low: float
    high: float


@dataclass(frozen=True)
class Family:
    """One metric family of the registry (see the module docstring)."""

    name: str
    function: Callable
    cutoff: str  # "required" | "optional" | "none"
    needs: frozenset
    depth: str  # without a cutoff: "R" (top R), "list" (the whole list) or "none" (no ranking)
    summary: str
    formula: str
    aliases: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    bounded: bool = True  # values lie in [0, 1]
    trec: str | None = None  # trec_eval's name: the prefix of name_k for a cutoff, the name without
    trec_uncut: str | None = None
    summed: bool = False  # trec_eval's "all" line sums it over queries instead of averaging
    dcg: Callable | None = None  # (metric, conventions) -> DcgSpec or tuple of them, for families that need "dcg"
    variants: tuple = ()  # other tools' names for this family with set parameters: (("ndcg_burges", (("gain", "exp"),)),)
    counts_found: bool = False  # counts relevant candidates found in the top k (nonpositive_scores applies)
    levels: Callable | None = None  # metric -> recall levels, for families that need "iprec"
    err: Callable | None = None  # metric -> maximum grade, for families that need "err"
    ties: tuple[str, ...] | None = None  # the tie rules under which it is exact (None: every one)
    trec_format: Callable | None = None  # metric -> trec_eval's name, for families with parameters
    higher_is_better: bool = True  # for reports: which value of a column is the best
    needs_all_relevant: bool = False  # its value counts relevant items outside the list (divides by R, ideal ranking)
    undefined: str = "never"  # when a query's value is undefined (conventions' ``undefined`` is given instead)
    ips: str | None = None  # under inverse propensity weights (evaluate(propensity=)): "ips" (a sum of per-item
    # terms: unbiased), "pooled" (a ratio of such sums pooled over the queries of a click log: consistent; only
    # there), "snips" (a per-query ratio of such sums: inconsistent with few clicks per query, refused), None
    # (no such estimator: refused)
    geometric: bool = False  # trec_eval's "all" line is exp of the mean (a geometric mean: the values are logs)
    trec_params: Callable | None = None  # trec_eval's "name.x,y" text -> the parameters ("p=v,...") of each metric
    mults: Callable | None = None  # metric -> multipliers of R, for families that need "h_mult"
    walk: Callable | None = None  # (metric, conventions) -> the DcgSpec of the gains, for families that need "gain_walk"
    beyond: str | None = None  # a beyond-accuracy family, read off each model's top k items again (not from the
    # kernel's statistics, see topkeval.metrics.beyond): "query" (a value per query), "catalog" (one per model)
    seq: Callable | None = None  # metric -> the spec of its sequence statistic, for families that need "seq"
    pads: bool = False  # divides by k (or R) under short_lists="pad", by min(k, n) under "shrink": a short list scores less
    reads: tuple[str, ...] = ()  # a beyond-accuracy family's inputs without a default (evaluate()'s parameter names,
    # ("baseline",)): refused without them, and the command line passes such a flag only where a metric reads it
    variant_ties: tuple = ()  # ((variant, the tie rules under which it is exact, why not under the others), ...)

    def example(self, k: int = 10) -> str:
        """A name of this family that parses, for listings: ``fbeta(beta=0.5)@10``, ``ap``...; ``k``
        is the cutoff of a family that needs one."""
        text = self.name
        required = [p for p in self.params if p.required]
        if required:
            text += "(" + ",".join(f"{p.name}={_EXAMPLE[p.kind]}" for p in required) + ")"
        return text + (f"@{k}" if self.cutoff == "required" else "")

    def examples(self) -> list[str]:
        """Every form of this family for tests and docs: with and without cutoff and parameters."""
        base = self.example().removesuffix("@10")
        out = [base + "@3"] if self.cutoff != "none" else [base]
        if self.cutoff == "optional":
            out.append(base)
        cut = "@3" if self.cutoff != "none" else ""
        required = "".join(f",{p.name}={_example_value(p)}" for p in self.params if p.required)
        for p in self.params:
            if not p.required and p.kind == "gain":
                out.append(f"{self.name}({p.name}=exp{required}){cut}")
                out.append(f"{self.name}({p.name}={{1:3,2:7}}{required}){cut}")
            elif not p.required:
                out.append(f"{self.name}({p.name}={_example_value(p)}{required}){cut}")
        return out


_EXAMPLE = {"positive": "0.5", "unit": "0.8", "fraction": "0.5", "grade": "5", "gain": "exp", "real": "-0.5",
            "levels": "{0.2,0.5,0.8}", "number": "1", "bool": "false", "weights": "{1,0.5,0.25,0.125,0.0625}"}


def _example_value(p: Param) -> str:
    """A value of parameter ``p`` other than its default, for :meth:`Family.examples`."""
    return next(c for c in p.choices if c != p.default) if p.kind == "choice" else _EXAMPLE[p.kind]

FAMILIES: dict[str, Family] = {}

#: the families a user defined (:func:`topkeval.define_metric`), with what defined them; a Spark
#: executor, a fresh interpreter, is sent these to define them again
DEFINED: dict[str, dict] = {}


def register(name: str, *, cutoff: str, needs=(), depth: str = "none", summary: str, formula: str,
             aliases: tuple[str, ...] = (), params: tuple[Param, ...] = (), bounded: bool = True,
             trec: str | None = None, trec_uncut: str | None = None, summed: bool = False,
             dcg: Callable | None = None, variants: dict | None = None, counts_found: bool = False,
             levels: Callable | None = None, err: Callable | None = None, ties: tuple[str, ...] | None = None,
             trec_format: Callable | None = None, higher_is_better: bool = True, needs_all_relevant: bool = False,
             undefined: str = "never", ips: str | None = None, geometric: bool = False,
             trec_params: Callable | None = None, mults: Callable | None = None, walk: Callable | None = None,
             beyond: str | None = None, seq: Callable | None = None, pads: bool = False, reads: tuple[str, ...] = (),
             variant_ties: tuple = ()):
    """Decorator: register ``function(stats, metric, conventions) -> per-query values`` as a family."""
    unknown = set(needs) - STATISTICS
    if (unknown or cutoff not in ("required", "optional", "none") or depth not in ("R", "list", "none")
            or ips not in (None, "ips", "snips", "pooled") or beyond not in (None, "query", "catalog")):
        raise ValueError(f"bad registry entry {name!r}")  # a programming error, not a user's

    def wrap(function):
        FAMILIES[name] = Family(name, function, cutoff, frozenset(needs), depth, summary, formula, aliases,
                                params, bounded, trec, trec_uncut, summed, dcg,
                                tuple((alias, tuple(values.items())) for alias, values in (variants or {}).items()),
                                counts_found, levels, err, ties, trec_format, higher_is_better, needs_all_relevant,
                                undefined, ips, geometric, trec_params, mults, walk, beyond, seq, pads, tuple(reads),
                                tuple(variant_ties))
        return function

    return wrap


def exact_under(metric, ties: str) -> tuple[tuple[str, ...], str] | None:
    """``None`` when ``metric`` (a parsed metric) is computed exactly under the tie rule ``ties``;
    else (the rules under which it is, why not under ``ties``: empty when its family says nothing),
    read from its family's declarations (``ties``; ``variant_ties`` for one variant of it).

    >>> from topkeval.metrics.names import parse_metric
    >>> exact_under(parse_metric("serendipity(variant=evidently)@10"), "expected")[0]
    ('optimistic', 'pessimistic', 'first', 'item_desc', 'item_asc', 'ranx')
    >>> exact_under(parse_metric("serendipity@10"), "expected") is None
    True
    """
    fam = FAMILIES[metric.family]
    if fam.ties is not None and ties not in fam.ties:
        return tuple(fam.ties), ""
    variant = metric.param("variant") if any(p.name == "variant" for p in fam.params) else None
    for which, allowed, why in fam.variant_ties:
        if variant == which and ties not in allowed:
            return tuple(allowed), why
    return None


def format_value(value) -> str:
    """A parameter value in a canonical name: ``0.5``, ``2``, ``exp``, ``{1:3,2:7}``, ``{0.25,0.5}``."""
    if isinstance(value, tuple) and all(not isinstance(x, tuple) for x in value):  # levels
        return "{" + ",".join(format_value(x) for x in value) + "}"
    if isinstance(value, tuple):
        return "{" + ",".join(f"{format_value(g)}:{format_value(v)}" for g, v in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def is_unit(x: float) -> bool:
    return math.isfinite(x) and 0 < x < 1


def example_name(family: Family) -> str:
    """How a family is written in a table of metrics: ``recall@k``, ``ap@k``, ``ap``,
    ``fbeta(beta=b)@k``, ``r_precision``."""
    params = [p for p in family.params if p.required]
    head = family.name + (f"({', '.join(f'{p.name}=…' for p in params)})" if params else "")
    if family.cutoff == "required":
        return f"`{head}@k`"
    if family.cutoff == "optional":
        return f"`{head}@k`, `{head}`"
    return f"`{head}`"


def markdown_table() -> str:
    """The table of every registered metric, as the docs' metrics page shows it (generated: ``python
    docs/metrics_table.py`` writes it into docs/guide/metrics.md, and a test checks that it is current)."""
    rows = ["| name | what it is | value | undefined when |", "|---|---|---|---|"]
    for family in (f for f in FAMILIES.values() if f.name not in DEFINED):  # the built-in ones
        also = f" (also {', '.join(f'`{a}`' for a in family.aliases)})" if family.aliases else ""
        optional = [f"`{p.name}={format_value(p.default)}`" for p in family.params if not p.required]
        what = family.summary + (f"; by default {', '.join(optional)}" if optional else "")
        cells = [example_name(family) + also, what, family.formula, family.undefined]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)

