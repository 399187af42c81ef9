"""`fuel` and its subcommands on bad files, bad arguments and bad environment values, in
process (`main([...])`, each case ~ms): every one exits 1 with one `fuel: error:` message that
names the file (with line:col for IR) or the argument at fault, and no traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.badinput.badinput_cli import GOOD_IR, Scratch, assert_refused
from tools.fuel import main

Case = Callable[[Scratch], tuple[list[str], list[str]]]
HUGE = "tensor<100000000000x100000000000xf32>"
BAD_RETURN = GOOD_IR.replace("-> tensor<4xf32>", "-> tensor<5xf32>")  # func.return at 3:3
K_MISMATCH = """func.func @main(%x: tensor<4x8xf32>, %w: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = "fuel.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}
"""
AXIS_RANGE = """func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "fuel.reduce_sum"(%x) <{axes = array<i64: 2>}> : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""
BAD_DEVICE = GOOD_IR.replace("fuel.exp %x", 'fuel.exp %x {fuel.device = #fuel.device<"gpu">}')
HUGE_ARG = f"func.func @main(%x: {HUGE}) -> {HUGE} {{\n  func.return %x : {HUGE}\n}}\n"


def _relu_onnx(s: Scratch, name: str, dims: list[int | str], opset: int = 17) -> str:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")],
        "g",
        [vi("x", TensorProto.FLOAT, dims)],
        [vi("y", TensorProto.FLOAT, dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return s.write(name, model.SerializeToString())


def _npy(s: Scratch, name: str, a: np.ndarray) -> str:
    np.save(s.root / name, a, allow_pickle=True)
    return str(s.root / name)


def _huge_npy(s: Scratch) -> str:
    """A .npy header declaring 10^22 floats, and no data."""
    with open(s.root / "huge.npy", "wb") as f:
        header = {"descr": "<f4", "fortran_order": False, "shape": (10**11, 10**11)}
        np.lib.format.write_array_header_1_0(f, header)
    return str(s.root / "huge.npy")


def _fifo(s: Scratch, name: str) -> str:
    """A named pipe no one writes: reading it plainly would block forever."""
    os.mkfifo(s.root / name)
    return str(s.root / name)


def _run(path: str, *extra: str) -> list[str]:
    return ["run", path, "--random-inputs", *extra]


def _ir(name: str, text: bytes | str, *where: str) -> Case:
    """`fuel run` of IR text; the message names the file and `where` (e.g. its line:col)."""

    def case(s: Scratch) -> tuple[list[str], list[str]]:
        path = s.write(name, text)
        return _run(path), [path + w for w in where] or [path]

    return case


def _input(make: Callable[[Scratch], str], *names: str) -> Case:
    """`fuel run m.mlir --input x=<file>`; the message names the file (and `names`)."""

    def case(s: Scratch) -> tuple[list[str], list[str]]:
        path = make(s)
        return ["run", s.module(), "--input", f"x={path}"], [path, *names]

    return case


RUN: dict[str, Case] = {
    # the module file itself
    "run-missing": lambda s: (_run(str(s.root / "nope.mlir")), [str(s.root / "nope.mlir")]),
    "run-folder-named-mlir": lambda s: (_run(s.folder("d.mlir")), ["d.mlir"]),
    "run-dev-null": lambda s: (_run("/dev/null"), ["/dev/null"]),
    "run-fifo": lambda s: (_run(_fifo(s, "p.mlir")), ["p.mlir", "not a regular file"]),
    "run-empty": _ir("e.mlir", b"", ":1:1"),
    "run-blank": _ir("e.mlir", b"\n \n\t\n", ":"),
    "run-latin1": _ir("l.mlir", "// caf\u00e9\n".encode("latin-1") + GOOD_IR.encode(), ""),
    "run-utf16": _ir("u.mlir", GOOD_IR.encode("utf-16"), ": not UTF-8"),
    "run-binary": _ir("b.mlir", bytes(range(256)) * 4, ": not UTF-8"),
    "run-nul-bytes": _ir("n.mlir", b"\x00" * 64, ":1:1"),
    "run-onnx-text-as-ir": _ir("m.mlir", b"\x08\x07\x12\x04onnx", ""),
    "run-verify-return-type": _ir("v.mlir", BAD_RETURN, ":3:3: 'func.return'"),
    "run-verify-matmul-k": _ir("v.mlir", K_MISMATCH, ":2:3: 'fuel.matmul' contraction"),
    "run-verify-axis": _ir("v.mlir", AXIS_RANGE, ":2:3: 'fuel.reduce_sum' axis 2"),
    "run-attribute-verifier": _ir("a.mlir", BAD_DEVICE, ":2:"),
    "run-unknown-op": _ir("v.mlir", GOOD_IR.replace("fuel.exp", "fuel.nope"), ":2:"),
    "run-huge-arg": _ir("h.mlir", HUGE_ARG, ":1:1: 'func.func' declares"),
    "run-no-function": _ir("f.mlir", "builtin.module {\n}\n", ""),
    "run-two-functions": _ir(
        "f.mlir", GOOD_IR.replace("@main", "@a") + GOOD_IR.replace("@main", "@b"), ""
    ),
    "run-deep-nesting": _ir("d.mlir", "builtin.module {\n" * 3000 + "}\n" * 3000, ""),
    # ONNX models given to `fuel run`
    "run-onnx-missing": lambda s: (_run(str(s.root / "no.onnx")), [str(s.root / "no.onnx")]),
    "run-onnx-folder": lambda s: (_run(s.folder("d.onnx")), ["d.onnx"]),
    "run-onnx-garbage": lambda s: (_run(s.write("g.onnx", b"\xff" * 99)), ["g.onnx"]),
    "run-onnx-empty": lambda s: (_run(s.write("e.onnx", b"")), ["e.onnx"]),
    "run-onnx-huge-input": lambda s: (
        _run(_relu_onnx(s, "h.onnx", [10**11, 10**11])),
        ["h.onnx", "graph input 'x'"],
    ),
    "run-onnx-dynamic-dim": lambda s: (_run(_relu_onnx(s, "d.onnx", ["b"])), ["d.onnx"]),
    "run-onnx-opset-999": lambda s: (_run(_relu_onnx(s, "o.onnx", [4], 999)), ["o.onnx"]),
    # weights
    "weights-missing": lambda s: (
        _run(s.module(), "--weights", str(s.root / "no.safetensors")),
        ["no.safetensors"],
    ),
    "weights-folder": lambda s: (_run(s.module(), "--weights", s.folder("w")), ["w"]),
    "weights-dev-null": lambda s: (_run(s.module(), "--weights", "/dev/null"), ["/dev/null"]),
    "weights-garbage": lambda s: (
        _run(s.module(), "--weights", s.write("g.safetensors", b"\x07" * 40)),
        ["g.safetensors"],
    ),
    "weights-empty": lambda s: (
        _run(s.module(), "--weights", s.write("e.safetensors", b"")),
        ["e.safetensors"],
    ),
    # --input files
    "input-missing": _input(lambda s: str(s.root / "no.npy")),
    "input-folder": _input(lambda s: s.folder("x.npy")),
    "input-dev-null": _input(lambda s: "/dev/null"),
    "input-fifo": _input(lambda s: _fifo(s, "p.npy")),
    "input-empty": _input(lambda s: s.write("e.npy", b"")),
    "input-not-npy": _input(lambda s: s.write("t.npy", "1 2 3\n")),
    "input-truncated": _input(lambda s: s.write("t.npy", b"\x93NUMPY\x01\x00\x76\x00{'descr'")),
    "input-huge-header": _input(_huge_npy),
    "input-npz": _input(
        lambda s: (np.savez(s.root / "x.npz", a=np.ones(3)), str(s.root / "x.npz"))[1]
    ),
    "input-object-array": _input(lambda s: _npy(s, "o.npy", np.array([{}], dtype=object))),
    "input-wrong-dtype": _input(lambda s: _npy(s, "i.npy", np.ones((2, 4), np.int64)), "'x'"),
    "input-wrong-shape": _input(lambda s: _npy(s, "s.npy", np.ones((3, 3), np.float32)), "'x'"),
    # other arguments of `fuel run`
    "input-no-equals": lambda s: (["run", s.module(), "--input", "x"], ["NAME=FILE.npy"]),
    "input-twice": lambda s: (
        ["run", s.module(), *["--input", f"x={_npy(s, 'x.npy', np.ones((2, 4), np.float32))}"] * 2],
        ["--input x is given twice"],
    ),
    "input-unknown-name": lambda s: (
        _run(s.module(), "--input", f"zz={_npy(s, 'z.npy', np.ones(2, np.float32))}"),
        ["zz"],
    ),
    "inputs-missing": lambda s: (["run", s.module()], ["missing input(s) x"]),
    "seed-negative": lambda s: (_run(s.module(), "--seed", "-1"), ["--seed"]),
    "seed-not-a-number": lambda s: (_run(s.module(), "--seed", "one"), ["--seed"]),
    "repeat-zero": lambda s: (_run(s.module(), "--repeat", "0"), ["--repeat"]),
    "unknown-flag": lambda s: (_run(s.module(), "--frobnicate"), ["--frobnicate"]),
    "target-on-ir": lambda s: (_run(s.module(), "--target", "sm_90"), ["--target"]),
    "output-dir-a-file": lambda s: (
        _run(s.module(), "--output-dir", s.write("f", "x")),
        [str(s.root / "f")],
    ),
    # bundles
    "bundle-empty-folder": lambda s: (_run(s.folder("empty")), ["empty", "manifest.json"]),
    "bundle-weights-flag": lambda s: (_run(s.bundle(), "--weights", "w"), ["--weights"]),
    "bundle-unknown-target": lambda s: (_run(s.bundle(), "--target", "sm_42"), ["sm_42"]),
    "bundle-not-a-zip": lambda s: (_run(s.write("t.fuelbundle", "text")), ["t.fuelbundle"]),
    "bundle-empty-archive": lambda s: (_run(s.write("e.fuelbundle", b"")), ["e.fuelbundle"]),
    "bundle-truncated-archive": lambda s: (
        _run(s.write("c.fuelbundle", Path(s.archive()).read_bytes()[:300])),
        ["c.fuelbundle"],
    ),
    "bundle-no-manifest": lambda s: (
        _run(s.archive(drop="manifest.json")),
        ["a.fuelbundle", "manifest.json"],
    ),
    "bundle-manifest-not-json": lambda s: (
        _run((s.write("b/manifest.json", "{nope"), str(s.root / "b"))[1]),
        ["manifest.json"],
    ),
    # the command line itself
    "no-command": lambda s: ([], ["command"]),
    "unknown-command": lambda s: (["frobnicate"], ["frobnicate"]),
    "run-no-module": lambda s: (["run"], ["module"]),
}

COMPILE: dict[str, Case] = {
    "compile-no-output": lambda s: (["compile", s.module()], ["-o/--output"]),
    "compile-missing": lambda s: (
        ["compile", str(s.root / "no.mlir"), "-o", str(s.root / "o")],
        ["no.mlir"],
    ),
    "compile-verify-error": lambda s: (
        ["compile", s.write("v.mlir", K_MISMATCH), "-o", str(s.root / "o")],
        ["v.mlir:2:3"],
    ),
    "compile-unknown-target": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--target", "tpu"],
        ["'tpu'"],
    ),
    "compile-target-twice": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--target", "cpu", "--target", "cpu"],
        ["cpu"],
    ),
    "compile-option-no-equals": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--option", "judge"],
        ["--option"],
    ),
    "compile-option-unknown": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--option", "frob=1"],
        ["frob"],
    ),
    "compile-option-bad-value": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--option", "optimize=maybe"],
        ["optimize='maybe'"],
    ),
    "compile-option-other-target": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--option", "sm_90:block=64"],
        ["sm_90:block=64"],
    ),
    "compile-precision-garbage": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--precision", "fast"],
        ["'fast'"],
    ),
    "compile-topology-missing": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--topology", "no.toml"],
        ["no.toml"],
    ),
    "compile-topology-latin1": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--topology", s.write("t.toml", b"\xff")],
        ["t.toml"],
    ),
    "compile-topology-not-toml": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--topology", s.write("t.toml", "[[[")],
        ["t.toml"],
    ),
    "compile-topology-wrong-suffix": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--topology", s.write("t.yaml", "")],
        ["t.yaml"],
    ),
    "compile-over-a-file": lambda s: (
        ["compile", s.module(), "-o", s.write("o.txt", "keep me")],
        ["o.txt"],
    ),
    "compile-into-dev-null": lambda s: (["compile", s.module(), "-o", "/dev/null"], ["/dev/null"]),
    "compile-bad-format": lambda s: (
        ["compile", s.module(), "-o", str(s.root / "o"), "--format", "tar"],
        ["--format"],
    ),
}

IMPORT: dict[str, Case] = {
    "import-missing": lambda s: (["import", str(s.root / "no.onnx")], ["no.onnx"]),
    "import-folder": lambda s: (["import", s.folder("d.onnx")], ["d.onnx"]),
    "import-dev-null": lambda s: (
        ["import", "/dev/null", "-o", str(s.root / "o.mlir")],
        ["/dev/null"],
    ),
    "import-garbage": lambda s: (["import", s.write("g.onnx", b"\x08\xff" * 50)], ["g.onnx"]),
    "import-ir-file": lambda s: (["import", s.write("m.onnx", GOOD_IR)], ["m.onnx"]),
    "import-huge-input": lambda s: (
        ["import", _relu_onnx(s, "h.onnx", [10**11, 10**11])],
        ["h.onnx", "more than"],
    ),
    "import-bad-input-shape": lambda s: (
        ["import", _relu_onnx(s, "d.onnx", ["b"]), "--input-shape", "x=2xq"],
        ["--input-shape"],
    ),
    "import-huge-input-shape": lambda s: (
        ["import", _relu_onnx(s, "d.onnx", ["b"]), "--input-shape", "x=99999999999x99999999999"],
        ["d.onnx"],
    ),
    "import-output-named-like-weights": lambda s: (
        ["import", _mlp_onnx(s), "-o", str(s.root / "m.safetensors")],
        ["m.safetensors"],
    ),
}

EXPLAIN: dict[str, Case] = {
    "explain-missing": lambda s: (["explain", str(s.root / "no.mlir")], ["no.mlir"]),
    "explain-folder": lambda s: (["explain", s.folder("d.mlir")], ["d.mlir"]),
    "explain-latin1": lambda s: (
        ["explain", s.write("l.mlir", b"\xe9" + GOOD_IR.encode())],
        ["l.mlir"],
    ),
    "explain-verify-error": lambda s: (
        ["explain", s.write("v.mlir", BAD_RETURN), "--judge", "none"],
        ["v.mlir:3:3"],
    ),
    "explain-op-out-of-range": lambda s: (
        ["explain", s.module(), "--judge", "none", "--op", "99"],
        ["--op index 99"],
    ),
    "explain-html-folder": lambda s: (
        ["explain", s.module(), "--judge", "none", "--html", s.folder("h.html")],
        ["h.html"],
    ),
    "explain-topology-deep-json": lambda s: (
        ["explain", s.module(), "--topology", s.write("t.json", "[" * 100_000 + "]" * 100_000)],
        ["t.json", "nested too deeply"],
    ),
    "explain-topology-deep-toml": lambda s: (
        ["explain", s.module(), "--topology", s.write("t.toml", "a = " + "[" * 100_000)],
        ["t.toml", "nested too deeply"],
    ),
    "explain-topology-long-number": lambda s: (
        [
            "explain",
            s.module(),
            "--topology",
            s.write("t.json", '{"devices": ' + "9" * 10**5 + "}"),
        ],
        ["t.json", "digits"],
    ),
    "explain-topology-fifo": lambda s: (
        ["explain", s.module(), "--topology", _fifo(s, "t.toml")],
        ["t.toml", "not a regular file"],
    ),
    "explain-topology-dev-null": lambda s: (
        ["explain", s.module(), "--topology", "/dev/null"],
        ["/dev/null"],
    ),
}

JUDGE: dict[str, Case] = {
    "judge-budget-nan": lambda s: (["judge", "--budget-s", "nan"], ["--budget-s"]),
    "judge-budget-zero": lambda s: (["judge", "--budget-s", "0"], ["--budget-s"]),
    "judge-budget-text": lambda s: (["judge", "--budget-s", "soon"], ["--budget-s"]),
    "judge-unknown-op": lambda s: (
        ["judge", "--ops", "frob", "--out", str(s.root / "j")],
        ["frob"],
    ),
    "judge-unknown-dtype": lambda s: (
        ["judge", "--dtypes", "f7", "--out", str(s.root / "j")],
        ["f7"],
    ),
    "judge-no-dtypes": lambda s: (
        ["judge", "--dtypes", ",", "--out", str(s.root / "j")],
        ["--dtypes"],
    ),
}


def _mlp_onnx(s: Scratch) -> str:
    """A model with a weight (so `fuel import` writes a weights file)."""
    w = onnx.numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [vi("x", TensorProto.FLOAT, [2, 64])],
        [vi("y", TensorProto.FLOAT, [2, 64])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return s.write("mlp.onnx", model.SerializeToString())


CASES = {**RUN, **COMPILE, **IMPORT, **EXPLAIN, **JUDGE}


@pytest.fixture
def scratch(tmp_path: Path, bundle_dir: Path, bundle_files: dict[str, bytes]) -> Scratch:
    return Scratch(tmp_path, bundle_dir, bundle_files)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fuel_refuses(
    case: str, scratch: Scratch, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv, names = CASES[case](scratch)
    monkeypatch.chdir(scratch.root)  # relative names (no.toml) resolve in the case's folder
    rc = main(argv)
    assert_refused(rc, capsys.readouterr().err, names)


ENV: dict[str, tuple[str, str, Callable[[Scratch], list[str]]]] = {
    "native-yes": ("FUEL_NATIVE", "yes", lambda s: _run(s.module())),
    "native-off": ("FUEL_NATIVE", "off", lambda s: _run(s.module())),
    "emulate-2": ("FUEL_EMULATE_GPU", "2", lambda s: _run(s.bundle())),
    "emulate-true": ("FUEL_EMULATE_GPU", "true", lambda s: _run(s.archive())),
    "threads-abc": ("FUEL_NUM_THREADS", "abc", lambda s: _run(s.bundle())),
    "threads-float": ("FUEL_NUM_THREADS", "1.5", lambda s: _run(s.bundle())),
}


@pytest.mark.parametrize("case", sorted(ENV))
def test_bad_environment_values(
    case: str, scratch: Scratch, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fuel variable set to a value fuel cannot use is an error naming the variable."""
    from runtime import native

    var, value, make = ENV[case]
    argv = make(scratch)
    if var == "FUEL_NUM_THREADS":
        if not native.enabled():
            pytest.skip("no C compiler: the native library (which reads it) never loads")
        monkeypatch.setattr(native, "_LIB", [])  # load it again: the pool size is read then
    monkeypatch.setenv(var, value)
    rc = main(argv)
    assert_refused(rc, capsys.readouterr().err, [var, repr(value)])
