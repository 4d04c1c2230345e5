"""The conventions of DESIGN.md: every choice that changes a number, named and validated.

=======================  ============================================================  ==========================
setting                  values (default first)                                        decides
=======================  ============================================================  ==========================
``ties``                 expected, optimistic, pessimistic, first, item_desc,          order among equal scores
                         item_asc, ranx
``empty_queries``        skip, keep, error                                             queries with R = 0
``undefined``            0.0, 1.0, nan                                                 value of x / 0
``short_lists``          pad, shrink, error                                            k larger than the list
``threshold``            None (grade > 0) or a number (grade >= threshold)             what is relevant
``score_threshold``      None or a number: candidates scoring below it are removed     Surprise's recipe
``discount``             log2, lenskit                                                 the DCG discount
``item_order``           typed, text                                                   item ids under item_desc/asc
``score_precision``      exact, float32                                                when two scores tie
``nonpositive_scores``   count, miss                                                   torchmetrics' hits
``negative_grades``      zero, gain                                                    (n)DCG of negative grades
=======================  ============================================================  ==========================

:data:`SETTINGS` lists them with their help; the CLI's flags, the keyword validation and
``topkeval conventions`` are derived from it. A preset (``conventions="trec_eval"``) fills every
setting the way another tool does; an explicit keyword given with a preset overrides that one
setting.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Literal, TypedDict, get_args

import numpy as np

from .errors import ParameterError, bad_parameter, check_choice, did_you_mean

Ties = Literal["expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc", "ranx"]
EmptyQueries = Literal["skip", "keep", "error"]
ShortLists = Literal["pad", "shrink", "error"]
Discount = Literal["log2", "lenskit"]
ItemOrder = Literal["typed", "text"]
ScorePrecision = Literal["exact", "float32"]
NonpositiveScores = Literal["count", "miss"]
NegativeGrades = Literal["zero", "gain"]

TIES: tuple[str, ...] = get_args(Ties)
EMPTY_QUERIES: tuple[str, ...] = get_args(EmptyQueries)
SHORT_LISTS: tuple[str, ...] = get_args(ShortLists)
DISCOUNTS: tuple[str, ...] = get_args(Discount)
ITEM_ORDERS: tuple[str, ...] = get_args(ItemOrder)
SCORE_PRECISIONS: tuple[str, ...] = get_args(ScorePrecision)
NONPOSITIVE_SCORES: tuple[str, ...] = get_args(NonpositiveScores)
NEGATIVE_GRADES: tuple[str, ...] = get_args(NegativeGrades)
UNDEFINED_VALUES = ("0", "1", "nan")


@dataclass(frozen=True)
class Setting:
    """One convention: its name, its values (None for a number), its default and what it decides.

    The CLI's flags and their help, the keyword validation and the docs' table come from
    :data:`SETTINGS`.
    """

    name: str
    choices: tuple | None
    default: object
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("ties", TIES, "expected", "order among equal scores"),
    Setting("empty_queries", EMPTY_QUERIES, "skip", "queries without a relevant item"),
    Setting("undefined", UNDEFINED_VALUES, 0.0, "value of a metric whose denominator is 0"),
    Setting("short_lists", SHORT_LISTS, "pad", "k larger than a query's list"),
    Setting("threshold", None, None, "a grade >= this is relevant (none: grade > 0)"),
    Setting("score_threshold", None, None, "candidates scoring below this are removed before ranking"),
    Setting("discount", DISCOUNTS, "log2", "DCG discount: 1/log2(rank+1), or LensKit's 1/log2(max(rank,2))"),
    Setting("item_order", ITEM_ORDERS, "typed", "order of item ids for item_desc/item_asc: as typed, or as text "
                                                "(strcmp, trec_eval)"),
    Setting("score_precision", SCORE_PRECISIONS, "exact", "compare scores as given, or as float32 (pytrec_eval, "
                                                           "torchmetrics)"),
    Setting("nonpositive_scores", NONPOSITIVE_SCORES, "count", "miss: a relevant candidate scoring <= 0 is never "
                                                              "found by precision, recall, F, rr, ap (torchmetrics)"),
    Setting("negative_grades", NEGATIVE_GRADES, "zero", "(n)DCG: a negative grade gains 0 and the ideal ranks positive "
                                                      "gains (trec_eval), or it gains its value and the ideal ranks "
                                                      "every judged item (torchmetrics)"),
)
_FIELDS = tuple(s.name for s in SETTINGS)


class ConventionSettings(TypedDict, total=False):
    """The convention keywords every front door accepts (see :class:`Conventions`)."""

    ties: Ties
    empty_queries: EmptyQueries
    undefined: float | str
    short_lists: ShortLists
    threshold: float | None
    score_threshold: float | None
    discount: Discount
    item_order: ItemOrder
    score_precision: ScorePrecision
    nonpositive_scores: NonpositiveScores
    negative_grades: NegativeGrades


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
        ``"item_desc"`` / ``"item_asc"`` order by item id (trec_eval uses ``item_desc``);
        ``"ranx"`` is ranx's order: numba's ``np.argsort`` (its quicksort) of the negated scores
        of a query's rows in row order, which keeps the row order among ties up to 15 candidates
        and mixes it beyond (:func:`topkeval.kernels.sort.quicksort_argsort`).
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
    discount : str
        The DCG discount of rank p: ``"log2"``, 1 / log2(p + 1) (trec_eval, ranx, scikit-learn);
        ``"lenskit"``, 1 / log2(max(p, 2)) (LensKit: ranks 1 and 2 both count fully).
    item_order : str
        How ``item_desc`` / ``item_asc`` order item ids: ``"typed"`` (numbers numerically, strings
        as strings) or ``"text"`` (every id as its text, compared as C's strcmp: trec_eval, for
        which "9" > "100" > "10").
    score_precision : str
        ``"exact"`` compares scores as given; ``"float32"`` rounds them to C floats first, so two
        scores equal in float32 tie (pytrec_eval and trec_eval 9 store scores as floats,
        torchmetrics casts predictions to float32).
    nonpositive_scores : str
        ``"count"``: a relevant candidate in the top k is found whatever its score. ``"miss"``
        (torchmetrics): one scoring 0 or less keeps its rank but is not counted as found by the
        metrics that count what they find (precision, recall, recall_capped, F, tp, fn, rr, ap,
        ap_capped); R still counts it, and it is no false positive either (fp, tn, specificity
        and fallout count non-relevant candidates). hit_rate, r_precision and (n)DCG are
        unaffected, as in torchmetrics.
    negative_grades : str
        (n)DCG only. ``"zero"``: a negative grade gains nothing (unless a gain map lists it), and
        the ideal DCG ranks the positive gains of the judged items (trec_eval, for which a
        negative grade means "in the pool, not judged"; ranx drops them). ``"gain"``
        (torchmetrics, whose targets may be negative): a negative grade gains its own value (the
        grade; ``2**grade - 1`` under ``gain=exp``), and the ideal DCG ranks every judged item's
        gain, so that a list with fewer than k items of positive gain fills the ideal top k with
        zero and then negative gains.
    """

    ties: Ties = "expected"
    empty_queries: EmptyQueries = "skip"
    undefined: float = 0.0
    short_lists: ShortLists = "pad"
    threshold: float | None = None
    score_threshold: float | None = None
    discount: Discount = "log2"
    item_order: ItemOrder = "typed"
    score_precision: ScorePrecision = "exact"
    nonpositive_scores: NonpositiveScores = "count"
    negative_grades: NegativeGrades = "zero"

    def __post_init__(self):
        # a Conventions object is valid whoever builds it: each setting checked, numbers made floats
        for name, value in _validated(asdict(self), "Conventions").items():
            object.__setattr__(self, name, value)

    def as_dict(self) -> dict:
        """The settings as a plain dict (``undefined`` nan written as the string "nan")."""
        d = asdict(self)
        if math.isnan(d["undefined"]):
            d["undefined"] = "nan"
        return d

    def is_relevant(self, grades: np.ndarray) -> np.ndarray:
        """Boolean relevance of grades: ``grade > 0``, or ``grade >= threshold``.

        >>> Conventions(threshold=2).is_relevant(np.array([0, 1, 2, 3])).tolist()
        [False, False, True, True]
        """
        return grades > 0 if self.threshold is None else grades >= self.threshold


#: Settings that reproduce other tools (see docs/conventions.md for the evidence).
PRESETS: dict[str, dict] = {
    "topkeval": {},
    # trec_eval 10 (the reference release, and the one whose test outputs tests/test_trec.py
    # matches): scores as doubles, ties broken by document id descending as text (strcmp),
    # every query with judgments averaged (an empty one scores 0), P_k divides by k, relevant means
    # grade >= 1.
    "trec_eval": dict(ties="item_desc", empty_queries="keep", undefined=0.0, short_lists="pad",
                      threshold=1.0, item_order="text"),
    # pytrec_eval (and trec_eval 9.0.8 and earlier, which it embeds): the same, but scores are
    # stored as C floats, so two scores equal in float32 tie and the document id decides.
    "pytrec_eval": dict(ties="item_desc", empty_queries="keep", undefined=0.0, short_lists="pad",
                        threshold=1.0, item_order="text", score_precision="float32"),
    # ranx (its Qrels and Run objects): a query's documents ordered by numba's np.argsort (quicksort) of
    # the negated scores in the run's row order (ties="ranx"), every judged query averaged (an empty one
    # scores 0), precision divides by k, relevant = grade >= 1.
    "ranx": dict(ties="ranx", empty_queries="keep", undefined=0.0, short_lists="pad", threshold=1.0),
    # scikit-learn ndcg_score / dcg_score: ties averaged (ignore_ties=False: the exact expectation),
    # a query with no relevant item scores 0 and is averaged in; dcg_score takes a negative y_true as
    # a negative gain (ndcg_score refuses negative y_true).
    "sklearn": dict(ties="expected", empty_queries="keep", undefined=0.0, short_lists="pad", negative_grades="gain"),
    # torchmetrics retrieval_* (1.8 and later): predictions cast to float32,
    # empty_target_action="neg" (0, averaged in), top_k without adaptive_k divides by k; its nDCG
    # averages ties like scikit-learn and takes a negative target as a negative gain, its ideal DCG
    # ranking every target (negative_grades="gain"); precision, recall, rr and AP never count a
    # relevant candidate whose score is <= 0 (torch.where(preds > 0, target, 0)). Its other metrics take torch.topk's
    # unspecified order among ties, and its AP divides by the relevant items found, not R: those
    # are not reproduced (docs/conventions.md).
    "torchmetrics": dict(ties="expected", empty_queries="keep", undefined=0.0, short_lists="pad",
                         nonpositive_scores="miss", score_precision="float32", negative_grades="gain"),
    # LensKit (Precision, Recall, NDCG): the recommendation list's own order, precision over the
    # list's length when it is shorter than k, nan for an empty list; every test user has a test
    # item; DCG discounts rank p by log2(max(p, 2)). Its Recall@k is topkeval's recall_capped@k.
    "lenskit": dict(ties="first", empty_queries="skip", undefined="nan", short_lists="shrink", discount="lenskit"),
    # Evidently (PrecisionTopKMetric, RecallTopKMetric): users without a relevant item dropped,
    # precision over min(k, list length). Its ranks come from pandas' average rank cut to an
    # integer, which can count more than k tied items: that is not reproduced; with distinct
    # scores the numbers agree.
    "evidently": dict(ties="first", empty_queries="skip", undefined=0.0, short_lists="shrink"),
    # Surprise FAQ's precision_recall_at_k: Python's stable sort on the estimate, ratings >= 3.5
    # relevant, only estimates >= 3.5 recommended, precision over the recommended items,
    # 0 for x/0, every user averaged.
    "surprise": dict(ties="first", empty_queries="keep", undefined=0.0, short_lists="shrink",
                     threshold=3.5, score_threshold=3.5),
}


class _Unset:
    """Marks a convention keyword that was not given (so a preset's value stands)."""

    def __repr__(self) -> str:
        return "<default>"


UNSET = _Unset()


def _undefined(value, owner):
    if isinstance(value, str) and value.lower() == "nan":
        return math.nan
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if math.isnan(v) or v in (0.0, 1.0):
            return v
    raise bad_parameter("undefined", owner, "0.0, 1.0 or nan", value)


def _optional_number(value, param, owner):
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise bad_parameter(param, owner, "None or a finite number", value)


def resolve(conventions: str | Conventions | None = None, owner: str = "evaluate", *, also: tuple[str, ...] = (),
            **settings) -> Conventions:
    """Build validated :class:`Conventions` from a preset name and keyword overrides.

    Parameters
    ----------
    conventions : str, Conventions or None
        A preset name (``"trec_eval"``, ``"ranx"``, ``"sklearn"``, ``"torchmetrics"``,
        ``"lenskit"``, ``"evidently"``, ``"surprise"``, ``"topkeval"``) or a Conventions object.
    owner : str
        The function name used in error messages.
    also : tuple of str
        The caller's other keywords, suggested too when a keyword is misspelt.
    **settings
        Any field of :class:`Conventions`; ``UNSET`` (and None for the settings that are not
        numbers) means "the preset's or the default".

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
        raise ParameterError(f"{owner}() got an unexpected keyword {name!r}.{did_you_mean(name, _FIELDS + also)} "
                             f"Conventions: {', '.join(_FIELDS)}.")
    if conventions is None:
        base = Conventions()
    elif isinstance(conventions, Conventions):
        base = conventions
    elif isinstance(conventions, str) and conventions in PRESETS:
        base = Conventions(**PRESETS[conventions])
    else:
        raise bad_parameter("conventions", owner, f"one of {', '.join(map(repr, PRESETS))} or a Conventions object",
                            conventions, did_you_mean(conventions, PRESETS) if isinstance(conventions, str) else "")
    # UNSET (and None for the choice settings) means "not given"; for the two thresholds None is
    # a real value (no threshold), so it overrides a preset.
    numeric = {s.name for s in SETTINGS if s.choices is None}
    given = {k: v for k, v in settings.items() if v is not UNSET and (v is not None or k in numeric)}
    if not given:
        return base
    return Conventions(**_validated({**asdict(base), **given}, owner))


def _validated(values: dict, owner: str) -> dict:
    """Every setting of ``values`` checked (in the words of ``owner``) and normalised."""
    out = {}
    for s in SETTINGS:
        value = values[s.name]
        if s.name == "undefined":
            out[s.name] = _undefined(value, owner)
        elif s.choices is None:
            out[s.name] = _optional_number(value, s.name, owner)
        else:
            out[s.name] = check_choice(value, s.choices, s.name, owner)
    return out
