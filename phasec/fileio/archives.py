"""Archives (executables, ``.npz``): members checked before anything is inflated.

Part of :mod:`phasec.fileio` (see its docstring for the whole policy)."""

from __future__ import annotations

import io
import math
import struct
import tokenize
import zipfile
import zlib
from typing import Any

from phasec.errors import FileAccessError
from phasec.fileio.limits import MAX_INPUT_ENV, PathLike, format_size, max_input_bytes
from phasec.fileio.reading import _Name, _fail, open_regular


#: deflate cannot expand data more than 1032:1; a member declaring more is
#: damaged (or built to exhaust memory), whatever its data says
DEFLATE_MAX_RATIO = 1032
#: what can go wrong inside zipfile/zlib/numpy on a damaged archive (numpy
#: tokenizes a .npy header it cannot parse as written: an unclosed bracket
#: is a tokenize.TokenError, neither a ValueError nor a SyntaxError)
_ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
                   NotImplementedError, RuntimeError, KeyError, IndexError, OverflowError,
                   UnicodeDecodeError, SyntaxError, tokenize.TokenError)


#: a zip local file header: signature, then (skipped) version, flags, method,
#: time, date, CRC, sizes, then the name's and the extra field's lengths
_LOCAL_HEADER = struct.Struct("<4s22xHH")


class _ViewFile(io.RawIOBase):
    """A read-only, seekable file over a memoryview (no copy of it)."""

    def __init__(self, view: memoryview) -> None:
        self._view, self._pos = view, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, len(self._view))[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._pos:self._pos + len(buffer)]
        buffer[:len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


class SafeZip:
    """A zip archive whose members are checked before anything is inflated.

    Each member's declared size must fit the input limit (so must their
    sum), a stored member must declare its real size, and a compressed one
    no more than deflate can produce from its compressed bytes (no other
    compression method is accepted: numpy and phasec write only these two).
    ``zipfile`` never inflates past a declared size, so these checks bound
    the memory any read takes. Every problem — including a zlib or CRC error
    while reading — is a :class:`FileAccessError` saying the file is damaged.
    ``source`` is a path or the archive's bytes (an archive inside another).
    ``compressed=False`` refuses compressed members: an archive inside
    another (an executable's ``constants.npz``) must store its members as
    they are, since two layers of deflate multiply (a few kilobytes would
    inflate to gigabytes) and nothing phasec writes nests compression.

    ``authenticated=True`` (bytes only) is for archives whose every byte is
    already vouched for (the build cache's entries, under an HMAC): their
    stored members are then read as views of those bytes, without a copy
    or a CRC (:meth:`read_view`).
    """

    def __init__(self, source: PathLike | bytes | memoryview, what: str = "archive",
                 limit: int | None = None, name: str | None = None, *,
                 compressed: bool = True, authenticated: bool = False) -> None:
        self.limit = max_input_bytes() if limit is None else limit
        self.compressed = compressed
        self._view: memoryview | None = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.name = name or what
            if authenticated:
                self._view = memoryview(source).cast("B")
                fh: Any = _ViewFile(self._view)
            else:
                fh = io.BytesIO(bytes(source))
        else:
            self.name = _Name(what, source)
            fh = open_regular(source, what, self.limit)
        self._fh = fh
        try:
            self.zf = zipfile.ZipFile(fh)
            infos = self.zf.infolist()
        except _ARCHIVE_ERRORS as exc:
            fh.close()
            raise self._damaged(None, exc, "not a zip archive") from None
        self.members = {i.filename: i for i in infos}
        total = sum(i.file_size for i in infos)
        if total > self.limit:
            self.close()
            raise self._error(f"its members declare {format_size(total)} uncompressed, more "
                              f"than the input size limit of {format_size(self.limit)}; raise "
                              f"the limit with --max-input-size or {MAX_INPUT_ENV} if it is "
                              f"genuine")
        for info in infos:
            problem = self._member_problem(info)
            if problem:
                self.close()
                raise self._error(f"member {info.filename!r} {problem}: the file is damaged "
                                  f"(or built to exhaust memory)")

    # -- checks ----------------------------------------------------------------------
    def _member_problem(self, info: zipfile.ZipInfo) -> str:
        size, packed = info.file_size, info.compress_size
        if info.flag_bits & 0x1:
            return "is encrypted"
        if info.compress_type == zipfile.ZIP_STORED:
            return "" if size == packed else (f"is stored uncompressed but declares "
                                               f"{size} bytes in {packed}")
        if info.compress_type != zipfile.ZIP_DEFLATED:
            return f"uses compression method {info.compress_type}, which phasec never writes"
        if not self.compressed:
            return ("is compressed inside an archive that is itself compressed (nested "
                    "compression, which phasec never writes)")
        if size > packed * DEFLATE_MAX_RATIO + 1024:
            return (f"declares {format_size(size)} uncompressed from {format_size(packed)} "
                    f"compressed, more than deflate can produce")
        return ""

    def _error(self, reason: str) -> FileAccessError:
        return _fail("read", self.name, reason)

    def _damaged(self, member: str | None, exc: BaseException, what: str = "") -> FileAccessError:
        where = f"member {member!r}: " if member else ""
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        return self._error(f"{where}{what or 'damaged archive'} ({detail})")

    def info(self, member: str) -> zipfile.ZipInfo:
        try:
            return self.members[member]
        except KeyError:
            raise self._error(f"member {member!r} is missing") from None

    # -- reading ---------------------------------------------------------------------
    def read(self, member: str) -> bytes:
        """A member's bytes (checked above; a zlib or CRC error: damaged file)."""
        info = self.info(member)
        try:
            return self.zf.read(info)
        except _ARCHIVE_ERRORS as exc:
            raise self._damaged(member, exc) from None

    def read_view(self, member: str) -> "bytes | memoryview":
        """A member's bytes; a view of them (no copy, no CRC) when the
        archive is authenticated and the member stored."""
        info = self.info(member)
        view = self._stored_view(info)
        return view if view is not None else self.read(member)

    def _stored_view(self, info: zipfile.ZipInfo) -> memoryview | None:
        if self._view is None or info.compress_type != zipfile.ZIP_STORED:
            return None
        start = info.header_offset
        header = bytes(self._view[start:start + _LOCAL_HEADER.size])
        if len(header) != _LOCAL_HEADER.size:
            raise self._error(f"member {info.filename!r}: its header is cut off")
        magic, name_len, extra_len = _LOCAL_HEADER.unpack(header)
        begin = start + _LOCAL_HEADER.size + name_len + extra_len
        if magic != b"PK\x03\x04" or begin + info.file_size > len(self._view):
            raise self._error(f"member {info.filename!r}: damaged local header")
        return self._view[begin:begin + info.file_size]

    def npy_header(self, member: str) -> tuple[tuple[int, ...], bool, Any]:
        """(shape, fortran_order, dtype) from a ``.npy`` member's header, after
        checking it declares exactly the member's size (only the header is
        inflated)."""
        import numpy as np

        info = self.info(member)
        try:
            with self.zf.open(info) as fp:
                version = np.lib.format.read_magic(fp)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
                else:
                    raise ValueError(f"unsupported .npy format version {version}")
                offset = fp.tell()
        except _ARCHIVE_ERRORS as exc:
            raise self._damaged(member, exc, "not a valid .npy array") from None
        if dtype.hasobject:
            raise self._error(f"member {member!r} holds Python objects, which phasec never "
                              f"loads")
        if any(not isinstance(d, int) or d < 0 for d in shape):
            raise self._error(f"member {member!r} declares the shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes != info.file_size - offset:
            raise self._error(f"member {member!r} declares an array of shape {shape} and "
                              f"dtype {dtype} ({nbytes} bytes) but holds "
                              f"{info.file_size - offset} bytes of data")
        return tuple(shape), fortran, dtype

    def array(self, member: str, writeable: bool = True) -> Any:
        """The array in a ``.npy`` member (header checked first; never pickles).
        ``writeable=False`` may return a read-only view of the member's bytes
        (no copy when the member is stored, not deflated)."""
        import numpy as np

        shape, fortran, dtype = self.npy_header(member)
        info = self.info(member)
        try:
            if info.compress_type == zipfile.ZIP_STORED:
                # one read of the member (its CRC checked), the array a view of it:
                # numpy's reader would copy it piece by piece through zipfile
                data = self._stored_view(info) if not writeable else None
                if data is None:
                    data = self.zf.read(info)
                offset = len(data) - math.prod(shape) * dtype.itemsize
                flat = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=offset)
                view = flat.reshape(shape, order="F" if fortran else "C")
                return view.copy(order="K") if writeable else view
            with self.zf.open(info) as fp:
                return np.lib.format.read_array(fp, allow_pickle=False)
        except _ARCHIVE_ERRORS as exc:
            raise self._damaged(member, exc) from None

    def close(self) -> None:
        if hasattr(self, "zf"):
            self.zf.close()
        self._fh.close()  # ZipFile leaves a file object it was given open

    def __enter__(self) -> "SafeZip":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_npz(source: PathLike | bytes, what: str = ".npz archive",
             limit: int | None = None) -> dict[str, Any]:
    """Every array of an ``.npz`` archive, by name, each checked (see
    :class:`SafeZip`) before it is inflated; never unpickles anything."""
    with SafeZip(source, what, limit) as z:
        out = {}
        for member in z.members:
            if not member.endswith(".npy"):
                raise z._error(f"member {member!r} is not a .npy array")
            out[member[:-4]] = z.array(member)
        return out


#: the extra-field id of the padding that aligns a stored member's data (the
#: one Android's zipalign uses; readers skip extra fields they do not know)
_PADDING_EXTRA_ID = 0xD935


def open_aligned_member(zf: zipfile.ZipFile, name: str, alignment: int = 64) -> Any:
    """A handle writing member ``name`` of ``zf`` (a stored zip64 member,
    timestamp 1980-01-01: byte-identical for identical content) whose data
    starts at a multiple of ``alignment`` from the start of ``zf``'s file
    (which must be seekable), padded by an extra field of the local header.
    Arrays read back as views of the archive's bytes then keep that alignment."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.CRC = 0  # (as zipfile sets it before writing the header: same length)
    at = zf.fp.tell() if zf.fp is not None else 0
    pad = -(at + len(info.FileHeader(zip64=True))) % alignment
    if pad:
        if pad < 4:  # an extra field takes at least its 4-byte header
            pad += alignment
        info.extra = struct.pack("<HH", _PADDING_EXTRA_ID, pad - 4) + bytes(pad - 4)
    return zf.open(info, "w", force_zip64=True)


def write_aligned_npz(fh: Any, arrays: dict[str, Any], alignment: int = 64) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` (what ``np.savez`` writes,
    read back by numpy and :class:`SafeZip` alike) to the seekable ``fh``,
    each array's data at a multiple of ``alignment`` (at most 64, numpy's own
    header alignment) from the start of ``fh``."""
    import numpy as np

    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, value in arrays.items():
            # (numpy pads a .npy header to a multiple of 64 bytes: the data follows aligned)
            with open_aligned_member(zf, f"{key}.npy", alignment) as out:
                np.lib.format.write_array(out, np.asanyarray(value), allow_pickle=False)
