"""`#fuel.*` attributes: where an op runs and which kernel the picker chose for it.

These are how decisions become visible in the IR ("the plan IS the graph"). The picker stamps
them on kernel-bearing ops as discardable attributes:

    %y = fuel.matmul %x, %w {fuel.device = #fuel.device<"cpu">,
                             fuel.kernel = #fuel.kernel<"matmul", [f32, f32, f32], "cpu",
                                                        "numpy", "9f3c0a1b22d4e5f6">}
        : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    NoneAttr,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Data, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition, param_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fuel_dialect.dtypes import dtype_name, element_type

KERNEL_ATTR = "fuel.kernel"
"""Discardable attribute name under which the picker records the chosen kernel."""
DEVICE_ATTR = "fuel.device"
"""Discardable attribute name under which the picker records the op's device."""
NAME_ATTR = "fuel.name"
"""Argument / result attribute naming a graph input or output."""
DONATE_ATTR = "fuel.donate"
"""Argument attribute (unit): the run may write the input's buffer. An op updating it where
nothing reads the old value afterwards (a KV-cache `fuel.index_copy`) writes into the caller's
array in place, and that array is handed back, uncopied, as the output holding the update."""
WEIGHTS_ATTR = "fuel.weights"
"""Module attribute: the safetensors file (relative to the IR file) holding the weights."""
WEIGHTS_SHA256_ATTR = "fuel.weights_sha256"
"""Module attribute: the sha256 (hex) of the weights file `fuel.weights` names, as written
beside this IR; a loader refuses a weights file with another hash (a torn or mixed pair)."""

_BACKEND_RE = re.compile(r"[a-z][a-z0-9_]*")
_DEVICE_RE = re.compile(r"(cpu|[a-z][a-z0-9_]*:\d+)")
_HEX_RE = re.compile(r"[0-9a-fA-F]+")


class _StringData(Data[str]):
    """A string-valued attribute printed as `#fuel.<name><"value">`."""

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> str:
        with parser.in_angle_brackets():
            return parser.parse_str_literal()

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.data)


@irdl_attr_definition
class BackendAttr(_StringData):
    """A kernel backend: `cpu`, `cuda`, ... Example: `#fuel.backend<"cuda">`."""

    name = "fuel.backend"

    def verify(self) -> None:
        if not _BACKEND_RE.fullmatch(self.data):
            raise VerifyException(f"invalid backend name '{self.data}' (expected e.g. \"cpu\")")


@irdl_attr_definition
class DeviceAttr(_StringData):
    """A device location: `cpu` or `<backend>:<ordinal>`. Example: `#fuel.device<"cuda:0">`."""

    name = "fuel.device"

    def verify(self) -> None:
        if not _DEVICE_RE.fullmatch(self.data):
            raise VerifyException(
                f'invalid device \'{self.data}\' (expected "cpu" or "<backend>:<n>")'
            )

    @property
    def backend(self) -> str:
        return self.data.split(":")[0]


def _opt_number(attr: Attribute) -> float | int | None:
    if isinstance(attr, NoneAttr):
        return None
    assert isinstance(attr, IntegerAttr | FloatAttr)
    return attr.value.data


def _float_literal(v: float) -> str:
    """Shortest round-tripping spelling that MLIR's float-literal grammar accepts."""
    text = repr(v)
    return text if "." in text or "e" not in text else text.replace("e", ".0e", 1)


@irdl_attr_definition
class PrecisionAttr(ParametrizedAttribute):
    """A precision guarantee: bit stability and ULP / relative / absolute error bounds.

    Syntax: `#fuel.precision<` (`unaudited` | `none` | claim (`,` claim)*) `>` where a claim is
    `bit_stable`, `ulp = N`, `rel = X` or `abs = X`.

    Examples: `#fuel.precision<bit_stable, ulp = 0>`, `#fuel.precision<rel = 1.0e-05>`,
    `#fuel.precision<unaudited>`.
    """

    name = "fuel.precision"

    bit_stable: BoolAttr = param_def()
    max_ulp: IntegerAttr | NoneAttr = param_def()
    max_relative: FloatAttr | NoneAttr = param_def()
    max_absolute: FloatAttr | NoneAttr = param_def()
    audited: BoolAttr = param_def()

    @staticmethod
    def get(
        bit_stable: bool = False,
        max_ulp: int | None = None,
        max_relative: float | None = None,
        max_absolute: float | None = None,
        audited: bool = True,
    ) -> PrecisionAttr:
        def num(v: float | None) -> Attribute:
            return NoneAttr() if v is None else FloatAttr(v, f64)

        ulp = NoneAttr() if max_ulp is None else IntegerAttr(max_ulp, i64)
        return PrecisionAttr(
            BoolAttr.from_bool(bit_stable),
            ulp,
            num(max_relative),
            num(max_absolute),
            BoolAttr.from_bool(audited),
        )

    def verify(self) -> None:
        bit_stable, ulp, rel, abs_, audited = self.values()
        for key, v in (("ulp", ulp), ("rel", rel), ("abs", abs_)):
            if v is not None and not v >= 0:
                raise VerifyException(f"invalid #fuel.precision: {key} must be >= 0, got {v}")
        if not audited and (bit_stable or (ulp, rel, abs_) != (None, None, None)):
            raise VerifyException("invalid #fuel.precision: an unaudited guarantee makes no claims")

    def values(self) -> tuple[bool, int | None, float | None, float | None, bool]:
        ulp = _opt_number(self.max_ulp)
        return (
            bool(self.bit_stable.value.data),
            None if ulp is None else int(ulp),
            _opt_number(self.max_relative),
            _opt_number(self.max_absolute),
            bool(self.audited.value.data),
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        fields: dict[str, float | int | bool] = {}
        audited = True

        def claim() -> None:
            nonlocal audited
            pos = parser.pos
            word = parser.parse_identifier()
            if word in ("bit_stable", "unaudited", "none"):
                if word == "bit_stable":
                    fields["bit_stable"] = True
                audited = audited and word != "unaudited"
                return
            if word not in ("ulp", "rel", "abs"):
                parser.raise_error(f"unknown precision claim '{word}'", pos, parser.pos)
            parser.parse_punctuation("=")
            fields[word] = parser.parse_integer() if word == "ulp" else parser.parse_float()

        with parser.in_angle_brackets():
            parser.parse_comma_separated_list(parser.Delimiter.NONE, claim)
        p = cls.get(
            bool(fields.get("bit_stable", False)),
            fields.get("ulp"),  # type: ignore[arg-type]
            fields.get("rel"),  # type: ignore[arg-type]
            fields.get("abs"),  # type: ignore[arg-type]
            audited,
        )
        return p.parameters

    def print_parameters(self, printer: Printer) -> None:
        bit_stable, ulp, rel, abs_, audited = self.values()
        parts = ["bit_stable"] if bit_stable else []
        if ulp is not None:
            parts.append(f"ulp = {ulp}")
        for key, v in (("rel", rel), ("abs", abs_)):
            if v is not None:
                parts.append(f"{key} = {_float_literal(float(v))}")
        if not audited:
            parts = ["unaudited"]
        printer.print_string(f"<{', '.join(parts) or 'none'}>")


@irdl_attr_definition
class KernelRefAttr(ParametrizedAttribute):
    """A chosen kernel: its binding-table key, provenance tag and revision hash.

    Syntax: `#fuel.kernel<"op", [dtypes...], "backend", "kernel_source", "revision-hex">`.
    Example: `#fuel.kernel<"add", [f32, f32, f32], "cpu", "numpy", "1f2e3d4c5b6a7988">`.
    The dtypes list one element type per operand, inputs then outputs.
    """

    name = "fuel.kernel"

    op: StringAttr = param_def()
    dtypes: ArrayAttr[Attribute] = param_def()
    backend: StringAttr = param_def()
    kernel_source: StringAttr = param_def()
    revision: StringAttr = param_def()

    @staticmethod
    def get(
        op: str, dtypes: Sequence[str], backend: str, kernel_source: str, revision: int
    ) -> KernelRefAttr:
        return KernelRefAttr(
            StringAttr(op),
            ArrayAttr([element_type(d) for d in dtypes]),
            StringAttr(backend),
            StringAttr(kernel_source),
            StringAttr(f"{revision:016x}"),
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        pos = parser.pos
        params = parser.parse_paramattr_parameters()
        if len(params) != 5:
            parser.raise_error(
                "#fuel.kernel takes 5 parameters (op, dtypes, backend, kernel_source, revision), "
                f"got {len(params)}",
                pos,
                parser.pos,
            )
        return params

    def key(self) -> tuple[str, tuple[str, ...], str]:
        return (self.op.data, tuple(dtype_name(t) for t in self.dtypes), self.backend.data)

    def revision_int(self) -> int:
        return int(self.revision.data, 16)

    def verify(self) -> None:
        rev, backend = self.revision.data, self.backend.data
        if not _HEX_RE.fullmatch(rev):
            raise VerifyException(f"invalid #fuel.kernel: revision '{rev}' is not hex")
        if not _BACKEND_RE.fullmatch(backend):
            raise VerifyException(f"invalid #fuel.kernel: invalid backend name '{backend}'")
        try:
            for t in self.dtypes:
                dtype_name(t)
        except ValueError as e:
            raise VerifyException(f"invalid #fuel.kernel: {e}") from None
