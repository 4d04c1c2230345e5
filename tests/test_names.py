"""Metric names: suggestions for unknown names keep the user's cutoff and parameters; the name the
user typed is the column label, and every lookup by metric name accepts it and the canonical one."""

from __future__ import annotations

import re

import pytest

import topkeval as tk


def _suggestions(text: str) -> list[str]:
    with pytest.raises(tk.UnknownMetricError) as info:
        tk.parse_metric(text)
    found = re.search(r"(?:Did you mean|as in) (.*?)[?.]?$", str(info.value).split(" Known metrics")[0])
    assert found, str(info.value)
    return [s.strip("'") for s in found.group(1).split(" or ")]


@pytest.mark.parametrize("text,first", [
    ("recal@2", "recall@2"), ("Recal@2", "recall@2"), ("precison@5", "precision@5"), ("ndgc@10", "ndcg@10"),
    ("ndgc(gain=exp)@3", "ndcg(gain=exp)@3"), ("f_beta(beta=2)@3", "fbeta(beta=2)@3"), ("hit_rat@3", "hit_rate@3"),
    ("precison @ 5", "precision@5"), ("reca;l@2", "recall@2"), ("mapp", "map"), ("rbp_resi", "rbp_resid"),
    ("ndcgg(gains={0:1,1:4})@5", "ndcg(gains={0:1,1:4})@5"),
    # a known family written wrongly: the right form, with the user's cutoff when it is a valid one
    ("fbeta@5", "fbeta(beta=0.5)@5"), ("P@", "precision@10"), ("recall@0", "recall@10"),
    ("fbeta(beta=0.5)@1O", "fbeta(beta=0.5)@10"), ("recal@0", "recall@10"),
])
def test_suggestions_keep_the_cutoff_and_the_parameters(text, first):
    """The suggestion is made on the family name, and keeps what follows it: 'recal@2' suggests
    'recall@2', not 'recall@10'. Every suggestion parses."""
    suggestions = _suggestions(text)
    assert suggestions[0] == first, suggestions
    for suggestion in suggestions:
        tk.parse_metric(suggestion)
