"""Reading a small file costs memory in proportion to the file, not to the
input size limit (issue 29's adversarial campaign): ``read(limit + 1)``
allocated the whole 4 GiB limit up front, so under ``ulimit -v`` every
input, however small, was "out of memory"."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_a_small_file_is_read_under_an_address_space_limit_below_the_input_limit(tmp_path):
    path = tmp_path / "small.bin"
    path.write_bytes(b"tiny")
    script = textwrap.dedent(f"""
        import resource
        from phasec.fileio import read_bytes
        from phasec.fileio.limits import max_input_bytes
        limit = 3 << 30  # below the default input limit
        assert max_input_bytes() > limit, max_input_bytes()
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        assert read_bytes({str(path)!r}) == b"tiny"
        print("read")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "read", done.stderr[-2000:]


def test_the_limit_still_holds_to_the_byte(tmp_path):
    from phasec.errors import FileAccessError
    from phasec.fileio import read_bytes

    path = tmp_path / "hundred.bin"
    path.write_bytes(b"a" * 100)
    assert read_bytes(path, limit=100) == b"a" * 100
    with pytest.raises(FileAccessError, match="larger .100 bytes. than the input size limit of 99"):
        read_bytes(path, limit=99)
