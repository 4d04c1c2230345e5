"""The compiled TREC reader (kernels/fields.py, used by evaluate on TREC run files) reads every file
as the line reader does (Python's ``line.strip().split()`` and ``float()``, the oracle), or gives the
file up to the other readers: never a different id, score or row, never a file the line reader
refuses."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topkeval as tk
from topkeval.inputs import trec
from topkeval.kernels import fields

RUN = {"query": (0, "id"), "item": (2, "id"), "score": (4, "number"), "run": (5, "id")}


@pytest.fixture(autouse=True)
def _reader_on(monkeypatch):
    """The compiled reader runs whatever the file's size and TOPKEVAL_JIT (interpreted kernels under
    TOPKEVAL_JIT=0: the same rules, slower)."""
    from topkeval.kernels import jit

    monkeypatch.setattr(jit, "runs_compiled", lambda size: True)


def _line_reader(path, monkeypatch) -> pd.DataFrame | Exception:
    """read_run with Arrow's reader switched off: the line reader alone (the oracle)."""
    with monkeypatch.context() as m:
        m.setattr(trec, "_fast", lambda *a: None)
        try:
            return trec.read_run(path)
        except tk.TopkevalError as exc:
            return exc


def _coded(path) -> pd.DataFrame | None:
    columns = trec._coded(path, RUN, 6, 2**62)
    return None if columns is None else pd.DataFrame(columns)


def _same(coded: pd.DataFrame, oracle: pd.DataFrame) -> None:
    for name in ("query", "item", "run"):
        assert list(coded[name].astype(object)) == oracle[name].tolist(), name
    got, want = coded["score"].to_numpy(), oracle["score"].to_numpy()
    assert got.dtype == want.dtype == np.float64
    assert np.array_equal(got.view(np.int64), want.view(np.int64))  # bit for bit: -0.0 is not 0.0


ID = st.text(st.sampled_from("abcXYZ0123456789-_.:/#"), min_size=1, max_size=14)
SCORE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(-1, 1, allow_nan=False).map(lambda x: f"{x:.6f}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.3e}"),
    st.builds(lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
              st.sampled_from(["", "-", "+"]), st.sampled_from(["", "0", "7", "123456789012345678901"]),
              st.sampled_from(["", ".", ".5", ".000001", ".12345678901234567"]),
              st.sampled_from(["", "e5", "E-3", "e+22", "e-22", "e23", "e-330", "e308", "e400", "e"])),
    st.sampled_from(["nan", "inf", "-inf", "1_0", "0x10", "--1", "1.2.3", ".", "-", "٣"]),
)
BLANK = st.sampled_from([" ", "\t", "  ", " \t "])


@st.composite
def run_files(draw):
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["row"] * 6 + ["blank", "comment", "short", "long"]))
        if kind == "blank":
            lines.append(draw(st.sampled_from(["", " ", "\t"])))
            continue
        if kind == "comment":
            lines.append("#" + draw(st.text(st.sampled_from("ab 1.5\t"), max_size=12)))
            continue
        n = {"row": 6, "short": draw(st.integers(1, 5)), "long": draw(st.integers(7, 9))}[kind]
        words = [draw(ID), "Q0", draw(ID), str(draw(st.integers(0, 999))), draw(SCORE), draw(ID)]
        words += [draw(ID) for _ in range(n - 6)]
        words = words[:n]
        text = words[0]
        for word in words[1:]:
            text += draw(BLANK) + word
        lines.append(draw(st.sampled_from(["", " ", "\t"])) + text + draw(st.sampled_from(["", " ", "\t"])))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    body = end.join(lines) + draw(st.sampled_from(["", end]))
    return draw(st.sampled_from(["", "\ufeff"])) + body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=run_files())
def test_the_compiled_reader_reads_any_run_file_as_the_line_reader_or_gives_it_up(tmp_path, monkeypatch, text):
    path = tmp_path / "run.txt"
    path.write_bytes(text.encode())
    oracle = _line_reader(path, monkeypatch)
    coded = _coded(path)
    if isinstance(oracle, Exception):  # refused by the line reader: never read here
        assert coded is None
        return
    if coded is None:  # given up: only a file with a byte beyond ASCII (in a comment line too), left to Arrow's reader
        assert not text.isascii()
        return
    _same(coded, oracle)


@pytest.mark.parametrize("text", [
    "q1 Q0 d1 1 0.5 r\rq1 Q0 d2 2 0.4 r\n",  # a lone carriage return: a line break to Python
    "q1 Q0 d1 1 0.5 r\nq1 Q0 d\x0b2 2 0.4 r\n",  # a control byte Python splits at
    "q1 Q0 d1 1 0.5 r\nq1 Q0 dé 2 0.4 r\n",  # not ASCII (the Arrow reader reads it)
    "q1 Q0 d1 1 0.5 r\nq1 Q0 d\xa02 2 0.4 r\n",  # a no-break space, Python's whitespace
    "q1 Q0 d1 1 nan r\n",
    "q1 Q0 d1 1 1e999 r\n",  # float() gives inf
    "q1 Q0 d1 1 0.5\n",
    "# only a comment\n\n",
    "",
])
def test_files_it_gives_up_are_read_by_the_other_readers_as_before(tmp_path, text):
    path = tmp_path / "run.txt"
    path.write_bytes(text.encode())
    assert _coded(path) is None


def test_numbers_are_exactly_what_float_gives():
    """Clinger's fast path (a mantissa of at most 2**53, a power of ten of at most 22), Eisel-Lemire
    for other mantissas of at most 18 digits, float() for longer ones: every number bit for bit, on
    the edges of each."""
    rng = np.random.default_rng(3)
    texts = ["0", "-0", "-0.0", "+0.000", "0e5", "-0e-400", "9007199254740992", "9007199254740993",
             "9007199254740992e22", "1e22", "1e23", "1e-22", "1e-23", "123456789012345.6", "1234567890123456.7",
             "0.1", "0.3", "2.2250738585072014e-308", "4.9e-324", "1.7976931348623157e308", "1.", ".5", "-.5e1",
             "00000000000000000000001", "0.000000000000000000000000001", "123456789012345678901234567890"]
    for _ in range(3000):
        digits = "".join(map(str, rng.integers(0, 10, rng.integers(1, 21))))
        point = rng.integers(0, len(digits) + 1)
        text = digits[:point] + "." + digits[point:] if rng.random() < 0.8 else digits
        if rng.random() < 0.3:
            text += f"e{rng.integers(-40, 40)}"
        texts.append(("-" if rng.random() < 0.3 else "") + text)
    raw = "".join(f"q Q0 d{i} 1 {t} r\n" for i, t in enumerate(texts)).encode()
    ids, numbers = fields.split_fields(raw, [2, 4], [False, True], 6, 6)
    want = np.array([float(t) for t in texts])
    assert np.array_equal(numbers[0].view(np.int64), want.view(np.int64))


def test_every_double_written_as_repr_writes_it_reads_back_bit_for_bit():
    """repr's shortest 17 digits of doubles of every bit pattern (normal, subnormal, the extremes), and
    mantissas of up to 18 digits with exponents from -360 to 320 (rounding to 0, to subnormals, to
    inf, and halfway cases to even) read by the Eisel-Lemire method exactly as float() reads them."""
    rng = np.random.default_rng(12)
    doubles = rng.integers(0, 2**63, 30_000, dtype=np.int64).view(np.float64)
    texts = [repr(float(x)) for x in doubles if np.isfinite(x)]
    texts += [repr(float(x)) for x in rng.random(10_000)]  # scores as Python writes them
    texts += [f"{m}e{e}" for m, e in zip(rng.integers(1, 10**18, 20_000), rng.integers(-360, 321, 20_000))]
    texts += ["2.2250738585072011e-308", "2.2250738585072014e-308", "4.9406564584124654e-324", "2.4703282292062327e-324",
              "2.4703282292062328e-324", "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
              "9007199254740993", "9007199254740995e0", "1e23", "8.98846567431158e307", "5e-324", "1e-324",
              "999999999999999999e-342", "1e308", "2e308", "7.2057594037927933e16", "0.1000000000000000055511151231257827"]
    raw = "".join(f"q Q0 d 1 {t} r\n" for t in texts).encode()
    got = fields.split_fields(raw, [4], [True], 6, 6)
    want = np.array([float(t) for t in texts])
    if not np.isfinite(want).all():  # a number beyond the largest double makes the reader give the file up
        assert got is None
        keep = np.isfinite(want)
        texts, want = [t for t, k in zip(texts, keep) if k], want[keep]
        got = fields.split_fields("".join(f"q Q0 d 1 {t} r\n" for t in texts).encode(), [4], [True], 6, 6)
    assert np.array_equal(got[1][0].view(np.int64), want.view(np.int64))


def test_a_file_cut_into_parts_reads_as_one(monkeypatch):
    """Parts split apart (here many, each on its own thread of the pool) give the codes and ids of the
    whole, in order of first appearance: the parts' ids are hashed together after."""
    rng = np.random.default_rng(0)
    rows = [f"q{q} Q0 D{rng.integers(0, 300)}{'x' * int(rng.integers(0, 12))} {r} {rng.random():.6f} run{q % 3}\n"
            for q in range(60) for r in range(40)]
    raw = "".join(rows).encode()
    whole = fields.split_fields(raw, [0, 2, 4, 5], [False, False, True, False], 6, 2**62, threads=1)
    monkeypatch.setattr(fields, "PART_BYTES", 97)
    parts = fields.split_fields(raw, [0, 2, 4, 5], [False, False, True, False], 6, 2**62, threads=7)
    assert len(fields._parts(raw, 0, 7)) == 7
    for (c1, o1, d1), (c2, o2, d2) in zip(whole[0], parts[0]):
        assert c1.tolist() == c2.tolist() and o1.tolist() == o2.tolist() and bytes(d1) == bytes(d2)
    assert np.array_equal(whole[1][0], parts[1][0])
    words = [r.split() for r in rows]
    labels = bytes(whole[0][1][2]).decode()
    offsets = whole[0][1][1]
    assert [labels[offsets[c]:offsets[c + 1]] for c in whole[0][1][0]] == [w[2] for w in words]


def test_ids_longer_than_a_word_and_hash_tables_that_grow():
    """Ids of 1 to 40 bytes (at most 8 are their own tag, longer ones hashed and compared byte by
    byte), 20,000 distinct ones (the tables grow many times), each seen several times."""
    rng = np.random.default_rng(1)
    ids = [f"{'p' * int(n)}{i}" for i, n in enumerate(rng.integers(0, 35, 20000))]
    seq = [ids[i] for i in rng.integers(0, len(ids), 60000)]
    raw = "".join(f"{s} 0 {s[::-1]} 1\n" for s in seq).encode()
    (qc, qo, qd), (ic, io, idata) = fields.split_fields(raw, [0, 2], [False, False], 4, 4)[0]
    for codes, offsets, data, want in ((qc, qo, qd, seq), (ic, io, idata, [s[::-1] for s in seq])):
        text = bytes(data).decode()
        labels = [text[offsets[c]:offsets[c + 1]] for c in range(len(offsets) - 1)]
        assert [labels[c] for c in codes] == want
        assert labels == list(dict.fromkeys(want))  # distinct, in order of first appearance


def test_evaluate_gives_the_same_results_through_either_reader(tmp_path, monkeypatch):
    """A run with ties (6 decimals), two runs whose tags collide (named file:tag), a gzipped run: the
    results through the compiled reader equal those through Arrow's and the line reader."""
    rng = np.random.default_rng(2)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{q} 0 d{i} {rng.integers(0, 3)}\n" for q in range(30) for i in range(0, 60, 3)))
    paths = []
    for name in ("a.run", "b.run.gz"):
        text = "".join(f"q{q} Q0 d{i} {r} {round(rng.random(), 2):.6f} bm25\n" for q in range(30)
                       for r, i in enumerate(rng.permutation(60)[:40]))
        path = tmp_path / name
        path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
        paths.append(path)
    metrics = ["P@10", "map", "ndcg_cut_10", "recip_rank", "Rprec", "bpref"]
    coded = tk.evaluate(paths, qrels=qrels, metrics=metrics, conventions="trec_eval")
    monkeypatch.setattr(trec, "_coded", lambda *a: None)
    arrow = tk.evaluate(paths, qrels=qrels, metrics=metrics, conventions="trec_eval")
    monkeypatch.setattr(trec, "_fast", lambda *a: None)
    lines = tk.evaluate(paths, qrels=qrels, metrics=metrics, conventions="trec_eval")
    assert list(coded.summary.index) == ["a.run:bm25", "b.run.gz:bm25"]
    for other in (arrow, lines):
        pd.testing.assert_frame_equal(coded.per_query, other.per_query)
        pd.testing.assert_frame_equal(coded.summary, other.summary)


def test_interpreted_kernels_read_as_the_compiled_ones(tmp_path):
    """TOPKEVAL_JIT=0 runs the reader's kernels as plain Python: the same codes, ids and numbers."""
    script = ("import json, sys; from topkeval.kernels import fields; "
              "ids, numbers = fields.split_fields(open(sys.argv[1], 'rb').read(), [0, 2, 4, 5], "
              "[False, False, True, False], 6, 2**62); "
              "print(json.dumps([[c.tolist(), o.tolist(), bytes(d).decode()] for c, o, d in ids] "
              "+ [numbers[0].tolist()]))")
    path = tmp_path / "run.txt"
    path.write_text("".join(f"q{q} Q0 d{i % 7}{'z' * (i % 11)} {i} {i / 7:.17g} t{q % 2}\r\n"
                            for q in range(5) for i in range(30)) + "# end\n")
    out = {}
    for mode in ("0", "1"):
        env = {**os.environ, "TOPKEVAL_JIT": mode}
        proc = subprocess.run([sys.executable, "-W", "error", "-c", script, str(path)], capture_output=True,
                              text=True, env=env, check=True)
        out[mode] = proc.stdout
    assert out["0"] == out["1"] and len(out["0"]) > 100


def test_a_run_of_scores_written_in_full_goes_to_arrows_reader(tmp_path):
    """Scores of more than 18 significant digits are left to float() one by one: where more than one row
    in 8 has one (here one in 4), the compiled reader gives the file up early, to Arrow's compiled
    parse; a few (one in 50) are kept."""
    rng = np.random.default_rng(4)
    full = "".join(f"q{i // 100} Q0 d{i} {i} {f'0.{rng.integers(10**16, 10**17)}77' if i % 4 == 0 else i / 8} r\n"
                   for i in range(8 * fields.SLOW_MOST))
    path = tmp_path / "run.txt"
    path.write_text(full)
    assert _coded(path) is None
    few = "".join(f"q{i // 100} Q0 d{i} {i} {f'0.{rng.integers(10**16, 10**17)}77' if i % 50 == 0 else i / 8} r\n"
                  for i in range(fields.SLOW_MOST * 3))
    path.write_text(few)
    coded = _coded(path)
    assert coded is not None
    assert coded["score"].tolist() == [float(line.split()[4]) for line in few.splitlines()]


def test_runs_whose_file_tag_names_would_be_equal_are_refused_by_both_readers(tmp_path, monkeypatch):
    """File a with tag b:c and file a:b with tag c would both be named a:b:c (runs sharing the tag z are
    named file:tag): refused, not merged into one model, whichever reader reads them."""
    a = tmp_path / "a"
    a.write_text("q1 Q0 d1 1 1 b:c\nq1 Q0 d2 2 0.5 z\n")
    ab = tmp_path / "a:b"
    ab.write_text("q2 Q0 d3 1 1 c\nq2 Q0 d2 2 0.5 z\n")
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 1\nq2 0 d2 1\n")
    with pytest.raises(tk.ParameterError, match=r"Two runs would both be named 'a:b:c'.*'b:c' of .*'c' of"):
        tk.read_runs([a, ab])
    for jit in ("0", "1"):
        monkeypatch.setenv("TOPKEVAL_JIT", jit)
        with pytest.raises(tk.ParameterError, match="Two runs would both be named 'a:b:c'"):
            tk.evaluate([a, ab], qrels=qrels, metrics=["P@1"], conventions="trec_eval")
    # distinct names still read: the shared tag z named per file
    ab.write_text("q2 Q0 d3 1 1 y\nq2 Q0 d2 2 0.5 z\n")
    assert sorted(set(tk.read_runs([a, ab])["run"])) == ["a:b:c", "a:b:y", "a:b:z", "a:z"]


def test_a_hash_starts_a_comment_only_in_the_first_field(tmp_path, monkeypatch):
    """'#' at the start of the line's first field makes a comment line; at the start of another field
    (a document id '#d1', a tag '#run') it is part of the id, as the line reader reads it."""
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 #d1 1 0.5 #run\n# a comment\nq1 Q0 d2 2 0.25 #run\nq2\tQ0 #  3 1.5 #run\n")
    oracle = _line_reader(path, monkeypatch)
    assert list(oracle["item"]) == ["#d1", "d2", "#"]
    _same(_coded(path), oracle)


def test_a_run_and_its_qrels_read_together_code_their_ids_in_one_space(tmp_path, monkeypatch):
    """A run read with its qrels (the judgments' ids first, the run's after, one set of labels for both)
    gives the tables read_runs and read_qrels give, and the same evaluation as the files read apart
    (ids longer and shorter than 8 bytes, judged queries the run lacks, run queries without judgments)."""
    rng = np.random.default_rng(3)
    queries = [f"q{q}" if q % 3 else f"query-{q:08d}" for q in range(40)]
    docs = [f"d{i}" if i % 2 else f"clueweb09-en{i:08d}" for i in range(300)]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {docs[i]} {rng.integers(0, 3)}\n" for q in queries[5:] + ["unjudged-only"]
                             for i in rng.choice(300, 25, replace=False)))
    run = tmp_path / "run.txt"
    run.write_text("".join(f"{q} Q0 {docs[i]} {r} {round(rng.random(), 2):.6f} bm25\n" for q in queries[:-3]
                           for r, i in enumerate(rng.permutation(300)[:50])))
    table, judged = trec.coded_runs([run], qrels)
    assert judged["item"].cat.categories is table["item"].cat.categories
    assert judged["query"].cat.categories is table["query"].cat.categories
    _same(table, _line_reader(run, monkeypatch))
    want = trec.read_qrels(qrels)
    for name in ("query", "item"):
        assert list(judged[name].astype(object)) == want[name].tolist(), name
    assert judged["relevance"].tolist() == want["relevance"].tolist()
    metrics = ["P@10", "map", "ndcg_cut_10", "Rprec", "recall@20"]
    with monkeypatch.context() as m:  # read together, the ids need no join at all
        from topkeval.inputs import judgments

        m.setattr(judgments, "text_codes_together", lambda *a: pytest.fail("the ids were joined"))
        together = tk.evaluate(run, qrels=qrels, metrics=metrics, conventions="trec_eval")
    monkeypatch.setattr(trec, "_split", lambda path, fields, *a, **k: None if "relevance" in fields else
                        _split(path, fields, *a, **k))
    apart = tk.evaluate(run, qrels=qrels, metrics=metrics, conventions="trec_eval")
    pd.testing.assert_frame_equal(together.per_query, apart.per_query)
    pd.testing.assert_frame_equal(together.summary, apart.summary)


def test_qrels_the_compiled_reader_gives_up_are_read_apart_as_before(tmp_path, monkeypatch):
    """Judgments the compiled reader does not take (an id that is not ASCII, a grade that is not an
    integer, a line of 5 fields) leave the run read alone and the qrels to read_qrels: the same values
    as the line readers give, or read_qrels' refusal naming the line."""
    run = tmp_path / "run.txt"
    run.write_text("".join(f"q{q} Q0 d{i} {i} {1 - i / 100:.6f} r\n" for q in range(3) for i in range(20)))
    good = "".join(f"q{q} 0 d{i} {i % 3}\n" for q in range(3) for i in range(0, 20, 2))
    qrels = tmp_path / "qrels.txt"
    for extra in ("q1 0 dé 2\n", "q2 0 d7 1 extra\n", "q2 0 d7 1.5\n"):
        qrels.write_text(good + extra, encoding="utf-8")
        assert trec.coded_runs([run], qrels)[1] is None
        try:
            want = trec.read_qrels(qrels)
        except tk.TopkevalError as exc:
            with pytest.raises(tk.TopkevalError, match="line 31"):
                tk.evaluate(run, qrels=qrels, metrics=["P@5", "map"], conventions="trec_eval")
            assert "line 31" in str(exc)
            continue
        got = tk.evaluate(run, qrels=qrels, metrics=["P@5", "map"], conventions="trec_eval")
        assert len(want) == 31
        with monkeypatch.context() as m:
            m.setattr(trec, "_split", lambda *a, **k: None)  # both files by the other readers
            pd.testing.assert_frame_equal(got.per_query, tk.evaluate(run, qrels=qrels, metrics=["P@5", "map"],
                                                                     conventions="trec_eval").per_query)


_split = trec._split


def test_an_exponent_of_seven_digits_is_read_by_float():
    """An exponent past the reader's own (7 digits and more) goes to float(), which reads it whatever
    its size: a million zeros after the point bring 1e1999995 back to 10000."""
    texts = ["0." + "0" * 1999990 + "1e1999995", "1e-1000000", "5e0000001", "1e+0000000000000000000022"]
    raw = "".join(f"q Q0 d{i} 1 {t} r\n" for i, t in enumerate(texts)).encode()
    got = fields.split_fields(raw, [4], [True], 6, 6)
    assert got[1][0].tolist() == [float(t) for t in texts] == [10000.0, 0.0, 50.0, 1e22]
