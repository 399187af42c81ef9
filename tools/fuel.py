"""The `fuel` command line.

    fuel run MODULE.mlir|MODEL.onnx|BUNDLE [--input NAME=FILE.npy ...] [--random-inputs --seed N]
             [--output-dir DIR] [--repeat N] [--weights FILE.safetensors]
             [--target cpu|sm_XY] [--emulate]
    fuel compile MODULE.mlir|MODEL.onnx -o OUT[.fuelbundle] [--target cpu|sm_90 ...]
             [--topology FILE] [--precision SPEC] [--no-optimize] [--format auto|dir|archive]
             [--option [TARGET:]KEY=VALUE ...] [--dump-dir DIR] [--time-passes]

A compile shows its stages (`passes.instrument`, `tools.stages`): `--dump-dir` writes one
numbered file per stage, `--time-passes` prints their times, `FUEL_LOG=info` logs them, and on
a terminal a compile longer than ~2 s shows its stage and a progress bar.

Every failure is one readable message on stderr and a non-zero exit, never a traceback unless
`--verbose` asks for it (the boundary and its exit codes: tools/errors.py).
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import importlib.metadata
import math
import os
import re
import stat
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lowering.bundle import compile_module, load_bundle, write_bundle
from lowering.cpu.specialize import shape_finisher
from lowering.kernel_source import KernelSourceError, check_kernel_sources
from passes.instrument import run_stage
from runtime import knobs
from runtime.bundle import MANIFEST, is_bundle, read_container
from runtime.dtypes import FLOAT_DTYPES, NUMPY_DTYPES, from_numpy, to_numpy
from runtime.fsutil import atomic_write_bytes
from runtime.module import FuelModule
from runtime.shape_specialize import SymbolicExecutor, make_executor
from runtime.signing import load_private_key, load_public_keys
from tools.errors import ArgumentParser, CliError, add_verbose, run_parser
from tools.explain import add_explain_parser
from tools.import_onnx import add_import_parser, add_input_shape_flag, load_any
from tools.judge import add_judge_parser
from tools.kernels import add_kernels_parser, add_verify_kernels_parser
from tools.keygen import add_keygen_parser
from tools.stages import compile_view

_INLINE = re.compile(r"(?P<shape>(?:\d+x)*)(?P<dtype>[a-z]+\d*)=(?P<values>.*)", re.S)


def inline_array(spec: str) -> np.ndarray | None:
    """`2x3xf32=1,2,3,4,5,6` (iree-run-module's form; one value fills the shape, `f32=1.5` is
    a scalar) as an array; None when `spec` does not have that form."""
    m = _INLINE.fullmatch(spec)
    if m is None or m.group("dtype") not in NUMPY_DTYPES:
        return None
    shape = tuple(int(d) for d in m.group("shape").split("x") if d)
    dt = to_numpy(m.group("dtype"))
    try:
        raw = [v.strip() for v in m.group("values").split(",")]
        vals = [v.lower() in ("1", "true") if dt == np.bool_ else v for v in raw]
        flat = np.array(vals, dtype=np.float64 if dt.kind == "f" else None).astype(dt)
    except (ValueError, OverflowError) as e:
        raise CliError(f"--input {spec!r}: {e}") from None
    n = math.prod(shape)
    if flat.size == 1:
        return np.full(shape, flat[0], dt)
    if flat.size != n:
        raise CliError(f"--input {spec!r}: {flat.size} values for shape {list(shape)} ({n})")
    return flat.reshape(shape)


def _parse_inputs(specs: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
    """`--input NAME=FILE.npy`, `NAME=@FILE.npy` or `NAME=2x3xf32=1,2,3,4,5,6` (inline) ...
    -> {NAME: (where it came from, array)}."""
    inputs: dict[str, tuple[str, np.ndarray]] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise CliError(
                f"--input expects NAME=FILE.npy or NAME=SHAPExDTYPE=VALUES, got '{spec}'"
            )
        if name in inputs:
            raise CliError(f"--input {name} is given twice")
        inline = None if value.startswith("@") else inline_array(value)
        if inline is not None:
            inputs[name] = (f"--input {name}", inline)
            continue
        path = value.removeprefix("@")
        inputs[name] = (path, _load_npy(name, path))
    return inputs


def _check_inputs(ex: Any, given: dict[str, tuple[str, np.ndarray]]) -> None:
    """Each given input has its graph input's dtype and shape, else an error naming its file
    (the executor would say the same without the file)."""
    specs = dict(zip(ex.input_names, ex.input_specs, strict=True))
    symbolic = isinstance(ex, SymbolicExecutor)  # any shape in the dims' ranges: checked at run
    for name, (path, a) in given.items():
        dt, shape = specs.get(name, (a.dtype, a.shape))
        if a.dtype != dt or (a.shape != shape and not symbolic):
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


def _output_files(specs: Sequence[str], names: Sequence[str]) -> dict[str, Path]:
    """`--output [NAME=]@FILE.npy`: named ones by name, the others in output order."""
    out: dict[str, Path] = {}
    order = iter(names)
    for spec in specs:
        name, sep, target = spec.rpartition("=") if "=" in spec else ("", "", spec)
        if not target.startswith("@") or len(target) < 2:
            raise CliError(f"--output expects [NAME=]@FILE.npy, got '{spec}'")
        if not name:
            name = next((n for n in order if n not in out), "")
            if not name:
                raise CliError(f"--output {spec!r}: more --output files than outputs")
        elif name not in names:
            raise CliError(f"--output {spec!r}: no output '{name}' (outputs: {', '.join(names)})")
        out[name] = Path(target[1:])
    return out


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


def load_program(args: argparse.Namespace) -> FuelModule:
    """The module `args.module` names (IR or ONNX), refused if a generated kernel in it holds a
    source this fuel would not write from its ops, unless `--allow-kernel-source` (IR read
    from a file is data, not code: docs/bundles.md)."""
    module = load_any(args.module, args.weights, args.input_shape, args.dim)
    if not args.allow_kernel_source:
        try:
            check_kernel_sources(module.op, args.module)
        except KernelSourceError as e:
            raise CliError(f"{e}; --allow-kernel-source runs it as written") from None
    return module


def _executor(args: argparse.Namespace):  # noqa: ANN202
    """A bundle (directory or archive) runs its verified module; anything else is loaded."""
    if is_bundle(args.module):
        if args.weights:
            raise CliError("--weights does not apply to a bundle (it carries its weights)")
        plan_flags = (args.topology, args.precision, args.no_optimize, args.run_option, args.hint)
        if any(plan_flags) or args.input_shape or args.dim:
            raise CliError(
                "--topology, --precision, --no-optimize, --option, --hint, --input-shape and --dim "
                "apply to IR and ONNX input; a bundle runs the plan it was compiled with"
            )
        if args.allow_kernel_source:
            raise CliError(
                "--allow-kernel-source applies to IR files; a bundle runs kernel sources it "
                "ships only when signed by a key you trust (--trust KEYFILE)"
            )
        emulate = True if args.emulate else None  # None: FUEL_EMULATE_GPU decides
        trusted = load_public_keys(args.trust)
        bundle = load_bundle(args.module, emulate, trusted=trusted)
        return bundle.executor(args.target, emulate, args.function)
    if args.target or args.emulate or args.trust:
        raise CliError("--target, --emulate and --trust apply to a bundle only")
    options = _plan_options(args)
    with compile_view():
        module, _ = compile_module(load_program(args), options)
    return make_executor(module, args.function, finish=shape_finisher(options))


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
    files = _output_files(args.output, ex.output_names)
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
        if name in files:
            atomic_write_bytes(files[name], _npy_bytes(a))
    med = statistics.median(times)
    print(f"ran {len(ex)} kernels, {len(times)} run(s), median {med * 1e3:.3f} ms/run")
    if args.profile:
        _print_specializations(ex)
        _print_profile(ex.profile_items(inputs, max(5, args.repeat)))
    return 0


def _print_specializations(ex: Any) -> None:
    """What each new input shape of a module with dim symbols cost on its first run."""
    phases = getattr(ex, "phases", [])
    for i, (env, secs) in enumerate(getattr(ex, "specializations", ())):
        dims = ", ".join(f"{k}={v}" for k, v in env)
        parts = ", ".join(
            f"{k} {v * 1e3:.1f}" for k, v in (phases[i] if i < len(phases) else {}).items()
        )
        print(f"specialized for {dims}: {secs * 1e3:.1f} ms (first run of this shape: {parts} ms)")


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


def _plan_options(args: argparse.Namespace) -> dict[str, str]:
    """The cpu backend options of --topology, --precision, --no-optimize and (for `fuel run`,
    which builds only the cpu plan) --option KEY=VALUE."""
    opts = {k: v for k, v in (("topology", args.topology), ("precision", args.precision)) if v}
    if args.no_optimize:
        opts["optimize"] = "0"
    if args.hint:
        opts["hint"] = ",".join(args.hint)
    for spec in getattr(args, "run_option", ()):
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise CliError(f"--option expects KEY=VALUE, got '{spec}'")
        opts[key] = value
    return opts


def _compile_options(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Per-target backend options: --topology/--precision/--no-optimize go to "cpu";
    `--option KEY=VALUE` to every target, `--option TARGET:KEY=VALUE` to one."""
    opts: dict[str, dict[str, str]] = {t: {} for t in args.target}
    if "cpu" in opts:
        opts["cpu"].update(_plan_options(args))
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
    key = load_private_key(args.sign) if args.sign else None  # a bad key fails before compiling
    with compile_view(args.dump_dir, args.time_passes):
        module = run_stage("load", lambda _: load_program(args), args.module)
        out = write_bundle(
            module, args.output, args.target, options, args.format, "fuel compile", sign_key=key
        )
    files = read_container(out)
    targets = json.loads(files[MANIFEST])["targets"]
    kernels = ", ".join(f"{t} {len(v['kernels'])} kernels" for t, v in targets.items())
    form = "archive" if out.is_file() else "directory"
    size = sum(map(len, files.values())) if form == "directory" else out.stat().st_size
    signed = " (signed)" if key is not None else ""
    print(f"compiled {args.module} -> {out} ({form}, {size / 2**10:.1f} KiB{signed}): {kernels}")
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
    _add_plan_flags(c)
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
    c.add_argument(
        "--sign",
        metavar="KEY",
        help="sign the bundle with this private key (fuel keygen): whoever trusts its public "
        "key may run the binaries the bundle ships",
    )
    _add_allow_kernel_source(c)
    c.add_argument(
        "--dump-dir",
        metavar="DIR",
        help="write what each stage made to DIR, numbered: the IR after each stage "
        "(00-load.mlir, ...-picked.mlir, ...), generated kernel sources, the picker record",
    )
    c.add_argument(
        "--time-passes", action="store_true", help="print each stage's wall time on stderr"
    )
    c.set_defaults(fn=cmd_compile)


def _add_plan_flags(p: Any) -> None:
    """The flags that shape the cpu plan, shared by `fuel compile` and `fuel run`."""
    add_input_shape_flag(p)
    p.add_argument("--topology", help="declared topology the picker plans for (TOML/JSON)")
    p.add_argument("--precision", default="", help="precision floor, e.g. bit_stable,ulp=2")
    p.add_argument(
        "--hint",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="price dim symbol NAME at SIZE (clamped to its range; default 64), e.g. seq=128",
    )
    p.add_argument(
        "--no-optimize", action="store_true", help="skip fuel-optimize (kernels are still stamped)"
    )


def _add_allow_kernel_source(p: Any) -> None:
    p.add_argument(
        "--allow-kernel-source",
        action="store_true",
        help="accept generated kernels (fuel.c_kernel, fuel.triton_kernel) whose source is not "
        "what fuel writes from their ops: the IR file is then trusted like a program",
    )


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
    r = sub.add_parser(
        "run",
        help="run a module (fuel IR, ONNX or a bundle); IR and ONNX are compiled for the cpu "
        "first, as fuel compile does (--no-optimize skips fuel-optimize)",
    )
    r.add_argument("module", help="fuel IR (.mlir), ONNX model (.onnx) or kernel bundle")
    r.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an input: NAME=FILE.npy, NAME=@FILE.npy, or inline NAME=2x3xf32=1,2,3,4,5,6 "
        "(one value fills the shape)",
    )
    r.add_argument(
        "--random-inputs",
        action="store_true",
        help="fill inputs not given with --input from a seeded generator",
    )
    r.add_argument("--function", help="the function to run (default: @main, or the only one)")
    r.add_argument(
        "--seed", type=_at_least(0), default=0, help="the --random-inputs generator's seed"
    )
    r.add_argument("--output-dir", help="write each output as DIR/<name>.npy")
    r.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="[NAME=]@FILE.npy",
        help="write an output to FILE.npy (unnamed ones in output order); repeatable",
    )
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
    r.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="KEYFILE",
        help="public key(s) (fuel keygen's .pub): a bundle signed by one may run the binaries "
        "it ships (e.g. where no C compiler is); repeatable",
    )
    _add_allow_kernel_source(r)
    _add_plan_flags(r)
    r.add_argument(
        "--option",
        dest="run_option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a cpu backend option for IR and ONNX input (e.g. codegen=none), as fuel compile",
    )
    r.set_defaults(fn=cmd_run)
    _add_compile_parser(sub)
    add_import_parser(sub)
    add_judge_parser(sub)
    add_explain_parser(sub)
    add_kernels_parser(sub)
    add_verify_kernels_parser(sub)
    add_keygen_parser(sub)
    for command in sub.choices.values():
        add_verbose(command, top=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """`fuel ...`: every error goes through the one boundary (tools/errors.py)."""
    return run_parser("fuel", build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
