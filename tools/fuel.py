"""The `fuel` command line.

    fuel run MODULE.mlir|MODEL.onnx|BUNDLE [--input NAME=FILE.npy ...] [--random-inputs --seed N]
             [--output-dir DIR] [--repeat N] [--weights FILE.safetensors]
             [--target cpu|sm_XY] [--emulate]
    fuel compile MODULE.mlir|MODEL.onnx -o OUT[.fuelbundle] [--target cpu|sm_90 ...]
             [--topology FILE] [--precision SPEC] [--no-optimize] [--format auto|dir|archive]
             [--option [TARGET:]KEY=VALUE ...]

Every failure is one readable message on stderr and a non-zero exit, never a traceback unless
`--verbose` asks for it (the boundary and its exit codes: tools/errors.py).
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import importlib.metadata
import os
import stat
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lowering.bundle import write_bundle
from runtime import knobs
from runtime.bundle import MANIFEST, is_bundle, load_bundle, read_container
from runtime.dtypes import FLOAT_DTYPES, from_numpy
from runtime.executor import Executor
from runtime.fsutil import atomic_write_bytes
from tools.errors import ArgumentParser, CliError, add_verbose, run_parser
from tools.explain import add_explain_parser
from tools.import_onnx import add_import_parser, load_any
from tools.judge import add_judge_parser
from tools.kernels import add_kernels_parser, add_verify_kernels_parser


def _parse_inputs(specs: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
    """`--input NAME=FILE.npy` ... -> {NAME: (FILE, array)}."""
    inputs: dict[str, tuple[str, np.ndarray]] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise CliError(f"--input expects NAME=FILE.npy, got '{spec}'")
        if name in inputs:
            raise CliError(f"--input {name} is given twice")
        inputs[name] = (path, _load_npy(name, path))
    return inputs


def _check_inputs(ex: Any, given: dict[str, tuple[str, np.ndarray]]) -> None:
    """Each given input has its graph input's dtype and shape, else an error naming its file
    (the executor would say the same without the file)."""
    specs = dict(zip(ex.input_names, ex.input_specs, strict=True))
    for name, (path, a) in given.items():
        if name in specs and (a.dtype, a.shape) != specs[name]:
            dt, shape = specs[name]
            got = f"{a.dtype}{list(a.shape)}"
            raise CliError(f"{path}: input '{name}' must be {dt}{list(shape)}, got {got}")


def _load_npy(name: str, path: str) -> np.ndarray:
    """The array of a `.npy` file, mapped before it is copied in: a header declaring more
    data than the file holds is refused without allocating for it."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block np.load's open
            raise OSError(errno.EINVAL, "not a regular file", path)
        with np.errstate(over="ignore"):  # numpy's size product of an absurd shape overflows
            a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or "empty file"
        if "mmap length is greater" in why:  # numpy's words for a header promising too much
            why = "its header declares more data than the file holds"
        raise CliError(f"cannot load input '{name}' from {path}: {why}") from None
    if not isinstance(a, np.ndarray):  # an .npz archive
        a.close()
        raise CliError(f"cannot load input '{name}' from {path}: not a .npy file of one array")
    return np.array(a)


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse `type`: an integer >= `low`."""

    def int_at_least(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    int_at_least.__name__ = "int"  # argparse's "invalid int value: 'x'"
    return int_at_least


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


def _executor(args: argparse.Namespace):  # noqa: ANN202
    """A bundle (directory or archive) runs its verified module; anything else is loaded."""
    if is_bundle(args.module):
        if args.weights:
            raise CliError("--weights does not apply to a bundle (it carries its weights)")
        emulate = True if args.emulate else None  # None: FUEL_EMULATE_GPU decides
        return load_bundle(args.module, emulate).executor(args.target, emulate)
    if args.target or args.emulate:
        raise CliError("--target and --emulate apply to a bundle only")
    return Executor(load_any(args.module, args.weights))


def cmd_run(args: argparse.Namespace) -> int:
    if args.emulate:  # before anything imports triton: emulated kernels run interpreted
        knobs.request_triton_interpreter()
    ex = _executor(args)
    loaded = _parse_inputs(args.input)
    _check_inputs(ex, loaded)
    given = {name: a for name, (_, a) in loaded.items()}
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
    if args.profile:
        _print_profile(ex.profile_items(inputs, max(5, args.repeat)))
    return 0


def _print_profile(rows: list[tuple[str, int, float]], top: int = 25) -> None:
    """The slowest schedule items (by name): items per run, median ms per run, share."""
    total = sum(r[2] for r in rows) or 1.0
    print(f"profile: {len(rows)} distinct schedule items, {total * 1e3:.3f} ms/run in items")
    print(f"  {'item':<60} {'count':>5} {'ms/run':>8} {'share':>6}")
    for name, count, secs in rows[:top]:
        label = name if len(name) <= 60 else name[:57] + "..."
        print(f"  {label:<60} {count:>5} {secs * 1e3:>8.3f} {secs / total:>6.1%}")
    if len(rows) > top:
        print(f"  ... {len(rows) - top} more")


def _compile_options(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Per-target backend options: --topology/--precision/--no-optimize go to "cpu";
    `--option KEY=VALUE` to every target, `--option TARGET:KEY=VALUE` to one."""
    opts: dict[str, dict[str, str]] = {t: {} for t in args.target}
    if "cpu" in opts:
        for key, value in (("topology", args.topology), ("precision", args.precision)):
            if value:
                opts["cpu"][key] = value
        if args.no_optimize:
            opts["cpu"]["optimize"] = "0"
    for spec in args.option:
        key, sep, value = spec.partition("=")
        target, colon, key = key.rpartition(":") if ":" in key else ("", "", key)
        if not sep or not key or (colon and target not in opts):
            raise CliError(f"--option expects [TARGET:]KEY=VALUE for a --target, got '{spec}'")
        for t in [target] if target else opts:
            opts[t][key] = value
    return opts


def cmd_compile(args: argparse.Namespace) -> int:
    import json

    args.target = args.target or ["cpu"]
    options = _compile_options(args)
    module = load_any(args.module, args.weights)
    out = write_bundle(module, args.output, args.target, options, args.format, "fuel compile")
    files = read_container(out)
    targets = json.loads(files[MANIFEST])["targets"]
    kernels = ", ".join(f"{t} {len(v['kernels'])} kernels" for t, v in targets.items())
    form = "archive" if out.is_file() else "directory"
    size = sum(map(len, files.values())) if form == "directory" else out.stat().st_size
    print(f"compiled {args.module} -> {out} ({form}, {size / 2**10:.1f} KiB): {kernels}")
    return 0


def _add_compile_parser(sub: Any) -> None:
    c = sub.add_parser("compile", help="compile a module into a kernel bundle")
    c.add_argument("module", help="fuel IR file (.mlir) or ONNX model (.onnx)")
    c.add_argument(
        "-o",
        "--output",
        required=True,
        help="bundle path: NAME.fuelbundle (archive) or a directory",
    )
    c.add_argument(
        "--target", action="append", default=[], help="cpu (default) or sm_XY; repeat for several"
    )
    c.add_argument("--topology", help="declared topology the picker plans for (TOML/JSON)")
    c.add_argument("--precision", default="", help="precision floor, e.g. bit_stable,ulp=2")
    c.add_argument(
        "--no-optimize", action="store_true", help="skip fuel-optimize (kernels are still stamped)"
    )
    c.add_argument(
        "--format",
        choices=("auto", "dir", "archive"),
        default="auto",
        help="auto: archive if OUT ends in .fuelbundle or .zip, else a directory",
    )
    c.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="[TARGET:]KEY=VALUE",
        help="a backend option (e.g. judge=none)",
    )
    c.add_argument("--weights", help="safetensors file (default: the one the module names)")
    c.set_defaults(fn=cmd_compile)


def _version() -> str:
    try:
        return importlib.metadata.version("fuel-dispatch")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="fuel", description="fuel: compile and run ML graphs")
    p.add_argument("--version", action="version", version=f"fuel {_version()}")
    add_verbose(p)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a module (fuel IR, ONNX or a bundle)")
    r.add_argument("module", help="fuel IR (.mlir), ONNX model (.onnx) or kernel bundle")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    r.add_argument(
        "--random-inputs",
        action="store_true",
        help="fill inputs not given with --input from a seeded generator",
    )
    r.add_argument("--seed", type=_at_least(0), default=0)
    r.add_argument("--output-dir", help="write each output as DIR/<name>.npy")
    r.add_argument("--repeat", type=_at_least(1), default=1, help="run N times, report the median")
    r.add_argument(
        "--profile", action="store_true", help="then time each schedule item and print the slowest"
    )
    r.add_argument("--weights", help="safetensors file (default: the one the module names)")
    r.add_argument(
        "--target",
        help="a bundle's target to run (default: the best this machine "
        "runs: its GPU's sm_XY, else cpu)",
    )
    r.add_argument(
        "--emulate",
        action="store_true",
        help="run a bundle's GPU target on CPU tensors under the Triton interpreter "
        "where this machine lacks the GPU (also FUEL_EMULATE_GPU=1)",
    )
    r.set_defaults(fn=cmd_run)
    _add_compile_parser(sub)
    add_import_parser(sub)
    add_judge_parser(sub)
    add_explain_parser(sub)
    add_kernels_parser(sub)
    add_verify_kernels_parser(sub)
    for command in sub.choices.values():
        add_verbose(command, top=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """`fuel ...`: every error goes through the one boundary (tools/errors.py)."""
    return run_parser("fuel", build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
