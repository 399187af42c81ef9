"""A generated kernel's source is a function of its body: regenerating it from the body gives
back the text the lowering wrote, for every kernel the lowering tests produce, and any edit to
the source or the body is caught (`lowering.kernel_source`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import StringAttr

from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
from lowering.kernel_source import KernelSourceError, check_kernel_sources, expected_source
from lowering.triton.convert_fuel_to_triton import ConvertFuelToTritonPass
from runtime.module import FuelModule

LIT = Path(__file__).parents[1] / "filecheck" / "passes"
PASSES = {
    "c": (ConvertFuelToCPass(min_ops=1, cost_model=False), "convert-fuel-to-c.mlir"),
    "triton": (ConvertFuelToTritonPass(), "convert-fuel-to-triton.mlir"),
}


def lowered(which: str) -> FuelModule:
    pass_, name = PASSES[which]
    module = FuelModule.parse((LIT / name).read_text(), name)
    pass_.apply(Context(), module.op)
    module.op.verify()
    return module


def kernels(module: FuelModule) -> list:
    return [op for op in module.op.ops if op.name in ("fuel.c_kernel", "fuel.triton_kernel")]


@pytest.mark.parametrize("which", PASSES)
def test_every_lowered_kernel_regenerates_exactly(which: str) -> None:
    module = lowered(which)
    assert check_kernel_sources(module.op, "m") == len(kernels(module)) >= 4


@pytest.mark.parametrize("which", PASSES)
def test_the_printed_ir_regenerates_exactly(which: str) -> None:
    """What a bundle or a file holds is the printed IR: parsing it back loses nothing."""
    module = lowered(which)
    again = FuelModule.parse(str(module.op), "m")
    assert check_kernel_sources(again.op, "m") == len(kernels(module))


@pytest.mark.parametrize("which", PASSES)
def test_an_edited_source_is_caught(which: str) -> None:
    module = lowered(which)
    k = kernels(module)[0]
    k.source = StringAttr(k.source.data.replace("v1", "v0", 1))
    with pytest.raises(KernelSourceError, match=r"m: .*not what this fuel generates"):
        check_kernel_sources(module.op, "m")


@pytest.mark.parametrize("which", PASSES)
def test_an_edited_body_is_caught(which: str) -> None:
    """The body decides the source: a body changed after lowering (here one op's operands
    swapped) no longer matches the text, so the kernel is refused, not run with either."""
    module = lowered(which)
    k = kernels(module)[0]
    op = next(
        o for o in k.body.block.ops if len(o.operands) == 2 and o.operands[0] != o.operands[1]
    )
    before = expected_source(k)
    op.operands = [op.operands[1], op.operands[0]]
    assert expected_source(k) != before
    with pytest.raises(KernelSourceError, match="not what this fuel generates"):
        check_kernel_sources(module.op, "m")


def test_a_kernel_without_body_is_refused() -> None:
    module = lowered("c")
    k = kernels(module)[0]
    k.regions[0].detach_block(0)
    with pytest.raises(KernelSourceError, match="no body to generate its source from"):
        check_kernel_sources(module.op, "m")
