"""The CPU contracts register exactly what the hand registration does, for every migrated key:
same dtype keys, same bytes out on the probes, same precision claims (after the ledger gate),
same caps, kernel_source, fast path and cost."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from runtime.binding_table import BindingEntry, BindingKey, KernelBindingTable
from runtime.contracts import UnverifiedClaimWarning, contract_source
from runtime.contracts.probes import probes_for
from runtime.contracts.verify import _strided
from runtime.dtypes import NUMPY_DTYPES
from runtime.kernels.cpu.contracts import (
    PROVIDER_DIRS,
    register_cpu_contracts,
    register_cpu_kernels_from_contracts,
    register_cpu_sibling_contracts,
    register_cpu_vendor_contracts,
    vendor_dirs,
)
from runtime.kernels.cpu.library import hand_registered_table


def _hand() -> KernelBindingTable:
    return hand_registered_table()


def _contracts() -> KernelBindingTable:
    t = KernelBindingTable()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedClaimWarning)  # the ledger proves every claim
        register_cpu_contracts(t)
    return t


def _siblings() -> KernelBindingTable:
    t = KernelBindingTable()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedClaimWarning)  # each provider's ledger proves all
        register_cpu_vendor_contracts(t)
        register_cpu_sibling_contracts(t)
    return t


HAND, CONTRACTS, SIBLINGS = _hand(), _contracts(), _siblings()
SOURCES = [d.name for d in (*vendor_dirs(), *PROVIDER_DIRS)]
VENDOR = {d.name for d in vendor_dirs()}  # torch-blas where torch is installed: sibling 0
HAND_ONLY_OPS = {"concat", "matmul_bias_act", "gated_mlp"}  # see runtime/kernels/cpu/contracts
NATIVE_SOURCES = {
    "native",
    "native-flashdecode",
    "native-vecmath",
    "c-vecmath",
}  # C, registered last
SIBLING_KEYS = sorted((key, e.kernel_source) for key, e in SIBLINGS.iter_entries())
MIGRATED_OPS = sorted({op for op, _, _ in CONTRACTS.iter_keys()})
KEYS = sorted(CONTRACTS.iter_keys())


def _default(table: KernelBindingTable, key: BindingKey) -> BindingEntry:
    """The hand table's `numpy` kernel at `key` (alternatives of other sources may follow)."""
    found = [e for e in table.lookup_alternatives(*key) if e.kernel_source == "numpy"]
    assert len(found) == 1, key
    return found[0]


def test_same_dtype_keys() -> None:
    hand = {
        k
        for k in HAND.iter_keys()
        if k[0] in MIGRATED_OPS
        and any(e.kernel_source == "numpy" for e in HAND.lookup_alternatives(*k))
    }
    assert set(KEYS) == hand
    assert len(KEYS) == 391 and {"exp", "add", "eq", "where", "matmul"} <= set(MIGRATED_OPS)
    assert all(len(CONTRACTS.lookup_alternatives(*k)) == 1 for k in KEYS)


def _run(
    entry: BindingEntry, inputs: list[np.ndarray], shape: tuple[int, ...], dtype: str, params: dict
) -> bytes:
    out = np.full(shape, 7, NUMPY_DTYPES[dtype])
    with np.errstate(all="ignore"):
        entry.kernel(inputs, [out], params)
    return out.tobytes()


def _direct(
    entry: BindingEntry, inputs: list[np.ndarray], shape: tuple[int, ...], dtype: str
) -> bytes:
    assert entry.direct is not None
    out = np.full(shape, 7, NUMPY_DTYPES[dtype])
    with np.errstate(all="ignore"):
        entry.direct(*inputs, out)
    return out.tobytes()


@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"{k[0]}-{'_'.join(k[1])}")
def test_same_kernel_facts_and_behaviour(key: BindingKey) -> None:
    hand, mine = _default(HAND, key), CONTRACTS.lookup(*key)
    assert mine.precision.declared() == hand.precision  # the ledger gate fills measured bounds
    assert mine.precision.audited and mine.caps == hand.caps
    assert mine.kernel_source == hand.kernel_source == "numpy"
    assert (mine.direct is None) == (hand.direct is None) and mine.direct is hand.direct
    assert contract_source(mine) is not None and contract_source(hand) is None
    probes = probes_for(key[0], key[1])
    assert probes
    for p in probes:
        shapes = [a.shape for a in p.inputs] + [p.out_shape]
        assert mine.cost(shapes, key[1], p.params) == hand.cost(shapes, key[1], p.params)
        want = _run(hand, p.inputs, p.out_shape, p.out_dtype, dict(p.params))
        assert _run(mine, p.inputs, p.out_shape, p.out_dtype, dict(p.params)) == want
        if mine.caps.strided_input:
            strided = [_strided(a) for a in p.inputs]
            assert _run(mine, strided, p.out_shape, p.out_dtype, dict(p.params)) == want
        if mine.direct is not None:
            assert _direct(mine, p.inputs, p.out_shape, p.out_dtype) == want


def test_full_cpu_table_from_contracts_matches_the_hand_table() -> None:
    full = KernelBindingTable()
    register_cpu_kernels_from_contracts(full)
    assert set(full.iter_keys()) == set(HAND.iter_keys())
    for key in HAND.iter_keys():
        hand, mine = HAND.lookup_alternatives(*key), full.lookup_alternatives(*key)
        assert [e.kernel_source for e in mine] == [e.kernel_source for e in hand], key
        assert [e.precision.declared() for e in mine] == [e.precision for e in hand], key
        from_contract = key in CONTRACTS.iter_keys()
        assert (contract_source(mine[0]) is not None) == from_contract, key


def _of(table: KernelBindingTable, key: BindingKey, source: str) -> BindingEntry:
    found = [e for e in table.lookup_alternatives(*key) if e.kernel_source == source]
    assert len(found) == 1, (key, source)
    return found[0]


def test_sibling_sources_have_the_hand_keys() -> None:
    for source in SOURCES:
        hand = {
            k
            for k in HAND.iter_keys()
            if any(e.kernel_source == source for e in HAND.lookup_alternatives(*k))
            and k[0] not in HAND_ONLY_OPS
        }
        mine = {k for k, s in SIBLING_KEYS if s == source}
        assert mine == hand and mine, source
    counts = {s: sum(1 for _, x in SIBLING_KEYS if x == s) for s in SOURCES}
    assert counts == {
        **({"torch-blas": 5} if VENDOR else {}),  # matmul f32/f64, attention f32 (3 forms)
        "numpy-flashdecode": 6,
        "numpy-fast": 18,
        "numpy-f64acc": 10,
        "numpy-einsum": 2,
        "numpy-contig": 18,
        "numpy-bcast-row": 1,
    }


def _accepted(entry: BindingEntry, shapes: list[tuple[int, ...]]) -> bool:
    """The probes the contract's shape constraints accept (flash decoding: Sq == 1 only)."""
    prov = contract_source(entry)
    assert prov is not None
    return not (prov.kernel.startswith("attention_flashdecode") and shapes[0][2] != 1)


@pytest.mark.parametrize(
    "key_source", SIBLING_KEYS, ids=lambda ks: f"{ks[1]}-{ks[0][0]}-{'_'.join(ks[0][1])}"
)
def test_sibling_facts_and_behaviour(key_source: tuple[BindingKey, str]) -> None:
    key, source = key_source
    hand, mine = _of(HAND, key, source), _of(SIBLINGS, key, source)
    assert mine.precision.declared() == hand.precision and mine.precision.audited
    assert mine.caps == hand.caps and mine.kernel_source == hand.kernel_source == source
    assert (mine.direct is None) == (hand.direct is None) and mine.direct is hand.direct
    assert contract_source(mine) is not None and contract_source(hand) is None
    probes = probes_for(key[0], key[1])
    assert probes
    ran = 0
    for p in probes:
        shapes = [a.shape for a in p.inputs] + [p.out_shape]
        assert mine.cost(shapes, key[1], p.params) == hand.cost(shapes, key[1], p.params)
        if not _accepted(mine, shapes):
            continue
        ran += 1
        want = _run(hand, p.inputs, p.out_shape, p.out_dtype, dict(p.params))
        assert _run(mine, p.inputs, p.out_shape, p.out_dtype, dict(p.params)) == want
        if mine.caps.strided_input:
            strided = [_strided(a) for a in p.inputs]
            assert _run(mine, strided, p.out_shape, p.out_dtype, dict(p.params)) == want
        if mine.direct is not None:
            assert _direct(mine, p.inputs, p.out_shape, p.out_dtype) == want
    assert ran


def test_flash_decode_cost_prices_prefill_as_infeasible() -> None:
    key = ("attention", ("f32",) * 4, "cpu")
    mine, hand = _of(SIBLINGS, key, "numpy-flashdecode"), _of(HAND, key, "numpy-flashdecode")
    for sq in (0, 2, 7):
        shapes = [(1, 4, sq, 8), (1, 2, 600, 8), (1, 2, 600, 5), (1, 4, sq, 5)]
        got = mine.cost(shapes, key[1], {})
        assert got == hand.cost(shapes, key[1], {})
        assert np.isinf([got.flops, got.bytes_moved, got.overhead_ns]).all()


def test_full_table_sibling_order_and_sources() -> None:
    full = KernelBindingTable()
    register_cpu_kernels_from_contracts(full)
    hand_only = set()
    for key in HAND.iter_keys():
        hand, mine = HAND.lookup_alternatives(*key), full.lookup_alternatives(*key)
        assert [e.kernel_source for e in mine] == [e.kernel_source for e in hand], key
        vendor = [e.kernel_source for e in mine if e.kernel_source in VENDOR]
        assert [e.kernel_source for e in mine[: len(vendor)]] == vendor, key  # vendor BLAS first
        assert mine[len(vendor)].kernel_source == "numpy", key
        for e in mine:
            if contract_source(e) is None and e.kernel_source not in NATIVE_SOURCES:
                hand_only.add(key[0])
        native_at = [i for i, e in enumerate(mine) if e.kernel_source in NATIVE_SOURCES]
        assert native_at == list(range(len(mine) - len(native_at), len(mine))), key  # last
    # concat is variadic; the fused ops' costs read the `act` param or compose the numpy parts'
    # cost functions, which a contract's cost expression cannot (runtime/kernels/cpu/contracts)
    assert hand_only == HAND_ONLY_OPS
