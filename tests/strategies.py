"""Hypothesis strategies: small random logs with heavy ties, short lists and empty queries."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from topkeval.conventions import TIES
from topkeval.metrics import FAMILIES
from topkeval.metrics.registry import DEFINED

SCORES = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 1.5, 2.0, -1.0])  # 1 + 1e-9 == 1 in float32
GRADES = st.sampled_from([0, 0, 1, 2, 3])
#: The built-in families, from the registry: a family registered there is drawn here at once (and
#: tests/reference.py must compute it: test_reference.py checks that it does).
#: (Beyond-accuracy families read each top k's items again: tests/test_beyond.py draws them; the ratios
#: pooled over a click log's queries are estimates from clicks only: tests/test_unbiased.py has them.)
BUILT_IN = {name: f for name, f in FAMILIES.items() if name not in DEFINED and not f.beyond and f.ips != "pooled"}
FAMILIES_K = [name for name, f in BUILT_IN.items() if f.cutoff == "required"]
#: Families without a required cutoff, R-precision apart (drawn on its own); those of OPTIONAL_K
#: are drawn with a cutoff or without one.
UNCUT = [name for name, f in BUILT_IN.items() if f.cutoff != "required" and name != "r_precision"]
OPTIONAL_K = {name for name, f in BUILT_IN.items() if f.cutoff == "optional"}
#: Families computed under deterministic tie rules only (refused under ties="expected").
DETERMINISTIC_ONLY = {name for name, f in BUILT_IN.items() if f.ties is not None}
#: the gains drawn for the gained families (None: linear): trec_eval's
TREC_GAINS = [None, "exp", ((1, 3), (2, 7)), ((0, 1), (1, 4)), ((-1, 2), (0, -1), (2, 5))]
#: ndcg's and dcg's gains: trec_eval's, and ir_measures' binary
GAINS = TREC_GAINS + ["binary"]
#: utility's coefficients a, b, c, d and docs (None: trec_eval's 1, -1, 0, 0)
UTILITIES = [None, (2.0, -1.0, 0.0, 0.0, 0.0), (0.5, -0.25, -1.0, 0.5, 40.0)]
#: 11pt_avg's recall levels (None: the eleven)
LEVELS = [None, (0.25, 0.5, 0.75), (0.0, 1.0), (0.3,)]
#: the families whose parameter is a gain
GAINED = ("ndcg", "dcg", "g", "rndcg", "ndcg_rel", "ideal_dcg", "ndcg_p")


@st.composite
def logs(draw, max_queries=5, max_len=6, models=("a", "b")):
    """A shuffled list of rows: query, item, grade, and one score per model."""
    rows = []
    n_q = draw(st.integers(1, max_queries))
    for q in range(n_q):
        n = draw(st.integers(1, max_len))
        items = draw(st.permutations(list(range(14))))[:n]  # 9 > 13 as text, 9 < 13 as numbers
        for j in range(n):
            row = {"query": f"q{q}", "item": items[j], "grade": draw(GRADES)}
            for m in models:
                row[m] = draw(SCORES)
            rows.append(row)
    order = draw(st.permutations(list(range(len(rows)))))
    return [rows[i] for i in order]


@st.composite
def conventions(draw):
    return {
        "ties": draw(st.sampled_from(TIES)),
        "empty_queries": draw(st.sampled_from(["skip", "keep"])),
        "undefined": draw(st.sampled_from([0.0, 1.0, math.nan])),
        "short_lists": draw(st.sampled_from(["pad", "shrink"])),
        "threshold": draw(st.sampled_from([None, 1, 2, 0.5])),
        "score_threshold": draw(st.sampled_from([None, None, 0.0, 1.0])),
        "discount": draw(st.sampled_from(["log2", "lenskit"])),
        "item_order": draw(st.sampled_from(["typed", "text"])),
        "score_precision": draw(st.sampled_from(["exact", "float32"])),
        "nonpositive_scores": draw(st.sampled_from(["count", "count", "miss"])),
        "negative_grades": draw(st.sampled_from(["zero", "gain"])),
    }


#: the families of tests/reference.py's ``_cwl`` (cwl_eval's C/W/L measures) and the values drawn for
#: their parameters (besides min_rel, max_rel and the column)
CWL = {"insq": {"T": [1.0, 2.0, 0.5]}, "sdcg": {}, "bpm": {"T": [1.0, 2.0, 0.5]}, "inst": {"T": [1.0, 2.0, 0.5]},
       "nerr8": {}, "nerr9": {}, "nerr10": {"p": [0.9, 0.5]}, "nerr11": {"T": [1.0, 2.0, 0.5]},
       "tbg": {"H": [224.0, 2.0, 0.7]}, "u_measure": {"L": [1000.0, 3.0, 1.5]}, "npv": {"rate": [0.1, 1.0]},
       "bpm_dynamic": {"T": [1.0, 0.5], "hb": [1.0, -0.5], "gain_med": [0.5, 0.2]},
       "ift_goal": {"T": [1.0, 2.0], "b1": [0.9, 2.0], "R1": [10.0, 0.5]},
       "ift_rate": {"A": [0.2, 0.5], "b2": [0.9, 2.0], "R2": [10.0, 1.0]},
       "ift": {"T": [1.0, 2.0], "b1": [0.9], "R1": [10.0, 0.5], "A": [0.2, 0.5], "b2": [0.9], "R2": [10.0]},
       "trap": {}}


def sequence_params(draw, fam):
    """``(text, params)`` of a family with parameters drawn: the text as the canonical name writes it
    (defaults left out, so that no metric is drawn under two names), the params for tests/reference.py."""
    if fam in CWL:
        low, high = draw(st.sampled_from([(0, 1), (0, 3), (1, 3), (-1, 2)]))
        params = {"min_rel": low, "max_rel": high}
        for name, values in CWL[fam].items():
            params[name] = draw(st.sampled_from(values))
        params["value"] = draw(st.sampled_from(["eu", "eu", "etu", "ec", "etc", "ed"]))
        texts = []
        for p in FAMILIES[fam].params:  # the registry's order; a default is left out of the canonical name
            if p.name in params and (p.required or params[p.name] != p.default):
                value = params[p.name]
                texts.append(f"{p.name}={value:g}" if not isinstance(value, str) else f"{p.name}={value}")
        return ",".join(texts), params
    if fam == "compat":
        params = {"p": draw(st.sampled_from([0.95, 0.5])), "normalize": draw(st.booleans())}
        text = ",".join(([f"p={params['p']:g}"] if params["p"] != 0.95 else [])
                        + ([] if params["normalize"] else ["normalize=false"]))
        return text, params
    return "", None


@st.composite
def metric_specs(draw):
    """(name, family, k, beta) tuples, with the canonical name the engine must print."""
    out = [("r_precision", "r_precision", None, None)] if draw(st.booleans()) else []
    for fam in draw(st.lists(st.sampled_from(UNCUT), max_size=3, unique=True)):
        k = draw(st.sampled_from([None, 1, 2, 3, 5, 9])) if fam in OPTIONAL_K else None
        gain = draw(st.sampled_from(GAINS if fam in ("ndcg", "dcg") else TREC_GAINS)) if fam in GAINED else None
        if fam == "rbp":
            gain = draw(st.sampled_from([None, "linear", "exp", ((1, 3), (2, 7))]))  # binary by default
        beta = draw(st.sampled_from([None, 0.5, 2.0])) if fam == "set_f" else None
        if fam in ("rbp", "rbp_residual"):
            beta = draw(st.sampled_from([0.5, 0.8, 0.95]))  # p
        if fam in ("rbp_resid", "rbp_trec"):
            beta = draw(st.sampled_from([0.5, 0.9, 0.95]))  # p, 0.9 by default
        if fam == "iprec":
            beta = draw(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 1.0]))  # the recall level
        if fam == "err":
            beta = draw(st.sampled_from([3.0, 4.0, 6.5]))  # the largest grade
        if fam == "utility":
            beta = draw(st.sampled_from(UTILITIES))
        if fam == "iprec_avg":
            beta = draw(st.sampled_from(LEVELS))
        if fam == "r_precision_mult":
            beta = draw(st.sampled_from([0.05, 0.2, 0.35, 1.0, 1.5, 2.0]))  # the multiplier of R
        params = []
        if gain in ("exp", "binary", "linear"):
            params.append(f"gain={gain}")
        elif gain is not None:
            params.append("gain={" + ",".join(f"{g}:{v}" for g, v in gain) + "}")
        if fam in CWL or fam == "compat":
            text, beta = sequence_params(draw, fam)
            params += [text] if text else []
        if fam == "utility" and beta is not None:
            # the canonical name: the coefficients that differ from their defaults
            params.append(",".join(f"{p}={v:g}" for p, v, default in zip(("a", "b", "c", "d", "docs"), beta,
                                                                          (1, -1, 0, 0, 0)) if v != default))
        elif fam == "iprec_avg" and beta is not None:
            params.append("levels={" + ",".join(f"{x:g}" for x in beta) + "}")
        elif fam == "r_precision_mult":
            params.append(f"mult={beta:g}")
        elif fam == "iprec":
            params.append(f"recall={beta:g}")
        elif fam == "err":
            params += [f"max_grade={beta:g}"] if beta != 4.0 else []  # 4 is the default
        elif fam in ("rbp_resid", "rbp_trec"):
            params += [f"p={beta:g}"] if beta != 0.9 else []  # 0.9 is the default
        elif fam == "rbp":  # p first, as the canonical name writes it
            params.insert(0, f"p={beta:g}")
        elif beta is not None and not isinstance(beta, dict):
            params.append(f"p={beta:g}" if fam == "rbp_residual" else f"beta={beta:g}")
        name = fam + (f"({','.join(params)})" if params else "") + (f"@{k}" if k else "")
        out.append((name, fam, k, beta, gain))
    for i in range(draw(st.integers(1, 4))):
        # the first exact under every tie rule: a draw is never left empty under ties="expected"
        fam = draw(st.sampled_from([f for f in FAMILIES_K if f not in DETERMINISTIC_ONLY] if i == 0 else FAMILIES_K))
        k = draw(st.integers(1, 8))
        beta = draw(st.sampled_from([0.5, 2.0])) if fam == "fbeta" else None
        name = f"fbeta(beta={beta:g})@{k}" if fam == "fbeta" else f"{fam}@{k}"
        if fam == "rbp_weighted":  # a weight per rank up to 8 (the largest cutoff drawn), some 0
            beta = tuple(draw(st.sampled_from([1.0, 0.5, 0.25, 0.0, 2.0])) for _ in range(8))
            beta = beta if any(beta) else (1.0,) + beta[1:]
            name = "rbp_weighted(weights={" + ",".join(f"{w:g}" for w in beta) + f"}})@{k}"
        if fam in CWL:
            text, beta = sequence_params(draw, fam)
            name = f"{fam}({text})@{k}"
        if name not in [o[0] for o in out]:
            out.append((name, fam, k, beta))
    return out
