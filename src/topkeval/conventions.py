"""The conventions of DESIGN.md: every choice that changes a number, named and validated.

=================  ===============================================================  =============
setting            values (default first)                                           meaning
=================  ===============================================================  =============
``ties``           expected, optimistic, pessimistic, first, item_desc, item_asc    order among equal scores
``empty_queries``  skip, keep, error                                                queries with R = 0
``undefined``      0.0, 1.0, nan                                                    value of x / 0
``short_lists``    pad, shrink, error                                               k larger than the list
``threshold``      None (grade > 0) or a number (grade >= threshold)                what is relevant
``score_threshold`` None or a number: candidates scoring below it are removed        Surprise's recipe
=================  ===============================================================  =============

A preset (``conventions="trec_eval"``) fills every setting the way another tool does; an
explicit keyword given with a preset overrides that one setting.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, replace

from .errors import ParameterError, did_you_mean

TIES = ("expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc")
EMPTY_QUERIES = ("skip", "keep", "error")
SHORT_LISTS = ("pad", "shrink", "error")
UNDEFINED = (0.0, 1.0, "nan")


@dataclass(frozen=True)
class Conventions:
    """One complete, validated set of conventions.

    Attributes
    ----------
    ties : str
        Order among candidates of equal score. ``"expected"`` (default) is the exact mean over
        every order of the tied candidates (McSherry & Najork 2008): a tie group of ``t``
        candidates, ``r`` of them relevant, that takes ``m`` of the remaining top-k slots adds
        ``r*m/t`` to h(k). ``"optimistic"`` / ``"pessimistic"`` put relevant candidates first /
        last inside a tie, and higher / lower grades first among them (the two bounds of every
        metric, nDCG included); ``"first"`` keeps the order the rows appear in;
        ``"item_desc"`` / ``"item_asc"`` order by item id (trec_eval uses ``item_desc``).
    empty_queries : str
        Queries with no relevant item (R = 0): ``"skip"`` leaves them out of every mean and
        counts them in ``info``; ``"keep"`` averages them in; ``"error"`` refuses them.
    undefined : float
        Value of a metric whose denominator is 0 (recall of a kept empty query, specificity when
        every candidate is relevant). ``nan`` leaves that query out of that metric's mean.
    short_lists : str
        k larger than the list: ``"pad"`` counts the missing slots as non-relevant (precision
        divides by k), ``"shrink"`` divides by min(k, n), ``"error"`` refuses.
    threshold : float or None
        A grade ``>= threshold`` is relevant; None means grade > 0.
    score_threshold : float or None
        Candidates scoring below it are removed before ranking: they leave n and N, a relevant
        one still counts in R.
    """

    ties: str = "expected"
    empty_queries: str = "skip"
    undefined: float = 0.0
    short_lists: str = "pad"
    threshold: float | None = None
    score_threshold: float | None = None

    def as_dict(self) -> dict:
        """The settings as a plain dict (``undefined`` nan written as the string "nan")."""
        d = asdict(self)
        if math.isnan(d["undefined"]):
            d["undefined"] = "nan"
        return d


#: Settings that reproduce other tools (see docs/conventions.md for the evidence).
PRESETS: dict[str, dict] = {
    "topkeval": {},
    # trec_eval: ties broken by document id descending, every query with judgments averaged
    # (an empty one scores 0), P_k divides by k, relevant means grade >= 1.
    "trec_eval": dict(ties="item_desc", empty_queries="keep", undefined=0.0, short_lists="pad",
                      threshold=1.0),
    # Surprise FAQ's precision_recall_at_k: Python's stable sort on the estimate, ratings >= 3.5
    # relevant, only estimates >= 3.5 recommended, precision over the recommended items,
    # 0 for x/0, every user averaged.
    # ranx: tied documents keep the order they were inserted in (the run's row order), every
    # judged query averaged (an empty one scores 0), precision divides by k, relevant = grade >= 1.
    "ranx": dict(ties="first", empty_queries="keep", undefined=0.0, short_lists="pad", threshold=1.0),
    # scikit-learn ndcg_score / dcg_score: ties averaged (ignore_ties=False: the exact expectation),
    # a query with no relevant item scores 0 and is averaged in.
    "sklearn": dict(ties="expected", empty_queries="keep", undefined=0.0, short_lists="pad"),
    # torchmetrics retrieval_*: empty_target_action="neg" (0, averaged in), top_k without
    # adaptive_k divides by k; its nDCG averages ties like scikit-learn. Its other metrics take
    # torch.topk's unspecified order among ties, and its AP divides by the relevant items found,
    # not R: those are not reproduced (docs/conventions.md).
    "torchmetrics": dict(ties="expected", empty_queries="keep", undefined=0.0, short_lists="pad"),
    # LensKit (Precision, Recall): the recommendation list's own order, precision over the list's
    # length when it is shorter than k, nan for an empty list; every test user has a test item.
    # Its Recall@k is topkeval's recall_capped@k (the denominator is min(R, k)).
    "lenskit": dict(ties="first", empty_queries="skip", undefined="nan", short_lists="shrink"),
    # Evidently (PrecisionTopKMetric, RecallTopKMetric): users without a relevant item dropped,
    # precision over min(k, list length). Its ranks come from pandas' average rank cut to an
    # integer, which can count more than k tied items: that is not reproduced; with distinct
    # scores the numbers agree.
    "evidently": dict(ties="first", empty_queries="skip", undefined=0.0, short_lists="shrink"),
    "surprise": dict(ties="first", empty_queries="keep", undefined=0.0, short_lists="shrink",
                     threshold=3.5, score_threshold=3.5),
}

class _Unset:
    """Marks a convention keyword that was not given (so a preset's value stands)."""

    def __repr__(self) -> str:
        return "<default>"


UNSET = _Unset()

_FIELDS = ("ties", "empty_queries", "undefined", "short_lists", "threshold", "score_threshold")


def _choice(value, allowed, param, owner):
    if not isinstance(value, str) or value not in allowed:
        hint = did_you_mean(str(value), allowed) if isinstance(value, str) else ""
        raise ParameterError(
            f"The {param!r} parameter of {owner} must be one of {', '.join(map(repr, allowed))}. "
            f"Got {value!r} instead.{hint}"
        )
    return value


def _undefined(value, owner):
    if isinstance(value, str) and value.lower() == "nan":
        return math.nan
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if math.isnan(v) or v in (0.0, 1.0):
            return v
    raise ParameterError(
        f"The 'undefined' parameter of {owner} must be 0.0, 1.0 or nan. Got {value!r} instead."
    )


def _optional_number(value, param, owner):
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise ParameterError(
        f"The {param!r} parameter of {owner} must be None or a finite number. Got {value!r} instead."
    )


def resolve(conventions: str | Conventions | None = None, owner: str = "evaluate", **settings) -> Conventions:
    """Build validated :class:`Conventions` from a preset name and keyword overrides.

    Parameters
    ----------
    conventions : str, Conventions or None
        A preset name (``"trec_eval"``, ``"ranx"``, ``"sklearn"``, ``"torchmetrics"``,
        ``"lenskit"``, ``"evidently"``, ``"surprise"``, ``"topkeval"``) or a Conventions object.
    owner : str
        The function name used in error messages.
    **settings
        Any of ``ties, empty_queries, undefined, short_lists, threshold, score_threshold``; a
        value of None for the four string settings means "the preset's or the default".

    Examples
    --------
    >>> resolve("trec_eval").ties
    'item_desc'
    >>> resolve(ties="optimistic").short_lists
    'pad'
    """
    unknown = set(settings) - set(_FIELDS)
    if unknown:
        name = sorted(unknown)[0]
        raise ParameterError(f"{owner}() got an unknown convention {name!r}.{did_you_mean(name, _FIELDS)}")
    if conventions is None:
        base = Conventions()
    elif isinstance(conventions, Conventions):
        base = conventions
    elif isinstance(conventions, str) and conventions in PRESETS:
        base = Conventions(**PRESETS[conventions])
    else:
        raise ParameterError(
            f"The 'conventions' parameter of {owner} must be one of {', '.join(map(repr, PRESETS))} "
            f"or a Conventions object. Got {conventions!r} instead."
            + (did_you_mean(conventions, PRESETS) if isinstance(conventions, str) else "")
        )
    # UNSET (and None for the four choice settings) means "not given"; for the two thresholds
    # None is a real value (no threshold), so it overrides a preset.
    given = {k: v for k, v in settings.items()
             if v is not UNSET and (v is not None or k in ("threshold", "score_threshold"))}
    merged = replace(base, **given) if given else base
    return Conventions(
        ties=_choice(merged.ties, TIES, "ties", owner),
        empty_queries=_choice(merged.empty_queries, EMPTY_QUERIES, "empty_queries", owner),
        undefined=_undefined(merged.undefined, owner),
        short_lists=_choice(merged.short_lists, SHORT_LISTS, "short_lists", owner),
        threshold=_optional_number(merged.threshold, "threshold", owner),
        score_threshold=_optional_number(merged.score_threshold, "score_threshold", owner),
    )
