"""kill -9 of a process saving a module over and over: whenever it dies, the IR + weights pair
on disk loads consistently (the weights the IR was saved with) or is refused as torn, never
loaded with the wrong weights and never any other error."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from runtime.module import FuelModule, ModuleError

SAVER = """
import sys
import numpy as np
from tests.badinput.badinput_modules import small_module
m = small_module()
for v in range(1, 1_000_000):
    m.weights["w"] = np.full((4, 3), v, np.float32)
    m.save(sys.argv[1])
"""


def test_kill_9_while_saving(tmp_path: Path) -> None:
    path = tmp_path / "m.mlir"
    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-c", SAVER, str(path)], cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.01)
        time.sleep(random.uniform(0.05, 0.15))  # a few hundred saves in
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert path.exists()
    try:
        w, refused = FuelModule.load(path).weights["w"], ""
    except ModuleError as e:
        w, refused = None, str(e)
    if w is None:
        assert "is not the one it was saved with" in refused  # torn, and refused as such
    else:
        assert np.all(w == w.flat[0]) and w.flat[0] >= 1
