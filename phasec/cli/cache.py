"""``phasec cache``: the persistent kernel cache (see
:mod:`phasec.backend.llvm.diskcache`; it holds the whole-build entries of
:mod:`phasec.backend.vm.buildcache` too): where it is and how big (``info``),
empty it (``clear``), or evict the least recently used entries down to a
size (``prune``, ``--max-size`` or ``PHASEC_CACHE_MAX_SIZE``, default 1 GiB).

A cache directory that is not the user's alone is reported by ``info`` and
refused by ``clear`` and ``prune`` (exit status 2): phasec neither uses nor
changes it."""

from __future__ import annotations

import argparse

from phasec.errors import InputError
from phasec.fileio import format_size, parse_size
from phasec.backend.llvm import diskcache


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("info", "clear", "prune"),
                        help="info: where the cache is, whether it is on, its size; "
                             "clear: remove every entry; prune: remove the least recently used "
                             "entries until the cache fits its size limit")
    parser.add_argument("--max-size", metavar="SIZE", default=None,
                        help="with prune: the size to shrink the cache to (e.g. 512M, 2G; "
                             "default $PHASEC_CACHE_MAX_SIZE, else 1G)")


def _entries(n: int, what: str = "") -> str:
    return f"{n} {what}entr{'y' if n == 1 else 'ies'}"


def run(args: argparse.Namespace) -> int:
    if args.max_size is not None and args.action != "prune":
        raise InputError("--max-size goes with prune")
    if args.action == "clear":
        removed = diskcache.clear()
        print(f"removed {_entries(removed, 'kernel cache ')} from {diskcache.cache_dir()}")
        return 0
    if args.action == "prune":
        limit = None if args.max_size is None else parse_size(args.max_size, "--max-size")
        done = diskcache.prune(limit)
        print(f"removed {_entries(done['removed'], 'kernel cache ')} "
              f"({format_size(done['freed'])}) from {diskcache.cache_dir()}: "
              f"{_entries(done['entries'])} left, "
              f"{format_size(done['bytes'])} of at most {format_size(done['max_bytes'])}")
        return 0
    info = diskcache.info()
    state = "on" if info["enabled"] else f"off ({diskcache.KERNEL_CACHE_ENV})"
    print(f"kernel cache: {info['dir']} ({state}): {info['entries']} entries "
          f"({info['builds']} of them whole builds), "
          f"{int(info['bytes']) / 1024:.1f} KiB of at most {format_size(int(info['max_bytes']))}")
    if info["problem"]:
        print(f"not used: {info['problem']}")
    return 0
