"""The command line: a thin layer over the public API.

Every user error (bad flags, a missing file, bad data) exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from . import report
from .conventions import EMPTY_QUERIES, PRESETS, SHORT_LISTS, TIES
from .errors import TopkevalError

FORMATS = ("table", "json", "csv", "markdown")
EVAL_FORMATS = FORMATS + ("trec",)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise _UsageError(message)


def _add_conventions(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("conventions (see docs/conventions.md)")
    g.add_argument("--conventions", choices=list(PRESETS), help="a preset reproducing another tool")
    g.add_argument("--ties", choices=TIES, help="order among equal scores (default: expected)")
    g.add_argument("--empty-queries", choices=EMPTY_QUERIES, help="queries without a relevant item (default: skip)")
    g.add_argument("--undefined", choices=["0", "1", "nan"], help="value of x/0 (default: 0)")
    g.add_argument("--short-lists", choices=SHORT_LISTS, help="k larger than the list (default: pad)")
    g.add_argument("--threshold", type=float, help="a grade >= this is relevant (default: grade > 0)")
    g.add_argument("--score-threshold", type=float, help="drop candidates scoring below this")


def _conventions(args) -> dict:
    out = {}
    for name in ("ties", "empty_queries", "short_lists", "threshold", "score_threshold"):
        value = getattr(args, name)
        if value is not None:
            out[name] = value
    if args.undefined is not None:
        out["undefined"] = float(args.undefined) if args.undefined != "nan" else "nan"
    if args.conventions:
        out["conventions"] = args.conventions
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="topkeval", description="Exact top-k evaluation of rankings.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    ev = sub.add_parser("evaluate", help="evaluate one or more score columns of a log")
    ev.add_argument("file", nargs="?", help="a .parquet file (or directory) or a .csv file, one row per candidate")
    ev.add_argument("--qrels", help="judgments apart from the runs: a TREC qrels file (or a table)")
    ev.add_argument("--run", action="append", help="a TREC run file (repeat for several); needs --qrels")
    ev.add_argument("--missing-queries", choices=["skip", "zero"], help="with --qrels: judged queries a run lacks "
                    "are left out (default, trec_eval) or score 0 (trec_eval -c)")
    ev.add_argument("--depth", type=int, help="keep the first N candidates of each query (trec_eval -M)")
    ev.add_argument("--chunk-rows", type=int, help="stream a parquet file in batches of this many rows")
    ev.add_argument("--query", default="query", help="query id column (default: query)")
    ev.add_argument("--relevance", default="relevance", help="relevance grade column (default: relevance)")
    ev.add_argument("--score", action="append", help="score column, one per model (repeat for several)")
    ev.add_argument("--item", help="item id column (duplicate check, item tie rules)")
    ev.add_argument("-m", "--metric", action="append", help="metric such as recall@20 (repeat)")
    ev.add_argument("--format", choices=EVAL_FORMATS, default="table", help="trec: trec_eval-style lines")
    ev.add_argument("--per-query", action="store_true", help="print one row per (model, query) instead")
    _add_conventions(ev)

    cmp = sub.add_parser("compare", help="is a model better than the baseline? paired tests per metric")
    cmp.add_argument("file", help="a .parquet file (or directory) or a .csv file, one row per candidate")
    cmp.add_argument("--query", default="query", help="query id column (default: query)")
    cmp.add_argument("--relevance", default="relevance", help="relevance grade column (default: relevance)")
    cmp.add_argument("--baseline", required=True, help="score column of the baseline model")
    cmp.add_argument("--score", action="append", required=True, help="score column of a model to compare (repeat)")
    cmp.add_argument("--item", help="item id column")
    cmp.add_argument("-m", "--metric", action="append", help="metric such as recall@20 (repeat)")
    cmp.add_argument("--test", choices=["permutation", "t", "wilcoxon", "bootstrap"], default="permutation")
    cmp.add_argument("--correction", choices=["holm", "bonferroni", "bh", "none"], default="holm")
    cmp.add_argument("--confidence", type=float, default=0.95, help="confidence level (default: 0.95)")
    cmp.add_argument("--resamples", type=int, default=10_000, help="bootstrap / permutation resamples")
    cmp.add_argument("--seed", type=int, default=0)
    cmp.add_argument("--format", choices=FORMATS, default="table")
    _add_conventions(cmp)

    demo = sub.add_parser("demo", help="evaluate two rankers of a built-in image search log")
    demo.add_argument("--queries", type=int, default=3000, help="number of queries (default: 3000)")
    demo.add_argument("--format", choices=FORMATS, default="table")

    sub.add_parser("metrics", help="list the metrics and their formulas")
    return parser


def _emit_results(res, fmt: str, per_query: bool, out) -> None:
    frame = res.per_query if per_query else res.summary
    if fmt == "trec":
        out.write(report.trec_lines(res, per_query))
        return
    if fmt == "json":
        payload = res.to_dict()
        if per_query:
            payload["per_query"] = res.per_query.to_dict(orient="records")
        print(report.json_text(payload), file=out)
    elif fmt == "csv":
        out.write(report.csv(frame))
    elif fmt == "markdown":
        print(report.markdown(frame), file=out)
        for line in report.info_lines(res.info):
            print(f"\n_{line}_", file=out)
    else:
        _console(out).print(report.rich_table(frame))
        for line in report.info_lines(res.info):
            print(line, file=out)


def _console(out):
    from rich.console import Console

    return Console(file=out, width=None if out.isatty() else 160, soft_wrap=False)


def _evaluate(args, out) -> int:
    from .api import DEFAULT_METRICS, evaluate

    metrics = args.metric or list(DEFAULT_METRICS)
    extra = {k: v for k, v in (("missing_queries", args.missing_queries), ("depth", args.depth)) if v is not None}
    if args.run:
        from .io import read_runs

        if args.file or not args.qrels:
            raise _UsageError("--run needs --qrels and no positional FILE")
        res = evaluate(read_runs(args.run), metrics=metrics, query="query", relevance="relevance", score="score",
                       item="item", model="run", qrels=args.qrels, **extra, **_conventions(args))
    else:
        if not args.file:
            raise _UsageError("give a FILE to evaluate, or --qrels QRELS --run RUN")
        callback, bar = _progress(args.file)
        with bar or contextlib.nullcontext():
            res = evaluate(args.file, metrics=metrics, query=args.query, relevance=args.relevance,
                           score=args.score or ["score"], item=args.item, qrels=args.qrels, chunk_rows=args.chunk_rows,
                           progress=callback, keep_per_query=args.per_query, **extra, **_conventions(args))
    _emit_results(res, args.format, args.per_query, out)
    return 0


def _progress(path):
    """A progress bar on stderr for a streamed parquet file, only when stderr is a terminal."""
    if not sys.stderr.isatty() or not str(path).endswith((".parquet", ".pq")):
        return None, None
    from pathlib import Path

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .stream import count_rows

    try:
        total = count_rows(Path(path))
    except Exception:  # the evaluation itself reports an unreadable file
        return None, None
    bar = Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("rows", total=total)
    return (lambda rows: bar.advance(task, rows)), bar


def _compare(args, out) -> int:
    from .api import DEFAULT_METRICS, evaluate

    models = [args.baseline] + [s for s in args.score if s != args.baseline]
    if len(models) < 2:
        raise _UsageError("--score must name at least one column other than --baseline")
    res = evaluate(args.file, metrics=args.metric or list(DEFAULT_METRICS), query=args.query,
                   relevance=args.relevance, score=models, item=args.item, **_conventions(args))
    table = res.compare(baseline=args.baseline, test=args.test,
                        correction=None if args.correction == "none" else args.correction,
                        confidence=args.confidence, n_resamples=args.resamples, seed=args.seed)
    table.insert(2, "verdict", [verdict_word(r) for r in table.itertuples()])
    if args.format == "json":
        print(report.json_text({"comparison": table.to_dict(orient="records"), "info": res.info}), file=out)
    elif args.format == "csv":
        out.write(report.csv(table))
    else:
        shown = table[["model", "metric", "verdict", "baseline", "value", "delta", "ci_low", "ci_high",
                       "p_value", "p_adjusted", "wins", "ties", "losses"]]
        if args.format == "markdown":
            print(report.markdown(shown), file=out)
        else:
            _console(out).print(report.rich_table(shown, title=f"vs {args.baseline}: {args.test} test, "
                                                 f"{args.correction} correction, {args.confidence:.0%} intervals"))
        for line in report.info_lines(res.info):
            print(line, file=out)
    return 0


def verdict_word(row) -> str:
    """better / worse / no detectable difference, from a row of compare()."""
    if row.significant and row.delta > 0:
        return "better"
    if row.significant and row.delta < 0:
        return "worse"
    return "no detectable difference"


def _demo(args, out) -> int:
    from .api import evaluate
    from .demo import example_log

    if args.queries < 1:
        raise _UsageError(f"--queries must be a positive integer, got {args.queries}")
    log = example_log(args.queries)
    metrics = ["recall@20", "precision@20", "f1@20", "specificity@20", "r_precision", "recall@5", "precision@5"]
    res = evaluate(log, metrics=metrics, query="query", relevance="click", score=["old_ranker", "new_ranker"],
                   item="image")
    if args.format == "table":
        print(f"Example log: {len(log):,} candidate images for {args.queries:,} image search queries; "
              "relevance = click", file=out)
    _emit_results(res, args.format, False, out)
    if args.format == "table":
        print(verdict(res, "old_ranker", "new_ranker", "recall@20"), file=out)
    return 0


def verdict(res, baseline: str, model: str, metric: str) -> str:
    """One line: is ``model`` better than ``baseline`` on ``metric``?"""
    a = res.summary.loc[baseline, metric]
    b = res.summary.loc[model, metric]
    delta = b - a
    rel = f" ({delta / a:+.1%})" if a else ""
    row = res.compare(baseline=baseline, metrics=[metric], test="permutation", correction=None).iloc[0]
    return (f"Verdict: {model} vs {baseline} on {metric}: {a:.4f} -> {b:.4f}, {delta:+.4f}{rel}; 95% CI of the "
            f"difference [{row.ci_low:+.4f}, {row.ci_high:+.4f}], paired permutation test p = {row.p_value:.2g}: "
            f"{verdict_word(row)}.")


def _metrics(args, out) -> int:
    from .names import FAMILIES

    for fam in FAMILIES.values():
        example = fam.name + ("(beta=0.5)" if fam.params else "") + ("@10" if fam.cutoff == "required" else "")
        aliases = f"  (aliases: {', '.join(fam.aliases)})" if fam.aliases else ""
        print(f"{example:24s} {fam.formula:40s} {fam.summary}{aliases}", file=out)
    return 0


def main(argv=None) -> int:
    """Entry point of the ``topkeval`` command."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stdout)
            return 0
        handler = {"evaluate": _evaluate, "compare": _compare, "demo": _demo, "metrics": _metrics}[args.command]
        return handler(args, sys.stdout)
    except (_UsageError, TopkevalError) as exc:
        message = " ".join(str(exc).split())
        print(f"topkeval: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("topkeval: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
