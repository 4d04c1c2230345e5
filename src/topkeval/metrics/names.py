"""Metric names: the grammar, aliases, and trec_eval's spellings.

A metric is a value: ``Metric("recall", k=10)`` prints as ``"recall@10"`` and
``parse_metric("recall@10")`` gives it back. Aliases used by other tools are accepted and
canonicalised (``P@10``, ``R@10``, ``P_10``, ``P.10``, ``Rprec``, ``success@10``, ``hits@10``,
``ndcg_burges@10``, ``SetP``, ``set_F.0.5``; ``fbeta(beta=1)@5`` is ``f1@5``). Every family, alias
and parameter comes from the registry (:data:`topkeval.metrics.FAMILIES`).

ir_measures' forms are read with its meaning: ``rel=`` (a grade >= rel is relevant, for that
metric) and ``judged_only=`` (trec_eval -J, for that metric) on any family, ``cutoff=`` (and
torchmetrics' ``top_k=``) as the cutoff, ``dcg='exp-log2'``, ``IPrec@0.5``, ``SetP(relative=True)``,
``NumRet(rel=1)``; its measure objects are read through their ``str()``. A name prefixed by a
tool (``recbole:MAP@10``) has that tool's meaning where it differs from topkeval's
(:data:`TOOL_MEANINGS`); :func:`explain_metric` says what a name means here and elsewhere.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass

from ..errors import TopkevalError, UnknownMetricError, closest
from ..params import MetricName, validate_params
from .registry import FAMILIES, Family, Param, format_value, is_unit
from .trec import TREC_SETS, trec_set

#: The largest cutoff accepted (a larger one could not be told from the whole list).
MAX_CUTOFF = (1 << 40) - 1

#: the metrics evaluate() and the command line compute when none are named: the four set metrics
#: at one cutoff, and R-precision
DEFAULT_METRICS = ("recall@20", "precision@20", "f1@20", "specificity@20", "r_precision")
#: The default metrics of a click log evaluated with propensity= (evaluate's defaults as estimated from clicks:
#: recall and F1 pooled over the queries; specificity and R-precision have no estimator from clicks).
CLICK_DEFAULT_METRICS = ("recall_micro@20", "precision@20", "f1_micro@20")
#: ... and those of a score matrix (evaluate_matrix, MatrixEvaluator): specificity over a whole
#: catalogue is ~1 for every model and F1 adds nothing to recall and precision there
DEFAULT_MATRIX_METRICS = ("recall@20", "precision@20", "r_precision")


def _alias_table() -> dict[str, tuple[str, tuple]]:
    table: dict[str, tuple[str, tuple]] = {}
    for fam in FAMILIES.values():
        table[fam.name] = (fam.name, ())
        for alias in fam.aliases:
            table[alias.lower()] = (fam.name, ())
        for alias, params in fam.variants:
            table[alias.lower()] = (fam.name, params)
        for trec in (fam.trec, fam.trec_uncut):
            if trec:
                table.setdefault(trec.lower(), (fam.name, ()))
    return table


_ALIASES = _alias_table()


def refresh() -> None:
    """Read the registry's names again (after :func:`~topkeval.metrics.define.define_metric`)."""
    _ALIASES.clear()
    _ALIASES.update(_alias_table())

#: Names whose ``beta`` is beta squared, as their tool reads it (ir_measures passes SetF's beta to
#: trec_eval's set_F, whose parameter is beta squared).
_SQUARED_BETA = frozenset({"setf"})

#: Parameters every family takes (ir_measures' ``P(rel=2)@5``, ``AP(judged_only=True)``): ``rel``, this
#: metric's relevance threshold (a grade >= rel is relevant; the evaluation's ``threshold=`` otherwise),
#: and ``judged_only``, this metric on the run without its unjudged items (trec_eval -J).
GENERIC = (Param("rel", "number", None, False), Param("judged_only", "bool", False, False))

#: Names of the cutoff among the parameters: ir_measures' ``cutoff=``, torchmetrics' ``top_k=``, ``k=``.
_CUTOFF_NAMES = ("cutoff", "top_k", "k")

#: Tools whose names may prefix a metric (``recbole:MAP@10``), and, per tool and name, the topkeval
#: metric it stands for where that differs from the name's meaning here: ``(family, preset parameters)``.
TOOL_MEANINGS: dict[str, dict[str, tuple[str, str]]] = {
    "trec_eval": {}, "pytrec_eval": {}, "ranx": {}, "torchmetrics": {}, "sklearn": {},
    "ir_measures": {},  # RBP: see _in_tool
    "recbole": {"map": ("ap_capped", ""), "ndcg": ("ndcg", "gain=binary")},
    "replay": {"map": ("ap_capped", ""), "ndcg": ("ndcg", "gain=binary")},
    "lenskit": {"recall": ("recall_capped", "")},
    "spark": {"map": ("ap_capped", ""), "meanaverageprecisionat": ("ap_capped", "")},
}
_TOOL = re.compile(r"^\s*(?P<tool>[A-Za-z][A-Za-z_]*)\s*:\s*(?P<rest>.*)$")

_GRAMMAR = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9_\-]*?)\s*(?:\((?P<params>.*)\))?\s*(?:@\s*(?P<k>[^\s@]*))?\s*$"
)
#: An estimate of a metric, named after the metric it estimates and how (:func:`topkeval.evaluate_sampled`):
#: ``recall@10[sampled:uni100]`` is recall@10 on lists of the held-out items and 100 uniformly sampled
#: negatives (a number of its own, not recall@10), ``recall@10[corrected:mle]`` an estimate of the
#: full-catalogue recall@10 from such lists; the column of the metric itself is ``recall@10``.
ESTIMATE = re.compile(r"^(?P<metric>.*\S)\s*\[\s*(?P<estimate>[^\[\]]*?)\s*\]\s*$")
#: The estimates a column may name: a sampled protocol (uniform or popularity, m negatives) or a
#: correction of one (:mod:`topkeval.analysis.sampled`).
ESTIMATES = re.compile(r"^(?:sampled:(?:uni|pop)[1-9][0-9]*|corrected:(?:bv|mle|rescaled))$")
_TREC_CUTOFF = re.compile(r"^(?P<name>[A-Za-z_]+?)_(?P<k>[0-9]+)$")  # P_10, recall_20, ndcg_cut_10
_TREC_PARAM = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_]*)\.(?P<value>\S+)$")  # P.10, set_F.0.5, 11pt_avg..25,.5
_TREC_PRINTED_GAINS = re.compile(r"^(?P<name>[A-Za-z][A-Za-z_]*)_(?P<value>[0-9.+-]+=\S+)$")  # ndcg_1=3,2=9
_DIGITS = re.compile(r"[0-9]+")
#: trec_eval's output lines that are not numbers
_TREC_STRINGS = {"runid": "the run's name", "relstring": "each topic's first documents' relevance, as digits"}
#: a cutoff written with decimals in trec_eval's form (ndcg_cut.23.4, in its own tests): it reads the leading digits
_TREC_DECIMAL_CUT = re.compile(r"[0-9]+\.[0-9]*")
#: trec_eval's printed names of parameters other than a cutoff: Rprec_mult_0.20, utility_2,-1,0,0, 11pt_avg_.25,.5
_TREC_PRINTED_PARAMS = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_]*?)_(?P<value>[0-9.+-][0-9.,+-]*)$")
_TREC_FRACTION = re.compile(r"^(?P<name>[A-Za-z][A-Za-z_]*?)_(?P<value>[01]\.[0-9]+)$")  # iprec_at_recall_0.50
#: trec_eval's named parameter of rbp and rbp_resid: ``rbp.p=0.5`` (printed ``rbp_p=0.5``)
_TREC_P = re.compile(r"^p=(?P<p>[^,=\s]+)$")
_TREC_PRINTED_P = re.compile(r"^(?P<name>[A-Za-z][A-Za-z_]*?)_(?P<value>p=[^,=\s]+)$")
#: the families whose trec_eval name takes ``p=x``, and the family that name then stands for
_TREC_P_FAMILIES = {"rbp": "rbp_trec", "rbp_trec": "rbp_trec", "rbp_resid": "rbp_resid"}


@dataclass(frozen=True, order=True)
class Metric:
    """A parsed metric: a family, a cutoff and the parameters that differ from their default.

    Examples
    --------
    >>> str(Metric("recall", 10))
    'recall@10'
    >>> str(parse_metric("fbeta(beta=0.5)@20")), parse_metric("ndcg(gain=exp)@10").param("gain")
    ('fbeta(beta=0.5)@20', 'exp')
    """

    family: str
    k: int | None = None
    params: tuple = ()  # ((name, value), ...) in the family's order
    estimate: str = ""  # an estimate of this metric (evaluate_sampled's "sampled:uni100", "corrected:mle"); "" itself

    def __str__(self) -> str:
        text = self.family
        if self.params:
            text += "(" + ",".join(f"{n}={format_value(v)}" for n, v in self.params) + ")"
        if self.k is not None:
            text += f"@{self.k}"
        return text + (f"[{self.estimate}]" if self.estimate else "")

    def param(self, name: str):
        """The value of a parameter (its default when it was not given)."""
        for n, v in self.params:
            if n == name:
                return v
        for p in self.info.params + GENERIC:
            if p.name == name:
                return p.default
        raise KeyError(name)

    @property
    def info(self) -> Family:
        """The registry entry of this metric's family."""
        return FAMILIES[self.family]

    @property
    def bounded(self) -> bool:
        """Whether this metric's values lie in [0, 1]: its family's, except cwl_eval's other columns
        (``value=etu``, ``etc``, ``ed``, ``ec``: totals and depths, not the measure).

        >>> parse_metric("trap(max_rel=3)").bounded, parse_metric("trap(max_rel=3,value=etu)").bounded
        (True, False)
        """
        return bool(self.info.bounded) and dict(self.params).get("value", "eu") == "eu"

    @property
    def trec_eval_name(self) -> str:
        """The name trec_eval prints for this metric (:func:`trec_name`): what a consumer holding the
        Metric reads, rather than parsing its column label again.

        >>> Metric("precision", 10).trec_eval_name, Metric("ap").trec_eval_name
        ('P_10', 'map')
        """
        return trec_name(self)


def _unknown(text: str, why: str) -> UnknownMetricError:
    """An unknown family: the closest names suggested on the family part of ``text``, each with the
    user's own parameters and cutoff (``recal@2`` -> ``recall@2``) when that parses."""
    text = str(text)
    base = re.split(r"[@(.]", text, maxsplit=1)[0]
    rest = re.sub(r"\s*@\s*", "@", text[len(base):].strip())
    if base.strip().lower() in TREC_SETS:  # all_trec@10: a set takes its measures' own cutoffs
        return UnknownMetricError(f"Bad metric name {text!r}: {base.strip()!r} is trec_eval's set of measures, each at "
                                  f"trec_eval's default cutoffs; it takes no cutoff or parameters. Name it alone "
                                  f"({base.strip()!r}) and add other metrics beside it, as in "
                                  f"[{base.strip()!r}, 'ndcg_cut_3'].")
    canon: list[str] = []
    families: set[str] = set()
    if not getattr(_SUGGESTING, "on", False):  # a suggestion being tried needs no suggestions of its own
        for h in closest(base.strip(), [*_ALIASES, *TREC_SETS]):  # the closest spelling of each family, or set
            if h in TREC_SETS:
                if not rest:  # trec_eval's all_trec, named without a cutoff
                    canon.append(h)
                continue
            if _ALIASES[h][0] in families:
                continue
            families.add(_ALIASES[h][0])
            canon.append(_suggestion(h, rest))
    hint = f" Did you mean {' or '.join(repr(c) for c in canon)}?" if canon else ""
    listing = ", ".join(sorted(FAMILIES))
    return UnknownMetricError(f"Unknown metric {text!r}: {why}.{hint} Known metrics: {listing}.")


def _suggestion(name: str, rest: str) -> str:
    """``name`` (a family or an alias) with the rest of what the user wrote, if that parses; else the
    family's example with the user's cutoff; else the family's example."""
    fam = FAMILIES[_ALIASES[name][0]]
    _SUGGESTING.on = True
    try:
        for candidate in (name + rest, fam.example(_user_cutoff(rest))):
            try:
                parse_metric(candidate)
            except UnknownMetricError:
                continue
            return candidate
    finally:
        _SUGGESTING.on = False
    return fam.example()


#: Per thread: whether a suggestion is being tried (then an unknown name suggests nothing).
_SUGGESTING = threading.local()


def _user_cutoff(text: str) -> int:
    """The cutoff written at the end of ``text`` (``...@5``) when it is a valid one, else 10."""
    found = re.search(r"@\s*([0-9]+)\s*$", text)
    k = int(found.group(1)) if found else 0
    return k if 1 <= k <= MAX_CUTOFF else 10


def _bad(text: str, fam: Family, why: str) -> UnknownMetricError:
    """A known metric written wrongly: what is wrong and the right form (the user's cutoff kept when
    it is valid), no list of names."""
    return UnknownMetricError(f"Bad metric name {text!r}: {why}, as in {fam.example(_user_cutoff(str(text)))!r}.")


def _split_top(text: str) -> list[str]:
    """Split at commas outside braces: ``"gain={1:3,2:7},x=1"`` -> two parts."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _gain_value(text: str, full: str, fam: Family):
    value = text.strip().lower()
    if value in ("linear", "lin", ""):
        return "linear"
    if value in ("exp", "exponential", "burges"):
        return "exp"
    if value in ("binary", "bin"):  # 1 for a relevant item (the relevance threshold), 0 otherwise
        return "binary"
    body = value[1:-1] if value.startswith("{") and value.endswith("}") else value
    pairs = {}
    for item in _split_top(body):
        grade, sep, gain = item.replace("=", ":").partition(":")
        g, v = _number(grade), _number(gain)
        if not sep or g is None or v is None:
            raise _bad(full, fam, "gain must be 'linear', 'exp', 'binary' or a map of grades to gains such as "
                                  f"'{fam.name}(gain={{1:3,2:7}})@10'")
        pairs[g] = v
    if not pairs:
        raise _bad(full, fam, "the gain map is empty")
    return tuple((_int_if_whole(g), _int_if_whole(v)) for g, v in sorted(pairs.items()))


def _int_if_whole(x: float):
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _param_value(p: Param, text: str, full: str, fam: Family):
    if p.kind == "gain":
        return _gain_value(text, full, fam)
    if p.kind == "levels":
        return _levels_value(p, text, full, fam)
    if p.kind == "weights":
        return _weights_value(p, text, full, fam)
    if p.kind == "choice":
        word = text.strip().lower()
        if word not in p.choices:
            raise _bad(full, fam, f"{p.name} must be one of {', '.join(p.choices)}")
        return word
    if p.kind == "bool":
        flag = text.strip().strip("'\"").lower()
        if flag not in ("true", "false", "1", "0"):
            raise _bad(full, fam, f"{p.name} must be true or false")
        return flag in ("true", "1")
    value = _number(text.strip().strip("'\""))
    if p.kind in ("real", "number") and value is None:
        raise _bad(full, fam, f"{p.name} must be a finite number")
    if p.kind in ("positive", "grade") and (value is None or value <= 0):
        raise _bad(full, fam, f"{p.name} must be a positive finite number")
    if p.kind == "unit" and (value is None or not is_unit(value)):
        raise _bad(full, fam, f"{p.name} must be a number between 0 and 1")
    if p.kind == "fraction" and (value is None or not 0 <= value <= 1):
        raise _bad(full, fam, f"{p.name} must be a number from 0 to 1")
    return value


def _levels_value(p: Param, text: str, full: str, fam: Family) -> tuple:
    """Recall levels: ``{0.25,0.5}`` (or trec_eval's ``.25,.5``), each from 0 to 1, distinct, kept ascending."""
    body = text.strip()
    body = body[1:-1] if body.startswith("{") and body.endswith("}") else body
    values = [v for v in (_number(x.strip()) for x in body.split(",")) if v is not None and 0 <= v <= 1]
    if len(values) != len(body.split(",")):
        raise _bad(full, fam, f"{p.name} must be numbers from 0 to 1 in braces, such as '{fam.name}({p.name}={{0.25,0.5}})'")
    if len(set(values)) < len(values):
        raise _bad(full, fam, f"{p.name} lists a level twice: give each level once")
    return tuple(sorted(values))


def _weights_value(p: Param, text: str, full: str, fam: Family) -> tuple:
    """Weights of ranks 1, 2, ...: ``{1,0.5,0.25}``, finite numbers >= 0, not all 0, in rank order."""
    body = text.strip()
    body = body[1:-1] if body.startswith("{") and body.endswith("}") else body
    values = [_number(x.strip()) for x in body.split(",")]
    if not values or any(v is None or v < 0 for v in values) or not any(v for v in values if v is not None):
        raise _bad(full, fam, f"{p.name} must be numbers >= 0 (not all 0), one per rank from rank 1, in braces, such "
                              f"as '{fam.name}({p.name}={{1,0.5,0.25}})@3'")
    return tuple(_int_if_whole(v) for v in values if v is not None)


def _parse_params(fam: Family, params: str | None, preset: tuple, full: str) -> tuple:
    values = dict(preset)
    if params is not None:
        by_name = {p.name.lower(): p for p in GENERIC} | {p.name.lower(): p for p in fam.params}
        given: set[str] = set()  # a parameter given twice (ndcg(gain=1:3,2:7): a map without braces) is refused
        for part in _split_top(params):
            name, sep, value = part.partition("=")
            name = name.strip().lower()
            if name == "gains":  # ir_measures' spelling
                name = "gain"
            if not sep or name.startswith("{"):  # a lone value: the family's first parameter
                if not fam.params:
                    raise _bad(full, fam, f"{fam.name} takes no parameters but rel= and judged_only=")
                name, value = fam.params[0].name.lower(), part
            if name not in by_name:
                raise _bad(full, fam, f"{fam.name} has no parameter {name!r}; it takes "
                                      + ", ".join(p.name for p in fam.params + GENERIC))
            if by_name[name].name in given:
                hint = " (a map of gains goes in braces: gain={1:3,2:7})" if by_name[name].kind == "gain" else ""
                raise _bad(full, fam, f"{by_name[name].name} is given twice{hint}")
            given.add(by_name[name].name)
            values[by_name[name].name] = _param_value(by_name[name], value, full, fam)
    out = []
    for p in fam.params + GENERIC:
        if p.name not in values:
            if p.required:
                trec = " (trec_eval's rbp, the p of its -m rbp.p=0.8, is rbp_trec)" if fam.name == "rbp" else ""
                raise _bad(full, fam, f"{fam.name} needs a parameter{trec}")
            continue
        if values[p.name] != p.default:
            out.append((p.name, values[p.name]))
    low, high = dict(out).get("min_rel", 0.0), dict(out).get("max_rel")
    if high is not None and not low < high:
        raise _bad(full, fam, f"max_rel ({format_value(high)}) must be above min_rel ({format_value(low)})")
    return tuple(out)


def _trec_param(name: str, value: str, full: str):
    """trec_eval's ``measure.param`` forms: ``P.10``, ``ndcg_cut.10``, ``set_F.0.5``, ``ndcg.1=3,2=7``."""
    key = name.lower()
    if key not in _ALIASES:
        return None
    fam = FAMILIES[_ALIASES[key][0]]
    if fam.trec_params is not None:  # utility.1,-1,0,0, Rprec_mult.0.2, 11pt_avg..25,.5
        found = _trec_params(fam, value, full)
        if len(found) > 1:
            raise _bad(full, fam, f"{name}.{value} names {len(found)} metrics: pass it in a list (parse_metrics)")
        return fam, None, found[0]
    if fam.name == "set_f":  # trec_eval's set_F parameter is beta squared
        b2 = _number(value)
        if b2 is None or b2 <= 0:
            raise _bad(full, fam, "set_F.x needs a positive x (beta squared, as trec_eval reads it)")
        return fam, None, (("beta", math.sqrt(b2)),)
    if fam.name in _TREC_P_FAMILIES and "=" in value:  # trec_eval's rbp.p=0.5, rbp_resid.p=0.8
        pair = _TREC_P.match(value)
        fam = FAMILIES[_TREC_P_FAMILIES[fam.name]]
        if pair is None and len(re.findall(r"(?:^|[.,])\s*p\s*=", value)) > 1:  # rbp.p=0.5.p=0.8
            raise _bad(full, fam, f"p is given twice ({name}.{value}): give it once ({name}.p=0.8)")
        if pair is None:
            raise _bad(full, fam, f"trec_eval's {name} takes p=x here ({name}.p=0.8); its gain maps are not "
                                  "reproduced (trec_eval's rbp rescales mapped gains by bounds it never sets)")
        return fam, None, _parse_params(fam, f"p={pair.group('p')}", (), full)
    if any(p.kind == "gain" for p in fam.params) and "=" in value:
        return fam, None, (("gain", _gain_value(value, full, fam)),)
    unit = [p for p in fam.params if p.kind == "unit"]
    if unit and _DIGITS.fullmatch(value):  # ranx's rbp.95: the persistence 0.95
        return fam, None, ((unit[0].name, float("0." + value)),)
    if fam.cutoff != "none" and _DIGITS.fullmatch(value):
        return fam, value, ()
    if fam.cutoff != "none" and _TREC_DECIMAL_CUT.fullmatch(value):  # trec_eval reads 23.4 as 23, its leading digits
        return fam, value.split(".")[0], ()
    if fam.cutoff != "none":
        raise UnknownMetricError(f"Bad metric name {full!r}: trec_eval's form {name}.x takes whole-number cutoffs "
                                 f"x, as in '{name}.10' (or '{name}.5,10,20' in a list); got {value!r}.")
    raise _bad(full, fam, f"trec_eval's form {name}.{value} is not understood here; write it")


def _trec_params(fam: Family, value: str, full: str) -> list[tuple]:
    """The parameters of each metric a trec_eval ``name.value`` names, by the family's ``trec_params``."""
    assert fam.trec_params is not None
    try:
        texts = fam.trec_params(value)
    except ValueError as why:
        raise _bad(full, fam, str(why)) from None
    return [_parse_params(fam, text, (), full) for text in texts]


def canonical_name(text) -> str | None:
    """The canonical name of ``text`` when it names a metric, else None: a test of a column label
    (is it a metric?), which builds no message for a label that is not one (an unknown name's
    message suggests the closest names: the costliest part of the refusal).

    >>> canonical_name("P@5"), canonical_name("query")
    ('precision@5', None)
    """
    was = getattr(_SUGGESTING, "on", False)
    _SUGGESTING.on = True  # no suggestions
    try:
        return str(parse_metric(text))
    except TopkevalError:
        return None
    finally:
        _SUGGESTING.on = was


@validate_params(text=MetricName())
def parse_metric(text: str | Metric) -> Metric:
    """Parse a metric name such as ``"recall@10"`` into a :class:`Metric`.

    Parameters
    ----------
    text : str or Metric
        ``family[(param=value,...)][@k]``; case-insensitive; aliases of other tools and trec_eval's
        forms (``P_10``, ``P.10``, ``set_F.0.5``, ``ndcg.1=3,2=7``) are accepted.

    Returns
    -------
    Metric
        Its ``str()`` is the canonical name.

    Raises
    ------
    UnknownMetricError
        For an unknown family (the message suggests the closest names), a missing or bad cutoff,
        or bad parameters.

    Examples
    --------
    >>> [str(parse_metric(m)) for m in ("P@5", "Rprec", "success_10", "ndcg_cut_10", "MRR@10", "map", "hits@3")]
    ['precision@5', 'r_precision', 'hit_rate@10', 'ndcg@10', 'rr@10', 'ap', 'tp@3']
    >>> [str(parse_metric(m)) for m in ("fbeta(beta=1)@5", "ndcg_burges@10", "set_F.0.25", "ndcg.1=3,2=7")]
    ['f1@5', 'ndcg(gain=exp)@10', 'set_f(beta=0.5)', 'ndcg(gain={1:3,2:7})']

    ir_measures' ``SetF(beta=x)`` and trec_eval's ``set_F.x`` read x as beta squared:

    >>> str(parse_metric("SetF(beta=0.25)")), str(parse_metric("set_f(beta=0.25)"))
    ('set_f(beta=0.5)', 'set_f(beta=0.25)')
    """
    if isinstance(text, Metric):
        return text
    if is_ir_measure(text):  # an ir_measures measure object: its own spelling, with its meaning
        return parse_metric("ir_measures:" + str(text))
    if not isinstance(text, str):
        raise UnknownMetricError(f"A metric name must be a string such as 'recall@10'. Got {text!r}.")
    members = trec_set(text)
    if members is not None:
        raise UnknownMetricError(f"{text!r} is trec_eval's set of {len(members)} measures, not one metric: pass it as "
                                 "metrics= (evaluate, parse_metrics), where it stands for its measures.")
    head = re.split(r"[@(._]", text.strip(), maxsplit=1)[0].lower()
    if head in _TREC_STRINGS:  # runid, relstring.20
        raise UnknownMetricError(f"{text!r} is a line trec_eval prints that holds no number ({_TREC_STRINGS[head]}), so "
                                 "it is no metric here: the TREC output (--format trec) prints runid from the model's "
                                 "name.")
    estimate = ESTIMATE.match(text)
    if estimate:  # recall@10[corrected:mle]: an estimate of a metric, named after both
        tag = estimate.group("estimate").lower()
        if not ESTIMATES.match(tag):
            raise UnknownMetricError(f"Bad metric name {text!r}: the part in brackets names an estimate of the metric, "
                                     "'sampled:uni<m>' or 'sampled:pop<m>' (m sampled negatives, uniformly or by "
                                     "popularity) or 'corrected:bv', 'corrected:mle', 'corrected:rescaled', as in "
                                     f"'recall@10[sampled:uni100]'; got {estimate.group('estimate')!r}.")
        base = parse_metric(estimate.group("metric"))
        if base.estimate:
            raise UnknownMetricError(f"Bad metric name {text!r}: one estimate in brackets, as in "
                                     "'recall@10[corrected:mle]'.")
        return Metric(base.family, base.k, base.params, tag)
    tool = _TOOL.match(text)
    if tool:
        return _in_tool(tool.group("tool"), tool.group("rest"), text)
    # trec_eval's names of a level: iprec_at_recall_0.50 (printed), iprec_at_recall.0.50 (its -m form)
    fraction = _TREC_FRACTION.match(text.strip()) or _TREC_PARAM.match(text.strip())
    leveled = _fraction_family(fraction.group("name")) if fraction and "@" not in text and "(" not in text else None
    if fraction and leveled is not None:
        fam, first = leveled
        levels = fraction.group("value").split(",")
        if len(levels) > 1:
            raise _bad(text, fam, f"{text} names {len(levels)} metrics: pass it in a list (parse_metrics)")
        return _finish(fam, None, ((first.name, _param_value(first, levels[0], text, fam)),), text)
    trec = _TREC_PARAM.match(text.strip()) or _TREC_PRINTED_GAINS.match(text.strip())
    if trec and "@" not in text and "(" not in text:
        found = _trec_param(trec.group("name"), trec.group("value"), text)
        if found is not None:
            fam, k_text, params = found
            return _finish(fam, k_text, params, text)
    printed = _TREC_PRINTED_PARAMS.match(text.strip()) or _TREC_PRINTED_P.match(text.strip())
    if printed:  # Rprec_mult_0.20, utility_2,-1,0,0, set_F_0.25, rbp_p=0.5, rbp_resid_p=0.8
        key = printed.group("name").lower()
        known = FAMILIES[_ALIASES[key][0]] if key in _ALIASES else None
        value = printed.group("value")
        if known is not None and (known.name == "set_f" or (known.name in _TREC_P_FAMILIES and value.startswith("p="))
                                  or (known.trec_params is not None and any(c in value for c in ".,"))):
            fam, k_text, params = _trec_param(printed.group("name"), value, text)
            return _finish(fam, k_text, params, text)
    m = _GRAMMAR.match(text)
    if m is None:
        raise _unknown(text, "expected the form name@k, for example 'recall@10'")
    name, params, k_text = m.group("name"), m.group("params"), m.group("k")
    key = name.lower()
    if key not in _ALIASES and k_text is None and params is None:
        t = _TREC_CUTOFF.match(name)
        if t and t.group("name").lower() in _ALIASES:
            key, k_text = t.group("name").lower(), t.group("k")
    if key not in _ALIASES:
        raise _unknown(text, f"no metric is called {name!r}")
    family, preset = _ALIASES[key]
    fam = FAMILIES[family]
    _one_pair(fam, params, text)
    fam, params, k_text = _ir_measures_forms(fam, params, k_text, text)
    parsed = _parse_params(fam, params, preset, text)
    if key in _SQUARED_BETA:
        parsed = tuple((n, math.sqrt(v) if n == "beta" else v) for n, v in parsed)
    return _finish(fam, k_text, parsed, text)


def _one_pair(fam: Family, params: str | None, text: str) -> None:
    """The parameters in one pair of parentheses: ``P(rel=2)(rel=3)@5`` refused as such (a parameter
    given twice named), not read as a value ``2)(rel=3``."""
    if params is None or ")" not in params:
        return
    groups = [g.strip() for g in re.split(r"\)\s*\(", params)]
    if len(groups) < 2 or any(c in g for g in groups for c in "()"):
        raise _bad(text, fam, "its parentheses do not pair up: give the parameters in one pair")
    seen: set[str] = set()
    for group in groups:
        for part in _split_top(group):
            name = part.partition("=")[0].strip().lower() if "=" in part else ""
            if name and name in seen:
                raise _bad(text, fam, f"{name} is given twice, in two pairs of parentheses: give each parameter "
                                      "once, in one pair")
            seen.add(name)
    raise _bad(text, fam, "the parameters are in two pairs of parentheses: give them in one pair, separated by "
                          "commas")


def _fraction_family(name: str):
    """``(family, its level parameter)`` of the family trec_eval names ``name`` followed by a level
    (``iprec_at_recall``), or None."""
    for fam in FAMILIES.values():
        first = fam.params[0] if fam.params else None
        if first is None or first.kind != "fraction" or fam.trec_format is None:
            continue
        prefix = fam.trec_format(Metric(fam.name, None, ((first.name, 0.0),))).rsplit("_", 1)[0]
        if prefix.lower() == name.lower():
            return fam, first
    return None


def _ir_measures_forms(fam: Family, params: str | None, k_text: str | None, text: str):
    """ir_measures' and torchmetrics' forms, read as theirs: the cutoff as ``cutoff=`` or ``top_k=``,
    ``IPrec@0.5`` (the recall level after the @), ``dcg='log2'`` / ``'exp-log2'`` (linear /
    exponential gains), ``SetP(relative=True)`` (set_relative_precision), ``NumRet(rel=1)`` (the
    relevant retrieved: num_rel_ret). Returns the family, the other parameters and the cutoff."""
    rest: list[str] = []
    seen: dict[str, str] = {}  # the forms read here, each once (dcg= sets the gain: not beside gain=)
    for part in _split_top(params) if params is not None else []:
        name, sep, value = (x.strip() for x in part.partition("="))
        name, value = name.lower(), value.strip("'\"")
        own = any(p.name.lower() == name for p in fam.params)
        if sep and not own and name in (*_CUTOFF_NAMES, "dcg", "relative"):
            role = "the cutoff" if name in _CUTOFF_NAMES else name
            if role in seen:
                raise _bad(text, fam, f"{role} is given twice ({seen[role]} and {part.strip()}): give it once")
            seen[role] = part.strip()
        if sep and name in _CUTOFF_NAMES and not own:
            if k_text is not None and k_text.strip() != value:
                raise _bad(text, fam, f"the cutoff is given twice ({k_text} and {value})")
            k_text = value
        elif sep and name == "dcg" and not own:
            gains = [p for p in _split_top(params or "") if p.partition("=")[0].strip().lower() in ("gain", "gains")]
            if gains:
                raise _bad(text, fam, f"dcg= and gain= both set the gain ({part.strip()} and {gains[0].strip()}): "
                                      "give one")
            if value.lower() not in ("log2", "exp-log2"):
                raise _bad(text, fam, f"dcg must be 'log2' or 'exp-log2' (ir_measures), got {value!r}")
            if any(p.kind == "gain" for p in fam.params):
                rest.append("gain=" + ("exp" if value.lower() == "exp-log2" else "linear"))
            elif value.lower() != "log2":
                raise _bad(text, fam, f"{fam.name} has linear gains only (dcg='log2')")
        elif sep and name == "relative" and fam.name == "set_precision":
            if _param_value(Param("relative", "bool"), value, text, fam):
                fam = FAMILIES["set_relative_precision"]
        else:
            rest.append(part)
    if fam.name == "num_ret" and any(p.partition("=")[0].strip().lower() == "rel" for p in rest):
        fam = FAMILIES["num_rel_ret"]  # ir_measures' NumRet(rel=r): the retrieved items of grade >= r
    first = fam.params[0] if fam.params else None
    if k_text and fam.cutoff == "none" and first is not None and first.kind == "fraction" and _number(k_text) is not None:
        rest.append(f"{first.name}={k_text}")  # ir_measures' IPrec@0.5
        k_text = None
    return fam, ",".join(rest) if rest else None, k_text


def _in_tool(tool: str, rest: str, text: str) -> Metric:
    """A name prefixed by its tool (``recbole:MAP@10``): the tool's meaning (:data:`TOOL_MEANINGS`)."""
    meanings = TOOL_MEANINGS.get(tool.lower())
    if meanings is None:
        raise UnknownMetricError(f"Unknown tool {tool!r} in metric name {text!r}: a name may be prefixed by one of "
                                 f"{', '.join(sorted(TOOL_MEANINGS))} (as in 'recbole:MAP@10'), for that tool's "
                                 "meaning of the name.")
    m = _GRAMMAR.match(rest)
    if m is None:
        return parse_metric(rest)
    name, params, k_text = m.group("name"), m.group("params"), m.group("k")
    given = [p.partition("=")[0].strip().lower() for p in _split_top(params)] if params else []
    family, preset = meanings.get(name.lower(), (name, ""))
    if tool.lower() == "ir_measures" and _ALIASES.get(name.lower(), ("",))[0] == "rbp":
        # ir_measures' RBP: p = 0.8 by default; without rel= the grade is the gain (trectools)
        preset = ",".join((["p=0.8"] if "p" not in given else []) + (["gain=linear"] if "rel" not in given else []))
    preset = ",".join(p for p in _split_top(preset) if p.partition("=")[0].strip().lower() not in given)
    inside = ",".join(x for x in (preset, params) if x)
    return parse_metric(family + (f"({inside})" if inside else "") + (f"@{k_text}" if k_text is not None else ""))


def is_ir_measure(value) -> bool:
    """Whether ``value`` is an ir_measures measure object (``ir_measures.nDCG@10``), without importing it."""
    return type(value).__module__.split(".")[0] == "ir_measures" and hasattr(value, "NAME")


def _finish(fam: Family, k_text: str | None, params: tuple, text: str) -> Metric:
    if fam.cutoff == "required" and (k_text is None or k_text == ""):
        raise _bad(text, fam, f"{fam.name} needs a cutoff (written @k, or cutoff=k, top_k=k as ir_measures and "
                              "torchmetrics take it)")
    if fam.cutoff == "none" and k_text is not None:
        why = ("its cutoff is each query's R" if fam.depth == "R" else "it counts the whole list")
        raise _bad(text, fam, f"{fam.name} takes no cutoff ({why})")
    k = None
    if k_text is not None:
        if not _DIGITS.fullmatch(k_text) or int(k_text) < 1:
            raise _bad(text, fam, f"the cutoff must be a positive integer, got {k_text!r}")
        if int(k_text) > MAX_CUTOFF:
            raise _bad(text, fam, f"the cutoff must be at most {MAX_CUTOFF}, got {k_text}")
        k = int(k_text)
    if fam.name in ("fbeta", "fbeta_micro") and dict(params).get("beta") == 1.0:
        return Metric(fam.name.replace("fbeta", "f1"), k, tuple((n, v) for n, v in params if n != "beta"))
    return Metric(fam.name, k, params)


def parse_metrics(metrics) -> list[Metric]:
    """Parse a name or a list of names; duplicates (after canonicalisation) are kept once.

    A name may list several cutoffs as trec_eval does (``"P.5,10"`` is ``precision@5`` and
    ``precision@10``).

    >>> [str(m) for m in parse_metrics(["P.5,10", "precision@5", "ndcg@3"])]
    ['precision@5', 'precision@10', 'ndcg@3']

    trec_eval's measure sets expand first, where they stand, into their measures in trec_eval's
    order, each named as trec_eval prints it (:func:`~topkeval.metrics.trec.trec_set`):
    ``"official"`` (trec_eval without -m), ``"all_trec"`` (``-m all_trec``) and ``"set"``. They
    leave out ``runid`` and ``relstring``, which are not numbers.

    >>> official = parse_metrics("official")
    >>> len(official), [str(m) for m in official[4:7]], str(official[-1])
    (29, ['ap', 'gm_map', 'r_precision'], 'precision@1000')
    >>> labelled_metrics(["official", "ndcg@3"])[0][-3:]
    ('P_500', 'P_1000', 'ndcg@3')
    """
    out: list[Metric] = []
    for item in _items(metrics):
        for _, m in _expand(item):
            if m not in out:
                out.append(m)
    return out


def labelled_metrics(metrics) -> tuple[tuple[str, ...], tuple[Metric, ...]]:
    """The metrics of a list of names, each with its column label: the name as written, blanks
    removed (``"P @ 10"`` is labelled ``"P@10"``; each cutoff of ``"P.5,10"`` as ``"P.5"``,
    ``"P.10"``), or a :class:`Metric`'s canonical name. A name given twice is kept once; one metric
    under two names is refused, as it would be one column under two labels, except that a metric of
    a trec_eval set (``"all_trec"``) named again, by the set or apart, is kept once under its first
    label (``["all_trec", "P@10"]`` has the one column ``P_10``).

    >>> labelled_metrics(["map", "P.5,10", "ndcg @ 3", "map"])[0]
    ('map', 'P.5', 'P.10', 'ndcg@3')

    Raises
    ------
    UnknownMetricError
        An unknown or bad name, or the same metric under two names.
    """
    labels: list[str] = []
    out: list[Metric] = []
    of_sets: set[str] = set()  # labels given by a trec_eval set ("all_trec"): a metric of a set named again is kept
    for item in _items(metrics):
        in_set = trec_set(item) is not None
        for label, m in _expand(item):
            if m in out:
                first = labels[out.index(m)]
                if first == label or in_set or first in of_sets:
                    continue
                raise UnknownMetricError(f"{first!r} and {label!r} are the same metric, {str(m)!r}: ask for it once "
                                         "(its column is labelled as you write it, and found by any of its names).")
            labels.append(label)
            out.append(m)
            if in_set:
                of_sets.add(label)
    return tuple(labels), tuple(out)


def label_of(name: str | Metric) -> str:
    """The column label of a metric name: the name without blanks, or a Metric's canonical name."""
    return str(name) if isinstance(name, Metric) else re.sub(r"\s+", "", name)


def _items(metrics) -> list:
    if isinstance(metrics, (str, Metric)) or is_ir_measure(metrics):
        metrics = [metrics]
    try:
        items = list(metrics)
    except TypeError:
        raise UnknownMetricError(f"metrics must be a name or a list of names such as ['recall@10']. Got {metrics!r}.") from None
    if not items:
        raise UnknownMetricError("metrics is empty: name at least one, for example 'recall@10'.")
    return items


def _expand(item) -> list[tuple[str, Metric]]:
    """``(label, metric)`` of each metric an item names (trec_eval's ``P.5,10`` names two, its set
    ``all_trec`` 98)."""
    members = trec_set(item)
    if members is not None:  # a set name expands before any other parsing
        return [pair for name in members for pair in _expand(name)]
    if isinstance(item, str):
        t = _TREC_PARAM.match(item.strip())
        fam = FAMILIES[_ALIASES[t.group("name").lower()][0]] if t and t.group("name").lower() in _ALIASES else None
        if t and fam is not None and fam.trec_params is not None:  # Rprec_mult.0.2,0.4: one metric per multiplier
            found = _trec_params(fam, t.group("value"), item)
            if len(found) > 1:
                return [(label_of(f"{t.group('name')}.{v.strip()}"), _finish(fam, None, p, item))
                        for v, p in zip(t.group("value").split(","), found)]
        cuts = t.group("value").split(",") if t else []
        decimal = fam is not None and fam.cutoff != "none"  # trec_eval's ndcg_cut.10,23.4: cutoffs, 23.4 read as 23
        if t and "," in t.group("value") and (all(_DIGITS.fullmatch(v.strip())
                                                  or (decimal and _TREC_DECIMAL_CUT.fullmatch(v.strip())) for v in cuts)
                                              or _fraction_family(t.group("name")) is not None):
            # P.5,10; iprec_at_recall.0.10,0.20: one metric per value
            return [(label_of(f"{t.group('name')}.{v.strip()}"), parse_metric(f"{t.group('name')}.{v.strip()}"))
                    for v in cuts]
    return [(label_of(item) if isinstance(item, (str, Metric)) else label_of(str(item)), parse_metric(item))]


#: a value continuing the name before a comma (trec_eval's lists): a number, or grade=gain / grade:gain
_NUMBER = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_VALUE = re.compile(rf"{_NUMBER}(?:[=:]{_NUMBER})?")


def split_names(text: str) -> list[str]:
    """Split a comma-separated list of names (``"recall@10,precision@10"``), keeping the commas that
    belong to a name (``"ndcg(gain={1:3,2:7})@5"``, ``"P.5,10"``, ``"ndcg.1=3,2=7"``).

    >>> split_names("recall@10,precision@10,P.5,10,ndcg(gain={1:3,2:7})@5")
    ['recall@10', 'precision@10', 'P.5,10', 'ndcg(gain={1:3,2:7})@5']

    A name that starts with a digit is a name, not a value of the one before it:

    >>> split_names("map,11pt_avg,utility.1,-1,0,0")
    ['map', '11pt_avg', 'utility.1,-1,0,0']
    """
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch in "({") - (ch in ")}")
        if (ch == "," or ch.isspace()) and depth == 0:  # commas or blanks between names
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        if out and _VALUE.fullmatch(part):  # "10" of "P.5,10", "2=7" of "ndcg.1=3,2=7", ".5" of "11pt_avg..25,.5"
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def trec_name(metric: Metric | str) -> str:
    """The name trec_eval prints for a metric (``P_10``, ``map_cut_20``, ``Rprec``...), else the canonical one.

    Examples
    --------
    >>> [trec_name(m) for m in ("precision@10", "ap", "ap@5", "ndcg@10", "rr", "hit_rate@1", "f1@5", "set_precision")]
    ['P_10', 'map', 'map_cut_5', 'ndcg_cut_10', 'recip_rank', 'success_1', 'f1@5', 'set_P']
    """
    m = parse_metric(metric)
    fam = m.info
    if m.param("rel") is not None or m.param("judged_only"):
        return str(m)  # trec_eval sets these for a whole run (-l, -J), not per measure
    if fam.trec_format is not None:
        return fam.trec_format(m)
    if m.k is None and fam.name == "set_f" and m.params:  # trec_eval's parameter is beta squared
        return f"set_F_{float(m.param('beta')) ** 2:.12g}"
    if m.k is None and isinstance(m.param("gain") if fam.params and fam.params[0].kind == "gain" else None, tuple) \
            and fam.trec_uncut and len(m.params) == 1:
        return f"{fam.trec_uncut}_" + ",".join(f"{format_value(g)}={format_value(v)}" for g, v in m.param("gain"))
    if m.params:
        return str(m)
    if m.k is None and fam.trec_uncut:
        return fam.trec_uncut
    if m.k is not None and fam.trec:
        return f"{fam.trec}_{m.k}"
    return str(m)


def is_summed(metric: Metric | str) -> bool:
    """Whether trec_eval's ``all`` line sums this metric over queries (the counts) instead of averaging."""
    return parse_metric(metric).info.summed


def is_geometric(metric: Metric | str) -> bool:
    """Whether trec_eval's ``all`` line is the geometric mean (exp of the mean of the per-query logs):
    gm_map, gm_bpref."""
    return parse_metric(metric).info.geometric


def is_bounded(label: str) -> bool:
    """Whether a metric (by a column label: its name as requested) takes values in [0, 1], so that two
    models' values differ by at most 1; False for a label that names no metric."""
    try:
        return parse_metric(label).bounded
    except (ValueError, KeyError):  # UnknownMetricError is a ValueError
        return False


def higher_is_better(metric: Metric | str) -> bool:
    """Whether a larger value of this metric is better (False for fp, fn and fallout)."""
    return parse_metric(metric).info.higher_is_better


#: What a family's names mean in other tools where that differs from topkeval's meaning ("{at}" is the
#: cutoff asked for): :func:`explain_metric` shows it, docs/conventions.md says the same.
NOTES: dict[str, str] = {
    "ap": "trec_eval, ranx and ir_measures divide by R, as here; RecBole, RePlay, Spark and Microsoft Recommenders "
          "divide MAP@k by min(R, k): ap_capped{at} (recbole:MAP{at}); torchmetrics' RetrievalMAP divides by the "
          "relevant candidates found in the top k: ap_found{at} (RetrievalMAP{at}).",
    "ap_capped": "trec_eval, ranx and ir_measures divide MAP@k by R: ap{at}; torchmetrics by the relevant candidates "
                 "found in the top k: ap_found{at}.",
    "ap_found": "trec_eval, ranx and ir_measures divide by R: ap{at}; RecBole and RePlay by min(R, k): ap_capped{at}.",
    "recall": "LensKit's Recall@k divides by min(R, k): recall_capped{at} (lenskit:Recall{at}); torchmetrics divides "
              "by the relevant candidates of the query's list (R when every relevant item is a candidate); some "
              "papers call the hit rate recall@k: hit_rate{at}.",
    "recall_capped": "trec_eval, ranx, ir_measures, RecBole and torchmetrics divide recall@k by R: recall{at}.",
    "tp": "hits@k is a count here, as in ranx; RecBole's Hit@k, RePlay's HitRate@k, torchmetrics' RetrievalHitRate "
          "and trec_eval's success_k are 1 if any relevant item is in the top k: hit_rate{at}.",
    "hit_rate": "ranx's hits@k counts the relevant items of the top k: tp{at} (hits{at}); some papers call this "
                "rate recall@k.",
    "ndcg": "RecBole's and RePlay's NDCG use binary relevance: ndcg(gain=binary){at} (recbole:NDCG{at}); ranx's "
            "ndcg_burges and ir_measures' nDCG(dcg='exp-log2') use 2^grade - 1: ndcg(gain=exp){at}; torchmetrics "
            "and scikit-learn take a negative grade as a negative gain (negative_grades='gain').",
    "auc": "RecBole's GAUC averages this per-user AUC weighted by each user's positives, over the users with a "
           "positive and a negative: evaluate(..., weight=<a column of each user's positives>, undefined='nan') "
           "gives it.",
    "rbp": "binary relevance by default (cwl_eval; ir_measures' RBP(rel=1)); ranx's rbp and ir_measures' RBP "
           "without rel= (trectools) weigh a rank by its grade: rbp(p=...,gain=linear){at} (ir_measures:RBP); "
           "trec_eval's rbp (rbp.p=x) divides the grades by the query's largest one: rbp_trec(p=...).",
    "precision": "torchmetrics with adaptive_k, LensKit, Evidently and Surprise divide by min(k, n) for a shorter "
                 "list: short_lists='shrink'.",
    "set_f": "trec_eval's set_F.x and ir_measures' SetF(beta=x) read x as beta squared.",
    "judged": "ir_measures' Judged@k divides by min(k, n): short_lists='shrink'.",
    "iprec": "trec_eval 9 (pytrec_eval) counts int(x R + 0.9) relevant items at level x; trec_eval 10, as here, "
             "lround(x R).",
    "err": "gdeval (ir_measures' ERR@k) takes 4 as the largest grade, the default here.",
}


@validate_params(name=MetricName())
def explain_metric(name) -> str:
    """What a metric name means here, and what the same name means in other tools where that differs.

    Parameters
    ----------
    name : str, Metric or an ir_measures measure
        Any name :func:`parse_metric` reads (``"MAP@10"``, ``"recbole:MAP@10"``, ``"P(rel=2)@5"``).

    Returns
    -------
    str
        The canonical name, the definition, when the value is undefined, the tie rules it is computed
        under, and the notes on other tools' meanings of the name; for a trec_eval measure set
        (``"official"``, ``"all_trec"``), the metrics it stands for.

    Examples
    --------
    >>> print(explain_metric("MAP@10").splitlines()[0])
    'MAP@10' is ap@10: average precision (TREC AP: the sum runs over relevant ranks <= k, divided by R)
    """
    members = trec_set(name)
    if members is not None:  # all_trec, official: what the set stands for
        return (f"{name!r} is trec_eval's set of {len(members)} measures (trec_eval 10.0's, at its default parameters, "
                f"in the order it prints them; runid and relstring, which are not numbers, left out): "
                f"{', '.join(members)}")
    m = parse_metric(name)
    fam = m.info
    shown = name if isinstance(name, str) else str(name)
    lines = [f"{shown!r} is {m}: {fam.summary}", f"  value: {fam.formula}",
             f"  undefined when: {fam.undefined} (the query gets the 'undefined' convention's value)"
             if fam.undefined != "never" else "  undefined: never"]
    if m.param("rel") is not None:
        lines.append(f"  relevant: a grade >= {format_value(m.param('rel'))} (this metric's own threshold)")
    if m.param("judged_only"):
        lines.append("  on the run without its unjudged items (trec_eval -J; needs qrels=)")
    lines.append("  ties: exact under every tie rule" if fam.ties is None else
                 f"  ties: computed under {', '.join(fam.ties)} only (refused under 'expected')")
    note = NOTES.get(fam.name)
    if note:
        lines.append("  elsewhere: " + note.format(at=f"@{m.k}" if m.k is not None else ""))
    return "\n".join(lines)
