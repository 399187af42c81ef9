"""`fuel-fuse-patterns`: offer a registered fused op wherever its primitive pattern occurs."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.branch import BranchOp, YieldOp
from passes.emit_decode_flash import inside_branch
from runtime.fused import FusedEntry, FusedKernelRegistry, FusedMatch, default_fused_registry

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


def find_matches(
    module: ModuleOp, registry: FusedKernelRegistry
) -> list[tuple[FusedEntry, FusedMatch]]:
    """Self-contained matches, claimed latest root first (so a layer norm is claimed whole
    before the rms-norm shape inside it), no op in two matches. Read-only."""
    entries = registry.entries()
    claimed: set[Operation] = set()
    found: list[tuple[FusedEntry, FusedMatch]] = []
    for root in reversed(list(module.walk())):
        if root in claimed:
            continue
        for entry in entries:
            match = entry.pattern(root)
            if match is None or not self_contained(match) or claimed.intersection(match.ops):
                continue
            claimed.update(match.ops)
            found.append((entry, match))
            break
    return found


def offer_fused_arm(entry: FusedEntry, match: FusedMatch) -> BranchOp:
    """Replace the matched ops by a variant branch: arm 0 the ops (moved, unchanged), arm 1
    the fused op. The branch sits where the root was."""
    fused = entry.build(match)
    fused.attributes[FUSED_ATTR] = StringAttr(entry.name)
    root = match.root
    result = root.results[0]
    arm0 = Block()
    arms = [Region(arm0), Region(Block([fused, YieldOp(fused.results[0])]))]
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


def fuse_patterns(module: ModuleOp, registry: FusedKernelRegistry | None = None) -> int:
    """Offer every registered fused op at its matches; returns the number of branches made."""
    registry = registry if registry is not None else default_fused_registry()
    matches = find_matches(module, registry)
    for entry, match in matches:
        offer_fused_arm(entry, match)
    return len(matches)


@dataclass(frozen=True)
class FusePatternsPass(ModulePass):
    """For each match of a registered fused pattern (`runtime.fused`: softmax, rms_norm,
    layer_norm from primitives) whose interior values are read only inside the match (the
    root's result may have any readers), make an ungated `fuel.branch variant`: arm 0 the
    matched primitives, moved unchanged; arm 1 the fused op, tagged `fuel.fused`. Which arm
    runs is `fuel-bake-variants`' decision by cost.

    Pre: verified fuel IR. Post: the same values, some computed inside variant branches. Ops
    already inside a branch are never matched, so the pass is idempotent. Surgical: no DCE.
    """

    name = "fuel-fuse-patterns"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_patterns(op)
