"""`fuel explain BUNDLE`: the plan a bundle was built with, from its verified picker record.

The bundle is read and checked like `fuel run` reads it (manifest first, every declared file's
size and sha256), but nothing is loaded or compiled: the text comes from `picker.json` (per
kernel op: where it sits, the chosen kernel, every alternative with its costs and verdict, and
why) and the manifest (targets, kernel counts, whether it is signed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.bundle import PICKER_FILE, SIGNATURE_FILE, BundleError, load_json, read_verified

_COLUMNS = ("kernel", "backend", "device", "layer-1", "judge", "transfer", "verdict")


def _ns(v: object) -> str:
    if not isinstance(v, int | float):
        return "-"
    return f"{v / 1e3:.1f} µs" if v >= 1e3 else f"{v:.0f} ns"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "    " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]


def _op_lines(i: int, entry: Mapping[str, Any]) -> list[str]:
    chosen = entry.get("chosen", {})
    head = (
        f"[{i}] {entry.get('at', '?')} {entry.get('op', '?')} -> {chosen.get('kernel_id', '?')} "
        f"on {entry.get('device', '?')}"
    )
    lines = [head, f"    why: {entry.get('why', '')}"]
    alts = entry.get("alternatives") or []
    if alts:
        rows = [_COLUMNS] + [
            (
                str(a.get("kernel", "?")),
                str(a.get("backend", "?")),
                str(a.get("device", "?")),
                _ns(a.get("layer1")),
                _ns(a.get("judge")),
                _ns(a.get("transfer")),
                str(a.get("verdict", "")),
            )
            for a in alts
        ]
        lines += _table(rows)
    return lines


def explain_bundle(path: Path, op_index: int | None = None) -> str:
    """The bundle's plan as text; `BundleError` if the bundle does not verify."""
    manifest, files = read_verified(path)
    if PICKER_FILE not in files:
        raise BundleError(f"{path}: the manifest does not declare '{PICKER_FILE}'")
    record = load_json(files[PICKER_FILE], f"{path}: {PICKER_FILE}")
    ops = record.get("ops") if isinstance(record, dict) else None
    if not isinstance(ops, list) or not all(isinstance(o, dict) for o in ops):
        raise BundleError(f"{path}: {PICKER_FILE} has no list of ops")
    targets = manifest["targets"]
    counts = ", ".join(f"{t} {len(v.get('kernels', []))} kernels" for t, v in targets.items())
    signed = "signed (manifest.sig)" if SIGNATURE_FILE in files else "unsigned"
    out = [
        f"fuel explain: {path} (bundle: {counts}; {signed}; built by fuel "
        f"{manifest.get('fuel_version', '?')})",
        f"{len(ops)} kernel ops, as the picker chose them when the bundle was compiled",
        "",
    ]
    if op_index is not None:
        if not 0 <= op_index < len(ops):
            raise BundleError(f"{path}: --op {op_index}: the bundle has {len(ops)} kernel ops")
        chosen = [(op_index, ops[op_index])]
    else:
        chosen = list(enumerate(ops))
    for i, entry in chosen:
        out += [*_op_lines(i, entry), ""]
    return "\n".join(out)
