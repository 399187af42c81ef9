"""AOT compilation of the Triton kernels to PTX + cubin for sm_90 and sm_80 (no GPU needed)."""

from __future__ import annotations

import pytest
from triton_helpers import table

from lowering.triton.aot import AotError, compile_kernel, compile_specs, kernel_specs, parse_target
from lowering.triton.kernels.elementwise import unary_kernel
from lowering.triton.spec import TritonSpecError, eval_grid_expr, signature

ELF = b"\x7fELF"

REPRESENTATIVE = [  # (op, dtypes, source, shapes, params): one launch per family + flash decode
    ("matmul", ("f16",) * 3, "triton", [(256, 128), (128, 64), (256, 64)], {}),
    ("attention", ("bf16",) * 3 + ("i64", "bf16"), "triton-flashdecode",
     [(1, 32, 1, 128), (1, 8, 8192, 128), (1, 8, 8192, 128), (), (1, 32, 1, 128)],
     {"causal": True, "scale": 0.088}),
    ("add", ("bf16",) * 3, "triton", [(1000, 64), (64,), (1000, 64)], {}),  # row broadcast
    ("transpose", ("bf16",) * 2, "triton", [(2, 64, 48), (48, 2, 64)], {"perm": (2, 0, 1)}),
]  # fmt: skip


def _specs(rows):
    out = []
    for op, dtypes, source, shapes, params in rows:
        e = next(x for x in table().lookup_alternatives(op, dtypes, "cuda")
                 if x.kernel_source == source)  # fmt: skip
        out.extend(kernel_specs(e, shapes, dtypes, params))
    return out


def test_parse_target() -> None:
    t = parse_target("sm_90")
    assert (t.backend, t.arch, t.warp_size) == ("cuda", 90, 32)
    assert parse_target("sm_80a").arch == 80
    for bad in ("sm90", "gfx942", "sm_", "sm_9x", "sm_60", ""):
        with pytest.raises(AotError, match="CUDA target"):
            parse_target(bad)


def test_grid_expressions_are_data() -> None:
    assert eval_grid_expr("cdiv(M, 64) * cdiv(N, 64)", {"M": 100, "N": 64}) == 2
    assert eval_grid_expr("max(B * Hq, 1) % 7 + min(3, S // 2)", {"B": 2, "Hq": 4, "S": 4}) == 3
    with pytest.raises(TritonSpecError, match="unknown size 'X'"):
        eval_grid_expr("X", {})
    with pytest.raises(TritonSpecError, match="unsupported"):
        eval_grid_expr("__import__('os').getpid()", {})


def test_signature_names_every_runtime_argument() -> None:
    with pytest.raises(TritonSpecError, match="missing"):
        signature(unary_kernel, {"x": "*fp32"})
    with pytest.raises(TritonSpecError, match="unknown"):
        signature(unary_kernel, {"nope": "i32"})


def test_non_triton_kernel_is_refused() -> None:
    with pytest.raises(AotError, match="not a Triton kernel"):
        compile_kernel(lambda i, o, p: None, "sm_90", [(4,)], ("f32",))


@pytest.mark.parametrize(("target", "ptx_target"), [("sm_90", "sm_90"), ("sm_80", "sm_80")])
def test_representative_kernels_compile(target: str, ptx_target: str) -> None:
    specs = _specs(REPRESENTATIVE)
    built = compile_specs(specs, target)
    assert [b.name for b in built] == [s.name for s in specs]
    for b, s in zip(built, specs, strict=True):
        assert f".target {ptx_target}" in b.ptx
        assert b.cubin[:4] == ELF and len(b.cubin) > 1000
        assert b.kernel_name == s.fn.fn.__name__ and f".entry {b.kernel_name}" in b.ptx
        assert b.launch_grid == s.launch_grid() and all(g >= 1 for g in b.launch_grid)
        assert b.runtime_args() == [n for n, t in s.signature.items() if t != "constexpr"]
    split, reduce = built[1], built[2]
    assert split.launch_grid[1] == 8 and reduce.launch_grid == (32,)  # B*Hkv, B*Hq


def _all_specs():
    seen, out = set(), []
    shapes = {  # one shape per key arity, enough for every family
        "matmul": [(96, 80), (80, 72), (96, 72)],
        "attention4": [(1, 8, 1, 64), (1, 2, 512, 64), (1, 2, 512, 64), (1, 8, 1, 64)],
        "attention5": [(1, 8, 1, 64), (1, 2, 512, 64), (1, 2, 512, 64), (), (1, 8, 1, 64)],
        "rope": [(1, 2, 6, 8), (6, 4), (6, 4), (1, 2, 6, 8)],
        "transpose": [(4, 100), (100, 4)],
        "slice": [(4, 100), (2, 50)],
        "broadcast": [(1, 100), (4, 100)],
        "concat": [(4, 100), (4, 100), (4, 200)],
        "gather": [(4, 100), (4, 3), (4, 4, 3)],
    }
    for (op, dtypes, _), e in table().iter_entries():
        key = op if op in shapes else f"attention{len(dtypes)}" if op == "attention" else None
        sh = shapes[key] if key else [(4, 100)] * (len(dtypes) - 1) + [(4, 100)]
        if op.startswith("reduce"):
            sh = [(4, 100), (4,)]
        elif op in ("rms_norm", "layer_norm"):
            sh = [(4, 100)] + [(100,)] * (len(dtypes) - 2) + [(4, 100)]
        params = {"axes": (1,), "keepdim": False, "axis": 1, "eps": 1e-5, "causal": True,
                  "scale": 0.125, "interleaved": False, "perm": (1, 0), "starts": (0, 0),
                  "limits": (4, 100), "steps": (2, 2)}  # fmt: skip
        for s in kernel_specs(e, sh, dtypes, params):
            k = (s.fn.fn.__name__, tuple(s.signature.items()), tuple(s.constexprs.items()))
            if k not in seen:
                seen.add(k)
                out.append(s)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sm_90", "sm_80"])
def test_every_kernel_compiles(target: str) -> None:
    specs = _all_specs()
    built = compile_specs(specs, target)
    assert len(built) == len(specs)
    for b in built:
        assert f".target {target}" in b.ptx and b.cubin[:4] == ELF


@pytest.mark.slow
def test_movement_walks_compile() -> None:
    """The strided copy at every collapsed rank, and i64 indexing, compile for sm_90."""
    specs, e = [], table().lookup("transpose", ("f16", "f16"), "cuda")
    for rank in range(1, 7):
        shape = tuple(range(2, rank + 2))
        perm = tuple(range(rank))[::-1] if rank > 1 else (0,)
        specs += kernel_specs(e, [shape, tuple(shape[p] for p in perm)], ("f16",) * 2,
                              {"perm": perm})  # fmt: skip
    big = [(2**16, 2**15 + 1), (2**15 + 1, 2**16)]
    specs += kernel_specs(e, big, ("f16",) * 2, {"perm": (1, 0)})
    g = table().lookup("gather", ("f32", "i32", "f32"), "cuda")
    specs += kernel_specs(g, [(2**31, 1), (3,), (3, 1)], ("f32", "i32", "f32"), {"axis": 0})
    assert [s.constexprs["NDIM"] for s in specs[:6]] == [1, 2, 3, 4, 5, 6]
    assert specs[-2].constexprs["BIG"] and specs[-1].constexprs["BIG"]
    for b in compile_specs(specs, "sm_90"):
        assert ".target sm_90" in b.ptx and b.cubin[:4] == ELF
