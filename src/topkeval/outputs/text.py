"""Rendering Results for people and programs: rich tables, markdown, CSV, JSON, trec_eval lines.

Only presentation lives here; every number comes from Results. Every id, model name and metric
name is shown as it is: rich markup in an id is printed, not interpreted; markdown cells escape
``|``, ``<``, ``>`` and ``&``; control characters (tabs, newlines) are written as their escapes so
that a row stays a row; trec_eval lines refuse ids that whitespace would split.
"""

from __future__ import annotations

import datetime
import io
import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import DataError, plural

if TYPE_CHECKING:
    from ..metrics.names import Metric


def fmt(value, digits: int = 4) -> str:
    """A number for a table: fixed digits, integers as integers, nan as 'nan'; anything else as text.
    A number too small for two significant digits at ``digits`` decimals (a click rate, an inverse
    propensity estimate: 0.0000 would say "none") is written with ``digits`` significant digits.

    >>> fmt(0.5891), fmt(0.0032), fmt(0.0000321), fmt(-0.0004), fmt(0.0), fmt(float("nan")), fmt(0.3, 0)
    ('0.5891', '0.0032', '3.210e-05', '-4.000e-04', '0.0000', 'nan', '0')
    """
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return "nan"
    if isinstance(value, (float, np.floating)):
        if digits >= 2 and value != 0 and abs(value) < 10.0 ** (1 - digits) and math.isfinite(value):
            return f"{value:.{max(digits - 1, 0)}e}"
        return f"{value:.{digits}f}"
    if isinstance(value, bytes):
        return visible(value.decode("utf-8", "backslashreplace"))
    return visible(str(value))


def whole(value, digits: int = 4) -> str:
    """A number that may be whole (a weight, a sum of weights) for a table: without decimals when it
    is whole, as :func:`fmt` otherwise.

    >>> whole(4792.0), whole(2.5), whole(float("nan"))
    ('4792', '2.5000', 'nan')
    """
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and \
            math.isfinite(value) and abs(value) < 2.0**53 and float(value).is_integer():
        return str(int(value))
    return fmt(value, digits)


def visible(text: str) -> str:
    """Control characters written as escapes (``\\t``, ``\\n``, ``\\x00``), so one value stays on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def p_value_text(p, n_resamples: int | None = None, digits: int = 4, floor: float | None = None) -> str:
    """A p-value for people: ``< 1e-04`` at the smallest value the resampling can reach (never 0.0000).
    ``floor``: the smallest p a computed test tells apart (Tukey's HSD: 1e-12, the accuracy of the
    studentized range's integral); a p at it prints ``< 1e-12``, one between it and ``10^-digits``
    in two significant digits.

    >>> p_value_text(1 / 10001, 10_000), p_value_text(0.0312)
    ('< 1e-04', '0.0312')
    >>> p_value_text(1e-12, floor=1e-12), p_value_text(3.14e-9, floor=1e-12), p_value_text(0.25, floor=1e-12)
    ('< 1e-12', '3.1e-09', '0.2500')
    """
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "nan"
    if floor is not None and n_resamples is None:
        if p <= floor * (1 + 1e-9):
            return f"< {floor:.0e}"
        return f"{p:.{digits}f}" if p >= 10.0 ** -digits else f"{p:.1e}"
    floor = 1.0 / (1 + n_resamples) if n_resamples else 0.0
    if p <= floor * (1 + 1e-9) or p < 10.0 ** -digits:
        return f"< {max(floor, 10.0 ** -digits):.0e}"
    return f"{p:.{digits}f}"


def markdown_text(text: str) -> str:
    """Text in markdown as it is: HTML and markdown's own characters escaped (a cell, a note).

    A ``<`` that cannot open a tag (followed by a space or a digit: a p-value ``< 1e-04``) stays as it is.

    >>> print(markdown_text("<b>old</b> | *new*"), markdown_text("< 1e-04"))
    &lt;b&gt;old&lt;/b&gt; \\| \\*new\\* < 1e-04
    """
    for raw, safe in (("&", "&amp;"), (">", "&gt;"), ("\\", "\\\\"), ("|", "\\|"), ("`", "\\`"),
                      ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]"), ("$", "\\$")):
        text = text.replace(raw, safe)
    # HTML (a tag, a comment, an autolink) opens with '<' and a letter, '/', '!' or '?'; any other '<' is text
    return re.sub(r"<(?=[A-Za-z/!?]|$)", "&lt;", text)


def _markdown_cell(value, digits: int) -> str:
    return markdown_text(fmt(value, digits))


def markdown(frame: pd.DataFrame, digits: int = 4, right=()) -> str:
    """A GitHub-flavoured markdown table of a DataFrame (index included when it is named); numeric
    columns, and those of ``right`` (numbers written as text), right-aligned.

    >>> print(markdown(pd.DataFrame({"query": ["a|b", "<script>"], "v": [0.5, 1.0]})))
    | query | v |
    |---|---:|
    | a\\|b | 0.5000 |
    | &lt;script&gt; | 1.0000 |
    """
    if any(n is not None for n in frame.index.names):
        frame = frame.reset_index()
    head = "| " + " | ".join(_markdown_cell(c, digits) for c in frame.columns) + " |"
    rule = "|" + "|".join("---:" if c in right or pd.api.types.is_numeric_dtype(frame[c]) else "---"
                          for c in frame.columns) + "|"
    rows = ["| " + " | ".join(_markdown_cell(v, digits) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def csv(frame: pd.DataFrame) -> str:
    """CSV text (full precision; ids quoted where they need it)."""
    buf = io.StringIO()
    frame.to_csv(buf, index=any(n is not None for n in frame.index.names))
    return buf.getvalue()


def json_text(obj) -> str:
    """JSON with NaN written as null and ids of any type as JSON values."""
    return json.dumps(json_ready(obj), indent=2)


def json_ready(v):
    """Plain JSON values: numpy scalars unwrapped, NaN as None, dates as ISO text, bytes decoded,
    dict keys as text."""
    if isinstance(v, dict):
        return {str(k) if not isinstance(k, bytes) else k.decode("utf-8", "backslashreplace"): json_ready(x)
                for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_ready(x) for x in v]
    if isinstance(v, np.datetime64):
        return None if np.isnat(v) else str(v)
    if isinstance(v, np.timedelta64):
        return None if np.isnat(v) else str(v)
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v) or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time, pd.Timestamp)):
        return v.isoformat()
    if isinstance(v, (datetime.timedelta, pd.Timedelta)):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


#: What the side-by-side view shows for an item the other model did not retrieve (its ``other_rank`` is NaN).
NOT_RETRIEVED = "not retrieved"
#: the relevance of an item without a judgment (judgments apart), as people read it: not a 0
UNJUDGED = "unjudged"


def side_by_side_frame(view: pd.DataFrame, text: bool) -> pd.DataFrame:
    """A :meth:`Results.side_by_side` view with flat column names (``"rank"``, ``"<model> item"``,
    ``"<model> other rank"``...), for the command line.

    ``text=False`` keeps the values (for CSV and JSON: an empty position is NaN, an item the
    other model did not retrieve has the other rank None; both null in JSON); ``text=True`` gives the cells as people read
    them (for a table or markdown): ranks and whole grades without decimals, an empty position
    blank, ``"not retrieved"`` where the other model did not retrieve the item, and ``"unjudged"``
    as the relevance of an item without a judgment (judgments apart), never the 0 of a judged one.

    >>> view = pd.DataFrame({("", "rank"): [1, 2], ("a", "item"): ["x", None], ("a", "score"): [0.5, math.nan],
    ...                      ("a", "other_rank"): [math.nan, math.nan]})
    >>> side_by_side_frame(view, text=True).values.tolist()
    [['1', 'x', '0.5000', 'not retrieved'], ['2', '', '', '']]
    """
    flat = pd.DataFrame({"rank" if model == "" else f"{model} {field.replace('_', ' ')}": view[(model, field)].to_numpy()
                         for model, field in view.columns})
    if not text:
        for (_, field), name in zip(view.columns, flat.columns):
            if field == "other_rank":  # whole ranks, None where not retrieved (CSV: empty, JSON: null)
                flat[name] = pd.Series([None if v != v else int(v) for v in flat[name]], dtype=object)
        return flat
    def missing(v) -> bool:
        return v is None or isinstance(v, (float, np.floating)) and math.isnan(v)

    out = {}
    for (model, field), name in zip(view.columns, flat.columns):
        if field == "judged":  # said in the relevance cell ("unjudged"): no column of its own for people
            continue
        values = flat[name].tolist()
        present = [True] * len(values) if model == "" else [not missing(v) for v in view[(model, "item")]]
        unjudged = [v is False for v in view[(model, "judged")]] if (model, "judged") in view.columns else \
            [False] * len(values)
        cells = []
        for v, here, without in zip(values, present, unjudged):
            if not here:
                cells.append("")
            elif field == "relevance" and without:
                cells.append(UNJUDGED)
            elif field == "other_rank" and missing(v):
                cells.append(NOT_RETRIEVED)
            elif missing(v):
                cells.append("")
            elif field in ("rank", "other_rank") or (field == "relevance" and float(v).is_integer()):
                cells.append(str(int(v)))
            else:
                cells.append(fmt(v))
        out[name] = cells
    return pd.DataFrame(out)


def records(frame: pd.DataFrame) -> list[dict]:
    """Rows of a frame as JSON-ready dicts."""
    return [json_ready(r) for r in frame.to_dict(orient="records")]


def rich_table(frame: pd.DataFrame, title: str | None = None, digits: int = 4, formats: dict | None = None,
               right=()):
    """A rich Table of a DataFrame (numbers right-aligned; every cell plain text, never markup).

    ``formats`` maps a column to a function that turns its values into text; ``right`` names
    columns of text to right-align too (numbers already written as text).
    """
    from rich.table import Table
    from rich.text import Text

    if any(n is not None for n in frame.index.names):
        frame = frame.reset_index()
    table = Table(title=Text(title) if title else None, show_lines=False)
    formats = formats or {}
    cells = [[formats[c](v) if c in formats else fmt(v, digits) for c, v in zip(frame.columns, row)]
             for row in frame.itertuples(index=False)]
    for j, c in enumerate(frame.columns):
        numeric = c in right or pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        # a number never wraps ('0.0' over '663' reads as 0.0), nor does a word of up to 24 characters
        # (a longer id wraps, never cut short with an ellipsis): a narrow terminal gets the table wider
        if numeric:
            widest = max((len(row[j]) for row in cells), default=0)
        else:
            widest = min(24, max((len(word) for row in cells for word in row[j].split()), default=0))
        widest = max(widest, min(24, max((len(word) for word in fmt(c).split()), default=0)))
        table.add_column(Text(fmt(c)), justify="right" if numeric else "left", overflow="fold", min_width=widest)
    for row in cells:
        table.add_row(*[Text(cell) for cell in row])
    return table


def uneven(info: Mapping) -> bool:
    """Whether the models were evaluated on different numbers of queries because runs miss different
    judged queries (``missing_queries='skip'``): their means are then over different queries."""
    missing = info.get("missing_from_run") or {}
    per_model = info.get("evaluated_per_model") or {}
    return info.get("missing_queries", "skip") == "skip" and len(set(missing.values())) > 1 \
        and len(set(per_model.values())) > 1


def per_model_counts(info: Mapping) -> tuple[dict, dict, dict]:
    """Each model's queries evaluated, skipped as empty, and without a row of its own (a stacked
    table's model that lacks some queries; judged queries a run lacks are ``missing_from_run``,
    said apart): for each model the three add up to ``info["queries"]``."""
    evaluated = dict(info.get("evaluated_per_model") or {})
    skipped = dict(info.get("skipped_empty_per_model") or {m: info.get("skipped_empty", 0) for m in evaluated})
    absent = {}
    if "missing_from_run" not in info and "skipped_empty_per_model" in info:
        absent = {m: info["queries"] - evaluated.get(m, 0) - skipped.get(m, 0) for m in evaluated}
    return evaluated, skipped, absent


def _differ(counts: Mapping) -> bool:
    return len(set(counts.values())) > 1


def counts_differ(info: Mapping) -> bool:
    """Whether the models' counts of queries evaluated, skipped or without a row differ (then each
    model's are said: maxima of different models would not add up)."""
    evaluated, skipped, absent = per_model_counts(info)
    return uneven(info) or _differ(evaluated) or _differ(skipped) or _differ(absent)


def evaluated_text(info: Mapping) -> str:
    """"68 of 80 queries evaluated", or each model's count when they differ (runs missing different
    judged queries, a stacked table's models).

    Examples
    --------
    >>> evaluated_text({"evaluated": 4, "queries": 5})
    '4 of 5 queries evaluated'
    >>> evaluated_text({"evaluated": 4, "queries": 5, "missing_from_run": {"a": 1, "b": 4},
    ...                 "evaluated_per_model": {"a": 4, "b": 1}})
    'queries evaluated (of 5): a 4, b 1'
    """
    evaluated = per_model_counts(info)[0]
    if counts_differ(info):
        return (f"queries evaluated (of {info['queries']:,}): "
                + ", ".join(f"{visible(str(m))} {c:,}" for m, c in evaluated.items()))
    return f"{info['evaluated']:,} of {plural(info['queries'], 'query', 'queries')} evaluated"


def skipped_text(info: Mapping) -> str:
    """The queries skipped as empty (""), each model's count when they differ, and, on a stacked
    table, each model's queries without a row: with :func:`evaluated_text`, counts that add up.

    Examples
    --------
    >>> skipped_text({"queries": 10, "evaluated": 8, "skipped_empty": 2, "evaluated_per_model": {"a": 8, "b": 8}})
    "2 without a relevant item skipped (empty_queries='skip')"
    >>> skipped_text({"queries": 10, "evaluated": 8, "skipped_empty": 3, "evaluated_per_model": {"a": 8, "b": 6},
    ...               "skipped_empty_per_model": {"a": 2, "b": 3}})
    "without a relevant item, skipped (empty_queries='skip'): a 2, b 3; without a row of the model: b 1"
    """
    skipped, absent = per_model_counts(info)[1:]
    parts = []
    if counts_differ(info) and any(skipped.values()):
        parts.append("without a relevant item, skipped (empty_queries='skip'): "
                     + ", ".join(f"{visible(str(m))} {c:,}" for m, c in skipped.items()))
    elif info.get("skipped_empty"):
        parts.append(f"{info['skipped_empty']:,} without a relevant item skipped (empty_queries='skip')")
    if any(absent.values()):
        parts.append("without a row of the model: " + ", ".join(f"{visible(str(m))} {c:,}"
                                                                 for m, c in absent.items() if c))
    return "; ".join(parts)


def counts_text(info: Mapping) -> str:
    """The first line of the notes: queries evaluated, skipped, and (stacked tables) without a row,
    per model where they differ, so that each model's counts add up to the queries.

    >>> counts_text({"queries": 5, "evaluated": 4, "skipped_empty": 1, "evaluated_per_model": {"a": 4}})
    "4 of 5 queries evaluated; 1 without a relevant item skipped (empty_queries='skip')"
    """
    skipped = skipped_text(info)
    return evaluated_text(info) + (f"; {skipped}" if skipped else "")


def info_lines(info: Mapping, metrics: Mapping[str, Metric] | None = None) -> list[str]:
    """What a user might not expect, in sentences: skipped queries, queries without judgments or
    missing from a run, ties at a cutoff. ``metrics``: each metric label's Metric (the results' own,
    ``Results.evaluation.metric_objects``); without it, ``info`` given alone, its labels are read."""
    lines = [counts_text(info)]
    unjudged = {m: c for m, c in (info.get("run_queries_without_judgments") or {}).items() if c}
    if unjudged:
        lines.append("queries of a run without any judgment, left out (check that the query ids of the run and of the "
                     "judgments are written the same way): "
                     + ", ".join(f"{visible(str(m))}: {c:,}" for m, c in unjudged.items()))
    missing = {m: c for m, c in (info.get("missing_from_run") or {}).items() if c}
    if missing:
        rule = info.get("missing_queries", "skip")
        lines.append("judged queries missing from a run ("
                     + ("scored as empty lists, missing_queries='zero'" if rule == "zero" else
                        "left out, missing_queries='skip'") + "): "
                     + ", ".join(f"{visible(str(m))}: {c:,}" for m, c in missing.items())
                     + ("; so each model's mean is over other queries, and the means do not compare: "
                        "missing_queries='zero' counts every judged query (a missing list scores 0), and "
                        "compare() pairs the queries both models have" if uneven(info) else ""))
    deep = beyond_lists(info, metrics)
    if deep:
        longest, names, padded = deep
        pad = (info.get("conventions") or {}).get("short_lists", "pad") == "pad"
        if longest == 0:
            lines.append("every list is empty (no candidate retrieved: a score_threshold above every score?), so "
                         "that every metric finds nothing")
        else:
            lines.append(f"cutoffs beyond the longest list ({plural(longest, 'candidate')}), so that these look at "
                         f"whole lists: {', '.join(visible(str(n)) for n in names)}"
                         + ("; the ranks past a list's end count as not relevant (short_lists='pad': precision@k still "
                            "divides by k; 'shrink' divides by the list's length)" if pad and padded else ""))
    short = shorter_lists(info, set(deep[1]) if deep else set())
    if short:
        lines.append("lists shorter than a cutoff, whose missing ranks count as not relevant (short_lists='pad'; "
                     "'shrink' divides by the list's length): " + "; ".join(
                         f"{visible(str(label))}: " + (f"{next(iter(counts.values())):,}" if len(set(counts.values())) == 1
                                                       else ", ".join(f"{visible(str(m))} {c:,}" for m, c in counts.items()))
                         for label, counts in short) + f" of {info.get('evaluated', 0):,} queries")
    ties = {m: c for m, c in info.get("ties_at_cutoff", {}).items() if c}
    if ties:
        rule = info["conventions"]["ties"]
        lines.append("ties across a cutoff (resolved by ties=" + repr(rule) + "): "
                     + ", ".join(f"{visible(str(m))}: {plural(c, 'query', 'queries')}" for m, c in ties.items()))
    return lines + default_lines(info) + click_lines(info) + off_policy_lines(info) + sampled_lines(info)


def default_lines(info: Mapping) -> list[str]:
    """What the beyond-accuracy metrics read in place of an input not given (``info["beyond_defaults"]``).

    >>> default_lines({"beyond_defaults": {"catalog": {"from": "items of the table", "items": 1682}}})
    ['beyond accuracy: the catalogue is the 1,682 distinct items of the table (catalog= gives the real one)']
    """
    said = info.get("beyond_defaults") or {}
    parts = []
    if "catalog" in said:
        parts.append(f"the catalogue is the {said['catalog']['items']:,} distinct items of the table (catalog= gives "
                     "the real one)")
    if "popularity" in said:
        parts.append(f"an item's popularity is its share of the {said['popularity']['queries']:,} queries with a "
                     "relevant candidate in which it is one (history= gives the training interactions, as RecTools "
                     "counts them)")
    return ["beyond accuracy: " + "; ".join(parts)] if parts else []


def metric_of(label: str, metrics: Mapping[str, Metric] | None) -> Metric:
    """The Metric of a metric column: the results' own (``metrics``: ``Results.evaluation.metric_objects``),
    or, for a table or an ``info`` given alone (a summary frame, a dict: their labels are all they
    hold), read from its label: the one place in this module that reads a label.

    >>> from topkeval.metrics.names import Metric
    >>> metric_of("P@5", {"P@5": Metric("precision", 5)}), metric_of("P@5", None)
    (Metric(family='precision', k=5, params=(), estimate=''), Metric(family='precision', k=5, params=(), estimate=''))
    """
    if metrics is not None:
        return metrics[label]
    from ..metrics.names import parse_metric

    return parse_metric(label)


def beyond_lists(info: Mapping, metrics: Mapping[str, Metric] | None = None) -> tuple[int, list[str], bool] | None:
    """``(longest list, the metric labels whose cutoff exceeds it, whether one of them reads
    relevance)`` when some cutoff is deeper than every evaluated list of every model, or every list
    is empty (None otherwise, or where the lists were not counted). ``metrics``: as :func:`info_lines`."""
    lengths = list((info.get("longest_list") or {}).values())
    if not lengths or any(n is None for n in lengths) or not info.get("evaluated"):
        return None
    longest = max(lengths)
    names, padded = [], False
    for label in info.get("metrics", []):
        try:
            metric = metric_of(label, metrics)
        except (ValueError, KeyError):  # a label that names no metric
            continue
        if metric.k is not None and metric.k > longest:
            names.append(label)
            padded |= not metric.info.beyond  # novelty and the like read no relevance: pad or shrink alike
    return (longest, names, padded) if names or longest == 0 else None


def shorter_lists(info: Mapping, noted: set) -> list[tuple[str, dict]]:
    """Under ``short_lists="pad"``, each metric that divides by k (precision@k, F1@k...) with evaluated
    queries shorter than k, and those queries' number per model; the metrics of ``noted`` (beyond
    every list, said already) left out."""
    if (info.get("conventions") or {}).get("short_lists", "pad") != "pad":
        return []
    per_model = {m: c for m, c in (info.get("shorter_than_k") or {}).items() if c is not None}
    out = []
    for label in info.get("metrics", []):
        counts = {m: c.get(label, 0) for m, c in per_model.items()}
        if label not in noted and any(counts.values()):
            out.append((label, counts))
    return out


def click_lines(info: Mapping) -> list[str]:
    """A click log's notes: how the metrics were estimated, and how much of each model's top k the
    logging ranker never showed (what no click can say anything about)."""
    lines = []
    ips, clicks = info.get("ips"), info.get("clicks")
    if ips:
        kinds: dict[str, list[str]] = {"ips": [], "pooled": []}
        for name, kind in ips["estimators"].items():
            kinds[kind].append(name)
        text = (f"inverse propensity weighted: {plural(ips['clicks'], 'click')}, effective sample size "
                f"{ips['effective_sample_size']:,.0f}")
        if ips.get("clipped"):
            text += f", {ips['clipped']:,} weights clipped at {ips['clip']:g}"
        if kinds["ips"]:
            text += f"; unbiased sums (over every query; a query's value may exceed 1): {', '.join(kinds['ips'])}"
        if kinds["pooled"]:
            text += ("; ratios pooled over the queries (consistent; a query's value is its linearised share): "
                     f"{', '.join(kinds['pooled'])}")
        lines.append(text)
        # what may make them unreliable (evaluate warned of each), candidates never shown said below
        lines += [f"may be unreliable: {text}" for kind, text in (ips.get("warnings") or {}).items()
                  if kind != "never_shown"]
    elif clicks:
        lines.append("clicks taken as relevance (no propensity=): the positions are read for bounds() only")
    if clicks and clicks.get("never_shown"):
        unseen = {m: v for m, v in clicks["never_shown"].items() if v > 0}
        if unseen:
            sampled = clicks.get("never_shown_queries", 0) < info.get("queries", 0)
            lines.append(f"candidates the logging ranker never showed fill part of a model's top {clicks['k']} and "
                         "count as not relevant (no click can reach them; bounds() gives the range)"
                         + (f", on a sample of {clicks['never_shown_queries']:,} queries" if sampled else "") + ": "
                         + ", ".join(f"{visible(str(m))}: {v:.1%}" for m, v in unseen.items()))
    return lines


def off_policy_lines(info: Mapping) -> list[str]:
    """An off-policy evaluation's notes (``topkeval.off_policy``): what each column estimates, each
    estimate's estimator and diagnostics, and the estimates refused with their reason."""
    op = info.get("off_policy")
    if not op:
        return []
    lines = [f"off-policy estimates from {plural(op['rounds'], 'round')} of a randomised logger's log (queries are "
             "rounds; each round's value is its term of the estimate): "
             + "; ".join(f"{visible(str(m))} = {text}" for m, text in op["estimands"].items())]
    for model, d in op["diagnostics"].items():
        if d["estimator"] == "on-policy":
            lines.append(f"{visible(str(model))}: the logger's own clicks (on-policy)")
            continue
        first = next(iter(d["metrics"].values()))
        parts = [f"{d['estimator']}", f"effective sample size {first['effective_sample_size']:,.0f}",
                 f"effective clicks {first['effective_clicks']:,.1f}"]
        if d.get("clipped"):
            toward = "low" if d["estimator"] != "dr" else "towards its reward model"
            parts.append(f"{d['clipped']:,} weights clipped at {op['clip']!r} (biased {toward} by about "
                         f"{first.get('clip_bias', float('nan')):.4g})" if "clip_bias" in first else
                         f"{d['clipped']:,} weights clipped at {op['clip']!r} (biased towards the logger)")
        if first.get("never_shown"):
            parts.append(f"{first['never_shown']:.1%} of its mass on (item, position) pairs the log never shows")
        if first.get("unsupported"):
            parts.append(f"{first['unsupported']:.1%} where the logger could not show")
        if first.get("monte_carlo_se"):
            parts.append(f"Monte Carlo error of its probabilities {first['monte_carlo_se']:.2g} (standard error)")
        lines.append(f"{visible(str(model))}: " + ", ".join(parts))
        for metric, m in d["metrics"].items():
            if m.get("refused"):
                lines.append(f"no estimate of {visible(str(metric))} for {visible(str(model))}: {m['refused']}")
            elif m.get("would_refuse"):
                lines.append(f"kept with refuse=False, but would be refused: {visible(str(metric))} for "
                             f"{visible(str(model))}: {m['would_refuse']}")
    for name, how in (op.get("plackett_luce") or {}).items():
        if how.get("sampled"):
            lines.append(f"{visible(str(name))}: the Plackett-Luce probabilities of {plural(how['sampled'], 'round')} "
                         f"are Monte Carlo ({how['samples']:,} Rao-Blackwellised draws per round; standard error of a "
                         f"probability at most {how['largest_standard_error']:.2g}, {how['mean_standard_error']:.2g} on "
                         "average)")
    lines.append(f"support {op['support']}")
    return lines


def sampled_lines(info: Mapping) -> list[str]:
    """evaluate_sampled's notes: the protocol, what each kind of column is, and the pairs of models a
    sampled metric orders otherwise than the full catalogue (Krichene & Rendle's warning)."""
    sampled = info.get("sampled")
    if not sampled:
        return []
    how = "uniformly" if sampled["sampling"] == "uniform" else "in proportion to their training frequency"
    kinds = set(sampled["estimators"].values())
    parts = [f"{sampled['n_negatives']:,} negatives drawn {how} per held-out item (seed {sampled['seed']}), "
             f"from each user's {sampled['negatives_min']:,} to {sampled['negatives_max']:,} negatives"]
    if "sampled" in kinds:
        parts.append(f"[{sampled['tag']}]: the metric on the sampled lists (a number of its own, not the metric)")
    if kinds - {"sampled", "full"}:
        parts.append("[corrected:...]: estimates of the full-catalogue metric from the sampled ranks (no interval: "
                     "the sample cannot measure a correction's bias)")
    if "full" in kinds:
        parts.append("no brackets: the full catalogue")
    lines = ["sampled evaluation: " + "; ".join(parts)]
    for label, found in sampled.get("reordered", {}).items():
        pairs = ", ".join(f"{visible(str(a))} above {visible(str(b))}" for a, b in found["pairs"])
        lines.append(f"{visible(label)} orders models otherwise than {visible(found['against'])}: it ranks {pairs}, "
                     f"which {visible(found['against'])} ranks the other way round "
                     + ("(sampled metrics need not keep the order of the full catalogue: Krichene & Rendle 2020)"
                        if sampled["estimators"].get(label) == "sampled" else
                        "(a correction keeps the full catalogue's order on average over the draws, not in every "
                        "draw: compare the models on the full catalogue where it can be computed)"))
    return lines


def _trec_field(value, what: str) -> str:
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
    if not text or any(c.isspace() for c in text) or not text.isprintable():
        raise DataError(f"The {what} {text!r} cannot be written as a trec_eval line (fields are separated by "
                        "whitespace): use another --format, or ids without spaces, tabs or newlines.")
    return text


def trec_lines(res, per_query: bool) -> str:
    """trec_eval-style lines: ``measure <tab> query-or-all <tab> value``, per-query lines first (-q),
    queries in trec_eval's order (ids sorted as text), then runid and the ``all`` lines.

    num_ret, num_rel and num_rel_ret are summed over queries on the ``all`` line, as trec_eval does.
    gm_map and gm_bpref (per query, the log of a value) have an ``all`` line only: exp of their mean,
    the geometric mean, as trec_eval prints them.
    Results kept without per-query rows (a streamed file) give the ``all`` lines from their counts.
    """
    of = res.evaluation.metric  # each column's Metric: its family, trec_eval's name, how the all line is made
    lines = []
    # num_q is the line every evaluation prints (trec_eval prints it once, with no per-query value)
    metrics = [m for m in res.metrics if of(m).family != "num_q"]
    # the per-query values of a Spark evaluation stay on the cluster unless -q asks for them
    pq = res.to_pandas() if per_query or not hasattr(res.per_query, "toArrow") else None
    qn = res.query_name
    for model in res.models:
        part = pq[pq["model"] == model] if pq is not None else None
        if part is not None and per_query:
            # trec_eval's order: queries sorted by id as text (strcmp), those -c adds among them
            rows = sorted(part.to_dict("records"), key=lambda row: _trec_field(row[qn], "query id"))
            for row in rows:
                query = _trec_field(row[qn], "query id")
                for metric in metrics:
                    if not of(metric).info.geometric:  # trec_eval prints no per-query value of a geometric mean
                        lines.append(_trec_line(of(metric).trec_eval_name, query, row[metric], of(metric).info.summed))
        lines.append(f"{'runid':<22}\tall\t{_trec_field(model, 'run name')}")  # as trec_eval: before num_q
        count = res.info["evaluated_per_model"][model]
        lines.append(f"{'num_q':<22}\tall\t{count}")
        for metric in metrics:
            value = res.summary.loc[model, metric]
            summed = of(metric).info.summed
            if summed:
                value = part[metric].sum() if part is not None and len(part) == count else value * count
            if of(metric).info.geometric:
                value = math.exp(value)
            lines.append(_trec_line(of(metric).trec_eval_name, "all", value, summed))
    return "\n".join(lines) + "\n"


def _trec_line(name: str, query: str, value, integer: bool) -> str:
    text = "nan" if value != value else (str(int(round(value))) if integer else f"{value:.4f}")
    return f"{name:<22}\t{query}\t{text}"


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}"}


def latex_text(value) -> str:
    r"""Text for a LaTeX cell: every special character escaped, control characters as escapes.

    >>> latex_text("a_b & 50% {x}")
    'a\\_b \\& 50\\% \\{x\\}'
    """
    return "".join(_LATEX.get(c, c) for c in fmt(value))


def correction_text(correction) -> str:
    """The name of a multiple-testing correction in a sentence ("holm correction", "no correction").

    >>> correction_text("holm"), correction_text("none"), correction_text(None)
    ('holm', 'no', 'no')
    """
    return "no" if correction is None or correction == "none" else str(correction)


def best_rows(summary: pd.DataFrame, metrics: Mapping[str, Metric] | None = None) -> dict[str, set]:
    """Per metric, the models whose mean is the best: the largest, or the smallest where lower is
    better (fp, fn, fallout, unjudged: the registry's ``higher_is_better``). Ties are all best: means
    within 1e-12 (relative, or absolute near 0) of the best, as ``compare`` counts ties, so two
    models whose sums merely added in another order are both marked. NaN is never best.
    ``metrics``: each column's Metric (``Results.evaluation.metric_objects``); without it, a table
    given alone, its column labels are read.

    >>> from topkeval.metrics.names import Metric
    >>> s = pd.DataFrame({"recall@1": [0.5, 0.5, 0.25], "fp@1": [2.0, 1.0, 1.0]}, index=["a", "b", "c"])
    >>> {m: sorted(v) for m, v in best_rows(s, {"recall@1": Metric("recall", 1), "fp@1": Metric("fp", 1)}).items()}
    {'recall@1': ['a', 'b'], 'fp@1': ['b', 'c']}
    """
    out: dict[str, set] = {}
    for metric in summary.columns:
        col = summary[metric].astype(float)
        if col.notna().any():
            top = col.max() if metric_of(metric, metrics).info.higher_is_better else col.min()
            near = np.isclose(col.to_numpy(), top, rtol=1e-12, atol=1e-12)
            out[metric] = set(col.index[near])
        else:
            out[metric] = set()
    return out


def significance_marks(res, baseline: str | None, **compare_options) -> tuple[dict, str]:
    """Superscripts for a results table: ``{(model, metric): marks}`` and the note that explains them.

    With a baseline: a dagger on a model's value significantly better than the baseline's (the
    corrected p-value of :meth:`Results.compare` below 1 - confidence; with segments, that of the
    overall ``"(all)"`` row, as the table shows the overall means). Without one, as ranx does:
    each model gets a letter (a, b, ...), and a value carries the letters of the models it is
    significantly better than (one :meth:`Results.compare` per model as the baseline, each
    corrected over its rows).
    """
    of = res.evaluation.metric  # each column's Metric: which way is better
    models = res.models
    marks: dict = {}
    if len(models) < 2:
        return marks, ""
    confidence = compare_options.get("confidence", 0.95)
    test = compare_options.get("test", "permutation")
    correction = compare_options.get("correction", "holm")
    how = f"{test} test, {correction_text(correction)} correction, p < {1 - confidence:.2g}"

    def better(row) -> bool:
        return bool(row.significant) and (row.delta > 0) == of(row.metric).info.higher_is_better and row.delta != 0

    def overall(table: pd.DataFrame) -> pd.DataFrame:
        """The rows of every query: the table shows the overall means, not one segment's (by=)."""
        from ..analysis.segments import ALL

        for name in getattr(res, "by", None) or []:
            table = table[table[name] == ALL]
        return table

    if baseline is not None:
        for row in overall(res.compare(baseline=baseline, **compare_options)).itertuples():
            if better(row):
                marks[(row.model, row.metric)] = r"$^{\dagger}$"
        return marks, rf"$^{{\dagger}}$ significantly better than {latex_text(baseline)} ({how})."
    letters = {m: chr(ord("a") + i) if i < 26 else f"m{i}" for i, m in enumerate(models)}
    found: dict = {}
    for base in models:
        for row in overall(res.compare(baseline=base, **compare_options)).itertuples():
            if better(row):
                found.setdefault((row.model, row.metric), []).append(letters[base])
    for key, ls in found.items():
        marks[key] = "$^{" + "".join(sorted(ls)) + "}$"
    return marks, ("Superscripts: significantly better than the model of that letter ("
                   + ", ".join(f"{v}: {latex_text(m)}" for m, v in letters.items()) + f"; {how}).")


def latex(res, baseline: str | None = None, digits: int = 4, **compare_options) -> str:
    """The summary of ``res`` as a booktabs LaTeX tabular (see :meth:`Results.to_latex`)."""
    summary = res.summary
    best = best_rows(summary, res.evaluation.metric_objects)
    marks, note = significance_marks(res, baseline, **compare_options)
    lines = [r"\begin{tabular}{l" + "r" * len(summary.columns) + "}", r"\toprule",
             "Model & " + " & ".join(latex_text(c) for c in summary.columns) + r" \\", r"\midrule"]
    for model in summary.index:
        cells = []
        for metric in summary.columns:
            text = fmt(summary.loc[model, metric], digits)
            if model in best[metric]:
                text = rf"\textbf{{{text}}}"
            cells.append(text + marks.get((model, metric), ""))
        lines.append(latex_text(model) + " & " + " & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if note and marks:  # visible under the table (move it into the caption if you like); none without a mark
        lines.append(r"\par\smallskip{\footnotesize " + note + "}")
    return "\n".join(lines)
