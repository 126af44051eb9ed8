"""``--report PATH`` for the subcommands that run pipelines (opt, run, build, fuzz --replay).

The path is checked before any work, so a typo fails at once; the report is
written whether the pipeline succeeds or fails (then it ends with the error,
which is when it helps most).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from phasec import console
from phasec.ir import IRModule
from phasec.transform import PassInstrument

__all__ = ["add_report_argument", "CliReport", "PassProgress"]


def add_report_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--report", metavar="PATH", default=None,
                        help="write a pipeline report: PATH.html (one self-contained page: "
                             "timeline, diffs, diagnostics) or PATH.json (the same data)")


class CliReport:
    """A report for one command: its recorder goes into the pass instruments."""

    def __init__(self, path: str | None, title: str, verify: str) -> None:
        self.path = path
        self.title = title
        self.recorder: Any = None
        if path is not None:
            # (the explorer loads with --report only, here and in write())
            from phasec.explorer import PipelineRecorder, check_report_path

            check_report_path(path)
            self.recorder = PipelineRecorder(verify)

    @property
    def instruments(self) -> list[Any]:
        """The command's pass instruments: the report's recorder (with
        ``--report``) and, on a terminal, a progress line naming the pass."""
        out: list[Any] = [self.recorder] if self.recorder is not None else []
        if console.progress_enabled():
            out.append(PassProgress())
        return out

    def write(self, start: IRModule | None, final: IRModule | None = None,
              error: BaseException | None = None, kernels: int | None = None) -> None:
        """Write the report (a no-op without ``--report``)."""
        if self.recorder is None:
            return
        from phasec.explorer import PipelineReport

        with console.step(f"writing the report {self.path}"):
            doc = self.recorder.document(self.title, start=start, final=final, error=error,
                                         kernels=kernels)
            PipelineReport(doc).save(self.path)
        print(f"report: {self.path}", file=sys.stderr)


class PassProgress(PassInstrument):
    """A progress line (:func:`phasec.console.step`) naming the pass that runs."""

    def __init__(self) -> None:
        self._step: console.Step | None = None
        self._depth = 0
        self._count = 0

    def enter_pass_ctx(self) -> None:
        self._depth += 1
        if self._step is None:
            self._step = console.step("running passes")
            self._step.__enter__()

    def exit_pass_ctx(self) -> None:
        self._depth -= 1
        if self._depth <= 0 and self._step is not None:
            self._step.__exit__(None, None, None)
            self._step = None

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self._count += 1
        if self._step is not None:
            self._step.update(self._count, f"pass {self._count}: {info.name}")
