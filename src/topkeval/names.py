"""Metric names: the grammar, the registry of families, their aliases.

A metric is a value: ``Metric("recall", k=10)`` prints as ``"recall@10"`` and
``parse_metric("recall@10")`` gives it back. Aliases used by other tools are accepted and
canonicalised (``P@10``, ``R@10``, ``P_10``, ``Rprec``, ``success@10``,
``fbeta(beta=1)@5`` is ``f1@5``). Every list of names shown to a user is derived from
:data:`FAMILIES`, never kept by hand.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .errors import UnknownMetricError, closest


@dataclass(frozen=True)
class Family:
    """One metric family of the registry."""

    name: str
    cutoff: str  # "required" | "optional" | "none"
    summary: str
    formula: str
    aliases: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    bounded: bool = True  # values lie in [0, 1]


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("precision", "required", "relevant share of the top k", "h(k) / k  (shrink: h(k) / min(k, n))",
           ("p", "prec", "p_k")),
    Family("recall", "required", "share of the relevant items found in the top k", "h(k) / R",
           ("r", "rec", "recall_k")),
    Family("recall_capped", "required", "recall with the denominator capped at k (LensKit's Recall@k)",
           "h(k) / min(R, k)", (), (), True),
    Family("f1", "required", "harmonic mean of precision@k and recall@k", "2 h(k) / (k + R)",
           ("f", "f1_score")),
    Family("fbeta", "required", "weighted harmonic mean of precision@k and recall@k",
           "(1 + b^2) h(k) / (b^2 R + k)", (), ("beta",)),
    Family("specificity", "required", "non-relevant candidates kept out of the top k",
           "(N - (min(k, n) - h(k))) / N", ("tnr",)),
    Family("fallout", "required", "non-relevant candidates let into the top k",
           "(min(k, n) - h(k)) / N", ("fpr",)),
    Family("r_precision", "none", "precision at rank R (TREC Rprec)", "h(R) / R",
           ("rprec", "r-precision", "rprecision")),
    Family("hit_rate", "required", "1 if any relevant item is in the top k (TREC success@k)",
           "1 if h(k) >= 1 else 0", ("success", "hit", "hitrate", "hr")),
    Family("rr", "optional", "reciprocal rank of the first relevant candidate (0 beyond k)",
           "1 / rank of the first relevant", ("mrr", "recip_rank", "reciprocal_rank"), (), True),
    Family("ap", "optional", "average precision (TREC AP: the sum runs over relevant ranks <= k, divided by R)",
           "sum(precision@rank of each relevant) / R", ("map", "map_cut", "average_precision"), (), True),
    Family("ndcg", "optional", "normalised discounted cumulative gain, graded gains",
           "DCG@k / ideal DCG@k, DCG = sum(gain / log2(rank + 1))", ("ndcg_cut",), ("gain",), True),
    Family("dcg", "optional", "discounted cumulative gain, graded gains", "sum(gain / log2(rank + 1))",
           (), ("gain",), False),
    Family("num_ret", "none", "candidates retrieved (n)", "n", (), (), False),
    Family("num_rel", "none", "relevant items (R)", "R", (), (), False),
    Family("num_rel_ret", "none", "relevant candidates retrieved", "relevant among the n", (), (), False),
    Family("tp", "required", "relevant candidates in the top k", "h(k)", (), (), False),
    Family("fp", "required", "non-relevant candidates in the top k", "min(k, n) - h(k)", (), (), False),
    Family("fn", "required", "relevant items outside the top k", "R - h(k)", (), (), False),
    Family("tn", "required", "non-relevant candidates outside the top k", "N - (min(k, n) - h(k))",
           (), (), False),
]}

_ALIASES: dict[str, str] = {}
for _f in FAMILIES.values():
    _ALIASES[_f.name] = _f.name
    for _a in _f.aliases:
        _ALIASES[_a] = _f.name

_GRAMMAR = re.compile(
    r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_\-]*?)\s*(?:\((?P<params>[^()]*)\))?\s*(?:@\s*(?P<k>[^\s@]*))?\s*$"
)
_TREC_CUTOFF = re.compile(r"^(?P<name>[A-Za-z_]+?)_(?P<k>\d+)$")  # P_10, recall_20, ndcg_cut_10


def _fmt_number(x: float) -> str:
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True, order=True)
class Metric:
    """A parsed metric: a family, a cutoff and parameters.

    Examples
    --------
    >>> str(Metric("recall", 10))
    'recall@10'
    >>> str(parse_metric("fbeta(beta=0.5)@20"))
    'fbeta(beta=0.5)@20'
    """

    family: str
    k: int | None = None
    beta: float | None = field(default=None)
    gain: str | None = field(default=None)  # nDCG / DCG gains: None (linear, the grade) or "exp"

    def __str__(self) -> str:
        text = self.family
        if self.beta is not None:
            text += f"(beta={_fmt_number(self.beta)})"
        if self.gain is not None:
            text += f"(gain={self.gain})"
        if self.k is not None:
            text += f"@{self.k}"
        return text

    @property
    def info(self) -> Family:
        """The registry entry of this metric's family."""
        return FAMILIES[self.family]


def known_names() -> list[str]:
    """Every family name and alias the parser accepts, for suggestions."""
    return sorted(set(_ALIASES) | {f"{a}@10" for a in _ALIASES})


def _unknown(text: str, why: str) -> UnknownMetricError:
    base = text.split("@")[0].split("(")[0].strip()
    hits = closest(base, list(_ALIASES))
    canon = []
    for h in hits:
        fam = FAMILIES[_ALIASES[h]]
        example = fam.name + ("(beta=0.5)" if fam.params else "") + ("@10" if fam.cutoff == "required" else "")
        if example not in canon:
            canon.append(example)
    hint = f" Did you mean {' or '.join(repr(c) for c in canon)}?" if canon else ""
    listing = ", ".join(sorted(FAMILIES))
    return UnknownMetricError(f"Unknown metric {text!r}: {why}.{hint} Known metrics: {listing}.")


def parse_metric(text: str | Metric) -> Metric:
    """Parse a metric name such as ``"recall@10"`` into a :class:`Metric`.

    Parameters
    ----------
    text : str or Metric
        ``family[(beta=b)][@k]``; case-insensitive; aliases of other tools are accepted.

    Returns
    -------
    Metric
        Its ``str()`` is the canonical name.

    Raises
    ------
    UnknownMetricError
        For an unknown family (the message suggests the closest names), a missing or bad cutoff,
        or bad parameters.

    Examples
    --------
    >>> [str(parse_metric(m)) for m in ("P@5", "Rprec", "success_10", "ndcg_cut_10", "MRR@10", "map")]
    ['precision@5', 'r_precision', 'hit_rate@10', 'ndcg@10', 'rr@10', 'ap']
    >>> str(parse_metric("fbeta(beta=1)@5"))
    'f1@5'
    """
    if isinstance(text, Metric):
        return text
    if not isinstance(text, str):
        raise UnknownMetricError(f"A metric name must be a string such as 'recall@10'. Got {text!r}.")
    m = _GRAMMAR.match(text)
    if m is None:
        raise _unknown(text, "expected the form name@k, for example 'recall@10'")
    name, params, k_text = m.group("name"), m.group("params"), m.group("k")
    key = name.lower()
    if key not in _ALIASES and k_text is None and params is None:
        t = _TREC_CUTOFF.match(name)
        if t and t.group("name").lower() in _ALIASES:
            key, k_text = t.group("name").lower(), t.group("k")
    if key not in _ALIASES:
        raise _unknown(text, f"no metric is called {name!r}")
    fam = FAMILIES[_ALIASES[key]]
    beta = gain = None
    if fam.params == ("gain",):
        if params is not None:
            value = params.strip().removeprefix("gain").lstrip().removeprefix("=").strip().lower()
            if value in ("exp", "exponential"):
                gain = "exp"
            elif value not in ("linear", "lin", ""):
                raise _unknown(text, f"gain must be 'linear' (the grade, trec_eval) or 'exp' (2**grade - 1), as in '{fam.name}(gain=exp)@10'")
    elif fam.params:
        if params is None:
            raise _unknown(text, f"{fam.name} needs a parameter, as in '{fam.name}(beta=0.5)@10'")
        value = params.strip()
        if value.startswith("beta"):
            value = value[4:].lstrip().removeprefix("=").strip()
        try:
            beta = float(value)
        except ValueError:
            raise _unknown(text, f"beta must be a positive number, as in '{fam.name}(beta=0.5)@10'") from None
        if not (math.isfinite(beta) and beta > 0):
            raise _unknown(text, "beta must be a positive finite number")
    elif params is not None:
        raise _unknown(text, f"{fam.name} takes no parameters")
    k = None
    if fam.cutoff == "required" and (k_text is None or k_text == ""):
        raise _unknown(text, f"{fam.name} needs a cutoff, as in '{fam.name}@10'")
    if fam.cutoff == "none" and k_text is not None:
        why = "its cutoff is each query's R" if fam.name == "r_precision" else "it counts the whole list"
        raise _unknown(text, f"{fam.name} takes no cutoff ({why})")
    if k_text is not None:
        if not k_text.isdigit() or int(k_text) < 1:
            raise _unknown(text, f"the cutoff must be a positive integer, got {k_text!r}")
        k = int(k_text)
    if fam.name == "fbeta" and beta == 1.0:
        return Metric("f1", k)
    return Metric(fam.name, k, beta, gain)


def parse_metrics(metrics) -> list[Metric]:
    """Parse a name or a list of names; duplicates (after canonicalisation) are kept once."""
    if isinstance(metrics, (str, Metric)):
        metrics = [metrics]
    try:
        items = list(metrics)
    except TypeError:
        raise UnknownMetricError(f"metrics must be a name or a list of names such as ['recall@10']. Got {metrics!r}.") from None
    if not items:
        raise UnknownMetricError("metrics is empty: name at least one, for example 'recall@10'.")
    out: list[Metric] = []
    for item in items:
        m = parse_metric(item)
        if m not in out:
            out.append(m)
    return out


_TREC_PREFIX = {"precision": "P", "recall": "recall", "ap": "map_cut", "ndcg": "ndcg_cut", "hit_rate": "success"}
_TREC_UNCUT = {"r_precision": "Rprec", "rr": "recip_rank", "ap": "map", "ndcg": "ndcg", "num_ret": "num_ret",
               "num_rel": "num_rel", "num_rel_ret": "num_rel_ret"}


def trec_name(metric: Metric | str) -> str:
    """The name trec_eval prints for a metric (``P_10``, ``map_cut_20``, ``Rprec``...), else the canonical one.

    Examples
    --------
    >>> [trec_name(m) for m in ("precision@10", "ap", "ap@5", "ndcg@10", "rr", "hit_rate@1", "f1@5")]
    ['P_10', 'map', 'map_cut_5', 'ndcg_cut_10', 'recip_rank', 'success_1', 'f1@5']
    """
    m = parse_metric(metric)
    if m.gain is not None or m.beta is not None:
        return str(m)
    if m.k is None and m.family in _TREC_UNCUT:
        return _TREC_UNCUT[m.family]
    if m.k is not None and m.family in _TREC_PREFIX:
        return f"{_TREC_PREFIX[m.family]}_{m.k}"
    return str(m)


#: Metrics whose trec_eval "all" line is a sum over queries, not a mean.
TREC_SUMMED = frozenset({"num_ret", "num_rel", "num_rel_ret"})
