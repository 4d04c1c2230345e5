"""Runs and judgments in the shapes of ir_datasets, ir_measures and PyTerrier, read by ``evaluate``
without renaming (topkeval.inputs.ecosystems).

Each shape is built as its library builds it: ir_datasets' own iterators (``TrecQrels`` and
``TrecScoredDocs`` over local files, yielding its ``TrecQrel`` and ``GenericScoredDoc``
namedtuples), ir_measures' ``Qrel`` and ``ScoredDoc`` and its frames, PyTerrier's result and qrels
frames (PyTerrier itself when it is installed; otherwise its columns and dtypes as its source writes
them, cited below). The oracle: the same rows evaluated with every column named explicitly (and
TREC files read by topkeval's TREC reader, itself tested against trec_eval), and ir_measures'
pytrec_eval provider on ir_datasets' iterators.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

METRICS = ["P@5", "recall@10", "ap", "ndcg@10", "rr"]


def _rows(seed: int = 0, queries: int = 12):
    """(query, doc, score) and (query, doc, grade) rows as text ids: ties, unjudged documents, a query
    without a relevant document, a judged query the run misses."""
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in range(queries):
        docs = [f"D{i}" for i in rng.choice(60, 25, replace=False)]
        run += [(f"{q + 1}", d, float(rng.integers(1, 7)) / 2) for d in docs[:int(rng.integers(3, 20))]]
        qrels += [(f"{q + 1}", d, int(rng.choice([0, 1, 2] if q else [0]))) for d in docs[::2]]
    qrels.append(("99", "D1", 1))
    return run, qrels


def _want(run, qrels, metrics=METRICS, **kw) -> pd.DataFrame:
    """Every column named explicitly: the oracle of the shapes below."""
    res = tk.evaluate(pd.DataFrame(run, columns=["q", "d", "s"]), metrics=metrics, query="q", item="d", score="s",
                      qrels=pd.DataFrame(qrels, columns=["q", "d", "g"]), relevance="g", **kw)
    return res.per_query.drop(columns="model").set_index("q")


def _same(res, want: pd.DataFrame, query: str) -> None:
    got = res.per_query.drop(columns="model").set_index(query)
    got.index.name = want.index.name
    pd.testing.assert_frame_equal(got, want, check_exact=True)


# ---------------------------------------------------------------------------------------------
# ir_datasets and ir_measures


def test_ir_datasets_iterators_as_their_trec_files(tmp_path):
    """ir_datasets' TrecQrels and TrecScoredDocs, reading local files as its datasets do: their
    generators of TrecQrel(query_id, doc_id, relevance, iteration) and GenericScoredDoc(query_id,
    doc_id, score) give the numbers of the files themselves."""
    formats = pytest.importorskip("ir_datasets.formats", reason="ir_datasets is a test extra")
    from ir_datasets.util import LocalDownload

    run, qrels = _rows(1)
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels))
    (tmp_path / "run").write_text("".join(f"{q} Q0 {d} {i} {s} tag\n" for i, (q, d, s) in enumerate(run)))
    qrels_iter = formats.TrecQrels(LocalDownload(tmp_path / "qrels"), {}).qrels_iter()
    run_iter = formats.TrecScoredDocs(LocalDownload(tmp_path / "run")).scoreddocs_iter()
    first = next(formats.TrecQrels(LocalDownload(tmp_path / "qrels"), {}).qrels_iter())
    assert type(first) is formats.TrecQrel and first._fields == ("query_id", "doc_id", "relevance", "iteration")
    res = tk.evaluate(run_iter, qrels=qrels_iter, metrics=METRICS, conventions="trec_eval")
    files = tk.evaluate(str(tmp_path / "run"), qrels=str(tmp_path / "qrels"), metrics=METRICS, conventions="trec_eval")
    assert res.metrics == METRICS and list(res.per_query.columns[:2]) == ["model", "query_id"]
    pd.testing.assert_frame_equal(res.per_query.drop(columns=["model", "query_id"]),
                                  files.per_query.drop(columns=["model", "query"]), check_exact=True)
    assert res.per_query["query_id"].tolist() == files.per_query["query"].tolist()
    assert res.info["missing_from_run"] == {"score": 1}


@pytest.mark.peers
def test_ir_datasets_iterators_equal_pytrec_eval():
    """The same iterators against ir_measures' pytrec_eval provider (pytrec_eval's conventions)."""
    ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test extra")
    pytest.importorskip("pytrec_eval", reason="pytrec_eval is a test extra")
    formats = pytest.importorskip("ir_datasets.formats", reason="ir_datasets is a test extra")
    run, qrels = _rows(2)
    scored = [formats.GenericScoredDoc(*r) for r in run]
    judged = [formats.TrecQrel(*q, "0") for q in qrels]
    measures = [ir_measures.P @ 5, ir_measures.R @ 10, ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.RR]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.pytrec_eval.iter_calc(measures, judged, scored)}
    res = tk.evaluate(iter(scored), qrels=iter(judged), metrics=measures, conventions="pytrec_eval",
                      missing_queries="zero")  # ir_measures gives a judged query the run misses 0
    pq = res.per_query.set_index("query_id")
    assert sorted(pq.index) == sorted({q for q, _ in theirs})
    for m in measures:
        for q in pq.index:
            assert pq.loc[q, str(m)] == pytest.approx(theirs[(q, str(m))], abs=1e-12), (q, m)


def test_ir_measures_frames_and_namedtuples():
    """ir_measures' frames (query_id, doc_id, score; query_id, doc_id, relevance) and its Qrel and
    ScoredDoc rows (ir_measures' own classes when it is installed, else namedtuples with its fields)."""
    run, qrels = _rows(3)
    want = _want(run, qrels)
    run_df = pd.DataFrame(run, columns=["query_id", "doc_id", "score"])
    qrels_df = pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]).assign(iteration="0")
    _same(tk.evaluate(run_df, qrels=qrels_df, metrics=METRICS), want, "query_id")
    try:
        from ir_measures import Qrel, ScoredDoc
    except ImportError:  # ir_measures/util.py: class Qrel(NamedTuple): query_id, doc_id, relevance, iteration='0'
        Qrel = namedtuple("Qrel", ["query_id", "doc_id", "relevance", "iteration"], defaults=["0"])  # noqa: PYI024
        ScoredDoc = namedtuple("ScoredDoc", ["query_id", "doc_id", "score"])  # noqa: PYI024
    rows = [ScoredDoc(*r) for r in run]
    _same(tk.evaluate(rows, qrels=[Qrel(*q) for q in qrels], metrics=METRICS), want, "query_id")
    _same(tk.evaluate((r for r in rows), qrels=(Qrel(*q) for q in qrels), metrics=METRICS), want, "query_id")
    # one frame holding grades and scores (judged rows only), without judgments apart
    both = run_df.merge(qrels_df, on=["query_id", "doc_id"])
    explicit = tk.evaluate(both, METRICS, query="query_id", item="doc_id")
    pd.testing.assert_frame_equal(tk.evaluate(both, METRICS).per_query, explicit.per_query, check_exact=True)


def test_dicts_of_dicts():
    """ir_measures' and pytrec_eval's {query: {doc: score}} run and {query: {doc: grade}} judgments."""
    run, qrels = _rows(4)
    run_dict: dict = {}
    for q, d, s in run:
        run_dict.setdefault(q, {})[d] = s
    qrels_dict: dict = {}
    for q, d, g in qrels:
        qrels_dict.setdefault(q, {})[d] = g
    _same(tk.evaluate(run_dict, qrels=qrels_dict, metrics=METRICS), _want(run, qrels), "query_id")
    with pytest.raises(tk.DataError, match="holds one value per pair.*qrels="):
        tk.evaluate(run_dict, METRICS)
    with pytest.raises(tk.DataError, match="except the value of '2'"):
        tk.evaluate({"1": {"D1": 1.0}, "2": [1.0]}, qrels=qrels_dict)


def test_arrow_and_polars_tables_with_ir_measures_names():
    import pyarrow as pa

    run, qrels = _rows(5)
    want = _want(run, qrels)
    run_df = pd.DataFrame(run, columns=["query_id", "doc_id", "score"])
    qrels_df = pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"])
    _same(tk.evaluate(pa.Table.from_pandas(run_df), qrels=pa.Table.from_pandas(qrels_df), metrics=METRICS), want,
          "query_id")
    pl = pytest.importorskip("polars", reason="polars is a test extra")
    _same(tk.evaluate(pl.from_pandas(run_df), qrels=pl.from_pandas(qrels_df), metrics=METRICS), want, "query_id")


# ---------------------------------------------------------------------------------------------
# PyTerrier


def _pyterrier_frames(run, qrels):
    """PyTerrier's result frame as TerrierRetrieve returns it (pyterrier/terrier/retriever.py: qid,
    docid, docno, rank, score, query; pyterrier/model.py add_ranks: rank counted from FIRST_RANK = 0 by
    score descending, ties in row order, method="first") and its qrels frame (qid, docno, label;
    pyterrier/datasets.py). Two queries share a text: the query text is no id."""
    res = pd.DataFrame(run, columns=["qid", "docno", "score"])
    res.insert(1, "docid", res["docno"].str[1:].astype("int64"))
    res["rank"] = (res.groupby("qid", sort=False)["score"].rank(ascending=False, method="first").astype("int64") - 1)
    res["query"] = res["qid"].map(lambda q: "chemical reactions" if q in ("1", "2") else f"topic {q}")
    return res, pd.DataFrame(qrels, columns=["qid", "docno", "label"])


def test_pyterrier_result_and_qrels_frames():
    run, qrels = _rows(6)
    res, pt_qrels = _pyterrier_frames(run, qrels)
    want = _want(run, qrels)
    _same(tk.evaluate(res, qrels=pt_qrels, metrics=METRICS), want, "qid")
    # a result frame with its labels merged in (res.merge(qrels, how="left"), unjudged as 0): no judgments apart
    merged = res.merge(pt_qrels, on=["qid", "docno"], how="left").fillna({"label": 0})
    explicit = tk.evaluate(merged, METRICS, query="qid", item="docno", relevance="label")
    pd.testing.assert_frame_equal(tk.evaluate(merged, METRICS).per_query, explicit.per_query, check_exact=True)
    # several systems stacked with a name column, as pt.Experiment names them
    other = res.assign(score=-res["score"])
    stacked = pd.concat([res.assign(name="BM25"), other.assign(name="DPH")])
    both = tk.evaluate(stacked, qrels=pt_qrels, metrics=METRICS, model="name")
    assert both.models == ["BM25", "DPH"]
    _same(tk.evaluate(other, qrels=pt_qrels, metrics=METRICS), both.per_query[both.per_query["model"] == "DPH"]
          .drop(columns="model").set_index("qid").rename_axis("q"), "qid")


def test_mixed_shapes_are_matched_column_by_column():
    """ir_datasets' judgments with a PyTerrier run, PyTerrier's judgments with an ir_measures run."""
    run, qrels = _rows(7)
    want = _want(run, qrels)
    res, pt_qrels = _pyterrier_frames(run, qrels)
    QrelRow = namedtuple("QrelRow", ["query_id", "doc_id", "relevance", "iteration"])  # noqa: PYI024
    _same(tk.evaluate(res, qrels=[QrelRow(*q, "0") for q in qrels], metrics=METRICS), want, "qid")
    run_df = pd.DataFrame(run, columns=["query_id", "doc_id", "score"])
    _same(tk.evaluate(run_df, qrels=pt_qrels, metrics=METRICS), want, "query_id")


@pytest.mark.peers
@pytest.mark.filterwarnings("ignore:The inplace keyword in")  # PyTerrier 1.1's add_ranks under pandas 3.1
def test_pyterrier_itself():
    """PyTerrier's own frames (pt.Transformer.from_df, pt.model.add_ranks, pt.Experiment, which needs no
    Java for transformers written in Python) when python-terrier is installed: topkeval's numbers of its
    result frames are pt.Experiment's (through ir_measures' default pipeline: trec_eval's conventions)."""
    pt = pytest.importorskip("pyterrier", reason="python-terrier is not a test extra (it needs Java for its retrievers)")
    from ir_measures import AP, RR, P, nDCG

    run, qrels = _rows(8)
    res, pt_qrels = _pyterrier_frames(run, qrels)
    res = pt.model.add_ranks(res.drop(columns="rank"))
    topics = res[["qid", "query"]].drop_duplicates()
    system = pt.Transformer.from_df(res)
    measures = [P @ 5, AP, nDCG @ 10, RR]
    theirs = pt.Experiment([system], topics, pt_qrels, eval_metrics=measures, perquery=True)
    ours = tk.evaluate(system(topics), qrels=pt_qrels, metrics=measures, conventions="pytrec_eval",
                       missing_queries="zero").per_query.set_index("qid")
    for row in theirs.itertuples():
        assert ours.loc[row.qid, row.measure] == pytest.approx(row.value, abs=1e-12), row


# ---------------------------------------------------------------------------------------------
# what is refused, and why


def test_ambiguous_and_unreadable_shapes_are_refused():
    run, qrels = _rows(9)
    frame = pd.DataFrame(run, columns=["query_id", "doc_id", "score"]).assign(qid=lambda f: f["query_id"],
                                                                               docno=lambda f: f["doc_id"])
    with pytest.raises(tk.ColumnError, match=r"id columns of ir_measures / ir_datasets \('query_id', 'doc_id'\) and of "
                                             r"PyTerrier \('qid', 'docno'\).*query='<column>'"):
        tk.evaluate(frame, qrels=pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]))
    assert tk.evaluate(frame, ["P@5"], query="qid", item="docno",
                       qrels=pd.DataFrame(qrels, columns=["qid", "docno", "relevance"])).metrics == ["P@5"]
    with pytest.raises(tk.DataError, match=r"iterator \(generator\) of tuples.*namedtuples"):
        tk.evaluate((r for r in run), qrels=pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]))
    A = namedtuple("A", ["query_id", "doc_id", "score"])  # noqa: PYI024
    B = namedtuple("B", ["query_id", "doc_id", "score"])  # noqa: PYI024
    with pytest.raises(tk.DataError, match="row 0 is a A, row 1 a B"):
        tk.evaluate([A(*run[0]), B(*run[1])], qrels=pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]))
    with pytest.raises(tk.DataError, match="iterator without rows"):
        tk.evaluate(iter([A(*run[0])][1:]), qrels=pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]))


def test_a_tools_query_id_is_the_query_even_beside_a_query_column():
    """A frame in a tool's shape that also has a 'query' column (PyTerrier's query text, which a frame
    renamed for ir_measures keeps): the tool's query id is the query, so two topics with the same text
    stay apart; a default relevance column the table has is read as always."""
    pt = pd.DataFrame({"qid": ["401", "401", "402", "402"], "docno": ["a", "b", "c", "d"], "score": [2.0, 1.0, 2.0, 1.0],
                       "query": ["wind power"] * 4, "label": [1, 0, 0, 1]})
    irm = pt.rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
    explicit = tk.evaluate(pt, ["P@1", "rr"], query="qid", item="docno", relevance="label").per_query
    assert explicit["P@1"].tolist() == [1.0, 0.0]
    for frame, query in ((pt, "qid"), (irm, "query_id")):
        got = tk.evaluate(frame, ["P@1", "rr"]).per_query
        assert got[query].tolist() == ["401", "402"]
        pd.testing.assert_frame_equal(got.drop(columns=query), explicit.drop(columns="qid"), check_exact=True)
    # with judgments apart, as a PyTerrier result frame renamed for ir_measures is evaluated
    run = irm.drop(columns="relevance")
    qrels = pd.DataFrame({"query_id": ["401", "402"], "doc_id": ["b", "d"], "relevance": [1, 1]})
    assert tk.evaluate(run, qrels=qrels, metrics=["P@1", "ap"]).per_query["ap"].tolist() == [0.5, 0.5]
    log = pd.DataFrame({"query": ["a", "a", "b"], "query_id": ["1", "1", "1"], "doc_id": ["x", "y", "x"],
                        "relevance": [1, 0, 1], "score": [0.2, 0.9, 0.5]})
    with pytest.raises(tk.DataError, match="twice"):  # query_id: one query, with the item x twice
        tk.evaluate(log, ["P@1"])
    by_query = tk.evaluate(log.rename(columns={"query": "user"}), ["P@1"], query="user")  # named: read as named
    assert by_query.per_query["P@1"].tolist() == [0.0, 1.0]


def test_explicit_names_settle_a_table_with_both_tools_columns():
    """Both tools' id columns: ambiguous when nothing is named; query= or item= naming one tool's column
    reads that tool's shape (its grade column too)."""
    t = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "b"], "query_id": ["1", "1"], "doc_id": ["b", "a"],
                      "score": [2.0, 1.0], "label": [1, 0]})
    with pytest.raises(tk.ColumnError, match="ambiguous"):
        tk.evaluate(t, ["P@1"])
    for kw in (dict(query="qid", item="docno"), dict(query="qid"), dict(item="docno"),
               dict(query="qid", item="docno", relevance="label")):
        assert tk.evaluate(t, ["P@1"], **kw).summary.iloc[0, 0] == 1.0, kw  # a (label 1) first
    qrels = pd.DataFrame({"qid": ["1"], "docno": ["a"], "label": [1]})
    assert tk.evaluate(t, qrels=qrels, query="qid", item="docno", metrics=["P@1"]).summary.iloc[0, 0] == 1.0


def test_several_systems_records_and_plain_tuples_are_refused_with_the_way_to_give_them():
    """pt.Experiment takes a list of systems (or names them): topkeval takes one stacked table with a
    name column (model=). Lists of dicts and of plain tuples: give a table."""
    run, qrels = _rows(10)
    res, pt_qrels = _pyterrier_frames(run, qrels)
    for systems in ([res, res], {"BM25": res, "DPH": res}):
        with pytest.raises(tk.DataError, match=r"one per system.*pd.concat.*model='name'"):
            tk.evaluate(systems, qrels=pt_qrels, metrics=METRICS)
    records = [{"query_id": q, "doc_id": d, "score": s} for q, d, s in run]
    with pytest.raises(tk.DataError, match=r"list of dicts \(records\).*pd.DataFrame\(records\)"):
        tk.evaluate(records, qrels=pt_qrels, metrics=METRICS)
    with pytest.raises(tk.DataError, match="list of plain tuples"):
        tk.evaluate(run, qrels=pt_qrels, metrics=METRICS)
    stacked = pd.concat([res.assign(name=name) for name in ("BM25", "DPH")])
    assert tk.evaluate(stacked, qrels=pt_qrels, metrics=METRICS, model="name").models == ["BM25", "DPH"]


def test_rows_with_ids_that_are_not_text_and_their_messages():
    """A lone surrogate (undecodable bytes read with errors='surrogateescape') in the ids of rows; rows of
    two classes of one name; rows without the column asked for say what they were read from."""
    ScoredDoc = namedtuple("ScoredDoc", ["query_id", "doc_id", "score"])  # noqa: PYI024
    Qrel = namedtuple("Qrel", ["query_id", "doc_id", "relevance"])  # noqa: PYI024
    qrels = [Qrel("q1", "a", 1)]
    with pytest.raises(tk.ColumnError, match=r"'\\udc80' of column 'doc_id' is not valid text.*surrogate"):
        tk.evaluate([ScoredDoc("q1", "\udc80", 1.0)], qrels=qrels, metrics=["P@1"])
    with pytest.raises(tk.ColumnError, match="not valid text"):
        tk.evaluate([ScoredDoc("q1", "a", 1.0)], qrels=[Qrel("\udc80", "a", 1)], metrics=["P@1"])
    frame = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": pd.Series(["\udc80", "a"], dtype=object),
                          "score": [1.0, 1.0]})
    with pytest.raises(tk.ColumnError, match="not valid text"):  # an order as text is needed: refused there too
        tk.evaluate(frame, qrels=pd.DataFrame(qrels), metrics=["P@1"], conventions="trec_eval")
    Other = namedtuple("ScoredDoc", ["query_id", "doc_id", "score"])  # noqa: PYI024
    with pytest.raises(tk.DataError, match=r"row 0 is a ScoredDoc \(of .*\), row 1 a ScoredDoc \(another class"):
        tk.evaluate([ScoredDoc("q1", "a", 1.0), Other("q1", "b", 2.0)], qrels=qrels, metrics=["P@1"])
    with pytest.raises(tk.ColumnError, match=r"'relevance' \(relevance=\) not found in the rows \(ScoredDoc"):
        tk.evaluate(iter([ScoredDoc("q1", "a", 1.0)]), metrics=["P@1"])


def test_judgments_sharing_no_query_name_the_query_column_passed_over():
    run = pd.DataFrame({"qid": ["401", "401", "402"], "item": ["a", "b", "c"], "score": [2.0, 1.0, 1.0],
                        "query": ["black bear", "black bear", "wind"]})
    qrels = pd.DataFrame({"query": ["401", "402"], "item": ["b", "c"], "relevance": [1, 1]})
    with pytest.raises(tk.DataError, match=r"share no query.*also has 'qid', not read as the query id.*query='qid'"):
        tk.evaluate(run, qrels=qrels, item="item", metrics=["P@1"])
