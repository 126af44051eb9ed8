"""Where a fuzzing campaign keeps hypothesis's examples: a directory or Redis.

``phasec fuzz --database SPEC`` (``run_campaign(database=SPEC)``) names it:

* a directory path (the default is ``OUT/hypothesis``): hypothesis's
  ``DirectoryBasedExampleDatabase``, one file per example, safe to share
  between processes and, on a shared file system, between machines;
* ``redis://[:password@]host[:port][/db]`` (also ``rediss://`` with TLS and
  ``unix:///path/to/socket``): hypothesis's ``RedisExampleDatabase``, so that
  campaigns on several machines share their findings through one server.
  It needs the ``redis`` package (in phasec's test extra).

A failure one campaign saves is replayed first by the next campaign that
uses the same database, wherever it runs. A Redis server is contacted when
the database is opened (a bad URL or a server that does not answer is a
:class:`FuzzDatabaseError` at once, not in the middle of a campaign); one
that goes away later is a :class:`FuzzDatabaseError` too, raised by
:class:`KeepFailuresDatabase`. Every Redis command has a total deadline
(:data:`REDIS_COMMAND_SECONDS`, connecting included) and is not retried, so a
server that answers one byte at a time cannot hold a campaign past its time.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from phasec.errors import InputError

__all__ = ["FuzzDatabaseError", "KeepFailuresDatabase", "open_database", "is_redis_url",
           "REDIS_KEY_PREFIX"]

#: Redis keys of phasec's campaigns start with this (hypothesis's own default
#: prefix is shared with every other hypothesis user of the same server).
REDIS_KEY_PREFIX = b"phasec-fuzz:"

#: How long Redis keeps a key nobody touched: campaigns that ran over a long
#: weekend still find each other's failures (hypothesis's default is 8 days).
REDIS_EXPIRE = timedelta(days=30)

#: The longest one Redis command (with its reply) may take, and connecting:
#: a per-read timeout alone lets a server that sends one byte a second hold
#: a command, and so a campaign, forever.
REDIS_COMMAND_SECONDS = 10.0
REDIS_CONNECT_SECONDS = 5.0

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class FuzzDatabaseError(InputError):
    """The example database cannot be used: a bad ``--database`` value, a
    Redis server that does not answer, or the ``redis`` package missing."""


def is_redis_url(spec: str) -> bool:
    """Whether ``spec`` names a Redis server rather than a directory."""
    return spec.lower().startswith(_REDIS_SCHEMES)


def _redacted(url: str) -> str:
    """The URL without its password (it goes into messages and summaries)."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    return scheme + sep + rest


def open_database(spec: str | Path | ExampleDatabase) -> ExampleDatabase:
    """The example database ``spec`` names (see the module docstring).

    Raises :class:`FuzzDatabaseError` (what is wrong, with the URL, its
    password left out) for a URL it cannot use or a server that does not
    answer a ``PING``.
    """
    if isinstance(spec, ExampleDatabase):
        return spec
    text = str(spec)
    if not text.strip():
        raise FuzzDatabaseError("--database: empty; give a directory or redis://host:port/db")
    if is_redis_url(text):
        return _open_redis(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise FuzzDatabaseError(
            f"--database {text!r}: unsupported scheme {scheme!r}; give a directory, "
            f"redis://host:port/db, rediss://... or unix:///path/to/socket")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise FuzzDatabaseError(f"--database {text}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FuzzDatabaseError(f"--database {text}: cannot create the directory: "
                                f"{exc.strerror or exc}") from None
    return DirectoryBasedExampleDatabase(str(path))


def _open_redis(url: str) -> ExampleDatabase:
    shown = _redacted(url)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError as exc:
        raise FuzzDatabaseError(
            f"--database {shown}: a Redis database needs the redis package "
            f"(pip install redis, or phasec's test extra): {exc}") from None
    _check_redis_url(url, shown)
    try:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client = redis.Redis.from_url(url, socket_connect_timeout=REDIS_CONNECT_SECONDS,
                                      socket_timeout=REDIS_COMMAND_SECONDS,
                                      retry=Retry(NoBackoff(), 0))
    except (ValueError, TypeError) as exc:  # redis-py's own words for a malformed URL
        raise FuzzDatabaseError(f"--database {shown}: not a Redis URL: {exc} "
                                f"(expected redis://host:port/db)") from None
    pool = client.connection_pool
    pool.connection_class = _with_deadline(pool.connection_class)
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        raise FuzzDatabaseError(f"--database {shown}: the Redis server refused the "
                                f"credentials: {exc}") from None
    except (redis.RedisError, OSError, ValueError) as exc:
        raise FuzzDatabaseError(f"--database {shown}: the Redis server does not answer: "
                                f"{exc}") from None
    return RedisExampleDatabase(client, expire_after=REDIS_EXPIRE, key_prefix=REDIS_KEY_PREFIX)


class _DeadlineSocket:
    """A connected socket whose reads stop at its connection's deadline:
    each ``recv`` waits at most what is left of it (then ``socket.timeout``,
    which redis-py reports as a ``TimeoutError``)."""

    def __init__(self, sock: Any, connection: Any) -> None:
        self._sock = sock
        self._connection = connection

    def _wait(self) -> None:
        deadline = self._connection.deadline
        if deadline is None:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the Redis command took longer than "
                                 f"{REDIS_COMMAND_SECONDS:g} s")
        self._sock.settimeout(min(left, REDIS_COMMAND_SECONDS))

    def recv(self, *args: Any) -> bytes:
        self._wait()
        return self._sock.recv(*args)

    def recv_into(self, *args: Any) -> int:
        self._wait()
        return self._sock.recv_into(*args)

    def __getattr__(self, name: str) -> Any:  # sendall, settimeout, close, ...
        return getattr(self._sock, name)


def _with_deadline(connection_class: type) -> type:
    """``connection_class`` (TCP, TLS or Unix socket) with a total deadline
    of :data:`REDIS_COMMAND_SECONDS` on connecting and on each reply."""

    class DeadlineConnection(connection_class):  # type: ignore[misc, valid-type]
        deadline: float | None = None

        def connect(self, *args: Any, **kwargs: Any) -> Any:
            return self._within_deadline(super().connect, *args, **kwargs)

        def read_response(self, *args: Any, **kwargs: Any) -> Any:
            return self._within_deadline(super().read_response, *args, **kwargs)

        def _within_deadline(self, call: Any, *args: Any, **kwargs: Any) -> Any:
            if self.deadline is not None:  # nested (connect's handshake): the outer one holds
                return call(*args, **kwargs)
            self.deadline = time.monotonic() + REDIS_COMMAND_SECONDS
            try:
                return call(*args, **kwargs)
            finally:
                self.deadline = None

        def _connect(self) -> Any:
            return _DeadlineSocket(super()._connect(), self)

    DeadlineConnection.__name__ = f"Deadline{connection_class.__name__}"
    return DeadlineConnection


def _check_redis_url(url: str, shown: str) -> None:
    """What redis-py lets through: a database that is not a number (it would
    use database 0), a port that is not one."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.scheme.lower() == "unix":
        if not parsed.path:
            raise FuzzDatabaseError(f"--database {shown}: not a Redis URL: no socket path "
                                    f"(expected unix:///path/to/socket)")
        return
    try:
        parsed.port  # noqa: B018 - urllib checks the port when it is read
    except ValueError as exc:
        raise FuzzDatabaseError(f"--database {shown}: not a Redis URL: {exc} "
                                f"(expected redis://host:port/db)") from None
    db = parsed.path.strip("/")
    if db and not db.isdigit():
        raise FuzzDatabaseError(f"--database {shown}: not a Redis URL: the database "
                                f"{db!r} is not a number (expected redis://host:port/db)")


def _backend_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a database backend raises when its storage goes away."""
    errors: tuple[type[BaseException], ...] = ()
    try:
        import redis

        errors += (redis.RedisError,)
    except ImportError:
        pass
    return errors


class KeepFailuresDatabase(ExampleDatabase):
    """A database that never forgets: saves go to ``inner``, deletes are
    ignored (a ``move`` only copies), and fetches return the stored examples
    only while ``replaying`` is true (until a round ends without a new
    failure: later rounds would only replay failures already reported).

    ``replayed`` counts the examples fetched (what the campaign replays from
    earlier campaigns, its own or other machines'). A backend that fails
    (a Redis server gone) raises :class:`FuzzDatabaseError`.
    """

    def __init__(self, inner: ExampleDatabase, name: str = "") -> None:
        super().__init__()
        self.inner = inner
        self.name = name or repr(inner)
        self.replaying = True
        self.replayed = 0
        self._errors = _backend_errors()

    def _failed(self, exc: BaseException) -> FuzzDatabaseError:
        return FuzzDatabaseError(f"example database {self.name}: {type(exc).__name__}: {exc}")

    def save(self, key: bytes, value: bytes) -> None:
        try:
            self.inner.save(key, value)
        except self._errors as exc:
            raise self._failed(exc) from None

    def fetch(self, key: bytes) -> Iterator[bytes]:
        if not self.replaying:
            return iter(())
        try:
            values = list(self.inner.fetch(key))
        except self._errors as exc:
            raise self._failed(exc) from None
        self.replayed += len(values)
        return iter(values)

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.save(dest, value)


def describe(spec: str | Path | None) -> str:
    """How summaries name a database (a Redis URL without its password)."""
    if spec is None:
        return ""
    text = str(spec)
    return _redacted(text) if is_redis_url(text) else text
