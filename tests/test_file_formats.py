"""The one table of file formats (topkeval.inputs.formats): every reader asks it, and a new format
is one row. The numbers of a file are those of the same rows held in memory (the oracle: the
in-memory path, itself tested against brute force in tests/test_reference.py), and a hand count."""

from __future__ import annotations

import pandas as pd
import pytest

import topkeval as tk
from topkeval.inputs import formats, is_trec_path
from topkeval.inputs.formats import CSV, PARQUET, TSV, FileFormat, format_of, register_format

ROWS = pd.DataFrame({"query": ["q1", "q1", "q1", "q2", "q2"], "relevance": [1, 0, 1, 0, 1],
                     "score": [0.9, 0.8, 0.1, 0.5, 0.4]})


@pytest.mark.parametrize(("name", "fmt"), [("a.parquet", PARQUET), ("A.PQ", PARQUET), ("x.y.csv", CSV),
                                           ("a.csv.gz", CSV), ("a.tsv", TSV), ("a.TSV.GZ", TSV),
                                           ("run.txt", None), ("a.parquet.gz", None), ("a.json", None)])
def test_a_name_says_its_format(name, fmt):
    assert format_of(name) is fmt


def test_every_row_has_a_schema_reader_a_reader_and_suffixes():
    for fmt in formats.FORMATS:
        assert fmt.suffixes and all(s == s.lower() and s.startswith(".") for s in fmt.suffixes)
        assert callable(fmt.columns) and callable(fmt.read)
    assert formats.table_suffixes(folder=True) == (".parquet", ".pq")


@pytest.fixture
def pipe_format():
    """A toy format: pipe-separated text, one row of the table (the CSV reader with its delimiter)."""
    saved = list(formats.FORMATS)
    register_format(FileFormat("psv", (".psv",), "pipe-separated text", CSV.columns, CSV.read, CSV.batches,
                               text=True, delimiter="|"))
    yield formats.FORMATS[-1]
    formats.FORMATS[:] = saved


def test_a_new_format_is_one_row(tmp_path, pipe_format):
    path = tmp_path / "log.psv"
    ROWS.to_csv(path, sep="|", index=False)
    assert format_of(path) is pipe_format and not is_trec_path(path)
    expected = tk.evaluate(ROWS, ["recall@2", "precision@2"]).summary
    # recall@2: q1 finds 1 of 2, q2 1 of 1 -> 0.75; precision@2: 1/2 each
    assert expected.loc["score"].tolist() == [0.75, 0.5]
    pd.testing.assert_frame_equal(tk.evaluate(str(path), ["recall@2", "precision@2"]).summary, expected)
    streamed = tk.evaluate(str(path), ["recall@2", "precision@2"], chunk_rows=2)  # the row's batch iterator
    pd.testing.assert_frame_equal(streamed.summary, expected)
    assert tk.inputs.tables.column_names(str(path)) == ["query", "relevance", "score"]


def test_without_the_row_the_file_is_not_a_table(tmp_path):
    path = tmp_path / "log.psv"
    ROWS.to_csv(path, sep="|", index=False)
    assert format_of(path) is None and is_trec_path(path)  # read as a TREC run, as any unknown file
