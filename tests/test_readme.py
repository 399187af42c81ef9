"""The README and docs/*.md are true: every example in them runs as written.

Each document runs on its own, from top to bottom, in a scratch folder holding a copy of
`examples/`, by `tests/doc_driver.py`:

* ```python blocks run in one interpreter, sharing a namespace (as a notebook would);
* ```sh / ```bash blocks run line by line (a line ending in `\\` continues), ```console blocks
  run their `$ ` lines, and each line they show after a command must appear in its output
  (whitespace-insensitive; `...` matches anything); every command must exit 0;
* a fenced block right after a line that is only a path in backticks and a colon
  (`` `mykernels/pyproject.toml`: ``) is that file: it is written before anything runs.
* ```mlir blocks of the README parse and verify; other languages (```text, ```toml ...) are
  not run.

The environment is a scratch virtual environment layered over this one (fuel from this
checkout, the installed libraries): its `bin/` comes first on PATH with `python`, `pip`, `fuel`
and `fuel-opt`, so `pip install -e` (with `PIP_NO_INDEX`: never the network) installs into it,
never into the shared one. HOME is a scratch folder; no Judge report is read, so the picker's
choices do not depend on this machine's measurements. Documents run in parallel.

What CI cannot run is said in the document, in a comment right before the block:

    <!-- doc-test: skip: REASON -->                  the block is not run
    <!-- doc-test: skip-line "PREFIX": REASON -->    its lines starting with PREFIX are not run
    <!-- doc-test: given FILE: REASON -->            FILE is a stand-in this test provides

A directive that is malformed, gives no reason or matches nothing fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime import knobs
from runtime.module import FuelModule

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(
    r"^(?P<directives>(?:<!-- doc-test:[^\n]*-->\n)*)"  # doc-test directives before the fence
    r"(?:`(?P<path>[^`\n]+)`:\n\n?)?"  # an optional "`path`:" line before the fence
    r"(?P<fence>`{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)
DIRECTIVE = re.compile(
    r'<!-- doc-test: (?:(?P<skip>skip)|skip-line "(?P<prefix>[^"]+)"|given (?P<given>\S+))'
    r": (?P<reason>\S.*?) -->"
)
SHELL = {"sh", "bash", "console"}
DOC_TIMEOUT_S = 600


@dataclass
class Block:
    """One top-level fenced block of a document and the directives before it."""

    index: int
    info: str
    body: str
    path: str | None = None
    skip: str = ""
    skip_lines: dict[str, str] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)


def blocks(doc: Path) -> list[Block]:
    """Every top-level fenced block of `doc`, in order; ValueError for a bad directive."""
    return parse_blocks(doc.read_text(), doc.name)


def parse_blocks(text: str, name: str) -> list[Block]:
    """`blocks` of a document's text (`name` for messages)."""
    out = []
    for i, m in enumerate(FENCE.finditer(text)):
        block = Block(i + 1, m["info"].strip(), m["body"], m["path"])
        for line in m["directives"].splitlines():
            d = DIRECTIVE.fullmatch(line)
            if d is None:
                raise ValueError(f"{name} block {i + 1}: malformed directive {line!r}")
            if d["skip"]:
                block.skip = d["reason"]
            elif d["prefix"]:
                block.skip_lines[d["prefix"]] = d["reason"]
            else:
                block.given[d["given"]] = d["reason"]
        out.append(block)
    return out


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of a shell block, without its skipped lines;
    ValueError when a `skip-line` prefix matches no command."""
    out: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in block.body.splitlines():
        if block.info == "console" and not raw.startswith("$ ") and not pending:
            if out and raw.strip():
                out[-1][1].append(raw)
            continue
        line = raw.removeprefix("$ ") if block.info == "console" and not pending else raw
        pending += line[:-1] + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        command, pending = pending.strip(), ""
        if command and not command.startswith("#"):
            out.append((command, []))
    used = {p for p in block.skip_lines if any(c.startswith(p) for c, _ in out)}
    if unused := set(block.skip_lines) - used:
        raise ValueError(f"block {block.index}: skip-line {sorted(unused)} matches no command")
    return [(c, e) for c, e in out if not any(c.startswith(p) for p in block.skip_lines)]


def steps(doc: Path) -> list[dict[str, object]]:
    """The driver's plan for `doc`: its Python blocks and shell commands, in order."""
    out: list[dict[str, object]] = []
    for b in blocks(doc):
        label = f"{doc.name} block {b.index} ({b.info})"
        if b.path is not None or b.skip:
            continue
        if b.info == "python":
            out.append({"kind": "python", "label": label, "code": b.body})
        elif b.info in SHELL:
            out.append({"kind": "shell", "label": label, "commands": commands(b)})
    return out


# -- stand-ins for files a document assumes the reader has ----------------------------------


def _mlp_onnx(path: Path) -> None:
    """An ONNX model like the README's Python example: `y = relu(x @ w)`, x f32 (4, 8)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


GIVEN: dict[str, Callable[[Path], None]] = {"model.onnx": _mlp_onnx}
"""What `<!-- doc-test: given FILE: ... -->` may name, and how each stand-in is made."""


# -- the scratch environment -----------------------------------------------------------------


def scratch_env(work: Path) -> dict[str, str]:
    """A virtual environment at `work/venv` layered over this one, and the environment
    variables a document's commands run with (see the module doc)."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_dir,) = venv.glob("lib/python*/site-packages")
    import site

    lines = [str(ROOT)] + [f"import site; site.addsitedir({d!r})" for d in site.getsitepackages()]
    (site_dir / "_fuel_checkout.pth").write_text("\n".join(lines) + "\n")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    scripts["pip"] = "pip._internal.cli.main:main"
    python = venv / "bin" / "python"
    for name, spec in scripts.items():
        module, _, fn = spec.partition(":")
        script = venv / "bin" / name
        script.write_text(f"#!{python}\nimport sys\nfrom {module} import {fn}\nsys.exit({fn}())\n")
        script.chmod(0o755)
    home = work / "home"
    home.mkdir()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # fuel comes from the environment, as a user's does
    env.update(
        # the scratch bin first; then this one's, for the tools a reader has (filecheck, lit)
        PATH=os.pathsep.join([str(venv / "bin"), str(Path(sys.executable).parent), env["PATH"]]),
        VIRTUAL_ENV=str(venv),
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        FUEL_CACHE_DIR=str(knobs.cache_root()),  # compiled C kernels are reused, not rebuilt
        FUEL_JUDGE_REPORT=str(home / "no-judge-report.json"),
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    return env


def run_doc(doc: Path, work: Path) -> tuple[int, str]:
    """Run `doc`'s examples (module doc) under `work`; (exit code, everything printed)."""
    env = scratch_env(work)
    folder = work / "run"
    shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("__py*"))
    for b in blocks(doc):
        for name in b.given:
            GIVEN[name](folder / name)
        if b.path is not None:
            target = folder / b.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.body)
    plan = work / "plan.json"
    plan.write_text(json.dumps(steps(doc)))
    driver = [str(work / "venv" / "bin" / "python"), str(ROOT / "tests" / "doc_driver.py")]
    p = subprocess.run(
        [*driver, str(plan)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=DOC_TIMEOUT_S,
    )
    return p.returncode, p.stdout + p.stderr


@pytest.fixture(scope="module")
def doc_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[int, str]]]]:
    """The selected documents' runs, started together (they are independent)."""
    wanted = {
        item.callspec.params["doc"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_doc_runs" and hasattr(item, "callspec")
    }
    runnable = sorted(d for d in wanted if steps(d))
    with ThreadPoolExecutor(max_workers=max(1, min(len(runnable), os.cpu_count() or 1))) as pool:
        yield {d.name: pool.submit(run_doc, d, tmp_path_factory.mktemp(d.stem)) for d in runnable}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_doc_runs(doc: Path, doc_runs: dict[str, Future[tuple[int, str]]]) -> None:
    if doc.name not in doc_runs:
        pytest.skip(f"{doc.name} has no Python or shell example")
    rc, output = doc_runs[doc.name].result()
    if rc != 0:
        failed = [line for line in output.splitlines() if line.startswith("DOC-TEST FAILED")]
        pytest.fail(f"{failed[-1] if failed else f'exit {rc}'}\n{output[-6000:]}")


def test_readme_ir_example_verifies() -> None:
    mlir = [b.body for b in blocks(README) if b.info == "mlir" and b.path is None]
    assert mlir, "README.md has no ```mlir example"
    for text in mlir:
        FuelModule.parse(text, "README.md")


def test_directives_and_console_blocks_parse() -> None:
    doc = """<!-- doc-test: skip-line "fuel judge": slow -->
```console
$ fuel run a.mlir \\
    --random-inputs
y: [4] f32 ...
$ fuel judge --budget-s 60
```

<!-- doc-test: given model.onnx: the reader's model -->
```sh
fuel import model.onnx -o m.mlir  # a comment
# a comment line
```
"""
    found = parse_blocks(doc, "doc.md")
    assert commands(found[0]) == [("fuel run a.mlir      --random-inputs", ["y: [4] f32 ..."])]
    assert found[1].given == {"model.onnx": "the reader's model"}
    assert commands(found[1]) == [("fuel import model.onnx -o m.mlir  # a comment", [])]
    from tests.doc_driver import unmatched

    assert (
        unmatched(["y: [4] f32 ...", "ran ... kernels"], "y:  [4] f32 sum=1\nran 2 kernels") is None
    )
    assert unmatched(["ran 3 kernels"], "ran 2 kernels") == "ran 3 kernels"
    with pytest.raises(ValueError, match="malformed directive"):
        parse_blocks("<!-- doc-test: skip -->\n```sh\nls\n```\n", "doc.md")
    with pytest.raises(ValueError, match="matches no command"):
        commands(parse_blocks('<!-- doc-test: skip-line "x": y -->\n```sh\nls\n```\n', "d")[0])
