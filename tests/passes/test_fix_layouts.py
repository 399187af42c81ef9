"""fuel-fix-layouts: the check on a registered strided view, no change on today's IR."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

import passes.fix_layouts as fl
from frontends.builder import GraphBuilder
from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from passes.fix_layouts import FixLayoutsPass, check_layouts
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.module import FuelModule


def stamped(source: str) -> FuelModule:
    """neg -> transpose -> reshape -> transpose, the last one stamped with `source`."""
    g = GraphBuilder()
    x = g.input("x", (4, 8), "f32")
    t = g.transpose(g.neg(x), (1, 0))
    r = g.reshape(t, (4, 8))
    out = g.transpose(r, (1, 0))
    entry = next(
        e
        for e in global_bindings().lookup_alternatives("transpose", ("f32",) * 2, "cpu")
        if e.kernel_source == source
    )
    out.owner.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        "transpose", ("f32", "f32"), "cpu", source, entry.revision_hash
    )
    return g.build([out])


@pytest.mark.parametrize("source", ["numpy", "numpy-contig"])
def test_no_strided_producer_today_means_no_change(source: str) -> None:
    m = stamped(source)
    before = str(m.op)
    FixLayoutsPass().apply(Context(), m.op)
    FixLayoutsPass().apply(Context(), m.op)  # idempotent: a check
    assert str(m.op) == before
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(Executor(m).run({"x": x})["out"], x.T.reshape(4, 8).T * -1)


def test_strided_view_feeding_contiguous_only_kernel_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were transpose a strided view, the numpy-contig transpose reading it (through a
    reshape) would need a contiguize: the check names it."""
    monkeypatch.setattr(fl, "STRIDED_VIEW_OPS", frozenset({"fuel.transpose"}))
    with pytest.raises(PassFailedException, match="numpy-contig.*operand 0.*'fuel.transpose'"):
        check_layouts(stamped("numpy-contig").op)


def test_strided_capable_kernel_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fl, "STRIDED_VIEW_OPS", frozenset({"fuel.transpose"}))
    check_layouts(stamped("numpy").op)


def test_unknown_stamp_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fl, "STRIDED_VIEW_OPS", frozenset({"fuel.transpose"}))
    m = stamped("numpy-contig")
    ref = m.op.body.block.ops.first.body.block.ops.last.operands[0].owner  # type: ignore[union-attr]
    ref.attributes[KERNEL_ATTR] = KernelRefAttr.get("transpose", ("f32", "f32"), "cpu", "gone", 0)
    check_layouts(m.op)
