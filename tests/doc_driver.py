"""Runs one document's examples in order; `tests/test_readme.py` starts it, inside the scratch
environment it made, with a plan (JSON) of steps:

* `{"kind": "python", "label", "code"}`: executed in one namespace shared by the document's
  Python blocks, like a notebook, with the scratch folder on `sys.path` (an interactive
  interpreter started there); packages a shell step installed since are importable.
* `{"kind": "shell", "label", "commands": [[command, [expected line, ...]], ...]}`: each command
  runs in `bash`; it must exit 0, and each expected line must appear in its output, in order
  (whitespace runs compare equal, `...` matches anything).

Prints what every step printed; on the first failure prints `DOC-TEST FAILED: <label>: <why>`
and exits 1.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import site
import subprocess
import sys
import time
import traceback
from pathlib import Path


def fail(label: str, why: str) -> None:
    print(f"DOC-TEST FAILED: {label}: {why}", flush=True)
    sys.exit(1)


def matcher(expected: str) -> re.Pattern[str]:
    """`expected` as a pattern over one output line: whitespace runs match any whitespace run,
    `...` matches anything."""
    parts = [re.escape(" ".join(p.split())) for p in expected.split("...")]
    return re.compile(r"\s*" + r".*".join(parts).replace(r"\ ", r"\s+") + r"\s*")


def unmatched(expected: list[str], output: str) -> str | None:
    """The first expected line not found (in order) among the output's lines, else None."""
    lines = iter(output.splitlines())
    for want in expected:
        pattern = matcher(want)
        if not any(pattern.fullmatch(line) for line in lines):
            return want
    return None


def refresh_site(seen: set[str]) -> None:
    """Process the `.pth` files a `pip install` added to this environment since the last call,
    as a new interpreter would at start-up."""
    for sitedir in site.getsitepackages():
        for pth in sorted(p.name for p in Path(sitedir).glob("*.pth")):
            if pth not in seen:
                seen.add(pth)
                site.addpackage(sitedir, pth, None)  # type: ignore[attr-defined]
    importlib.invalidate_caches()


def run_shell(label: str, commands: list[tuple[str, list[str]]]) -> None:
    for command, expected in commands:
        print(f"$ {command}", flush=True)
        t0 = time.perf_counter()
        p = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True
        )
        output = p.stdout + p.stderr
        print(output, end="" if output.endswith("\n") or not output else "\n")
        print(f"[{time.perf_counter() - t0:.1f} s]", flush=True)
        if p.returncode != 0:
            fail(label, f"`{command}` exited {p.returncode}")
        missing = unmatched(expected, output)
        if missing is not None:
            fail(label, f"`{command}` did not print a line like {missing!r}")


def main(plan: Path) -> int:
    sys.path[0] = os.getcwd()  # as `python` started in the scratch folder, not this script's
    seen = {p.name for d in site.getsitepackages() for p in Path(d).glob("*.pth")}
    namespace: dict[str, object] = {"__name__": "__main__"}
    for step in json.loads(plan.read_text()):
        print(f"--- {step['label']}", flush=True)
        if step["kind"] == "shell":
            run_shell(step["label"], step["commands"])
            continue
        refresh_site(seen)
        try:
            exec(compile(step["code"], step["label"], "exec"), namespace)
        except BaseException as e:  # a doc block may raise anything, SystemExit too: report it
            traceback.print_exc()
            fail(step["label"], f"{type(e).__name__}: {e}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
