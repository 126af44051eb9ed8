"""The kernel cache trusts nothing it did not write (issue 27, findings 1, 2
and 4): every level it creates is private; a directory or entry that is not
the user's alone is refused with one warning and the build runs uncached;
entries are opened without following links, as regular files of bounded
size, and bound to their key by an HMAC under the cache's secret, all
before a byte reaches LLVM; the cache has a size limit with
least-recently-used eviction and ``phasec cache prune``.

The end-to-end cases run ``phasec.build`` in a subprocess (an entry LLVM
cannot load aborts the process: that is what must not happen) and check
that the kernels were compiled again and compute the right values."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import phasec
from phasec.backend.llvm import diskcache
from phasec.errors import InputError

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534
KEY = "ab" * 32
OTHER_KEY = "cd" * 32
EXAMPLES = Path(phasec.__file__).parent / "examples"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache directory for this test (not created yet), and a fresh
    once-per-process warning."""
    root = tmp_path / "kernels"
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(root))
    monkeypatch.delenv("PHASEC_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("PHASEC_CACHE_MAX_SIZE", raising=False)
    monkeypatch.setattr(diskcache, "_WARNED", set())
    monkeypatch.setattr(diskcache, "_unevicted", None)  # as in a process that has not stored yet
    return root


def _entry(root: Path, key: str = KEY) -> Path:
    return root / key[:2] / (key + ".kc")


def _quiet_load(key: str = KEY):
    """load() and the KernelCacheWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = diskcache.load(key)
    return result, [w for w in caught if issubclass(w.category, diskcache.KernelCacheWarning)]


def _quiet_store(key: str = KEY, obj: bytes = b"object code", ir: str = "ir"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = diskcache.store(key, obj, ir)
    return ok, [w for w in caught if issubclass(w.category, diskcache.KernelCacheWarning)]


# -- directories: created private, refused when shared ---------------------------------------
def test_every_level_phasec_creates_is_private_and_an_existing_parent_is_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "home-cache"
    parent.mkdir(mode=0o755)
    os.chmod(parent, 0o755)  # like an existing ~/.cache
    root = parent / "phasec" / "kernels"
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(root))
    old = os.umask(0o022)  # the usual umask: a plain mkdir would give 0755
    try:
        assert diskcache.store(KEY, b"obj", "ir")
    finally:
        os.umask(old)
    for level in (parent / "phasec", root, root / KEY[:2]):
        assert stat.S_IMODE(level.stat().st_mode) == 0o700, level
    assert stat.S_IMODE(parent.stat().st_mode) == 0o755  # not created by phasec: unchanged
    assert stat.S_IMODE(_entry(root).stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "secret").stat().st_mode) == 0o600
    assert diskcache.load(KEY) == (b"obj", "ir")


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o1777, 0o720])
def test_a_group_or_world_writable_cache_directory_is_refused(cache: Path, mode: int) -> None:
    assert diskcache.store(KEY, b"obj", "ir")  # a good entry, written while private
    os.chmod(cache, mode)
    for _ in range(3):
        assert _quiet_load()[0] is None
    os.chmod(cache, 0o700)
    diskcache._WARNED.clear()
    assert diskcache.load(KEY) == (b"obj", "ir")  # the entry itself was fine
    os.chmod(cache, mode)
    diskcache._WARNED.clear()
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1
    text = str(warned[0].message)
    assert str(cache) in text and "writable by" in text and f"{mode:04o}" in text
    ok, _ = _quiet_store(OTHER_KEY)
    assert not ok and not _entry(cache, OTHER_KEY).exists()  # nothing written there either


def test_a_writable_subdirectory_is_refused(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    os.chmod(cache / KEY[:2], 0o777)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1 and "writable by" in str(warned[0].message)


def test_a_subdirectory_that_is_a_link_is_not_followed(cache: Path, tmp_path: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(cache / KEY[:2]), elsewhere)
    (cache / KEY[:2]).symlink_to(elsewhere)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1


@pytest.mark.skipif(not IS_ROOT, reason="chown to another user needs root (the writable-mode "
                                        "cases cover the rule without it)")
def test_a_cache_directory_owned_by_another_user_is_refused(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    os.chown(cache, NOBODY, NOBODY)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1
    assert "owned by" in str(warned[0].message) and f"uid {NOBODY}" in str(warned[0].message)
    assert not _quiet_store(OTHER_KEY)[0]
    os.chown(cache, 0, 0)
    os.chown(cache / KEY[:2], NOBODY, NOBODY)  # a subdirectory
    diskcache._WARNED.clear()
    assert _quiet_load()[0] is None


def test_the_cache_directory_set_to_a_shared_directory_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """PHASEC_CACHE_DIR=/tmp: world-writable (and, for a user other than
    root, not theirs): never used, nothing created there."""
    monkeypatch.setenv("PHASEC_CACHE_DIR", "/tmp")
    monkeypatch.setattr(diskcache, "_WARNED", set())
    before = set(os.listdir("/tmp"))
    ok, warned = _quiet_store()
    assert not ok and len(warned) == 1 and "/tmp" in str(warned[0].message)
    assert not (set(os.listdir("/tmp")) - before) & {KEY[:2], "secret"}
    assert diskcache.info()["problem"]


def test_one_warning_per_process(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    os.chmod(cache, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for key in (KEY, OTHER_KEY, KEY):
            diskcache.load(key)
            diskcache.store(key, b"obj", "ir")
    assert len([w for w in caught if issubclass(w.category, diskcache.KernelCacheWarning)]) == 1


# -- entries: regular files of the user's, opened without following links --------------------
def test_an_entry_that_is_a_link_is_not_followed_and_is_replaced_not_its_target(
        cache: Path, tmp_path: Path) -> None:
    assert diskcache.store(OTHER_KEY, b"obj", "ir")
    good = _entry(cache, OTHER_KEY)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    _entry(cache).parent.mkdir(mode=0o700, exist_ok=True)
    for target in (good, victim):
        _entry(cache).unlink(missing_ok=True)
        _entry(cache).symlink_to(target)
        diskcache._WARNED.clear()
        result, warned = _quiet_load()
        assert result is None and len(warned) == 1 and "symbolic link" in str(warned[0].message)
    assert diskcache.store(KEY, b"new obj", "ir")  # the link itself is replaced
    assert not _entry(cache).is_symlink() and victim.read_text() == "precious"
    assert diskcache.load(KEY) == (b"new obj", "ir")


def test_an_entry_linked_to_dev_zero_is_refused_at_once(cache: Path) -> None:
    assert diskcache.store(OTHER_KEY, b"obj", "ir")
    _entry(cache).parent.mkdir(mode=0o700, exist_ok=True)
    _entry(cache).symlink_to("/dev/zero")
    assert _quiet_load()[0] is None


_FIFO_CHILD = """
import os, sys, warnings
from phasec.backend.llvm import diskcache
key = sys.argv[1]
print(diskcache.load(key), diskcache.store(key, b"obj", "ir"), diskcache.load(key))
"""


def test_a_fifo_entry_neither_hangs_nor_is_written_into(cache: Path) -> None:
    assert diskcache.store(OTHER_KEY, b"obj", "ir")
    _entry(cache).parent.mkdir(mode=0o700, exist_ok=True)
    os.mkfifo(_entry(cache), 0o600)
    proc = subprocess.run([sys.executable, "-c", _FIFO_CHILD, KEY], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PHASEC_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "True", "(b'obj',", "'ir')"]
    assert proc.stderr.count("KernelCacheWarning") == 1 and "FIFO" in proc.stderr
    assert stat.S_ISREG(_entry(cache).lstat().st_mode)  # replaced by a regular entry


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_a_writable_entry_is_refused(cache: Path, mode: int) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    os.chmod(_entry(cache), mode)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1 and "writable by" in str(warned[0].message)


@pytest.mark.skipif(not IS_ROOT, reason="chown to another user needs root")
def test_an_entry_owned_by_another_user_is_refused(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    os.chown(_entry(cache), NOBODY, NOBODY)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1 and "owned by" in str(warned[0].message)
    assert diskcache.store(KEY, b"mine", "ir")  # rebuilt: replaced by the user's own
    assert _entry(cache).stat().st_uid == os.geteuid()
    assert diskcache.load(KEY) == (b"mine", "ir")


def test_an_oversized_entry_is_refused_without_reading_it(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    with open(_entry(cache), "r+b") as fh:  # sparse: costs no disk
        fh.truncate(diskcache.MAX_ENTRY_BYTES + 1)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1 and "larger" in str(warned[0].message)


def test_a_key_that_is_not_a_digest_names_no_file(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    for key in ("../" * 8 + "etc/passwd", "", KEY.upper(), KEY + "0"):
        assert diskcache.load(key) is None
        assert not diskcache.store(key, b"obj", "ir")


# -- contents: bound to the key, authenticated by the cache's secret --------------------------
def test_a_valid_entry_under_another_keys_name_is_refused(cache: Path) -> None:
    assert diskcache.store(KEY, b"code for KEY", "ir")
    assert diskcache.store(OTHER_KEY, b"code for OTHER_KEY", "ir")
    a, b = _entry(cache), _entry(cache, OTHER_KEY)
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    assert diskcache.load(KEY) is None and diskcache.load(OTHER_KEY) is None


def _forged(key: str, obj: bytes, ir: bytes) -> bytes:
    """An entry in the cache's own layout whose check value is recomputed
    over other bytes by someone who knows the format but not the secret."""
    body = bytes.fromhex(key) + struct.pack("<QQ", len(obj), len(ir)) + obj + ir
    return b"PHASECK2" + hashlib.sha256(b"PHASECK2" + body).digest() + body


def test_an_entry_is_the_magic_its_hmac_and_its_body_byte_for_byte(cache: Path) -> None:
    """The file ``store`` writes (in pieces, never joined in memory) is the
    layout, computed here independently: magic, HMAC-SHA256 under the cache's
    secret of magic and body, body (key, sizes, object code, IR); an object
    of several write pieces, given as a view too, reads back whole."""
    import hmac

    obj = os.urandom(3 << 20) + b"end"  # (more than one write piece: 1 MiB)
    for given in (obj, memoryview(obj)):
        assert diskcache.store(KEY, given, "optimized ir \u00e9")
        ir = "optimized ir \u00e9".encode()
        body = bytes.fromhex(KEY) + struct.pack("<QQ", len(obj), len(ir)) + obj + ir
        secret = (cache / "secret").read_bytes()
        mac = hmac.new(secret, b"PHASECK2" + body, hashlib.sha256).digest()
        assert _entry(cache).read_bytes() == b"PHASECK2" + mac + body
        assert diskcache.load(KEY) == (obj, "optimized ir \u00e9")


def test_discard_removes_one_entry_and_never_raises(cache: Path, tmp_path: Path) -> None:
    assert not diskcache.discard(KEY)  # (no cache yet)
    assert diskcache.store(KEY, b"obj", "ir") and diskcache.store(OTHER_KEY, b"obj", "ir")
    assert not diskcache.discard(KEY, kind="build") and not diskcache.discard("../" + KEY[3:])
    assert diskcache.discard(KEY) and not _entry(cache).exists()
    assert not diskcache.discard(KEY) and diskcache.load(OTHER_KEY) == (b"obj", "ir")
    # a subdirectory that is a link is not followed
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (target / (KEY + ".kc")).write_bytes(b"kept")
    shutil.rmtree(_entry(cache).parent)
    _entry(cache).parent.symlink_to(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", diskcache.KernelCacheWarning)
        assert not diskcache.discard(KEY)
    assert (target / (KEY + ".kc")).read_bytes() == b"kept"


def test_an_entry_with_a_recomputed_checksum_over_garbage_is_refused(cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    _entry(cache).write_bytes(_forged(KEY, os.urandom(4096), b"garbage"))
    os.chmod(_entry(cache), 0o600)
    assert diskcache.load(KEY) is None
    assert _quiet_load()[1] == []  # damaged contents: ignored quietly, rebuilt on the miss


def test_an_entry_of_another_cache_is_refused(cache: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Valid in a cache with another secret: not written by this cache."""
    other = tmp_path / "other"
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(other))
    assert diskcache.store(KEY, b"obj", "ir")
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(cache))
    assert diskcache.store(OTHER_KEY, b"obj", "ir")  # this cache's secret
    _entry(cache).parent.mkdir(mode=0o700)
    shutil.copy(_entry(other), _entry(cache))
    assert diskcache.load(KEY) is None


def test_damage_anywhere_is_refused(cache: Path) -> None:
    assert diskcache.store(KEY, b"object code", "optimized ir")
    good = _entry(cache).read_bytes()
    for i in range(0, len(good), 7):
        bad = bytearray(good)
        bad[i] ^= 0x01
        _entry(cache).write_bytes(bytes(bad))
        assert diskcache.load(KEY) is None, i
    for n in (0, 8, 40, len(good) - 1):
        _entry(cache).write_bytes(good[:n])
        assert diskcache.load(KEY) is None
    _entry(cache).write_bytes(good + b"x")
    assert diskcache.load(KEY) is None
    _entry(cache).write_bytes(good)
    assert diskcache.load(KEY) == (b"object code", "optimized ir")


def test_a_lost_or_foreign_secret_invalidates_entries_instead_of_trusting_them(
        cache: Path) -> None:
    assert diskcache.store(KEY, b"obj", "ir")
    (cache / "secret").unlink()
    assert diskcache.load(KEY) is None
    assert diskcache.store(KEY, b"obj2", "ir")  # a new secret; the entry rebuilt under it
    assert diskcache.load(KEY) == (b"obj2", "ir")
    os.chmod(cache / "secret", 0o666)
    result, warned = _quiet_load()
    assert result is None and len(warned) == 1


# -- end to end: a build never runs what it did not write ------------------------------------
CHILD = '''
import json, sys
import numpy as np
import phasec
from phasec.backend.llvm import jit
optimized = []
real = jit.llvm.create_pass_builder
def counting(*a, **k):  # the optimization pipeline runs only when compiling
    optimized.append(1)
    return real(*a, **k)
jit.llvm.create_pass_builder = counting
mod = phasec.load(sys.argv[1])
vm = phasec.VirtualMachine(phasec.build(mod))
rng = np.random.default_rng(0)
args = [rng.standard_normal([d.value for d in p.struct_info.shape]).astype("float32")
        for p in mod["main"].params]
out = np.asarray(vm["main"](*args))
ref = np.asarray(phasec.interp.run(mod, *args))
err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
print(json.dumps({"optimized": len(optimized), "max_err": err}))
'''


def _build(cache: Path, example: str = "mlp") -> tuple[dict, str]:
    """Build and run an example in a fresh process; (figures, stderr)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(EXAMPLES / f"{example}.py")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PHASEC_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, f"the build crashed ({proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.splitlines()[-1]), proc.stderr


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/*.kc"))


def test_swapped_entries_are_rebuilt_not_run(tmp_path: Path) -> None:
    cache = tmp_path / "kernels"
    cold, _ = _build(cache)
    entries = _entries(cache)
    assert len(entries) >= 2 and cold["max_err"] < 1e-4
    data = [e.read_bytes() for e in entries]
    for e, d in zip(entries, data[1:] + data[:1]):  # every entry under another's name
        e.write_bytes(d)
    again, err = _build(cache)
    assert again["optimized"] > 0 and again["max_err"] < 1e-4
    assert "KernelCacheWarning" not in err
    warm, _ = _build(cache)  # rebuilt entries are good again
    assert warm["optimized"] == 0 and warm["max_err"] < 1e-4


def test_garbage_with_a_recomputed_checksum_never_reaches_llvm(tmp_path: Path) -> None:
    cache = tmp_path / "kernels"
    _build(cache)
    for e in _entries(cache):
        key = e.name[:-3]
        e.write_bytes(_forged(key, os.urandom(8192), b"; garbage"))
    again, _ = _build(cache)  # LLVM aborted on such bytes before
    assert again["optimized"] > 0 and again["max_err"] < 1e-4


def test_a_planted_entry_in_a_shared_cache_never_runs(tmp_path: Path) -> None:
    """Another user (here: another model's valid object code) plants entries
    under the names of the victim's kernels in a shared, world-writable
    cache: the victim warns once, compiles uncached, and gets the right
    result. The same plant in a private cache fails the key binding."""
    names = tmp_path / "learn"  # the names the victim's entries will have
    _build(names, "mlp")
    shared = tmp_path / "shared"
    _build(shared, "cnn")  # valid entries of another model, under this cache's secret
    common = {e.relative_to(shared) for e in _entries(shared)}  # the runtime's, say
    victim_names = [e.relative_to(names) for e in _entries(names)
                    if e.relative_to(names) not in common]
    planted = [e for e in _entries(shared) if e.relative_to(shared) not in
               {e.relative_to(names) for e in _entries(names)}]
    assert victim_names and planted
    for i, rel in enumerate(victim_names):
        (shared / rel).parent.mkdir(mode=0o700, exist_ok=True)
        shutil.copy(planted[i % len(planted)], shared / rel)
    for path in [shared, *shared.iterdir()]:
        if path.is_dir():
            os.chmod(path, 0o777)
    result, err = _build(shared, "mlp")
    assert result["optimized"] > 0 and result["max_err"] < 1e-4
    assert err.count("KernelCacheWarning") == 1 and "writable by" in err
    for path in [shared, *shared.iterdir()]:
        if path.is_dir():
            os.chmod(path, 0o700)
    result, err = _build(shared, "mlp")  # private now: the key binding refuses the plant
    assert result["optimized"] > 0 and result["max_err"] < 1e-4
    assert "KernelCacheWarning" not in err


def test_a_shared_cache_is_refused_by_phasec_run(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    proc = subprocess.run([sys.executable, "-m", "phasec", "run", str(EXAMPLES / "mlp.py")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PHASEC_CACHE_DIR": str(shared)})
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stderr
    assert proc.stderr.count("KernelCacheWarning") == 1
    assert str(shared) in proc.stderr and "Traceback" not in proc.stderr
    assert list(shared.iterdir()) == []  # nothing written there


# -- size limit, eviction, prune -------------------------------------------------------------
def _fill(cache: Path, n: int, size: int) -> list[str]:
    keys = [f"{i:02x}" * 32 for i in range(1, n + 1)]
    for i, key in enumerate(keys):
        assert diskcache.store(key, bytes(size), "ir")
        os.utime(_entry(cache, key), (1_000_000 + i, 1_000_000 + i))  # oldest first
    return keys


def test_prune_evicts_the_least_recently_used_entries(cache: Path) -> None:
    keys = _fill(cache, 6, 10_000)
    assert diskcache.load(keys[0]) is not None  # used now: the most recent
    entry_size = _entry(cache, keys[0]).stat().st_size
    done = diskcache.prune(3 * entry_size)
    assert done["removed"] == 3 and done["entries"] == 3
    assert done["bytes"] == 3 * entry_size == diskcache.info()["bytes"]
    left = {k for k in keys if _entry(cache, k).exists()}
    assert left == {keys[0], keys[4], keys[5]}  # keys[1..3] were the oldest
    assert (cache / "secret").exists()


def test_storing_beyond_the_limit_evicts(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _fill(cache, 4, 10_000)
    entry_size = _entry(cache, keys[0]).stat().st_size
    monkeypatch.setenv("PHASEC_CACHE_MAX_SIZE", str(3 * entry_size))
    assert diskcache.store("ee" * 32, bytes(10_000), "ir")
    assert sorted(k for k in keys + ["ee" * 32] if _entry(cache, k).exists()) == \
        sorted(keys[2:] + ["ee" * 32])
    assert diskcache.info()["bytes"] <= 3 * entry_size


def test_a_process_evicts_at_its_first_entry_then_every_sixteenth_of_the_limit(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _fill(cache, 40, 1_000)  # (no limit yet: 1 GiB)
    entry_size = _entry(cache, keys[0]).stat().st_size
    limit = 32 * entry_size  # a sixteenth: two entries
    monkeypatch.setenv("PHASEC_CACHE_MAX_SIZE", str(limit))
    monkeypatch.setattr(diskcache, "_unevicted", None)  # a new process over the limit

    def entries() -> int:
        return diskcache.info()["entries"]

    new = [f"{i:02x}" * 32 for i in range(0xa0, 0xa4)]
    assert diskcache.store(new[0], bytes(1_000), "ir") and entries() == 32  # its first: evicted
    assert diskcache.store(new[1], bytes(1_000), "ir") and entries() == 33  # half a sixteenth
    assert diskcache.store(new[2], bytes(1_000), "ir") and entries() == 32  # a sixteenth: evicted
    assert diskcache.store(new[3], bytes(1_000), "ir") and entries() == 33
    assert all(_entry(cache, k).exists() for k in new)  # the newest stay, the oldest went
    assert not any(_entry(cache, k).exists() for k in keys[:10])


def test_prune_removes_stale_temporary_files(cache: Path) -> None:
    _fill(cache, 1, 100)
    stale = _entry(cache).parent.parent / "01" / ".x.kc.abcdef.tmp"
    fresh = stale.with_name(".y.kc.abcdef.tmp")
    stale.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    os.utime(stale, (1_000_000, 1_000_000))
    diskcache.prune()
    assert not stale.exists() and fresh.exists()


def _cli(cache: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phasec", *argv], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PHASEC_CACHE_DIR": str(cache), **env})


def test_cache_prune_command(cache: Path) -> None:
    keys = _fill(cache, 5, 20_000)
    entry_size = _entry(cache, keys[0]).stat().st_size
    proc = _cli(cache, "cache", "prune", "--max-size", str(2 * entry_size))
    assert proc.returncode == 0, proc.stderr
    assert "removed 3 kernel cache entries" in proc.stdout and "2 entries left" in proc.stdout
    assert [k for k in keys if _entry(cache, k).exists()] == keys[3:]
    proc = _cli(cache, "cache", "prune", PHASEC_CACHE_MAX_SIZE=str(entry_size))
    assert proc.returncode == 0 and [k for k in keys if _entry(cache, k).exists()] == keys[4:]
    info = _cli(cache, "cache", "info", PHASEC_CACHE_MAX_SIZE="2G")
    assert "1 entries" in info.stdout and "of at most 2 GiB" in info.stdout


@pytest.mark.parametrize("argv,env,named", [
    (["cache", "prune", "--max-size", "lots"], {}, "--max-size"),
    (["cache", "prune"], {"PHASEC_CACHE_MAX_SIZE": "lots"}, "PHASEC_CACHE_MAX_SIZE"),
    (["cache", "info"], {"PHASEC_CACHE_MAX_SIZE": "-1"}, "PHASEC_CACHE_MAX_SIZE"),
    (["cache", "info"], {"PHASEC_KERNEL_CACHE": "maybe"}, "PHASEC_KERNEL_CACHE"),
    (["cache", "clear", "--max-size", "1G"], {}, "--max-size"),
])
def test_invalid_cache_settings_are_errors_naming_them(cache: Path, argv: list[str],
                                                       env: dict[str, str], named: str) -> None:
    proc = _cli(cache, *argv, **env)
    assert proc.returncode == 2 and named in proc.stderr and "Traceback" not in proc.stderr


def test_an_invalid_setting_fails_a_build_naming_it(cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEC_CACHE_MAX_SIZE", "big")
    with pytest.raises(InputError, match="PHASEC_CACHE_MAX_SIZE"):
        diskcache.enabled()
    proc = _cli(cache, "build", str(EXAMPLES / "mlp.py"), "-o", str(cache.parent / "m.pvm"),
                PHASEC_CACHE_MAX_SIZE="big")
    assert proc.returncode == 2 and "PHASEC_CACHE_MAX_SIZE" in proc.stderr


def test_clear_and_prune_refuse_a_shared_directory(cache: Path) -> None:
    keys = _fill(cache, 2, 100)
    os.chmod(cache, 0o777)
    for action in ("clear", "prune"):
        proc = _cli(cache, "cache", action, "--max-size", "1") if action == "prune" \
            else _cli(cache, "cache", action)
        assert proc.returncode == 2 and "not yours alone" in proc.stderr, proc.stderr
    assert all(_entry(cache, k).exists() for k in keys)  # nothing removed
    info = _cli(cache, "cache", "info")
    assert info.returncode == 0 and "not used:" in info.stdout and "writable by" in info.stdout
