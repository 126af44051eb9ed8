"""Loaded by every Python process that ``bench_core_mutation.py`` starts (its
folder is put first on PYTHONPATH): subprocesses of the tests (the CLI
tests run ``phasec`` in a child process) import the mutant too, and the
coverage run follows them.

``PHASEC_CORE_MUTANT`` = ``module:path:index`` makes ``import module`` compile
mutant ``index`` of ``path`` (the file itself is never written).
``PHASEC_CORE_COVERAGE`` = ``data_file:include1,include2`` records this
process's line coverage under the context ``PHASEC_CORE_CONTEXT`` (the test
that started it).
"""

import os
import sys


def _install_mutant(spec: str) -> None:
    import importlib.abc
    import importlib.util

    module, path, index = spec.rsplit(":", 2)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import _core_mutants  # bench/_core_mutants.py
    del sys.path[0]

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):  # default module creation
            return None

        def exec_module(self, mod):
            with open(path, encoding="utf-8") as f:
                source = f.read()
            code = compile(_core_mutants.mutate(source, int(index), path), path, "exec")
            exec(code, mod.__dict__)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, target_path=None, target=None):
            if fullname != module:
                return None
            return importlib.util.spec_from_file_location(fullname, path, loader=Loader())

    sys.meta_path.insert(0, Finder())


def _start_coverage(spec: str) -> None:
    import atexit

    import coverage

    data_file, include = spec.split(":", 1)
    cov = coverage.Coverage(data_file=data_file, data_suffix=True, include=include.split(","))
    cov.start()
    cov.switch_context(os.environ.get("PHASEC_CORE_CONTEXT", "?"))

    def save() -> None:
        cov.stop()
        cov.save()
    atexit.register(save)


if os.environ.get("PHASEC_CORE_MUTANT"):
    _install_mutant(os.environ["PHASEC_CORE_MUTANT"])
if os.environ.get("PHASEC_CORE_COVERAGE"):
    _start_coverage(os.environ["PHASEC_CORE_COVERAGE"])
