"""Stage 2, validate: check a parsed file against the format and build `KernelContract`s.

Each rule raises its own `FkcError` subclass naming the file and the line of the offending
field (see `errors.py` for the list). Sections are checked in file order, fields in the order
the format lists them, so the first error reported is the first one in the file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn

import runtime.contracts.errors as E
from runtime.contracts.entry import check_entry_point
from runtime.contracts.expr import Expr, ExprError, compile_expr
from runtime.contracts.ledger import MEASURED_CLAIMS
from runtime.contracts.model import (
    AWKWARD_LAYOUT,
    COST_CLASSES,
    DETERMINISM,
    DTYPE_CLASSES,
    FKC_VERSIONS,
    KNOWN_OPS,
    LAYOUT_DEFAULT,
    LAYOUT_VALUES,
    PROVENANCES,
    CapsSpec,
    CostSpec,
    DtypeSpec,
    KernelContract,
    Layout,
    Operand,
    PrecisionSpec,
    Provider,
    RankSpec,
)
from runtime.contracts.parse import Block, ContractFile, Section
from runtime.contracts.symbols import compile_constraint, make_resolver
from runtime.contracts.yaml_subset import FieldPath, line_of
from runtime.dtypes import NUMPY_DTYPES

KERNEL_FIELDS = (
    "kernel",
    "op",
    "inputs",
    "outputs",
    "caps",
    "cost",
    "precision",
    "determinism",
    "entry_point",
    "entry_args",
)
KERNEL_REQUIRED = (
    "kernel",
    "op",
    "inputs",
    "outputs",
    "cost",
    "precision",
    "determinism",
    "entry_point",
)
INPUT_FIELDS = ("name", "dtypes", "layout", "rank", "shape")
OUTPUT_FIELDS = ("name", "dtype_rule", "shape_rule", "rank")
COST_FIELDS = ("provenance", "class", "flops", "bytes", "overhead_ns")
MEASURED = "measured"
"""`max_ulp: measured` / `max_relative: measured`: the bound is the worst case verification
measures on the probe set, recorded in the ledger (`runtime.contracts.ledger.measured_bound`)."""
PRECISION_FIELDS = ("bit_stable", "max_ulp", "max_relative", "max_absolute", "audited", "notes")
CAPS_FIELDS = ("awkward_layout", "in_place")
PROVIDER_FIELDS = ("name", "backend", "kernel_source", "revision_base")
PLACEHOLDERS = frozenset({"declared", "judge_measured", "measured", "tbd", "todo", "unknown", "?"})
"""Words that are not costs: a provenance word or a to-do in a numeric field."""

_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_CALL = re.compile(r"^(?P<fn>[a-z_]+)\((?P<args>[^()]*)\)$")
_RANK = re.compile(r"^(?P<lo>\d+)\.\.(?P<hi>\d+)?$")
_TYPE_NAMES = {
    "str": "a string",
    "bool": "a boolean",
    "int": "an integer",
    "num": "a number",
    "list": "a list",
    "map": "a mapping",
}


def _is(value: Any, kind: str) -> bool:
    match kind:
        case "str":
            return isinstance(value, str) and value.strip() != ""
        case "bool":
            return isinstance(value, bool)
        case "int":
            return isinstance(value, int) and not isinstance(value, bool)
        case "num":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "list":
            return isinstance(value, list)
        case "map":
            return isinstance(value, dict)
    raise AssertionError(kind)


class _Reader:
    """Field access with typed errors that point at the field's line."""

    def __init__(self, path: str, block: Block) -> None:
        self.path, self.lines = path, block.lines

    def fail(self, cls: type[E.FkcError], at: FieldPath, message: str) -> NoReturn:
        raise cls(self.path, line_of(self.lines, at), message)

    def mapping(
        self, value: Any, at: FieldPath, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> dict[str, Any]:
        what = ".".join(str(p) for p in at) or "the block"
        if not isinstance(value, dict):
            self.fail(E.WrongType if at else E.YamlSyntax, at, f"{what} must be a mapping")
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                hint = " (fused ops are not supported yet)" if key == "fused_op" else ""
                self.fail(
                    E.UnknownField,
                    (*at, str(key)),
                    f"unknown field '{key}' in {what}{hint}; known: {', '.join(allowed)}",
                )
        for key in required:
            if key not in value:
                self.fail(E.MissingField, at, f"{what} lacks the required field '{key}'")
        return value

    def get(self, m: Mapping[str, Any], at: FieldPath, key: str, kind: str) -> Any:
        value = m[key]
        if not _is(value, kind):
            got = "a boolean (quote yes/no/on/off)" if isinstance(value, bool) else repr(value)
            name = ".".join(str(p) for p in (*at, key))
            self.fail(E.WrongType, (*at, key), f"{name} must be {_TYPE_NAMES[kind]}, got {got}")
        return value


# -- the front-matter --------------------------------------------------------------------------


def validate_provider(cf: ContractFile) -> Provider:
    """Check `fkc_version` and `provider`; the file's provider."""
    r = _Reader(cf.path, cf.front)
    front = r.mapping(cf.front.data, (), ("fkc_version", "provider"), ())
    if "fkc_version" not in front:
        r.fail(E.UnsupportedVersion, (), "front-matter lacks fkc_version")
    version = front["fkc_version"]
    if not _is(version, "int") or version not in FKC_VERSIONS:
        supported = ", ".join(map(str, FKC_VERSIONS))
        r.fail(
            E.UnsupportedVersion,
            ("fkc_version",),
            f"fkc_version {version!r} is not supported ({supported})",
        )
    prov = front.get("provider")
    if not isinstance(prov, dict):
        r.fail(E.BadProvider, ("provider",), "front-matter lacks a provider mapping")
    for key in prov:
        if key not in PROVIDER_FIELDS:
            r.fail(E.BadProvider, ("provider", str(key)), f"unknown provider field '{key}'")
    for key in ("backend", "kernel_source", "revision_base"):
        if not _is(prov.get(key), "str"):
            r.fail(
                E.BadProvider,
                ("provider", key) if key in prov else ("provider",),
                f"provider.{key} must be a non-empty string",
            )
    line = line_of(cf.front.lines, ("provider",))
    return Provider(
        prov["backend"], prov["kernel_source"], str(prov["revision_base"]), cf.path, line
    )


# -- one section -----------------------------------------------------------------------------


def validate_section(
    section: Section, provider: Provider, path: str, allow: Collection[str] = ()
) -> KernelContract:
    """Check one `##` section's block and build its contract."""
    r = _Reader(path, section.block)
    b = r.mapping(section.block.data, (), KERNEL_FIELDS, KERNEL_REQUIRED)
    name = r.get(b, (), "kernel", "str")
    op = r.get(b, (), "op", "str")
    if op not in KNOWN_OPS:
        r.fail(E.UnknownOp, ("op",), f"'{op}' is not a fuel kernel op")
    inputs = _operands(r, b, "inputs")
    outputs = _operands(r, b, "outputs")
    names = [o.name for o in (*inputs, *outputs)]
    _check_names(r, b, names)
    _check_dtype_ties(r, inputs, outputs)
    inputs = tuple(_input_shape(r, b, i, o, op, names) for i, o in enumerate(inputs))
    _check_shape_rules(r, outputs, inputs)
    caps = _caps(r, b, inputs)
    cost = _cost(r, b, op, names, len(inputs))
    precision = _precision(r, b)
    determinism = r.get(b, (), "determinism", "str")
    if determinism not in DETERMINISM:
        r.fail(
            E.BadDeterminism,
            ("determinism",),
            f"determinism '{determinism}' is not one of {', '.join(DETERMINISM)}",
        )
    if precision.bit_stable and determinism == "nondeterministic":
        r.fail(E.BadDeterminism, ("determinism",), "a bit-stable kernel is not nondeterministic")
    entry = r.get(b, (), "entry_point", "str")
    try:
        check_entry_point(entry, allow)
    except E.FkcError as e:
        r.fail(type(e), ("entry_point",), e.message)
    args = _entry_args(r, b)
    canonical = json.dumps(b, sort_keys=True, separators=(",", ":"), default=str)
    return KernelContract(
        name,
        op,
        section.title,
        section.prose,
        inputs,
        outputs,
        caps,
        cost,
        precision,
        determinism,
        entry,
        args,
        canonical,
        provider,
        path,
        section.block.line,
        section.block.lines,
    )


def _operands(r: _Reader, b: Mapping[str, Any], key: str) -> tuple[Operand, ...]:
    items = r.get(b, (), key, "list")
    if not items:
        r.fail(E.WrongType, (key,), f"{key} must list at least one operand")
    is_input = key == "inputs"
    out = []
    for i, item in enumerate(items):
        at = (key, i)
        fields = INPUT_FIELDS if is_input else OUTPUT_FIELDS
        required = ("name", "dtypes") if is_input else ("name", "dtype_rule", "shape_rule")
        m = r.mapping(item, at, fields, required)
        name = r.get(m, at, "name", "str")
        if is_input:
            dtype = _dtype_list(r, m, at, "dtypes")
            layout = _layout(r, m, at)
            out.append(Operand(name, dtype, _rank(r, m, at), layout))
        else:
            dtype = _dtype_rule(r, m, at)
            rule = _shape_rule(r, m, at)
            out.append(Operand(name, dtype, _rank(r, m, at), shape_rule=rule))
    return tuple(out)


def _dtype_names(r: _Reader, items: Sequence[Any], at: FieldPath) -> tuple[str, ...]:
    found: list[str] = []
    for item in items:
        if not isinstance(item, str):
            r.fail(E.WrongType, at, f"a dtype is a string, got {item!r}")
        names = DTYPE_CLASSES.get(item, (item,) if item in NUMPY_DTYPES else None)
        if names is None:
            known = ", ".join([*NUMPY_DTYPES, *DTYPE_CLASSES])
            r.fail(E.UnknownDtype, at, f"unknown dtype or dtype class '{item}' (known: {known})")
        found += [n for n in names if n not in found]
    return tuple(found)


def _dtype_list(r: _Reader, m: Mapping[str, Any], at: FieldPath, key: str) -> DtypeSpec:
    value = m[key]
    where = (*at, key)
    if isinstance(value, str):
        call = _CALL.match(value.strip())
        if call and call.group("fn") == "same_as":
            return DtypeSpec(same_as=call.group("args").strip())
        return DtypeSpec(choices=_dtype_names(r, [value.strip()], where))
    if not isinstance(value, list) or not value:
        r.fail(E.WrongType, where, f"{key} is a dtype, a class, same_as(x) or a non-empty list")
    return DtypeSpec(choices=_dtype_names(r, value, where))


def _dtype_rule(r: _Reader, m: Mapping[str, Any], at: FieldPath) -> DtypeSpec:
    rule = r.get(m, at, "dtype_rule", "str").strip()
    where = (*at, "dtype_rule")
    call = _CALL.match(rule)
    if call and call.group("fn") == "same_as":
        return DtypeSpec(same_as=call.group("args").strip())
    if call and call.group("fn") == "any":
        items = [a.strip() for a in call.group("args").split(",") if a.strip()]
        if not items:
            r.fail(E.BadDtypeRule, where, "any() needs at least one dtype or class")
        return DtypeSpec(choices=_dtype_names(r, items, where))
    if rule in NUMPY_DTYPES:
        return DtypeSpec(choices=(rule,))
    r.fail(E.BadDtypeRule, where, f"dtype_rule '{rule}' is not same_as(x), any(...) or a dtype")


def _layout(r: _Reader, m: Mapping[str, Any], at: FieldPath) -> Layout:
    if "layout" not in m:
        return Layout(**LAYOUT_DEFAULT)
    where = (*at, "layout")
    flags = r.mapping(m["layout"], where, tuple(LAYOUT_VALUES), tuple(LAYOUT_VALUES))
    for key, allowed in LAYOUT_VALUES.items():
        if flags[key] not in allowed:
            r.fail(
                E.BadLayout,
                (*where, key),
                f"layout.{key} is one of {', '.join(allowed)}, got {flags[key]!r}",
            )
    lay = Layout(**flags)
    if lay.contiguous == "required" and (lay.strided != "rejected" or lay.broadcast != "rejected"):
        r.fail(E.BadLayout, where, "contiguous: required contradicts accepting strided/broadcast")
    if lay.broadcast != "rejected" and lay.strided != "accepted":
        r.fail(E.BadLayout, where, "a broadcast (stride-0) view is strided: accept strided too")
    return lay


def _rank(r: _Reader, m: Mapping[str, Any], at: FieldPath) -> RankSpec:
    value = m.get("rank", "any")
    if _is(value, "int") and value >= 0:
        return RankSpec(value, value)
    if isinstance(value, str):
        if value.strip() == "any":
            return RankSpec()
        rng = _RANK.match(value.strip())
        if rng:
            lo, hi = int(rng.group("lo")), rng.group("hi")
            if hi is None or int(hi) >= lo:
                return RankSpec(lo, None if hi is None else int(hi))
    r.fail(E.BadRank, (*at, "rank"), f"rank is an int >= 0, 'any' or 'lo..hi', got {value!r}")


def _shape_rule(r: _Reader, m: Mapping[str, Any], at: FieldPath) -> tuple[str, tuple[str, ...]]:
    rule = r.get(m, at, "shape_rule", "str").strip()
    call = _CALL.match(rule)
    arity = {"same_as": (1, 1), "broadcast": (1, 64), "matmul": (2, 2), "by_op": (1, 64)}
    if call and call.group("fn") in arity:
        args = tuple(a.strip() for a in call.group("args").split(",") if a.strip())
        lo, hi = arity[call.group("fn")]
        if lo <= len(args) <= hi:
            return call.group("fn"), args
    r.fail(
        E.BadShapeRule,
        (*at, "shape_rule"),
        f"shape_rule '{rule}' is same_as(x), broadcast(x, ...), matmul(a, b) or by_op(x, ...)",
    )


def _check_names(r: _Reader, b: Mapping[str, Any], names: list[str]) -> None:
    n_in = len(b["inputs"])
    for i, name in enumerate(names):
        at = ("inputs", i, "name") if i < n_in else ("outputs", i - n_in, "name")
        if not _IDENT.match(name):
            r.fail(E.BadOperandName, at, f"operand name '{name}' is not an identifier")
        if name in names[:i]:
            r.fail(E.BadOperandName, at, f"operand name '{name}' is used twice")


def _check_dtype_ties(r: _Reader, inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    ops = {o.name: o for o in (*inputs, *outputs)}
    for i, o in enumerate((*inputs, *outputs)):
        at = (
            ("inputs", i, "dtypes")
            if i < len(inputs)
            else ("outputs", i - len(inputs), "dtype_rule")
        )
        seen, cur = {o.name}, o
        while cur.dtype.same_as is not None:
            target = ops.get(cur.dtype.same_as)
            if target is None:
                r.fail(E.BadDtypeRule, at, f"same_as({cur.dtype.same_as}) names no operand")
            if target.name in seen:
                r.fail(E.BadDtypeRule, at, f"same_as cycle through '{target.name}'")
            seen.add(target.name)
            cur = target


def _input_shape(
    r: _Reader, b: Mapping[str, Any], i: int, base: Operand, op: str, names: list[str]
) -> Operand:
    """Compile the input's shape constraints (they may name any operand of the kernel)."""
    if "shape" not in b["inputs"][i]:
        return base
    at = ("inputs", i, "shape")
    items = b["inputs"][i]["shape"]
    if not isinstance(items, list):
        r.fail(E.WrongType, at, "shape is a list of constraints")
    resolve = make_resolver(op, names, len(b["inputs"]))
    checks = []
    for j, src in enumerate(items):
        if not isinstance(src, str):
            r.fail(E.WrongType, (*at, j), f"a shape constraint is a string, got {src!r}")
        try:
            checks.append(compile_constraint(src, i, names, resolve))
        except ExprError as e:
            r.fail(E.BadShapeConstraint, (*at, j), str(e))
    return replace(base, shape=tuple(checks))


def _check_shape_rules(r: _Reader, outputs: Sequence[Operand], inputs: Sequence[Operand]) -> None:
    known = {o.name for o in inputs}
    for i, o in enumerate(outputs):
        assert o.shape_rule is not None
        for name in o.shape_rule[1]:
            if name not in known:
                r.fail(
                    E.BadShapeRule,
                    ("outputs", i, "shape_rule"),
                    f"shape_rule names '{name}', which is not an input",
                )


def _caps(r: _Reader, b: Mapping[str, Any], inputs: Sequence[Operand]) -> CapsSpec:
    strided = any(o.layout is not None and o.layout.strided == "accepted" for o in inputs)
    derived = "handles_strided" if strided else "requires_contiguous"
    if "caps" not in b:
        return CapsSpec(derived)
    m = r.mapping(b["caps"], ("caps",), CAPS_FIELDS)
    awkward = m.get("awkward_layout", derived)
    if awkward not in AWKWARD_LAYOUT:
        r.fail(
            E.BadCaps,
            ("caps", "awkward_layout"),
            f"awkward_layout is one of {', '.join(AWKWARD_LAYOUT)}, got {awkward!r}",
        )
    if (awkward == "requires_contiguous") == strided:
        r.fail(
            E.BadCaps,
            ("caps", "awkward_layout"),
            f"awkward_layout '{awkward}' contradicts the inputs' layouts",
        )
    in_place = r.get(m, ("caps",), "in_place", "bool") if "in_place" in m else False
    return CapsSpec(awkward, in_place)


def _cost(r: _Reader, b: Mapping[str, Any], op: str, names: list[str], n_in: int) -> CostSpec:
    m = r.get(b, (), "cost", "map")
    r.mapping(m, ("cost",), COST_FIELDS)
    provenance = m.get("provenance")
    if provenance not in PROVENANCES:
        what = "lacks a provenance" if provenance is None else f"provenance {provenance!r}"
        r.fail(
            E.BadCostProvenance,
            ("cost", "provenance") if "provenance" in m else ("cost",),
            f"cost {what}: declare one of {', '.join(PROVENANCES)}",
        )
    if "class" not in m:
        r.fail(E.MissingField, ("cost",), "cost lacks the required field 'class'")
    if m["class"] not in COST_CLASSES:
        r.fail(
            E.UnknownCostClass,
            ("cost", "class"),
            f"cost class {m['class']!r} is not one of {', '.join(COST_CLASSES)}",
        )
    resolve = make_resolver(op, names, n_in)
    exprs: dict[str, Expr | None] = {}
    for key in ("flops", "bytes", "overhead_ns"):
        value = m.get(key)
        optional = key == "overhead_ns" and provenance == "judge_measured"
        if value is None and not optional:
            r.fail(
                E.IncompleteCost,
                ("cost", key) if key in m else ("cost",),
                f"cost.{key} is required ({provenance} cost)",
            )
        exprs[key] = None if value is None else _expr(r, ("cost", key), value, resolve)
    flops, nbytes = exprs["flops"], exprs["bytes"]
    assert flops is not None and nbytes is not None
    return CostSpec(provenance, m["class"], flops, nbytes, exprs["overhead_ns"])


def _expr(r: _Reader, at: FieldPath, value: Any, resolve: Any) -> Expr:
    if isinstance(value, str) and value.strip().lower() in PLACEHOLDERS:
        r.fail(E.IncompleteCost, at, f"'{value}' is a placeholder, not a cost expression")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        r.fail(E.WrongType, at, f"a cost expression is a string or a number, got {value!r}")
    try:
        return compile_expr(value, resolve)
    except ExprError as e:
        r.fail(E.UnknownCostSymbol if e.unknown else E.BadCostExpression, at, str(e))


def _precision(r: _Reader, b: Mapping[str, Any]) -> PrecisionSpec:
    at = ("precision",)
    m = r.mapping(r.get(b, (), "precision", "map"), at, PRECISION_FIELDS, ("bit_stable", "audited"))
    bit_stable = r.get(m, at, "bit_stable", "bool")
    audited = r.get(m, at, "audited", "bool")
    notes = r.get(m, at, "notes", "str") if m.get("notes") is not None else ""
    bounds: dict[str, Any] = {}
    measured = []
    for key in ("max_ulp", "max_relative", "max_absolute"):
        value = m.get(key)
        if value == MEASURED and key in MEASURED_CLAIMS:
            measured.append(key)
            bounds[key] = None
            continue
        kind = "int" if key == "max_ulp" else "num"
        ok = value is None or (_is(value, kind) and math.isfinite(value) and value >= 0)
        if not ok:
            also = f" or `{MEASURED}`" if key in MEASURED_CLAIMS else ""
            what = _TYPE_NAMES[kind].split()[-1]
            r.fail(
                E.BadPrecisionBound,
                (*at, key),
                f"precision.{key} is a non-negative {what}{also}, got {value!r}",
            )
        bounds[key] = value
    claims = bit_stable or bool(measured) or any(v is not None for v in bounds.values())
    if not audited and claims:
        r.fail(
            E.IncoherentPrecision,
            (*at, "audited"),
            "audited: false claims nothing; drop the bounds or audit them",
        )
    if audited and not notes:
        r.fail(
            E.IncoherentPrecision,
            (*at, "audited"),
            "an audited claim says how it was established in notes",
        )
    return PrecisionSpec(
        bit_stable,
        bounds["max_ulp"],
        None if bounds["max_relative"] is None else float(bounds["max_relative"]),
        None if bounds["max_absolute"] is None else float(bounds["max_absolute"]),
        audited,
        notes,
        tuple(measured),
    )


ENTRY_ARGS_DEPTH = 4
"""How deep entry_args values nest (a list of lists is depth 2): data, not a program."""


def _not_data(value: Any, at: FieldPath, depth: int = 1) -> tuple[FieldPath, str] | None:
    """Where and why `value` is not JSON-like data (None when it is): scalars (str, int,
    float, bool, null), lists and string-keyed mappings of those, at most ENTRY_ARGS_DEPTH
    deep. YAML's other safe types (timestamps, binary, sets, ordered pairs) are refused."""
    if value is None or isinstance(value, str | int | float | bool):
        return None
    if not isinstance(value, list | dict):
        return at, f"is a {type(value).__name__}, not data (str, number, bool, null, list, mapping)"
    if depth > ENTRY_ARGS_DEPTH:
        return at, f"nests deeper than {ENTRY_ARGS_DEPTH} levels"
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, str):
            return at, f"has a key that is not a string: {key!r}"
        bad = _not_data(item, (*at, key), depth + 1)
        if bad is not None:
            return bad
    return None


def _entry_args(r: _Reader, b: Mapping[str, Any]) -> dict[str, Any] | None:
    """The factory arguments: a mapping from identifiers to data (see `_not_data`)."""
    if "entry_args" not in b:
        return None
    args = b["entry_args"]
    if not isinstance(args, dict):
        r.fail(E.BadEntryArgs, ("entry_args",), "entry_args is a mapping (use {} for none)")
    for key, value in args.items():
        if not isinstance(key, str) or not _IDENT.match(key):
            r.fail(E.BadEntryArgs, ("entry_args", str(key)), f"'{key}' is not an identifier")
        if key == "dtypes":
            r.fail(E.BadEntryArgs, ("entry_args", key), "a factory's `dtypes` is the dtype key")
        bad = _not_data(value, ("entry_args", key))
        if bad is not None:
            at, why = bad
            r.fail(E.BadEntryArgs, at, f"{'.'.join(map(str, at))} {why}")
    return dict(args)
