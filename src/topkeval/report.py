"""Rendering Results for people and programs: rich tables, markdown, CSV, JSON.

Only presentation lives here; every number comes from Results.
"""

from __future__ import annotations

import io
import json
import math

import pandas as pd


def fmt(value, digits: int = 4) -> str:
    """A number for a table: fixed digits, integers as integers, nan as 'nan'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(frame: pd.DataFrame, digits: int = 4) -> str:
    """A GitHub-flavoured markdown table of a DataFrame (index included when it is named)."""
    if frame.index.name is not None:
        frame = frame.reset_index()
    head = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" if frame[c].dtype == object else "---:" for c in frame.columns) + "|"
    rows = ["| " + " | ".join(fmt(v, digits) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def csv(frame: pd.DataFrame) -> str:
    """CSV text (full precision)."""
    buf = io.StringIO()
    frame.to_csv(buf, index=frame.index.name is not None)
    return buf.getvalue()


def json_text(obj) -> str:
    """JSON with NaN written as null."""
    from .results import json_ready

    return json.dumps(json_ready(obj), indent=2)


def rich_table(frame: pd.DataFrame, title: str | None = None, digits: int = 4):
    """A rich Table of a DataFrame (numbers right-aligned)."""
    from rich.table import Table

    if frame.index.name is not None:
        frame = frame.reset_index()
    table = Table(title=title, show_lines=False)
    for c in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[c])
        table.add_column(str(c), justify="right" if numeric else "left")
    for row in frame.itertuples(index=False):
        table.add_row(*[fmt(v, digits) for v in row])
    return table


def info_lines(info: dict) -> list[str]:
    """What a user might not expect, in sentences: skipped queries, ties at a cutoff."""
    lines = [f"{info['evaluated']:,} of {info['queries']:,} queries evaluated"
             + (f"; {info['skipped_empty']:,} without a relevant item skipped (empty_queries='skip')"
                if info["skipped_empty"] else "")]
    ties = {m: c for m, c in info.get("ties_at_cutoff", {}).items() if c}
    if ties:
        rule = info["conventions"]["ties"]
        lines.append("ties across a cutoff (resolved by ties=" + repr(rule) + "): "
                     + ", ".join(f"{m}: {c:,} queries" for m, c in ties.items()))
    return lines


def trec_lines(res, per_query: bool) -> str:
    """trec_eval-style lines: ``measure <tab> query-or-all <tab> value``, per-query lines first (-q).

    num_ret, num_rel and num_rel_ret are summed over queries on the ``all`` line, as trec_eval does.
    """
    from .names import TREC_SUMMED, trec_name

    lines = []
    for model in res.models:
        lines.append(f"{'runid':<22}\tall\t{model}")
        part = res.per_query[res.per_query["model"] == model]
        for row in (part.to_dict("records") if per_query else []):
            for metric in res.metrics:
                lines.append(_trec_line(trec_name(metric), str(row["query"]), row[metric], metric in TREC_SUMMED))
        lines.append(f"{'num_q':<22}\tall\t{len(part)}")
        for metric in res.metrics:
            value = part[metric].sum() if metric in TREC_SUMMED else res.summary.loc[model, metric]
            lines.append(_trec_line(trec_name(metric), "all", value, metric in TREC_SUMMED))
    return "\n".join(lines) + "\n"


def _trec_line(name: str, query: str, value, integer: bool) -> str:
    text = "nan" if value != value else (str(int(round(value))) if integer else f"{value:.4f}")
    return f"{name:<22}\t{query}\t{text}"
