"""fuel's native CPU library: hand-written C for the kernels numpy and the BLAS libraries run
with too many calls or too little reuse.

`fuel_native.c` (beside this file) holds f32 products of a few rows by a weight (decode's
GEMVs: `fuel_native_gemm`; `fuel_native_gemm_bias_act` with the bias and an activation applied
to each tile as it is finished, by the c-vecmath functions of `runtime.native.vecmath`
prepended to the unit), the SiLU-gated MLP on them (`fuel_native_gated_mlp`: gate and up in one
pass over their weights, silu * up, then the down product), `fuel_native_rms_norm`,
`fuel_native_layer_norm`, `fuel_native_rope`, flash attention (`fuel_native_flash_attention`:
each query over its live keys, split-KV; `fuel_native_flash_decode` for one query) and native
programs (a run of kernel calls in one C call). `fuel_gemm.c` holds the packed FMA GEMM for
products of many rows (`fuel_native_gemm_packed` / `_fma`, weights packed once by
`fuel_native_pack`; AVX-512, AVX2 or portable micro-kernels computing the same bits; the same
epilogue per finished panel). A persistent thread pool splits output columns (or rows), never a
sum, so results do not depend on the thread count. Why: on the reference 2-core VM a decode
step's products read weights at 12-18 GB/s through numpy's OpenBLAS GEMV plus several numpy
calls per fused op; one C call per op reads them at the machine's bandwidth, and a prefill
whose products and attention all run on this one pool does not wake a second library's. It is
the process's one pool: the BLAS libraries fuel's other kernels call run on the calling thread
(`runtime.native.blas`).

The library is compiled from source by the system C compiler on first use (`-O3`, no
fast-math, no FMA contraction; cached by content hash next to the C codegen's kernels, see
`lowering.cpu.codegen`), loaded with ctypes (which releases the GIL during a call). The kernels
(`runtime.kernels.cpu.native`) are registered only where a C compiler is found and
`FUEL_NATIVE` is not `0`. A kernel bundle whose kernels use the library ships its source and
compiled copy (`lowering.cpu.backend.native_artifact`); loading a bundle signed by a key the
user trusts where no compiler is installs that copy (`install_prebuilt`, after checking the
source is this fuel's; docs/bundles.md).
Threads: `FUEL_NUM_THREADS`, else the CPUs this process may run on
(at most `MAX_THREADS`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from runtime import knobs
from runtime.loaders.c import (
    CodegenError,
    find_compiler,
    library_path,
    prebuilt,
    register_prebuilt,
    source_key,
)
from runtime.native import vecmath
from runtime.native.helpers import helper_source

SOURCE_PATHS = tuple(
    Path(__file__).resolve().with_name(f) for f in ("fuel_native.c", "fuel_gemm.c")
)
"""The library's C files, compiled as one unit in this order."""
FLAGS = (
    "-O3",
    "-fPIC",
    "-shared",
    "-std=gnu11",
    "-D_GNU_SOURCE",
    "-pthread",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
)
"""-O3 vectorizes the column loops; no fast-math and no FMA contraction keep every output's
rounding fixed (so the AVX-512, AVX2 and baseline clones agree bit for bit). -fno-trapping-math
only lets selects be if-converted (silu's branches), which changes no value."""
MAX_THREADS = 8
"""Memory-bound kernels stop scaling well before the core count of a big host."""

_LIB: list[Any] = []
_LOCK = threading.Lock()


def enabled() -> bool:
    """The native kernels may be registered: `FUEL_NATIVE` is not `0` and a C compiler exists
    (checked without compiling)."""
    return knobs.native_enabled() and find_compiler() is not None


def available() -> bool:
    """The library can be loaded here: `enabled()`, or a kernel bundle installed its prebuilt
    copy (`install_prebuilt`) and `FUEL_NATIVE` is not `0`."""
    if not knobs.native_enabled():
        return False
    return enabled() or prebuilt(source_key(source())) is not None


def install_prebuilt(library_file: Path) -> None:
    """Use `library_file` (a bundle's verified copy of this library, built from exactly
    `source()`) instead of compiling: a bundle runs its native kernels where no compiler is."""
    register_prebuilt(source(), library_file)


def simd_fma() -> bool:
    """This CPU runs one of the packed GEMM's SIMD micro-kernels (`fuel_native_gemm_isa` >= 1:
    AVX-512, or AVX2 with FMA), read from /proc/cpuinfo without compiling anything: the cost
    functions ask it."""
    flags = _cpu_flags()
    return "avx512f" in flags or {"avx2", "fma"} <= flags


@functools.cache
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def threads() -> int:
    """The pool size: `FUEL_NUM_THREADS` if set (>= 1), else this process's CPUs, capped."""
    env = knobs.num_threads()
    if env.strip():
        try:
            return max(1, int(env))
        except ValueError:
            raise knobs.KnobError(f"FUEL_NUM_THREADS must be an integer, got {env!r}") from None
    return max(1, min(MAX_THREADS, len(os.sched_getaffinity(0))))


EPILOGUE_HELPERS = (
    "fuel_vm_gelu",
    "fuel_vm_gelu_tanh",
    "fuel_vm_silu",
    "fuel_vm_sigmoid",
    "fuel_vm_tanh",
)
"""The c-vecmath functions (`runtime.native.vecmath`) the products' activation epilogues
(`act_cols` in fuel_native.c) call."""


@functools.cache
def source() -> str:
    """The compiled text: <math.h>, <stdint.h>, the codegen's `fuel_silu` helper, the c-vecmath
    functions of the epilogues, then `SOURCE_PATHS`."""
    files = "\n".join(p.read_text() for p in SOURCE_PATHS)
    head = "#include <math.h>\n#include <stdint.h>\n" + helper_source("fuel_silu")
    return head + "\n" + vecmath.source(EPILOGUE_HELPERS) + "\n" + files


_F = ctypes.c_void_p
_L = ctypes.c_long
_SIGNATURES = {
    "fuel_native_threads": ([ctypes.c_int], ctypes.c_int),
    "fuel_native_gemm": ([_F, _F, _F, _L, _L, _L], ctypes.c_int),
    "fuel_native_gemm_bias_act": ([_F] * 4 + [_L] * 3 + [ctypes.c_int], ctypes.c_int),
    "fuel_native_bias_act": ([_F, _F, _L, _L, ctypes.c_int], None),
    "fuel_native_gated_mlp": ([_F] * 7 + [_L] * 4, ctypes.c_int),
    "fuel_native_rms_norm": ([_F, _F, _F, _L, _L, ctypes.c_double], None),
    "fuel_native_layer_norm": ([_F] * 4 + [_L, _L, ctypes.c_double], None),
    "fuel_native_rope": ([_F] * 4 + [_L] * 4 + [ctypes.c_int, _L, _F], None),
    "fuel_native_permute": ([_F, _F, _L, _F, _F], None),
    "fuel_native_concat": ([_F, _L, _L, _F, _F], None),
    "fuel_native_silu_mul": ([_F, _F, _L], None),
    "fuel_native_program": ([_F, _L], _L),
    "fuel_native_flash_splits": ([_L], _L),
    "fuel_native_flash_decode": ([_F] * 5 + [_L] * 7 + [ctypes.c_double], None),
    "fuel_native_flash_attention": (
        [_F] * 5 + [_L] * 8 + [ctypes.c_int, ctypes.c_double, _F, _F],
        None,
    ),
    "fuel_native_gemm_isa": ([], ctypes.c_int),
    "fuel_native_packed_floats": ([_L, _L], _L),
    "fuel_native_pack": ([_F, _F, _L, _L], None),
    "fuel_native_gemm_packed": ([_F] * 4 + [_L] * 3 + [ctypes.c_int], ctypes.c_int),
    "fuel_native_gemm_fma": ([_F] * 4 + [_L] * 3 + [ctypes.c_int], ctypes.c_int),
    "fuel_native_gemm_fma_ref": ([_F] * 4 + [_L] * 3 + [ctypes.c_int], None),
    "fuel_native_gemm_batched": ([_F] * 3 + [_L] * 4 + [_F] * 2, ctypes.c_int),
    "fuel_native_gated_packed": ([_F] * 7 + [_L] * 4 + [ctypes.c_int], ctypes.c_int),
    "fuel_native_gemm_use_isa": ([ctypes.c_int], ctypes.c_int),
    "fuel_native_attention_gemm": (
        [_F] * 4 + [_L] * 8 + [ctypes.c_int, ctypes.c_double, _F, _F, _F],
        ctypes.c_int,
    ),
}


def library() -> Any:
    """The loaded library (compiled on the first call in a process, then cached on disk), its
    pool started; `CodegenError` if it cannot be built."""
    if _LIB:
        return _LIB[0]
    with _LOCK:
        if not _LIB:
            try:
                path = library_path(source(), FLAGS)
            except CodegenError as e:
                raise CodegenError(
                    f"{e}\n(fuel's native kernels need it; FUEL_NATIVE=0 runs without them)"
                ) from None
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as e:
                raise CodegenError(f"cannot load fuel's native library {path}: {e}") from None
            for name, (args, res) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, res
            lib.fuel_native_threads(threads())
            _LIB.append(lib)
    return _LIB[0]


def ptr(a: np.ndarray) -> int:
    """The data address of a C-contiguous array."""
    return a.__array_interface__["data"][0]


(
    OP_GEMM,
    OP_GATED,
    OP_RMS,
    OP_ROPE,
    OP_FLASH,
    OP_ADD,
    OP_MUL,
    OP_CALL,
    OP_GEMM_PACKED,
    OP_GEMM_BATCHED,
    OP_GATED_PACKED,
    OP_ATTN,
    OP_PERMUTE,
    OP_CONCAT,
    OP_GEMM_ACT,
    OP_LN,
) = range(1, 17)
"""Program record opcodes (`fuel_native_program` in fuel_native.c); OP_CALL calls a generated
C kernel (`lowering.cpu.codegen`) on its prebuilt pointer array."""
ARITY = {
    OP_GEMM: 6,
    OP_GATED: 11,
    OP_RMS: 6,
    OP_ROPE: 11,
    OP_FLASH: 13,
    OP_ADD: 4,
    OP_MUL: 4,
    OP_CALL: 2,
    OP_GEMM_PACKED: 8,
    OP_GEMM_BATCHED: 9,
    OP_GATED_PACKED: 12,
    OP_ATTN: 17,
    OP_PERMUTE: 5,
    OP_CONCAT: 5,
    OP_GEMM_ACT: 8,
    OP_LN: 7,
}
ACT_CODES = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "sigmoid": 5, "tanh": 6}
"""A product's activation epilogue (`ACT_*` in fuel_native.c): the `act` word of OP_GEMM_ACT and
OP_GEMM_PACKED records."""


def f64_bits(x: float) -> int:
    """A double's bits as the int64 a program record carries."""
    return int(np.array(x, np.float64).view(np.int64))


@dataclass
class Record:
    """One kernel call of a program: its words (opcode, then ARITY[opcode] arguments) and the
    scratch arrays it points into (kept alive by whoever holds the record)."""

    words: list[int]
    keep: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.words) != 1 + ARITY[self.words[0]]:
            raise ValueError(f"record {self.words[:1]} has {len(self.words) - 1} arguments")


def rows_f32(*arrays: Any) -> bool:
    """Every array is an f32 ndarray whose rows (last dim) are dense and whose strides are
    whole elements: a C kernel taking element strides reads it in place (a transposed view)."""
    return all(
        isinstance(a, np.ndarray)
        and a.dtype == np.float32
        and (a.shape[-1] <= 1 or a.strides[-1] == 4)
        and all(st % 4 == 0 for st in a.strides)
        for a in arrays
    )


def contiguous_f32(*arrays: Any) -> bool:
    """Every array is a C-contiguous f32 ndarray (what a program record may point to)."""
    return all(
        isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous for a in arrays
    )


def program(records: list[Record]) -> tuple[Any, np.ndarray, int]:
    """(the library's program entry, the encoded words, the record count) of `records`."""
    words = np.array([w for r in records for w in r.words], np.int64)
    return library().fuel_native_program, words, len(records)


def revision_text() -> str:
    """What the native kernels' revision hashes cover: the compiled source and the flags."""
    return source() + "\n" + " ".join(FLAGS)


__all__ = [
    "FLAGS",
    "SOURCE_PATHS",
    "Record",
    "available",
    "contiguous_f32",
    "rows_f32",
    "enabled",
    "f64_bits",
    "install_prebuilt",
    "library",
    "program",
    "ptr",
    "revision_text",
    "simd_fma",
    "source",
    "threads",
]
