"""`fuel-fuse-patterns`: offer a registered fused op wherever its primitive pattern occurs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.branch import BranchOp, YieldOp
from fuel_dialect.kernel_body import program_ops
from passes.emit_decode_flash import inside_branch
from passes.environment import environment, table_or_default
from passes.fused.patterns import known_weights
from passes.fused.registry import (
    FusedEntry,
    FusedKernelRegistry,
    FusedMatch,
    default_fused_registry,
)
from passes.picker.plan import is_decision_point
from runtime.binding_table import KernelBindingTable

FUSED_ATTR = "fuel.fused"
"""Discardable attribute on an offered fused op: the registry entry it came from."""


def self_contained(match: FusedMatch) -> bool:
    """All matched ops share the root's block, and every value they make except the root's
    result is read only inside the match (so moving them into an arm changes nothing else)."""
    block = match.root.parent_block()
    if block is None or inside_branch(match.root):
        return False
    ops = set(match.ops)
    for op in match.ops:
        if op.parent_block() is not block:
            return False
        if op is not match.root and any(u.operation not in ops for r in op.results for u in r.uses):
            return False
    return True


def kernel_bound(ops: Sequence[Operation], table: KernelBindingTable) -> bool:
    """Every kernel op of a fused arm has a kernel for its dtypes on some backend of `table`
    (an arm nothing can run is never offered)."""
    backends = table.backends()
    return all(
        any(table.backend_supports(op.KERNEL_OP, op.kernel_dtypes(), b) for b in backends)
        for op in ops
        if is_decision_point(op)
    )


Offer = tuple[FusedEntry, FusedMatch, list[Operation]]
"""A match to offer: its entry, the match, the fused arm's ops (built, not inserted)."""


def find_matches(
    module: ModuleOp, registry: FusedKernelRegistry, table: KernelBindingTable | None = None
) -> list[Offer]:
    """Self-contained matches with a bound kernel, claimed latest root first (so a layer norm
    is claimed whole before the rms-norm shape inside it, an attention before its softmax), no
    op in two matches. The IR is not changed, but each offer's fused ops are built detached
    (they already use the matched inputs): insert them (`offer_fused_arm`) or erase them."""
    table = table_or_default(table)
    entries = registry.entries()
    claimed: set[Operation] = set()
    found: list[Offer] = []
    for root in reversed(list(program_ops(module))):
        if root in claimed:
            continue
        for entry in entries:
            match = entry.pattern(root)
            if match is None or not self_contained(match) or claimed.intersection(match.ops):
                continue
            arm = list(entry.build(match))
            if not kernel_bound(arm, table):
                for op in reversed(arm):
                    op.erase()  # drop the detached ops' uses of the matched inputs
                continue
            claimed.update(match.ops)
            found.append((entry, match, arm))
            break
    return found


def offer_fused_arm(entry: FusedEntry, match: FusedMatch, arm: list[Operation]) -> BranchOp:
    """Replace the matched ops by a variant branch: arm 0 the ops (moved, unchanged), arm 1
    the fused `arm` ops (the last one tagged and yielded). The branch sits where the root was."""
    fused = arm[-1]
    fused.attributes[FUSED_ATTR] = StringAttr(entry.name)
    root = match.root
    result = root.results[0]
    arm0 = Block()
    arms = [Region(arm0), Region(Block([*arm, YieldOp(fused.results[0])]))]
    branch = BranchOp("variant", arms, [result.type])
    Rewriter.insert_op(branch, InsertPoint.before(root))
    result.replace_all_uses_with(branch.outs[0])
    block = root.parent_block()
    assert block is not None
    for op in sorted(match.ops, key=block.get_operation_index):
        op.detach()
        arm0.add_op(op)
    arm0.add_op(YieldOp(result))
    return branch


def fuse_patterns(
    module: ModuleOp,
    registry: FusedKernelRegistry | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
    table: KernelBindingTable | None = None,
) -> int:
    """Offer every registered fused op at its matches; returns the number of branches made.
    `weights` (the module's values by name) lets patterns read them, as a caller's
    `known_weights` scope does; None keeps any scope the caller set. `table`: the kernels a
    match needs one of (default: the process-wide table)."""
    registry = registry if registry is not None else default_fused_registry()
    with known_weights(weights) if weights is not None else nullcontext():
        matches = find_matches(module, registry, table)
    for entry, match, arm in matches:
        offer_fused_arm(entry, match, arm)
    return len(matches)


@dataclass(frozen=True)
class FusePatternsPass(ModulePass):
    """For each match of a registered fused pattern (`passes.fused.registry`: softmax, rms_norm,
    layer_norm, SiLU-gated MLP, matmul + bias + activation, rope, attention from primitives)
    whose interior values are read only inside the match (the root's result may have any
    readers) and whose fused op has a kernel in the binding table, make an ungated
    `fuel.branch variant`: arm 0 the matched primitives, moved unchanged; arm 1 the fused op
    (with any table it needs: a half-width rope table), tagged `fuel.fused`. Which arm runs is
    `fuel-bake-variants`' decision by cost. Weight values are opaque here (the IR does not hold
    them), so a rope whose tables are rows of a weight matches only in-process, under
    `passes.fused.patterns.known_weights` or `fuse_patterns(..., weights=)`.

    Pre: verified fuel IR. Post: the same values, some computed inside variant branches. Ops
    already inside a branch are never matched, so the pass is idempotent. Surgical: no DCE.
    """

    name = "fuel-fuse-patterns"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_patterns(op, table=environment(ctx).bindings)
