"""The binding table's rules: sibling order, duplicates, broadcast-baked skip, misses, snapshots."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import runtime.kernels as rk
from runtime import binding_table as bt
from runtime.binding_table import (
    DuplicateKernel,
    FrozenTable,
    KernelBindingTable,
    KernelCaps,
    NoKernelForOp,
)
from runtime.precision import REFERENCE, UNAUDITED

F32x3 = ("f32", "f32", "f32")


def k_add(ins, outs, params):
    np.add(ins[0], ins[1], out=outs[0])


def k_add_vendor(ins, outs, params):
    np.add(ins[0], ins[1], out=outs[0])


def k_add_baked(ins, outs, params):
    outs[0][...] = ins[0] + ins[1][None, :]


def test_two_siblings_append_and_first_wins() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add, kernel_source="numpy")
    t.register("add", F32x3, "cpu", k_add_vendor, kernel_source="vendor")
    assert t.lookup("add", F32x3, "cpu").kernel is k_add
    assert [e.kernel for e in t.lookup_alternatives("add", F32x3, "cpu")] == [k_add, k_add_vendor]
    assert len(t) == 2 and t.key_count() == 1


def test_decorator_registers_with_defaults() -> None:
    t = KernelBindingTable()

    @t.kernel("neg", ("f32", "f32"), "cpu")
    def k_neg(ins, outs, params):
        np.negative(ins[0], out=outs[0])

    e = t.lookup("neg", ("f32", "f32"), "cpu")
    assert e.kernel is k_neg and e.precision == UNAUDITED and e.cost is None
    assert e.caps == KernelCaps() and e.revision_hash != 0


def test_duplicate_detected_by_finalize_not_register() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add)
    t.register("add", F32x3, "cpu", k_add)  # appending never raises
    with pytest.raises(DuplicateKernel, match="k_add.*registered twice.*add.*f32.*cpu"):
        t.finalize()


def test_finalize_ok_for_distinct_siblings_and_same_kernel_at_other_keys() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add)
    t.register("add", F32x3, "cpu", k_add_vendor)
    t.register("add", ("f64", "f64", "f64"), "cpu", k_add)
    t.finalize()


def test_lookup_with_caps_skips_broadcast_baked_sibling_regardless_of_order() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add_baked, caps=KernelCaps(requires_broadcast=True))
    t.register("add", F32x3, "cpu", k_add)
    assert t.lookup_with_caps("add", F32x3, "cpu").kernel is k_add
    assert t.lookup("add", F32x3, "cpu").kernel is k_add_baked  # caps-blind lookup


def test_lookup_with_caps_misses_when_only_baked_siblings_exist() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add_baked, caps=KernelCaps(requires_broadcast=True))
    assert not t.backend_supports("add", F32x3, "cpu")
    with pytest.raises(NoKernelForOp, match="broadcast-baked only"):
        t.lookup_with_caps("add", F32x3, "cpu")


def test_miss_names_the_key_and_lists_what_is_registered() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add)
    t.register("add", ("f16", "f16", "f16"), "cuda", k_add)
    with pytest.raises(NoKernelForOp) as info:
        t.lookup_with_caps("add", ("i8", "i8", "i8"), "cpu")
    msg = str(info.value)
    assert "'add' with dtypes (i8, i8, i8) on backend 'cpu'" in msg
    assert "(f32, f32, f32) on cpu" in msg and "(f16, f16, f16) on cuda" in msg
    with pytest.raises(NoKernelForOp, match=r"registered for 'mul':\n  \(nothing\)"):
        t.lookup("mul", F32x3, "cpu")


def test_backend_supports_is_per_backend() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add, precision=REFERENCE)
    assert t.backend_supports("add", F32x3, "cpu")
    assert not t.backend_supports("add", F32x3, "cuda")
    assert t.backends() == ["cpu"]


def test_published_snapshot_is_read_only() -> None:
    t = KernelBindingTable().freeze()
    with pytest.raises(FrozenTable):
        t.register("add", F32x3, "cpu", k_add)
    clone = t.copy()
    clone.register("add", F32x3, "cpu", k_add)
    assert len(clone) == 1 and len(t) == 0


def test_iter_entries_yields_every_sibling() -> None:
    t = KernelBindingTable()
    t.register("add", F32x3, "cpu", k_add)
    t.register("add", F32x3, "cpu", k_add_vendor)
    keys = [k for k, _ in t.iter_entries()]
    assert keys == [("add", F32x3, "cpu")] * 2


def test_revision_hash_tracks_source_and_tag() -> None:
    assert bt.revision_hash(k_add, "numpy") != bt.revision_hash(k_add_vendor, "numpy")
    assert bt.revision_hash(k_add, "numpy") != bt.revision_hash(k_add, "mkl")
    assert bt.revision_hash(k_add, "numpy") == bt.revision_hash(k_add, "numpy")
    assert bt.revision_hash(np.add, "numpy") == 0  # a builtin has no source: untracked


@pytest.fixture
def restore_global_table():
    """Tests that publish into the process-wide table put the original snapshot back."""
    saved = rk.global_bindings()
    yield
    rk._STATE.table = saved


@pytest.mark.usefixtures("restore_global_table")
def test_snapshot_isolation_under_concurrent_writer() -> None:
    """A reader's snapshot never changes; writers never lose each other's registrations."""
    base = rk.global_bindings()
    n_before = len(base)
    names = [f"test_op_{i}" for i in range(16)]
    seen_sizes: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        snap = rk.global_bindings()
        size = len(snap)
        while not stop.is_set():
            seen_sizes.append(len(snap) - size)  # must stay 0
            if sum(1 for _ in snap.iter_keys()) != snap.key_count():
                seen_sizes.append(-1)

    def writer(name: str) -> None:
        def kern(ins, outs, params):
            outs[0][...] = ins[0]

        rk.extend_global_bindings(lambda t: t.register(name, ("f32", "f32"), "cpu", kern))

    gen0 = rk.bindings_generation()
    r = threading.Thread(target=reader)
    r.start()
    writers = [threading.Thread(target=writer, args=(n,)) for n in names]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    r.join()
    after = rk.global_bindings()
    assert set(seen_sizes) <= {0}
    assert len(base) == n_before  # the old snapshot is untouched
    assert len(after) == n_before + len(names)  # no lost update
    assert all(after.backend_supports(n, ("f32", "f32"), "cpu") for n in names)
    assert rk.bindings_generation() == gen0 + len(names)
    with pytest.raises(FrozenTable):
        after.register("x", ("f32",), "cpu", k_add)


def test_direct_fast_paths_write_the_same_bytes_as_their_kernels() -> None:
    """Every registered `direct` form is exactly its kernel: same inputs, identical outputs."""
    from runtime.dtypes import to_numpy

    rng = np.random.default_rng(0)
    checked = 0
    for (op, dtypes, _), e in rk.global_bindings().iter_entries():
        if e.direct is None:
            continue
        ins = [(rng.standard_normal((3, 5)) * 4).astype(to_numpy(d)) for d in dtypes[:-1]]
        out_dt = to_numpy(dtypes[-1])
        a, b = np.empty((3, 5), out_dt), np.empty((3, 5), out_dt)
        with np.errstate(all="ignore"):
            e.kernel(ins, [a], {})
            e.direct(*ins, b)
        assert a.tobytes() == b.tobytes(), (op, dtypes)
        checked += 1
    assert checked >= 40
