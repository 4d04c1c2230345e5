"""Figures of Results with matplotlib (the ``plot`` extra; never imported by ``import topkeval``).

Every plotted number comes from the Results API: :meth:`Results.curves` for the metric@k curves,
:meth:`Results.diff` for the per-query differences. Names are drawn as text, never as mathtext:
a model called ``$x$`` shows its dollar signs.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

#: colours of the models, in order (matplotlib's tab10, readable in print)
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)  # no screen needed; a notebook's inline backend stays as it is
        import matplotlib.pyplot as plt
    except ImportError:
        raise ParameterError("Plots need matplotlib: pip install matplotlib (or pip install '.[plot]' in topkeval's checkout)."
                             ) from None
    return plt


def label(text) -> str:
    """A name as matplotlib text: dollar signs escaped (no mathtext), control characters visible."""
    from .text import fmt

    return fmt(text).replace("$", r"\$")


def _figure(ax, size=(6.4, 3.6)):
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=size, layout="constrained")
        return fig, ax
    return ax.figure, ax


def plot_curve(results, metric: str = "recall", ks=None, ax=None, data=None):
    """``metric@k`` against k, one line per model (see :meth:`Results.plot_curve`).

    Examples
    --------
    >>> import topkeval as tk
    >>> res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 0, 1], "s": [0.9, 0.5, 0.1]},
    ...                   metrics=["recall@3"], score="s")
    >>> fig = res.plot_curve("recall")
    >>> fig.axes[0].get_lines()[0].get_ydata().tolist()
    [0.5, 0.5, 1.0]
    """
    frame = results.curves([metric], ks) if data is None else data
    fig, ax = _figure(ax)
    for i, (model, part) in enumerate(frame.groupby("model", sort=False)):
        ax.plot(part["k"], part["value"], marker="o", markersize=3, linewidth=1.6, color=COLOURS[i % len(COLOURS)],
                label=label(model))
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("k (cutoff)")
    ax.set_ylabel(label(f"{metric}@k (mean)"))
    ax.set_title(label(f"{metric}@k"))
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False)
    return fig


def plot_deltas(results, metric: str, baseline: str | None = None, model: str | None = None, ax=None, data=None):
    """Histogram of the per-query differences ``model - baseline`` of ``metric`` (see
    :meth:`Results.plot_deltas`), with their mean and the count of wins, ties and losses.

    Losses (red) and wins (green) fall in bins on either side of 0 (0 is a bin edge), so that no
    bar hides another; the ties (grey) are one translucent, outlined bar centred on 0, drawn in
    front, through which the bars of small losses and wins beside 0 stay visible. The y axis is
    linear up to 10 queries, then logarithmic.

    Examples
    --------
    >>> import topkeval as tk
    >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1],
    ...                    "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]},
    ...                   metrics=["precision@1"], score=["a", "b"])
    >>> fig = res.plot_deltas("precision@1", baseline="a")
    >>> fig.axes[0].get_title()
    'precision@1: b - a per query'
    """
    models = results.models
    if len(models) < 2:
        raise ParameterError("plot_deltas compares two models; these results have one.")
    baseline = models[0] if baseline is None else baseline
    model = next(m for m in models if m != baseline) if model is None else model
    from ..engine.aggregate import weighted_mean

    d = results.diff(baseline, model, metric) if data is None else data
    weight = getattr(results, "weight", None)
    delta, w = counted_deltas(results, d)
    fig, ax = _figure(ax)
    wins, ties, losses = int((delta > 0).sum()), int((delta == 0).sum()), int((delta < 0).sum())
    if len(delta):
        span = max(float(np.abs(delta).max()), 1e-12)
        width = span / 20
        # 40 bins with 0 as an edge: a bin holds losses only or wins only, however small the
        # difference, so no bar is stacked on another; the ties get their own bar over 0, drawn
        # last, translucent and outlined: the bars under it show through, and it shows above them
        bins = np.arange(-20, 21) * width
        # each side one filled step outline (a StepPatch) rather than 40 rectangles: half the drawing time
        ax.stairs(np.histogram(delta[delta < 0], bins)[0], bins, fill=True, color=COLOURS[3],
                  label=f"{model} worse: {losses:,}", zorder=2)
        ax.stairs(np.histogram(delta[delta > 0], bins)[0], bins, fill=True, color=COLOURS[2],
                  label=f"{model} better: {wins:,}", zorder=2)
        ax.bar([0.0], [ties], width=width, color=COLOURS[7], alpha=0.45, edgecolor="#404040", linewidth=1.0,
               label=f"equal: {ties:,}", zorder=3)
        mean = weighted_mean(delta, w if weight else None)  # exact for any finite weights (1e308 included)
        ax.axvline(mean, color="black", linewidth=1.2, linestyle="--",
                   label=f"{'weighted ' if weight else ''}mean {mean:+.4f}")
    ax.set_yscale("symlog", linthresh=10)
    if len(delta):  # room above the tallest bar for the legend (upper left), never drawn over the bars
        peak = max(np.histogram(delta[delta < 0], bins)[0].max(initial=0),
                   np.histogram(delta[delta > 0], bins)[0].max(initial=0), ties)
        ax.set_ylim(0, _headroom(float(peak)))
    # plain numbers (1, 10, 1,000) rather than mathtext powers of ten: parsing mathtext was a third of the drawing
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(_whole))  # a module-level function: the figure pickles
    ax.set_xlabel(label(f"{metric}: {model} - {baseline}"))
    ax.set_ylabel("queries")
    ax.set_title(_wrapped(label(f"{metric}: {model} - {baseline} per query")))
    if len(delta):
        # over the room left above the bars; the mean's line passes behind it
        legend = ax.legend(fontsize=8, loc="upper left", frameon=True, facecolor="white", edgecolor="none",
                           framealpha=0.85)
        for text in legend.get_texts():
            text.set_text(label(text.get_text()))
    else:  # no query has a value under both models (undefined everywhere, or no per-query values)
        ax.text(0.5, 0.5, "no query with a value under both models", transform=ax.transAxes, ha="center",
                va="center", color="#6b7482")
    return fig


#: the share of a histogram's height its bars may take: the rest, above them, holds the legend
_BARS = 0.62


def _headroom(peak: float) -> float:
    """The top of a symlog y axis (linear to 10, then logarithmic) at which a bar of ``peak``
    queries reaches ``_BARS`` of its height."""
    peak = max(peak, 1.0)
    decades = (peak / 10 if peak <= 10 else 1 + np.log10(peak / 10)) / _BARS  # symlog's scale: 10 is one decade
    return float(10 * decades if decades <= 1 else 10 * 10 ** (decades - 1))


def _wrapped(title: str, width: int = 60) -> str:
    """A title on lines of about ``width`` characters (broken at spaces, a long id kept whole): a
    title wider than its figure would be cut off at both ends."""
    import textwrap

    return "\n".join(textwrap.wrap(title, width, break_long_words=False, break_on_hyphens=False)) or title


def counted_deltas(results, d) -> tuple[np.ndarray, np.ndarray]:
    """The per-query deltas of a :meth:`Results.diff` table as :meth:`Results.compare` counts them, and
    their weights (1 without ``weight=``): NaN and weight-0 queries left out (a query of weight 0
    counts nowhere), and a delta within compare's tie tolerance set to 0 (float noise is no win)."""
    from ..analysis.compare import TIE

    delta = d["delta"].to_numpy(float)
    weight = results.weight
    attrs = results.attributes
    w = attrs[weight].reindex(d.iloc[:, 0]).to_numpy(float) if weight and attrs is not None else np.ones(len(delta))
    keep = np.isfinite(delta) & (w > 0)
    delta = delta[keep]
    return np.where(np.abs(delta) <= TIE, 0.0, delta), w[keep]


def fixed_axes(size=(6.4, 3.6)):
    """An axes for the report: fixed margins rather than a layout engine (constrained layout measured
    every text several times, a third of the drawing); :func:`fit` widens them where a text would be
    cut off."""
    fig, ax = _pyplot().subplots(figsize=size)
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.14, top=0.91)
    return ax


#: pixels kept between a figure's edge and its outermost text
_EDGE = 4.0


def fit(fig) -> None:
    """Widen a fixed-margin figure's margins where its texts stick out (wide tick labels, 0.00012 or
    1,000,000 on the y axis; a long axis label or title), so that no label is cut off: one measure of
    the texts (each axes' tight box), the axes then moved inside by what sticks out. A figure with a
    layout engine lays itself out."""
    if fig.get_layout_engine() is not None or not fig.axes:
        return
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    sp = fig.subplotpars
    left, right, bottom, top = sp.left, sp.right, sp.bottom, sp.top
    for ax in fig.axes:
        box = ax.get_tightbbox(renderer)
        if box is None:
            continue
        left = max(left, sp.left + (_EDGE - box.x0) / width)
        right = min(right, sp.right - (box.x1 - (width - _EDGE)) / width)
        bottom = max(bottom, sp.bottom + (_EDGE - box.y0) / height)
        top = min(top, sp.top - (box.y1 - (height - _EDGE)) / height)
    if (left, right, bottom, top) != (sp.left, sp.right, sp.bottom, sp.top) and left < right and bottom < top:
        fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top)


def svg(fig) -> str:
    """A figure as inline SVG markup (no XML prolog; text as text, drawn in the page's sans-serif
    font, which is lighter to write and to load than a path per glyph), closed after; its margins
    fitted to its texts first (:func:`fit`)."""
    import io

    plt = _pyplot()
    import matplotlib

    fit(fig)
    buf = io.StringIO()
    # the same ids in every run: reproducible pages
    with matplotlib.rc_context({"svg.hashsalt": "topkeval", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _whole(value: float, _position=None) -> str:
    """A tick label: the number with thousands separators (1,000), no decimals."""
    return f"{value:,.0f}"
