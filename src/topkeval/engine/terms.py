"""Per-query values that are terms of an estimate, not each query's own outcome; estimates refused.

Most results hold in ``per_query`` what each query scored. Some hold each query's term of an estimate
over all of them: an off-policy estimate's rounds (:func:`topkeval.off_policy`: a round's inverse
propensity weighted clicks, linearised for the ratios; 0 in every round where the logger did not do
what the policy would), a click log's inverse propensity weighted metrics (``evaluate(...,
propensity=)``: each query's weighted clicks). Their mean is the estimate, so the analyses of means
hold on them: intervals (``summary_ci``), and compare's permutation (sign-flip), t and bootstrap
tests of the mean difference. What reads a query's value as that query's outcome does not: a
signed-rank test (Wilcoxon ranks the terms' sizes: under a true null the paired differences of
weighted terms are skewed, and it rejects the mean's null far more often than its level), the
counts of queries won, tied and lost, the per-query differences and the worst regressions.

One declaration says so: ``info["per_query_terms"]``, a sentence saying what the values are. Every
analysis and output that would read them as outcomes asks :func:`estimator_terms`. Likewise
``info["refused"]`` (``{model: {metric: reason}}``) names the estimates an evaluation refused (NaN, with
their reason), which a comparison reports as refused rather than as having no query.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import stattests
from ..errors import ParameterError

#: the key of ``info`` that declares per-query values to be terms of an estimate
KEY = "per_query_terms"

#: tests that rank the paired differences: they take each query's value as its outcome
RANK_TESTS = stattests.names("pair", ranks=True)


def estimator_terms(info: Mapping | None) -> str | None:
    """What the per-query values are when they are terms of an estimate (None when they are each
    query's own value).

    >>> estimator_terms({"per_query_terms": "each round's term of the off-policy estimate"})
    "each round's term of the off-policy estimate"
    >>> estimator_terms({}) is None
    True
    """
    text = (info or {}).get(KEY)
    return str(text) if text else None


def check_test(info: Mapping | None, test: str, owner: str) -> None:
    """Refuse a rank-based test on terms of an estimate (see the module docstring).

    >>> check_test({"per_query_terms": "each round's term of the estimate"}, "wilcoxon", "compare")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topkeval.errors.ParameterError: test='wilcoxon' ranks the paired per-query differences as outcomes, ...
    """
    terms = estimator_terms(info)
    if terms is not None and test in RANK_TESTS:
        raise ParameterError(f"test={test!r} ranks the paired per-query differences as outcomes, but these results' "
                             f"per-query values are {terms}: a signed-rank test of them does not test the estimates' "
                             f"difference (in simulation it rejected a true null far above its level). {owner} with "
                             f"{_mean_tests()}: each tests the mean difference of the terms, which is the estimates' "
                             "difference (validated by simulation: docs/how-to/off-policy.md).")


def _mean_tests() -> str:
    """The paired tests of the mean difference, as the message lists them: ``test='permutation' (the
    default), 't' or 'bootstrap'``."""
    tests = [f"{name!r}" + (" (the default)" if name == stattests.default("pair") else "")
             for name in stattests.PAIRED if name not in RANK_TESTS]
    return "test=" + ", ".join(tests[:-1]) + " or " + tests[-1]


def check_outcomes(info: Mapping | None, owner: str, instead: str) -> None:
    """Refuse an analysis that reads each query's value as its outcome on terms of an estimate."""
    terms = estimator_terms(info)
    if terms is not None:
        raise ParameterError(f"{owner} reads each query's value as that query's outcome, but these results' per-query "
                             f"values are {terms}: a query's term is no outcome of it (most are 0 whatever happened), "
                             f"so its differences would mislead. {instead}")


def refusal(info: Mapping | None, model: str, metric: str) -> str | None:
    """Why the estimate of ``metric`` for ``model`` was refused (None when it was not).

    >>> refusal({"refused": {"new": {"precision@5": "too few effective clicks"}}}, "new", "precision@5")
    'too few effective clicks'
    """
    reasons = (info or {}).get("refused") or {}
    why = (reasons.get(model) or {}).get(metric)
    return str(why) if why else None
