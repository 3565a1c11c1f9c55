"""The channel between the trusted runner and the candidate process: plain data, never pickle.

Stdlib only (staged next to ``runner.py`` and imported there as ``_wire``). A message is a
4-byte little-endian length and a tagged body; :func:`decode` builds fresh objects of a
closed set of types and refuses anything else, so bytes written by a hostile peer become
plain data or a :class:`WireError`, never code:

``None``, ``bool``, ``int`` (at most 4,300 digits), ``float``, ``complex``, ``str``,
``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, numpy arrays and scalars of
numeric dtypes (``b``, ``i``, ``u``, ``f``, ``c``: dtype, shape and a copy of the bytes,
decoded with ``numpy.frombuffer``; never a pointer, never ``object``), :class:`Opaque`
placeholders (a name, standing for a value that could not cross), and *handles*: references
to an object that stays in the process that owns it. Types are matched exactly (a subclass
of ``list`` is not a list), so encoding never runs a value's own methods.

What may become a handle is the sending side's choice (``exportable``): the candidate
exports callables only (and its module, for ``load``), so everything else it returns is
plain data or a :class:`WireError`-free ``TypeError`` naming the type that cannot cross.
A message holds at most :data:`MAX_MESSAGE` bytes, :data:`MAX_DEPTH` levels and
:data:`MAX_ITEMS` values.

:class:`Endpoint` runs a synchronous, re-entrant request/reply protocol over one stream
socket: while it waits for the reply to its own request it serves the peer's requests
(a candidate function calling back an evaluator function, which calls the candidate
again). What a side serves is decided by its ``policy``.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import time

MAX_MESSAGE = 64 << 20
MAX_DEPTH = 64
MAX_ITEMS = 1 << 22  # values in one message (a list of floats is one value per float)
MAX_NDIM = 32
_LEN = struct.Struct("<I")
_F64 = struct.Struct("<d")
_DTYPE_KINDS = "biufc"


class WireError(Exception):
    """A message broke the format (size, depth, tag, dtype): the peer is not trusted."""


class Closed(WireError):
    """The peer closed the channel (it exited, crashed or closed its descriptor)."""


class Timeout(WireError):
    """No reply within the call's deadline."""


class Handle:
    """A reference to an object kept by the process that owns it (``owner``: ``"c"``/``"e"``)."""

    __slots__ = ("owner", "oid")

    def __init__(self, owner: str, oid: int) -> None:
        self.owner, self.oid = owner, oid


class Opaque:
    """Stands for a value of the other side that is not plain data (a module in a program's
    namespace): it carries the value's name and type name, nothing of the value itself."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<not plain data: {self.what}>"


PLAIN_TYPES = ("None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset, "
               "numpy arrays and scalars of bool/int/uint/float/complex dtype")


def _numpy_kind(obj: object) -> str | None:
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if isinstance(obj, np.ndarray):
        return "a"
    if isinstance(obj, np.generic):
        return "g"
    return None


def encode(obj: object, export, out: list, depth: int = 0) -> None:
    """Append the encoding of ``obj`` to ``out``; objects outside the set go through
    ``export(obj) -> Handle`` (or raise ``TypeError`` when ``export`` is ``None``)."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    t = type(obj)
    if obj is None:
        out.append(b"N")
    elif obj is True:
        out.append(b"T")
    elif obj is False:
        out.append(b"F")
    elif t is int:
        s = str(obj).encode()
        out.append(b"i" + _LEN.pack(len(s)) + s)
    elif t is float:
        out.append(b"f" + _F64.pack(obj))
    elif t is complex:
        out.append(b"c" + _F64.pack(obj.real) + _F64.pack(obj.imag))
    elif t is str:
        s = obj.encode("utf-8", "surrogatepass")
        out.append(b"s" + _LEN.pack(len(s)) + s)
    elif t in (bytes, bytearray):
        out.append(b"b" + _LEN.pack(len(obj)) + bytes(obj))
    elif t in (list, tuple, set, frozenset):
        tag = {list: b"l", tuple: b"t", set: b"S", frozenset: b"Z"}[t]
        out.append(tag + _LEN.pack(len(obj)))
        for item in obj:
            encode(item, export, out, depth + 1)
    elif t is dict:
        out.append(b"d" + _LEN.pack(len(obj)))
        for k, v in obj.items():
            encode(k, export, out, depth + 1)
            encode(v, export, out, depth + 1)
    elif t is Handle:
        out.append(b"h" + obj.owner.encode() + _LEN.pack(obj.oid))
    elif t is Opaque:
        s = str(obj.what).encode("utf-8", "replace")[:200]
        out.append(b"o" + _LEN.pack(len(s)) + s)
    else:
        kind = _numpy_kind(obj)
        if kind is not None and obj.dtype.kind in _DTYPE_KINDS and not obj.dtype.fields:
            import numpy

            # a copy of the values as the base ndarray holds them: no subclass method runs
            arr = numpy.array(obj, copy=True, subok=False) if kind == "a" else numpy.asarray(obj).reshape(())
            if arr.ndim > MAX_NDIM:
                raise TypeError(f"an array of {arr.ndim} dimensions cannot cross (at most {MAX_NDIM})")
            dt = arr.dtype.str.encode()
            data = arr.tobytes()
            out.append(kind.encode() + bytes([len(dt)]) + dt + bytes([arr.ndim])
                       + b"".join(_LEN.pack(n) for n in arr.shape) + _LEN.pack(len(data)) + data)
        elif export is not None:
            encode(export(obj), None, out, depth)
        else:
            raise TypeError(f"a {t.__name__} cannot cross the sandbox channel")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.items = data, 0, 0

    def count(self) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise WireError(f"message holds more than {MAX_ITEMS} values")

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise WireError("truncated message")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def length(self) -> int:
        return _LEN.unpack(self.take(4))[0]


def _array(r: _Reader, scalar: bool):
    dt = r.take(r.take(1)[0]).decode("ascii", "replace")
    ndim = r.take(1)[0]
    if ndim > MAX_NDIM or (scalar and ndim):
        raise WireError(f"array of {ndim} dimensions")
    shape = tuple(r.length() for _ in range(ndim))
    data = r.take(r.length())
    if len(dt) < 3 or dt[0] not in "<>|=" or dt[1] not in _DTYPE_KINDS or not dt[2:].isdigit():
        raise WireError(f"array dtype {dt!r} is not numeric")
    count = 1
    for n in shape:
        count *= n
    if count * int(dt[2:]) != len(data):
        raise WireError("array size does not match its shape")
    import numpy

    try:  # a fresh array owning a copy of the bytes: nothing points into the message or the peer
        arr = numpy.frombuffer(data, dtype=numpy.dtype(dt)).reshape(shape).copy()
    except (TypeError, ValueError) as exc:
        raise WireError(f"bad array: {exc}") from None
    return arr[()] if scalar else arr


def decode(data: bytes, resolve) -> object:
    """Decode one message body; ``resolve(Handle)`` turns a handle into a local object."""
    r = _Reader(data)
    value = _decode(r, resolve, 0)
    if r.pos != len(data):
        raise WireError("trailing bytes after the message")
    return value


def _decode(r: _Reader, resolve, depth: int) -> object:
    if depth > MAX_DEPTH:
        raise WireError("message nested too deeply")
    r.count()
    tag = r.take(1)
    if tag == b"N":
        return None
    if tag == b"T":
        return True
    if tag == b"F":
        return False
    if tag == b"i":
        text = r.take(r.length())
        if len(text) > 4300:
            raise WireError("integer too long")
        try:
            return int(text)
        except ValueError:
            raise WireError("bad integer") from None
    if tag == b"f":
        return _F64.unpack(r.take(8))[0]
    if tag == b"c":
        return complex(_F64.unpack(r.take(8))[0], _F64.unpack(r.take(8))[0])
    if tag == b"s":
        try:
            return r.take(r.length()).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise WireError("string is not UTF-8") from None
    if tag == b"b":
        return r.take(r.length())
    if tag in (b"l", b"t", b"S", b"Z"):
        n = r.length()
        if n > len(r.data) - r.pos:
            raise WireError("container longer than the message")
        items = [_decode(r, resolve, depth + 1) for _ in range(n)]
        try:
            return {b"l": list, b"t": tuple, b"S": set, b"Z": frozenset}[tag](items)
        except TypeError:
            raise WireError("unhashable set member") from None
    if tag == b"d":
        n = r.length()
        if n > len(r.data) - r.pos:
            raise WireError("dict longer than the message")
        out = {}
        for _ in range(n):
            k = _decode(r, resolve, depth + 1)
            try:
                out[k] = _decode(r, resolve, depth + 1)
            except TypeError:
                raise WireError("unhashable dict key") from None
        return out
    if tag in (b"a", b"g"):
        return _array(r, tag == b"g")
    if tag == b"o":
        return Opaque(r.take(r.length()).decode("utf-8", "replace"))
    if tag == b"h":
        owner = r.take(1).decode("ascii", "replace")
        return resolve(Handle(owner, r.length()))
    raise WireError(f"unknown tag {tag!r}")


def send(sock: socket.socket, body: bytes) -> None:
    if len(body) > MAX_MESSAGE:
        raise WireError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE}")
    sock.sendall(_LEN.pack(len(body)) + body)


class Reader:
    """Buffered reads of whole messages from one socket (one system call per burst)."""

    def __init__(self, sock: socket.socket) -> None:
        self.fd, self.buf = sock.fileno(), bytearray()

    def _fill(self, deadline: float | None) -> None:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise Timeout("no reply in time")
        try:
            chunk = os.read(self.fd, 1 << 16)
        except InterruptedError:
            return
        except OSError as exc:
            raise Closed(f"channel broken: {exc}") from None
        if not chunk:
            raise Closed("the peer closed the channel")
        self.buf += chunk

    def message(self, deadline: float | None, limit: int = MAX_MESSAGE) -> bytes:
        """One message body; ``Closed`` at EOF, ``Timeout`` past ``deadline`` (monotonic)."""
        while len(self.buf) < 4:
            self._fill(deadline)
        n = _LEN.unpack_from(self.buf)[0]
        if n > limit:
            raise WireError(f"message of {n} bytes exceeds {limit}")
        while len(self.buf) < 4 + n:
            self._fill(deadline)
        body = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        return body


class RemoteError(Exception):
    """An exception raised on the other side, with its type name and traceback text."""

    def __init__(self, type_name: str, message: str, tb: str = "") -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name, self.remote_message, self.remote_traceback = type_name, message, tb


class Endpoint:
    """One side of the request/reply protocol.

    Requests: ``("call", id, oid, method, args, kwargs)``, ``("getattr", id, oid, name)``,
    ``("setattr", id, oid, name, value)``, ``("dir", id, oid)``, ``("vars", id, oid)`` (a
    namespace: values that cannot cross become :class:`Opaque`) and ``("load", id, name,
    path, run_name)``. Replies: ``("ok", id, value)`` or ``("err", id, type, message, tb)``.
    ``policy(op, target, name)`` may raise ``PermissionError`` to refuse a request;
    ``exportable(obj)`` says which objects that are not plain data may leave as handles
    (default: all); any other one makes the reply a ``TypeError`` naming its type.
    """

    def __init__(self, sock: socket.socket, side: str, make_proxy, policy, loader=None,
                 exportable=None) -> None:
        self.sock, self.side = sock, side
        self.make_proxy, self.policy, self.loader = make_proxy, policy, loader
        self.exportable = exportable
        self.objects: dict[int, object] = {}
        self._ids: dict[int, int] = {}  # id(obj) -> oid, so one object keeps one handle
        self._next = 0
        self.deadline: float | None = None
        self.closed = False
        self._reader = Reader(sock)

    # -- values ---------------------------------------------------------------------------
    def export(self, obj: object) -> Handle:
        if self.exportable is not None and not self.exportable(obj):
            what = (f"an array of dtype {obj.dtype}" if _numpy_kind(obj)
                    else f"a value of type {type(obj).__name__!r}")
            raise TypeError(f"{what} cannot cross the sandbox channel; only plain data does "
                            f"({PLAIN_TYPES}) and functions the evaluator calls")
        oid = self._ids.get(id(obj))
        if oid is None or self.objects.get(oid) is not obj:
            self._next += 1
            oid = self._next
            self.objects[oid], self._ids[id(obj)] = obj, oid
        return Handle(self.side, oid)

    def resolve(self, h: Handle) -> object:
        if h.owner == self.side:
            try:
                return self.objects[h.oid]
            except KeyError:
                raise WireError(f"unknown handle {h.oid}") from None
        return self.make_proxy(self, h)

    def pack(self, msg: tuple) -> bytes:
        out: list = []
        encode(msg, self.export, out)
        return b"".join(out)

    def _namespace(self, target: object) -> dict:
        """``vars(target)`` with every value that cannot cross replaced by an :class:`Opaque`."""
        out = {}
        for key, value in dict(vars(target)).items():
            if type(key) is not str or key == "__builtins__":
                continue
            try:
                encode(value, self.export, [])
            except (TypeError, WireError):
                value = Opaque(f"{key}: {type(value).__name__}")
            out[key] = value
        return out

    # -- protocol -------------------------------------------------------------------------
    def request(self, *msg: object) -> object:
        """Send one request; serve the peer's requests until its reply arrives."""
        if self.closed:
            raise Closed("the channel is closed")
        self._next += 1
        rid = self._next
        send(self.sock, self.pack((msg[0], rid, *msg[1:])))
        while True:
            reply = self.receive()
            kind = reply[0]
            if kind in ("ok", "err"):
                if reply[1] != rid:
                    raise WireError("reply to a request that was not made")
                if kind == "ok":
                    return reply[2]
                raise RemoteError(*(str(x) for x in reply[2:5]))
            self.serve(reply)

    def receive(self) -> tuple:
        msg = decode(self._reader.message(self.deadline), self.resolve)
        if not isinstance(msg, tuple) or len(msg) < 2 or not isinstance(msg[0], str):
            raise WireError("message is not a request or a reply")
        return msg

    def serve(self, msg: tuple) -> None:
        op, rid = msg[0], msg[1]
        try:
            value = self._perform(op, msg[2:])
            try:
                body = self.pack(("ok", rid, value))
            except TypeError as exc:
                what = f"attribute {msg[3]!r}" if op == "getattr" else "the value returned"
                raise TypeError(f"{what}: {exc}") from None
        except BaseException as exc:  # noqa: BLE001 - every failure goes back as a reply
            import traceback

            tb = traceback.format_exc()[-4000:]
            body = self.pack(("err", rid, type(exc).__name__, str(exc)[:2000], tb))
        send(self.sock, body)

    def _perform(self, op: str, args: tuple) -> object:
        if op == "load":
            self.policy(op, None, None)
            return self.loader(*args)
        target = args[0]
        name = args[1] if len(args) > 1 else None
        self.policy(op, target, name)
        if op == "call":
            fn = target if name is None else getattr(target, name)
            return fn(*args[2], **args[3])
        if op == "getattr":
            return getattr(target, name)
        if op == "setattr":
            setattr(target, name, args[2])
            return None
        if op == "dir":
            return sorted(str(n) for n in dir(target))
        if op == "vars":
            return self._namespace(target)
        raise PermissionError(f"unknown request {op!r}")
