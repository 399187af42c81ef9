"""Shared plumbing of the picker passes: options -> `PlanOptions`, plan -> IR attributes.

Each picker pass is a thin wrapper: it runs `compile_plan` and writes the part of the plan
its stage owns. Earlier decisions in the IR (`fuel.alternatives`, `fuel.device`,
`fuel.kernel`) are recomputed, never trusted; `fuel.pin` is a user's hard placement.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import ALTERNATIVES_ATTR, CandidateAttr, placed_device
from fuel_dialect.shapes import unknown_hints
from passes.environment import PassEnvironment, table_or_default
from passes.picker.plan import (
    Decision,
    ExecutionPlan,
    PlanError,
    PlanOptions,
    backend_notes,
    compile_plan,
    topology_kernels,
)
from passes.picker.ranker import Candidate, PrecisionRequirement
from runtime.judge import ProfileJudgeOracle, default_report_path, load_report
from runtime.topology import SystemTopology, TopologyError
from runtime.topology_file import load_file


def parse_hints(text: str) -> dict[str, int]:
    """`seq=128,batch=2` -> {"seq": 128, "batch": 2}; `ValueError` saying what is wrong."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or not name or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"bad hint '{part}' (expected NAME=SIZE, SIZE a positive integer)")
        out[name] = int(value)
    return out


@dataclass(frozen=True)
class PickerOptions:
    """Options every picker pass accepts (`fuel-opt -p 'fuel-place{topology=m.toml}'`)."""

    topology: str = ""
    """Declared topology file (TOML/JSON); empty: detect this machine."""
    precision: str = ""
    """Precision floor, e.g. `bit_stable,ulp=2` (empty: unconstrained)."""
    judge: str = ""
    """Judge report path; empty: the default report if present, `none` to disable."""
    default_device: str = "cpu"
    """Where graph inputs live and outputs return."""
    hint: str = ""
    """Sizes to price dim symbols at, `seq=128,batch=2` (each clamped to its range); a symbol
    not named is priced at `fuel_dialect.shapes.DIM_HINT` clamped to its range."""

    def plan_options(self, env: PassEnvironment | None = None) -> PlanOptions:
        """These options resolved in `env` (its table, and its topology where `topology`
        names no file; default: the process-wide table, this machine's devices)."""
        env = env or PassEnvironment()
        try:
            topo = self._topology(env)
            req = PrecisionRequirement.parse(self.precision)
            hints = tuple(sorted(parse_hints(self.hint).items()))
        except (TopologyError, ValueError) as e:
            raise PassFailedException(str(e)) from None
        if env.bindings is None:  # before the Judge's snapshot of the table
            _note_once(backend_notes(topo, topology_kernels(topo)))
        return PlanOptions(
            topology=topo,
            precision=req,
            judge=_judge(self.judge, env),
            default_device=self.default_device,
            table=env.bindings,
            hints=hints,
        )

    def _topology(self, env: PassEnvironment) -> SystemTopology:
        if self.topology:
            return load_file(self.topology)
        return env.topology if env.topology is not None else SystemTopology.detect()


_NOTED: set[str] = set()


def _note_once(notes: list[str]) -> None:
    """Say on stderr, once per process, which devices have no kernels (a backend that could not
    load): their ops go elsewhere, and the output alone would not say why."""
    for note in notes:
        if note not in _NOTED:
            _NOTED.add(note)
            print(f"fuel: note: {note}", file=sys.stderr)


def _judge(spec: str, env: PassEnvironment) -> ProfileJudgeOracle | None:
    if spec == "none":
        return None
    path = Path(spec) if spec else default_report_path()
    report = load_report(path)
    return None if report is None else ProfileJudgeOracle(report, table_or_default(env.bindings))


def plan_module(
    module: ModuleOp, options: PickerOptions, env: PassEnvironment | None = None
) -> list[ExecutionPlan]:
    """One plan per function of the module (each planned on its own) in `env`."""
    opts = options.plan_options(env)
    functions = [f for f in module.ops if isinstance(f, func.FuncOp)]
    if (why := unknown_hints(functions, dict(opts.hints))) is not None:
        raise PassFailedException(why)
    try:
        return [compile_plan(module, opts, f) for f in functions]
    except (PlanError, TopologyError) as e:  # e.g. a pin naming a device the topology lacks
        raise PassFailedException(str(e)) from None


def decisions(plans: list[ExecutionPlan]) -> list[tuple[Operation, Decision]]:
    return [(op, d) for p in plans for op, d in p.decisions.items()]


def candidate_attr(c: Candidate, verdict: str | None = None) -> CandidateAttr:
    return CandidateAttr.get(
        c.kernel_source,
        c.backend,
        c.device,
        c.entry.revision_hash,
        c.static_ns,
        c.judge_ns,
        c.inbound_transfer_ns,
        verdict or c.verdict,
    )


def verdicts(d: Decision) -> list[CandidateAttr]:
    """Every candidate the ranker saw, ranked: winner, kept, pruned, other-device, rejected."""
    out = []
    for c in d.considered:
        if c.device == d.device:
            i = next(
                (
                    j
                    for j, k in enumerate(d.alternatives.candidates)
                    if k.entry is c.entry and k.backend == c.backend
                ),
                None,
            )
            verdict = "winner" if i == 0 else "kept" if i is not None else "pruned:frontier"
        else:
            verdict = "other-device"
        out.append(candidate_attr(c, verdict))
    out += [candidate_attr(c) for c in d.alternatives.rejected]
    return out


def clear_decisions(module: ModuleOp) -> None:
    """Drop the picker's previous decisions on the ops it re-decides: the top-level ops of each
    function. Stamps inside branch arms belong to the pass that built the arm (e.g. the flash
    kernel of a decode-flash arm) and are kept."""
    for f in module.ops:
        if not isinstance(f, func.FuncOp):
            continue
        for op in f.body.block.ops:
            for name in (ALTERNATIVES_ATTR, DEVICE_ATTR, KERNEL_ATTR):
                op.attributes.pop(name, None)


def candidate_backends(op: Operation, topology: SystemTopology) -> set[str]:
    """Backends of the devices `op` may run on: its placed device's (none if that device is
    not in the topology), else every device's."""
    device = placed_device(op)
    if device is None:
        return {b for d in topology.devices for b in d.backends}
    try:
        return set(topology.device(device).backends)
    except TopologyError:
        return set()


def stamp_device(op: Operation, device: str) -> None:
    op.attributes[DEVICE_ATTR] = DeviceAttr(device)


def stamp_kernel(op: Operation, c: Candidate) -> None:
    assert isinstance(op, KernelOp)
    op.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        op.KERNEL_OP, op.kernel_dtypes(), c.backend, c.kernel_source, c.entry.revision_hash
    )


def write_alternatives(op: Operation, cands: list[CandidateAttr]) -> None:
    op.attributes[ALTERNATIVES_ATTR] = ArrayAttr(cands)
