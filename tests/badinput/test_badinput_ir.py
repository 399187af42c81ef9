"""Bad IR and IR + weights pairs at the API: every case is a `ModuleError` or `WeightsError`
whose message names the file at fault, never another exception."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from frontends.builder import GraphBuilder
from runtime.module import FuelModule, ModuleError
from runtime.weights import WeightsError

GOOD = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""
HUGE = "tensor<100000000000x100000000000xf32>"


def _func(arg: str, body: str = "", ret: str | None = None) -> str:
    ret = ret or arg
    return (
        f"func.func @main(%x: {arg}) -> {ret} {{\n{body}  func.return %x : {arg}\n}}\n"
        if not body
        else f"func.func @main(%x: {arg}) -> {ret} {{\n{body}}}\n"
    )


TEXT_CASES: dict[str, tuple[bytes, str]] = {
    "empty": (b"", r"bad\.mlir:1:1"),
    "blank": (b"\n\n  \n", r"bad\.mlir:"),
    "latin1": ("// caf\u00e9\n".encode("latin-1") + GOOD.encode(), r"bad\.mlir: not UTF-8 text"),
    "ff-first": (b"\xff" + GOOD.encode(), r"bad\.mlir: not UTF-8 text \(byte 0"),
    "nul": (GOOD.encode().replace(b"exp", b"e\x00p"), r"bad\.mlir:"),
    "int-overflow": (
        GOOD.replace(
            "%x : tensor<4xf32>\n  func",
            "%x {a = 99999999999999999999 : i32} : tensor<4xf32>\n  func",
        ).encode(),
        r"bad\.mlir:2:\d+: Integer value 99999999999999999999 is out of range",
    ),
    "deep-parens": (
        b"func.func @main() -> " + b"(" * 50_000 + b")" * 50_000 + b" {\n}\n",
        r"bad\.mlir:1:\d+: nested too deeply",
    ),
    "deep-regions": (b"builtin.module {\n" * 3000 + b"}\n" * 3000, r"bad\.mlir:"),
    "huge-arg": (_func(HUGE).encode(), r"bad\.mlir:1:1: 'func.func' declares tensor<1000"),
    "huge-result": (
        _func(
            "tensor<1xf32>",
            f"  %y = fuel.broadcast %x : tensor<1xf32> -> {HUGE}\n  func.return %y : {HUGE}\n",
            HUGE,
        ).encode(),
        r"bad\.mlir:2:3: 'fuel.broadcast' declares tensor<1000",
    ),
    "huge-weight": (
        f'func.func @main() -> {HUGE} {{\n  %w = fuel.weight "w" : {HUGE}\n'
        f"  func.return %w : {HUGE}\n}}\n".encode(),
        r"bad\.mlir:2:3: 'fuel.weight' declares",
    ),
    "complex-arg": (
        _func("tensor<4xcomplex<f32>>").encode(),
        r"bad\.mlir:1:1: @main argument 0 has type tensor<4xcomplex<f32>>",
    ),
    "index-result": (_func("index").encode(), r"bad\.mlir:1:1: @main argument 0 has type index"),
    "bad-type-op": (
        GOOD.replace(
            "%y = fuel.exp %x : tensor<4xf32>", "%y = fuel.exp %x : tensor<4xi32>"
        ).encode(),
        r"bad\.mlir:2:\d+",
    ),
    "unknown-op": (GOOD.replace("fuel.exp", "fuel.frobnicate").encode(), r"bad\.mlir:2:\d+"),
    "truncated": (GOOD.encode()[: len(GOOD) // 2], r"bad\.mlir:\d+:\d+"),
    "unterminated-string": (
        b'builtin.module attributes {a = "' + b"a" * 10_000,
        r"(?s)bad\.mlir:1:\d+.*End of file reached before closing string",
    ),
}


@pytest.mark.parametrize("case", sorted(TEXT_CASES))
def test_bad_ir_text(case: str, tmp_path: Path) -> None:
    data, match = TEXT_CASES[case]
    (tmp_path / "bad.mlir").write_bytes(data)
    with pytest.raises(ModuleError, match=match):
        FuelModule.load(tmp_path / "bad.mlir")


@pytest.mark.parametrize("cut", range(1, 12))
def test_every_truncation_of_a_saved_module(cut: int, tmp_path: Path) -> None:
    text = _saved(tmp_path).read_bytes()
    (tmp_path / "cut.mlir").write_bytes(text[: len(text) * cut // 12])
    with pytest.raises((ModuleError, WeightsError), match=r"cut\.mlir"):
        FuelModule.load(tmp_path / "cut.mlir")


def _saved(tmp_path: Path, seed: int = 0, name: str = "m") -> Path:
    g = GraphBuilder(seed=seed)
    x = g.input("x", (2, 4))
    return g.build(outputs={"y": g.tanh(g.matmul(x, g.weight("w", (4, 3))))}).save(
        tmp_path / f"{name}.mlir"
    )


def _swap_weights(p: Path) -> str:
    other = _saved(p.parent, seed=1, name="other")
    p.with_suffix(".safetensors").write_bytes(other.with_suffix(".safetensors").read_bytes())
    return r"m\.mlir: its weights file .*m\.safetensors is not the one it was saved with"


def _weights_as(data: bytes) -> Callable[[Path], str]:
    def edit(p: Path) -> str:
        p.with_suffix(".safetensors").write_bytes(data)
        return r"m\.safetensors"

    return edit


def _ir_edit(old: str, new: str, match: str) -> Callable[[Path], str]:
    def edit(p: Path) -> str:
        p.write_text(p.read_text().replace(old, new, 1))
        return match

    return edit


def _weights_dir(p: Path) -> str:
    w = p.with_suffix(".safetensors")
    w.unlink()
    w.mkdir()
    return r"cannot read weights file .*m\.safetensors: Is a directory"


PAIR_CASES: dict[str, Callable[[Path], str]] = {
    "torn-pair": _swap_weights,
    "weights-empty": _weights_as(b""),
    "weights-garbage": _weights_as(b"\x08" * 64),
    "weights-huge-header-len": _weights_as((2**62).to_bytes(8, "little") + b"{}"),
    "weights-bad-json-header": _weights_as((4).to_bytes(8, "little") + b"{{{{"),
    "weights-a-folder": _weights_dir,
    "weights-missing": lambda p: (p.with_suffix(".safetensors").unlink(), "cannot read")[1],
    "weights-dev-zero": _ir_edit(
        'fuel.weights = "m.safetensors"',
        'fuel.weights = "/dev/zero"',
        "cannot read weights file /dev/zero: not a regular file",
    ),
    "hash-not-a-string": _ir_edit(
        'fuel.weights_sha256 = "',
        'fuel.weights_sha256 = 7, x = "',
        r"m\.mlir: the module attribute fuel.weights_sha256 must be",
    ),
    "hash-wrong": _ir_edit(
        'fuel.weights_sha256 = "', 'fuel.weights_sha256 = "00', r"m\.mlir: its weights file"
    ),
    "old-ir-weight-reshaped": lambda p: (
        p.write_text(
            'builtin.module attributes {fuel.weights = "m.safetensors"} {\n'
            "func.func @main() -> tensor<3x4xf32> {\n"
            '  %w = fuel.weight "w" : tensor<3x4xf32>\n'
            "  func.return %w : tensor<3x4xf32>\n}\n}\n"
        ),
        r"weight 'w' is declared tensor<3x4xf32> but the file holds float32\[4, 3\]",
    )[1],
}


@pytest.mark.parametrize("case", sorted(PAIR_CASES))
def test_bad_ir_weights_pairs(case: str, tmp_path: Path) -> None:
    path = _saved(tmp_path)
    match = PAIR_CASES[case](path)
    with pytest.raises((ModuleError, WeightsError), match=match):
        FuelModule.load(path)


def test_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.mlir")
    for p in (tmp_path / "fifo.mlir", Path("/dev/zero"), tmp_path):
        with pytest.raises(ModuleError, match=f"cannot read {p}: "):
            FuelModule.load(p)
