"""The command line: a thin layer over the public API.

Every user error (bad flags, a missing file, bad data) exits with code 2 and one line on stderr,
worded with the command line's own flags (``--empty-queries skip``, not ``empty_queries='skip'``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys

from . import report
from .conventions import PRESETS, SETTINGS
from .errors import TopkevalError

FORMATS = ("table", "json", "csv", "markdown")
EVAL_FORMATS = FORMATS + ("trec",)
TESTS = ("permutation", "t", "wilcoxon", "bootstrap")
CORRECTIONS = ("holm", "bonferroni", "bh", "none")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise _UsageError(message)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_conventions(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("conventions (list them, and the presets, with: topkeval conventions)")
    g.add_argument("--conventions", choices=list(PRESETS), metavar="PRESET",
                   help=f"a preset reproducing another tool: {', '.join(PRESETS)} (default: none)")
    for s in SETTINGS:
        default = "grade > 0" if s.name == "threshold" else ("none" if s.default is None else s.default)
        if s.choices is None:
            g.add_argument(_flag(s.name), type=float, help=f"{s.help} (default: {default})")
        else:
            g.add_argument(_flag(s.name), choices=s.choices, help=f"{s.help} (default: {default})")


def _conventions(args) -> dict:
    out = {}
    for s in SETTINGS:
        value = getattr(args, s.name)
        if value is not None:
            out[s.name] = value
    if args.conventions:
        out["conventions"] = args.conventions
    return out


def _metrics(values) -> list[str] | None:
    """``-m`` values; each may list several names separated by commas (``-m recall@10,P@10``)."""
    if not values:
        return None
    from .names import split_names

    return [name for value in values for name in split_names(value)]


def _add_input(p: argparse.ArgumentParser, positional_help: str) -> None:
    p.add_argument("file", nargs="?", help=positional_help)
    p.add_argument("--qrels", help="judgments apart from the runs: a TREC qrels file, or a table (.parquet, .csv) "
                   "with query, item and relevance columns")
    p.add_argument("--run", action="append", help="a TREC run file (repeat for several); needs --qrels")
    p.add_argument("--query", default="query", help="query id column (default: query)")
    p.add_argument("--relevance", default="relevance", help="relevance grade column (default: relevance)")
    p.add_argument("--item", help="item id column: duplicate check, item tie rules, --qrels matching "
                   "(default: none)")
    p.add_argument("-m", "--metric", action="append", help="metric such as recall@20; repeat, or separate by "
                   "commas (default: recall@20, precision@20, f1@20, specificity@20, r_precision; "
                   "list them with: topkeval metrics)")
    p.add_argument("--missing-queries", choices=["skip", "zero"], help="with --qrels: judged queries a run lacks "
                   "are left out (default, trec_eval) or score 0 (trec_eval -c)")
    p.add_argument("--depth", type=int, help="keep the first N candidates of each query (trec_eval -M; "
                   "default: all)")
    p.add_argument("--judged-only", action="store_true", help="with --qrels: drop unjudged items before ranking "
                   "(trec_eval -J)")
    p.add_argument("--ascending", action="store_true", help="lower scores rank first (ranks, distances)")
    p.add_argument("--chunk-rows", type=int, help="read a .parquet or .csv file in batches of this many rows, in "
                   "bounded memory (default: parquet files over 20 million rows, in batches of 5 million)")
    p.add_argument("--spark", nargs="?", const="local[*]", metavar="MASTER",
                   help="read FILE (parquet: a file or a directory) and --qrels with Apache Spark and evaluate there "
                        "(MASTER: a Spark master URL, default local[*]; needs pip install 'topkeval[spark]')")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(prog="topkeval", description="Exact top-k evaluation of rankings, under explicit conventions.")
    parser.add_argument("--version", action="version", version=f"topkeval {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    ev = sub.add_parser("evaluate", help="evaluate one or more score columns of a log, or TREC runs",
                        description="Evaluate one or more models: a log (one row per query and candidate, one score "
                        "column per model) or TREC runs with --qrels.")
    _add_input(ev, "a .parquet file (or directory) or a .csv / .tsv file, one row per candidate")
    ev.add_argument("--score", action="append", help="score column, one per model; repeat for several "
                    "(default: score)")
    ev.add_argument("--format", choices=EVAL_FORMATS, default="table", help="table, json, csv, markdown, or trec "
                    "(trec_eval-style lines) (default: table)")
    ev.add_argument("--per-query", action="store_true", help="print one row per (model, query) instead of the means")
    _add_conventions(ev)

    cmp = sub.add_parser("compare", help="is a model better than the baseline? paired tests per metric",
                         description="Compare models with a baseline, metric by metric, on paired queries: the "
                         "difference of means, its bootstrap interval, a p-value corrected across every row, and a "
                         "verdict.")
    _add_input(cmp, "a .parquet file (or directory) or a .csv / .tsv file, one row per candidate")
    cmp.add_argument("--baseline", required=True, help="the baseline model: a score column, or a run's name "
                     "(its tag) with --run")
    cmp.add_argument("--score", action="append", help="score column of a model to compare; repeat for several "
                     "(with --run: every run is compared)")
    cmp.add_argument("--test", choices=TESTS, default="permutation", help="paired test (default: permutation)")
    cmp.add_argument("--correction", choices=CORRECTIONS, default="holm",
                     help="multiple-testing correction over every row (default: holm)")
    cmp.add_argument("--confidence", type=float, default=0.95, help="level of the intervals; a row is significant "
                     "when its corrected p-value is below 1 - confidence (default: 0.95)")
    cmp.add_argument("--resamples", type=int, default=10_000, help="bootstrap and permutation resamples "
                     "(default: 10000)")
    cmp.add_argument("--seed", type=int, default=0, help="seed of the resampling (default: 0)")
    cmp.add_argument("--format", choices=FORMATS, default="table", help="table, json, csv or markdown "
                     "(default: table)")
    _add_conventions(cmp)

    demo = sub.add_parser("demo", help="evaluate two rankers of a built-in image search log",
                          description="Evaluate an old and a new ranker of a built-in image search log and say "
                          "whether the new one is better.")
    demo.add_argument("--queries", type=int, default=3000, help="number of queries (default: 3000)")
    demo.add_argument("--format", choices=FORMATS, default="table", help="(default: table)")

    sub.add_parser("metrics", help="list the metrics, their formulas and aliases",
                   description="List every metric family with its formula and the names other tools use.")
    sub.add_parser("conventions", help="list the conventions and the presets that reproduce other tools",
                   description="List every convention (the settings that change a number) and every preset.")
    return parser


def _emit_results(res, fmt: str, per_query: bool, out) -> None:
    if fmt == "trec":
        out.write(report.trec_lines(res, per_query))
        return
    frame = res.to_pandas() if per_query else res.summary
    if fmt == "json":
        print(report.json_text(res.to_dict(per_query=per_query)), file=out)
    elif fmt == "csv":
        out.write(report.csv(frame))
    elif fmt == "markdown":
        print(report.markdown(frame), file=out)
        if per_query:  # the means too, under the rows
            print("\n" + report.markdown(res.summary), file=out)
        for line in report.info_lines(res.info):
            print(f"\n_{cli_words(line)}_", file=out)
    else:
        console = _console(out)
        console.print(report.rich_table(frame))
        if per_query:
            console.print(report.rich_table(res.summary, title="means over the queries"))
        for line in report.info_lines(res.info):
            print(cli_words(line), file=out)


def _console(out):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit with 1; a closed pipe is not an error here
            raise BrokenPipeError

    return _Console(file=out, width=None if out.isatty() else 160, soft_wrap=False, highlight=False)


def _load(args, metrics, *, scores, keep_per_query: bool):
    """Evaluate what the command line names: a log file, or --run files with --qrels."""
    from .api import evaluate

    extra = {k: v for k, v in (("missing_queries", args.missing_queries), ("depth", args.depth)) if v is not None}
    if args.judged_only:
        extra["judged_only"] = True
    if args.ascending:
        extra["ascending"] = True
    if args.run:
        if args.file or not args.qrels:
            raise _UsageError("--run needs --qrels and no positional FILE")
        if args.chunk_rows is not None:
            raise _UsageError("--chunk-rows reads a .parquet or .csv log in batches; TREC runs are read whole")
        return evaluate(args.run, metrics=metrics, qrels=args.qrels, **extra, **_conventions(args))
    if not args.file:
        raise _UsageError("give a FILE to evaluate, or --qrels QRELS --run RUN")
    if args.spark:
        from .spark import read_parquet

        if args.chunk_rows is not None:
            raise _UsageError("--chunk-rows streams a file on this machine; with --spark, Spark reads it")
        data = read_parquet(args.file, args.spark)
        qrels = read_parquet(args.qrels, args.spark) if args.qrels else None
        return evaluate(data, metrics=metrics, query=args.query, relevance=args.relevance, score=scores,
                        item=args.item, qrels=qrels, **extra, **_conventions(args))
    callback, bar = _progress(args.file)
    with bar or contextlib.nullcontext():
        return evaluate(args.file, metrics=metrics, query=args.query, relevance=args.relevance, score=scores,
                        item=args.item, qrels=args.qrels, chunk_rows=args.chunk_rows, progress=callback,
                        keep_per_query=keep_per_query, **extra, **_conventions(args))


def _evaluate(args, out) -> int:
    from .api import DEFAULT_METRICS

    metrics = _metrics(args.metric) or list(DEFAULT_METRICS)
    res = _load(args, metrics, scores=args.score or ["score"],
                keep_per_query=args.per_query)
    _emit_results(res, args.format, args.per_query, out)
    return 0


def _progress(path):
    """A progress bar on stderr for a streamed file, only when stderr is a terminal."""
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
    from .api import DEFAULT_METRICS

    metrics = _metrics(args.metric) or list(DEFAULT_METRICS)
    if args.run:
        res = _load(args, metrics, scores=None, keep_per_query=True)
        if args.baseline not in res.models:
            from .errors import did_you_mean

            raise _UsageError(f"--baseline {args.baseline!r} is not one of the runs "
                              f"({', '.join(res.models)}).{did_you_mean(args.baseline, res.models)}")
    else:
        models = [args.baseline] + [s for s in (args.score or []) if s != args.baseline]
        if len(models) < 2:
            raise _UsageError("--score must name at least one column other than --baseline")
        res = _load(args, metrics, scores=models, keep_per_query=True)
    table = res.compare(baseline=args.baseline, test=args.test,
                        correction=None if args.correction == "none" else args.correction,
                        confidence=args.confidence, n_resamples=args.resamples, seed=args.seed)
    if args.format == "json":
        print(report.json_text({"comparison": report.records(table), "info": res.info}), file=out)
    elif args.format == "csv":
        out.write(report.csv(table))
    else:
        shown = table[["model", "metric", "verdict", "baseline", "value", "delta", "ci_low", "ci_high",
                       "p_value", "p_adjusted", "wins", "ties", "losses"]]
        p_text = {c: (lambda p: report.p_value_text(p, args.resamples if args.test in ("permutation", "bootstrap")
                                                     else None)) for c in ("p_value", "p_adjusted")}
        if args.format == "markdown":
            shown = shown.assign(**{c: shown[c].map(f) for c, f in p_text.items()})
            print(report.markdown(shown), file=out)
        else:
            _console(out).print(report.rich_table(shown, formats=p_text, title=(
                f"vs {report.visible(args.baseline)}: {args.test} test, {args.correction} correction, "
                f"{args.confidence:.0%} intervals")))
        for line in report.info_lines(res.info):
            print(cli_words(line), file=out)
    return 0


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
        print(verdict_line(res, "old_ranker", "new_ranker", "recall@20"), file=out)
    return 0


def verdict_line(res, baseline: str, model: str, metric: str) -> str:
    """One line: is ``model`` better than ``baseline`` on ``metric``?"""
    a = res.summary.loc[baseline, metric]
    b = res.summary.loc[model, metric]
    delta = b - a
    rel = f" ({delta / a:+.1%})" if a else ""
    row = res.compare(baseline=baseline, metrics=[metric], test="permutation", correction=None).iloc[0]
    p = report.p_value_text(row.p_value, 10_000)
    return (f"Verdict: {model} vs {baseline} on {metric}: {a:.4f} -> {b:.4f}, {delta:+.4f}{rel}; 95% CI of the "
            f"difference [{row.ci_low:+.4f}, {row.ci_high:+.4f}], paired permutation test "
            f"p {p if p.startswith('<') else '= ' + p}: {row.verdict}.")


def _list_metrics(args, out) -> int:
    from .metrics import FAMILIES

    for fam in FAMILIES.values():
        names = list(fam.aliases) + [a for a, _ in fam.variants] + [t for t in (fam.trec, fam.trec_uncut) if t]
        names = [n for n in dict.fromkeys(names) if n != fam.name]
        aliases = f"  (also: {', '.join(names)})" if names else ""
        print(f"{fam.example():26s} {fam.summary}{aliases}\n{'':26s} = {fam.formula}", file=out)
    return 0


def _list_conventions(args, out) -> int:
    print("Conventions (each is a flag of evaluate and compare, and a keyword in Python):", file=out)
    for s in SETTINGS:
        values = "a number" if s.choices is None else " | ".join(s.choices)
        print(f"  {_flag(s.name):21s} {values}\n  {'':21s} {s.help} (default: {s.default})", file=out)
    print("\nPresets (--conventions NAME) reproduce other tools:", file=out)
    for name, settings in PRESETS.items():
        shown = ", ".join(f"{_flag(k)} {v}" for k, v in settings.items()) or "the defaults"
        print(f"  {name:13s} {shown}", file=out)
    return 0


#: Python spellings in the library's messages, and the flags that say the same on the command line.
_PARAMS = {s.name: _flag(s.name) for s in SETTINGS} | {
    "n_resamples": "--resamples", "missing_queries": "--missing-queries", "chunk_rows": "--chunk-rows",
    "judged_only": "--judged-only", "conventions": "--conventions", "depth": "--depth", "score": "--score",
    "query": "--query", "relevance": "--relevance", "item": "--item", "confidence": "--confidence",
    "seed": "--seed", "test": "--test", "correction": "--correction", "qrels": "--qrels",
}


def cli_words(message: str) -> str:
    """A library message in the command line's words: ``empty_queries='skip'`` -> ``--empty-queries skip``.

    >>> cli_words("Use empty_queries='skip' or pass qrels=. The 'n_resamples' parameter of compare must be")
    'Use --empty-queries skip or pass --qrels. The --resamples option of compare must be'
    """
    names = "|".join(sorted(_PARAMS, key=len, reverse=True))
    message = re.sub(rf"\b({names})=(?:'([^']*)'|\"([^\"]*)\"|([\w+-](?:[\w.+-]*\w)?))",
                     lambda m: f"{_PARAMS[m.group(1)]} {m.group(2) or m.group(3) or m.group(4)}", message)
    message = re.sub(rf"\b({names})=(?=[\s.,;:)]|$)", lambda m: _PARAMS[m.group(1)], message)
    return re.sub(rf"The '({names})' parameter", lambda m: f"The {_PARAMS[m.group(1)]} option", message)


def main(argv=None) -> int:
    """Entry point of the ``topkeval`` command."""
    import warnings

    from .errors import TopkevalWarning

    parser = build_parser()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TopkevalWarning)
        try:
            return _run(parser, argv)
        finally:
            for w in caught:  # one line each, in the command line's words, never a Python source line
                if issubclass(w.category, TopkevalWarning):
                    print(f"topkeval: warning: {cli_words(' '.join(str(w.message).split()))}", file=sys.stderr)
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _run(parser, argv) -> int:
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stdout)
            return 0
        handler = {"evaluate": _evaluate, "compare": _compare, "demo": _demo, "metrics": _list_metrics,
                   "conventions": _list_conventions}[args.command]
        code = handler(args, sys.stdout)
        sys.stdout.flush()
        return code
    except (_UsageError, TopkevalError) as exc:
        message = " ".join(str(exc).split())
        print(f"topkeval: error: {cli_words(message) if isinstance(exc, TopkevalError) else message}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("topkeval: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (topkeval demo | head -1): that is not an error;
        # point stdout at /dev/null so that the interpreter's final flush does not fail again
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
