"""Einsum as fuel movement, reductions and matmuls.

Each operand's labels are resolved (an ellipsis becomes right-aligned broadcast labels), a
repeated label takes the diagonal (a gather of the flattened pair), labels no later term needs
are summed away, and operands are contracted left to right: batch labels (shared and kept) stay
as matmul batch dims, contracted labels (shared, not kept) become K, the rest M and N. A final
transpose puts the labels in the output's order.
"""

from __future__ import annotations

import math

import numpy as np

from frontends.emit import Emitter, Tensor, Unsupported, shape_of_t
from frontends.onnx.ops_movement import reshape_to
from frontends.onnx.registry import Node, onnx_op

Labels = list[str]


def parse(equation: str, ranks: list[int]) -> tuple[list[Labels], Labels]:
    """Per-operand labels and output labels; ellipsis dims are labelled `.0`, `.1`, ..."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"equation '{equation}' has {len(terms)} terms for {len(ranks)} inputs")
    ell = max((r - len(t) + 3 for t, r in zip(terms, ranks, strict=True) if "..." in t), default=0)
    ell_labels = [f".{k}" for k in range(ell)]

    def expand(term: str, rank: int | None) -> Labels:
        if "..." not in term:
            return list(term)
        pre, post = term.split("...")
        k = ell if rank is None else rank - len(pre) - len(post)
        return [*pre, *ell_labels[ell - k :], *post]

    ops = [expand(t, r) for t, r in zip(terms, ranks, strict=True)]
    for labs, r, t in zip(ops, ranks, terms, strict=True):
        if len(labs) != r:
            raise Unsupported(f"term '{t}' does not match an input of rank {r}")
    if arrow:
        return ops, expand(rhs, None)
    letters = [c for t in terms for c in t.replace("...", "")]
    return ops, ell_labels + sorted(c for c in set(letters) if letters.count(c) == 1)


def _sum_out(em: Emitter, x: Tensor, labs: Labels, drop: set[str]) -> tuple[Tensor, Labels]:
    axes = [i for i, lab in enumerate(labs) if lab in drop]
    if not axes:
        return x, labs
    return em.op("reduce_sum", x, axes=axes), [lab for lab in labs if lab not in drop]


def _diagonals(em: Emitter, x: Tensor, labs: Labels) -> tuple[Tensor, Labels]:
    """Take the diagonal of every label repeated within one operand."""
    while len(set(labs)) != len(labs):
        lab = next(c for c in labs if labs.count(c) > 1)
        p, q = [i for i, c in enumerate(labs) if c == lab][:2]
        others = [i for i in range(len(labs)) if i not in (p, q)]
        s = shape_of_t(x)
        n = s[p]
        x = em.op("transpose", x, perm=[*others, p, q]) if others else x
        flat = reshape_to(em, x, (*(s[i] for i in others), n * n))
        x = em.op("gather", flat, np.arange(n, dtype=np.int64) * (n + 1), axis=len(others))
        labs = [labs[i] for i in others] + [lab]
    return x, labs


def _contract(
    em: Emitter, a: Tensor, la: Labels, b: Tensor, lb: Labels, keep: set[str]
) -> tuple[Tensor, Labels]:
    batch = [c for c in la if c in lb and c in keep]
    contr = [c for c in la if c in lb and c not in keep]
    left, right = [c for c in la if c not in lb], [c for c in lb if c not in la]
    sa, sb = dict(zip(la, shape_of_t(a), strict=True)), dict(zip(lb, shape_of_t(b), strict=True))
    if any(sa[c] != sb[c] for c in contr):
        raise Unsupported("contracted dims differ in size")
    m, k, n = (math.prod(d[c] for c in cs) for d, cs in ((sa, left), (sa, contr), (sb, right)))
    a = em.op("transpose", a, perm=[la.index(c) for c in batch + left + contr])
    b = em.op("transpose", b, perm=[lb.index(c) for c in batch + contr + right])
    y = em.op(
        "matmul",
        reshape_to(em, a, (*(sa[c] for c in batch), m, k)),
        reshape_to(em, b, (*(sb[c] for c in batch), k, n)),
    )
    shape = (*shape_of_t(y)[: len(batch)], *(sa[c] for c in left), *(sb[c] for c in right))
    return reshape_to(em, y, shape), batch + left + right


@onnx_op("Einsum", attrs="equation")
def einsum(n: Node) -> Tensor:
    em = n.em
    xs = [n.x(i) for i in range(len(n.inputs))]
    ops, out = parse(n.attr("equation", ""), [len(shape_of_t(x)) for x in xs])
    terms = [_diagonals(em, x, labs) for x, labs in zip(xs, ops, strict=True)]
    acc, labs = None, []
    for i, (x, lx) in enumerate(terms):
        later = set(out).union(*(t[1] for t in terms[i + 1 :]))
        x, lx = _sum_out(em, x, lx, {c for c in lx if c not in later and c not in labs})
        if acc is None:
            acc, labs = x, lx
            continue
        acc, labs = _contract(em, acc, labs, x, lx, later)
    assert acc is not None
    acc, labs = _sum_out(em, acc, labs, set(labs) - set(out))
    if sorted(labs) != sorted(out):
        raise Unsupported(f"output labels {out} are not all in the inputs")
    perm = [labs.index(c) for c in out]
    return acc if perm == sorted(perm) else em.op("transpose", acc, perm=perm)
