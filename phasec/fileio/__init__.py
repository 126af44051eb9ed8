"""Every file phasec reads or writes goes through here.

Writing (:func:`write_atomic`): the data goes to a temporary file in the
target's directory, is flushed to disk (``fsync``) and only then renamed
over the target (``os.replace``, atomic on POSIX and Windows). On any
failure — a full disk, a permission problem, Ctrl-C, SIGTERM — the previous
file stands untouched and the temporary file is removed, so a reader never
sees half a file and a failed command never destroys what was there. A
signal acts within a second even while gigabytes are written: data goes to
the file (and to a compressor, through :func:`pieces`) in pieces of
:data:`WRITE_PIECE_BYTES`, and the final ``fsync`` runs in a helper thread
while the caller waits in short slices. The
error is a :class:`~phasec.errors.FileAccessError` naming the path. Nothing
is ever written through a symbolic link: phasec resolves no link itself, a
link at the target's name is refused, and the rename replaces a name, never
a link's target.

Reading (:func:`read_bytes`, :func:`open_regular`, :func:`read_stream`):
only regular files are read — a device (``/dev/zero``), a FIFO or a socket
would block or never end — and sizes are capped: a file, standard input,
or what an archive's members declare (in total, or one of them) beyond
:func:`max_input_bytes` is refused before it is read or inflated. The cap
is 4 GiB by default (well above the models phasec compiles); set the
environment variable ``PHASEC_MAX_INPUT_SIZE`` (``512M``, ``8G``, a byte
count) or the ``--max-input-size`` option of the command-line tools to
change it.

JSON documents (:func:`load_json`) are counted before they are parsed: a
document with more values or deeper nesting than its reader allows is
refused before ``json.loads`` builds a single object (an executable's
``executable.json`` that inflates to half a gigabyte of ``{}`` would
otherwise take gigabytes).

The parts: :mod:`~phasec.fileio.limits` (the input cap and sizes),
:mod:`~phasec.fileio.reading` (files, streams, JSON),
:mod:`~phasec.fileio.writing` and :mod:`~phasec.fileio.archives` (zip
archives and ``.npz``).
"""

from __future__ import annotations

from phasec.fileio.limits import (
    DEFAULT_MAX_INPUT_BYTES, MAX_INPUT_ENV, format_size, input_limit_scope, max_input_bytes,
    parse_size, set_max_input_bytes,
)
from phasec.fileio.reading import (
    JSON_MAX_DEPTH, check_json_size, check_regular, load_json, open_regular, read_bytes, read_stream,
    same_file,
)
from phasec.fileio.writing import WRITE_PIECE_BYTES, pieces, stream_descriptor, write_atomic
from phasec.fileio.archives import SafeZip, open_aligned_member, read_npz, write_aligned_npz

__all__ = ["write_atomic", "stream_descriptor", "read_bytes", "read_stream", "open_regular",
           "check_regular", "SafeZip", "read_npz", "open_aligned_member", "write_aligned_npz", "load_json", "pieces", "check_json_size",
           "JSON_MAX_DEPTH", "max_input_bytes", "set_max_input_bytes", "parse_size",
           "format_size", "same_file", "input_limit_scope", "DEFAULT_MAX_INPUT_BYTES",
           "MAX_INPUT_ENV", "WRITE_PIECE_BYTES"]
