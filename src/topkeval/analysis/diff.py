"""Per query, what changed from one model to another: the deltas, and the relevant items gained and lost.

The deltas come from the per-query values; the items from the backend that computed the results,
reading the rows again (:meth:`~topkeval.backends.cpu.CpuBackend.items_changed` on logs in memory or
files, one more Spark job on a Spark DataFrame): a relevant item is gained when its chance of being in
the top k rose, lost when it fell (under a deterministic tie rule the chance is 0 or 1).
"""

from __future__ import annotations

import pandas as pd

from ..engine.rules import ReadsItemsChanged
from ..engine.terms import check_outcomes
from ..errors import ParameterError, did_you_mean


def check_models(ev, **models) -> None:
    """Each named model is one of the results' (the message suggests the closest)."""
    for name, value in models.items():
        if value is not None and value not in ev.models:
            raise ParameterError(f"{name} {value!r} is not a model of these results."
                                 f"{did_you_mean(str(value), ev.models)} Models: {', '.join(map(repr, ev.models))}.")


def diff(ev, baseline: str, model: str, metric: str, items: bool = True) -> pd.DataFrame:
    """See :meth:`topkeval.Results.diff`."""
    check_outcomes(ev.info, "diff()", "Compare the estimates with compare() (paired by query: its permutation, t and "
                                      "bootstrap tests of the mean difference) and summary_ci().")
    check_models(ev, baseline=baseline, model=model)
    metric = ev.label(metric)
    ev.require_rows("diff")
    pq = ev.per_query
    qn = ev.query_name
    a = pq[pq["model"] == baseline].set_index(qn)[metric]
    b = pq[pq["model"] == model].set_index(qn)[metric]
    queries = a.index.intersection(b.index, sort=False)
    out = pd.DataFrame({qn: queries, "baseline": a.loc[queries].to_numpy(), "model": b.loc[queries].to_numpy()})
    out["delta"] = out["model"] - out["baseline"]
    backend = ev.backend
    found = backend.items_changed(ev, baseline, model, ev.metric(metric)) \
        if items and isinstance(backend, ReadsItemsChanged) else None
    if found is not None:
        gained, lost = found
        out["gained"] = [gained.get(q, []) for q in out[qn]]
        out["lost"] = [lost.get(q, []) for q in out[qn]]
    return out.sort_values("delta", kind="stable").reset_index(drop=True)
