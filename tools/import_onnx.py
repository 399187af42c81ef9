"""`fuel import`: an ONNX model to fuel IR and its weights.

    fuel import MODEL.onnx [-o OUT.mlir] [--input-shape NAME=1x128 ...] [--dim seq=1:2048 ...]
                [--no-locations]

A dynamic input dim (an ONNX `dim_param`) is pinned by `--input-shape`, or stays a dim symbol
of the IR with the range `--dim` gives it (one bundle then runs every shape in the ranges).

Writes OUT.mlir (default: MODEL.mlir) and OUT.safetensors beside it. Each op carries the ONNX
node it came from as its location (`loc("node name")`) unless `--no-locations`. An unsupported
model is one `OnnxImportError` (every unsupported op type, or the node at fault), which the
boundary (tools/errors.py) prints as one line with exit code 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.module import FuelModule, ModuleError
from tools.errors import ArgumentParser, run_parser


def add_import_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `import` subcommand to an `add_subparsers()` object; it dispatches to cmd_import."""
    p = subparsers.add_parser("import", help="import an ONNX model as fuel IR + weights")
    p.add_argument("model", help="ONNX model file (.onnx)")
    p.add_argument("-o", "--output", help="IR file to write (default: MODEL.mlir)")
    add_input_shape_flag(p)
    p.add_argument(
        "--no-locations", action="store_true", help="omit the ONNX node locations from the IR text"
    )
    p.set_defaults(fn=cmd_import)
    return p


def parse_shape(spec: str) -> tuple[str, tuple[int, ...]]:
    """`NAME=1x128` (or `NAME=1,128`; `NAME=` for a scalar) -> (NAME, (1, 128))."""
    name, sep, dims = spec.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        shape = tuple(int(d) for d in dims.replace(",", "x").split("x") if d.strip())
        if any(d < 0 for d in shape):
            raise ValueError
    except ValueError:
        raise ModuleError(f"--input-shape expects NAME=1x128, got '{spec}'") from None
    return name, shape


def parse_dim(spec: str) -> tuple[str, tuple[int, int]]:
    """`NAME=LO:HI` (or `NAME=N`, the range [N, N]) -> (NAME, (LO, HI))."""
    name, sep, rng = spec.partition("=")
    lo, colon, hi = rng.partition(":")
    try:
        if not sep or not name:
            raise ValueError
        bounds = (int(lo), int(hi if colon else lo))
    except ValueError:
        raise ModuleError(f"--dim expects NAME=LO:HI (e.g. seq=1:2048), got '{spec}'") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise ModuleError(f"--dim {spec}: the range needs 1 <= LO <= HI")
    return name, bounds


def load_any(
    path: str,
    weights: str | None = None,
    input_shapes: Sequence[str] = (),
    dims: Sequence[str] = (),
) -> FuelModule:
    """`fuel run`'s loader: a `.onnx` file is imported (onnx is loaded only then; dynamic dims
    pinned by `--input-shape NAME=1x128` specs or ranged by `--dim NAME=LO:HI` specs), anything
    else is fuel IR loaded with its weights. Import errors are `ModuleError`s (one line, exit
    1)."""
    if Path(path).suffix.lower() == ".onnx":
        from frontends.onnx import import_onnx  # lazy: it loads the onnx package

        shapes = dict(parse_shape(s) for s in input_shapes)
        ranges = dict(parse_dim(s) for s in dims)
        return import_onnx(path, input_shapes=shapes, dims=ranges)
    if input_shapes or dims:
        raise ModuleError(
            "--input-shape and --dim apply to ONNX models (fuel IR declares its dims: fuel.dims)"
        )
    return FuelModule.load(path, weights)


def add_input_shape_flag(p: argparse.ArgumentParser) -> None:
    """`--input-shape NAME=1x128` (repeatable), shared by import, run and compile."""
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=1x128",
        help="static shape for an ONNX graph input with dynamic dims; repeatable",
    )
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=LO:HI",
        help="range of an ONNX dynamic dim (its dim_param name): it stays symbolic, one "
        "bundle runs every size in the range; repeatable",
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Import, save, summarise (errors go to the caller's boundary)."""
    from frontends.onnx import import_onnx  # lazy: it loads the onnx package

    shapes = dict(parse_shape(s) for s in args.input_shape)
    ranges = dict(parse_dim(s) for s in args.dim)
    module = import_onnx(args.model, input_shapes=shapes, dims=ranges)
    out = Path(args.output) if args.output else Path(args.model).with_suffix(".mlir")
    path = module.save(out, locations=not args.no_locations)  # one save: the pair stays whole
    ops = sum(1 for _ in module.entry.body.block.ops) - 1
    size = sum(a.nbytes for a in module.weights.values())
    human = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"
    weights = f", {len(module.weights)} weights ({human})" if module.weights else ""
    print(f"imported {args.model}: {ops} ops{weights} -> {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tools.import_onnx MODEL.onnx ...`: the `import` subcommand on its own."""
    p = ArgumentParser(prog="fuel")
    add_import_parser(p.add_subparsers(dest="command", required=True))
    return run_parser("fuel", p, ["import", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
