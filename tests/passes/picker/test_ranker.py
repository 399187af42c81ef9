"""The ranker: enumeration, filters, costs (Layer 1, Judge, transfers), ranking, frontier."""

from __future__ import annotations

import numpy as np
import pytest

from passes.picker.ranker import (
    BIT_STABLE,
    AlternativeSet,
    BitStablePreferenceFilter,
    Candidate,
    FilterClass,
    FilterContext,
    FilterRejected,
    PrecisionFloorFilter,
    PrecisionRequirement,
    StridedInputPreferenceFilter,
    apply_filter_chain,
    apply_inbound_transfer_costs,
    compute_static_costs,
    default_chain,
    enumerate_candidates,
)
from runtime.binding_table import KernelBindingTable, KernelCaps
from runtime.cost import CostEstimate
from runtime.precision import UNAUDITED, PrecisionGuarantee

D3 = ("f32", "f32", "f32")
DENSE = KernelCaps()
EXACT = PrecisionGuarantee(bit_stable=True, max_ulp=0)
LOOSE = PrecisionGuarantee(bit_stable=True, max_ulp=4)
NOISY = PrecisionGuarantee(bit_stable=False, max_relative=1e-3)


def _k(name: str):
    def kernel(ins, outs, params):
        np.add(ins[0], ins[1], out=outs[0])

    kernel.__qualname__ = name
    return kernel


def _ns(ns: float):
    return lambda shapes, dtypes, params: CostEstimate(overhead_ns=ns)


def table_of(
    *specs: tuple[str, str, PrecisionGuarantee, float], caps: KernelCaps = DENSE
) -> KernelBindingTable:
    t = KernelBindingTable()
    for source, backend, prec, ns in specs:
        t.register(
            "add",
            D3,
            backend,
            _k(source),
            precision=prec,
            cost=_ns(ns),
            kernel_source=source,
            caps=caps,
        )
    return t


def cands(t: KernelBindingTable, placements=(("cpu", "cpu"),)) -> list[Candidate]:
    return enumerate_candidates("add", D3, placements, t)


CTX = FilterContext("add", D3)


def test_enumerate_every_sibling_per_placement_in_order() -> None:
    t = table_of(("a", "cpu", EXACT, 1), ("b", "cpu", LOOSE, 1), ("g", "cuda", LOOSE, 1))
    cs = cands(t, [("cpu", "cpu"), ("cuda", "cuda:0"), ("cuda", "cuda:1"), ("vulkan", "v:0")])
    assert [(c.kernel_source, c.device) for c in cs] == [
        ("a", "cpu"),
        ("b", "cpu"),
        ("g", "cuda:0"),
        ("g", "cuda:1"),
    ]
    assert enumerate_candidates("add", D3, [], t) == []
    assert enumerate_candidates("mul", D3, [("cpu", "cpu")], t) == []


def test_enumerate_skips_broadcast_baked_siblings() -> None:
    t = table_of(("baked", "cpu", EXACT, 1), caps=KernelCaps(requires_broadcast=True))
    t.register("add", D3, "cpu", _k("dense"), kernel_source="dense")
    assert [c.kernel_source for c in cands(t)] == ["dense"]


def test_precision_floor_admits_only_provable_claims() -> None:
    t = table_of(
        ("exact", "cpu", EXACT, 1),
        ("loose", "cpu", LOOSE, 1),
        ("noisy", "cpu", NOISY, 1),
        ("unaudited", "cpu", UNAUDITED, 1),
    )
    cs = cands(t)
    floor = PrecisionFloorFilter(PrecisionRequirement(max_ulp=2))
    assert floor.klass is FilterClass.HARD
    assert [cs[i].kernel_source for i in floor.keep(cs, CTX)] == ["exact"]
    rel = PrecisionFloorFilter(PrecisionRequirement(max_relative=1e-2))
    # a 0-ulp claim is the rounded reference, so it meets every relative bound; others prove none
    assert [cs[i].kernel_source for i in rel.keep(cs, CTX)] == ["exact", "noisy"]
    assert len(PrecisionFloorFilter(PrecisionRequirement()).keep(cs, CTX)) == 4
    assert [cs[i].kernel_source for i in PrecisionFloorFilter(BIT_STABLE).keep(cs, CTX)] == [
        "exact",
        "loose",
    ]


def test_hard_rejection_is_a_readable_error() -> None:
    cs = cands(table_of(("noisy", "cpu", NOISY, 1)))
    with pytest.raises(
        FilterRejected,
        match=r"precision-floor rejected every candidate for "
        r"op=add dtypes=\(f32, f32, f32\); available: noisy@cpu",
    ):
        apply_filter_chain(cs, CTX, default_chain(PrecisionRequirement(max_ulp=0)))


def test_soft_filters_skip_instead_of_emptying() -> None:
    cs = cands(table_of(("noisy", "cpu", NOISY, 1)))
    alive, rejected = apply_filter_chain(cs, CTX, [BitStablePreferenceFilter()])
    assert [c.kernel_source for c in alive] == ["noisy"] and rejected == []


def test_bit_stable_preference_drops_unstable_when_a_stable_one_exists() -> None:
    cs = cands(table_of(("noisy", "cpu", NOISY, 1), ("exact", "cpu", EXACT, 5)))
    alive, rejected = apply_filter_chain(cs, CTX, default_chain())
    assert [c.kernel_source for c in alive] == ["exact"]
    assert [(c.kernel_source, c.verdict) for c in rejected] == [
        ("noisy", "rejected:bit-stable-preference")
    ]


def test_strided_preference_only_applies_to_strided_inputs() -> None:
    t = KernelBindingTable()
    t.register("add", D3, "cpu", _k("contig"), kernel_source="contig")
    t.register(
        "add",
        D3,
        "cpu",
        _k("strided"),
        kernel_source="strided",
        caps=KernelCaps(strided_input=True),
    )
    cs = cands(t)
    f = StridedInputPreferenceFilter()
    assert len(f.keep(cs, CTX)) == 2
    strided = FilterContext("add", D3, strided_inputs=(True, False))
    assert [cs[i].kernel_source for i in f.keep(cs, strided)] == ["strided"]


def _costed(t, judge=None, placements=(("cpu", "cpu"),)):
    rates = {"cpu": (1.0, 4.0), "cuda:0": (30.0, 40.0)}
    return compute_static_costs(
        cands(t, placements), "add", [(64,), (64,), (64,)], D3, {}, rates.__getitem__, _ns(0), judge
    )


def test_layer1_then_judge_replaces_and_flips_the_winner() -> None:
    from runtime.judge import HashMapJudge

    t = table_of(("fast", "cpu", EXACT, 100), ("slow", "cpu", EXACT, 900))
    s = AlternativeSet(_costed(t)).rank()
    assert s.winner().kernel_source == "fast" and s.winner().time_ns == 100
    judge = HashMapJudge()
    judge.insert("add", "f32", 0, "cpu", "slow", 50.0)
    s = AlternativeSet(_costed(t, judge)).rank()
    assert s.winner().kernel_source == "slow" and s.winner().judge_ns == 50.0
    assert s.candidates[1].judge_ns is None  # absence is not zero: Layer 1 kept


def test_inbound_transfer_is_added_and_survives_a_judge_figure() -> None:
    from runtime.judge import HashMapJudge

    class Est:
        def estimate_transfer_ns(self, src, dst, nbytes):
            return 0.0 if src == dst else 1000.0 + nbytes

    t = table_of(("c", "cpu", EXACT, 500), ("g", "cuda", EXACT, 10))
    judge = HashMapJudge()
    judge.insert("add", "f32", 0, "cuda", "g", 5.0)
    cs = _costed(t, judge, [("cpu", "cpu"), ("cuda", "cuda:0")])
    cs = apply_inbound_transfer_costs(cs, [("cpu", 256.0), (None, 1e9)], Est())
    by = {c.device: c for c in cs}
    assert by["cpu"].inbound_transfer_ns == 0 and by["cuda:0"].inbound_transfer_ns == 1256.0
    assert by["cuda:0"].time_ns == 5.0 + 1256.0  # the judge replaced compute, not transfer
    assert AlternativeSet(cs).rank().winner().device == "cpu"


def test_rank_is_time_first_then_precision() -> None:
    t = table_of(
        ("loose", "cpu", LOOSE, 100), ("exact", "cpu", EXACT, 100), ("slow", "cpu", EXACT, 200)
    )
    s = AlternativeSet(_costed(t)).rank()
    assert [c.kernel_source for c in s.candidates] == ["exact", "loose", "slow"]


def test_frontier_drops_dominated_keeps_winner_and_never_strands_a_backend() -> None:
    t = KernelBindingTable()
    specs = [
        ("best", 10, EXACT, "cpu"),
        ("dominated", 20, LOOSE, "cpu"),
        ("precise-slow", 30, EXACT, "cpu"),
        ("mkl", 50, LOOSE, "mkl"),
    ]
    for name, ns, prec, backend in specs:
        t.register("add", D3, backend, _k(name), precision=prec, cost=_ns(ns), kernel_source=name)
    cs = compute_static_costs(
        cands(t, [("cpu", "cpu"), ("mkl", "cpu")]),
        "add",
        [(1,)] * 3,
        D3,
        {},
        lambda d: (1.0, 1.0),
        _ns(0),
    )
    s = AlternativeSet(cs).rank().retain_per_device_frontier()
    kept = [c.kernel_source for c in s.candidates]
    assert kept[0] == "best"
    assert "dominated" not in kept and "precise-slow" not in kept  # both dominated by "best"
    assert "mkl" in kept  # dominated, but the last of its (device, backend)


def test_frontier_crowding_cap_keeps_the_extremes() -> None:
    t = KernelBindingTable()
    # a Pareto front: faster <=> looser; every one non-dominated
    for i in range(10):
        prec = PrecisionGuarantee(bit_stable=True, max_relative=10.0 ** -(i + 1))
        t.register(
            "add", D3, "cpu", _k(f"k{i}"), cost=_ns(10 + i), kernel_source=f"k{i}", precision=prec
        )
    cs = compute_static_costs(cands(t), "add", [(1,)] * 3, D3, {}, lambda d: (1.0, 1.0), _ns(0))
    s = AlternativeSet(cs).rank().retain_per_device_frontier(keep=4)
    kept = [c.kernel_source for c in s.candidates]
    assert len(kept) == 4 and kept[0] == "k0" and "k9" in kept  # winner and both ends survive


def test_frontier_keeps_one_bucket_per_device() -> None:
    t = table_of(("c", "cpu", EXACT, 10), ("g", "cuda", EXACT, 5))
    s = AlternativeSet(_costed(t, None, [("cpu", "cpu"), ("cuda", "cuda:0")]))
    s.rank().retain_per_device_frontier(keep=1)
    assert sorted(c.device for c in s.candidates) == ["cpu", "cuda:0"]


def test_precision_requirement_parse() -> None:
    assert PrecisionRequirement.parse("") == PrecisionRequirement()
    r = PrecisionRequirement.parse("bit_stable, ulp=2, rel=1e-5")
    assert r == PrecisionRequirement(True, 2, 1e-5, None)
    with pytest.raises(ValueError, match="bad precision requirement 'fast'"):
        PrecisionRequirement.parse("fast")
