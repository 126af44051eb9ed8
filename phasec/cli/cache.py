"""``phasec cache``: the persistent kernel cache (see
:mod:`phasec.backend.llvm.diskcache`): where it is and how big (``info``),
or empty it (``clear``)."""

from __future__ import annotations

import argparse

from phasec.backend.llvm import diskcache


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("info", "clear"),
                        help="info: where the cache is, whether it is on, its size; "
                             "clear: remove every entry")


def run(args: argparse.Namespace) -> int:
    if args.action == "clear":
        removed = diskcache.clear()
        print(f"removed {removed} kernel cache entr{'y' if removed == 1 else 'ies'} from "
              f"{diskcache.cache_dir()}")
        return 0
    info = diskcache.info()
    state = "on" if info["enabled"] else "off (PHASEC_KERNEL_CACHE)"
    print(f"kernel cache: {info['dir']} ({state}): {info['entries']} entries, "
          f"{info['bytes'] / 1024:.1f} KiB")
    return 0
