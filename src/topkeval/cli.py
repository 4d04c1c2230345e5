"""The command line: a thin layer over the public API.

Every user error (bad flags, a missing file, bad data) exits with code 2 and one line on stderr,
worded with the command line's own flags (``--empty-queries skip``, not ``empty_queries='skip'``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import shlex
import sys

from . import stattests
from .analysis.offpolicy import ESTIMATORS as OFF_POLICY_ESTIMATORS
from .analysis.offpolicy import MIN_CLICKS, MIN_ESS
from .conventions import PRESETS, SETTINGS
from .errors import TopkevalError
from .inputs.formats import FORMATS as FILE_FORMATS
from .inputs.formats import format_of, is_gzip_name, table_suffixes
from .outputs import formats
from .outputs import text as report

FORMATS = formats.names(general_only=True)  # the output formats' registry (outputs/formats.py), as imported
TESTS = stattests.PAIRED
CORRECTIONS = ("holm", "bonferroni", "bh", "none")
DEMO_MAX_QUERIES = 100_000  # about 4 million rows of the demo log


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    #: the command line being parsed (argparse reports an unknown flag at the top, not in the command)
    argv: list | None = None

    def error(self, message):  # one line, exit 2, no usage dump
        unknown = re.search(r"unrecognized arguments: (-\S+)", message)
        if unknown:  # a misspelt flag, or another command's
            message += self._hint(unknown.group(1).split("=")[0])
        raise _UsageError(message)

    def _hint(self, flag: str) -> str:
        """What the unknown ``flag`` may be: another command's option (``evaluate --show``), or the
        closest option of the command given (else of every command)."""
        from .errors import closest

        commands = self._commands()
        given = next((a for a in (self.argv or []) if a in commands), None)
        owners = [name for name, sub in commands.items() if flag in sub._every_option()]
        if given is not None and given not in owners and owners:
            return (f": {flag} is an option of {' and '.join(f'topkeval {o}' for o in owners)}, not of topkeval "
                    f"{given} (topkeval {given} --help lists its options)")
        if given is None:
            hits = [h for h in closest(flag, self._every_option(), n=1) if h != flag]
            return f". Did you mean {hits[0]!r}?" if hits else ""
        hits = [h for h in closest(flag, commands[given]._every_option(), n=1) if h != flag]
        if hits:
            return f". Did you mean {hits[0]!r}?"
        hits = [h for h in closest(flag, self._every_option(), n=1) if h != flag]  # another command's option
        if not hits:
            return ""
        owners = [name for name, sub in commands.items() if hits[0] in sub._every_option()]
        return f". Did you mean {hits[0]!r} (an option of {' and '.join(f'topkeval {o}' for o in owners)})?"

    def _commands(self) -> dict:
        return {name: sub for action in self._actions if isinstance(action, argparse._SubParsersAction)
                for name, sub in action.choices.items()}

    def _every_option(self) -> list[str]:
        options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        for sub in self._commands().values():
            options += sub._every_option()
        return list(dict.fromkeys(options))

    def _print_message(self, message, file=None):  # argparse drops an error writing --help or --version
        if message:
            _Stdout(file or sys.stderr).write(message)


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
    """``-m`` values; each may list several names separated by commas (``-m recall@10,P@10``). An
    empty value (``-m ''``, ``-m ','``) or an empty name between commas is an error, never the
    default metrics."""
    if not values:
        return None
    from .metrics.names import split_names

    names = []
    for value in values:
        found = split_names(value)
        if not found:
            raise _UsageError(f"-m {value!r} names no metric: give one such as recall@10 (list them with: "
                              "topkeval metrics), or leave -m out for the default metrics")
        if re.search(r"^\s*,|,\s*,|,\s*$", value):
            raise _UsageError(f"-m {value!r} has an empty name (a comma too many): remove the extra comma")
        names += found
    return names


#: Options naming a column, a file or a model: an empty value is a mistake (a shell variable that
#: was not set), never "the default". (dest, flag, what it names)
_NON_EMPTY = (("file", "FILE", "the path of a file"), ("qrels", "--qrels", "the path of a file"),
              ("run", "--run", "the path of a file"),
              ("query", "--query", "a column name"), ("relevance", "--relevance", "a column name"),
              ("item", "--item", "a column name"), ("score", "--score", "a column name"),
              ("model", "--model", "a column name"), ("other", "--other", "a model name"),
              ("by", "--by", "a column name"), ("weight", "--weight", "a column name"),
              ("position", "--position", "a column name"), ("propensity", "--propensity", "a column or a curve"),
              ("baseline", "--baseline", "a model name"), ("output", "-o/--output", "the path of a file"),
              ("report", "--report", "the path of a file"), ("save", "--save", "the path of a file"),
              ("catalog", "--catalog", "a number of items or a file"), ("history", "--history", "a file"),
              ("popularity", "--popularity", "a file or a column"), ("features", "--features", "a file or columns"),
              ("categories", "--categories", "a file or a column"))


def _check_values(args) -> None:
    """No option of :data:`_NON_EMPTY` is given an empty text; no report is written to a file named '-'."""
    for dest, flag, what in _NON_EMPTY:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if v == "":
                raise _UsageError(f"{flag} is empty (''): give {what}")
    for dest, flag in (("output", "-o/--output"), ("report", "--report")):
        if getattr(args, dest, None) == "-":  # the usual "standard output" would be a file named '-' here
            raise _UsageError(f"{flag} is '-': the HTML report is written to a file, not to standard output; give its "
                              "path, such as report.html (./- for a file named '-')")
    if getattr(args, "save", None) == "-":
        raise _UsageError("--save is '-': the example log is written to a file, not to standard output; give its path, "
                          "such as demo.parquet or demo.csv (./- for a file named '-')")


def _add_input(p: argparse.ArgumentParser, positional_help: str) -> None:
    p.add_argument("file", nargs="?", help=positional_help)
    p.add_argument("--qrels", help="judgments apart from the runs: a TREC qrels file, or a table (.parquet, .csv) "
                   "with query, item and relevance columns")
    p.add_argument("--run", action="append", help="a TREC run file (repeat for several); needs --qrels")
    p.add_argument("--query", default="query", help="query id column, of FILE and of a --qrels table "
                   "(default: query)")
    p.add_argument("--relevance", default=None, help="relevance grade column, of FILE or of a --qrels table "
                   "(default: relevance)")
    p.add_argument("--all-relevant", action="store_true", help="the --qrels table lists the relevant (query, item) "
                   "pairs only, without a relevance column (interactions: purchases, clicks): each is relevant, a pair "
                   "listed twice counts once")
    p.add_argument("--item", help="item id column, of FILE and of a --qrels table: duplicate check, item tie rules, "
                   "--qrels matching (default: none; item with --run)")
    p.add_argument("--model", metavar="COLUMN", help="a stacked table (one row per model, query and candidate): the "
                   "column naming each row's model, scored by the one --score column; with --qrels each model is "
                   "matched to the judgments, without, each model's rows are evaluated as its own log (the file is "
                   "read whole)")
    p.add_argument("-m", "--metric", action="append", help="metric such as recall@20; repeat, or separate by "
                   "commas (default: recall@20, precision@20, f1@20, specificity@20 (not with --qrels), r_precision; "
                   "list them with: topkeval metrics)")
    p.add_argument("--missing-queries", choices=["skip", "zero"], help="with --qrels: judged queries a run lacks "
                   "are left out (default, trec_eval) or score 0 (trec_eval -c)")
    p.add_argument("--depth", type=int, help="keep the first N candidates of each query (trec_eval -M; "
                   "default: all)")
    p.add_argument("--judged-only", action="store_true", help="with --qrels: drop unjudged items before ranking "
                   "(trec_eval -J)")
    p.add_argument("--ascending", action="store_true", help="lower scores rank first (ranks, distances)")
    p.add_argument("--by", action="append", metavar="COLUMN", help="break the results down by this query-level "
                   "column (device, market); repeat for several")
    p.add_argument("--weight", metavar="COLUMN", help="query weights (traffic): weighted means and comparisons")
    g = p.add_argument_group("click logs (clicks are not relevance)")
    g.add_argument("--position", metavar="COLUMN", help="the 1-based position at which the logging ranker showed "
                   "each candidate (empty: never shown)")
    g.add_argument("--propensity", metavar="CURVE", help="examination probabilities: a column of them, positions "
                   "'1:1,2:0.6,3:0.45', 'power:ETA' (1/position^ETA), or a curve file of topkeval bias (.csv; "
                   "an estimate above 1, its noise, is taken as 1, as estimate_position_bias's propensities are); "
                   "the metrics are then inverse propensity weighted (needs --position)")
    g.add_argument("--clip", type=float, help="the largest inverse propensity weight (>= 1): biases every estimate "
                   "in favour of the logging ranker; compare refuses clipped estimates")
    g = p.add_argument_group("beyond accuracy (novelty@10, coverage@10, diversity@10...: what each model shows)")
    g.add_argument("--catalog", metavar="N|FILE", help="the catalogue, for coverage, gini and serendipity: its number "
                   "of items, or a table of its items (the --item column, or a single column); default: the items of "
                   "FILE where every model ranks the same candidates, else required")
    g.add_argument("--history", metavar="FILE", help="the queries' past interactions: a table of (--query, --item) "
                   "rows; gives novelty's popularity (RecTools' user frequency) and serendipity's history")
    g.add_argument("--popularity", metavar="FILE|COLUMN", help="each item's share of queries in (0, 1]: a table of "
                   "the --item column and the shares, or a column of FILE")
    g.add_argument("--features", metavar="FILE|COLUMNS", help="each item's vector, for diversity (cosine): a table "
                   "of the --item column and the vectors' columns, or columns of FILE (f1,f2,f3)")
    g.add_argument("--categories", metavar="FILE|COLUMN", help="each item's category, for category_diversity: a "
                   "table of the --item column and the categories, or a column of FILE")
    p.add_argument("--chunk-rows", type=int, help="read a .parquet or .csv file in batches of this many rows, in "
                   "bounded memory (default: parquet files over 20 million rows, in batches of 5 million)")
    p.add_argument("--spark", nargs="?", const="local[*]", metavar="MASTER",
                   help="read FILE (parquet: a file or a directory) and --qrels with Apache Spark and evaluate there "
                        "(MASTER: a Spark master URL, default local[*]; needs pyspark: pip install '.[spark]' in the checkout)")


def _add_tests(p: argparse.ArgumentParser, many: bool = False) -> None:
    choices = TESTS + (stattests.ALL_PAIRS if many else ())
    every = " or ".join(stattests.ALL_PAIRS)
    p.add_argument("--test", choices=choices, default=None if many else stattests.default("pair"),
                   help=f"paired test (default: {stattests.default('pair')}"
                        + (f"; with --all: {every}, default {stattests.default('all')}" if many else "") + "): "
                        + "; ".join(f"{t.name}: {t.description}" for t in stattests.TESTS.values()
                                    if t.name in choices))
    p.add_argument("--correction", choices=CORRECTIONS, default="holm",
                   help="multiple-testing correction over every row (default: holm)")
    p.add_argument("--confidence", type=float, default=0.95, help="level of the intervals; a row is significant "
                   "when its corrected p-value is below 1 - confidence (default: 0.95)")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap and permutation resamples "
                   "(default: 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default: 0)")


def _add_report_output(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("-o", "--output", required=required, metavar="HTML", help="the HTML report to write")
    p.add_argument("--force", action="store_true", help="replace the report file if it exists")
    p.add_argument("--show", action="append", metavar="QUERY", help="a query to show side by side in the report, "
                   "besides the worst regressions; repeat for several")
    p.add_argument("--worst", type=int, default=10, help="worst regressions listed and shown (default: 10)")
    p.add_argument("-k", type=int, help="positions of the side-by-side view (default: the smallest cutoff, at most "
                   "20; or 10)")
    p.add_argument("--images", metavar="URL", help="thumbnails in the side-by-side view: a URL pattern with {item}, "
                   "such as https://cdn.example.com/{item}.jpg")
    p.add_argument("--title", default="topkeval report", help="title of the report")


def _add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr for steps that take seconds (default: when stderr is a terminal "
                        "and the format is table or markdown)")


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__

    parser = _Parser(prog="topkeval", description="Exact top-k evaluation of rankings, under explicit conventions.")
    parser.add_argument("--version", action="version", version=f"topkeval {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    ev = sub.add_parser("evaluate", help="evaluate one or more score columns of a log, or TREC runs",
                        description="Evaluate one or more models: a log (one row per query and candidate, one score "
                        "column per model) or TREC runs with --qrels.")
    _add_input(ev, "a .parquet file (or directory) or a .csv / .tsv file, one row per candidate")
    ev.add_argument("--score", action="append", help="score column, one per model; repeat for several "
                    "(default: score)")
    ev.add_argument("--format", choices=formats.names(), default="table",
                    help=f"{', '.join(formats.names())} (default: table)")
    ev.add_argument("--per-query", action="store_true", help="print one row per (model, query) instead of the means")
    ev.add_argument("--bounds", action="store_true", help="with --position: each metric's naive value, estimate and "
                    "bounds over what the never-shown candidates could be")
    ev.add_argument("--ci", nargs="?", type=float, const=0.95, metavar="LEVEL",
                    help="each mean with its bootstrap confidence interval (default level 0.95)")
    ev.add_argument("--interval", choices=tuple(stattests.INTERVALS), default=None,
                    help=f"the interval of --ci (default: {stattests.default_interval()}): "
                         + "; ".join(f"{i.name}: {i.description}" for i in stattests.INTERVALS.values()))
    ev.add_argument("--baseline", help="the model (a score column) that unexpectedness@k compares each list with")
    _add_conventions(ev)

    cmp = sub.add_parser("compare", help="is a model better than the baseline? paired tests per metric",
                         description="Compare models with a baseline, metric by metric, on paired queries: the "
                         "difference of means, its bootstrap interval, a p-value corrected across every row, and a "
                         "verdict.")
    _add_input(cmp, "a .parquet file (or directory) or a .csv / .tsv file, one row per candidate")
    cmp.add_argument("--baseline", help="the baseline model: a score column, or a run's name (its tag) with --run; "
                     "required unless --all")
    cmp.add_argument("--score", action="append", help="score column of a model to compare; repeat for several "
                     "(not with --run: every run is compared)")
    cmp.add_argument("--all", action="store_true", help="every pair of models, the family-wise error controlled "
                     f"(--test {stattests.default('all')}, the default here, or "
                     f"{' or '.join(stattests.ALL_PAIRS[1:])}), with a compact letter display")
    _add_tests(cmp, many=True)
    cmp.add_argument("--interval", choices=tuple(stattests.INTERVALS), default=None,
                     help=f"the interval of each difference (default: {stattests.default_interval()}; not with --all, "
                          "whose intervals are simultaneous): "
                          + "; ".join(f"{i.name}: {i.description}" for i in stattests.INTERVALS.values()))
    cmp.add_argument("--format", choices=formats.names(general_only=True), default="table",
                     help=f"{', '.join(formats.names(general_only=True))} (default: table)")
    _add_conventions(cmp)

    rep = sub.add_parser("report", help="write an HTML report: intervals, comparison, curves, worst queries side by side",
                         description="Evaluate the models and write one self-contained HTML file: the means with "
                         "confidence intervals, the comparison with the baseline, metric@k curves, the distribution "
                         "of per-query differences and the worst regressions with both models' top k side by side.")
    _add_input(rep, "a .parquet file (or directory) or a .csv / .tsv file, one row per candidate")
    rep.add_argument("--score", action="append", help="score column, one per model; repeat for several "
                     "(not with --run: every run is a model)")
    rep.add_argument("--baseline", help="the model the others are compared with (default: the first)")
    _add_report_output(rep, required=True)
    _add_tests(rep)
    _add_conventions(rep)

    dif = sub.add_parser("diff", help="what changed between two models: per-query deltas, or one query's top k "
                         "side by side", description="Without --show: the queries where --score did worse than "
                         "--baseline on the first metric, worst first, with the relevant items gained and lost. With "
                         "--show QUERY: that query's top k under both models, position by position.")
    _add_input(dif, "a .parquet file (or directory) or a .csv / .tsv file, one row per candidate")
    dif.add_argument("--baseline", required=True, help="the baseline model: a score column, or a run's name")
    dif.add_argument("--score", action="append", help="the other model's score column (with --run: a run's name)")
    dif.add_argument("--other", metavar="MODEL", help="with --model: the model compared with --baseline (a value of "
                     "the --model column; default: the only other one)")
    dif.add_argument("--show", metavar="QUERY", help="show this query's top k side by side (--query names the query "
                     "id column, as in every command)")
    dif.add_argument("-k", type=int, help="positions shown with --show (default: 20)")
    dif.add_argument("--worst", type=int, default=20, help="queries listed without --show (default: 20)")
    dif.add_argument("--format", choices=formats.names(general_only=True), default="table", help="(default: table)")
    _add_conventions(dif)

    demo = sub.add_parser("demo", help="evaluate two rankers of a built-in image search log",
                          description="Evaluate an old and a new ranker of a built-in image search log and say "
                          "whether the new one is better.")
    demo.add_argument("--queries", type=int, default=3000,
                      help=f"number of queries, 1 to {DEMO_MAX_QUERIES:,} (default: 3000)")
    demo.add_argument("--format", choices=formats.names(general_only=True), default="table", help="(default: table)")
    demo.add_argument("--report", metavar="HTML", help="also write the HTML report of the demo to this file")
    demo.add_argument("--save", metavar="FILE", help="also write the example log to this file (.parquet, .csv or .tsv), "
                      "to evaluate it yourself: the command to do so is printed")
    demo.add_argument("--force", action="store_true", help="replace the --report or --save file if it exists")

    bias = sub.add_parser("bias", help="estimate the examination probability of each position from a click log",
                          description="Estimate the examination probability of each position (position 1 = 1) from "
                          "impressions where the same query and item were shown at different positions (several "
                          "rankers or A/B arms: intervention harvesting), or from a randomisation experiment. "
                          "Write it with --format csv to a file and pass that file to --propensity.")
    bias.add_argument("file", help="a .parquet or .csv log of impressions: one row per (query, item, position) shown")
    bias.add_argument("--query", default="query", help="query id column (default: query)")
    bias.add_argument("--item", default="item", help="item id column (default: item)")
    bias.add_argument("--position", default="position", help="1-based position column (default: position)")
    bias.add_argument("--click", default="click", help="click column, 0/1 or counts (default: click)")
    bias.add_argument("--method", choices=["harvest", "randomized"], default="harvest", help="(default: harvest)")
    bias.add_argument("--form", choices=["free", "power"], default="free",
                      help="one value per position, or 1/position^eta (default: free)")
    bias.add_argument("--max-position", type=int, help="leave out positions beyond this one")
    bias.add_argument("--confidence", type=float, default=0.95, help="level of the bootstrap intervals (default 0.95)")
    bias.add_argument("--resamples", type=int, default=200, help="bootstrap resamples over queries (default 200)")
    bias.add_argument("--seed", type=int, default=0, help="seed of the resampling (default: 0)")
    bias.add_argument("--format", choices=formats.names(general_only=True), default="table", help="(default: table)")
    off = sub.add_parser("off-policy", help="estimate a new ranking policy's clicks from a randomised logger's log",
                         description="Estimate the clicks a new ranking policy would get (CTR@k, expected clicks, "
                         "DCG@k) from a log of a randomised logging policy: one row per shown (round, position, item) "
                         "with its click and the logger's probability of showing it (pscore); rows without a position "
                         "are candidates it did not show. Estimators, assumptions and diagnostics: "
                         "docs/how-to/off-policy.md.")
    off.add_argument("file", help="a .parquet or .csv log: one row per shown (round, position, item), and optionally "
                     "per candidate not shown")
    off.add_argument("--query", default="query", help="round (impression) id column (default: query)")
    off.add_argument("--item", default="item", help="item id column (default: item)")
    off.add_argument("--position", default="position", help="1-based position column, empty when not shown "
                     "(default: position)")
    off.add_argument("--click", default="click", help="click column, 0 or 1 (default: click)")
    off.add_argument("--pscore", action="append", metavar="[FORM=]COLUMN", help="the logger's probability: a column "
                     "(default: pscore), or FORM=COLUMN for estimators that read different forms: item_position, "
                     "cascade, slate; repeat for several")
    off.add_argument("--policy", action="append", metavar="COLUMN", help="a deterministic ranker to evaluate: its "
                     "score column; repeat for several")
    off.add_argument("--plackett-luce", action="append", metavar="COLUMN[:TEMPERATURE]", help="a Plackett-Luce "
                     "policy over a score column (temperature default 1), named pl:COLUMN; repeat for several")
    off.add_argument("--policy-table", action="append", metavar="NAME=FILE", help="a stochastic policy: a .csv or "
                     ".parquet table of item, position and probability (and the round column when it differs per "
                     "round); repeat for several")
    off.add_argument("--estimator", action="append", choices=list(OFF_POLICY_ESTIMATORS),
                     help="iips (default), sniips, rips, snrips, sips, snsips or dr; repeat for several")
    off.add_argument("-m", "--metric", action="append", help="precision@k (CTR@k), tp@k (expected clicks) or dcg@k; "
                     "repeat, or separate by commas (default: precision@K, K the longest logged slate)")
    off.add_argument("--on-policy", default="logger", metavar="NAME", help="the name of the row with the logger's own "
                     "clicks (default: logger); 'none' leaves it out")
    off.add_argument("--support", metavar="FILE", help="what the logger could show: a .csv or .parquet table of item "
                     "and position (and the round column when it differs per round): estimates of a policy with mass "
                     "outside it are refused, with their bounds")
    off.add_argument("--clip", type=float, help="the largest importance weight (>= 1): less variance, biased low")
    off.add_argument("--min-clicks", type=float, default=None, help="the least number of effective clicks an "
                     "estimate may rest on (default: 10)")
    off.add_argument("--min-ess", type=float, default=None, help="the least effective sample size of the weights at "
                     "each position an estimate reads (default: 30)")
    off.add_argument("--no-refuse", action="store_true", help="keep every estimate, even one its diagnostics say "
                     "cannot be trusted (the reason is given beside it)")
    off.add_argument("--ties", choices=["expected", "first", "item_asc", "item_desc"], default="expected",
                     help="a ranker's order among equal scores (default: expected)")
    off.add_argument("--seed", type=int, default=0, help="seed of the doubly robust folds and of a Plackett-Luce "
                     "Monte Carlo (default: 0)")
    off.add_argument("--ci", nargs="?", type=float, const=0.95, metavar="LEVEL",
                     help="each estimate with its bootstrap interval over rounds (default level 0.95)")
    off.add_argument("--positions", action="store_true", help="also print each position's estimated click rate")
    off.add_argument("--format", choices=formats.names(general_only=True), default="table", help="(default: table)")
    for command in (ev, cmp, rep, dif, demo, bias, off):
        _add_progress(command)

    listing = sub.add_parser("metrics", help="list the metrics, their formulas and aliases",
                             description="List every metric family with its formula and the names other tools use; "
                                         "with a NAME, what that name means here and in other tools.")
    listing.add_argument("name", nargs="?", help="a metric name to explain (such as 'MAP@10' or 'recbole:MAP@10')")
    sub.add_parser("conventions", help="list the conventions and the presets that reproduce other tools",
                   description="List every convention (the settings that change a number) and every preset.")
    return parser


def _check_ci(fmt: str, per_query: bool, ci: float | None, interval: str | None = None) -> None:
    """--ci with the other options of evaluate (before the file is read)."""
    if interval is not None and ci is None:
        raise _UsageError("--interval chooses the interval of each mean that --ci adds: add --ci (or drop --interval)")
    if fmt == "trec" and ci is not None:
        raise _UsageError("--ci adds intervals to a table; trec_eval lines have no place for them")
    if ci is not None and per_query:
        raise _UsageError("--ci gives intervals of the means; drop it with --per-query")
    if ci is not None and not 0 < ci < 1:  # NaN too
        raise _UsageError(f"--ci must be a confidence level between 0 and 1, such as 0.95 (or --ci alone); got {ci}")


def _emit_results(res, fmt: str, per_query: bool, out, ci: float | None = None, interval: str | None = None) -> None:
    _check_ci(fmt, per_query, ci, interval)
    _write(out, fmt, formats.results_document(res, per_query=per_query, ci=ci, interval=interval))


def _write(out, fmt: str, document) -> None:
    """A document in an output format (outputs/formats.py), its notes in the command line's words."""
    from dataclasses import replace
    from shutil import get_terminal_size

    document = replace(document, notes=[cli_words(n) for n in document.notes])
    terminal = out.isatty()
    out.write(formats.render(fmt, document, width=get_terminal_size().columns if terminal else 160,
                             terminal=terminal))


def _beyond_inputs(args) -> dict:
    """--catalog, --history, --popularity, --features, --categories read (topkeval.inputs.items), as
    evaluate() takes them in Python: {"catalog": ..., ...} for those given."""
    from .inputs import items

    item = args.item or "item"
    data = args.file if not args.run else None
    out: dict = {}
    if getattr(args, "catalog", None) is not None:
        out["catalog"] = items.read_catalog(args.catalog, item=item, flag="--catalog")
    if getattr(args, "history", None) is not None:
        out["history"] = items.read_history(args.history, query=args.query, item=item, flag="--history")
    for name, preferred, vector in (("popularity", "popularity", False), ("features", "", True),
                                    ("categories", "category", False)):
        if getattr(args, name, None) is not None:
            out[name] = items.read_item_values(getattr(args, name), item=item, data=data, flag=f"--{name}",
                                               preferred=preferred, vector=vector)
    return out


def _load(args, metrics, *, scores, keep_per_query: bool, beyond: dict | None = None):
    """Evaluate what the command line names: a log file, or --run files with --qrels; ``beyond``: the
    beyond-accuracy inputs (:func:`_beyond_inputs`)."""
    from .api import evaluate

    extra = {k: v for k, v in (("missing_queries", args.missing_queries), ("depth", args.depth), ("by", args.by),
                               ("weight", args.weight), ("position", args.position),
                               ("propensity", _propensity(args.propensity, args.file)), ("clip", args.clip))
             if v is not None}
    extra.update(beyond or {})
    if args.judged_only:
        extra["judged_only"] = True
    if args.ascending:
        extra["ascending"] = True
    if args.all_relevant:
        if not args.qrels:
            raise _UsageError("--all-relevant says that every pair of a --qrels table is relevant: give --qrels (a table "
                              "of the relevant query and item pairs), or drop --all-relevant")
        if args.relevance is not None:  # given, even as its default name
            raise _UsageError("--all-relevant reads a --qrels table without a relevance column; --relevance names one: "
                              "give one or the other")
    elif args.relevance is None:
        args.relevance = "relevance"  # the default, told apart from --relevance relevance given
    if args.run:
        if args.file or not args.qrels:
            raise _UsageError("--run needs --qrels and no positional FILE")
        if args.chunk_rows is not None:
            raise _UsageError("--chunk-rows reads a .parquet or .csv log in batches; TREC runs are read whole")
        if args.spark:
            raise _UsageError("--spark reads a parquet FILE with Spark; TREC runs are read here: drop --spark")
        if args.model:
            raise _UsageError("--model names the model column of a table; with --run each run file is a model, named "
                              "by its tag: drop --model")
        if args.score and args.command != "diff":  # diff --score names the other run
            raise _UsageError("--score names score columns of a table; with --run each run file is a model, named by "
                              "its tag, and every run is evaluated: drop --score (give only the runs you want)")
        # --query, --item and --relevance name the columns of a --qrels table (a run file's fields are fixed)
        return evaluate(args.run, metrics=metrics, qrels=args.qrels, query=args.query, relevance=args.relevance,
                        item=args.item, **extra, **_conventions(args))
    if not args.file:
        raise _UsageError("give a FILE to evaluate, or --qrels QRELS --run RUN")
    if args.spark:
        from .request import read_parquet_with_spark as read_parquet

        if args.chunk_rows is not None:
            raise _UsageError("--chunk-rows streams a file on this machine; with --spark, Spark reads it")
        data = read_parquet(args.file, args.spark)
        qrels = read_parquet(args.qrels, args.spark) if args.qrels else None
        return evaluate(data, metrics=metrics, query=args.query, relevance=args.relevance, score=scores,
                        item=args.item, qrels=qrels, model=args.model, **extra, **_conventions(args))
    from .progress import active

    return evaluate(args.file, metrics=metrics, query=args.query, relevance=args.relevance, score=scores,
                    item=args.item, qrels=args.qrels, model=args.model, chunk_rows=args.chunk_rows,
                    progress=active() and not args.model,  # a stacked table is read whole
                    keep_per_query=keep_per_query, **extra, **_conventions(args))


#: the suffixes of a curve file (topkeval bias --format csv, or parquet): the table files, uncompressed
_CURVE_FILES = tuple(s for s in table_suffixes() if not is_gzip_name(s))


def _propensity(text: str | None, data=None):
    """--propensity: a column name, positions ``1:1,2:0.6``, ``power:ETA``, or a curve file."""
    if text is None:
        return None
    if text.startswith("power:"):
        try:
            eta = float(text.removeprefix("power:"))
        except ValueError:
            raise _UsageError(f"--propensity {text!r}: power:ETA needs a number, such as power:1") from None
        if not (0 <= eta < 100):
            raise _UsageError(f"--propensity {text!r}: ETA must be a number in [0, 100)")
        return lambda positions: positions ** -eta
    if text.lower().endswith(_CURVE_FILES):
        if os.path.isfile(text):  # a curve written by topkeval bias
            return _curve_file(text)
        from .inputs.tables import column_names

        if not data or text not in column_names(data):  # a column of that name is read as the column
            where = ("no such file" if not os.path.exists(text) else
                     "a folder, not a file" if os.path.isdir(text) else "not a regular file")
            raise _UsageError(f"--propensity {text!r}: {where} (a curve file, as topkeval bias --format csv writes "
                              "it); check the path, or name a column of FILE")
    if ":" not in text:
        return text  # a column
    curve = {}
    for part in text.split(","):
        key, _, value = part.partition(":")
        try:
            position = int(key)
            if position in curve:
                raise _UsageError(f"--propensity {text!r}: position {position} is given twice")
            curve[position] = float(value)
        except ValueError:
            raise _UsageError(f"--propensity {text!r}: write positions and probabilities as 1:1,2:0.6,3:0.45 "
                              f"({part!r} is not POSITION:PROBABILITY)") from None
    return curve


def _curve_file(path: str) -> dict:
    """A curve file (columns position and propensity; ``topkeval bias --format csv``) as a mapping."""
    import pandas as pd

    try:
        fmt = format_of(path)
        frame = pd.read_csv(path, sep=fmt.delimiter) if fmt is not None and fmt.text else pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    except Exception as exc:  # an unreadable file: said in one line
        raise _UsageError(f"--propensity {path!r}: cannot read it as a curve ({type(exc).__name__}: "
                          f"{' '.join(str(exc).split())})") from None
    if not {"position", "propensity"} <= set(map(str, frame.columns)):
        raise _UsageError(f"--propensity {path!r} must have the columns position and propensity (as topkeval bias "
                          f"--format csv writes); it has {list(map(str, frame.columns))}")
    if frame.empty:
        raise _UsageError(f"--propensity {path!r} has no rows: give a propensity for each position (write the curve "
                          "with topkeval bias --format csv)")
    positions = pd.to_numeric(frame["position"], errors="coerce")
    if positions.isna().any() or (positions != positions.round()).any() or positions.duplicated().any():
        raise _UsageError(f"--propensity {path!r}: its positions must be distinct whole numbers")
    values = pd.to_numeric(frame["propensity"], errors="coerce")
    bad = values.isna() | ~(values > 0)
    if bad.any():
        row = int(bad.to_numpy().argmax())
        value = frame["propensity"].iloc[row]
        shown = repr(value) if isinstance(value, str) else str(value)
        raise _UsageError(f"--propensity {path!r}: its propensities must be numbers above 0 (an examination "
                          f"probability); position {int(positions.iloc[row])} has {shown}")
    return {int(k): min(float(v), 1.0) for k, v in zip(positions, values)}


def _split_beyond(metrics) -> tuple:
    """(what evaluate() computes, the catalogue-level labels (coverage@10...: Results.beyond_accuracy),
    every label in order, whether a per-query beyond-accuracy metric is among them)."""
    from .metrics.names import labelled_metrics

    try:
        labels, parsed = labelled_metrics(metrics)
    except TopkevalError:  # evaluate() says what is wrong with a name
        return metrics, [], [], False
    catalog = [label for label, m in zip(labels, parsed) if m.info.beyond == "catalog"]
    per_query = any(m.info.beyond == "query" for m in parsed)
    if not catalog:
        return metrics, [], list(labels), per_query
    return [label for label in labels if label not in catalog], catalog, list(labels), per_query


def _beyond_for(args, metrics, per_query: bool, catalog: list, inputs: dict) -> dict:
    """The beyond-accuracy inputs (read) that evaluate() gets: all of them when a per-query
    beyond-accuracy metric reads them, or when none is asked for (evaluate() then says which flag
    nothing reads); the model unexpectedness@k compares with (--baseline)."""
    if per_query or (inputs and not catalog):
        from .metrics.names import labelled_metrics

        wanted = any("baseline" in m.info.reads for m in labelled_metrics(metrics)[1]) if per_query else False
        return inputs | ({"baseline": args.baseline} if wanted and args.baseline is not None else {})
    return {}


def _reading(name: str, labels) -> bool:
    """Some metric of ``labels`` reads the input ``name`` (the registry's ``reads``: baseline=)."""
    from .metrics.names import labelled_metrics

    return bool(labels) and any(name in m.info.reads for m in labelled_metrics(labels)[1])


def _evaluate(args, out) -> int:
    from .api import DEFAULT_METRICS
    from .request import ListsOnly

    metrics = _metrics(args.metric) or DEFAULT_METRICS  # the object itself: evaluate() tells it from the names given
    if args.bounds and not args.position:
        raise _UsageError("--bounds bounds the metrics over what the never-shown candidates could be: give --position")
    _check_ci(args.format, args.per_query, args.ci, args.interval)
    if args.ci is not None and args.by:
        raise _UsageError("--ci gives the intervals of each model's overall means, and would leave out the segments "
                          "of --by: drop --ci, or compare the models segment by segment with `topkeval compare --by`")
    metrics, catalog, labels, per_query = _split_beyond(metrics)
    if catalog and (args.by or args.bounds or args.format == "trec"):
        raise _UsageError(f"{catalog[0]} describes each model's lists all together (one value per model): not per "
                          "segment (--by), nor with --bounds or --format trec")
    if args.baseline is not None and not _reading("baseline", labels):
        from .metrics import FAMILIES

        readers = [fam for fam in FAMILIES.values() if "baseline" in fam.reads]
        raise _UsageError(f"--baseline names the model that {' and '.join(f'{f.name}@k' for f in readers)} "
                          f"compares each list with: add such a metric (-m {readers[0].example()}), or drop --baseline")
    inputs = _beyond_inputs(args)
    metrics = metrics or ListsOnly(catalog)  # only catalogue-level metrics: a plan of list-only ones
    res = _load(args, metrics, scores=args.score or ["score"], keep_per_query=args.per_query or args.ci is not None,
                beyond=_beyond_for(args, metrics, per_query, catalog, inputs))
    if catalog:
        beside = res.beyond_accuracy(metrics=catalog, **inputs)
        _write(out, args.format, formats.results_document(res, per_query=args.per_query, ci=args.ci, beside=beside,
                                                          labels=labels, interval=args.interval))
        return 0
    if args.bounds:
        if args.per_query or args.ci is not None or args.format == "trec":
            raise _UsageError("--bounds prints one table of means: drop --per-query, --ci and --format trec")
        table = res.bounds().reset_index()
        title = "what the click log can say: naive (clicks as relevance), estimate, bounds over the never-shown"
        _write(out, args.format, formats.Document([formats.Block(table, title=title)],
                                                  notes=report.info_lines(res.info, res.evaluation.metric_objects),
                                                  payload={"bounds": report.records(table), "info": res.info}))
        return 0
    _emit_results(res, args.format, args.per_query, out, args.ci, args.interval)
    return 0


def _load_models(args, required: bool):
    """Evaluate a baseline and the models of --score (or every --run), keeping per-query values."""
    from .api import DEFAULT_METRICS

    metrics = _metrics(args.metric) or DEFAULT_METRICS  # the object itself: evaluate() tells it from the names given
    metrics, catalog, _, per_query = _split_beyond(metrics)
    if catalog:
        raise _UsageError(f"{catalog[0]} describes each model's lists all together: it has no per-query value to "
                          f"{args.command}; topkeval evaluate shows it (per-query ones, such as novelty@10, compare)")
    beyond = _beyond_for(args, metrics, per_query, catalog, _beyond_inputs(args))
    if args.run or args.model:
        res = _load(args, metrics, scores=None if args.run else (args.score or ["score"]), keep_per_query=True,
                    beyond=beyond)
        kind = "runs" if args.run else f"models of the --model column {args.model!r}"
        if args.baseline is not None and args.baseline not in res.models:
            from .errors import did_you_mean

            raise _UsageError(f"--baseline {args.baseline!r} is not one of the {kind} "
                              f"({', '.join(res.models)}).{did_you_mean(args.baseline, res.models)}")
        if required and len(res.models) < 2:
            raise _UsageError(f"there is one model to compare ({', '.join(res.models)}): the {kind} must name two "
                              "or more")
        return res
    models = ([args.baseline] if args.baseline else []) + [s for s in (args.score or []) if s != args.baseline]
    if required and len(models) < 2:
        raise _UsageError("--score must name at least one column other than --baseline")
    _check_baseline_column(args)
    return _load(args, metrics, scores=models or ["score"], keep_per_query=True, beyond=beyond)


def _check_baseline_column(args) -> None:
    """--baseline names a score column of FILE: one that is not there is said as --baseline's, with the
    closest of the models (--score), else of the columns."""
    if args.baseline is None or args.baseline in (args.score or []) or args.spark or not args.file or args.model:
        return  # a --score column is checked (and said) as --score's, a Spark table by Spark
    from .errors import closest
    from .inputs.tables import column_names

    columns = column_names(args.file)
    if not columns or args.baseline in columns:
        return
    hits = closest(args.baseline, args.score or []) or closest(args.baseline, columns)
    hint = f" Did you mean {' or '.join(map(repr, hits))}?" if hits else ""
    models = f" The models (--score): {', '.join(map(repr, args.score))};" if args.score else ""
    shown = ", ".join(map(repr, columns[:20])) + (" ..." if len(columns) > 20 else "")
    raise _UsageError(f"--baseline {args.baseline!r} is not a column of file '{args.file}' (--baseline names the score "
                      f"column of the model compared against).{hint}{models} the columns: {shown}.")


def _report(args, out) -> int:
    from .files import check_output_path
    from .params import check_arguments
    from .results import Results

    # the options are checked before the evaluation, not after it
    check_output_path(args.output, overwrite=args.force, owner="report")
    check_arguments(Results.report, worst=args.worst, k=args.k, images=args.images, title=args.title, test=args.test,
                    correction=args.correction, confidence=args.confidence, n_resamples=args.resamples,
                    seed=args.seed)
    if args.images and not (args.item or args.run):
        raise _UsageError("--images shows a thumbnail of each item: name the item id column with --item")
    res = _load_models(args, required=False)
    path = res.report(args.output, baseline=args.baseline, overwrite=args.force, queries=_query_ids(res, args.show),
                      worst=args.worst, k=args.k, images=args.images, title=args.title, test=args.test,
                      correction=None if args.correction == "none" else args.correction,
                      confidence=args.confidence, n_resamples=args.resamples, seed=args.seed)
    print(f"wrote {path}", file=out)
    return 0


def _query_ids(res, given) -> list:
    """Query ids from the command line (text) as the results hold them (text, or numbers)."""
    if not given:
        return []
    known = res.to_pandas()[res.query_name]
    by_text = {str(q): q for q in known.drop_duplicates()}
    missing = [q for q in given if q not in by_text]
    if missing:
        from .errors import did_you_mean

        skipped = " (queries without a relevant item are skipped: --empty-queries keep shows them)" if res.info.get(
            "skipped_empty") else ""
        raise _UsageError(f"query {missing[0]!r} is not among the evaluated queries{skipped}."
                          f"{did_you_mean(missing[0], list(by_text)[:100_000])}")
    return [by_text[q] for q in given]


def _diff(args, out) -> int:
    if args.other is not None and not args.model:
        raise _UsageError("--other names a model of the --model column (a stacked table); without --model, name the "
                          "other model's score column with --score")
    try:
        res = _load_models(args, required=True)
    except TopkevalError as exc:
        if args.query != "query" and args.show is None and str(exc).startswith(f"Column {args.query!r} (query=)"):
            raise _UsageError(f"{cli_words(' '.join(str(exc).split()))} (--query names the query id column; to see "
                              f"one query's top k side by side, use --show {args.query})") from None
        raise
    others = [m for m in res.models if m != args.baseline]
    flag = "--other" if args.model else "--score"  # with --model, --score is the score column
    named = ([args.other] if args.other is not None and args.other != args.baseline else []) if args.model else \
        [s for s in (args.score or []) if s != args.baseline]
    if len(named) > 1:
        raise _UsageError("diff compares two models: give one --score besides --baseline")
    if named and named[0] not in others:
        from .errors import did_you_mean

        raise _UsageError(f"{flag} {named[0]!r} is not one of the models ({', '.join(res.models)})."
                          f"{did_you_mean(named[0], res.models)}")
    if not named and len(others) != 1:
        raise _UsageError(f"diff compares two models: name the other one with {flag}"
                          + (f" (one of {', '.join(others)})" if others else ""))
    model = named[0] if named else others[0]
    if args.show is None and args.k is not None:
        raise _UsageError("-k sets the positions shown with --show QUERY; without --show, diff lists the queries that "
                          "got worse (--worst sets how many)")
    if args.show is not None:
        query = args.show  # text: side_by_side finds a whole-number id from it, skipped queries included
        k = 20 if args.k is None else args.k
        view = res.side_by_side(query, k=k, baseline=args.baseline, model=model)
        # a table or markdown shows "not retrieved" and blank positions; CSV and JSON keep NaN / null
        frame = report.side_by_side_frame(view, text=False)
        shown = report.side_by_side_frame(view, text=True)
        title = f"query {report.visible(str(query))}: top {k}, {report.visible(args.baseline)} | {report.visible(model)}"
    else:
        metric = res.metrics[0]
        if args.worst < 1:
            raise _UsageError(f"--worst must be a positive integer, got {args.worst}")
        every = res.diff(args.baseline, model, metric)
        frame = every[every["delta"] < 0].head(args.worst)  # the queries that got worse, worst first
        for c in ("gained", "lost"):
            if c in frame:
                frame[c] = [", ".join(map(str, v)) for v in frame[c]]
        shown = None
        worse, listed = int((every["delta"] < 0).sum()), len(frame)
        title = f"{metric}: {report.visible(model)} - {report.visible(args.baseline)} per query"
        if worse == 0:
            title += f": no query got worse (of {len(every):,})"
        elif listed == worse:
            title += (f", worst first (the {'one query' if worse == 1 else f'{worse:,} queries'} that got worse, "
                      f"of {len(every):,})")
        else:
            title += f", worst first (the {listed:,} worst of the {worse:,} queries that got worse, of {len(every):,})"
    right = tuple(c for c in frame.columns if args.show is not None and c.endswith(("rank", "score", "relevance")))
    _write(out, args.format, formats.Document([formats.Block(frame, title=title, right=right, shown=shown)]))
    return 0


def _compare(args, out) -> int:
    from .params import check_arguments
    from .results import Results

    if args.all:
        if args.interval is not None:
            raise _UsageError("--interval chooses the interval of each difference with a baseline; with --all the "
                              "intervals are the simultaneous ones of the test: drop --interval")
        return _compare_all(args, out)
    if not args.baseline:
        raise _UsageError("compare needs --baseline (the model the others are compared with), or --all (every pair)")
    if args.test in stattests.ALL_PAIRS:
        raise _UsageError(f"--test {args.test} compares every pair of models: add --all (or choose a paired test: "
                          f"{', '.join(TESTS)})")
    args.test = args.test or stattests.default("pair")
    interval = args.interval or stattests.default_interval()
    check_arguments(Results.compare, test=args.test, correction=args.correction, confidence=args.confidence,
                    n_resamples=args.resamples, seed=args.seed, interval=interval)  # before the evaluation
    res = _load_models(args, required=True)
    table = res.compare(baseline=args.baseline, test=args.test,
                        correction=None if args.correction == "none" else args.correction,
                        confidence=args.confidence, n_resamples=args.resamples, seed=args.seed, interval=interval)
    shown = table[[c for c in (*res.by, "model", "metric", "verdict", "baseline", "value", "delta", "ci_low", "ci_high",
                               "p_value", "p_adjusted", "wins", "ties", "losses") if c in table.columns]]
    p_text = {c: (lambda p: report.p_value_text(p, args.resamples if stattests.TESTS[args.test].resampled
                                                 else None)) for c in ("p_value", "p_adjusted")}
    title = (f"vs {report.visible(args.baseline)}: {args.test} test, {report.correction_text(args.correction)} "
             f"correction, {args.confidence:.0%} {'' if args.interval is None else interval + ' '}intervals")
    notes = report.info_lines(res.info, res.evaluation.metric_objects) + _few_queries_note(table, args.test)
    _write(out, args.format, formats.Document([formats.Block(table, title=title, formats=p_text, shown=shown)],
                                              notes=notes, payload={"comparison": report.records(table), "info": res.info}))
    return 0


#: Fewer paired queries than this: a comparison's tests and intervals hold their level only roughly
FEW_QUERIES = 20


def _few_queries_note(table, test: str) -> list[str]:
    """A note under a comparison of fewer than :data:`FEW_QUERIES` paired queries: its tests and intervals
    hold their level only roughly there (docs: how-to/compare, "Few queries"), and a permutation test
    of n queries cannot give a p-value below 2 / 2**n."""
    if "n_queries" not in table.columns or not table["n_queries"].notna().any():
        return []
    n = int(table["n_queries"].min())
    if n >= FEW_QUERIES:
        return []
    smallest = stattests.TESTS[test].smallest_p(n) if test in stattests.TESTS else None
    floor = f"; the {test} test of {n} queries cannot give a p-value below {smallest:.2g}" if smallest else ""
    return [f"only {n} paired {'query' if n == 1 else 'queries'}: tests and intervals on fewer than {FEW_QUERIES} hold "
            f"their level only roughly (an interval may exclude 0 where the p-value does not reject){floor}; see "
            "the how-to on comparing models, 'Few queries'"]


def _bias(args, out) -> int:
    from .analysis.bias import estimate_position_bias

    curve = estimate_position_bias(args.file, query=args.query, item=args.item, position=args.position,
                                   click=args.click, method=args.method, form=args.form,
                                   max_position=args.max_position, confidence=args.confidence,
                                   n_resamples=args.resamples, seed=args.seed)
    table = curve.curve.reset_index()
    title = (f"examination by position ({args.method}, {args.form}"
             + (f", eta {curve.eta:.4f}" if curve.eta is not None else "") + f"; {args.confidence:.0%} intervals)")
    notes = ["pass this table, written with --format csv to a file, to --propensity FILE.csv"]
    _write(out, args.format, formats.Document([formats.Block(table, title=title)], notes=notes,
                                              payload={"curve": report.records(table), "eta": curve.eta}))
    return 0


def _off_policy(args, out) -> int:
    from .api import off_policy
    from .inputs.tables import column_names

    _check_ci(args.format, False, args.ci)

    pscore: str | dict = "pscore"
    if args.pscore:
        forms = [v.split("=", 1) for v in args.pscore]
        if len(args.pscore) == 1 and len(forms[0]) == 1:
            pscore = args.pscore[0]
        elif all(len(f) == 2 for f in forms):
            pscore = {f[0]: f[1] for f in forms}
        else:
            raise _UsageError("--pscore is one column, or FORM=COLUMN for each form (item_position, cascade, slate)")
    policy: dict = {}
    for column in args.policy or []:
        policy[column] = column
    for text in args.plackett_luce or []:
        column, _, temperature = text.partition(":")
        try:
            value = float(temperature) if temperature else 1.0
        except ValueError:
            raise _UsageError(f"--plackett-luce {text!r}: the temperature after ':' must be a number") from None
        from .analysis.offpolicy import PlackettLuce

        policy[f"pl:{column}"] = PlackettLuce(column, temperature=value)
    for text in args.policy_table or []:
        name, eq, path = text.partition("=")
        if not eq or not name or not path:
            raise _UsageError(f"--policy-table {text!r}: write NAME=FILE")
        policy[name] = path
    if not policy:
        raise _UsageError("name the policy to evaluate: --policy COLUMN (a ranker), --plackett-luce COLUMN or "
                          "--policy-table NAME=FILE")
    tables = {name: spec for name, spec in policy.items() if isinstance(spec, str) and name in
              [t.partition("=")[0] for t in args.policy_table or []]}
    for name, path in tables.items():  # a table file is read here: the API takes tables
        policy[name] = _read_table(path, args)
    metrics = _metrics(args.metric)
    if metrics is None:
        import numpy as np

        from .inputs import read_columns

        names = column_names(args.file)
        if args.position not in names and names:
            raise _UsageError(f"--position {args.position!r} is not a column of {args.file}")
        positions = read_columns(args.file, [args.position], owner="off-policy")[args.position]
        metrics = [f"precision@{int(np.nanmax(np.asarray(positions, dtype=float)))}"]
    res = off_policy(args.file, metrics, policy=policy, query=args.query, item=args.item, position=args.position,
                     click=args.click, pscore=pscore, estimator=args.estimator or "iips",
                     on_policy=None if args.on_policy == "none" else args.on_policy,
                     support=_read_table(args.support, args) if args.support else None, clip=args.clip,
                     min_clicks=MIN_CLICKS if args.min_clicks is None else args.min_clicks,
                     min_ess=MIN_ESS if args.min_ess is None else args.min_ess, refuse=not args.no_refuse,
                     ties=args.ties, seed=args.seed)
    document = formats.results_document(res, ci=args.ci)
    if args.positions:
        import pandas as pd

        rows = [{"model": model, **p} for model, ps in res.info["off_policy"]["per_position"].items() for p in ps]
        table = pd.DataFrame(rows)
        document.blocks.append(formats.Block(table, title="click rate at each position (95% normal intervals)"))
    _write(out, args.format, document)
    return 0


def _read_table(path: str, args) -> dict:
    """A table file of the off-policy command (--policy-table, --support), read whole, its round and
    item columns as the log's are (text in a CSV file)."""
    from .inputs import read_columns
    from .inputs.tables import column_names

    names = column_names(path)
    ids = [c for c in (args.query, args.item) if c in names]
    return dict(read_columns(path, names or [args.item], owner="off-policy", id_columns=ids))


def _compare_all(args, out) -> int:
    from .params import check_arguments
    from .results import Results

    if args.baseline:
        raise _UsageError("--all compares every pair of models: drop --baseline")
    test = args.test or stattests.default("all")
    if test not in stattests.ALL_PAIRS:
        raise _UsageError(f"--all controls the error over every pair with --test {' or '.join(stattests.ALL_PAIRS)}, "
                          f"not {test}")
    check_arguments(Results.compare_all, test=test, confidence=args.confidence, n_resamples=args.resamples,
                    seed=args.seed)
    if not args.run and not args.model and len(set(args.score or [])) < 2:
        raise _UsageError("--all compares every pair of models: give two or more score columns, one --score each "
                          "(--score a --score b)")
    res = _load_models(args, required=True)
    table = res.compare_all(test=test, confidence=args.confidence, n_resamples=args.resamples, seed=args.seed)
    shown = table[[*res.by, "metric", "model_a", "model_b", "delta", "ci_low", "ci_high", "p_value", "significant",
                   "es_e", "letters_a", "letters_b"]]
    floor = None if stattests.TESTS[test].resampled else table.attrs.get("p_floor")

    def p_text(p):
        return report.p_value_text(p, args.resamples if stattests.TESTS[test].resampled else None, floor=floor)

    title = (f"every pair: {test.replace('_', ' ')} HSD, {args.confidence:.0%} simultaneous intervals; models "
             "sharing a letter are not distinguishable")
    # a file (CSV) gets the numbers, and "< 1e-12" for a p too small to be told (JSON: the number, said to be a
    # bound: p_value_is_upper_bound, with the smallest p the test tells apart, p_floor)
    frame = table.assign(p_value=[p_text(p) if floor and p <= floor else p for p in table["p_value"]]) \
        if floor else table
    smallest = float(table.attrs["p_floor"])
    bound = table.copy()
    bound.insert(bound.columns.get_loc("p_value") + 1, "p_value_is_upper_bound",
                 [bool(p <= smallest * (1 + 1e-9)) for p in table["p_value"]])
    _write(out, args.format, formats.Document([formats.Block(frame, title=title, formats={"p_value": p_text},
                                                             shown=shown)],
                                              notes=report.info_lines(res.info, res.evaluation.metric_objects),
                                              payload={"pairs": report.records(bound), "p_floor": smallest,
                                                       "info": res.info}))
    return 0


#: The metrics of ``topkeval demo``.
DEMO_METRICS = ["recall@20", "precision@20", "f1@20", "specificity@20", "r_precision", "recall@5", "precision@5"]


def _demo(args, out) -> int:
    from .api import evaluate
    from .demo import example_log

    if not 1 <= args.queries <= DEMO_MAX_QUERIES:  # the log is built in memory: 20 to 60 rows per query
        raise _UsageError(f"--queries must be an integer from 1 to {DEMO_MAX_QUERIES:,} (the demo log has 20 to 60 "
                          f"candidates per query, built in memory), got {args.queries}")
    from .files import check_output_path

    if args.report is not None:
        check_output_path(args.report, overwrite=args.force, owner="report")  # before the evaluation
    if args.save is not None:
        save_as = _demo_format(args.save)
        if args.report is not None and _same_file(args.save, args.report):
            raise _UsageError(f"--save {args.save!r} and --report {args.report!r} are the same file: the example log "
                              "would replace the report. Give each its own path, such as demo.csv and demo.html")
        check_output_path(args.save, overwrite=args.force, param="--save", owner="demo")
    log = example_log(args.queries)
    res = evaluate(log, metrics=DEMO_METRICS, query="query", relevance="click", score=["old_ranker", "new_ranker"],
                   item="image")
    if args.format == "table":
        print(f"Example log: {len(log):,} candidate images for {args.queries:,} image search queries; "
              "relevance = click", file=out)
    _emit_results(res, args.format, False, out)
    if args.format == "table":
        print(verdict_line(res, "old_ranker", "new_ranker", "recall@20"), file=out)
    if args.report is not None:
        path = res.report(args.report, baseline="old_ranker", overwrite=args.force, title="topkeval demo: image search")
        print(f"wrote {path}", file=sys.stderr if args.format != "table" else out)
    if args.save is not None:
        path = _save_demo(log, args.save, save_as, args.force)
        shown = path if str(path).isprintable() else _shell_path(path)  # no escape code to the terminal
        print(f"wrote the example log ({len(log):,} rows) to {shown}; evaluate it with:\n  topkeval evaluate "
              f"{_shell_path(path)} --relevance click --item image --score old_ranker --score new_ranker "
              f"{' '.join('-m ' + m for m in DEMO_METRICS)}", file=sys.stderr if args.format != "table" else out)
    return 0


def _same_file(a: str, b: str) -> bool:
    """Whether two output paths name one file (``x.csv``, ``./x.csv``, its absolute path, a folder
    reached through a link): their folders resolved, their names compared."""
    def where(path: str) -> tuple[str, str]:
        folder, name = os.path.split(os.path.abspath(path))
        return os.path.normcase(os.path.realpath(folder)), os.path.normcase(name)

    return where(a) == where(b)


def _shell_path(path: str) -> str:
    """A path as a shell argument: quoted (spaces, quotes, ``$(...)``), and a relative name starting
    with '-' written ./-name, so that the command reads it as a file rather than an option. A name
    with a character that does not print (a newline, an escape code, a byte that is not UTF-8, which
    standard error would print as '\\udcff') is written $'...' with its bytes as \\xHH: one line of
    printable ASCII that bash and zsh read back as the very bytes of the name."""
    path = str(path)
    if path.startswith("-"):
        path = "./" + path
    if path.isprintable():
        return shlex.quote(path)
    return "$'" + "".join(chr(b) if 32 <= b < 127 and b not in b"\\'" else f"\\x{b:02x}"
                          for b in os.fsencode(path)) + "'"


def _demo_format(path: str) -> str:
    """The format of a ``--save`` file from its suffix (``"parquet"``, or a text format's delimiter),
    or a usage error naming the suffixes read (:mod:`topkeval.inputs.formats`, uncompressed)."""
    fmt = format_of(path)
    if fmt is None or is_gzip_name(path):
        first = [f.suffixes[0] for f in FILE_FORMATS]
        raise _UsageError(f"--save {path!r}: give a file ending in {', '.join(first[:-1])} or {first[-1]} (the "
                          f"formats that topkeval evaluate reads), such as demo{first[0]}")
    return fmt.delimiter if fmt.text and fmt.delimiter else fmt.name


def _save_demo(log, path: str, kind: str, overwrite: bool) -> str:
    """Write the demo's log with the one safe writer (:mod:`topkeval.files`)."""
    from .files import write_parquet, write_text

    if kind == "parquet":
        import pyarrow as pa

        return write_parquet(path, pa.Table.from_pandas(log, preserve_index=False), overwrite=overwrite,
                             param="--save", owner="demo")
    import io

    buf = io.StringIO()  # the text first, then the file through the safe writer
    log.to_csv(buf, sep=kind, index=False)  # scores as repr writes them: each reads back to the same float
    return write_text(path, buf.getvalue(), overwrite=overwrite, param="--save", owner="demo")


def verdict_line(res, baseline: str, model: str, metric: str) -> str:
    """One line: is ``model`` better than ``baseline`` on ``metric``?"""
    metric = res.label(metric)
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
    from .metrics.names import trec_name

    if getattr(args, "name", None):
        from .metrics.names import explain_metric

        print(explain_metric(args.name), file=out)
        return 0

    for fam in FAMILIES.values():
        trec = [t for t in (fam.trec, fam.trec_uncut) if t]
        if fam.trec_format is not None and any(p.required for p in fam.params):  # a parameter is part of the name
            trec = [trec_name(fam.example())]  # Rprec_mult_0.50, iprec_at_recall_0.50
        names = list(fam.aliases) + trec
        names = [n for n in dict.fromkeys(names) if n != fam.name]
        # other tools' names for this family with set parameters: not aliases of the plain name
        names += [f"{alias} = {fam.name}({', '.join(f'{k}={v}' for k, v in params)})" for alias, params in fam.variants]
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
    "seed": "--seed", "test": "--test", "interval": "--interval", "correction": "--correction", "qrels": "--qrels", "by": "--by",
    "k": "-k", "worst": "--worst", "title": "--title", "images": "--images", "baseline": "--baseline",
    "weight": "--weight", "position": "--position", "propensity": "--propensity", "clip": "--clip",
    "method": "--method", "form": "--form", "max_position": "--max-position", "click": "--click",
    "model": "--model", "catalog": "--catalog", "history": "--history", "popularity": "--popularity",
    "features": "--features", "categories": "--categories",
}


def cli_words(message: str) -> str:
    """A library message in the command line's words: ``empty_queries='skip'`` -> ``--empty-queries skip``.

    >>> cli_words("Use empty_queries='skip' or pass qrels=. The 'n_resamples' parameter of compare must be")
    'Use --empty-queries skip or pass --qrels. The --resamples option of compare must be'
    """
    message = message.replace("pass overwrite=True to replace it", "pass --force to replace it")
    message = message.replace("relevance=None", "--all-relevant")
    names = "|".join(sorted(_PARAMS, key=len, reverse=True))
    message = re.sub(rf"\b({names})=(?:'([^']*)'|\"([^\"]*)\"|([\w+-](?:[\w.+-]*\w)?))",
                     lambda m: f"{_PARAMS[m.group(1)]} {m.group(2) or m.group(3) or m.group(4)}", message)
    message = re.sub(rf"\b({names})=(?=[\s.,;:)]|$)", lambda m: _PARAMS[m.group(1)], message)
    # an option not given is None in Python: on the command line it is simply left out
    return re.sub(rf"The '({names})' parameter (of \w+ must be)(?: None or)?",
                  lambda m: f"The {_PARAMS[m.group(1)]} option {m.group(2)}", message)


def main(argv=None) -> int:
    """Entry point of the ``topkeval`` command.

    Exit codes: 0 on success (a closed pipe, as in ``topkeval demo | head -1``, included), 2 on any
    error (bad flags, bad data, a file that cannot be read or written, standard output full or
    gone) with exactly one ``topkeval: error: ...`` line on stderr, 130 when interrupted.

    Warnings: on success, each warning raised during the command is one ``topkeval: warning: ...``
    line on stderr (never a Python source line); a library's DeprecationWarning or FutureWarning is
    not the command line user's business and is dropped. After an error, the error line is the only
    line. A user who sets a warnings policy (``python -W ...``, ``PYTHONWARNINGS``) gets it instead.
    """
    import warnings

    from .errors import TopkevalWarning

    parser = build_parser()
    with warnings.catch_warnings(record=True) as caught:
        if not sys.warnoptions:  # the command's own policy, whatever filters a caller (pytest) has set
            warnings.resetwarnings()
            warnings.simplefilter("default")
            for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning,
                             ResourceWarning):
                warnings.simplefilter("ignore", category)
                warnings.filterwarnings("default", category=category, module=r"topkeval(\.|$)")
        warnings.simplefilter("always", TopkevalWarning)
        code = _run(parser, argv)
    if code == 0:  # caught is complete here: nothing records into it while it is read
        lines = (_warning_line(w.message, w.category, w.filename, TopkevalWarning) for w in caught)
        for line in dict.fromkeys(lines):  # each once, in order
            _say(line)
    return code


def _warning_line(message, category, filename: str, ours: type) -> str:
    """A warning as one line: in the command line's words when it is topkeval's own."""
    text = " ".join(str(message).split())
    if issubclass(category, ours):
        return f"topkeval: warning: {cli_words(text)}"
    return f"topkeval: warning: {text} ({category.__name__} from {_package(filename)})"


def _package(filename: str) -> str:
    """The top-level package a source file belongs to (``numpy`` for .../site-packages/numpy/x.py)."""
    path = os.path.abspath(filename)
    for entry in sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True):
        if path.startswith(entry.rstrip(os.sep) + os.sep):
            return path[len(entry.rstrip(os.sep)) + 1:].split(os.sep)[0].removesuffix(".py")
    return os.path.basename(filename).removesuffix(".py") or "?"


def _say(line: str) -> None:
    """One line on stderr, even when stderr itself cannot be written."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


class _Stdout:
    """Standard output for the commands: an OSError while writing it becomes an :class:`_OutputError`
    (a closed pipe stays a BrokenPipeError)."""

    def __init__(self, stream) -> None:
        self._stream = stream  # None when the command started with its standard output closed

    def _closed(self) -> _OutputError:
        return _OutputError(OSError(errno.EBADF, "standard output is closed"))

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def write(self, text: str) -> int:
        if self._stream is None:
            raise self._closed()
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _OutputError(exc) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _OutputError(exc) from None

    def __getattr__(self, name: str):
        if self._stream is None:
            raise self._closed()
        return getattr(self._stream, name)


class _OutputError(Exception):
    def __init__(self, exc: OSError) -> None:
        super().__init__(f"cannot write to standard output: {exc.strerror or exc} (errno {exc.errno}). "
                         + ("Free some space, or send the output elsewhere."
                            if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
                            else "Send the output elsewhere."))


def _detach_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's final flush of what is
    left in its buffer cannot fail again (and print "Exception ignored")."""
    if sys.stdout is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)


#: Output formats for reading, under which progress bars may show on a terminal's stderr.
_READABLE = ("table", "markdown")


def _show_progress(args) -> bool:
    """--progress / --no-progress, else: stderr is a terminal and the output is for reading."""
    chosen = getattr(args, "progress", None)
    if chosen is not None:
        return chosen
    return sys.stderr.isatty() and getattr(args, "format", "table") in _READABLE


def _run(parser, argv) -> int:
    out = _Stdout(sys.stdout)
    try:
        try:
            parser.argv = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version print, then exit
            out.flush()
            return exc.code if isinstance(exc.code, int) else 0
        if args.command is None:
            parser.print_help(out)
            out.flush()
            return 0
        _check_values(args)
        handler = {"evaluate": _evaluate, "compare": _compare, "report": _report, "diff": _diff, "demo": _demo,
                   "bias": _bias, "off-policy": _off_policy,
                   "metrics": _list_metrics, "conventions": _list_conventions}[args.command]
        from .progress import shown

        with shown(_show_progress(args)):
            code = handler(args, out)
        out.flush()
        return code
    except (_UsageError, TopkevalError, _OutputError) as exc:
        if isinstance(exc, _OutputError):
            _detach_stdout()
        message = " ".join(str(exc).split())
        _say(f"topkeval: error: {cli_words(message) if isinstance(exc, TopkevalError) else message}")
        return 2
    except KeyboardInterrupt:
        _say("topkeval: interrupted")
        return 130
    except BrokenPipeError:
        # the reader of our output went away (topkeval demo | head -1): that is not an error;
        # point stdout at /dev/null so that the interpreter's final flush does not fail again
        _detach_stdout()
        return 0
    except OSError as exc:  # a file topkeval could not read or write, in words
        where = f": '{exc.filename}'" if exc.filename is not None else ""
        reason = " ".join((exc.strerror or str(exc) or type(exc).__name__).split())
        _say(f"topkeval: error: {reason}{where}. Check the path and its permissions.")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
