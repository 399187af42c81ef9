"""The `fuel` command line.

    fuel run MODULE.mlir [--input NAME=FILE.npy ...] [--random-inputs --seed N]
             [--output-dir DIR] [--repeat N] [--weights FILE.safetensors]

Every failure is one readable line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from runtime.dtypes import FLOAT_DTYPES, from_numpy
from runtime.fsutil import atomic_write_bytes


class CliError(Exception):
    """A user-facing error: printed as `fuel: error: <message>`, exit code 1."""


def _parse_inputs(specs: Sequence[str]) -> dict[str, np.ndarray]:
    inputs: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise CliError(f"--input expects NAME=FILE.npy, got '{spec}'")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CliError(f"cannot load input '{name}' from {path}: {e}") from None
    return inputs


def random_inputs(specs: Sequence[tuple[np.dtype, tuple[int, ...]]], seed: int) -> list[np.ndarray]:
    """Floats ~ N(0, 1); integers uniform in [0, 4); i1 uniform booleans."""
    rng = np.random.default_rng(seed)
    out = []
    for dt, shape in specs:
        if from_numpy(dt) in FLOAT_DTYPES:
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt == np.bool_:
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 4, shape).astype(dt))
    return out


def _checksum(a: np.ndarray) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]
    total = float(a.astype(np.float64).sum()) if a.size else 0.0
    return f"sum={total:.6g} sha256={digest}"


def output_file_name(name: str) -> str:
    """`<name>.npy`, with path separators replaced (ONNX names like `/model/Add_output_0`
    must not escape the output directory)."""
    safe = name.replace("/", "_").replace("\\", "_").lstrip(".") or "output"
    return f"{safe}.npy"


def _npy_bytes(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def cmd_run(args: argparse.Namespace) -> int:
    from runtime.executor import Executor
    from runtime.onnx_cli import load_any

    module = load_any(args.module, args.weights)
    ex = Executor(module)
    given = _parse_inputs(args.input)
    if args.random_inputs:
        rand = random_inputs(ex.input_specs, args.seed)
        inputs = {n: given.get(n, r) for n, r in zip(ex.input_names, rand, strict=True)}
        inputs.update({n: a for n, a in given.items() if n not in inputs})
    else:
        inputs = given
    times = []
    outputs: dict[str, np.ndarray] = {}
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        outputs = ex.run(inputs)
        times.append(time.perf_counter() - t0)
    for name, a in outputs.items():
        print(f"{name}: {list(a.shape)} {from_numpy(a.dtype)} {_checksum(a)}")
        if args.output_dir:
            atomic_write_bytes(Path(args.output_dir) / output_file_name(name), _npy_bytes(a))
    med = statistics.median(times)
    print(f"ran {len(ex)} kernels, {len(times)} run(s), median {med * 1e3:.3f} ms/run")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fuel", description="fuel: compile and run ML graphs")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a module (fuel IR or ONNX) on the CPU")
    r.add_argument("module", help="fuel IR file (.mlir) or ONNX model (.onnx)")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    r.add_argument("--random-inputs", action="store_true",
                   help="fill inputs not given with --input from a seeded generator")  # fmt: skip
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--output-dir", help="write each output as DIR/<name>.npy")
    r.add_argument("--repeat", type=int, default=1, help="run N times, report the median")
    r.add_argument("--weights", help="safetensors file (default: the one the module names)")
    r.set_defaults(fn=cmd_run)
    from runtime.contracts_cli import add_kernels_parser, add_verify_kernels_parser
    from runtime.explain import add_explain_parser
    from runtime.judge_cli import add_judge_parser
    from runtime.onnx_cli import add_import_parser

    add_import_parser(sub)
    add_judge_parser(sub)
    add_explain_parser(sub)
    add_kernels_parser(sub)
    add_verify_kernels_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from runtime.binding_table import BindingTableError
    from runtime.executor import ExecutionError
    from runtime.module import ModuleError
    from runtime.weights import WeightsError

    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (CliError, ModuleError, WeightsError, ExecutionError, BindingTableError) as e:
        print(f"fuel: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"fuel: error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
