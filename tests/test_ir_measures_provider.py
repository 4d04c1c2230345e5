"""topkeval as an ir_measures provider (topkeval.integrations.ir_measures).

Oracles: ir_measures' own test cases (its tests/*.py, version 0.4.3, inputs and expected numbers
transcribed below, for every measure the provider supports); ir_measures' default pipeline (and,
where it cannot run here, the provider it would use) on random runs with ties, unjudged documents,
negative grades, queries without relevant documents, a judged query the run misses and a run query
without judgments; and trec_eval's own test files (when ../shared is present). Under
``ties="expected"``, the mean over every order of the tied documents, computed by pytrec_eval.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

pytestmark = pytest.mark.peers

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test extra (and the ir_measures extra)")
pytest.importorskip("pytrec_eval", reason="pytrec_eval (pytrec-eval-terrier) is a test extra")

from ir_measures import (  # noqa: E402
    AP,
    BPM,
    ERR,
    INSQ,
    INST,
    NERR8,
    NERR9,
    NERR10,
    NERR11,
    RBP,
    RR,
    SDCG,
    Accuracy,
    Bpref,
    Compat,
    IPrec,
    Judged,
    NumQ,
    NumRel,
    NumRet,
    P,
    R,
    Rprec,
    SetAP,
    SetF,
    SetP,
    SetR,
    SetRelP,
    Success,
    infAP,
    nDCG,
)

from topkeval.integrations.ir_measures import PROVIDERS, TopkevalProvider, provider  # noqa: E402

DATA = Path(__file__).parent / "data" / "ir_measures"


def _qrels(spec: str) -> list:
    """ir_measures' test judgments, written compactly: ``"0: D0 0, D1 1; 1: D0 1"`` is the TREC text
    ``0 0 D0 0 / 0 0 D1 1 / 1 0 D0 1`` its tests read with ``read_trec_qrels``."""
    lines = [f"{q.strip()} 0 {d} {g}" for q, docs in (part.split(":") for part in spec.split(";"))
             for d, g in (doc.split() for doc in docs.split(","))]
    return list(ir_measures.read_trec_qrels("\n".join(lines) + "\n"))


def _run(spec: str) -> list:
    """ir_measures' test runs, written compactly: ``"0: D0 .8, D2 .7"`` is ``0 0 D0 1 0.8 run / 0 0 D2 2 0.7 run``."""
    lines = [f"{q.strip()} 0 {d} {i} {s} run" for q, docs in (part.split(":") for part in spec.split(";"))
             for i, (d, s) in enumerate((doc.split() for doc in docs.split(",")), start=1)]
    return list(ir_measures.read_trec_run("\n".join(lines) + "\n"))


# the inputs of ir_measures' tests (tests/test_pytrec_eval.py, test_judged.py, test_gdeval.py, test_providers.py,
# test_aggregate.py, test_ranx.py), each named after the tests that read it
Q_NUMRET = "0: D0 0, D1 1, D2 1, D3 2, D4 0; 1: D0 1, D3 2, D5 2"  # NumRet, NumQ, judged, gdeval, providers, aggregate
Q_NUMREL = "0: D0 0, D1 1, D2 1, D3 2, D4 0; 1: D0 1, D3 2, D5 0"
Q_SET = "0: D0 0, D1 1, D2 2, D3 2, D4 0; 1: D0 1, D3 2, D5 0"  # Success, SetP, SetR, SetAP, SetF
Q_IPREC = "0: D0 1, D1 1, D2 2, D3 2, D4 0; 1: D0 1, D3 2, D5 0"
Q_NEGATIVE = "0: D0 1, D1 -1, D2 0, D3 2, D4 0; 1: D0 1, D3 2, D4 -1, D5 0"  # infAP, nDCG
Q_P = "0: D0 -1, D1 1, D3 2, D4 1; 1: D0 1, D3 0, D4 -1"
Q_JUDGED_ONLY = "0: D0 -1, D1 1, D3 2, D4 1"
Q_RANX = "0: D0 0, D1 1, D2 1, D3 2, D4 0"
R_NUMRET = "0: D0 .8, D2 .7, D1 .3, D3 .4, D4 .1; 1: D1 .8, D3 .7, D4 .3, D2 .4"
R_SET = "0: D0 .8, D2 .7, D1 .3, D3 .4, D4 .1; 1: D1 .8, D4 .7, D3 .3, D2 .4"
R_P = "0: D0 .8, D2 .7, D1 .3, D3 .4, D4 .1; 1: D1 .8, D0 .7, D3 .3, D2 .4"
R_JUDGED_ONLY = "0: D0 .8, D2 .7, D1 .3, D3 .4, D4 .1"
R_JUDGED_ONLY_REMOVED = "0: D1 .3, D3 .4, D4 .1"  # "D0 is removed because trec_eval considers negative labels as unjudged"
R_RANX = "0: D0 .8, D2 .7, D1 .3, D3 .4, D4 .1"
R_AGGREGATE = "0: D0 .8, D2 .7, D1 .3, D3 .4, D4 .1; 1: D1 .8, D3 .7, D4 .3, D2 .4, D0 .1"

#: assertEqual, places=4 (and delta=1e-4), gdeval.pl's values printed to 5 places (a half rounded away: 0.109375 -> 0.10938)
EXACT, PLACES4, GDEVAL = 1e-12, 0.5e-4, 0.5e-5 + 1e-12

#: (ir_measures test, judgments, run, measure, values of queries "0" and "1", aggregate, tolerance)
CASES = [
    ("test_pytrec_eval.test_NumRet", Q_NUMRET, R_NUMRET, NumRet, [5, 4], 9, EXACT),
    ("test_pytrec_eval.test_NumRet", Q_NUMRET, R_NUMRET, NumRet(rel=1), [3, 1], 4, EXACT),
    ("test_pytrec_eval.test_NumRet", Q_NUMRET, R_NUMRET, NumRet(rel=2), [1, 1], 2, EXACT),
    ("test_pytrec_eval.test_NumRet", Q_NUMRET, R_NUMRET, NumRet(rel=3), [0, 0], 0, EXACT),
    ("test_pytrec_eval.test_NumRel", Q_NUMREL, R_NUMRET, NumRel, [3, 2], 5, EXACT),
    ("test_pytrec_eval.test_Success", Q_SET, R_SET, Success @ 2, [1, 0], 0.5, EXACT),
    ("test_pytrec_eval.test_Success", Q_SET, R_SET, Success(rel=2) @ 2, [1, 0], 0.5, EXACT),
    ("test_pytrec_eval.test_Success", Q_SET, R_SET, Success(rel=3) @ 2, [0, 0], 0, EXACT),
    ("test_pytrec_eval.test_SetP", Q_SET, R_SET, SetP(rel=1), [0.6, 0.25], 0.425, EXACT),
    ("test_pytrec_eval.test_SetP", Q_SET, R_SET, SetRelP(rel=1), [1.0, 0.5], 0.75, EXACT),
    ("test_pytrec_eval.test_SetP", Q_SET, R_SET, SetP(rel=2), [0.4, 0.25], 0.325, EXACT),
    ("test_pytrec_eval.test_SetP", Q_SET, R_SET, SetRelP(rel=2), [1.0, 1.0], 1.0, EXACT),
    ("test_pytrec_eval.test_SetP", Q_SET, R_SET, SetP(rel=3), [0, 0], 0, EXACT),
    ("test_pytrec_eval.test_SetR", Q_SET, R_SET, SetR(rel=1), [1.0, 0.5], 0.75, EXACT),
    ("test_pytrec_eval.test_SetR", Q_SET, R_SET, SetR(rel=2), [1.0, 1.0], 1.0, EXACT),
    ("test_pytrec_eval.test_SetR", Q_SET, R_SET, SetR(rel=3), [0, 0], 0, EXACT),
    ("test_pytrec_eval.test_SetAP", Q_SET, R_SET, SetAP(rel=1), [0.6, 0.125], 0.3625, EXACT),
    ("test_pytrec_eval.test_SetAP", Q_SET, R_SET, SetAP(rel=2), [0.4, 0.25], 0.325, EXACT),
    ("test_pytrec_eval.test_SetAP", Q_SET, R_SET, SetAP(rel=3), [0, 0], 0, EXACT),
    ("test_pytrec_eval.test_SetF", Q_SET, R_SET, SetF(rel=1), [0.75, 0.33333], 0.5417, PLACES4),
    ("test_pytrec_eval.test_SetF", Q_SET, R_SET, SetF(rel=1, beta=0.5), [0.6923, 0.3], 0.49615, PLACES4),
    ("test_pytrec_eval.test_SetF", Q_SET, R_SET, SetF(rel=1, beta=2.0), [0.81818, 0.375], 0.59659, PLACES4),
    ("test_pytrec_eval.test_SetF", Q_SET, R_SET, SetF(rel=3), [0, 0], 0, EXACT),
    # test_pytrec_eval.test_IPrec: IPrec follows pytrec_eval, whose interpolated precision is trec_eval 9's, not
    # topkeval's (trec_eval 10's): not supported (test_iprec_is_left_to_pytrec_eval)
    ("test_pytrec_eval.test_infAP", Q_NEGATIVE, R_SET, AP, [0.8333, 0.125], 0.47916666666666663, PLACES4),
    ("test_pytrec_eval.test_infAP", Q_NEGATIVE, R_SET, infAP, [0.8333, 0.1875], 0.510416, PLACES4),
    ("test_pytrec_eval.test_infAP", Q_NEGATIVE, R_SET, AP(rel=2), [0.33333, 0.25], 0.2917, PLACES4),
    ("test_pytrec_eval.test_infAP", Q_NEGATIVE, R_SET, infAP(rel=2), [0.33333, 0.375], 0.3542, PLACES4),
    ("test_pytrec_eval.test_nDCG", Q_NEGATIVE, R_SET, nDCG, [0.76018, 0.32739], None, PLACES4),
    ("test_pytrec_eval.test_nDCG", Q_NEGATIVE, R_SET, nDCG @ 3, [0.76018, 0.0], None, PLACES4),
    ("test_pytrec_eval.test_nDCG", Q_NEGATIVE, R_SET, nDCG(gains={0: 1, 1: 4}), [0.97177, 0.14949], None, PLACES4),
    ("test_pytrec_eval.test_P", Q_P, R_P, P @ 4, [0.5, 0.25], None, PLACES4),
    ("test_pytrec_eval.test_P", Q_P, R_P, P(judged_only=True) @ 4, [0.75, 0.25], None, PLACES4),
    ("test_judged.test_judged", Q_NUMRET, R_NUMRET, Judged, [1.0, 1 / 4], None, 1e-4),
    ("test_judged.test_judged", Q_NUMRET, R_NUMRET, Judged(cutoff=1000), [1.0, 1 / 4], None, 1e-4),
    ("test_judged.test_judged", Q_NUMRET, R_NUMRET, Judged(cutoff=10), [1.0, 1 / 4], None, 1e-4),
    ("test_judged.test_judged", Q_NUMRET, R_NUMRET, Judged(cutoff=3), [1.0, 1 / 3], None, 1e-4),
    ("test_judged.test_judged", Q_NUMRET, R_NUMRET, Judged(cutoff=1), [1.0, 0.0], None, 1e-4),
    # test_gdeval.py passes nDCG@k to the gdeval provider, whose nDCG is exponential whatever dcg= says; the default
    # pipeline gives gdeval the measure that says so, nDCG(dcg='exp-log2')@k
    ("test_gdeval.test_nDCG", Q_NUMRET, R_NUMRET, nDCG(dcg="exp-log2") @ 20, [0.6201, 0.35099], 0.485545, GDEVAL),
    ("test_gdeval.test_nDCG", Q_NUMRET, R_NUMRET, nDCG(dcg="exp-log2") @ 2, [0.17377, 0.38685], 0.28031, GDEVAL),
    ("test_gdeval.test_ERR", Q_NUMRET, R_NUMRET, ERR @ 20, [0.10175, 0.09375], 0.09775, GDEVAL),
    ("test_gdeval.test_ERR", Q_NUMRET, R_NUMRET, ERR @ 2, [0.03125, 0.09375], 0.0625, GDEVAL),
    ("test_aggregate.test_P", Q_NUMRET, R_AGGREGATE, P @ 5, [0.6, 0.4], 0.5, EXACT),
]
#: tests/test_ranx.py (one query; the measures the provider follows ranx for, and the others, which agree without
#: ties). Its SetP(rel=2)@5 and SetR(rel=2)@5 are not valid measures (SetP and SetR take no cutoff) and are left out.
RANX_CASES = [
    (P @ 5, 0.6), (P(rel=2) @ 5, 0.2), (SetP, 0.6), (R @ 5, 1.0), (R(rel=2) @ 5, 1.0), (R @ 2, 0.3333333333333333),
    (R(rel=2) @ 2, 0.0), (SetR, 1.0), (RR, 0.5), (RR(rel=2), 0.3333333333333333), (RR @ 10, 0.5),
    (RR(rel=2) @ 10, 0.3333333333333333), (RR @ 2, 0.5), (RR(rel=2) @ 2, 0.0), (AP, 0.6388888888888888),
    (AP(rel=2), 0.3333333333333333), (AP @ 10, 0.6388888888888888), (AP(rel=2) @ 10, 0.3333333333333333),
    (AP @ 2, 0.16666666666666666), (AP(rel=2) @ 2, 0.0), (Success @ 10, 1.0), (Success(rel=2) @ 10, 1.0),
    (Success @ 2, 1.0), (Success(rel=2) @ 2, 0.0), (NumRet(rel=1), 3.0), (nDCG, 0.6584645692843067),
    (nDCG @ 5, 0.6584645692843067), (nDCG @ 2, 0.23981246656813146), (nDCG(dcg="exp-log2"), 0.6201040599710453),
    (nDCG(dcg="exp-log2") @ 5, 0.6201040599710453), (nDCG(dcg="exp-log2") @ 2, 0.17376534287144002),
    (Rprec, 0.6666666666666666), (Rprec(rel=2), 0.0),
]


@pytest.mark.parametrize("source,qrels,run,measure,values,aggregate,tol", CASES,
                         ids=[f"{c[0]}:{c[3]}" for c in CASES])
def test_ir_measures_own_test_cases(source, qrels, run, measure, values, aggregate, tol):
    q, r = _qrels(qrels), _run(run)
    assert provider.supports(measure)
    got = list(provider.iter_calc([measure], q, r))
    assert [m.query_id for m in got] == ["0", "1"] and all(m.measure == measure for m in got)
    assert [m.value for m in got] == pytest.approx(values, abs=tol)
    if aggregate is not None:
        assert provider.calc_aggregate([measure], q, r)[measure] == pytest.approx(aggregate, abs=tol)
    assert len(provider.calc([measure], q, r).per_query) == 2


def test_ir_measures_set_f_invocations_together():
    """test_pytrec_eval.test_SetF: four SetF in one call (pytrec_eval needs one invocation per beta)."""
    q, r = _qrels(Q_SET), _run(R_SET)
    measures = [SetF(rel=1), SetF(rel=1, beta=0.5), SetF(rel=1, beta=2.0), SetF(rel=3)]
    res = provider.calc_aggregate(measures, q, r)
    assert [res[m] for m in measures] == pytest.approx([0.5417, 0.49615, 0.59659, 0], abs=PLACES4)


def test_ir_measures_judged_only_test_case():
    """test_pytrec_eval.test_judged_only: measure(judged_only=True) on the run equals the measure on the
    run without its unjudged documents (D0, graded -1, counts as unjudged), and differs from it on the run."""
    q = _qrels(Q_JUDGED_ONLY)
    run, removed = _run(R_JUDGED_ONLY), _run(R_JUDGED_ONLY_REMOVED)
    for measure in (P @ 4, RR, Rprec, AP, AP @ 4, nDCG, nDCG @ 4, R @ 2, SetP, SetAP, SetF, Success @ 2):  # IPrec: no
        judged = [m.value for m in provider.iter_calc([measure(judged_only=True)], q, run)]
        assert judged == pytest.approx([m.value for m in provider.iter_calc([measure], q, removed)], abs=0.5e-4)
        assert judged != pytest.approx([m.value for m in provider.iter_calc([measure], q, run)], abs=0.5e-4)


def test_ir_measures_ranx_test_cases():
    q, r = _qrels(Q_RANX), _run(R_RANX)
    for measure, value in RANX_CASES:
        tol = GDEVAL if provider.follows(measure) == "gdeval" else EXACT
        got = list(provider.iter_calc([measure], q, r))
        assert [(m.query_id, m.measure) for m in got] == [("0", measure)]
        assert got[0].value == pytest.approx(value, abs=tol), measure


def test_ir_measures_cwl_eval_test_case():
    """test_cwl_eval.py (cwl.qrels, cwl.run; "based on a manual execution of cwl-eval", to 4 places):
    the C/W/L measures follow cwl_eval; P, RR and AP follow pytrec_eval, equal without ties."""
    from test_ir_measures import CWL_QRELS, CWL_RUN

    q, r = list(ir_measures.read_trec_qrels(CWL_QRELS)), list(ir_measures.read_trec_run(CWL_RUN))
    expected = [
        (AP, [0.7087, 0.7438, 0.3068]), (BPM(T=1.0, max_rel=1) @ 20, [1.0000, 1.0000, 0.1667]),
        (BPM(T=2.0, max_rel=1) @ 10, [0.6667, 1.0000, 0.2857]), (INSQ(T=1.0, max_rel=1), [0.5872, 0.6629, 0.0880]),
        (INSQ(T=2.0, max_rel=1), [0.4513, 0.5068, 0.1292]), (INST(T=1.0, max_rel=1), [0.7934, 0.9226, 0.0888]),
        (INST(T=2.0, max_rel=1), [0.5994, 0.6924, 0.1397]), (SDCG(max_rel=1) @ 10, [0.5645, 0.6531, 0.2848]),
        (NERR8(max_rel=1) @ 10, [1.0000, 1.0000, 0.1667]), (NERR9(max_rel=1) @ 10, [1.0000, 1.0000, 0.0680]),
        (NERR10(p=0.8, max_rel=1), [1.0000, 1.0000, 0.0888]), (NERR11(T=2.0, max_rel=1), [1.0000, 1.0000, 0.0691]),
        (P @ 1, [1.0000, 1.0000, 0.0000]), (P @ 10, [0.5000, 0.6000, 0.4000]), (P @ 20, [0.2500, 0.3000, 0.2000]),
        (P @ 5, [0.6000, 0.6000, 0.0000]), (RBP(p=0.9, rel=1), [0.3501, 0.3996, 0.1988]),
        (RR, [1.0000, 1.0000, 0.1667]),
    ]
    for measure, values in expected:
        got = list(provider.iter_calc([measure], q, r))
        assert [m.query_id for m in got] == ["T1", "T2", "T3"]
        assert [m.value for m in got] == pytest.approx(values, abs=1e-4), measure


def test_ir_measures_compat_test_case():
    """test_compat.py (compat.qrels, compat.run: "based on a manual execution of
    https://github.com/claclark/Compatibility", to 1e-9)."""
    q = list(ir_measures.read_trec_qrels(str(DATA / "compat.qrels.gz")))
    r = list(ir_measures.read_trec_run(str(DATA / "compat.run.gz")))
    expected = [(Compat(p=0.95), [0.51779512165509, 0.018400100569017922]),
                (Compat(p=0.9), [0.3761334522946854, 0.004344079941789211]),
                (Compat(p=0.8), [0.16723008845234535, 0.00022806427320561776])]
    for measure, values in expected:
        got = list(provider.iter_calc([measure], q, r))
        assert [m.query_id for m in got] == ["31_1", "31_2"]
        assert [m.value for m in got] == pytest.approx(values, abs=1e-9), measure
    assert provider.calc_aggregate([Compat(p=0.95)], q, r)[Compat(p=0.95)] == pytest.approx(0.268097611, abs=1e-9)


def test_ir_measures_accuracy_test_case():
    """test_accuracy.py: queries where Accuracy is undefined (no relevant document retrieved) are not reported."""
    from test_ir_measures import ACC_QRELS, ACC_RUN

    q, r = list(ir_measures.read_trec_qrels(ACC_QRELS)), list(ir_measures.read_trec_run(ACC_RUN))
    one = [("0", 2 / 3), ("1", 0.5 * (2 / 3 + 1 / 3)), ("2", 1.0)]
    for measure, expected in ((Accuracy(rel=1), one), (Accuracy(rel=2), [("0", 2 / 3), ("1", 0.75)])):
        got = list(provider.iter_calc([measure], q, r))
        assert [m.query_id for m in got] == [qid for qid, _ in expected]
        assert [m.value for m in got] == pytest.approx([v for _, v in expected], abs=1e-9)
    mean = sum(v for _, v in one) / len(one)
    assert provider.calc_aggregate([Accuracy(rel=1)], q, r)[Accuracy(rel=1)] == pytest.approx(mean, abs=1e-9)


def test_ir_measures_empty_inputs_test_case():
    """test_providers.py (test_empty): judgments without a run, a run without judgments, each partial,
    both empty; the records and aggregates each measure's provider gives (Accuracy reports nothing
    where it is undefined, and its mean of nothing is NaN)."""
    qrels = _qrels(Q_NUMRET)
    run = _run(R_NUMRET)
    partial_qrels = [q for q in qrels if q.query_id == "0"]
    partial_run = [r for r in run if r.query_id == "0"]
    measures = [P @ 5, ERR @ 5, Judged @ 5, RR @ 5, Compat(p=0.8), Accuracy()]
    nan = math.nan
    # (judgments, run, {measure: {query: value}}, {measure: aggregate}), in the order of the measures above
    scenarios = [
        (qrels, [], [{"0": 0.0, "1": 0.0}] * 5 + [{}], [0.0] * 5 + [nan]),
        (qrels, partial_run, [{"0": 0.6, "1": 0.0}, {"0": 0.10175, "1": 0.0}, {"0": 1.0, "1": 0.0},
                              {"0": 0.5, "1": 0.0}, {"0": 0.4744431703672816, "1": 0.0}, {"0": 0.5}],
         [0.3, 0.050875, 0.5, 0.25, 0.2372215851836408, 0.5]),
        ([], run, [{}] * 6, [nan] * 6),
        (partial_qrels, run, [{"0": 0.6}, {"0": 0.10175}, {"0": 1.0}, {"0": 0.5}, {"0": 0.4744431703672816},
                              {"0": 0.5}], [0.6, 0.10175, 1.0, 0.5, 0.4744431703672816, 0.5]),
        ([], [], [{}] * 6, [nan] * 6),
    ]
    for q, r, records, aggregates in scenarios:
        for measure, want, mean in zip(measures, records, aggregates):
            tol = GDEVAL if measure == ERR @ 5 else 1e-12
            got = {m.query_id: m.value for m in provider.iter_calc([measure], q, r)}
            assert sorted(got) == sorted(want) and [got[k] for k in sorted(got)] == pytest.approx(
                [want[k] for k in sorted(want)], abs=tol), measure
            value = provider.calc_aggregate([measure], q, r)[measure]
            assert (math.isnan(value) and math.isnan(mean)) or value == pytest.approx(mean, abs=tol), measure


# ---------------------------------------------------------------------------------------------
# against ir_measures' default pipeline


def _random(seed: int, queries: int = 30, long_query: bool = False):
    """A run with many tied scores (halves from 0.5 to 4), unjudged documents, grades -1..3, a judged
    query without a relevant document, a judged query the run misses and a run query without
    judgments; judgments listed by document id, rows grouped by
    query (as cwl_eval's reader needs)."""
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in range(queries):
        qid = str(100 + q)  # gdeval.pl reads numeric topics only
        docs = [f"d{i:03d}" for i in rng.choice(150, 70, replace=False)]
        n = int(rng.integers(1, 45))
        run += [ir_measures.ScoredDoc(qid, d, float(rng.integers(1, 9)) / 2) for d in docs[:n]]
        grades = [-1, 0, 0, 1, 2, 3] if q else [-1, 0]  # 100: judged, nothing relevant
        judged = sorted(rng.choice(docs, int(rng.integers(2, 40)), replace=False))
        qrels += [ir_measures.Qrel(qid, d, int(rng.choice(grades))) for d in judged]
    if long_query:  # past cwl_eval's 1000 ranks
        run += [ir_measures.ScoredDoc("199", f"e{i:04d}", float(2000 - i // 3)) for i in range(1300)]
        qrels += [ir_measures.Qrel("199", f"e{i:04d}", int(g)) for i, g in enumerate(rng.choice([0, 1, 2], 1300))]
    qrels.append(ir_measures.Qrel("998", "d000", 1))  # judged, not in the run
    run += [ir_measures.ScoredDoc("999", "d001", 1.0), ir_measures.ScoredDoc("999", "d002", 0.5)]  # no judgments
    return run, qrels


PYTREC_EVAL = [P @ 1, P @ 5, P(rel=2) @ 10, P(judged_only=True) @ 5, R @ 10, R @ 100, RR, RR(rel=2), AP, AP @ 10,
               AP(rel=2), AP(judged_only=True), Rprec, Rprec(rel=2), nDCG, nDCG @ 10,
               nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}) @ 5, nDCG(judged_only=True) @ 10, Bpref, Bpref(rel=2), NumRet,
               NumRet(rel=1), NumRel, SetAP, SetF, SetF(beta=0.5), SetP, SetRelP, SetR, Success @ 1,
               Success(rel=2) @ 5, infAP]
MSMARCO = [RR @ 1, RR @ 10, RR(rel=2) @ 5]
JUDGED = [Judged @ 5, Judged @ 20, Judged]
COMPAT = [Compat, Compat(p=0.8, normalize=False)]
CWL = [RBP(rel=1), RBP(p=0.5, rel=2), SDCG(max_rel=3) @ 10, BPM(T=1.0, max_rel=3) @ 10, INSQ(max_rel=3),
       INST(max_rel=3), NERR8(max_rel=3) @ 10, NERR9(max_rel=3) @ 5, NERR10(p=0.8, max_rel=3),
       NERR11(T=2.0, max_rel=3)]
GDEVAL_MEASURES = [nDCG(dcg="exp-log2") @ 10, ERR @ 5, ERR @ 20]


def _records(records) -> dict:
    out: dict = {}
    for m in records:
        key = (m.query_id, str(m.measure))
        assert key not in out, f"{key} reported twice"
        out[key] = m.value
    return out


def _first_invocation(measure) -> bool:
    """Measures that ir_measures 0.4.3's pytrec_eval provider computes in "the first invocation" of the call
    (NumRet without rel=, nDCG without gains=): whichever pytrec_eval call comes first, with its judged_only
    flag or its gains map, and the order of the measures reaching the provider follows Python's hash seed."""
    NOT = ir_measures.providers.base.NOT_PROVIDED
    return ((measure.NAME == "NumRet" and measure["rel"] is NOT)
            or (measure.NAME == "nDCG" and measure["gains"] is NOT and provider.follows(measure) == "pytrec_eval"))


def _default_records(measures, qrels, run) -> dict:
    """The default pipeline's records, with the measures of pytrec_eval's first invocation each computed
    in a call of its own (so that the oracle does not depend on the hash seed: see _first_invocation)."""
    alone = [m for m in measures if _first_invocation(m)]
    out = _records(ir_measures.iter_calc([m for m in measures if m not in alone], qrels, run))
    for m in alone:
        out |= _records(ir_measures.iter_calc([m], qrels, run))
    return out


def _aggregates(records: dict, measures) -> dict:
    """Each measure's aggregate (its own aggregator) over the records."""
    out = {}
    for m in measures:
        agg = m.aggregator()
        for (_, name), value in records.items():
            if name == str(m):
                agg.add(value)
        out[m] = agg.result()
    return out


def test_the_oracle_of_the_first_invocation_is_deterministic():
    """ir_measures' own quirk, which the oracle above avoids: NumRet given with P(judged_only=True)
    counts only the judged documents when that call is pytrec_eval's first (judged_only) invocation,
    and nDCG given after nDCG(gains=...) takes its gains. Alone, each is what its definition says; the
    topkeval provider gives that, whatever the other measures of the call."""
    q = [ir_measures.Qrel("1", "a", 1), ir_measures.Qrel("1", "b", 0), ir_measures.Qrel("1", "c", 2)]
    r = [ir_measures.ScoredDoc("1", "a", 3.0), ir_measures.ScoredDoc("1", "x", 2.0), ir_measures.ScoredDoc("1", "c", 1.0)]
    pytrec = ir_measures.pytrec_eval
    assert pytrec.calc_aggregate([P(judged_only=True) @ 2, NumRet], q, r)[NumRet] == 2  # x (unjudged) left out
    assert pytrec.calc_aggregate([NumRet], q, r)[NumRet] == 3
    gains = nDCG(gains={1: 10, 2: 1})
    assert pytrec.calc_aggregate([gains, nDCG], q, r)[nDCG] == pytest.approx(pytrec.calc_aggregate([gains], q, r)[gains])
    for measures in ([P(judged_only=True) @ 2, NumRet, gains, nDCG], [NumRet, nDCG]):
        ours = provider.calc_aggregate(measures, q, r)
        assert ours[NumRet] == 3
        assert ours[nDCG] == pytest.approx(pytrec.calc_aggregate([nDCG], q, r)[nDCG], abs=1e-15)


def _same(ours: dict, theirs: dict, tol=1e-12) -> None:
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        t = GDEVAL if key[1] in {str(m) for m in GDEVAL_MEASURES} else tol
        assert ours[key] == pytest.approx(value, abs=t), key


@pytest.mark.parametrize("seed", range(3))
def test_equals_the_default_pipeline_on_random_runs_with_ties(seed, tmp_path, monkeypatch):
    """Every measure the default pipeline gives to pytrec_eval, msmarco, judged, compat, cwl_eval and
    gdeval (when perl is here): the same records, query by query, and the same aggregates; each
    measure is computed under the conventions of the provider it follows."""
    pytest.importorskip("cwl", reason="cwl-eval is a test extra (ir_measures' cwl_eval provider)")
    monkeypatch.chdir(tmp_path)  # cwl_eval may write a log file where it runs
    run, qrels = _random(seed, long_query=seed == 0)
    measures = PYTREC_EVAL + MSMARCO + JUDGED + COMPAT + CWL
    if ir_measures.gdeval.is_available():
        measures += GDEVAL_MEASURES
        qrels = [q._replace(relevance=max(q.relevance, 0)) for q in qrels]  # gdeval.pl stops at a negative grade
    expected = {m: name for name, group in (("pytrec_eval", PYTREC_EVAL), ("msmarco", MSMARCO), ("judged", JUDGED),
                                            ("compat", COMPAT), ("cwl_eval", CWL), ("gdeval", GDEVAL_MEASURES))
                for m in group}
    assert {m: provider.follows(m) for m in measures} == {m: expected[m] for m in measures}
    theirs = _default_records(measures, qrels, run)
    ours = _records(provider.iter_calc(measures, iter(qrels), iter(run)))
    _same(ours, theirs)
    mine, default = provider.calc_aggregate(measures, qrels, run), _aggregates(theirs, measures)
    for m in measures:
        assert mine[m] == pytest.approx(default[m], abs=GDEVAL if m in GDEVAL_MEASURES else 1e-12), m


@pytest.mark.parametrize("seed", range(2))
def test_accuracy_and_ranx_measures_equal_their_providers(seed):
    """Accuracy (the accuracy provider alone: inside the default pipeline with other measures, its
    FallbackEvaluator gives the unreported queries 0) and nDCG(dcg='exp-log2') without a cutoff (ranx,
    which asserts object columns, refuses judged queries missing from the run, and which the default
    pipeline cannot call with pandas 3's text columns)."""
    run, qrels = _random(10 + seed)
    acc = [Accuracy(), Accuracy(rel=2), Accuracy() @ 5]
    theirs = _records(ir_measures.accuracy.iter_calc(acc, qrels, run))
    assert theirs and len(theirs) < len(acc) * 31  # some queries are not reported
    _same(_records(provider.iter_calc(acc, qrels, run)), theirs)
    pytest.importorskip("ranx", reason="ranx is a test extra")
    keep = {q.query_id for q in qrels} & {r.query_id for r in run}
    frame = {"query_id": object, "doc_id": object}
    run_df = pd.DataFrame([r for r in run if r.query_id in keep]).astype(frame)
    qrels_df = pd.DataFrame([q for q in qrels if q.query_id in keep]).astype(frame)
    exp = [nDCG(dcg="exp-log2")]
    assert provider.follows(exp[0]) == "ranx"
    _same(_records(provider.iter_calc(exp, qrels_df, run_df)), _records(ir_measures.ranx.iter_calc(exp, qrels_df, run_df)))


def test_equals_the_default_pipeline_on_trec_evals_test_files(shared_dir, tmp_path, monkeypatch):
    """trec_eval's qrels.test and results.test (three TREC topics, 500 documents each, graded judgments)."""
    pytest.importorskip("cwl", reason="cwl-eval is a test extra")
    monkeypatch.chdir(tmp_path)
    base = shared_dir / "conformance" / "trec_eval"
    qrels = list(ir_measures.read_trec_qrels(str(base / "qrels.test")))
    run = list(ir_measures.read_trec_run(str(base / "results.test")))
    measures = PYTREC_EVAL + MSMARCO + JUDGED + [RBP(rel=1), SDCG(max_rel=2) @ 20, INSQ(max_rel=2)]
    _same(_records(provider.iter_calc(measures, qrels, run)), _default_records(measures, qrels, run))
    qrels = list(ir_measures.read_trec_qrels(str(base / "qrels.rel_level")))
    levels = [P(rel=2) @ 10, AP(rel=2), RR(rel=2) @ 10, Rprec(rel=2), nDCG @ 20]
    _same(_records(provider.iter_calc(levels, qrels, run)), _default_records(levels, qrels, run))


# ---------------------------------------------------------------------------------------------
# the provider in ir_measures


def test_iprec_is_left_to_pytrec_eval():
    """pytrec_eval embeds trec_eval 9, whose IPrec@x starts at the int(x R + 0.9)-th relevant document;
    topkeval's iprec is trec_eval 10's (lround(x R)): with R = 11 at x = 0.2, the 3rd relevant or the 2nd."""
    qrels = [ir_measures.Qrel("1", f"d{i:02d}", 1) for i in range(11)]
    docs = ["d00", "d01"] + [f"u{i}" for i in range(7)] + ["d02"]  # relevant at ranks 1, 2 and 10
    run = [ir_measures.ScoredDoc("1", d, float(10 - i)) for i, d in enumerate(docs)]
    theirs = ir_measures.pytrec_eval.calc_aggregate([IPrec @ 0.2], qrels, run)[IPrec @ 0.2]
    ours = tk.evaluate(pd.DataFrame(run), qrels=pd.DataFrame(qrels), metrics=["iprec(recall=0.2)"],
                       conventions="pytrec_eval").summary.iloc[0, 0]
    assert (theirs, ours) == (pytest.approx(0.3), 1.0)
    assert not provider.supports(IPrec @ 0.2) and provider.follows(IPrec @ 0.2) is None
    with pytest.raises(tk.ParameterError, match="trec_eval 9"):
        provider.calc_aggregate([IPrec @ 0.2], qrels, run)


def test_registered_under_its_name():
    assert ir_measures.providers.registry["topkeval"] is provider
    assert ir_measures.topkeval is provider
    assert provider.NAME == "topkeval" and provider.is_available()


#: The ir_measures measures with a supported form: those the default pipeline gives to a provider
#: of PROVIDERS and that topkeval reads (NumQ, the diversity measures of pyndeval and the measures
#: defined at run time are not).
SUPPORTED_NAMES = {"AP", "Accuracy", "BPM", "Bpref", "Compat", "ERR", "INSQ", "INST", "Judged", "NERR10",
                   "NERR11", "NERR8", "NERR9", "NumRel", "NumRet", "P", "R", "RBP", "RR", "Rprec", "SDCG", "SetAP",
                   "SetF", "SetP", "SetR", "Success", "infAP", "nDCG"}


def _forms(measure) -> list:
    """Instances of a measure class with each parameter the provider's support may depend on."""
    params = measure.SUPPORTED_PARAMS
    base = {}
    if "max_rel" in params:
        base["max_rel"] = 3
    forms = [measure(**base)]
    if "cutoff" in params:
        forms.append(measure(**base, cutoff=10))
    if "rel" in params:
        forms.append(measure(**base, rel=2))
    if "recall" in params:
        forms.append(measure(**base, recall=0.5))
    return forms


def test_supported_measures_are_derived_from_the_parser_and_the_default_pipeline():
    names = set()
    for measure in ir_measures.measures.registry.values():
        for form in _forms(measure):
            try:
                form.validate_params()
            except AssertionError:
                continue
            if provider.supports(form):
                names.add(form.NAME)
                assert provider.follows(form) in PROVIDERS
                if form != Judged:  # (computed apart: below)
                    tk.parse_metric(form)  # read by topkeval's parser
            else:
                assert provider.follows(form) is None
    assert names == SUPPORTED_NAMES
    # the two measures computed apart from the parser's reading
    assert not tk.parse_metric(RBP(rel=1)).k and provider.supports(RBP(rel=1))
    with pytest.raises(tk.UnknownMetricError):
        tk.parse_metric(Judged)
    assert provider.supports(Judged)
    # graded RBP (no rel=) goes to no provider of the default pipeline (trectools is left out of it)
    assert not provider.supports(RBP) and not provider.supports(NumQ) and not provider.supports("P@5")


def test_unsupported_measure_is_refused_and_a_fallback_pipeline_sends_it_on():
    q, r = _qrels(Q_NUMRET), _run(R_NUMRET)
    with pytest.raises(tk.ParameterError, match=r"NumQ is not supported by the topkeval provider.*FallbackProvider"):
        provider.calc_aggregate([NumQ, P @ 5], q, r)
    pipeline = ir_measures.providers.FallbackProvider([provider, *ir_measures.DefaultPipeline.providers])
    evaluator = pipeline.evaluator([NumQ, P @ 5, AP], q)
    assert [type(e).__name__ for e in evaluator.evaluators] == ["TopkevalEvaluator", "PytrecEvalEvaluator"]
    assert evaluator.evaluators[0].measures and set(evaluator.evaluators[0].measures) == {P @ 5, AP}
    assert evaluator.calc_aggregate(r) == ir_measures.calc_aggregate([NumQ, P @ 5, AP], q, r)
    assert pipeline.supports(NumQ) and pipeline.supports(P @ 5)


def test_an_evaluator_reads_the_judgments_once_and_takes_many_runs():
    run, qrels = _random(7)
    evaluator = provider.evaluator([P @ 5, nDCG @ 10], (q for q in qrels))  # a generator: read once
    other = [ir_measures.ScoredDoc(d.query_id, d.doc_id, -d.score) for d in run]
    for r in (run, other, run):
        assert evaluator.calc_aggregate(iter(r)) == pytest.approx(ir_measures.calc_aggregate([P @ 5, nDCG @ 10], qrels,
                                                                                            r), abs=1e-12)


def test_the_ecosystems_shapes_give_the_same_records():
    """Lists of namedtuples, generators, dicts of dicts, pandas frames with ir_measures' names, PyTerrier's
    frames, Arrow tables: one set of records."""
    run, qrels = _random(3)
    measures = [P @ 5, nDCG @ 10, RR @ 10, Judged @ 5]
    want = _records(provider.iter_calc(measures, qrels, run))
    run_df, qrels_df = pd.DataFrame(run), pd.DataFrame(qrels)
    run_dict: dict = {}
    for d in run:
        run_dict.setdefault(d.query_id, {})[d.doc_id] = d.score
    qrels_dict: dict = {}
    for q in qrels:
        qrels_dict.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    pt_run = run_df.rename(columns={"query_id": "qid", "doc_id": "docno"}).assign(
        rank=lambda f: f.groupby("qid").cumcount(), query="text of the query")
    pt_qrels = qrels_df.rename(columns={"query_id": "qid", "doc_id": "docno", "relevance": "label"})
    import pyarrow as pa

    for q, r in ((iter(qrels), iter(run)), (qrels_dict, run_dict), (qrels_df, run_df), (pt_qrels, pt_run),
                 (pa.Table.from_pandas(qrels_df), pa.Table.from_pandas(run_df)), (qrels_dict, pt_run)):
        _same(_records(provider.iter_calc(measures, q, r)), want)


def test_a_document_listed_twice_is_refused():
    q = _qrels(Q_NUMRET)
    r = _run(R_NUMRET) + [ir_measures.ScoredDoc("0", "D0", 0.05)]
    with pytest.raises(tk.DataError, match="twice"):
        provider.calc_aggregate([P @ 5], q, r)


def test_ties_expected_is_the_mean_over_every_order_of_the_tied_documents():
    """TopkevalProvider(ties="expected"): each query's value is the mean, over every order of its tied
    documents, of pytrec_eval's value on the run with that order made strict."""
    rng = np.random.default_rng(11)
    run, qrels = [], []
    for q in range(6):
        n = int(rng.integers(2, 6))
        run += [ir_measures.ScoredDoc(f"q{q}", f"d{i}", float(rng.integers(0, 2))) for i in range(n)]
        qrels += [ir_measures.Qrel(f"q{q}", f"d{i}", int(g)) for i, g in enumerate(rng.choice([0, 1, 2], n + 1))]
    measures = [P @ 2, RR, AP, nDCG @ 3, R @ 1, Success @ 1]
    expected = TopkevalProvider(ties="expected")
    got = _records(expected.iter_calc(measures, qrels, run))
    for qid in sorted({d.query_id for d in run}):
        docs = [d for d in run if d.query_id == qid]
        values = []
        groups = [[d for d in docs if d.score == s] for s in sorted({d.score for d in docs}, reverse=True)]
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            strict = [ir_measures.ScoredDoc(qid, d.doc_id, float(len(docs) - i))
                      for i, d in enumerate(itertools.chain(*orders))]
            values.append({str(m.measure): m.value for m in ir_measures.pytrec_eval.iter_calc(
                measures, [x for x in qrels if x.query_id == qid], strict)})
        for m in measures:
            assert got[(qid, str(m))] == pytest.approx(np.mean([v[str(m)] for v in values]), abs=1e-12), (qid, m)
    # one tie rule for every measure: P@1 and RR@1 agree on a query of two tied documents
    q2 = [ir_measures.Qrel("a", "x", 1), ir_measures.Qrel("a", "y", 0)]
    r2 = [ir_measures.ScoredDoc("a", "x", 1.0), ir_measures.ScoredDoc("a", "y", 1.0)]
    assert expected.calc_aggregate([P @ 1, RR @ 1], q2, r2) == {P @ 1: 0.5, RR @ 1: 0.5}
    default = provider.calc_aggregate([P @ 1, RR @ 1], q2, r2)  # as the default pipeline: y first, then x first
    assert default == ir_measures.calc_aggregate([P @ 1, RR @ 1], q2, r2) == {P @ 1: 0.0, RR @ 1: 1.0}
    # measures without a closed form under expected ties are left to the others
    assert not expected.supports(Compat) and not expected.supports(BPM(max_rel=1) @ 5) and expected.supports(Judged @ 5)
    assert repr(expected) == "TopkevalProvider(ties='expected')"


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(tk.ParameterError, match="'ties' parameter of TopkevalProvider must be None or one of 'expected'"):
        TopkevalProvider(ties="random")
    with pytest.raises(tk.ColumnError, match="query_id, doc_id and score"):
        provider.calc_aggregate([P @ 5], _qrels(Q_NUMRET), pd.DataFrame({"q": ["0"], "d": ["D0"], "s": [1.0]}))
    with pytest.raises(tk.DataError, match="iterator"):
        provider.calc_aggregate([P @ 5], _qrels(Q_NUMRET), iter([("0", "D0", 1.0)]))


def test_without_ir_measures_the_module_says_which_extra_to_install():
    code = ("import sys; sys.modules['ir_measures'] = None\n"
            "import topkeval.integrations.ir_measures as m\n"
            "try:\n    m.provider\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(Path(tk.__file__).parents[1])})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("TopkevalError topkeval.integrations.ir_measures needs ir_measures")
    assert "pip install ir-measures" in out.stdout and "pip install '.[ir_measures]'" in out.stdout  # not on PyPI
    assert "topkeval[" not in out.stdout


# ---------------------------------------------------------------------------------------------
# ids, relevance levels, gain maps, the compat ideal, empty inputs


def test_query_ids_of_two_kinds_are_matched_as_evaluate_matches_them():
    """Judgments read with pandas.read_csv have integer (or float) topic ids; a run has text ids. The ids
    are matched as tk.evaluate matches them (401, 401.0 and "401" are one id), the records carry the
    judgments' ids; ids evaluate refuses are refused. Oracle: the default pipeline on text ids."""
    import io

    qrels = pd.read_csv(io.StringIO("query_id,doc_id,relevance\n401,d1,1\n401,d2,0\n402,d3,2\n402,d4,1\n"))
    run = pd.DataFrame({"query_id": ["401", "401", "402", "402"], "doc_id": ["d1", "d2", "d4", "d3"],
                        "score": [2.0, 1.0, 2.0, 1.0]})
    measures = [P @ 1, AP, nDCG @ 10, RR @ 10, Judged @ 1]
    want = ir_measures.calc_aggregate(measures, qrels.astype({"query_id": str}), run)
    assert want[AP] == 1.0
    for judged in (qrels, qrels.astype({"query_id": float}), qrels.astype({"query_id": str})):
        assert provider.calc_aggregate(measures, judged, run) == pytest.approx(want, abs=1e-15)
        assert provider.calc_aggregate(measures, qrels.astype({"query_id": str}),
                                       run.astype({"query_id": judged["query_id"].dtype})) == pytest.approx(want)
    assert [m.query_id for m in provider.iter_calc([AP], qrels, run)] == [401, 402]
    # what evaluate refuses, the provider refuses, in evaluate's words
    for bad, error in (([401.5, 402.0, 402.0, 402.0], tk.ColumnError), ([True, True, False, False], tk.DataError)):
        odd = qrels.assign(query_id=bad)
        with pytest.raises(error) as ours:
            provider.calc_aggregate([AP], odd, run)
        with pytest.raises(error) as theirs:
            tk.evaluate(run, qrels=odd, metrics=["ap"])
        assert str(ours.value) == str(theirs.value)
    # ids of one kind that share no query: every query gets the DEFAULT, as in ir_measures
    other = run.assign(query_id=["501", "501", "502", "502"])
    assert provider.calc_aggregate([AP], qrels.astype({"query_id": str}), other) == \
        ir_measures.calc_aggregate([AP], qrels.astype({"query_id": str}), other) == {AP: 0.0}


def test_a_relevance_level_of_zero_or_less():
    """An unjudged document is never relevant. msmarco's RR(rel=0)@k counts a judged grade 0 relevant;
    cwl_eval reads a negative grade as 0, so its RBP(rel<=0) counts every judged document; pytrec_eval
    refuses rel=0 (and gives 0 for everything below it), and the accuracy provider counts unjudged
    documents under rel <= 0: those are refused, saying why. Oracle: the default pipeline."""
    Q, S = ir_measures.Qrel, ir_measures.ScoredDoc
    cases = [([Q("1", "a", 0), Q("1", "b", 1)], [S("1", "x", 3.0), S("1", "a", 2.0), S("1", "b", 1.0)]),
             ([Q("1", "a", -1), Q("1", "b", 1)], [S("1", "a", 3.0), S("1", "b", 1.0)]),
             ([Q("1", "b", 1)], [S("1", "x", 3.0), S("1", "b", 1.0)])]
    measures = [RR(rel=0) @ 5, RR(rel=-1) @ 5, RBP(rel=0), RBP(rel=-1), RBP(p=0.5, rel=0)]
    for qrels, run in cases:
        assert provider.calc_aggregate(measures, qrels, run) == pytest.approx(
            ir_measures.calc_aggregate(measures, qrels, run), abs=1e-15)
    assert provider.calc_aggregate([RR(rel=0) @ 5], *cases[0]) == {RR(rel=0) @ 5: 0.5}  # a, judged 0, at rank 2
    run, qrels = _random(5)
    _same(_records(provider.iter_calc(measures, qrels, run)), _default_records(measures, qrels, run))
    with pytest.raises(Exception, match="relevance_level should be positive"):
        ir_measures.pytrec_eval.calc_aggregate([AP(rel=0)], *cases[0])
    for measure in (AP(rel=0), R(rel=0) @ 3, Bpref(rel=0), P(rel=-1) @ 3, Success(rel=0) @ 1, RR(rel=0)):
        assert not provider.supports(measure) and provider.follows(measure) is None
        with pytest.raises(tk.ParameterError, match=r"pytrec_eval refuses a relevance level of 0.*threshold=0"):
            provider.calc_aggregate([measure], *cases[0])
    with pytest.raises(tk.ParameterError, match="accuracy provider reads a document without a judgment as grade 0"):
        provider.calc_aggregate([Accuracy(rel=0)], *cases[0])


def test_a_gains_map_rewrites_the_grades_as_ir_measures_does():
    """nDCG(gains=...): ir_measures rewrites the judgments' grades by the map before pytrec_eval reads them,
    and trec_eval gives a negative grade no gain (in the list and in the ideal). Oracles: a brute force of
    that definition; the default pipeline where the map gives no grade below -1 (pytrec_eval's nDCG was
    seen to hang, now and then, on rewritten grades such as -5: trec_eval indexes its gains by grade)."""
    Q, S = ir_measures.Qrel, ir_measures.ScoredDoc
    for gains in ({0: -1, 1: 1}, {0: 2, 1: -1}, {1: -1, 2: -5}, {1: -2, 2: 1}):
        for grades in ([3, -1], [1, 2], [3, 2], [2, 3], [0, 2], [2, 1], [0, 1]):
            qrels = [Q("q", "a", grades[0]), Q("q", "b", grades[1])]
            run = [S("q", "b", 2.0), S("q", "a", 1.0), S("q", "x", 0.5)]
            gain = {d: max(gains.get(g, g), 0) for d, g in zip("ab", grades)}  # rewritten, then no negative gain
            dcg = gain["b"] / math.log2(2) + gain["a"] / math.log2(3)
            ideal = sorted(gain.values(), reverse=True)
            best = ideal[0] / math.log2(2) + ideal[1] / math.log2(3)
            want = dcg / best if best > 0 else 0.0
            for m in (nDCG(gains=gains) @ 5, nDCG(gains=gains)):
                ours = provider.calc_aggregate([m], qrels, run)[m]
                assert ours == pytest.approx(want, abs=1e-15), (gains, grades)
                if min(gains.values()) >= -1:
                    assert ours == pytest.approx(ir_measures.calc_aggregate([m], qrels, run)[m], abs=1e-15)


def test_compat_follows_the_order_of_the_judgments():
    """ir_measures' compat provider orders its ideal by grade, then by the run's score (0 for a document
    the run lacks), then in the order the judgments list the documents (Vaswani's qrels list "9" before
    "10", while the run's tie rule puts "10" first): the provider reproduces it (compat(ideal=judgments)).
    Oracle: the default pipeline, on judgments in shuffled order, tied scores and scores of 0 and less."""
    Q, S = ir_measures.Qrel, ir_measures.ScoredDoc
    m = Compat(p=0.8)
    run = [S("q1", "9", 2.0), S("q1", "10", 2.0), S("q1", "x", 1.0)]
    for qrels in ([Q("q1", "9", 1), Q("q1", "10", 1)], [Q("q1", "10", 1), Q("q1", "9", 1)]):
        want = ir_measures.calc_aggregate([m], qrels, run)[m]
        assert provider.calc_aggregate([m], qrels, run)[m] == pytest.approx(want, abs=1e-15)
    assert want == 1.0 and provider.calc_aggregate([m], qrels[::-1], run)[m] == pytest.approx(0.5508982035928144)
    rng = np.random.default_rng(3)
    for seed in range(3):
        run, qrels = _random(30 + seed)
        order = rng.permutation(len(qrels))
        shuffled = [qrels[i] for i in order]
        low = [d._replace(score=d.score - 2.0) for d in run]  # scores of 0 and below, tied with an unretrieved 0
        for r in (run, low):
            measures = [Compat, Compat(p=0.8, normalize=False)]
            _same(_records(provider.iter_calc(measures, shuffled, r)), _records(ir_measures.iter_calc(measures, shuffled, r)))
    res = tk.evaluate(pd.DataFrame(run), qrels=pd.DataFrame(shuffled), metrics=["compat(ideal=judgments)"],
                      ties="item_asc", item_order="text", empty_queries="keep")
    assert res.metrics == ["compat(ideal=judgments)"]


def test_empty_inputs_are_read_as_ir_measures_reads_them():
    """An empty run generator, a run or judgments {query: {}} without documents, an empty judgments
    generator: the records and aggregates of the default pipeline (DEFAULTs, or no records)."""
    q, r = _qrels(Q_NUMRET), _run(R_NUMRET)
    measures = [P @ 5, AP, RR @ 5, Judged @ 5, NumRet, nDCG @ 2]
    for qrels, run in ((q, iter([])), ({"0": {}, "1": {}}, r), (iter([]), r), ({"0": {}}, iter([])),
                       ({"0": {"D0": 1}, "7": {}}, r)):
        qrels_list = list(qrels) if not isinstance(qrels, dict) else qrels
        run_list = list(run)
        ours = _records(provider.iter_calc(measures, qrels_list if isinstance(qrels, dict) else iter(qrels_list),
                                           iter(run_list)))
        _same(ours, _default_records(measures, qrels_list, run_list))
    assert provider.calc_aggregate([NumRet, AP], {"0": {}}, r) == {NumRet: 0, AP: 0.0}


def test_measures_given_as_one_measure_or_unsupported_say_what_to_do():
    q, r = _qrels(Q_NUMRET), _run(R_NUMRET)
    with pytest.raises(tk.ParameterError, match=r"single measure P@1: pass \[P@1\]"):
        provider.calc_aggregate(P @ 1, q, r)
    with pytest.raises(tk.ParameterError, match="no provider of ir_measures' default pipeline supports it either"):
        provider.calc_aggregate([RBP], q, r)  # graded RBP: cwl_eval needs rel=
