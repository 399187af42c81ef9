"""ONNX's own backend node tests, run through fuel: import -> executor -> compare.

    python -m frontends.onnx.conformance [-v] [-k SUBSTRING]

`onnx.backend.test.case.node.collect_testcases()` yields each case in memory: a one-node (or
expanded-function) model, inputs and expected outputs. A case is

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
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frontends.onnx.driver import import_onnx
from frontends.onnx.errors import OnnxImportError

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
        return (f"ONNX node conformance: {self.passed} passed, {self.failed} failed, "
                f"{self.unsupported} unsupported of {len(self.results)} cases "
                f"({self.seconds:.1f} s)")  # fmt: skip


def collect_cases() -> list[Any]:
    """ONNX's node test cases (their generators warn about deliberate overflows: silenced)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return list(collect_testcases())


def run_case(case: Any) -> CaseResult:
    """Import, run and compare one case (imported once per data set: see `import_case`)."""
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
            from runtime.executor import Executor

            got = Executor(module).run({k: v for k, v in feed.items() if k not in frozen})
            for name, want in zip(outputs, expected, strict=True):
                problem = compare(got[name], as_array(want))
                if problem:
                    return CaseResult(case.name, "failed", f"output '{name}': {problem}")
        except Exception as e:  # noqa: BLE001
            return CaseResult(case.name, "failed", f"{type(e).__name__}: {e}")
    return CaseResult(case.name, "passed")


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
    return (f"{int(bad.sum())} of {bad.size} values differ, e.g. at {list(i)}: got {got[i]}, "
            f"want {want[i]}")  # fmt: skip


def run_conformance(cases: Sequence[Any] | None = None, pattern: str = "") -> ConformanceReport:
    """Run every collected case (or `cases`) whose name contains `pattern`."""
    t0 = time.perf_counter()
    report = ConformanceReport()
    with np.errstate(all="ignore"):
        for case in collect_cases() if cases is None else cases:
            if pattern in case.name:
                report.results.append(run_case(case))
    report.seconds = time.perf_counter() - t0
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="list failed/unsupported cases")
    p.add_argument("-k", default="", help="only cases whose name contains this")
    args = p.parse_args(argv)
    report = run_conformance(pattern=args.k)
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
