"""ONNX's own backend node tests, run through fuel: import -> compile -> run -> compare.

    python -m tools.onnx_conformance [-v] [-k SUBSTRING] [--through bundle|executor]

`onnx.backend.test.case.node.collect_testcases()` yields each case in memory: a one-node (or
expanded-function) model, inputs and expected outputs. Each case goes `through`:

* `bundle` (the default): the imported module is compiled to a CPU kernel bundle in memory
  (`lowering.bundle.build_bundle`: `fuel-optimize`, then the CPU backend stamps every kernel),
  written to a scratch directory (tmpfs where there is one; no fsync: it is read back at once
  and deleted), loaded and verified by `lowering.bundle.load_bundle`, and run by its executor:
  the path `fuel compile` + `fuel run` take, with the picker's rewrites and fused kernels.
* `executor`: the imported module straight on the `Executor` (no optimization): for telling an
  importer bug from a compiler bug.

The bundle is planned for a declared CPU-only topology (`CPU_TOPOLOGY`), so the picker's
choices, and the counts, do not depend on the GPUs of the machine running the suite.

A case is

* `passed`      when it imports and every output of every data set matches,
* `unsupported` when the import raises `OnnxImportError` (an op, attribute, dtype or dynamic
  shape fuel does not take: the clear error the importer promises),
* `failed`      otherwise: wrong values, dtypes or shapes, or any other exception (a crash).

Tolerances (`TOLERANCE`) are per output dtype: float results must agree to
|got - want| <= atol + rtol |want| with NaN at the same positions and infinities equal; integer
and boolean results must be equal. The cases' own rtol/atol (1e-3 / 1e-7 for every case in
onnx 1.23) are looser than these for f32/f64 and are not used.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from frontends.onnx.driver import import_onnx
from frontends.onnx.errors import OnnxImportError
from lowering.bundle import build_bundle, load_bundle
from runtime.executor import Executor

TOLERANCE: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
}
"""(rtol, atol) by output dtype. The expected values are computed by numpy, mostly in the
output dtype itself, while fuel rounds transcendentals once from f64 (f16/bf16 via f32): about
two ulps of the dtype apart, plus summation order in reductions. f32 rtol 1e-5 is ~80 ulp;
f16 2e-3 and bf16 1.6e-2 are ~2 ulp."""


CPU_TOPOLOGY = '[[devices]]\nname = "cpu"\n'
"""The topology the bundles are planned for: the host alone, with the documented CPU prior."""

Feed = Mapping[str, Any]
Runner = Callable[[Any, Feed], dict[str, Any]]
"""Runs an imported module on the feed (graph inputs not frozen) -> outputs by name."""


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome and, unless it passed, why."""

    name: str
    status: str
    message: str = ""


@dataclass
class ConformanceReport:
    """Every case's result and the counts by status."""

    results: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0
    through: str = "bundle"

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def passed(self) -> int:
        return self.count("passed")

    @property
    def failed(self) -> int:
        return self.count("failed")

    @property
    def unsupported(self) -> int:
        return self.count("unsupported")

    def summary(self) -> str:
        return (
            f"ONNX node conformance: {self.passed} passed, {self.failed} failed, "
            f"{self.unsupported} unsupported of {len(self.results)} cases "
            f"through the {self.through} ({self.seconds:.1f} s)"
        )


def collect_cases() -> list[Any]:
    """ONNX's node test cases (their generators warn about deliberate overflows: silenced)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return list(collect_testcases())


def run_case(case: Any, run: Runner | None = None) -> CaseResult:
    """Import, run (`run`; default: straight on the executor) and compare one case (imported
    once per data set: see `import_case`)."""
    run = run if run is not None else run_on_executor
    outputs = [o.name for o in case.model.graph.output]
    for inputs, expected in case.data_sets:
        feed = {vi.name: as_array(a) for vi, a in zip(case.model.graph.input, inputs, strict=False)}
        try:
            module, frozen = import_case(case.model, feed)
        except OnnxImportError as e:
            return CaseResult(case.name, "failed" if e.internal else "unsupported", str(e))
        except Exception as e:  # noqa: BLE001 - anything but the promised error is a failure
            return CaseResult(case.name, "failed", f"import crashed: {type(e).__name__}: {e}")
        try:
            got = run(module, {k: v for k, v in feed.items() if k not in frozen})
            for name, want in zip(outputs, expected, strict=True):
                problem = compare(got[name], as_array(want))
                if problem:
                    return CaseResult(case.name, "failed", f"output '{name}': {problem}")
        except Exception as e:  # noqa: BLE001
            return CaseResult(case.name, "failed", f"{type(e).__name__}: {e}")
    return CaseResult(case.name, "passed")


def run_on_executor(module: Any, feed: Feed) -> dict[str, Any]:
    """The imported module as is, on the CPU executor."""
    return Executor(module).run(dict(feed))


@dataclass(frozen=True)
class BundleRunner:
    """Compiles each module to a CPU bundle (see the module doc) in `scratch`, loads it, runs
    it; `scratch` also holds the topology file the bundles are planned for."""

    scratch: Path

    def __post_init__(self) -> None:
        (self.scratch / "topology.toml").write_text(CPU_TOPOLOGY)

    @property
    def options(self) -> dict[str, dict[str, str]]:
        return {"cpu": {"topology": str(self.scratch / "topology.toml"), "judge": "none"}}

    def __call__(self, module: Any, feed: Feed) -> dict[str, Any]:
        files = build_bundle(module, ("cpu",), self.options, "tools.onnx_conformance")
        with tempfile.TemporaryDirectory(prefix="bundle.", dir=self.scratch) as d:
            for name, data in files.items():
                path = Path(d, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            executor = load_bundle(d).executor()
        return executor.run(dict(feed))


def scratch_root() -> str | None:
    """A tmpfs directory for the bundles when the machine has one (no disk writes), else the
    system's temp directory (None)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


def import_case(model: Any, feed: dict[str, np.ndarray]) -> tuple[Any, set[str]]:
    """Import, freezing to their data-set values the graph inputs the importer needs as
    constants (the shape of a Reshape, the axes of a reduction, ...: static in fuel, inputs in
    these tests). Returns the module and the frozen input names."""
    frozen: dict[str, np.ndarray] = {}
    while True:
        try:
            return import_onnx(model, constants=frozen), set(frozen)
        except OnnxImportError as e:
            name = e.constant_input
            if name is None or name in frozen or name not in feed:
                raise
            frozen[name] = feed[name]


def as_array(v: Any) -> Any:
    """A data-set entry (numpy array or scalar, or a TensorProto) as an array."""
    import onnx
    from onnx import numpy_helper

    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    return v if isinstance(v, list | dict) or v is None else np.asarray(v)  # sequences stay


def compare(got: np.ndarray, want: np.ndarray) -> str:
    """'' when `got` matches `want` (see the module docstring), else what differs."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.dtype.name not in TOLERANCE:
        bad = got != want
    else:
        r, a = TOLERANCE[want.dtype.name]
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = np.abs(g - w) <= a + r * np.abs(w)
        same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(w) & (g == w))
        bad = ~np.where(np.isfinite(w), close, same_special)
    if not bad.any():
        return ""
    i = tuple(np.argwhere(bad)[0])
    return (
        f"{int(bad.sum())} of {bad.size} values differ, e.g. at {list(i)}: got {got[i]}, "
        f"want {want[i]}"
    )


THROUGH = ("bundle", "executor")
"""The ways a case can run (see the module doc)."""


def run_conformance(
    cases: Sequence[Any] | None = None, pattern: str = "", through: str = "bundle"
) -> ConformanceReport:
    """Run every collected case (or `cases`) whose name contains `pattern`, `through` a
    compiled bundle or straight on the executor."""
    if through not in THROUGH:
        raise ValueError(f"through={through!r}: expected one of {', '.join(THROUGH)}")
    t0 = time.perf_counter()
    report = ConformanceReport(through=through)
    with tempfile.TemporaryDirectory(prefix="fuel-conformance.", dir=scratch_root()) as d:
        run: Runner = BundleRunner(Path(d)) if through == "bundle" else run_on_executor
        with np.errstate(all="ignore"):
            for case in collect_cases() if cases is None else cases:
                if pattern in case.name:
                    report.results.append(run_case(case, run))
    report.seconds = time.perf_counter() - t0
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="list failed/unsupported cases")
    p.add_argument("-k", default="", help="only cases whose name contains this")
    p.add_argument(
        "--through",
        choices=THROUGH,
        default="bundle",
        help="bundle: import -> compile -> load -> run (default); executor: import -> "
        "run, unoptimized (to tell importer bugs from compiler bugs)",
    )
    args = p.parse_args(argv)
    report = run_conformance(pattern=args.k, through=args.through)
    if args.verbose:
        for r in report.results:
            if r.status != "passed":
                print(f"{r.status:11} {r.name}: {r.message}")
    unsupported = Counter(
        r.message.split(":")[0] for r in report.results if r.status == "unsupported"
    )
    if args.verbose:
        print(f"unsupported reasons (top 10): {unsupported.most_common(10)}")
    print(report.summary())
    return 0 if report.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
