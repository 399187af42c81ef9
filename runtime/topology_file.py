"""Declared topologies: read a TOML/JSON machine description into a `SystemTopology`.

Every problem (unknown key, bad device name, negative rate, unknown peer, ...) is a
`TopologyError` naming the file and the problem; see examples/topologies/cpu_2gpu.toml.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runtime.fsutil import read_regular_file
from runtime.topology import (
    BACKEND_NAME,
    DEVICE_NAME,
    GPU_CLASSES,
    Device,
    SystemTopology,
    TopologyError,
    TransferEstimate,
    TransferPath,
    cpu_device,
    declared_pairs,
    gpu_device,
)

# -- the reader --------------------------------------------------------------------------

_TOP_KEYS = frozenset({"devices", "peer_groups", "transfers", "substrates"})
_DEVICE_KEYS = frozenset(
    {
        "name",
        "kind",
        "class",
        "backends",
        "flops_per_ns",
        "bytes_per_ns",
        "memory_bytes",
        "cores",
        "unified_memory",
    }
)
_TRANSFER_KEYS = frozenset({"src", "dst", "latency_ns", "gb_per_s", "path", "bidirectional"})


class _FileReader:
    """Validates one declared topology file; every problem is a `TopologyError` naming it."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)

    def fail(self, problem: str) -> TopologyError:
        return TopologyError(problem, self.path)

    def read(self) -> dict[str, Any]:
        suffix = os.path.splitext(self.path)[1].lower()
        if suffix not in (".toml", ".json"):
            raise self.fail(f"unsupported file type '{suffix}' (expected .toml or .json)")
        try:
            raw = read_regular_file(self.path)  # never blocks on a FIFO or reads a device
        except OSError as e:
            raise self.fail(f"cannot read the file: {e.strerror or e}") from None
        try:
            data = tomllib.loads(raw.decode()) if suffix == ".toml" else json.loads(raw)
        except RecursionError:  # the parsers' depth limit: Python's recursion limit
            raise self.fail(f"not valid {suffix[1:].upper()}: nested too deeply") from None
        except ValueError as e:  # a decode error, or an integer past Python's 4300 digits
            raise self.fail(f"not valid {suffix[1:].upper()}: {e}") from None
        if not isinstance(data, dict):
            raise self.fail("the top level must be a table of devices, peer_groups, transfers")
        self.keys(data, _TOP_KEYS, "the top level")
        return data

    def keys(self, entry: Any, allowed: frozenset[str], where: str) -> dict[str, Any]:
        if not isinstance(entry, dict):
            raise self.fail(f"{where} must be a table, got {type(entry).__name__}")
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise self.fail(
                f"{where}: unknown key '{unknown[0]}' (allowed: {', '.join(sorted(allowed))})"
            )
        return entry

    def number(self, entry: dict[str, Any], key: str, where: str, *, zero_ok: bool) -> float:
        v = entry[key]
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or v < 0 or (v == 0 and not zero_ok):
            want = "a non-negative" if zero_ok else "a positive"
            raise self.fail(f"{where}: {key} must be {want} finite number, got {v!r}")
        return float(v)

    def integer(self, entry: dict[str, Any], key: str, where: str) -> int:
        v = entry[key]
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise self.fail(f"{where}: {key} must be a positive integer, got {v!r}")
        return v

    def names(self, value: Any, pattern: re.Pattern[str], what: str, where: str) -> list[str]:
        if not isinstance(value, list) or not value:
            raise self.fail(f"{where}: {what} must be a non-empty list, got {value!r}")
        for v in value:
            if not isinstance(v, str) or not pattern.fullmatch(v):
                raise self.fail(f"{where}: invalid {what[:-1]} name {v!r}")
        return value

    def device(self, index: int, entry: Any) -> Device:
        where = f"devices[{index}]"
        entry = self.keys(entry, _DEVICE_KEYS, where)
        name = entry.get("name")
        if not isinstance(name, str) or not DEVICE_NAME.fullmatch(name):
            raise self.fail(
                f'{where}: bad device name {name!r} (expected "cpu" or "<kind>:<n>", e.g. "cuda:0")'
            )
        where = f"{where} ('{name}')"
        kind = name.split(":")[0]
        if kind == "cpu" and name != "cpu":
            raise self.fail(f"{where}: the host is named 'cpu' (one cpu device per topology)")
        if entry.get("kind", kind) != kind:
            raise self.fail(f"{where}: kind {entry['kind']!r} contradicts the name")
        base = self.device_base(entry, name, kind, where)
        changes: dict[str, Any] = {}
        for key in ("flops_per_ns", "bytes_per_ns"):
            if key in entry:
                changes[key] = self.number(entry, key, where, zero_ok=False)
        if "memory_bytes" in entry:
            changes["memory_bytes"] = self.integer(entry, "memory_bytes", where)
        if "backends" in entry:
            changes["backends"] = tuple(
                self.names(entry["backends"], BACKEND_NAME, "backends", where)
            )
        if "unified_memory" in entry:
            if not isinstance(entry["unified_memory"], bool):
                raise self.fail(f"{where}: unified_memory must be true or false")
            changes["unified_memory"] = entry["unified_memory"]
        return replace(base, **changes)

    def device_base(self, entry: dict[str, Any], name: str, kind: str, where: str) -> Device:
        cls = entry.get("class", "cpu" if kind == "cpu" else "gpu")
        if kind == "cpu":
            if cls != "cpu":
                raise self.fail(f"{where}: the cpu's class must be 'cpu', got {cls!r}")
            cores = self.integer(entry, "cores", where) if "cores" in entry else None
            return cpu_device(cores)
        if "cores" in entry:
            raise self.fail(f"{where}: 'cores' applies to the cpu only")
        if cls not in GPU_CLASSES:
            raise self.fail(f"{where}: unknown class {cls!r} (known: {', '.join(GPU_CLASSES)})")
        return gpu_device(name, cls)

    def peer_pairs(self, groups: Any, devices: Mapping[str, Device]) -> frozenset[frozenset[str]]:
        if not isinstance(groups, list):
            raise self.fail(f"peer_groups must be a list of lists of device names, got {groups!r}")
        for i, g in enumerate(groups):
            where = f"peer_groups[{i}]"
            names = self.names(g, DEVICE_NAME, "devices", where)
            for n in names:
                if n not in devices:
                    raise self.fail(f"{where}: unknown device '{n}'")
            kinds = {devices[n].kind for n in names}
            if "cpu" in kinds or len(kinds) != 1 or len(set(names)) < 2:
                raise self.fail(
                    f"{where}: a peer group needs two or more distinct non-cpu "
                    f"devices of one kind, got {names}"
                )
        return declared_pairs(groups)

    def transfers(
        self, entries: Any, draft: SystemTopology
    ) -> dict[tuple[str, str], TransferEstimate]:
        if not isinstance(entries, list):
            raise self.fail(f"transfers must be a list of tables, got {entries!r}")
        out: dict[tuple[str, str], TransferEstimate] = {}
        for i, entry in enumerate(entries):
            where = f"transfers[{i}]"
            entry = self.keys(entry, _TRANSFER_KEYS, where)
            src, dst, est = self.transfer(entry, draft, where)
            pairs = [(src, dst)]
            if entry.get("bidirectional", True):
                pairs.append((dst, src))
            for p in pairs:
                if p in out:
                    raise self.fail(f"{where}: transfer {p[0]} -> {p[1]} is declared twice")
                out[p] = est
        return out

    def transfer(
        self, entry: dict[str, Any], draft: SystemTopology, where: str
    ) -> tuple[str, str, TransferEstimate]:
        src, dst = entry.get("src"), entry.get("dst")
        for end in (src, dst):
            if not isinstance(end, str) or end not in {d.name for d in draft.devices}:
                raise self.fail(f"{where}: unknown device {end!r} (src and dst must be declared)")
        if src == dst:
            raise self.fail(f"{where}: src and dst are both '{src}'")
        if "latency_ns" not in entry and "gb_per_s" not in entry:
            raise self.fail(f"{where}: needs latency_ns or gb_per_s")
        if not isinstance(entry.get("bidirectional", True), bool):
            raise self.fail(f"{where}: bidirectional must be true or false")
        base = draft.transfer_estimate(src, dst)
        path = base.path
        if "path" in entry:
            allowed = [p.value for p in TransferPath if p is not TransferPath.SAME_DEVICE]
            if entry["path"] not in allowed:
                raise self.fail(
                    f"{where}: unknown path {entry['path']!r} (known: {', '.join(allowed)})"
                )
            path = TransferPath(entry["path"])
        lat = (
            self.number(entry, "latency_ns", where, zero_ok=True)
            if "latency_ns" in entry
            else base.latency_ns
        )
        bw = (
            self.number(entry, "gb_per_s", where, zero_ok=False)
            if "gb_per_s" in entry
            else base.bytes_per_ns
        )
        return src, dst, TransferEstimate(lat, bw, path)

    def substrates(self, table: Any) -> dict[str, str]:
        if not isinstance(table, dict):
            raise self.fail(f"substrates must be a table of backend = substrate, got {table!r}")
        for b, s in table.items():
            if not BACKEND_NAME.fullmatch(b) or not isinstance(s, str) or not s:
                raise self.fail(f"substrates: bad entry {b!r} = {s!r}")
        return dict(table)


def load_file(path: str | os.PathLike[str], generation: int = 0) -> SystemTopology:
    """A declared topology (TOML or JSON); TopologyError names the file and the problem."""
    r = _FileReader(path)
    data = r.read()
    entries = data.get("devices", [])
    if not isinstance(entries, list):
        raise r.fail(f"devices must be a list of tables ([[devices]]), got {entries!r}")
    devices = [r.device(i, e) for i, e in enumerate(entries)]
    seen: set[str] = set()
    for d in devices:
        if d.name in seen:
            raise r.fail(f"device '{d.name}' is declared twice")
        seen.add(d.name)
    draft = SystemTopology(tuple(devices))
    by_name = {d.name: d for d in draft.devices}
    peers = r.peer_pairs(data.get("peer_groups", []), by_name)
    draft = SystemTopology(draft.devices, peers)
    transfers = r.transfers(data.get("transfers", []), draft)
    subs = r.substrates(data.get("substrates", {}))
    return SystemTopology(draft.devices, peers, transfers, subs, generation, r.path)
