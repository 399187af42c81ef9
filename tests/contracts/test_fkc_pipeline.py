"""The import pipeline: fan-out, caps projection, precision lowering, revision hash, cost,
glob merging, provenance and registration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.binding_table import KernelBindingTable, KernelCaps
from runtime.contracts import (
    BuiltKernel,
    UnverifiedClaimWarning,
    contract_source,
    import_glob,
    load_contracts,
)
from runtime.contracts import errors as E
from runtime.contracts.lower import fan_out, lower, project_caps
from runtime.cost import CostEstimate
from runtime.precision import UNAUDITED, PrecisionGuarantee

pytestmark = pytest.mark.filterwarnings("ignore::runtime.contracts.UnverifiedClaimWarning")

Write = Callable[..., Path]


def _import(path: Path | list[Path], **kw: object) -> tuple[KernelBindingTable, object]:
    table = KernelBindingTable()
    kw.setdefault("ledger", None)
    return table, import_glob(path, table, **kw)  # type: ignore[arg-type]


def _contract(base: str, write: Write, *edits: tuple[str, str]):  # noqa: ANN202
    for old, new in edits:
        assert old in base, old
        base = base.replace(old, new, 1)
    return load_contracts(write(base))[1][0]


def test_fan_out_follows_written_order_and_ties(base: str, write: Write) -> None:
    c = _contract(base, write, ("dtypes: [f32, f64]", "dtypes: [bf16, float]"))
    assert fan_out(c) == [("bf16", "bf16"), ("f64", "f64"), ("f32", "f32"), ("f16", "f16")]


def test_fan_out_of_free_outputs_and_fixed_dtypes(base: str, write: Write) -> None:
    c = _contract(
        base,
        write,
        ("op: exp", "op: cast"),
        ("dtypes: [f32, f64]", "dtypes: [i32]"),
        ("dtype_rule: same_as(x)", "dtype_rule: any(f16, bf16)"),
    )
    assert fan_out(c) == [("i32", "f16"), ("i32", "bf16")]
    c = _contract(base, write, ("op: exp", "op: eq"), ("dtype_rule: same_as(x)", "dtype_rule: i1"))
    assert fan_out(c) == [("f32", "i1"), ("f64", "i1")]


LAYOUT = "{contiguous: accepted, strided: accepted, broadcast: accepted, offset: accepted}"


@pytest.mark.parametrize(
    ("layout", "caps"),
    [
        (LAYOUT, KernelCaps(strided_input=True)),
        (
            "{contiguous: accepted, strided: accepted, broadcast: rejected, offset: accepted}",
            KernelCaps(strided_input=False),
        ),
        (
            "{contiguous: required, strided: rejected, broadcast: rejected, offset: rejected}",
            KernelCaps(strided_input=False),
        ),
        (
            "{contiguous: accepted, strided: accepted, broadcast: required, offset: accepted}",
            KernelCaps(strided_input=True, requires_broadcast=True),
        ),
    ],
)
def test_caps_projection(base: str, write: Write, layout: str, caps: KernelCaps) -> None:
    edits = [("layout: " + LAYOUT, "layout: " + layout)]
    if "required, strided" in layout:
        edits.append(("awkward_layout: handles_strided", "awkward_layout: requires_contiguous"))
    assert project_caps(_contract(base, write, *edits)) == caps


def test_caps_projection_ands_across_inputs(base: str, write: Write) -> None:
    second = "  - name: y\n    dtypes: same_as(x)\n    layout: " + LAYOUT.replace(
        "broadcast: accepted", "broadcast: rejected"
    )
    c = _contract(base, write, ("op: exp", "op: add"), ("outputs:", second + "\noutputs:"))
    assert project_caps(c) == KernelCaps(strided_input=False)


def test_precision_lowering(base: str, write: Write) -> None:
    _, res = _import(write(base.replace("max_ulp: 2", "max_ulp: 2\n  max_relative: 1.0e-6")))
    assert res.kernels[0].precision == PrecisionGuarantee(
        bit_stable=True, max_ulp=2, max_relative=1e-6
    )
    unaudited = base.replace(
        "  bit_stable: true\n  max_ulp: 2\n  audited: true", "  bit_stable: false\n  audited: false"
    )
    table, res = _import(write(unaudited, "u.fkc.md"))
    assert res.kernels[0].precision is UNAUDITED and not res.downgraded
    assert table.lookup("exp", ("f32", "f32"), "cpu").precision.is_unaudited()
    none = base.replace("  bit_stable: true\n  max_ulp: 2\n", "  bit_stable: false\n")
    table, res = _import(write(none, "n.fkc.md"))
    got = table.lookup("exp", ("f32", "f32"), "cpu").precision
    assert got.audited and got.makes_no_static_claim() and got.notes == "computed one step wider"
    assert not res.downgraded  # nothing machine-checkable: nothing to prove


REFORMATTED = """```fkc
# the same contract, reformatted: key order, flow/block style, quoting, comments
kernel: "test_exp"
op: 'exp'   # a comment
entry_args:
  compute: f64
  ufunc: exp
entry_point: runtime.kernels.cpu.contracts.factories:unary
determinism: same_hardware_bitwise
precision: {notes: computed one step wider, audited: true, max_ulp: 2, bit_stable: true}
cost: {overhead_ns: 800, bytes: x.bytes + out.bytes, flops: 10 * n, class: cheap_elementwise,
       provenance: declared}
caps: {awkward_layout: handles_strided}
outputs: [{name: out, shape_rule: same_as(x), dtype_rule: same_as(x)}]
inputs:
- shape:
  - same_as=out
  rank: any
  layout:
    offset: accepted
    broadcast: accepted
    strided: accepted
    contiguous: accepted
  dtypes:
  - f32
  - f64
  name: x
```
"""


def _revisions(path: Path) -> list[int]:
    _, contracts = load_contracts(path)
    return [k.revision for c in contracts for k in lower(c)]


def test_revision_ignores_formatting_comments_and_prose(base: str, write: Write) -> None:
    original = _revisions(write(base))
    block = base[base.index("```fkc") :]
    reformatted = base.replace(block, REFORMATTED).replace("rounded once.", "New prose.")
    assert _revisions(write(reformatted, "r.fkc.md")) == original
    assert len(set(original)) == 2  # f32 and f64 run different code (unary_wide vs unary)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("max_ulp: 2", "max_ulp: 3"),
        ("revision_base: t1", "revision_base: t2"),
        ("flops: 10 * n", "flops: 11 * n"),
        ("compute: f64", "compute: self"),
    ],
)
def test_revision_changes_with_meaning(base: str, write: Write, old: str, new: str) -> None:
    original = _revisions(write(base))
    changed = _revisions(write(base.replace(old, new), "c.fkc.md"))
    assert all(a != b for a, b in zip(original, changed, strict=True))


def test_cost_is_compiled_once_into_one_cost_fn(base: str, write: Write) -> None:
    table, res = _import(write(base))
    f32 = table.lookup("exp", ("f32", "f32"), "cpu")
    f64 = table.lookup("exp", ("f64", "f64"), "cpu")
    assert f32.cost is f64.cost is res.kernels[0].cost
    assert f32.cost([(3, 5), (3, 5)], ["f32", "f32"], {}) == CostEstimate(150, 120, 800)
    assert f64.cost([(7,), (7,)], ["f64", "f64"], {}) == CostEstimate(70, 112, 800)


def test_judge_measured_cost_may_leave_overhead_open(base: str, write: Write) -> None:
    text = base.replace("provenance: declared", "provenance: judge_measured").replace(
        "overhead_ns: 800", "overhead_ns: ~"
    )
    table, _ = _import(write(text))
    cost = table.lookup("exp", ("f32", "f32"), "cpu").cost
    assert cost([(4,), (4,)], ["f32", "f32"], {}) == CostEstimate(40, 32, 0)


def test_import_glob_merges_files_of_one_provider(base: str, tmp_path: Path) -> None:
    (tmp_path / "b.fkc.md").write_text(base)
    log = base.replace("test_exp", "test_log").replace("op: exp", "op: log")
    (tmp_path / "a.fkc.md").write_text(log.replace("ufunc: exp", "ufunc: log"))
    for spec in (
        tmp_path,
        str(tmp_path / "*.fkc.md"),
        [tmp_path / "b.fkc.md", tmp_path / "a.fkc.md"],
    ):
        table, res = _import(spec)  # type: ignore[arg-type]
        assert [c.name for c in res.contracts] == ["test_log", "test_exp"]  # sorted by path
        assert {k[0] for k in table.iter_keys()} == {"exp", "log"}


def test_failed_import_leaves_the_table_untouched(base: str, tmp_path: Path) -> None:
    (tmp_path / "a.fkc.md").write_text(base)
    (tmp_path / "b.fkc.md").write_text(
        base.replace("test_exp", "t2").replace("op: exp", "op: nope")
    )
    table = KernelBindingTable()
    with pytest.raises(E.UnknownOp):
        import_glob(tmp_path, table, ledger=None)
    assert len(table) == 0


def test_importing_twice_is_a_duplicate(base: str, write: Write) -> None:
    path = write(base)
    table, _ = _import(path)
    with pytest.raises(E.DuplicateRegistration):
        import_glob(path, table, ledger=None)
    assert len(table) == 2


def test_provenance_of_entries(base: str, write: Write) -> None:
    path = write(base)
    table, _ = _import(path)
    table.register("exp", ("f32", "f32"), "cpu", lambda i, o, p: None)
    contract, hand = table.lookup_alternatives("exp", ("f32", "f32"), "cpu")
    prov = contract_source(contract)
    assert prov is not None and prov.path == str(path) and prov.kernel == "test_exp"
    assert prov.line == base[: base.index("```fkc")].count("\n") + 1
    assert prov.cost_class == "cheap_elementwise" and prov.verified is False
    assert contract_source(hand) is None
    assert contract_source(table.copy().lookup("exp", ("f32", "f32"), "cpu")) == prov


KERNELS = """
import numpy as np
from runtime.contracts import BuiltKernel, kernel_entry, kernel_factory

@kernel_entry
def copy(inputs, outputs, params):
    np.copyto(outputs[0], inputs[0])

@kernel_factory
def scaled(dtypes, factor):
    def kernel(inputs, outputs, params):
        np.multiply(inputs[0], factor, out=outputs[0])
    return kernel

@kernel_factory
def with_direct(dtypes):
    return BuiltKernel(copy, direct=np.copyto)

@kernel_factory
def broken(dtypes):
    return 42
"""


def test_entry_points_kernel_factory_and_built(
    base: str, write: Write, user_package: Callable[[str], str]
) -> None:
    pkg = user_package(KERNELS)
    entry = "runtime.kernels.cpu.contracts.factories:unary"
    plain = base.replace(entry, f"{pkg}:copy").replace(
        "\nentry_args: {ufunc: exp, compute: f64}", ""
    )
    table, _ = _import(write(plain, "p.fkc.md"), allow=(pkg,))
    assert table.lookup("exp", ("f32", "f32"), "cpu").kernel.__name__ == "copy"
    scaled = base.replace(entry, f"{pkg}:scaled").replace(
        "{ufunc: exp, compute: f64}", "{factor: 3}"
    )
    table, _ = _import(write(scaled, "s.fkc.md"), allow=(pkg,))
    import numpy as np

    out = np.empty(2, np.float32)
    table.lookup("exp", ("f32", "f32"), "cpu").kernel([np.ones(2, np.float32)], [out], {})
    assert out.tolist() == [3.0, 3.0]
    built = scaled.replace(f"{pkg}:scaled", f"{pkg}:with_direct").replace("{factor: 3}", "{}")
    table, _ = _import(write(built, "b.fkc.md"), allow=(pkg,))
    assert table.lookup("exp", ("f32", "f32"), "cpu").direct is np.copyto
    with pytest.raises(E.FactoryFailed, match="not a kernel"):
        _import(write(built.replace("with_direct", "broken"), "x.fkc.md"), allow=(pkg,))
    with pytest.raises(E.BadEntryArgs, match="kernel factory"):  # a factory without entry_args
        _import(write(plain.replace(f"{pkg}:copy", f"{pkg}:with_direct"), "y.fkc.md"), allow=(pkg,))
    assert isinstance(BuiltKernel(print).depends_on, tuple)


def test_import_warns_once_per_contract(base: str, write: Write) -> None:
    with pytest.warns(UnverifiedClaimWarning) as record:
        _import(write(base))
    msgs = [str(w.message) for w in record if w.category is UnverifiedClaimWarning]
    assert len(msgs) == 1
    assert "test_exp" in msgs[0] and "(f32, f32); (f64, f64)" in msgs[0]
    assert "bit_stable, max_ulp" in msgs[0] and "UNAUDITED" in msgs[0]


def test_accepts_checks_ranks_constraints_and_shape_rules(base: str, write: Write) -> None:
    text = (
        base.replace("rank: any", "rank: 1..2")
        .replace("op: exp", "op: add")
        .replace(
            "    shape: [same_as=out]\n",
            "    shape: [broadcasts_to=out]\n  - name: y\n    dtypes: same_as(x)\n",
        )
    )
    text = text.replace("shape_rule: same_as(x)", "shape_rule: broadcast(x, y)")
    lk = lower(load_contracts(write(text))[1][0])[0]
    assert lk.accepts([(3, 4), (4,), (3, 4)])
    assert not lk.accepts([(3, 4), (4,), (4,)])  # the output is not the broadcast shape
    assert not lk.accepts([(2, 3, 4), (4,), (2, 3, 4)])  # x has rank 3 > 2
    assert not lk.accepts([(3, 4), (5,), (3, 4)])  # not broadcastable
    assert not lk.accepts([(3, 4), (3, 4)])  # wrong arity
