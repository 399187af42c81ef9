"""What the tools show of a compile's stages (`passes.instrument`): `--dump-dir`,
`--time-passes`, IR dumps inside a pass, and a progress bar for a long compile.

    with compile_view(dump_dir="dump/", time_passes=True):
        write_bundle(module, "m.fuelbundle")

The progress bar (tqdm, on stderr) shows the running stage and how many of the announced
stages are done; it appears only on a terminal and only once the compile has run `delay`
seconds (2), and clears itself when done. With `FUEL_LOG` set the log shows the stages
instead (a bar would garble its lines).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm
from xdsl.printer import Printer

from lowering.dumps import DumpDir, module_of
from passes.instrument import (
    LOGGER,
    Stage,
    StageObserver,
    TimingObserver,
    apply_fuel_log,
    instrumented,
)

PROGRESS_DELAY_S = 2.0
"""A compile shorter than this shows no progress bar."""


@dataclass
class IrPrinter(StageObserver):
    """`--print-ir-before-all` / `--print-ir-after-all` for the stages inside a pass (the
    pass pipeline prints around the passes themselves): MLIR's dump header, IR on stderr."""

    before: bool = False
    after: bool = False
    min_depth: int = 2

    def _dump(self, when: str, stage: Stage) -> None:
        module = module_of(stage.product)
        if module is None or len(stage.path) < self.min_depth:
            return
        print(f"// -----// IR Dump {when} {stage.label} //----- //", file=sys.stderr)
        Printer(stream=sys.stderr).print_op(module)
        print("\n", file=sys.stderr)

    def started(self, stage: Stage) -> None:
        if self.before:
            self._dump("Before", stage)

    def finished(self, stage: Stage) -> None:
        if self.after:
            self._dump("After", stage)


class Progress(StageObserver):
    """A tqdm bar: the running stage, stages done of those announced (see the module doc)."""

    def __init__(self, delay: float = PROGRESS_DELAY_S) -> None:
        self.delay = delay
        self.bar = tqdm(
            total=0,
            unit="stage",
            file=sys.stderr,
            delay=delay,
            leave=False,
            disable=None,  # tqdm: off unless stderr is a terminal
            bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} stages [{elapsed}]",
        )
        # tqdm only draws on an update; a first stage longer than `delay` shows at `delay`.
        self.timer = threading.Timer(delay, self.bar.refresh)
        self.timer.daemon = True
        if not self.bar.disable:
            self.timer.start()

    def expect(self, count: int) -> None:
        self.bar.total = (self.bar.total or 0) + count

    def _shown(self) -> bool:
        return not self.bar.disable and time.time() - self.bar.start_t >= self.delay

    def started(self, stage: Stage) -> None:
        self.bar.set_description_str(" > ".join(stage.path), refresh=False)
        if self._shown():
            self.bar.refresh()  # a new stage shows at once (tqdm rate-limits updates only)

    def finished(self, stage: Stage) -> None:
        self.bar.total = max(self.bar.total or 0, self.bar.n + 1)
        self.bar.update(1)

    def close(self) -> None:
        self.timer.cancel()
        if self._shown():
            self.bar.clear()  # tqdm clears only a bar an update drew, not one refresh() drew
        self.bar.close()


@contextmanager
def compile_view(
    dump_dir: str | Path | None = None,
    time_passes: bool = False,
    progress: bool = True,
    extra: tuple[StageObserver, ...] = (),
) -> Iterator[TimingObserver | None]:
    """Stages run in the block are dumped under `dump_dir`, timed (the table goes to stderr
    at the end, even after an error), and shown by a progress bar on a terminal."""
    apply_fuel_log()
    timing = TimingObserver() if time_passes else None
    bar = Progress() if progress and not LOGGER.isEnabledFor(logging.INFO) else None
    dumps = DumpDir(Path(dump_dir)) if dump_dir else None
    observers = [o for o in (*extra, dumps, timing, bar) if o is not None]
    try:
        with instrumented(*observers):
            yield timing
    finally:
        if bar is not None:
            bar.close()
        if timing is not None:
            sys.stderr.write(timing.report())
