"""The verification ledger and harness: the gate, the file, and that checks are not vacuous."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from runtime.binding_table import KernelBindingTable
from runtime.contracts import (
    FkcError,
    Ledger,
    LedgerRecord,
    LedgerWarning,
    UnverifiedClaimWarning,
    import_glob,
    load_contracts,
)
from runtime.contracts.ledger import LEDGER_NAME, PROTOCOL, measured_bound, revision_hex
from runtime.contracts.lower import LoweredKernel, lower
from runtime.contracts.verify import Figures, normwise_errors, verify_all, verify_kernel
from runtime.kernels.cpu.contracts import (
    CONTRACTS_DIR,
    HAND_LEDGER_PATH,
    LEDGER_PATH,
    PROVIDER_DIRS,
    gate_hand_kernels,
    hand_registered_kernels,
    register_cpu_contracts,
)
from runtime.precision import UNAUDITED, PrecisionGuarantee

Write = Callable[..., Path]


def _lowered(path: Path, allow: tuple[str, ...] = ()) -> list[LoweredKernel]:
    _, contracts = load_contracts(path, allow)
    return [k for c in contracts for k in lower(c, allow)]


def _precisions(path: Path, ledger: object) -> list[PrecisionGuarantee]:
    table = KernelBindingTable()
    import_glob(path, table, ledger=ledger)  # type: ignore[arg-type]
    return [e.precision for _, e in table.iter_entries()]


def test_verified_claims_survive_the_gate(base: str, write: Write) -> None:
    path = write(base)
    ledger = Ledger(verify_all(_lowered(path)))
    assert all(r.passed for r in ledger.records.values()) and len(ledger.records) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _precisions(path, ledger)
    assert got == [PrecisionGuarantee(bit_stable=True, max_ulp=2)] * 2


def test_missing_stale_failed_or_old_protocol_records_downgrade(base: str, write: Write) -> None:
    path = write(base)
    good = verify_all(_lowered(path))

    def variant(change: Callable[[LedgerRecord], dict[str, object]]) -> Ledger:
        rows = [r.to_json() | (change(r) if r.claim == "max_ulp" else {}) for r in good]
        path.with_name("ledger.json").write_text(json.dumps({"format": 1, "records": rows}))
        return Ledger.load(path.with_name("ledger.json"))

    for ledger in (
        None,  # no ledger at all
        variant(lambda r: {"revision": revision_hex(0)}),  # the kernel changed since
        variant(lambda r: {"result": "fail"}),  # one claim of two failed
        variant(lambda r: {"protocol": PROTOCOL - 1}),  # proven under a weaker protocol
    ):
        with pytest.warns(UnverifiedClaimWarning, match="max_ulp"):
            assert _precisions(path, ledger) == [UNAUDITED, UNAUDITED]


def test_auto_ledger_sits_beside_the_contracts(base: str, write: Write) -> None:
    path = write(base)
    Ledger(verify_all(_lowered(path))).save(path.with_name("ledger.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _precisions(path, "auto")[0].max_ulp == 2


def test_malformed_ledger_warns_and_proves_nothing(base: str, write: Write) -> None:
    path = write(base)
    bad = path.with_name("ledger.json")
    for text in ("{not json", '{"format": 99, "records": []}', '{"format": 1, "records": [{}]}'):
        bad.write_text(text)
        with pytest.warns(LedgerWarning, match="unreadable"):
            book = Ledger.load(bad)
        assert not book.records


def test_upsert_replaces_a_kernels_old_rows_and_keeps_others(tmp_path: Path) -> None:
    def rec(kernel: str, rev: str, claim: str = "max_ulp") -> LedgerRecord:
        return LedgerRecord(kernel, "cpu", ("f32", "f32"), rev, claim, "pass", 1, 0.0)

    book = Ledger([rec("a", "01"), rec("a", "01", "bit_stable"), rec("b", "07")])
    book.upsert([rec("a", "02")])
    assert sorted((r.kernel, r.revision, r.claim) for r in book.records.values()) == [
        ("a", "01", "bit_stable"),
        ("a", "02", "max_ulp"),
        ("b", "07", "max_ulp"),
    ]
    path = book.save(tmp_path / "sub" / "ledger.json")
    again = Ledger.load(path)
    assert again.records == book.records and again.to_text() == book.to_text()
    assert [p.name for p in path.parent.iterdir()] == ["ledger.json"]  # no temp file left
    assert len(path.read_text().splitlines()) == 2 + len(book.records)  # a row per line


BROKEN = """
import numpy as np
from runtime.contracts import kernel_entry

@kernel_entry
def off_by_three_ulp(inputs, outputs, params):
    y = np.exp(inputs[0].astype(np.float64)).astype(outputs[0].dtype)
    with np.errstate(all="ignore"):
        for _ in range(3):
            y = np.nextafter(y, np.inf)
    np.copyto(outputs[0], y)

_calls = [0]

@kernel_entry
def noisy(inputs, outputs, params):
    _calls[0] += 1
    np.exp(inputs[0], out=outputs[0])
    if _calls[0] % 2 == 0 and outputs[0].size > 3:
        outputs[0].flat[5] = 12345.0

@kernel_entry
def lazy(inputs, outputs, params):
    np.exp(inputs[0][1:], out=outputs[0][1:])  # never writes element 0

@kernel_entry
def raises(inputs, outputs, params):
    raise RuntimeError("boom")
"""


def _broken(base: str, write: Write, pkg: str, fn: str) -> LoweredKernel:
    text = base.replace("runtime.kernels.cpu.contracts.factories:unary", f"{pkg}:{fn}")
    text = text.replace("\nentry_args: {ufunc: exp, compute: f64}", "").replace("f32, f64", "f32")
    return _lowered(write(text, f"{fn}.fkc.md"), (pkg,))[0]


def test_harness_catches_violations_with_evidence(
    base: str, write: Write, user_package: Callable[[str], str]
) -> None:
    pkg = user_package(BROKEN)
    ulp = {r.claim: r for r in verify_kernel(_broken(base, write, pkg, "off_by_three_ulp"))}
    assert ulp["bit_stable"].result == "pass"
    r = ulp["max_ulp"]
    assert (
        r.result == "fail" and r.measured is not None and r.measured == 3
    )  # 3 ulp past a 2-ulp claim
    assert set(r.evidence) >= {"probe", "index", "got", "ref", "inputs", "elements"}
    assert len(r.evidence["inputs"]) == 1
    for fn, run in (("noisy", "repeat"), ("lazy", "repeat 1")):
        rec = {r.claim: r for r in verify_kernel(_broken(base, write, pkg, fn))}["bit_stable"]
        assert rec.result == "fail" and rec.evidence["run"].startswith(run), rec.evidence
    boom = verify_kernel(_broken(base, write, pkg, "raises"))
    assert all(r.result == "fail" and "boom" in r.evidence["error"] for r in boom)


def test_ops_without_probes_stay_unproven(base: str, write: Write) -> None:
    text = base.replace("op: exp", "op: concat")
    records = verify_kernel(_lowered(write(text))[0])
    assert {r.result for r in records} == {"no_probe"}
    assert Figures.of(records).downgraded == 1 and Figures.of(records).unproven == 2


def test_checked_in_cpu_ledger_is_current() -> None:
    """CI: every claim of every CPU contract has a pass record at its current revision, and
    the ledger holds no rows for kernels or revisions that no longer exist. On failure run
    `fuel verify-kernels --write-ledger` (a kernel or contract changed, its rows did not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedClaimWarning)
        result = register_cpu_contracts(KernelBindingTable())
    assert not result.downgraded
    book = Ledger.load(LEDGER_PATH)
    current = {(k.name, k.backend, k.dtypes, revision_hex(k.revision)) for k in result.kernels}
    stale = {r.key[:4] for r in book.records.values()} - current
    assert not stale, f"ledger rows of kernels that changed or vanished: {sorted(stale)[:5]}"
    assert all(r.result == "pass" for r in book.records.values())
    assert LEDGER_PATH.parent == CONTRACTS_DIR


def assert_within_recorded(records: list[LedgerRecord], book: Ledger) -> None:
    """A measured claim re-measured here stays within the bound its checked-in record gives
    (the bound was measured on the reference host; a host computing worse fails this)."""
    for r in records:
        if r.evidence.get("mode") == "measured":
            recorded = book.records[r.key].bound
            assert recorded is not None and r.measured is not None, r.key
            assert r.measured <= float(recorded), (r.key, r.measured, recorded)


def test_cpu_claims_reverify_on_this_machine() -> None:
    """The checked-in results reproduce here (all 391 CPU dtype keys, ~3 s)."""
    _, contracts = load_contracts(CONTRACTS_DIR)
    records = verify_all(k for c in contracts for k in lower(c))
    figures = Figures.of(records)
    assert figures.failed == 0 and figures.unproven == 0, [
        (r.kernel, r.dtypes, r.claim, r.measured) for r in records if not r.passed
    ]
    assert figures.kernels == 391 and figures.claims == len(Ledger.load(LEDGER_PATH).records)
    assert_within_recorded(records, Ledger.load(LEDGER_PATH))


def test_relative_and_absolute_bounds_are_measured(base: str, write: Write) -> None:
    text = base.replace("max_ulp: 2", "max_relative: 1.0e-6\n  max_absolute: 1.0e-3")
    by_key = {(r.dtypes[0], r.claim): r for r in verify_all(_lowered(write(text)))}
    assert by_key[("f32", "max_relative")].result == "pass"
    assert by_key[("f64", "max_relative")].result == "pass"
    # exp(x) near the f64 overflow is ~1e307: one ulp off is far above 1e-3
    worst = by_key[("f64", "max_absolute")]
    assert worst.result == "fail" and worst.measured is not None and worst.measured > 1e200
    assert float(worst.evidence["inputs"][0]) > 600


@pytest.mark.parametrize("folder", PROVIDER_DIRS, ids=lambda d: d.name)
def test_checked_in_sibling_ledgers_are_current(folder: Path) -> None:
    """Each alternative provider's ledger (one per folder) proves every claim at the current
    revision, holds no stale rows, and its claims reverify here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedClaimWarning)
        result = import_glob(folder, KernelBindingTable(), ledger=folder / LEDGER_NAME)
    assert not result.downgraded
    book = Ledger.load(folder / LEDGER_NAME)
    current = {(k.name, k.backend, k.dtypes, revision_hex(k.revision)) for k in result.kernels}
    assert {r.key[:4] for r in book.records.values()} == current
    assert all(r.result == "pass" for r in book.records.values())
    records = verify_all(result.kernels)
    figures = Figures.of(records)
    assert figures.failed == figures.unproven == 0 and figures.claims == len(book.records)
    assert_within_recorded(records, book)


# -- measured claims ---------------------------------------------------------------------------


def test_measured_claims_take_their_bound_from_the_ledger(base: str, write: Write) -> None:
    """`measured` bounds: verification records the worst case on the probes (rounded up, never
    below one unit), the gate registers it; without a record the kernel is UNAUDITED."""
    path = write(base.replace("max_ulp: 2", "max_ulp: measured\n  max_relative: measured"))
    records = verify_all(_lowered(path))
    by_key = {(r.dtypes[0], r.claim): r for r in records}
    for t in ("f32", "f64"):
        for claim in ("max_ulp", "max_relative"):
            r = by_key[(t, claim)]
            assert r.result == "pass" and r.evidence["mode"] == "measured"
            assert r.measured is not None and r.bound is not None and r.bound >= r.measured
    assert by_key[("f32", "max_ulp")].bound == 1.0  # exp in f64, rounded once: 0 seen, 1 claimed
    assert by_key[("f32", "max_relative")].bound == 2.0**-24  # the unit roundoff, at least
    assert by_key[("f64", "max_relative")].evidence["metric"] == "elementwise"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _precisions(path, Ledger(records))
    f64 = got[1]
    assert f64.max_ulp == int(by_key[("f64", "max_ulp")].bound or 0) and f64.audited
    assert f64.max_relative == by_key[("f64", "max_relative")].bound
    assert f64.measured == ("max_ulp", "max_relative") and "(measured)" in f64.describe()
    assert f64.declared() == PrecisionGuarantee(bit_stable=True, measured=f64.measured)
    with pytest.warns(UnverifiedClaimWarning, match="max_relative"):
        assert _precisions(path, None) == [UNAUDITED, UNAUDITED]


def test_measured_bounds_round_up_and_never_claim_exactness() -> None:
    u = 2.0**-24
    assert measured_bound("max_ulp", 0.0, u) == 1.0 and measured_bound("max_ulp", 1578, u) == 1578
    assert measured_bound("max_relative", 3.2378443390792333e-07, u) == 3.3e-07
    assert measured_bound("max_relative", 0.0, u) == u
    assert measured_bound("max_relative", 1.0000001e-5, u) == 1.1e-05
    assert measured_bound("max_ulp", float("inf"), u) is None  # nothing finite: no bound holds


def test_an_absolute_bound_cannot_be_measured(base: str, write: Write) -> None:
    path = write(base.replace("max_ulp: 2", "max_absolute: measured"))
    with pytest.raises(FkcError, match=r"max_absolute is a non-negative number, got 'measured'"):
        _lowered(path)


def test_normwise_relative_error_is_per_output_row() -> None:
    """||got - ref|| / ||ref|| over the last axis: a cancelling element does not blow it up,
    a zero reference row admits only a zero row, equal infinities are no difference."""
    ref = np.array([[1.0, 1e-9, 1.0], [0.0, 0.0, 0.0], [np.inf, 2.0, np.nan]])
    got = np.array([[1.0, 2e-9, 1.0], [0.0, 0.0, 0.0], [np.inf, 2.0, np.nan]], np.float32)
    rel, at = normwise_errors(got, ref)
    assert rel[0] == pytest.approx(1e-9 / np.sqrt(2), rel=1e-3) and rel[1] == 0 and rel[2] == 0
    assert at[0] == 1
    got[1, 2] = 1e-30
    assert normwise_errors(got, ref)[0][1] > 1e7  # judged against the smallest normal


# -- the hand-registered CPU kernels -----------------------------------------------------------


def test_checked_in_hand_ledger_proves_every_hand_registered_claim() -> None:
    """concat, the fused kernels and the native ones (where available here) register with their
    claims proven by `hand-registered/ledger.json`, measured bounds filled in; its rows pass."""
    kernels = hand_registered_kernels()
    assert {"concat", "matmul_bias_act", "gated_mlp"} <= {k.op for k in kernels}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedClaimWarning)
        entries = gate_hand_kernels(kernels)
    for k, e in zip(kernels, entries, strict=True):
        assert e.precision.audited and e.precision.bit_stable, k.name
        assert all(getattr(e.precision, c) is not None for c in e.precision.measured), k.name
    book = Ledger.load(HAND_LEDGER_PATH)
    assert all(r.result == "pass" for r in book.records.values())
    records = verify_all(kernels)
    figures = Figures.of(records)
    assert figures.failed == figures.unproven == 0
    assert_within_recorded(records, book)


def test_hand_registered_claims_without_records_are_unaudited() -> None:
    from passes.picker.ranker import PrecisionRequirement

    kernels = hand_registered_kernels()
    with pytest.warns(UnverifiedClaimWarning, match="hand-registered CPU kernels"):
        entries = gate_hand_kernels(kernels, Ledger())
    assert all(e.precision == UNAUDITED for e in entries)
    floor = PrecisionRequirement.parse("bit_stable")
    assert not any(floor.admits(e.precision) for e in entries)
