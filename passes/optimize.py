"""`fuel-optimize`: the driver — pathfinders add routes, optimizers prune them, in lock step.

    fix dtypes -> canonicalize -> plan -> (pathfinder, every optimizer)* -> stamp -> bake variants
               -> residency copies -> dim branches -> fix layouts

Each step is a stage (`passes.instrument`), named after the pass it runs where there is one:
`topology` (detected or read, with the kernel tables and the Judge), `fuel-fix-dtypes`,
`fuel-canonicalize`, `plan`, then per pathfinder its name and each optimizer's
(`fuel-fork-placements`, `fuel-converge-frontier`, `fuel-emit-decode-flash`, ...), `picked`
(the winners stamped), `fuel-bake-variants`, `copies` (single-device edges),
`fuel-insert-residency` (with a `budget`), `fuel-emit-dim-branches` (a same-device variant
gated on a `?` dim where an op's best kernel at its symbol's low end is not the hint's),
`fuel-fix-layouts`. `fuel-opt --print-ir-after-all` and `--dump-dir` show the IR after each,
`--time-passes` and `FUEL_LOG=info` their times.

Residency copies are `fuel.copy` pairs that evict tensors to the host and reload them, inserted
only when a `budget` is set (`fuel-insert-residency`'s planner); an unreachable budget fails.

A **pathfinder** adds arms and never removes a path; an **optimizer** merges or prunes arms and
never removes the last route. Running every optimizer right after each pathfinder ("prune as
you go") bounds the path set. The optimized form is the module itself; `OptimizedGraph` is a
view over it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Protocol

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fuel_dialect.attrs import KERNEL_ATTR
from fuel_dialect.branch import BranchOp, YieldOp
from passes import get_all_passes
from passes.bake_variants import BakeVariantsPass
from passes.canonicalize import canonicalize
from passes.converge_frontier import converge
from passes.emit_decode_flash import EmitDecodeFlashPass
from passes.emit_dim_branches import EmitDimBranchesPass
from passes.environment import PassEnvironment, environment, pass_context
from passes.fork_placements import fork_placements
from passes.fuse_patterns import fuse_patterns
from passes.insert_residency import insert_residency
from passes.instrument import expect, stage
from passes.picker.plan import ExecutionPlan, PlanOptions
from passes.picker.residency import ResidencyError, ResidencyReport, parse_budgets
from passes.picker.support import (
    PickerOptions,
    clear_decisions,
    plan_module,
    stamp_device,
    stamp_kernel,
    verdicts,
    write_alternatives,
)
from passes.select import insert_copies
from runtime.topology import SystemTopology


@dataclass(frozen=True)
class OptimizeOptions(PickerOptions):
    """The picker options plus what only the whole pipeline does."""

    budget: str = ""
    """Per-device memory budgets, as `fuel-insert-residency{budget=...}` (`cuda:0=2GiB,cpu=8GiB`;
    a bare size is `default_device`'s); empty: no residency copies."""


class BudgetUnreachable(PassFailedException):
    """A `budget` that residency copies cannot meet; `report` says per device why."""

    def __init__(self, report: ResidencyReport):
        self.report = report
        super().__init__(str(report))


@dataclass
class OptimizationContext:
    """What pathfinders and optimizers share: one plan per function (kept current by the
    pathfinders that restructure it) and the options they were made with."""

    plans: list[ExecutionPlan]
    options: PickerOptions
    plan_options: PlanOptions
    env: PassEnvironment = field(default_factory=PassEnvironment)
    """The table and topology the passes run with (`passes.environment`)."""


class Pathfinder(Protocol):
    """Adds routes (branch arms); never removes one."""

    name: str

    def propose(self, module: ModuleOp, ctx: OptimizationContext) -> None: ...


class Optimizer(Protocol):
    """Merges or prunes routes; never removes the last one."""

    name: str

    def prune(self, module: ModuleOp, ctx: OptimizationContext) -> None: ...


@dataclass
class PlacementForkPathfinder:
    """`fuel-fork-placements` over the context's plans."""

    runners_up: int = 1
    name: str = "fuel-fork-placements"

    def propose(self, module: ModuleOp, ctx: OptimizationContext) -> None:
        for plan in ctx.plans:
            fork_placements(plan, self.runners_up)


@dataclass
class DecodeFlashPathfinder:
    """`fuel-emit-decode-flash`: a gated flash-decoding variant arm per one-query attention."""

    name: str = "fuel-emit-decode-flash"

    def propose(self, module: ModuleOp, ctx: OptimizationContext) -> None:
        with_options(EmitDecodeFlashPass, ctx.options).apply(pass_context(ctx.env), module)


@dataclass
class FusePatternsPathfinder:
    """`fuel-fuse-patterns`: a variant arm with the registered fused op (softmax, rms_norm,
    layer_norm, rope, attention, matmul + bias + activation, SiLU-gated MLP) per
    self-contained primitive match. The matched ops move unchanged into arm 0
    and keep their identity, so the plans' decisions (keyed by op) still find them to stamp."""

    name: str = "fuel-fuse-patterns"

    def propose(self, module: ModuleOp, ctx: OptimizationContext) -> None:
        fuse_patterns(module, table=ctx.env.bindings)


@dataclass
class FrontierConvergenceOptimizer:
    """`fuel-converge-frontier`: merge forward-identical arms, drop routes arm 0 already is,
    and prune arms another kept arm dominates (priced with the driver's topology and Judge)."""

    name: str = "fuel-converge-frontier"

    def prune(self, module: ModuleOp, ctx: OptimizationContext) -> None:
        converge(module, ctx.plan_options)


@dataclass
class PassRegistry:
    """The pathfinders and optimizers `optimize_graph` drives, in order."""

    pathfinders: list[Pathfinder] = field(default_factory=list)
    optimizers: list[Optimizer] = field(default_factory=list)


def default_registry(runners_up: int = 1) -> PassRegistry:
    return PassRegistry(
        [PlacementForkPathfinder(runners_up), DecodeFlashPathfinder(), FusePatternsPathfinder()],
        [FrontierConvergenceOptimizer()],
    )


def run_lockstep(module: ModuleOp, ctx: OptimizationContext, registry: PassRegistry) -> None:
    """Each pathfinder, then immediately every optimizer, each a stage named after it; the
    first error aborts."""
    for pathfinder in registry.pathfinders:
        with stage(pathfinder.name, module):
            pathfinder.propose(module, ctx)
        for optimizer in registry.optimizers:
            with stage(optimizer.name, module):
                optimizer.prune(module, ctx)


@dataclass
class OptimizedGraph:
    """A view of the optimized module ("the plan is the graph")."""

    module: ModuleOp
    plans: list[ExecutionPlan]
    residency: ResidencyReport | None = None
    """What the residency copies did (None: no budget was set)."""

    def branch_count(self) -> int:
        return sum(isinstance(op, BranchOp) for op in self.module.walk())

    def dispatch_order(self, plan: ExecutionPlan | None = None) -> list[Operation]:
        """The entry function's ops as run when every branch takes arm 0."""
        block = (plan or self.plans[0]).order[-1].parent_block()
        assert block is not None
        return list(arm0_lowering(block.ops))


def arm0_lowering(ops) -> list[Operation]:  # noqa: ANN001
    out: list[Operation] = []
    for op in ops:
        if isinstance(op, BranchOp):
            out += arm0_lowering(op.arms[0].block.ops)
        elif not isinstance(op, YieldOp):
            out.append(op)
    return out


def with_options(cls: type[ModulePass], options: PickerOptions) -> ModulePass:
    """`cls` built from the options it shares with `options` (a picker pass or a fixup)."""
    mine = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{f.name: getattr(options, f.name) for f in fields(options) if f.name in mine})


def optional_pass(name: str) -> Callable[[ModuleOp, PickerOptions, PassEnvironment], None]:
    """Run pass `name` if it is registered and its module exists (fixups land separately)."""

    def run(module: ModuleOp, options: PickerOptions, env: PassEnvironment) -> None:
        load = get_all_passes().get(name)
        if load is None:
            return
        try:
            cls = load()
        except (ImportError, AttributeError):
            return
        with_options(cls, options).apply(pass_context(env), module)

    return run


def stamp(plans: list[ExecutionPlan]) -> None:
    """fuel-select's commit: every live decision point gets its winner and its verdicts."""
    for plan in plans:
        for node, d in plan.decisions.items():
            stamp_device(node, d.device)
            stamp_kernel(node, d.winner)
            write_alternatives(node, verdicts(d))


def stamp_new_ops(module: ModuleOp, options: PickerOptions, env: PassEnvironment) -> None:
    """Stamp the top-level ops a pathfinder made after planning and bake then chose (e.g. the
    fused op of a fuse-patterns arm): they had no decision in the first plans. Ops already
    stamped keep their stamps, so a second `fuel-optimize` run finds nothing to change."""
    fresh = [
        (op, d)
        for p in plan_module(module, options, env)
        for op, d in p.decisions.items()
        if KERNEL_ATTR not in op.attributes
    ]
    for node, d in fresh:
        stamp_device(node, d.device)
        stamp_kernel(node, d.winner)
        write_alternatives(node, verdicts(d))


def live(plan: ExecutionPlan) -> ExecutionPlan:
    """`plan` without the decision points a pathfinder replaced (e.g. by a variant branch)."""
    return replace(
        plan, decisions={op: d for op, d in plan.decisions.items() if op.parent_block() is not None}
    )


def optimize_graph(
    module: ModuleOp,
    options: PickerOptions | None = None,
    registry: PassRegistry | None = None,
    env: PassEnvironment | None = None,
) -> OptimizedGraph:
    """Optimize `module` in place (see the module doc for the stages) and return its view;
    `env`: the binding table and topology to plan with (default: the process-wide ones)."""
    options = options if options is not None else PickerOptions()
    env = env if env is not None else PassEnvironment()
    registry = registry if registry is not None else default_registry()
    lockstep = len(registry.pathfinders) * (1 + len(registry.optimizers))
    expect(9 + lockstep + bool(options.budget if isinstance(options, OptimizeOptions) else 0))
    with stage("topology"):  # detected or read; the kernel tables and the Judge loaded
        plan_opts = options.plan_options(env)
        assert plan_opts.topology is not None
        budgets = _budgets(options, plan_opts.topology)  # a bad budget fails before any work
    with stage("fuel-fix-dtypes", module):
        optional_pass("fuel-fix-dtypes")(module, options, env)
    with stage("fuel-canonicalize", module):
        canonicalize(module)  # exporter variants -> the forms the fused-op matchers know
    with stage("plan", module):
        plans = plan_module(module, options, env)
        clear_decisions(module)
    ctx = OptimizationContext(plans, options, plan_opts, env)
    run_lockstep(module, ctx, registry)
    with stage("picked", module):
        plans = [live(p) for p in plans]
        stamp(plans)
    with stage("fuel-bake-variants", module):
        with_options(BakeVariantsPass, options).apply(pass_context(env), module)
        stamp_new_ops(module, options, env)
    with stage("copies", module):
        for plan in plans:
            insert_copies(plan, plan_opts.topology, options.default_device)
    residency = None
    if budgets:
        with stage("fuel-insert-residency", module):
            residency = fit_residency(module, budgets, options, plan_opts.topology)
    with stage("fuel-emit-dim-branches", module):  # after copies: the arms read what op did
        opts = with_options(EmitDimBranchesPass, options)
        replace(opts, placements=False).apply(pass_context(env), module)  # type: ignore[type-var]
        plans = [live(p) for p in plans]
    with stage("fuel-fix-layouts", module):
        optional_pass("fuel-fix-layouts")(module, options, env)
    return OptimizedGraph(module, plans, residency)


def _budgets(options: PickerOptions, topology: SystemTopology) -> dict[str, int]:
    """The `budget` option in bytes per device (`{}` when unset or not an `OptimizeOptions`)."""
    text = options.budget if isinstance(options, OptimizeOptions) else ""
    try:
        budgets = parse_budgets(text, options.default_device)
        for device in budgets:
            topology.device(device)  # UnknownDevice names the known ones
    except (ResidencyError, LookupError) as e:
        raise PassFailedException(f"budget: {e}") from None
    return budgets


def fit_residency(
    module: ModuleOp, budgets: dict[str, int], options: PickerOptions, topology: SystemTopology
) -> ResidencyReport:
    """`fuel-insert-residency` at the driver's residency stage, its transfers priced on
    `topology`; `BudgetUnreachable` (with the report) if a device cannot fit."""
    try:
        report = insert_residency(
            module,
            budgets,
            default_device=options.default_device,
            host=topology.host.name,
            topology=topology,
        )
    except ResidencyError as e:
        raise PassFailedException(f"residency: {e}") from None
    if not report.fits:
        raise BudgetUnreachable(report)
    return report


@dataclass(frozen=True)
class OptimizePass(ModulePass, OptimizeOptions):
    """The whole optimize pipeline (`optimize_graph`) with the default pathfinders
    (fork-placements, emit-decode-flash, fuse-patterns) and optimizer (converge-frontier).

    Pre: verified fuel IR. Post: every decision point stamped, variant branches baked,
    placement branches left for the runtime picker, every edge single-device; with a `budget`,
    every budgeted device fits (evict/reload copies), or the pass fails with the residency
    report. Idempotent.
    """

    name = "fuel-optimize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        optimize_graph(op, self, env=environment(ctx))
