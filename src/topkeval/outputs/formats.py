"""Output formats: one registry that the command line and :class:`~topkeval.Results` both use.

What is shown (the summary, the per-query rows, a comparison, a diff) is a :class:`Document`: one or
more tables (:class:`Block`), notes (sentences about the counts: skipped queries, ties at a cutoff)
and, for JSON, the structured payload. A format turns a Document into text; every format renders
every Document, so a new format (one function and one :func:`register_format` line) reaches
``topkeval evaluate/compare/diff/demo --format`` and :meth:`Results.to_string` at once.

=============  ===============================================================================
``table``      a terminal table (rich), notes under it
``markdown``   GitHub markdown tables (every id escaped), notes in italics
``csv``        the first table, full precision (a file holds one table)
``json``       the payload (NaN as null, infinities as "inf" / "-inf", ids as JSON values; a Tukey p-value
               below 1e-12 as 1e-12, an upper bound, where text formats print "< 1e-12": said by
               ``p_value_is_upper_bound`` and ``p_floor``), or the first table's rows
``trec``       trec_eval's lines (``name query value``): the evaluation's own text only
=============  ===============================================================================
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import ParameterError, TopkevalError
from ..inputs.segments import ALL
from ..params import Bool, Function, Name, Text, validate_params
from . import text


@dataclass(frozen=True)
class Block:
    """One table of a Document: the frame (what files get: numbers at full precision), the frame a
    person reads (``shown``: intervals as ``[low, high]``, "not retrieved"; default the frame), its
    title, the text columns shown right-aligned, and per-column functions that write a value as
    text (p-values)."""

    frame: pd.DataFrame
    title: str | None = None
    right: tuple = ()
    formats: dict = field(default_factory=dict)
    shown: pd.DataFrame | None = None

    def for_people(self) -> pd.DataFrame:
        return self.frame if self.shown is None else self.shown


@dataclass(frozen=True)
class Document:
    """What one command or call shows: its tables, its notes, what JSON writes (default: the rows of
    the first table), and texts that only some formats have (``{"trec": function -> text}``)."""

    blocks: list[Block]
    notes: list[str] = field(default_factory=list)
    payload: object = None
    texts: dict = field(default_factory=dict)
    digits: int = 4


@dataclass(frozen=True)
class OutputFormat:
    """A registered format: its name, what it writes, and ``render(document, width, terminal) -> str``."""

    name: str
    description: str
    render: Callable[[Document, int | None, bool], str]
    general: bool = True  # renders every Document (False: only those that carry its text, as trec)


FORMATS: dict[str, OutputFormat] = {}
BUILT_IN: frozenset[str] = frozenset()  # the formats of this module, never replaced (set at its end)


@validate_params(name=Name(), render=Function(), description=Text(empty=False, max_length=200), general=Bool(),
                 replace=Bool())
def register_format(name: str, render: Callable[[Document, int | None, bool], str], description: str, *,
                    general: bool = True, replace: bool = False) -> None:
    """Add an output format: ``render(document, width, terminal)`` returns its text (``width``: the
    columns to fill, or None; ``terminal``: styled for a terminal). ``general=False`` marks a format
    only some documents carry (trec).

    ``name`` is what ``--format`` takes: lowercase letters, digits, ``_`` and ``-``. The built-in
    formats can never be replaced; a format registered before only with ``replace=True`` (a notebook
    cell run twice), as :func:`~topkeval.define_metric` does with metrics."""
    if name in BUILT_IN:
        raise ParameterError(f"register_format: {name!r} is a built-in output format; choose another name.")
    if name in FORMATS and not replace:
        raise ParameterError(f"register_format: {name!r} is registered already; pass replace=True to register it "
                             "again.")
    _add(name, render, description, general)


def _add(name: str, render: Callable[[Document, int | None, bool], str], description: str,
         general: bool = True) -> None:
    FORMATS[name] = OutputFormat(name, description, render, general)


def names(*, general_only: bool = False) -> tuple[str, ...]:
    """The registered formats' names (``general_only``: those every Document has)."""
    return tuple(n for n, f in FORMATS.items() if f.general or not general_only)


def render(fmt: str, document: Document, width: int | None = None, terminal: bool = False) -> str:
    """``document`` as text in format ``fmt``.

    >>> doc = Document([Block(pd.DataFrame({"model": ["a"], "recall@2": [0.5]}))], notes=["1 query skipped"])
    >>> print(render("markdown", doc), end="")
    | model | recall@2 |
    |---|---:|
    | a | 0.5000 |
    <BLANKLINE>
    _1 query skipped_
    >>> print(render("csv", doc), end="")
    model,recall@2
    a,0.5
    """
    if fmt not in FORMATS:
        raise ParameterError(f"format {fmt!r} is not an output format; the formats are {', '.join(map(repr, FORMATS))}.")
    if fmt in BUILT_IN:
        return FORMATS[fmt].render(document, width, terminal)
    try:  # a format of the user's (register_format): its failure, named
        out = FORMATS[fmt].render(document, width, terminal)
    except TopkevalError:
        raise
    except Exception as exc:
        raise ParameterError(f"The render function of output format {fmt!r} raised {type(exc).__name__}: {exc} "
                             "(fix it, or register it again with replace=True).") from exc
    if not isinstance(out, str):
        raise ParameterError(f"The render function of output format {fmt!r} must return the text (a str); it "
                             f"returned {type(out).__name__}.")
    return out


def _cells(block: Block) -> pd.DataFrame:
    """The frame a person reads, with the columns of ``formats`` written as text."""
    frame = block.for_people()
    if not block.formats:
        return frame
    return frame.assign(**{c: frame[c].map(f) for c, f in block.formats.items() if c in frame})


def _table(document: Document, width: int | None, terminal: bool) -> str:
    from rich.console import Console
    from rich.measure import Measurement

    buf = io.StringIO()
    console = Console(file=buf, width=width or 160, soft_wrap=False, highlight=False, force_terminal=terminal,
                      color_system="auto" if terminal else None)
    for block in document.blocks:
        table = text.rich_table(block.for_people(), title=block.title, digits=document.digits,
                                formats=block.formats or None, right=block.right)
        # a terminal narrower than the table can be (its numbers and words whole): the table at its narrowest,
        # in lines longer than the terminal, rather than numbers broken across lines or cut off
        needed = Measurement.get(console, console.options.update_width(10**6), table).minimum
        console.print(table, width=max(needed, console.width), crop=False)
    return buf.getvalue() + "".join(f"{note}\n" for note in document.notes)


def _markdown(document: Document, width: int | None, terminal: bool) -> str:
    tables = [text.markdown(_cells(b), document.digits, right=b.right) + "\n" for b in document.blocks]
    return "\n".join(tables) + "".join(f"\n_{text.markdown_text(text.visible(note))}_\n" for note in document.notes)


def _csv(document: Document, width: int | None, terminal: bool) -> str:
    return text.csv(document.blocks[0].frame)


def _json(document: Document, width: int | None, terminal: bool) -> str:
    payload = document.payload if document.payload is not None else text.records(document.blocks[0].frame)
    return text.json_text(payload) + "\n"


def _trec(document: Document, width: int | None, terminal: bool) -> str:
    if "trec" not in document.texts:
        raise ParameterError("trec_eval's lines hold one evaluation's values (name, query, value): format 'trec' "
                             "writes evaluation results, not a comparison, a diff or intervals.")
    return document.texts["trec"]()


def results_document(res, *, per_query: bool = False, ci: float | None = None,
                     beside: pd.DataFrame | None = None, labels: list | None = None,
                     interval: str | None = None) -> Document:
    """What an evaluation shows: the means (per segment with ``by=``; with the intervals of
    :meth:`~topkeval.Results.summary_ci` at level ``ci``), or with ``per_query`` every (model, query)
    row and then the means; the notes of ``info``; JSON gets :meth:`~topkeval.Results.to_dict`.

    ``beside``: one value per model of metrics that have no per-query value (beyond_accuracy's
    coverage, gini...: one row per model), shown beside the means (without an interval), and
    ``labels`` the metric columns shown, in order (the means' and ``beside``'s); ``interval`` the
    interval of ``ci`` (:data:`topkeval.stattests.INTERVALS`; by default the first)."""
    if ci is not None and per_query:
        raise ParameterError("ci gives intervals of the means; drop it, or per_query.")
    if beside is not None and res.by:
        raise ParameterError(f"{beside.columns[0]} describes each model's lists all together, never per segment: "
                             "drop by=, or ask for it without.")
    payload = res.to_dict(per_query=per_query)
    labels = list(labels) if labels is not None else res.metrics
    summary = _beside(res.summary, beside, labels)
    if beside is not None:
        payload["summary"] = {str(m): {c: text.json_ready(summary.loc[m, c]) for c in summary.columns}
                              for m in summary.index}
        payload["info"]["metrics"] = labels
        # each column's canonical name from its Metric (the results') or as beyond_accuracy named it (beside's)
        names = {**beside.attrs.get("metric_names", {}),
                 **{label: str(m) for label, m in res.evaluation.metric_objects.items()}}
        payload["info"]["metric_names"] = {label: names[label] for label in labels}
        if beside.attrs.get("defaults"):
            payload["info"]["beyond_defaults"] = text.json_ready({**payload["info"].get("beyond_defaults", {}),
                                                                  **beside.attrs["defaults"]})
    if per_query:
        rows = res.to_pandas()
        rows = rows[[c for c in rows.columns if c not in res.metrics or c in labels]]
        blocks = [Block(rows, **_whole(rows, res.weight)), Block(summary, title="means over the queries")]
    elif ci is not None:
        numbers, shown = _with_ci(res, ci, interval)
        numbers, shown = _beside(numbers, beside, None), _beside(shown, beside, None)
        blocks = [Block(numbers, shown=shown)]
        payload["summary_ci"] = text.records(_summary_ci(res, ci, interval))
    elif res.by:
        segments = res.segments  # with weight=, the sum of each segment's weights
        blocks = [Block(segments, title="by " + ", ".join(map(text.visible, res.by)),
                        **_whole(segments, "weight" if res.weight else None))]
    else:
        blocks = [Block(summary)]
    texts = {} if ci is not None or beside is not None else {"trec": lambda: text.trec_lines(res, per_query)}
    info = dict(res.info)
    if beside is not None and beside.attrs.get("defaults"):
        info["beyond_defaults"] = {**info.get("beyond_defaults", {}), **beside.attrs["defaults"]}
    return Document(blocks, notes=text.info_lines(info, res.evaluation.metric_objects), payload=payload, texts=texts)


def _beside(frame: pd.DataFrame, beside: pd.DataFrame | None, labels: list | None) -> pd.DataFrame:
    """``frame`` (one row per model) with the columns of ``beside``, the metric columns in ``labels``'
    order (the other columns, as intervals, after each metric's own: kept as they are)."""
    if beside is None:
        return frame if labels is None else frame[[c for c in labels if c in frame.columns]]
    joined = frame.join(beside[[c for c in beside.columns if c not in frame.columns]], how="left")
    if labels is None:
        return joined
    return joined[[c for c in labels if c in joined.columns]]


def _whole(frame: pd.DataFrame, column: str | None) -> dict:
    """The Block options that show ``column`` (weights) without decimals where all its values are
    whole numbers (a count of visits: 4792, not 4792.0000)."""
    if column is None or column not in frame or not pd.api.types.is_numeric_dtype(frame[column]):
        return {}
    values = frame[column].to_numpy(dtype=float)
    if not (np.isfinite(values) & (np.abs(values) < 2.0**53) & (values == np.round(values))).all():
        return {}
    return {"right": (column,), "formats": {column: text.whole}}


def _method(interval: str | None) -> dict:
    """summary_ci's ``method=`` for an interval named, or nothing (its default)."""
    return {} if interval is None else {"method": interval}


def _summary_ci(res, level: float, interval: str | None):
    """``res.summary_ci`` at ``level`` with the interval named (``interval=``, as the document was asked
    for it: a refusal of summary_ci's ``method=`` says ``interval=``)."""
    try:
        return res.summary_ci(confidence=level, **_method(interval))
    except ParameterError as exc:
        if interval is None or not str(exc).startswith("method="):
            raise
        raise ParameterError("interval=" + str(exc)[len("method="):].replace("use method=", "use interval=")) from None


def _with_ci(res, level: float, interval: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary with each mean's interval, one row per model: for files ``metric``, ``metric
    ci_low`` and ``metric ci_high`` columns; for people ``metric`` and ``metric 95% CI`` (``[low, high]``)."""
    ci = _summary_ci(res, level, interval)
    for name in res.by:  # the summary holds every query: the overall rows of the breakdown
        ci = ci[ci[name] == ALL]
    ci = ci.set_index(["model", "metric"])
    numbers: dict = {}
    shown: dict = {}
    for metric in res.metrics:
        numbers[metric] = shown[metric] = res.summary[metric]
        low = [ci.loc[(m, metric), "ci_low"] for m in res.models]
        high = [ci.loc[(m, metric), "ci_high"] for m in res.models]
        numbers[f"{metric} ci_low"], numbers[f"{metric} ci_high"] = low, high
        shown[f"{metric} {level:.0%} CI"] = [f"[{lo:.4f}, {hi:.4f}]" if lo == lo else "none"  # NaN: withheld
                                             for lo, hi in zip(low, high)]
    return pd.DataFrame(numbers, index=res.summary.index), pd.DataFrame(shown, index=res.summary.index)


_add("table", _table, "a terminal table, notes under it")
_add("markdown", _markdown, "GitHub markdown tables, notes in italics")
_add("csv", _csv, "the first table as CSV, full precision")
_add("json", _json, "JSON: NaN as null, infinities as \"inf\" / \"-inf\", ids as JSON values (a Tukey p-value "
                    "below 1e-12 as 1e-12, a bound)")
_add("trec", _trec, "trec_eval's lines: name, query, value", general=False)
BUILT_IN = frozenset(FORMATS)
