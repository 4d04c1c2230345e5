"""The one table of file formats: which files are read as tables, how, and in batches.

Every place that knows a file's kind by its name asks this table: the readers of tables
(:mod:`topkeval.inputs.tables`: a file read whole, its column names), the streamed path
(:mod:`topkeval.inputs.stream`: a file read in batches), the checks of a path before it is read
(:mod:`topkeval.inputs.paths`: a ``.parquet`` file of text, a gzip file named ``.csv``...), what
is a TREC run or qrels file (:func:`topkeval.inputs.is_trec_path`: an existing file that no row
here names, nor another known format), the command line (``--save``, curve files) and Spark.

Each row (:class:`FileFormat`) holds

=============  ============================================================================
``suffixes``   the endings of a file's name (lower case, every suffix of the name: ``.csv.gz``)
``columns``    the schema reader: the column names of a file, without reading its rows
``read``       the reader: ``read(path, columns, text_columns)``, a pyarrow Table of those
               columns (the id columns ``text_columns`` as text where the format has no types)
``batches``    the batch iterator: ``batches(path, columns, text_columns, chunk_rows)``, tables of
               about ``chunk_rows`` rows each (None: never streamed)
``magic``      the bytes its files start with (checked against the name), or None
``text``       delimited text (checked to be text; ``.gz`` variants are decompressed)
``folder``     a folder of such files is read as one table (a dataset)
=============  ============================================================================

How to add a format: one row in :data:`FORMATS` (or :func:`register_format`), its three functions
beside it. Nothing else spells a suffix.

>>> format_of("runs/a.csv.gz").name, format_of("a.PQ").name, format_of("run.txt") is None
('csv', 'parquet', True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileFormat:
    """One format of table files (see the module docstring)."""

    name: str
    suffixes: tuple[str, ...]
    description: str
    columns: Callable[[Path], list[str]]
    read: Callable[..., object]
    batches: Callable[..., Iterator] | None = None
    magic: bytes | None = None
    text: bool = False
    folder: bool = False
    delimiter: str | None = None


# ---------------------------------------------------------------------------------------------
# parquet


def _parquet_columns(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    return list((pq.read_schema(path) if path.is_file() else pq.ParquetDataset(path).schema).names)


def _parquet_read(path: Path, columns: Sequence[str], text_columns: Sequence[str] = ()):
    """The wanted columns (a parquet file has its own types: ids read as they are)."""
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=list(columns))


def _parquet_batches(path: Path, columns, text_columns, chunk_rows: int):
    """Tables of about ``chunk_rows`` rows, read one row group at a time.

    (``ParquetFile.iter_batches`` was measured to keep every batch's buffers alive: 1.7 GB of
    Arrow memory after 100M rows; reading row groups one by one stays flat.)
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                 and format_of(p.name) is PARQUET)
    # the files of a folder are read as the in-memory reader reads the folder: in the dataset's schema
    schema = None if path.is_file() else pq.ParquetDataset(path).schema
    pending, size = [], 0
    for file in files:
        pf = pq.ParquetFile(file)
        for i in range(pf.metadata.num_row_groups):
            table = pf.read_row_group(i, columns=list(columns))
            if schema is not None:
                table = _in_schema(table, schema, columns, path, file)
            for start in range(0, table.num_rows, chunk_rows):
                part = table.slice(start, chunk_rows)
                pending.append(part)
                size += part.num_rows
                if size >= chunk_rows:
                    yield pa.concat_tables(pending).combine_chunks()
                    pending, size = [], 0
    if pending:
        yield pa.concat_tables(pending).combine_chunks()


def _in_schema(table, schema, columns, path: Path, file: Path):
    """A table read from one file of a parquet folder, in the folder's schema: each column cast to its
    type (an error if a value does not fit, as when the folder is read whole), a missing one null."""
    import pyarrow as pa

    from ..errors import InputFileError

    arrays = []
    for name in columns:
        kind = schema.field(name).type
        if name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, kind))
            continue
        column = table.column(name)
        try:
            arrays.append(column if column.type == kind else column.cast(kind))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InputFileError(f"Cannot read '{path}': {str(exc).strip().splitlines()[0]} (column {name!r} of "
                                 f"'{file}' does not fit the folder's type {kind}; give every file the same column "
                                 "types).") from None
    return pa.Table.from_arrays(arrays, names=list(columns))


# ---------------------------------------------------------------------------------------------
# delimited text (CSV, TSV)


def csv_options(path: Path, columns: Sequence[str], text_columns: Sequence[str] = ()):
    """Arrow CSV options: the wanted columns only, id columns as text (so "007" stays "007"), the
    delimiter of the file's format."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    fmt = format_of(path)
    return (pcsv.ParseOptions(delimiter=(fmt.delimiter if fmt is not None and fmt.delimiter else ",")),
            pcsv.ConvertOptions(include_columns=list(columns),
                                column_types={c: pa.string() for c in text_columns},
                                strings_can_be_null=False))


def _csv_columns(path: Path) -> list[str]:
    import pyarrow.csv as pcsv

    return list(pcsv.open_csv(path, parse_options=csv_options(path, [])[0]).schema.names)


def _csv_read(path: Path, columns: Sequence[str], text_columns: Sequence[str] = ()):
    import pyarrow.csv as pcsv

    parse, convert = csv_options(path, columns, text_columns)
    return pcsv.read_csv(path, parse_options=parse, convert_options=convert)


def _csv_batches(path: Path, columns, text_columns, chunk_rows: int):
    """Tables of about ``chunk_rows`` rows of a CSV file, read by Arrow's streaming reader."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    parse, convert = csv_options(path, columns, text_columns)
    reader = pcsv.open_csv(path, parse_options=parse, convert_options=convert,
                           read_options=pcsv.ReadOptions(block_size=1 << 22))
    pending, size = [], 0
    for batch in reader:
        pending.append(batch)
        size += batch.num_rows
        if size >= chunk_rows:
            yield pa.Table.from_batches(pending).combine_chunks()
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending).combine_chunks()


# ---------------------------------------------------------------------------------------------
# the table


PARQUET = FileFormat("parquet", (".parquet", ".pq"), "a parquet file, or a folder of them (a dataset)",
                     _parquet_columns, _parquet_read, _parquet_batches, magic=b"PAR1", folder=True)
CSV = FileFormat("csv", (".csv", ".csv.gz"), "comma-separated text, gzip-compressed as .csv.gz",
                 _csv_columns, _csv_read, _csv_batches, text=True, delimiter=",")
TSV = FileFormat("tsv", (".tsv", ".tsv.gz"), "tab-separated text, gzip-compressed as .tsv.gz",
                 _csv_columns, _csv_read, _csv_batches, text=True, delimiter="\t")

#: Every format of table files, asked in order (the longest matching suffix wins).
FORMATS: list[FileFormat] = [PARQUET, CSV, TSV]

#: Other formats of data, never read as a TREC file (a clear error names the formats read instead).
OTHER_SUFFIXES = (".xlsx", ".xls", ".json", ".jsonl", ".feather", ".arrow", ".ipc", ".orc", ".avro", ".pkl",
                  ".pickle", ".h5", ".hdf5", ".zip", ".npy", ".npz")

#: The compressed variant of a text format: its suffix after the format's own.
GZIP_SUFFIX = ".gz"


def register_format(fmt: FileFormat) -> None:
    """Add a format of table files (or replace the one of the same name)."""
    FORMATS[:] = [f for f in FORMATS if f.name != fmt.name] + [fmt]


def format_of(path) -> FileFormat | None:
    """The format a file's name says (its suffixes, any case), or None (a TREC file, or unknown)."""
    name = "".join(Path(path).suffixes).lower()
    found = [(len(s), f) for f in FORMATS for s in f.suffixes if name.endswith(s)]
    return max(found, key=lambda x: x[0])[1] if found else None


def table_suffixes(**flags) -> tuple[str, ...]:
    """Every suffix of a table file (of the formats with the given flags: ``text=True``, ``folder=True``).

    >>> table_suffixes(folder=True)
    ('.parquet', '.pq')
    """
    return tuple(s for f in FORMATS if all(bool(getattr(f, k)) == bool(v) for k, v in flags.items())
                 for s in f.suffixes)


def is_gzip_name(path) -> bool:
    """A name ending in ``.gz`` (a compressed file, whatever it holds)."""
    return "".join(Path(path).suffixes).lower().endswith(GZIP_SUFFIX)


__all__ = ["CSV", "FORMATS", "OTHER_SUFFIXES", "PARQUET", "TSV", "FileFormat", "csv_options", "format_of",
           "is_gzip_name", "register_format", "table_suffixes"]
