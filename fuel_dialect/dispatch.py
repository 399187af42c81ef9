"""Dispatch decisions in the IR: candidate records, pins and cross-device copies.

The picker writes its work into the module ("the plan IS the graph"):

    %y = fuel.matmul %x, %w {
        fuel.alternatives = [#fuel.candidate<"numpy", backend "cpu", device "cpu",
                                             rev "1f2e3d4c5b6a7988", l1 = 1200.0,
                                             judge = 980.0, xfer = 0.0, verdict "kept">, ...],
        fuel.device = #fuel.device<"cpu">,
        fuel.kernel = #fuel.kernel<"matmul", [f32, f32, f32], "cpu", "numpy", "1f2e…">}
    %z = fuel.copy %y to "cuda:0" : tensor<4x16xf32>

`fuel.pin = #fuel.device<...>` on an op is a user's hard placement: the picker never moves it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import FloatAttr, NoneAttr, StringAttr, TensorType, f64
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    param_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure

from fuel_dialect.attrs import DEVICE_ATTR, DeviceAttr, _float_literal
from fuel_dialect.base import check_ranked

ALTERNATIVES_ATTR = "fuel.alternatives"
"""Discardable attribute: the ranked `#fuel.candidate` list of a decision point."""
PIN_ATTR = "fuel.pin"
"""Discardable attribute: a user's hard device placement for an op."""


def placed_device(op: Operation) -> str | None:
    """Where an op is placed: the picker's `fuel.device` stamp, else the user's `fuel.pin`."""
    for name in (DEVICE_ATTR, PIN_ATTR):
        attr = op.attributes.get(name)
        if isinstance(attr, DeviceAttr):
            return attr.data
    return None


@irdl_attr_definition
class CandidateAttr(ParametrizedAttribute):
    """One alternative of a decision point, as the ranker saw it.

    Holds the kernel's provenance tag, backend, device and revision, its Layer-1 time, the
    Judge's measured time (or `none`), the inbound transfer time (ns) and the filter verdict
    (`kept`, `rejected:<filter>`, ...). The op and dtypes are those of the op carrying it.

    Example: `#fuel.candidate<"numpy", backend "cpu", device "cpu", rev "00000000000000ff",
    l1 = 1200.0, judge = none, xfer = 0.0, verdict "kept">`
    """

    name = "fuel.candidate"

    kernel_source: StringAttr = param_def()
    backend: StringAttr = param_def()
    device: StringAttr = param_def()
    revision: StringAttr = param_def()
    layer1_ns: FloatAttr = param_def()
    judge_ns: FloatAttr | NoneAttr = param_def()
    transfer_ns: FloatAttr = param_def()
    verdict: StringAttr = param_def()

    @staticmethod
    def get(
        kernel_source: str,
        backend: str,
        device: str,
        revision: int,
        layer1_ns: float,
        judge_ns: float | None,
        transfer_ns: float,
        verdict: str,
    ) -> CandidateAttr:
        judge: Attribute = NoneAttr() if judge_ns is None else FloatAttr(judge_ns, f64)
        return CandidateAttr(
            StringAttr(kernel_source),
            StringAttr(backend),
            StringAttr(device),
            StringAttr(f"{revision:016x}"),
            FloatAttr(layer1_ns, f64),
            judge,
            FloatAttr(transfer_ns, f64),
            StringAttr(verdict),
        )

    @property
    def judge_value(self) -> float | None:
        return None if isinstance(self.judge_ns, NoneAttr) else self.judge_ns.value.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def kw_str(word: str) -> str:
            parser.parse_punctuation(",")
            parser.parse_keyword(word)
            return parser.parse_str_literal()

        def kw_num(word: str, optional: bool = False) -> float | None:
            parser.parse_punctuation(",")
            parser.parse_keyword(word)
            parser.parse_punctuation("=")
            if optional and parser.parse_optional_keyword("none") is not None:
                return None
            if parser.parse_optional_keyword("inf") is not None:
                return math.inf  # an infeasible candidate's price
            return parser.parse_number()  # type: ignore[return-value]

        with parser.in_angle_brackets():
            source = parser.parse_str_literal()
            backend, device, rev = kw_str("backend"), kw_str("device"), kw_str("rev")
            l1, judge, xfer = kw_num("l1"), kw_num("judge", True), kw_num("xfer")
            verdict = kw_str("verdict")
        try:
            revision = int(rev, 16)
        except ValueError:
            parser.raise_error(f"candidate revision '{rev}' is not hexadecimal")
        return cls.get(
            source, backend, device, revision, float(l1 or 0), judge, float(xfer or 0), verdict
        ).parameters

    @staticmethod
    def _num(v: float) -> str:
        return "inf" if v == math.inf else _float_literal(v)

    def print_parameters(self, printer: Printer) -> None:
        judge = self.judge_value
        printer.print_string(
            f'<"{self.kernel_source.data}", backend "{self.backend.data}", device '
            f'"{self.device.data}", rev "{self.revision.data}", '
            f"l1 = {self._num(self.layer1_ns.value.data)}, judge = "
            f"{'none' if judge is None else self._num(judge)}, "
            f'xfer = {self._num(self.transfer_ns.value.data)}, verdict "{self.verdict.data}">'
        )

    def verify(self) -> None:
        DeviceAttr(self.device.data).verify()


@irdl_op_definition
class CopyOp(IRDLOperation):
    """Move a tensor to another device (the picker inserts these on cross-device edges).

    Example: `%y = fuel.copy %x to "cuda:0" : tensor<4x8xf32>`
    """

    name = "fuel.copy"
    T: ClassVar[VarConstraint[TensorType]] = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    target = prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = "$input `to` $target attr-dict `:` type($result)"

    def __init__(self, value: SSAValue, target: str):
        super().__init__(
            operands=[value], result_types=[value.type], properties={"target": StringAttr(target)}
        )

    def verify_(self) -> None:
        check_ranked(self)
        DeviceAttr(self.target.data)  # validates the device name
