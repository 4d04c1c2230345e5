"""A click log's rows on the CPU backend: the per-row columns that go with the grouped log (the
logging ranker's positions, the clicks' inverse propensity weights) and what ``info`` says about
them (``info["ips"]``: the weights; ``info["clicks"]``: the share of each model's top k that the
logging ranker never showed).

The weights themselves and the checks of the propensities are :mod:`topkeval.engine.unbiased`'s;
here they meet the rows of a table in memory (:mod:`topkeval.backends.local`). The never-shown share
(:func:`never_shown_share`) is also what :meth:`~topkeval.Results.bounds` reports beside its bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..engine import terms, unbiased
from ..engine.aggregate import weighted_mean
from ..engine.rules import comparable_scores, threshold
from ..metrics import FAMILIES
from .cpu import CPU

if TYPE_CHECKING:
    from ..request import Request

#: Logs up to this many rows get the exact never-shown share of info["clicks"]; larger ones that of a
#: sample of about NEVER_SHOWN_SAMPLE queries (every stride-th), as info["clicks"] says.
NEVER_SHOWN_EXACT_ROWS = 2_000_000
NEVER_SHOWN_SAMPLE = 100_000


def click_rows(r: Request, cols) -> tuple[dict, dict | None]:
    """The per-row columns of a click log (``position``, and with ``propensity`` the clicks'
    inverse propensity weights ``ips_weight``) and what ``info["ips"]`` says about them."""
    if r.position is None and r.propensity is None:
        return {}, None
    from ..inputs.grouped import numeric_column

    clicked = r.plan.conv.is_relevant(numeric_column(cols[r.relevance], r.relevance, "grade"))
    if r.position is None:  # per-item propensities (popularity_propensity) need no position: a recommender's log
        pos = np.ones(len(clicked))
        rows = {}
    else:
        pos = unbiased.positions(cols[r.position], r.position)
        unbiased.check_shown(pos, clicked, r.position)
        rows = {"position": pos}
    if r.propensity is None:
        return rows, None
    at = np.flatnonzero(clicked)  # only a click's propensity is ever read
    if getattr(r.propensity, "statistics", None) is not None:  # an estimated curve: its reason where it has none
        unbiased.refuse_unplaced(r.propensity, pos[at])
    prop, unmatched = unbiased.propensity_rows(r.propensity, pos, cols, r.item, at)
    # every other shown candidate's propensity says how heavy-tailed the weights can be (unbiased.skewness)
    rest = np.flatnonzero(~clicked & ~np.isnan(pos))
    shown = np.concatenate([prop, unbiased.propensity_rows(r.propensity, pos, cols, r.item, rest, check=False)[0]])
    w, info = unbiased.weights(pos, clicked, prop, r.clip, r.position or "position", shown=shown)
    info["sparse_positions"] = unbiased.sparse_positions(r.propensity, pos[at]) if r.position is not None else {}
    never = np.flatnonzero(np.isnan(pos))
    examinable = False
    if len(never) and isinstance(r.propensity, str):  # a randomised logger's column gives them a chance of being shown
        p_never = unbiased.propensity_rows(r.propensity, pos, cols, r.item, never, check=False)[0]
        examinable = bool(((p_never > 0) & (p_never <= 1)).all())
    info["never_shown_examinable"] = examinable
    rows["ips_weight"] = w
    info["estimators"] = {label: FAMILIES[m.family].ips for label, m in zip(r.plan.labels, r.plan.metrics)}
    if unmatched is not None:
        info["clicks_on_unseen_items"] = unmatched
    return rows, info


def click_info(log, r: Request, ips_info: dict | None) -> dict:
    """``info["ips"]`` (the weights, and the queries the ratios average over) and ``info["clicks"]``
    (the position column, and per model the share of its top k, at the largest cutoff, that the
    logging ranker never showed); with propensities, the declaration that each query's value is its
    term of an estimate (:mod:`topkeval.engine.terms`); the warnings they call for are given here,
    once per call."""
    out: dict = {} if ips_info is None else {terms.KEY: "each query's inverse propensity weighted term of the "
                                                        "estimate (its weighted clicks), not that query's outcome"}
    if ips_info is not None:
        clicked = log.relevant(r.plan.conv)
        ips_info["queries_with_clicks"] = int((log.per_query_sum(clicked) > 0).sum())
        ips_info["queries"] = int(log.n_queries)  # for the skewness refusal's queries needed (unbiased.py)
        out["ips"] = ips_info
    k = None
    if r.position is not None:
        cutoffs = [m.k for m in r.plan.metrics if m.k is not None]
        k = max(cutoffs) if cutoffs else None
        # the item ids only where the tie rule reads them (text ids would be encoded for nothing)
        sample = log if r.plan.conv.ties in ("item_asc", "item_desc") else log.without_items()
        if k is not None and np.isnan(log.rows["position"]).any() and log.n_rows > NEVER_SHOWN_EXACT_ROWS:
            stride = -(-log.n_queries // NEVER_SHOWN_SAMPLE)  # a note, not a metric: every stride-th query
            sample = sample.keep_rows(np.repeat(np.arange(log.n_queries) % stride == 0, np.diff(log.offsets)))
        never = np.isnan(sample.rows["position"])
        out["clicks"] = {"position": r.position, "k": k,
                         "never_shown": {m: never_shown_share(sample, r.plan.conv, m, k, never) for m in log.scores}
                         if k is not None and never.any() else {},
                         "never_shown_queries": int((np.diff(sample.offsets) > 0).sum())}
    if ips_info is not None:  # what may make the estimates unreliable: said once per call, kept for the outputs
        from ..errors import warn

        ips_info["warnings"] = unbiased.warnings_of(ips_info, (out.get("clicks") or {}).get("never_shown"), k,
                                                    log.n_queries)
        for message in ips_info["warnings"].values():
            warn(message)
    return out


def never_shown_share(log, conv, model: str, k: int, never: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The mean share of the model's top min(k, n) filled by candidates the logging ranker never
    showed (``never``), over the queries with a candidate; weighted with ``weights``."""
    inside = CPU.expected_in_top(log, conv, model, k, never)
    q = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    scores = comparable_scores(log.scores[model], conv)
    n_kept = np.bincount(q, weights=(scores >= threshold(conv)).astype(np.float64), minlength=log.n_queries)
    den = np.minimum(float(k), n_kept)
    ok = den > 0
    if not ok.any():
        return float("nan")
    return weighted_mean(inside[ok] / den[ok], None if weights is None else weights[ok])


__all__ = ["NEVER_SHOWN_EXACT_ROWS", "NEVER_SHOWN_SAMPLE", "click_info", "click_rows", "never_shown_share"]
