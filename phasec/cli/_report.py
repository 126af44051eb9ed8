"""``--report PATH`` for the subcommands that run pipelines (opt, run, build, fuzz --replay).

The path is checked before any work, so a typo fails at once; the report is
written whether the pipeline succeeds or fails (then it ends with the error,
which is when it helps most).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from phasec.ir import IRModule

__all__ = ["add_report_argument", "CliReport"]


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
        return [self.recorder] if self.recorder is not None else []

    def write(self, start: IRModule | None, final: IRModule | None = None,
              error: BaseException | None = None, kernels: int | None = None) -> None:
        """Write the report (a no-op without ``--report``)."""
        if self.recorder is None:
            return
        from phasec.explorer import PipelineReport

        doc = self.recorder.document(self.title, start=start, final=final, error=error,
                                     kernels=kernels)
        PipelineReport(doc).save(self.path)
        print(f"report: {self.path}", file=sys.stderr)
