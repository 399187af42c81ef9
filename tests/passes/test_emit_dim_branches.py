"""`fuel-emit-dim-branches`: where the best kernel changes across a symbol's range, a branch
gated on the dim; a run's specialisation takes the arm its size selects."""

from __future__ import annotations

import numpy as np

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from fuel_dialect.branch import BranchOp
from passes.emit_dim_branches import EmitDimBranchesPass
from passes.environment import PassEnvironment, pass_context
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate
from runtime.executor import Executor
from runtime.module import FuelModule
from runtime.precision import PrecisionGuarantee
from runtime.shape_specialize import specialize
from runtime.topology import SystemTopology

ROWS = """
func.func @main(%x: tensor<?x64xf32> {fuel.name = "x", fuel.dim_names = ["seq"]})
    -> tensor<?x64xf32> attributes {fuel.dims = {seq = #fuel.dim<1, 256>}} {
  %y = fuel.exp %x : tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}
"""


def two_exps(crossover_rows: int) -> KernelBindingTable:
    """`exp` twice on the cpu: "short" costs 1 us per row, "long" a fixed `crossover_rows`
    us (and half a ns): "short" wins up to `crossover_rows` rows, "long" above."""
    t = KernelBindingTable()
    costs = {
        "short": lambda s, d, p: CostEstimate(overhead_ns=1000.0 * s[0][0]),
        "long": lambda s, d, p: CostEstimate(overhead_ns=1000.0 * crossover_rows + 0.5),
    }
    for source, cost in costs.items():

        def k(ins, outs, params):  # noqa: ANN001, ANN202  a distinct kernel per source
            np.exp(ins[0], out=outs[0])

        t.register(
            "exp",
            ("f32", "f32"),
            "cpu",
            k,
            cost=cost,
            kernel_source=source,
            precision=PrecisionGuarantee(bit_stable=True, max_ulp=1),
        )
    return t


def source(module: FuelModule) -> str:
    (op,) = [o for o in module.entry.body.block.ops if o.name == "fuel.exp"]
    stamp = op.attributes[KERNEL_ATTR]
    assert isinstance(stamp, KernelRefAttr)
    return stamp.kernel_source.data


def test_a_variant_gated_on_rows_and_the_arm_each_shape_takes() -> None:
    table = two_exps(crossover_rows=10)
    m = FuelModule.parse(ROWS)
    ctx = pass_context(PassEnvironment(bindings=table, topology=SystemTopology.cpu_only()))
    EmitDimBranchesPass(judge="none").apply(ctx, m.op)
    (branch,) = [op for op in m.op.walk() if isinstance(op, BranchOp)]
    assert branch.kind.data == "variant" and branch.gate(1) == "dim($0, 0) <= 10"
    EmitDimBranchesPass(judge="none").apply(ctx, m.op)  # idempotent
    assert len([op for op in m.op.walk() if isinstance(op, BranchOp)]) == 1
    for rows, want in ((1, "short"), (10, "short"), (11, "long"), (256, "long")):
        spec = specialize(m, {"seq": rows})
        assert not [op for op in spec.op.walk() if isinstance(op, BranchOp)]
        assert source(spec) == want
        x = np.linspace(-1, 1, rows * 64, dtype=np.float32).reshape(rows, 64)
        got = Executor(spec, table=table).run({"x": x})["out0"]
        np.testing.assert_allclose(got, np.exp(x.astype(np.float64)), rtol=1e-6)


def test_one_winner_across_the_range_is_left_alone() -> None:
    m = FuelModule.parse(ROWS)
    ctx = pass_context(PassEnvironment(bindings=two_exps(crossover_rows=1000)))
    EmitDimBranchesPass(judge="none", topology="").apply(ctx, m.op)
    assert not [op for op in m.op.walk() if isinstance(op, BranchOp)]
