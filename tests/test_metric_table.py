"""Facts about a metric live in its registry entry, and what is derived from them stays true: the
docs' table of metrics (docs/guide/metrics.md) is generated from the registry (and current), and
each family's ``undefined`` (when a query gets the ``undefined`` value instead of a number) is what the
evaluation does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

import topkeval as tk
from topkeval.metrics import FAMILIES as ALL_FAMILIES
from topkeval.metrics.registry import DEFINED, example_name

#: the built-in families (a test that defines its own metric forgets it, but need not have yet)
FAMILIES = {name: family for name, family in ALL_FAMILIES.items() if name not in DEFINED}
#: those evaluated from the kernel's statistics (beyond-accuracy ones read the items again: tests/test_beyond.py;
#: the ratios pooled over a click log's queries are estimates from clicks only: tests/test_unbiased.py)
ACCURACY = {name: family for name, family in FAMILIES.items() if not family.beyond and family.ips != "pooled"}

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_table_of_metrics_is_the_registry_s():
    spec = importlib.util.spec_from_file_location("metrics_table", ROOT / "docs" / "metrics_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "docs" / "guide" / "metrics.md").read_text(encoding="utf-8")
    assert module.with_table(text) == text, ("docs/guide/metrics.md's table of metrics is stale: "
                                             "run python docs/metrics_table.py")
    for family in FAMILIES.values():
        assert example_name(family) in text


def _name(family) -> str:
    values = {"unit": "0.5", "positive": "0.5", "fraction": "0.5", "weights": "{1,0.5}", "real": "1"}
    params = "(" + ",".join(f"{p.name}={values.get(p.kind, '2')}" for p in family.params if p.required) + ")"
    params = "" if params == "()" else params
    return family.name + params + ("@2" if family.cutoff == "required" else "")


def _undefined_queries(frame: pd.DataFrame, metric: str) -> set:
    return set(frame.loc[frame[metric].isna(), "query"])  # undefined=nan: no defined value is NaN


# queries: 1 has no relevant item (R = 0), 2 only relevant ones (N = 0), 3 both
LOG = pd.DataFrame({"query": [1, 1, 1, 2, 2, 3, 3, 3, 3], "item": list("abcabcdef"),
                    "relevance": [0, 0, 0, 1, 2, 1, 0, 2, 0], "s": [0.9, 0.5, 0.1, 0.8, 0.2, 0.9, 0.7, 0.4, 0.1]})
#: what each ``undefined`` text means on LOG (lists padded: no list is empty)
ON_LOG = {"R = 0": {1}, "R = 0 (shrink: min(R, n) = 0)": {1}, "R = 0, or an empty list": {1}, "min(n, R) = 0": {1},
          "ideal DCG = 0": {1}, "N = 0": {2}, "no relevant or no non-relevant candidate retrieved": {1, 2},
          "never": set(), "shrink and n = 0": set(), "shrink, n = 0 and R = 0": set(), "n = 0": set(),
          "n = 0 and R = 0": set(), "no judged item has a positive gain": {1},
          "R = 0, or no judged item has a positive gain": {1}, "floor(mult R + 0.9) = 0 (shrink: or n = 0)": {1},
          "no relevant or no non-relevant candidate in the top k": {1, 2},
          "no relevant candidate in the top k": {1}, "R = 0, or no weight on the ranks of the list": {1}}


def test_each_family_is_undefined_where_its_registry_entry_says():
    unknown = {f.name: f.undefined for f in ACCURACY.values() if f.undefined not in ON_LOG}
    assert not unknown, f"add what these texts mean on LOG to ON_LOG: {unknown}"
    names = [_name(f) for f in ACCURACY.values()]
    res = tk.evaluate(LOG, names, score="s", item="item", ties="first", empty_queries="keep", undefined=float("nan"))
    for family, name in zip(ACCURACY.values(), names):
        assert _undefined_queries(res.per_query, name) == ON_LOG[family.undefined], (name, family.undefined)


@pytest.mark.parametrize("text,expected", [("shrink and n = 0", {4, 5}), ("shrink, n = 0 and R = 0", {5}),
                                           ("n = 0", {4, 5}), ("n = 0 and R = 0", {5})])
def test_empty_lists_are_undefined_where_the_registry_says(text, expected):
    """Judged queries a run lacks, scored as empty lists (n = 0): 4 has a relevant item, 5 none."""
    run = LOG[LOG["query"] == 3][["query", "item", "s"]]
    qrels = pd.DataFrame({"query": [3, 3, 3, 3, 4, 5], "item": list("cdefxy"), "relevance": [1, 0, 2, 0, 1, 0]})
    families = [f for f in ACCURACY.values() if f.undefined == text]
    assert families, f"no family is undefined when {text!r}"
    names = [_name(f) for f in families]
    res = tk.evaluate(run, names, score="s", item="item", qrels=qrels, missing_queries="zero", ties="first",
                      empty_queries="keep", undefined=float("nan"), short_lists="shrink")
    for name in names:
        assert _undefined_queries(res.per_query, name) == expected, name
