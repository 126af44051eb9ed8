"""``phasec fuzz``: a campaign with a summary, reproducers and a kept database."""

import re
import signal

import pytest

from phasec import transform as T
from phasec.cli import main
from phasec.ir import Op, Phase
from phasec.ir.visitor import ExprVisitor
from phasec.testing.campaign import read_reproducer, run_campaign

from helpers.paths import REPO


class _HasMultiply(ExprVisitor):
    found = False

    def visit_call_(self, call):
        super().visit_call_(call)
        if isinstance(call.op, Op) and call.op.name == "relax.multiply":
            self.found = True


@T.module_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="FuzzCrashOnMultiply")
def crash_on_multiply(mod, ctx):
    """A planted bug: crashes on any module that multiplies."""
    for _, func in mod.relax_functions():
        v = _HasMultiply()
        v.visit_expr(func)
        if v.found:
            raise ValueError("multiply is not supported")
    return mod


@pytest.fixture
def planted():
    with T.REGISTRY.scope():
        T.register_pass(crash_on_multiply)
        yield "FuzzCrashOnMultiply"


def test_campaign_summary_and_exit_status(tmp_path, capsys):
    out = tmp_path / "out"
    status = main(["fuzz", "--seconds", "3", "--seed", "7", "--out", str(out),
                   "--kernels", "interp", "--passes", "Normalize,ConvertToDataflow"])
    captured = capsys.readouterr()
    text = captured.out
    assert "phasec fuzz: " in text and "seed 7" in text
    for field in ("programs generated", "sequences run", "passes run", "reached build",
                  "failures"):
        assert field in text
    programs = int(re.search(r"programs generated\s+(\d+)", text).group(1))
    assert programs > 0
    unique = int(re.search(r"failures\s+(\d+) unique", text).group(1))
    assert status == (1 if unique else 0)
    assert (out / "summary.json").exists() and (out / "hypothesis").is_dir()


def test_campaign_finds_saves_and_replays_a_planted_bug(tmp_path, capsys, planted):
    out = tmp_path / "out"
    # --max-failures: over as soon as it is found (--seconds only bounds a CI machine's load)
    status = main(["fuzz", "--seconds", "120", "--max-failures", "1", "--seed", "1",
                   "--out", str(out), "--kernels", "interp", "--passes", planted,
                   "--no-roundtrip"])
    text = capsys.readouterr().out
    assert status == 1
    assert re.search(r"crash\s+1\s", text), text
    files = sorted((out / "failures").glob("*-crash-FuzzCrashOnMultiply.py"))
    assert len(files) == 1, text
    source = files[0].read_text()
    assert source.startswith("# phasec fuzz reproducer")
    assert "# kind: crash" in source and "multiply is not supported" in source
    assert f"phasec opt {files[0]} --passes" in source
    assert "R.multiply(" in source  # the module is in the file, after the header
    rep = read_reproducer(files[0])
    assert planted in rep.sequence and rep.inputs

    # the header's replay command reproduces it with `phasec opt`
    spec = re.search(r"--passes '([^']*)'", source).group(1)
    assert main(["opt", str(files[0]), "--passes", spec, "--opt-level", "3"]) == 1
    assert "multiply is not supported" in capsys.readouterr().err
    # and `phasec fuzz --replay` re-checks every property
    assert main(["fuzz", "--replay", str(files[0]), "--kernels", "interp"]) == 1
    assert "[crash]" in capsys.readouterr().out

    # the example database keeps the failure: the next campaign replays it first
    assert any((out / "hypothesis").rglob("*"))
    again = run_campaign(60.0, seed=99, passes=planted, out_dir=out, kernels="interp",
                         roundtrip=False, stop_after_failures=1)
    assert again.replayed >= 1 and [s.failure.kind for s in again.unique] == ["crash"]


def test_replay_of_a_fixed_failure_exits_zero(tmp_path, capsys):
    path = tmp_path / "repro.py"
    path.write_text("# phasec fuzz reproducer\n# sequence: Normalize\n" + '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.multiply(x, x)
        return y
''')
    assert main(["fuzz", "--replay", str(path), "--kernels", "interp"]) == 0
    assert "no failure" in capsys.readouterr().out


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    assert main(["fuzz", "--seconds", "0", "--out", str(tmp_path)]) == 2
    assert "--seconds must be positive" in capsys.readouterr().err
    assert main(["fuzz", "--max-failures", "0", "--out", str(tmp_path)]) == 2
    assert "--max-failures must be at least 1" in capsys.readouterr().err
    assert main(["fuzz", "--seconds", "1", "--passes", "NoSuchPass", "--out",
                 str(tmp_path)]) == 2
    assert "unknown pass 'NoSuchPass'" in capsys.readouterr().err
    not_a_repro = tmp_path / "plain.py"
    not_a_repro.write_text("x = 1\n")
    assert main(["fuzz", "--replay", str(not_a_repro)]) == 2
    assert "not a phasec fuzz reproducer" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Ctrl-C and SIGTERM end a campaign cleanly
# ---------------------------------------------------------------------------

_CAMPAIGN_SCRIPT = '''
import sys
from phasec import transform as T
from phasec.cli import main
from phasec.ir import Op, Phase
from phasec.ir.visitor import ExprVisitor

class HasMultiply(ExprVisitor):
    found = False
    def visit_call_(self, call):
        super().visit_call_(call)
        if isinstance(call.op, Op) and call.op.name == "relax.multiply":
            self.found = True

@T.module_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="FuzzCrashOnMultiply")
def crash_on_multiply(mod, ctx):
    for _, func in mod.relax_functions():
        v = HasMultiply()
        v.visit_expr(func)
        if v.found:
            raise ValueError("multiply is not supported")
    return mod

T.register_pass(crash_on_multiply)
sys.exit(main(["fuzz", "--seconds", "600", "--seed", "5", "--out", sys.argv[1],
               "--kernels", "interp", "--no-roundtrip",
               "--passes", "FuzzCrashOnMultiply,Normalize"]))
'''


@pytest.mark.parametrize("signum, status, word", [(2, 130, "SIGINT"), (15, 143, "SIGTERM")])
def test_a_signal_ends_the_campaign_with_its_summary(tmp_path, signum, status, word):
    """The campaign (600 s) is interrupted once it has saved a reproducer:
    the summary is printed and written, the reproducer kept, exit 130/143.
    (The deadlines only turn a hang into a failure; they measure nothing.)"""
    import json
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "out"
    script = tmp_path / "campaign.py"
    script.write_text(_CAMPAIGN_SCRIPT)
    root = REPO
    env = dict(os.environ)
    # start with SIGINT at its default even when pytest runs with it ignored (started in
    # the background by a non-interactive shell): Python then handles Ctrl-C as usual
    proc = subprocess.Popen([sys.executable, str(script), str(out)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        give_up = time.monotonic() + 300
        while not list((out / "failures").glob("*-crash-FuzzCrashOnMultiply.py")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < give_up, "no reproducer saved in 300 s"
            time.sleep(0.2)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, (stdout, stderr)
    assert f"interrupted ({word})" in stdout, stdout
    assert re.search(r"failures\s+1 unique", stdout), stdout
    assert "Traceback" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] == word
    assert summary["programs"] >= 1 and len(summary["failures"]) == 1
    kept = Path(summary["failures"][0]["file"])
    assert kept.exists() and "multiply is not supported" in kept.read_text()


# ---------------------------------------------------------------------------
# Restricted pools reach their passes
# ---------------------------------------------------------------------------

@T.module_pass(phases=[Phase.OPTIMIZATION], name="FuzzCrashOnFused")
def crash_on_fused(mod, ctx):
    """A planted bug (the issue's MyPass): crashes on any fused function.
    It runs in optimization only, and only FuseOps makes fused functions."""
    for name, func in mod.relax_functions():
        if func.attrs.get("Primitive"):
            raise ValueError(f"cannot handle the fused function {name}")
    return mod


def test_a_restricted_pool_reaches_its_passes_phase(tmp_path):
    """``passes=["FuseOps", MyPass]``: neither runs at ingestion, where
    programs are generated; the sequences get LambdaLifting (and the passes it
    requires) to reach optimization, and say so in the reproducer."""
    from phasec.testing.campaign import CampaignStats

    with T.REGISTRY.scope():
        T.register_pass(crash_on_fused)
        counts = {}

        def seen(stats: CampaignStats) -> None:
            counts["sequences"] = stats.sequences

        stats = run_campaign(120, seed=2, passes=["FuseOps", crash_on_fused],
                             out_dir=tmp_path / "out", kernels="interp", roundtrip=False,
                             stop_after_failures=1, progress=seen)
    assert [s.failure.kind for s in stats.unique] == ["crash"], stats.summary()
    saved = stats.unique[0]
    assert saved.failure.pass_spec == "FuzzCrashOnFused"
    assert "cannot handle the fused function fused_" in saved.failure.message
    # the transition that was added is named, in the stats and the reproducer
    assert any(note.startswith("LambdaLifting before") for note in saved.reach), saved.reach
    text = saved.path.read_text()
    assert "# reach: LambdaLifting before" in text
    rep = read_reproducer(saved.path)
    assert rep.sequence.startswith("LambdaLifting") and "FuseOps" in rep.sequence
    assert stats.coverage.reach_added >= 1
    print(f"planted FuzzCrashOnFused found after {stats.sequences} sequences, "
          f"{stats.seconds:.1f} s")
    assert stats.sequences <= 1000  # a small budget (was: not found in ~2,000)


# ---------------------------------------------------------------------------
# --jobs N: worker processes, one database, one summary
# ---------------------------------------------------------------------------

def test_jobs_two_workers_find_a_planted_bug_and_merge_their_numbers(tmp_path, planted):
    """Two forked workers (they see the planted pass registered here) share
    OUT/hypothesis; the summary adds their counts and lists the bug once."""
    import json

    out = tmp_path / "out"
    status = main(["fuzz", "--seconds", "120", "--max-failures", "1", "--seed", "1",
                   "--out", str(out), "--jobs", "2", "--kernels", "interp",
                   "--passes", planted + ",Normalize", "--no-roundtrip"])
    assert status == 1
    workers = [json.loads((out / "workers" / f"worker-{k}.json").read_text()) for k in (1, 2)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 2
    for key in ("programs", "sequences", "passes_run"):  # (the planted pass may crash first)
        assert summary[key] == sum(w[key] for w in workers) >= (key != "passes_run"), key
    calls = summary["coverage"]["operators"]["calls"]
    for op in set(workers[0]["coverage"]["operators"]["calls"]) | set(
            workers[1]["coverage"]["operators"]["calls"]):
        assert calls[op] == sum(w["coverage"]["operators"]["calls"].get(op, 0)
                                for w in workers)
    # both workers may find the bug: listed once, each reproducer a worker's file
    assert [f["kind"] for f in summary["failures"]] == ["crash"], summary["failures"]
    assert any(w["failures"] for w in workers)
    files = sorted((out / "failures").glob("w*-crash-FuzzCrashOnMultiply.py"))
    assert files and all(f.name[:3] in ("w1-", "w2-") for f in files)
    assert (out / "hypothesis").is_dir() and any((out / "hypothesis").rglob("*"))
    # --max-failures 1 counts the workers together: both ended with the first
    # one found, long before --seconds, and the marker that stopped them is gone
    assert summary["seconds"] < 100 and all(w["seconds"] < 100 for w in workers), summary
    assert not (out / "workers" / "stop").exists()
    assert main(["fuzz", "--jobs", "0", "--out", str(tmp_path / "x")]) == 2
