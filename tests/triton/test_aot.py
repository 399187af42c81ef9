"""AOT compilation of the Triton kernels to PTX + cubin for sm_90 and sm_80 (no GPU needed)."""

from __future__ import annotations

import json
import os
import re

import pytest
import torch
from triton_helpers import entry, table

from lowering.triton.aot import (
    AotError,
    AotKernel,
    check_args,
    compile_kernel,
    compile_specs,
    kernel_specs,
    parse_target,
    specialization_of,
)
from runtime.kernels.triton.elementwise import unary_kernel
from runtime.kernels.triton.spec import TritonKernelSpec, TritonSpecError, eval_grid_expr, signature

ELF = b"\x7fELF"

REPRESENTATIVE = [  # (op, dtypes, source, shapes, params): one launch per family + flash decode
    ("matmul", ("f16",) * 3, "triton", [(256, 128), (128, 64), (256, 64)], {}),
    (
        "attention",
        ("bf16",) * 3 + ("i64", "bf16"),
        "triton-flashdecode",
        [(1, 32, 1, 128), (1, 8, 8192, 128), (1, 8, 8192, 128), (), (1, 32, 1, 128)],
        {"causal": True, "scale": 0.088},
    ),
    ("add", ("bf16",) * 3, "triton", [(1000, 64), (64,), (1000, 64)], {}),  # row broadcast
    ("transpose", ("bf16",) * 2, "triton", [(2, 64, 48), (48, 2, 64)], {"perm": (2, 0, 1)}),
]


def _specs(rows):
    out = []
    for op, dtypes, source, shapes, params in rows:
        e = next(
            x for x in table().lookup_alternatives(op, dtypes, "cuda") if x.kernel_source == source
        )
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
        params = {
            "axes": (1,),
            "keepdim": False,
            "axis": 1,
            "eps": 1e-5,
            "causal": True,
            "scale": 0.125,
            "interleaved": False,
            "perm": (1, 0),
            "starts": (0, 0),
            "limits": (4, 100),
            "steps": (2, 2),
        }
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
        specs += kernel_specs(
            e, [shape, tuple(shape[p] for p in perm)], ("f16",) * 2, {"perm": perm}
        )
    big = [(2**16, 2**15 + 1), (2**15 + 1, 2**16)]
    specs += kernel_specs(e, big, ("f16",) * 2, {"perm": (1, 0)})
    g = table().lookup("gather", ("f32", "i32", "f32"), "cuda")
    specs += kernel_specs(g, [(2**31, 1), (3,), (3, 1)], ("f32", "i32", "f32"), {"axis": 0})
    assert [s.constexprs["NDIM"] for s in specs[:6]] == [1, 2, 3, 4, 5, 6]
    assert specs[-2].constexprs["BIG"] and specs[-1].constexprs["BIG"]
    for b in compile_specs(specs, "sm_90"):
        assert ".target sm_90" in b.ptx and b.cubin[:4] == ELF


# -- value specialisation ----------------------------------------------------------------------

SCALE = """import triton
import triton.language as tl


@triton.jit
def scale_kernel(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2.0, mask=m)
"""
V4_LOAD = re.compile(r"ld\.global(?:\.\w+)*\.v4\.")
ANY_LOAD = re.compile(r"ld\.global\.")


def _scale_spec(n: int, tmp_path, monkeypatch) -> TritonKernelSpec:
    """An elementwise kernel shaped like a generated one, loaded from a cache file the AOT
    child process can import (under the interpreter it compiles there)."""
    from runtime.loaders.triton import cache_dir, load_kernel

    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path))
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(cache_dir()), path) if p))
    fn = load_kernel("scale_kernel", SCALE)
    sig = {"x": "*fp32", "y": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    return TritonKernelSpec("scale", fn, sig, {"BLOCK": 1024}, ("cdiv(n, 1024)",), {"n": n})


@pytest.mark.parametrize("target", ["sm_90", "sm_80"])
def test_specialisation_vectorises_global_loads(target: str, tmp_path, monkeypatch) -> None:
    even, odd = _scale_spec(4096, tmp_path, monkeypatch), _scale_spec(4100, tmp_path, monkeypatch)
    special, ragged = compile_specs([even, odd], target)
    (plain,) = compile_specs([even], target, specialize=False)
    assert special.specialization == {"x": ("aligned16",), "y": ("aligned16",), "n": ("div16",)}
    assert ragged.specialization == {"x": ("aligned16",), "y": ("aligned16",)}  # 4100 % 16
    assert plain.specialization == {}
    v4 = [len(V4_LOAD.findall(k.ptx)) for k in (special, ragged, plain)]
    assert v4[0] >= 1 and v4[1:] == [0, 0], v4  # only the fully specialised one vectorises
    assert len(ANY_LOAD.findall(plain.ptx)) > len(ANY_LOAD.findall(special.ptx))
    assert re.search(r"st\.global(?:\.\w+)*\.v4\.", special.ptx)


def test_specialisation_rule_follows_the_spec_values() -> None:
    (mm,) = kernel_specs(
        entry("matmul", ("f16",) * 3), [(64, 40), (40, 32), (64, 32)], ("f16",) * 3
    )
    got = specialization_of(mm)
    assert {n for n, k in got.items() if k == ("aligned16",)} == {"a", "b", "c"}
    assert {n for n, k in got.items() if k == ("div16",)} == {"M", "N"}  # K = 40, B1 unknown
    (add,) = kernel_specs(entry("add", ("f32",) * 3), [(4, 100), (100,), (4, 100)], ("f32",) * 3)
    assert set(specialization_of(add)) == {"a", "b", "y"}  # no size names an argument


def _kernel(specialization) -> AotKernel:
    return AotKernel(
        name="scale",
        kernel_name="scale_kernel",
        target="sm_90",
        ptx=".entry scale_kernel",
        cubin=b"\x7fELF" + bytes(range(40)),
        signature={"x": "*fp32", "n": "i32"},
        constexprs={"BLOCK": 1024},
        num_warps=4,
        num_stages=2,
        shared_bytes=0,
        grid=("cdiv(n, 1024)",),
        sizes={"n": 4096},
        launch_grid=(4,),
        scratch={"global_scratch_size": 0},
        specialization=specialization,
    )


def test_specialisation_round_trips_through_json() -> None:
    k = _kernel({"x": ("aligned16",), "n": ("div16",)})
    data = json.loads(json.dumps(k.to_json()))
    assert data["specialization"] == {"x": ["aligned16"], "n": ["div16"]}
    assert AotKernel.from_json(data) == k
    del data["specialization"]  # a record written before specialisation existed
    old = AotKernel.from_json(data)
    assert old.specialization == {} and old.accepts({"x": 0x1004, "n": 7}) is None


def test_accepts_checks_launch_values() -> None:
    k = _kernel({"x": ("aligned16",), "n": ("div16",)})
    assert k.accepts({"x": 0x7F00_0000_1000, "n": 4096}) is None
    assert k.accepts({"x": 0x7F00_0000_1004, "n": 4096}) == (
        "pointer argument 'x' = 0x7f0000001004 is not 16-byte aligned (compiled as aligned16)"
    )
    assert k.accepts({"x": 0x1000, "n": 4100}) == (
        "integer argument 'n' = 4100 is not divisible by 16 (compiled as div16)"
    )
    assert "'n' is missing" in (k.accepts({"x": 0x1000}) or "")
    assert "unknown specialisation 'equal1'" in (check_args({"n": ["equal1"]}, {"n": 1}) or "")


def test_launch_meta_records_specialisation(tmp_path, monkeypatch) -> None:
    from lowering.backend import lower
    from runtime.module import FuelModule

    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path))
    module = FuelModule.parse(
        "func.func @main(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {\n"
        "  %e = fuel.exp %x : tensor<64x32xf32>\n"
        "  %y = fuel.mul %e, %x : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>\n"
        "  func.return %y : tensor<64x32xf32>\n}\n"
    )
    gen = next(a for a in lower(module, "sm_90") if a.meta.get("kind") == "generated")
    (launch,) = gen.meta["launches"]
    assert launch["specialization"] == {"in0": ["aligned16"], "out0": ["aligned16"], "N": ["div16"]}
    ptx = next(v.decode() for f, v in gen.files.items() if f.endswith(".ptx"))
    assert V4_LOAD.search(ptx)


FAMILIES = [  # (op, dtypes, source, shapes, params): every kernel function, sizes % 16 == 0
    ("exp", ("f32",) * 2, "triton", [(32, 64), (32, 64)], {}),
    ("add", ("f32",) * 3, "triton", [(32, 64), (64,), (32, 64)], {}),
    ("matmul", ("f32",) * 3, "triton", [(32, 16), (16, 48), (32, 48)], {}),
    ("reduce_sum", ("f32",) * 2, "triton", [(32, 64), (32,)], {"axes": (1,), "keepdim": False}),
    ("softmax", ("f32",) * 2, "triton", [(32, 64), (32, 64)], {"axis": 1}),
    ("rms_norm", ("f32",) * 3, "triton", [(32, 64), (64,), (32, 64)], {"eps": 1e-5}),
    ("layer_norm", ("f32",) * 4, "triton", [(32, 64), (64,), (64,), (32, 64)], {"eps": 1e-5}),
    (
        "rope",
        ("f32",) * 4,
        "triton",
        [(1, 2, 16, 32), (16, 16), (16, 16), (1, 2, 16, 32)],
        {"interleaved": False},
    ),
    (
        "attention",
        ("f32",) * 4,
        "triton",
        [(1, 4, 16, 32), (1, 2, 16, 32), (1, 2, 16, 32), (1, 4, 16, 32)],
        {"causal": True, "scale": 0.125},
    ),
    (
        "attention",
        ("f32",) * 3 + ("i64", "f32"),
        "triton-flashdecode",
        [(1, 4, 1, 32), (1, 2, 64, 32), (1, 2, 64, 32), (), (1, 4, 1, 32)],
        {"causal": True, "scale": 0.125},
    ),
    ("transpose", ("f32",) * 2, "triton", [(32, 64), (64, 32)], {"perm": (1, 0)}),
    (
        "slice",
        ("f32",) * 2,
        "triton",
        [(32, 64), (16, 32)],
        {"starts": (0, 0), "limits": (32, 64), "steps": (2, 2)},
    ),
    ("broadcast", ("f32",) * 2, "triton", [(1, 64), (32, 64)], {}),
    ("concat", ("f32",) * 2, "triton", [(32, 64), (32, 64), (32, 128)], {"axis": 1}),
    ("gather", ("f32", "i64", "f32"), "triton", [(32, 64), (16,), (16, 64)], {"axis": 0}),
    ("where", ("i1",) + ("f32",) * 3, "triton", [(32, 64), (64,), (32, 64), (32, 64)], {}),
]


def _operand(shape, dtype: str) -> torch.Tensor:
    if dtype == "i1":
        return torch.randint(0, 2, shape).bool()
    if dtype in ("i32", "i64"):
        return torch.randint(0, 16, shape, dtype=getattr(torch, "int" + dtype[1:]))
    return torch.randn(shape)


@pytest.mark.parametrize(
    ("op", "dtypes", "source", "shapes", "params"),
    FAMILIES,
    ids=[f"{r[0]}-{r[2]}" for r in FAMILIES],
)
def test_launches_honour_the_specialisation(op, dtypes, source, shapes, params, monkeypatch):
    """What `specialization_of` assumes holds when a kernel runs on fresh operands: each integer
    argument a size names is passed that size, and every pointer is 16-byte aligned."""
    e = entry(op, dtypes, source)
    launched, real = [], TritonKernelSpec.launch

    def spy(spec: TritonKernelSpec, *args) -> None:
        names = [n for n, t in spec.signature.items() if t != "constexpr"]
        launched.append(
            {
                n: a.data_ptr() if isinstance(a, torch.Tensor) else a
                for n, a in zip(names, args, strict=True)
            }
        )
        real(spec, *args)

    monkeypatch.setattr(TritonKernelSpec, "launch", spy)
    kinds = dtypes[:-1] if len(dtypes) == len(shapes) else dtypes[:1] * (len(shapes) - 1)
    ins = [_operand(s, d) for s, d in zip(shapes[:-1], kinds, strict=True)]  # concat: variadic
    e.kernel(ins, [torch.empty(shapes[-1])], params)
    specs = kernel_specs(e, shapes, dtypes, params)
    assert len(launched) == len(specs) >= 1
    for spec, args in zip(specs, launched, strict=True):
        for name in spec.sizes.keys() & args.keys():
            assert args[name] == spec.sizes[name], (spec.name, name)
        assert check_args(specialization_of(spec), args) is None
