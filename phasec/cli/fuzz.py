"""``phasec fuzz``: fuzz pass orderings on random programs.

    phasec fuzz --seconds 600 --seed 1 --out fuzz-out
    phasec fuzz --passes "FoldConstant,EliminateCommonSubexpr,FuseOps{fuse_opt_level=2}"
    phasec fuzz --replay fuzz-out/failures/001-crash-FuseOps.py
    phasec fuzz --seconds 600 --jobs 2 --coverage
    phasec fuzz --seconds 3600 --jobs 8 --database redis://fuzz-db:6379/0

Random well-formed programs (closures, if/else, recursion, dataflow blocks,
symbolic shapes, packed calls...) and random sequences of the registered
passes (or of ``--passes``), valid or not. Every sequence must either be
refused by static validation, exactly when running it pass by pass hits a
phase error, or run to a module the verifier accepts after every pass, with
the same results on the reference interpreter (and on the VM when it reaches
the build phase). Text and JSON round trips of every module are checked too.

A progress line goes to standard error; the summary (programs, sequences,
passes run, failures by kind) to standard output. Each new failure is shrunk
to a minimal example and saved in ``OUT/failures`` as a TVMScript module
whose header gives the pass sequence and the command that replays it
(``phasec opt FILE --passes SPEC``); ``phasec fuzz --replay FILE`` checks it
again. Hypothesis's example database in ``OUT/hypothesis`` keeps failures
across runs: the next campaign tries them first. ``--database DIR`` puts it
elsewhere, and ``--database redis://host:port/db`` in a Redis server, so that
campaigns on several machines share their findings (a failure one finds is
replayed first by the others' next campaigns); a bad URL or a server that
does not answer is an error before the campaign starts.

``--max-failures N`` ends the campaign as soon as N distinct failures are
saved (``--seconds`` stays the limit): what a CI job that only needs to know
whether something fails wants.

Ctrl-C (or SIGTERM) ends the campaign cleanly: the summary is printed and
written to ``OUT/summary.json`` (``"interrupted": "SIGINT"``), reproducers
found so far are kept (one being shrunk is saved as it stands), and the exit
status is 130 (143 for SIGTERM).

``--jobs N`` runs N worker processes (seeds S, S+1, ...) that share the
hypothesis database in ``OUT/hypothesis``; their numbers are merged into one
summary (failures de-duplicated by signature; reproducers named ``wK-...``).

Coverage: the summary has one line (operators drawn of the registered
compute operators, pass/phase pairs, transitions, VM runs), summary.json the
counts, and ``--coverage`` prints the whole table.

``--against tvm`` fuzzes TVM 0.27 instead of phasec's pass orderings (extra
``phasec[tvm]``): each generated module is printed in TVM's syntax and parsed
by TVM; TVM's well-formedness verdict must agree with phasec's (also on
modules with an injected structural violation), and LambdaLift, random TVM
optimization passes and tvm.compile's default pipeline run under phasec's
PhaseCheck (``--passes`` then names the TVM passes to draw from, e.g.
``--passes FoldConstant,FuseTransposeMatmul``): a pass whose output breaks its phase, output phasec cannot
read, a TVM crash, or TVM's VM disagreeing with phasec's interpreter is a
failure, saved as a reproducer in TVM's syntax (``phasec fuzz --replay``
checks it again). See ``phasec.testing.against_tvm``.

Exit status: 0 when nothing failed, 1 when a failure was found (or, with
``--replay``, still reproduces), 130/143 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from phasec.testing.against_tvm import tvm_pass_pool
from phasec.testing.campaign import pass_pool, read_reproducer, replay, run_campaign
from phasec.testing.databases import open_database
from phasec.testing.parallel import run_parallel_campaign
from phasec.transform import load_plugins
from phasec.tvm import require_tvm


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=60.0, metavar="N",
                        help="how long to fuzz (default 60)")
    parser.add_argument("--max-failures", type=int, default=None, metavar="N",
                        help="stop once N distinct failures are saved (default: fuzz for "
                             "all of --seconds); with --jobs, N for the workers together")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="random seed (default: from the clock; printed in the summary)")
    parser.add_argument("--passes", metavar="SPEC", default=None,
                        help="draw sequences from these passes only (a textual pipeline, "
                             "options allowed); default: every registered pass")
    parser.add_argument("--out", metavar="DIR", default="fuzz-out",
                        help="reproducers, hypothesis database and summary.json go here "
                             "(default fuzz-out)")
    parser.add_argument("--kernels", choices=("llvm", "interp"), default="llvm",
                        help="how the VM runs kernels: native code (llvm, the default) or "
                             "the TIR interpreter")
    parser.add_argument("--max-bindings", type=int, default=8, metavar="N",
                        help="statements per generated function (default 8)")
    parser.add_argument("--no-roundtrip", action="store_true",
                        help="do not check text/JSON round trips of every module")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run N worker processes sharing the hypothesis database in "
                             "OUT/hypothesis; one merged summary (default 1)")
    parser.add_argument("--database", metavar="DIR|URL", default=None,
                        help="hypothesis's example database: a directory (default "
                             "OUT/hypothesis) or redis://host:port/db, shared by campaigns "
                             "on several machines (needs the redis package)")
    parser.add_argument("--against", choices=("tvm",), default=None,
                        help="differential fuzzing against TVM 0.27 (extra phasec[tvm]): "
                             "TVM's well-formedness verdicts, TVM's passes under phasec's "
                             "phase checking, TVM's VM against phasec's interpreter")
    parser.add_argument("--coverage", action="store_true",
                        help="print the coverage table: every registered compute operator "
                             "with its calls drawn, passes run per phase, transitions, VM runs")
    parser.add_argument("--replay", metavar="FILE", default=None,
                        help="check a saved reproducer again instead of fuzzing")
    parser.add_argument("--report", metavar="PATH", default=None,
                        help="with --replay: a pipeline report of the reproducer's pass "
                             "sequence (PATH.html or PATH.json), every pass verified")


def _progress_printer(stream: Any) -> Any:
    tty = hasattr(stream, "isatty") and stream.isatty()
    last = [0.0]

    def show(stats: Any) -> None:
        line = stats.progress_line()
        if tty:
            stream.write("\r" + line.ljust(110))
        elif stats.seconds - last[0] >= 10.0:  # a log: one line every 10 s
            last[0] = stats.seconds
            stream.write(line + "\n")
        stream.flush()

    return show


def _replay_report(path: str, report_path: str) -> None:
    """The reproducer's pass sequence, run with every pass verified, as a report."""
    from phasec.explorer import check_report_path, report  # (for --report only)

    check_report_path(report_path)
    rep = read_reproducer(path)
    report(rep.module, rep.sequence or [], title=path).save(report_path)
    print(f"report: {report_path}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    load_plugins(args.load)
    if args.report is not None and not args.replay:
        print("phasec fuzz: error: --report goes with --replay FILE", file=sys.stderr)
        return 2
    if args.replay:
        if args.report is not None:
            _replay_report(args.replay, args.report)
        failures = replay(args.replay, kernels=args.kernels, roundtrip=not args.no_roundtrip)
        if not failures:
            print(f"{args.replay}: no failure (fixed, or it needs other inputs)")
            return 0
        for failure in failures:
            print(f"{args.replay}: {failure}")
        return 1
    if args.seconds <= 0:
        print("phasec fuzz: error: --seconds must be positive", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("phasec fuzz: error: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.max_failures is not None and args.max_failures < 1:
        print("phasec fuzz: error: --max-failures must be at least 1", file=sys.stderr)
        return 2
    options = dict(passes=args.passes, out_dir=args.out, kernels=args.kernels,
                   roundtrip=not args.no_roundtrip, max_bindings=args.max_bindings,
                   progress=_progress_printer(sys.stderr),
                   stop_after_failures=args.max_failures)
    if args.database is not None:
        open_database(args.database)  # a bad URL or a server down: one clear error, now
        options["database"] = args.database
    if args.against is not None:
        require_tvm()  # not installed: how to install it, before any worker starts
        tvm_pass_pool(args.passes)  # a bad TVM pass name: one error, before any worker
        options["against"] = args.against
    try:
        if args.jobs > 1:
            if args.against is None:
                pass_pool(args.passes)  # a bad --passes is a usage error here, not in N workers
            stats = run_parallel_campaign(args.jobs, args.seconds, seed=args.seed, **options)
        else:
            stats = run_campaign(args.seconds, seed=args.seed, **options)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the numbers so far, then 130/143
        stats = getattr(exc, "campaign_stats", None)
        if stats is not None:
            _print_summary(stats, args.coverage)
        raise
    _print_summary(stats, args.coverage)
    return 1 if stats.unique else 0


def _print_summary(stats: Any, coverage: bool) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    print(stats.summary())
    if coverage:
        print(stats.coverage.table())
    sys.stdout.flush()
