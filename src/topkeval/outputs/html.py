"""The HTML report: one self-contained file to look at before deciding whether a ranker ships.

Every number in the page comes from the Results API (``summary_ci``, ``compare``, ``curves``,
``diff``, ``side_by_side``, ``info``); numeric cells carry the exact value in ``data-value`` so that
tests can check the page against the API. Every id, model name and metric name is escaped with
:func:`html.escape`, and the page forbids scripts outright (a Content-Security-Policy with
``default-src 'none'``), so a query id such as ``<script>alert(1)</script>`` shows as text and
could not run even if an escape were missed. Plots are inline SVG (matplotlib, the ``plot``
extra); without matplotlib the report is written without them and says so.
"""

from __future__ import annotations

import datetime
import html
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import stattests
from ..analysis.segments import ALL
from ..errors import ParameterError, did_you_mean, plural, show, warn

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data: https: http:"

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;margin:0;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 10px;border-bottom:1px solid #e2e5ea;padding-bottom:4px}
h3{font-size:15px;margin:22px 0 6px}p.lead{color:#4b5565;margin:0 0 14px}
nav a{margin-right:14px;color:#2459a6;text-decoration:none}
table{border-collapse:collapse;margin:6px 0 12px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e8eaee;text-align:left;vertical-align:top}
th{background:#f1f3f6;font-weight:600}th.group{text-align:center;border-left:2px solid #fff}td.num,th.num{text-align:right;white-space:nowrap}
td.best{font-weight:700}.ci{color:#6b7482;font-size:12px}
.better{color:#137333;font-weight:600}.worse{color:#b3261e;font-weight:600}.none{color:#6b7482}
td.rel{background:#e7f4ea}td.unjudged{color:#8a6d00;font-style:italic;background:repeating-linear-gradient(135deg,#fff8e1 0 4px,#fff 4px 8px)}.gained{color:#137333;font-weight:700}.lost{color:#b3261e;font-weight:700}
.plots{display:flex;flex-wrap:wrap;gap:10px}.plots figure{margin:0;flex:0 1 calc(50% - 5px);min-width:420px}
.plots svg{width:100%;height:auto}figcaption{color:#6b7482;font-size:12px}
code,.id{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;white-space:pre-wrap;overflow-wrap:break-word}
img.thumb{width:56px;height:56px;object-fit:cover;border-radius:3px}.note{color:#6b7482;font-size:12.5px}
table.sbs td.item{white-space:nowrap;word-break:normal}.wide{overflow-x:auto}table.sbs td,table.sbs th{padding:3px 8px}
"""


def esc(value) -> str:
    """Text for HTML: control characters as escapes (:func:`topkeval.outputs.text.fmt`), then HTML-escaped."""
    from .text import fmt

    # '#' written as an entity: a leading '#' marks numeric headers in _table (and entities hold '#')
    return "&#35;".join(html.escape(part, quote=True) for part in fmt(value).split("#"))


def _num(value, digits: int = 4, cls: str = "num", bold: bool = False) -> str:
    from .text import fmt

    exact = "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(float(value))
    text = html.escape(fmt(value, digits))
    return f'<td class="{cls}" data-value="{exact}">{f"<b>{text}</b>" if bold else text}</td>'


def _int(value) -> str:
    return f'<td class="num" data-value="{int(value)}">{int(value):,}</td>'


def _table(head: list[str], rows: list[str], cls: str = "") -> str:
    th = "".join(f"<th{' class=num' if h.startswith('#') else ''}>{h.lstrip('#')}</th>" for h in head)
    # a table wider than the page (long ids) scrolls on its own rather than squeezing its words
    return (f'<div class="wide"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>")


def results_html(res, digits: int = 4) -> str:
    """The summary as an HTML table with the counts of ``info`` (what a notebook shows for Results).

    The best value of each metric is bold (:func:`topkeval.outputs.text.best_rows`: lower is better for
    fp, fn, fallout...; every tied model), in ``<b>``, as a notebook has no stylesheet of ours.
    """
    from .text import best_rows, info_lines

    best = best_rows(res.summary, res.evaluation.metric_objects)
    head = ["model"] + [f"#{esc(m)}" for m in res.metrics]
    rows = []
    for model in res.models:
        cells = "".join(_num(res.summary.loc[model, m], digits, "num best", bold=True) if model in best[m]
                        else _num(res.summary.loc[model, m], digits) for m in res.metrics)
        rows.append(f'<tr><td class="id">{esc(model)}</td>{cells}</tr>')
    notes = "".join(f'<p class="note">{esc(line)}</p>' for line in info_lines(res.info, res.evaluation.metric_objects))
    return _table(head, rows, "summary") + notes


def _image_url(images, item) -> str | None:
    if images is None or item is None:
        return None
    url: object
    if isinstance(images, str):
        url = images.replace("{item}", str(item))
    elif callable(images):
        try:
            url = images(item)
        except Exception as exc:  # the user's function: its error, with the item that raised it
            raise ParameterError(f"images({show(item)}) raised {type(exc).__name__}: {exc}") from exc
    else:
        url = images.get(item) if hasattr(images, "get") else None
    if url is None:
        return None
    url = str(url)
    return url if url.lower().startswith(("https://", "http://", "data:image/")) else None


_FIELD = {"tied_ranks": "tied ranks", "other_rank": "rank in the other"}


def _side_by_side_html(view: pd.DataFrame, images, digits: int) -> str:
    from .text import UNJUDGED

    models = [m for m in dict.fromkeys(view.columns.get_level_values(0)) if m != ""]
    fields = ["item", "score", "relevance"] + (["tied_ranks"] if any((m, "tied_ranks") in view.columns
                                                                    for m in models) else []) + ["change"]
    fields += ["other_rank"] if any((m, "other_rank") in view.columns for m in models) else []
    top = '<th rowspan="2" class="num">rank</th>' + "".join(
        f'<th class="group id" colspan="{len(fields) + (images is not None)}">{esc(m)}</th>' for m in models)
    sub = "".join(("<th>image</th>" if images is not None else "")
                  + "".join(f"<th{' class=num' if f in ('score', 'relevance', 'other_rank') else ''}>{_FIELD.get(f, f)}</th>"
                            for f in fields) for _ in models)
    rows = []
    for i in range(len(view)):
        cells = [_int(view[("", "rank")].iloc[i])]
        for m in models:
            item = view[(m, "item")].iloc[i]
            rel = view[(m, "relevance")].iloc[i]
            cls = "it rel" if isinstance(rel, float) and rel > 0 else "it"
            if images is not None:
                url = _image_url(images, item)
                cells.append(f'<td class="{cls}">' + (f'<img class="thumb" alt="{esc(item)}" src="{html.escape(url)}">'
                                                     if url else "") + "</td>")
            cells.append(f'<td class="{cls} id item">{"" if item is None else esc(item)}</td>')
            if item is None:  # a list shorter than this position: blank cells, not "nan"
                empty = '<td class="num" data-value="nan"></td>'
                cells.append(empty * 2 + "<td></td>" * (1 + ("tied_ranks" in fields))
                             + (empty if "other_rank" in fields else ""))
                continue
            cells.append(_num(view[(m, "score")].iloc[i], digits))
            whole = isinstance(rel, float) and math.isfinite(rel) and rel == int(rel)
            if (m, "judged") in view.columns and view[(m, "judged")].iloc[i] is False:
                # no judgment: not the 0 of an item judged not relevant
                cells.append(f'<td class="num unjudged" data-value="{float(rel)!r}" title="no judgment for this '
                             f'item: counted as not relevant">{UNJUDGED}</td>')
            else:
                cells.append(_num(rel, 0 if whole else digits))
            if "tied_ranks" in fields:
                cells.append(f"<td>{esc(view[(m, 'tied_ranks')].iloc[i]) if (m, 'tied_ranks') in view.columns else ''}</td>")
            change = view[(m, "change")].iloc[i]
            cells.append(f'<td class="{esc(change)}">{esc(change)}</td>')
            if "other_rank" in fields:
                cells.append(_other_rank(view[(m, "other_rank")].iloc[i]) if (m, "other_rank") in view.columns
                             else "<td></td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="wide"><table class="sbs"><thead><tr>{top}</tr><tr>{sub}</tr></thead><tbody>{"".join(rows)}'
            "</tbody></table></div>")



def _other_rank(value) -> str:
    """The rank of an item under the other model, or "not retrieved" (NaN: the other model's list lacks it)."""
    from .text import NOT_RETRIEVED

    if value is None or math.isnan(value):
        return f'<td class="num none" data-value="nan">{NOT_RETRIEVED}</td>'
    return _num(value, 0)


def _figures(res, baseline, model, metrics, curve_frame, diffs, notes) -> tuple[str, str]:
    """The curves and delta histograms as inline SVG, or a note saying why there are none."""
    try:
        from . import plots

        plots._pyplot()
    except ParameterError as exc:


        notes.append(str(exc))
        warn(f"The report has no plots: {exc}")
        return "", ""
    axes = plots.fixed_axes  # fixed margins, widened where a text sticks out (plots.fit)

    curves_html = []
    if curve_frame is not None:
        for fam in dict.fromkeys(curve_frame["metric"]):
            shown = _spelled(res, fam)
            fig = plots.plot_curve(res, shown, data=curve_frame[curve_frame["metric"] == fam], ax=axes())
            curves_html.append(f"<figure>{plots.svg(fig)}<figcaption>{esc(shown)}@k for k = "
                               f"{int(curve_frame['k'].min())}..{int(curve_frame['k'].max())}</figcaption></figure>")
    deltas_html = []
    for metric in metrics:
        if (model, metric) in diffs:
            fig = plots.plot_deltas(res, metric, baseline, model, data=diffs[(model, metric)], ax=axes())
            deltas_html.append(f"<figure>{plots.svg(fig)}<figcaption>per-query {esc(metric)} of {esc(model)} minus "
                               f"{esc(baseline)}</figcaption></figure>")
    return "".join(curves_html), "".join(deltas_html)


@dataclass(frozen=True)
class ReportOptions:
    """What the report shows (see :func:`write_report`), resolved against the results: the models
    and the metric named, the queries found among those evaluated."""

    baseline: str | None
    model: str | None
    metric: str
    queries: list
    worst: int = 10
    k: int | None = None
    images: object = None
    title: str = "topkeval report"
    confidence: float = 0.95
    test: str = "permutation"
    correction: str | None = "holm"
    n_resamples: int = 10_000
    seed: int | None = 0
    curves: bool = True
    digits: int = 4

    @classmethod
    def resolve(cls, res, baseline: str | None = None, *, model: str | None = None, metric: str | None = None,
                queries=(), **options) -> ReportOptions:
        """The options of a report of ``res``: the baseline (default the first model) and the model
        (default the first other one) checked, the metric found by any of its names, the queries
        found among the evaluated ones (by value, as everywhere: "7" finds 7)."""
        from ..inputs.ids import find_id

        models = res.models
        for name, value in (("baseline", baseline), ("model", model)):
            if value is not None and value not in models:
                raise ParameterError(f"{name} {value!r} is not a model of these results."
                                     f"{did_you_mean(str(value), models)} Models: {', '.join(map(repr, models))}.")
        if baseline is None and len(models) > 1:
            baseline = models[0]
        if model is None and baseline is not None:
            model = next((m for m in models if m != baseline), None)
        metric = res.metrics[0] if metric is None else res.label(metric)
        found = []
        if queries:
            known = res.to_pandas()[res.query_name].drop_duplicates().to_numpy()
            for q in queries:
                at = find_id(known, q)
                if at is None:
                    raise ParameterError(f"query {q!r} of queries= is not among the evaluated "
                                         f"queries.{did_you_mean(str(q), [str(x) for x in known[:100_000]])}")
                found.append(known[at])
        return cls(baseline, model, metric, found, **options)


#: Seconds each step of the last report took (the workflow benchmark prints them; also logged at DEBUG).
LAST_TIMINGS: dict[str, float] = {}


def report_html(res, baseline: str | None = None, **options) -> str:
    """The report as one HTML string (see :func:`write_report` for the parameters)."""
    import time

    from ..progress import step

    timings: dict[str, float] = {}
    bar = step("report")

    def timed(name, call, *args, **kwargs):
        bar.describe(f"report: {name}")
        t0 = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0

    o = ReportOptions.resolve(res, baseline, **options)
    per_query = res.to_pandas()
    has_rows = len(per_query) > 0
    notes: list[str] = []
    sections = [timed("summary and intervals", _summary_section, res, o, has_rows)]
    clicks = timed("clicks", _clicks_section, res, o)
    if clicks is not None:
        sections.append(clicks)
    off = timed("off-policy", _off_policy_section, res, o)
    if off is not None:
        sections.append(off)
    if res.by and has_rows:
        sections.append(timed("segments", _segments_section, res, o))
    diffs: dict = {}
    from ..engine.terms import estimator_terms

    terms = estimator_terms(res.info)
    if o.baseline is not None and has_rows:
        sections.append(timed("comparison", _comparison_section, res, o))
        pairs = timed("all pairs", _pairs_section, res, o)
        if pairs is not None:
            sections.append(pairs)
        if terms is not None:  # a query's term of an estimate is no outcome: no per-query differences
            notes.append(f"No per-query differences, worst regressions or side-by-side lists: the per-query values "
                         f"are {terms}, and one query's term says nothing of how the models did on it.")
        elif o.model is not None:
            # the items gained and lost only for the metric of the worst regressions (they read the rows again)
            diffs = {(o.model, name): timed("per-query differences", res.diff, o.baseline, o.model, name,
                                            items=name == o.metric)
                     for name in res.metrics}
    elif o.baseline is not None:
        notes.append("No per-query values were kept (keep_per_query=False), so there is no comparison.")
    curve_frame = None
    if o.curves:
        try:
            curve_frame = timed("curves", res.curves)
        except ParameterError as exc:
            notes.append(f"No metric@k curves: {exc}")
    curves_svg, deltas_svg = timed("figures", _figures, res, o.baseline, o.model, res.metrics, curve_frame, diffs,
                                   notes)
    if curve_frame is not None:
        sections.append(_curves_section(res, o, curve_frame, curves_svg))
    view_queries: list = list(o.queries) if terms is None else []
    if diffs:
        section, worst_queries = timed("worst queries", _deltas_section, res, o, diffs[(o.model, o.metric)],
                                       deltas_svg, view_queries)
        sections.append(section)
        view_queries = list(dict.fromkeys(view_queries + worst_queries))
    anchors = {q: f"q{i}" for i, q in enumerate(view_queries)}
    if view_queries:
        sections.append(timed("side by side", _queries_section, res, o, view_queries, anchors))
    sections.append(_conventions_section(res))
    page = timed("page", _page, res, o, sections, notes)
    bar.__exit__()
    LAST_TIMINGS.clear()
    LAST_TIMINGS.update(timings)
    import logging

    logging.getLogger("topkeval").debug("report: %s", ", ".join(f"{k} {v:.3f} s" for k, v in timings.items()))
    return page


def _summary_section(res, o: ReportOptions, has_rows: bool) -> tuple[str, str, str]:
    """Each model's mean of each metric, the best in bold, with its bootstrap interval."""
    from .text import best_rows, fmt

    best = best_rows(res.summary, res.evaluation.metric_objects)
    if has_rows:
        ci_all = res.summary_ci(confidence=o.confidence, n_resamples=o.n_resamples, seed=o.seed)
        for name in res.by:  # the summary holds every query: the overall rows of a breakdown by segment
            ci_all = ci_all[ci_all[name] == ALL]
        ci = ci_all.set_index(["model", "metric"])
    head = ["model"] + [f"#{esc(m)}" for m in res.metrics]
    rows = []
    for m in res.models:
        cells = []
        for metric_name in res.metrics:
            top = m in best[metric_name]
            cell = _num(res.summary.loc[m, metric_name], o.digits, "num best" if top else "num", bold=top)
            if has_rows:
                lo, hi = ci.loc[(m, metric_name), ["ci_low", "ci_high"]]
                cell = cell[:-5] + (f'<br><span class="ci" data-low="{float(lo)!r}" data-high="{float(hi)!r}">'
                                    f"[{esc(fmt(lo, o.digits))}, {esc(fmt(hi, o.digits))}]</span></td>" if not math.isnan(lo) else
                                    '<br><span class="ci">no interval</span></td>')  # a corrected estimate
            cells.append(cell)
        rows.append(f'<tr><td class="id">{esc(m)}</td>{"".join(cells)}</tr>')
    weight = res.weight
    ci_note = (f"{'Weighted mean (weights: ' + esc(weight) + ')' if weight else 'Mean'} over the evaluated queries; "
               f"below it the {o.confidence:.0%} {stattests.INTERVALS[stattests.default_interval()].label} "
               f"({o.n_resamples:,} resamples). Bold: the best model of the column."
               + (" A corrected estimate of a sampled evaluation has no interval: the sample cannot measure the "
                  "correction's bias." if res.info.get("sampled") else "")) if has_rows else (
               "Mean over the evaluated queries (no per-query values were kept, so no intervals).")
    return ("summary", "Summary", _table(head, rows, "summary") + f'<p class="note">{ci_note}</p>')


def _clicks_section(res, o: ReportOptions) -> tuple[str, str, str] | None:
    """A click log (``evaluate(..., position=)``): naive, estimate and bounds side by side, with the
    share of each model's top k never shown and the effective sample size of the weights."""
    try:
        table = res.bounds().reset_index()
    except ParameterError:  # not a click log with positions
        return None
    ips = res.info.get("ips")
    head = ["model", "metric", "#naive", "#estimate", "#lower", "#upper", "#never shown", "note"]
    rows = []
    for r in table.to_dict("records"):
        rows.append(f'<tr><td class="id">{esc(r["model"])}</td><td class="id">{esc(r["metric"])}</td>'
                    + "".join(_num(r[c], o.digits) for c in ("naive", "estimate", "lower", "upper", "never_shown"))
                    + f"<td>{esc(r['note'])}</td></tr>")
    if ips:
        kinds = ", ".join(f"{esc(m)}: {'IPS (unbiased)' if e == 'ips' else 'pooled over the queries (consistent)'}"
                          for m, e in ips["estimators"].items())
        lead = (f"Estimates weigh each click by the inverse of its position's examination probability ({kinds}); "
                f"{ips['clicks']:,} clicks, effective sample size {ips['effective_sample_size']:,.0f}"
                + (f", {ips['clipped']:,} weights clipped at {ips['clip']:g}" if ips.get("clip") else "") + ".")
    else:
        lead = "No propensities were given: the estimate is the naive value (clicks as relevance)."
    clicks = res.info.get("clicks") or {}
    unseen = {m: v for m, v in (clicks.get("never_shown") or {}).items() if v > 0}
    warn_unseen = (" <strong>" + "; ".join(
        f"{esc(m)}: {v:.1%} of its top {clicks['k']} was never shown" for m, v in unseen.items())
        + ". No click can reach those candidates: the estimate counts them as not relevant, so it is low by "
          "whatever they hold (the upper bound says how much it could be).</strong>") if unseen else ""
    cautions = [text for kind, text in ((ips or {}).get("warnings") or {}).items() if kind != "never_shown"]
    if cautions:  # what else may make the estimates unreliable (evaluate warned of each)
        warn_unseen += " <strong>May be unreliable: " + " ".join(esc(c) for c in cautions) + "</strong>"
    note = (f"{lead}{warn_unseen} Naive: clicks as relevance. Lower and upper: the metric when none / as many as could "
            "be of the candidates the logging ranker never showed are relevant (shown candidates taken as judged by "
            "their clicks, so with propensities the estimate may lie outside). Never shown: their mean share of each "
            "model's top k.")
    return ("clicks", "Clicks and what they cannot see", _table(head, rows, "clicks") + f'<p class="note">{note}</p>')


def _off_policy_section(res, o: ReportOptions) -> tuple[str, str, str] | None:
    """An off-policy evaluation (``topkeval.off_policy``): each estimate with its estimator, its
    diagnostics and, where refused, why (and its bounds); each position's click rate."""
    op = res.info.get("off_policy")
    if not op:
        return None
    head = ["model", "estimator", "metric", "#estimate", "#effective sample size", "#effective clicks",
            "#never shown", "#unsupported", "#lower", "#upper", "refused"]
    rows = []
    for model, d in op["diagnostics"].items():
        for metric, m in d["metrics"].items():
            value = res.summary.loc[model, metric]
            rows.append(f'<tr><td class="id">{esc(model)}</td><td>{esc(d["estimator"])}</td>'
                        f'<td class="id">{esc(metric)}</td>' + _num(value, o.digits)
                        + _num(m["effective_sample_size"], 1) + _num(m["effective_clicks"], 1)
                        + "".join(_num(m.get(key, math.nan), o.digits) for key in ("never_shown", "unsupported",
                                                                                     "lower", "upper"))
                        + "<td>" + (esc(m["refused"]) if m.get("refused") else
                                    "<strong>kept with refuse=False; would be refused:</strong> " + esc(m["would_refuse"])
                                    if m.get("would_refuse") else "") + "</td></tr>")
    pos_head = ["model", "#position", "#click rate", "#ci low", "#ci high", "#rounds", "#effective sample size"]
    pos_rows = [f'<tr><td class="id">{esc(model)}</td>' + _int(p["position"]) + _num(p["estimate"], o.digits)
                + _num(p["ci_low"], o.digits) + _num(p["ci_high"], o.digits) + _int(p["rounds"])
                + _num(p["effective_sample_size"], 1) + "</tr>"
                for model, ps in op["per_position"].items() for p in ps]
    from ..analysis.offpolicy import ESTIMATORS

    used = sorted({d["estimator"] for d in op["diagnostics"].values()} - {"on-policy"})
    assumptions = "; ".join(f"{esc(e)}: {esc(ESTIMATORS[e].title)}, assumes {esc(ESTIMATORS[e].assumption)}"
                            for e in used)
    estimands = "; ".join(f"{esc(m)} = {esc(t)}" for m, t in op["estimands"].items())
    note = (f"Estimated from {op['rounds']:,} rounds of a randomised logger's log: {estimands}. {assumptions}. "
            f"Support {esc(op['support'])}. Effective sample size: Kish's (sum w)^2 / sum w^2 of the weights at the "
            "position with the fewest; effective clicks: the same of the rounds' weighted clicks (an estimate resting "
            f"on fewer than {op['min_clicks']:g} is refused: its interval would not hold). Never shown: the policy's "
            "mass on (item, position) pairs this log never shows; unsupported: where the logger could not show "
            "(support=), with the interval of the truth whatever those clicks are (lower, upper). The intervals of "
            "the summary resample rounds; a position's interval below is normal, cut to the click rate's range [0, 1]. "
            "The logger's row is its own click rate at each position, averaged over the positions (CTR@k): with "
            "positions shown unequally often, not its clicks over its impressions.")
    if op.get("clip") is not None:
        note += (f" Weights clipped at {op['clip']:g}: the IPS and DR estimates are biased low, the self-normalised "
                 "ones towards the logger.")
    body = (_table(head, rows, "offpolicy") + f'<p class="note">{note}</p>' + "<h3>Click rate at each position</h3>"
            + _table(pos_head, pos_rows, "offpolicy-positions"))
    return ("offpolicy", "Off-policy estimates", body)


def _segments_section(res, o: ReportOptions) -> tuple[str, str, str]:
    """The means within each segment (``by=``), then over every query."""
    by, weight = res.by, res.weight
    seg = res.segments.reset_index()
    head = [esc(name) for name in by] + ["model"] + [f"#{esc(m)}" for m in res.metrics] + ["#queries"] + (
        ["#weight"] if weight else [])
    rows = []
    for _, r in seg.iterrows():
        rows.append("<tr>" + "".join(f'<td class="id">{esc(r[name])}</td>' for name in by)
                    + f'<td class="id">{esc(r["model"])}</td>'
                    + "".join(_num(r[m], o.digits) for m in res.metrics) + _int(r["queries"])
                    + (_num(r["weight"], 0) if weight else "") + "</tr>")
    return ("segments", f"By {esc(', '.join(by))}", _table(head, rows, "segments")
            + f'<p class="note">Means within each segment; {ALL} holds every query.</p>')


def _comparison_section(res, o: ReportOptions) -> tuple[str, str, str]:
    """Every model against the baseline: deltas, intervals, corrected p-values, wins/ties/losses."""
    from .text import correction_text, p_value_text

    by, weight, digits = res.by, res.weight, o.digits
    table = res.compare(baseline=o.baseline, test=o.test, correction=o.correction, confidence=o.confidence,
                        n_resamples=o.n_resamples, seed=o.seed)
    resampled = o.n_resamples if stattests.TESTS[o.test].resampled else None
    counts = "wins" in table.columns  # left out on per-query values that are terms of an estimate
    rows = []
    for r in table.to_dict("records"):
        verdict_cls = {"better": "better", "worse": "worse"}.get(r["verdict"], "none")
        segment = "".join(f'<td class="id">{esc(r[name])}</td>' for name in by)
        rows.append(
            f'<tr>{segment}<td class="id">{esc(r["model"])}</td><td>{esc(r["metric"])}</td>'
            f'<td class="{verdict_cls}">{esc(r["verdict"])}</td>{_num(r["baseline"], digits)}'
            f'{_num(r["value"], digits)}{_num(r["delta"], digits)}{_num(r["ci_low"], digits)}'
            f'{_num(r["ci_high"], digits)}'
            f'<td class="num" data-value="{float(r["p_value"])!r}">{esc(p_value_text(r["p_value"], resampled))}</td>'
            f'<td class="num" data-value="{float(r["p_adjusted"])!r}">'
            f'{esc(p_value_text(r["p_adjusted"], resampled))}</td>'
            + (f'{_int(r["wins"])}{_int(r["ties"])}{_int(r["losses"])}' if counts else "")
            + f'{_num(r["detectable_delta"], digits)}</tr>')
    head = [esc(name) for name in by] + [
        "model", "metric", "verdict", "#baseline", "#value", "#delta", "#ci_low", "#ci_high", "#p", "#p adjusted",
        *(["#wins", "#ties", "#losses"] if counts else []), "#detectable"]
    how = (f"Paired {esc(o.test)} test on the queries both models have, {esc(correction_text(o.correction))} "
           f"correction over every row{' (every segment and ' + ALL + ')' if by else ''}, {o.confidence:.0%} "
           f"{stattests.INTERVALS[table.attrs.get('interval', stattests.default_interval())].name} intervals of the "
           f"difference{', weighted by ' + esc(weight) if weight else ''}; a row is better "
           f"or worse when its corrected p-value is below {1 - o.confidence:.2g}. Detectable: the smallest "
           f"difference a paired t-test at {1 - o.confidence:.2g} finds with probability 0.8 at this number of "
           "queries (Results.queries_needed sizes a larger study); inf: none that a metric in [0, 1] can take.")
    if getattr(res.evaluation, "estimated_curve", None) is not None:
        how += (" The clicks are weighed by an examination curve estimated by estimate_position_bias: every interval "
                "and test fits it again on each resample of its queries (basic bootstrap intervals), and no "
                "detectable difference is given (a t-test's sizing would leave the curve out).")
    if not counts:
        how += (f" No wins, ties or losses: the per-query values are {esc(table.attrs.get('per_query_terms', ''))}; "
                "the test compares their means, which are the estimates.")
    for (model, metric), why in table.attrs.get("refused", {}).items():
        how += f" Refused, {esc(model)} on {esc(metric)}: {esc(why)}."
    return ("comparison", f"Comparison with {esc(o.baseline)}", _table(head, rows, "compare")
            + f'<p class="note">{how}</p>')


def _pairs_section(res, o: ReportOptions) -> tuple[str, str, str] | None:
    """More than two models: every pair (Tukey's HSD), as a models x models matrix per metric, with the
    compact letter display."""
    if len(res.models) < 3 or res.weight:
        return None
    from .text import p_value_text

    parts = []
    for metric_name in res.metrics:
        try:
            rows = res.compare_all(metric_name, test="tukey", confidence=o.confidence)
        except ParameterError as exc:  # fewer than 2 queries with every model's value: said, the others shown
            parts.append(f"<h3>{esc(metric_name)}</h3><p class=\"note\">{esc(str(exc))}</p>")
            continue
        floor = rows.attrs.get("p_floor")  # Tukey's smallest p told apart: "< 1e-12" below
        if res.by:
            rows = rows[rows[res.by[0]] == ALL]
        means = {**dict(zip(rows["model_a"], rows["mean_a"])), **dict(zip(rows["model_b"], rows["mean_b"]))}
        letters = {**dict(zip(rows["model_a"], rows["letters_a"])), **dict(zip(rows["model_b"], rows["letters_b"]))}
        order = sorted(means, key=lambda m: -means[m])
        cell = {}
        for r in rows.to_dict("records"):
            cell[(r["model_a"], r["model_b"])] = (r["delta"], r["p_value"], r["significant"])
            cell[(r["model_b"], r["model_a"])] = (-r["delta"], r["p_value"], r["significant"])
        body = []
        for a in order:
            cells = "".join(
                '<td class="num">-</td>' if a == b else
                f'<td class="num{" best" if cell[(a, b)][2] else ""}">{cell[(a, b)][0]:+.{o.digits}f}'
                f'<br><span class="ci">p {esc(p_value_text(cell[(a, b)][1], floor=floor))}'
                '</span></td>' for b in order)
            body.append(f'<tr><td class="id">{esc(a)}</td>{_num(means[a], o.digits)}'
                        f'<td class="id">{esc(letters[a])}</td>{cells}</tr>')
        head = ["model", "#mean", "letters"] + [f"#{esc(b)}" for b in order]
        parts.append(f"<h3>{esc(metric_name)}</h3>" + _table(head, body, "pairs"))
    note = (f"Row minus column, with Tukey's HSD p-value for the randomized block design (models x queries), the "
            f"family-wise error over every pair held at {1 - o.confidence:.2g}; in bold the significant pairs. Models "
            "sharing a letter are not distinguishable" + (f" (over {ALL})" if res.by else "") + ".")
    return ("pairs", "Every pair of models", "".join(parts) + f'<p class="note">{note}</p>')


def _curves_section(res, o: ReportOptions, curve_frame, curves_svg: str) -> tuple[str, str, str]:
    """The metric@k curves: the plot, and each family's numbers."""
    body = f'<div class="plots">{curves_svg}</div>' if curves_svg else ""
    fam_tables = []
    for fam in dict.fromkeys(curve_frame["metric"]):
        part = curve_frame[curve_frame["metric"] == fam].pivot(index="k", columns="model", values="value")
        part = part[[m for m in res.models if m in part.columns]]  # the models' order, not pivot's sorted one
        head = ["#k"] + [f"#{esc(m)}" for m in part.columns]
        rows = ["<tr>" + _int(kk) + "".join(_num(part.loc[kk, m], o.digits) for m in part.columns) + "</tr>"
                for kk in part.index]
        fam_tables.append(f"<details><summary>{esc(fam)}@k: the numbers</summary>"
                          f"{_table(head, rows, 'curve')}</details>")
    return ("curves", "Metric@k", body + "".join(fam_tables))


def _deltas_section(res, o: ReportOptions, d, deltas_svg: str, view_queries: list) -> tuple[tuple[str, str, str], list]:
    """The per-query differences of the model against the baseline on the metric, and the worst
    regressions (a regression as compare counts a loss); returns the section and those queries."""
    from ..analysis.compare import TIE
    from .plots import counted_deltas

    worst_rows = d[d["delta"] < -TIE].head(o.worst)
    worst = list(worst_rows.iloc[:, 0])
    anchors = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(view_queries + worst))}
    has_items = "gained" in d.columns
    head = ["query", f"#{esc(o.baseline)}", f"#{esc(o.model)}", "#delta"] + (["lost", "gained"] if has_items else [])
    rows = []
    for i in range(len(worst_rows)):
        r = worst_rows.iloc[i]
        q = worst[i]  # the id itself (a row of numbers alone reads an integer id as a float)
        items = (f'<td class="id">{esc(", ".join(map(str, r["lost"])))}</td>'
                 f'<td class="id">{esc(", ".join(map(str, r["gained"])))}</td>') if has_items else ""
        rows.append(f'<tr><td class="id"><a href="#{anchors[q]}">{esc(q)}</a></td>{_num(r["baseline"], o.digits)}'
                    f'{_num(r["model"], o.digits)}{_num(r["delta"], o.digits)}{items}</tr>')
    counted, _ = counted_deltas(res, d)  # compare's wins, ties and losses
    counts = (f"{plural(int((counted > 0).sum()), 'query', 'queries')} better, {int((counted == 0).sum()):,} equal, "
              f"{int((counted < 0).sum()):,} worse on {esc(o.metric)}.")
    which = "The worst regression" if len(rows) == 1 else f"The {len(rows):,} worst regressions"
    table_html = (f"<h3>{which} on {esc(o.metric)}</h3>{_table(head, rows, 'worst')}"
                  if rows else f"<h3>No query got worse on {esc(o.metric)}</h3>")
    return (("deltas", f"Per query: {esc(o.model)} against {esc(o.baseline)}",
             f'<div class="plots">{deltas_svg}</div><p>{counts}</p>{table_html}'), worst)


def _queries_section(res, o: ReportOptions, view_queries: list, anchors: dict) -> tuple[str, str, str]:
    """Each query's top k under the baseline and the model, side by side."""
    k = o.k
    if k is None:  # the smallest cutoff evaluated, at most 20 (a list to read, not recall@100's 100 rows), or 10
        cut = [res.evaluation.metric(n).k for n in res.metrics]
        k = min(min([c for c in cut if c is not None], default=10), 20)
    blocks = []
    for q in view_queries:
        try:
            view = res.side_by_side(q, k=k, baseline=o.baseline, model=o.model)
        except ParameterError as exc:
            if "do not keep" in str(exc) or "without them" in str(exc):  # no rows or no item ids: say so once
                blocks = [f'<p class="note">{esc(exc)}</p>']
                break
            blocks.append(f'<h3 id="{anchors[q]}">query <span class="id">{esc(q)}</span></h3>'
                          f'<p class="note">{esc(exc)}</p>')  # this query only (a model lacks it)
            continue
        counts = view.attrs["relevant"]
        relevant = (f"{next(iter(counts.values())):,}" if len(set(counts.values())) == 1 else
                    ", ".join(f"{esc(n)}: {r:,}" for n, r in counts.items()))
        blocks.append(f'<h3 id="{anchors[q]}">query <span class="id">{esc(q)}</span></h3>'
                      f'<p class="note">relevant items of this query (R): {relevant}</p>'
                      f"{_side_by_side_html(view, o.images, o.digits)}")
    legend = ("Each model's top k, position by position. Green cells: relevant items. <span class=gained>gained"
              "</span>: a relevant item the model brought into the top k; <span class=lost>lost</span>: one it "
              "let out (marked on the baseline's side). Rank in the other: the item's rank under the other model, or "
              "not retrieved when that model's list does not hold it. <span class=\"unjudged\">unjudged</span>: an "
              "item the judgments do not list (counted as not relevant), told apart from one judged not relevant "
              "(0).")
    return ("queries", f"Top {k}, side by side", f'<p class="note">{legend}</p>' + "".join(blocks))


def _conventions_section(res) -> tuple[str, str, str]:
    """The conventions the numbers were computed under, and the counts of ``info``."""
    from .text import counts_differ, info_lines, per_model_counts

    info = res.info
    conv_rows = [f'<tr><td><code>{esc(name)}</code></td><td class="id">{esc(value if isinstance(value, str) else repr(value))}'
                 "</td></tr>"
                 for name, value in info.get("conventions", {}).items()]
    # values computed elsewhere (Results.from_per_query): their conventions and rows are not known
    conventions = (_table(["convention", "value"], conv_rows, "conventions") if conv_rows else
                   "<p>Conventions: not known (per-query values computed elsewhere, given to "
                   "Results.from_per_query).</p>")
    evaluated, skipped, absent = per_model_counts(info)
    differ = counts_differ(info)
    count_rows = [f"<tr><td>{esc(label)}</td>{_int(info[key])}</tr>"
                  for key, label in (("queries", "queries"), ("evaluated", "evaluated"),
                                     ("skipped_empty", "skipped: no relevant item"), ("rows", "rows read"))
                  if info.get(key) is not None and not (differ and key in ("evaluated", "skipped_empty"))]
    if differ:
        # the models' counts differ (a stacked table, runs missing queries): each model's, which add up
        for what, counts in (("evaluated", evaluated), ("skipped: no relevant item", skipped),
                             ("without a row of the model", absent)):
            count_rows += [f'<tr><td>{what}: <span class="id">{esc(m)}</span></td>{_int(c)}</tr>'
                           for m, c in counts.items() if c or what != "without a row of the model"]
    count_rows += [f'<tr><td>ties across a cutoff: <span class="id">{esc(m)}</span></td>{_int(c)}</tr>'
                   for m, c in info.get("ties_at_cutoff", {}).items() if c is not None]
    count_rows += [f"<tr><td>{esc(key)}</td>{_int(info[key])}</tr>"
                   for key in ("judged_queries", "run_queries_without_judgments", "missing_from_run")
                   if isinstance(info.get(key), (int, np.integer))]
    lines = "".join(f"<p>{esc(line)}</p>" for line in info_lines(info, res.evaluation.metric_objects))
    return ("conventions", "Conventions and counts",
            lines + conventions + _table(["count", "#value"], count_rows, "counts"))


def _page(res, o: ReportOptions, sections: list, notes: list[str]) -> str:
    """The sections as one self-contained page, with their navigation and the lead line."""
    from ..version import __version__

    info = res.info
    nav = "".join(f'<a href="#{sid}">{heading}</a>' for sid, heading, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{heading}</h2>{content}</section>' for sid, heading, content in sections)
    note_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    from .text import evaluated_text

    lead = (f"{len(res.models)} model(s), {evaluated_text(info)}, "
            + (f"{info['rows']:,} rows" if info.get("rows") is not None else "rows read: not known")
            + f". topkeval {esc(__version__)}, {when}.")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(o.title)}</title><style>{STYLE}</style></head>"
            f'<body><main><h1>{esc(o.title)}</h1><p class="lead">{lead}</p><nav>{nav}</nav>{note_html}{body}'
            "</main></body></html>\n")


def write_report(res, path, baseline: str | None = None, *, overwrite: bool = False, **options) -> str:
    """Write the HTML report of ``res`` to ``path``; return the path.

    Parameters
    ----------
    res : Results
    path : str or Path
        The HTML file, written atomically (see :mod:`topkeval.files`). An existing regular file is
        replaced only with ``overwrite=True``; a directory, a symbolic link, a device, a fifo or a
        socket at the path never is.
    overwrite : bool
        Replace an existing regular file (default False).
    baseline : str, optional
        The model the others are compared with (default: the first).
    model : str, optional
        The model whose per-query differences and top k are shown (default: the first other one).
    metric : str, optional
        The metric of the worst regressions (default: the first).
    queries : list, optional
        Queries to show side by side, besides the worst regressions.
    worst : int
        How many of the worst regressions to list and show (default 10).
    k : int, optional
        Positions of the side-by-side view (default: the smallest cutoff evaluated, at most 20;
        10 without a cutoff).
    images : str, mapping or callable, optional
        Thumbnails in the side-by-side view: a URL pattern with ``{item}`` (``"https://cdn/{item}.jpg"``),
        a mapping or a function from item id to URL. Only http(s) and ``data:image/`` URLs are shown.
    title : str
    confidence, test, correction, n_resamples, seed
        As in :meth:`Results.compare` and :meth:`Results.summary_ci`.
    curves : bool
        Evaluate the metric@k curves (one more pass over the data; default True).

    Raises
    ------
    OutputFileError
        The path cannot be written (checked before the report is computed): its folder is missing
        or read-only, something other than a regular file is there, a file is there and
        ``overwrite`` is False; or the disk filled up while writing (nothing is left behind).
    ParameterError
        ``path`` is not a path (None, empty, a NUL byte), or an option is out of range.

    Examples
    --------
    >>> import os, pathlib, tempfile
    >>> import topkeval as tk
    >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "item": ["x", "y", "x", "y"],
    ...                    "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]},
    ...                   metrics=["precision@1"], score=["a", "b"], item="item")
    >>> path = res.report(os.path.join(tempfile.mkdtemp(), "report.html"), baseline="a", curves=False)
    >>> "Comparison with a" in pathlib.Path(path).read_text(encoding="utf-8")
    True
    """
    from ..files import check_output_path, write_text

    target = check_output_path(path, overwrite=overwrite, owner="report")  # before the work, not after
    page = report_html(res, baseline, **options)
    return write_text(target, page, overwrite=overwrite, owner="report")


def _spelled(res, family: str) -> str:
    """A curve's family as the user spelled it in the tables (``map`` for ``map@10``, an alias of ap):
    the name before ``@`` of a column of that family without parameters, else the family."""
    for label in res.metrics:
        metric = res.evaluation.metric(label)
        if metric.family == family and not metric.params and not metric.estimate and "@" in label:
            return label.rsplit("@", 1)[0]
    return family
