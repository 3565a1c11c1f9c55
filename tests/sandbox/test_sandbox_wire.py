"""Only plain data crosses from the candidate to the evaluator (issue 19, items 3, 9).

Values are converted in the candidate's process; the runner decodes a closed set of types
afresh. A candidate object whose ``len``/``iter``/``[]`` lie, or whose
``__array_interface__`` points into memory, fails that evaluation with a clear error; a
candidate function crosses only as something the evaluator can call.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

from qdevolve.sandbox import SandboxLimits, _wire
from qdevolve.sandbox.attacks import ATTACKS, check_attack
from qdevolve.types import Program

from ._backends import box_fixture  # noqa: F401 - the ``box`` fixture

LIMITS = SandboxLimits(wall_s=20, cpu_s=10, memory_mb=512)

PROGRAM = '''
import numpy as np


class Liar:
    def __len__(self):
        return 3
    def __iter__(self):
        return iter([0, 1, 2])
    def __getitem__(self, i):
        return 0
    def __contains__(self, x):
        return True


class Pointer:
    __array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (id(int), True), "version": 3}


def liar():
    return Liar()

def pointer():
    return Pointer()

def object_array():
    return np.array([Liar(), 1], dtype=object)

def nested_liar():
    return {"tour": [1, 2, Liar()]}

def plain():
    return (None, True, 3, 2.5, "s", b"b", [1, (2, 3)], {"k": {1, 2}}, np.arange(6).reshape(2, 3) / 2,
            np.float64(1.5), np.int32(7), np.array([True, False]))

def make_counter():
    state = [0]
    def step(n):
        state[0] += n
        return state[0]
    return step

def sneaky_list():
    class L(list):
        def __len__(self):
            return 99
    return L([1, 2])

COUNT = 3
'''

EVALUATOR = '''
import importlib.util
import numpy as np


def _try(fn):
    try:
        return repr(fn())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def evaluate(path):
    spec = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    out = {name: _try(getattr(m, name)) for name in
           ("liar", "pointer", "object_array", "nested_liar", "sneaky_list")}
    p = m.plain()
    types = [type(v).__name__ for v in p]
    assert p[8].dtype == np.float64 and p[8].shape == (2, 3) and p[8].flags.owndata
    assert p[9] == 1.5 and p[10] == 7 and p[11].tolist() == [True, False]
    step = m.make_counter()
    totals = [step(i) for i in range(1, 5)]  # a returned function, called repeatedly
    stand_in = {"len": hasattr(step, "__len__"), "iter": hasattr(step, "__iter__"),
                "getitem": hasattr(step, "__getitem__"), "attr": _try(lambda: step.__code__),
                "array": _try(lambda: np.asarray(step).dtype)}
    out["types"] = ",".join(types)
    out["plain"] = repr(p[:8])
    out["stand_in"] = repr(stand_in)
    return {"combined_score": float(totals[-1] + m.COUNT), "artifacts": out}
'''


def test_only_plain_data_crosses(box, tmp_path):
    ev = tmp_path / "evaluator.py"
    ev.write_text(EVALUATOR)
    r = box.evaluate(Program(code=PROGRAM), ev, LIMITS)
    assert r.status == "ok", (r.error, r.artifacts)
    a = r.artifacts
    assert r.score == 13.0  # 1+2+3+4 from the counter kept in the candidate, + COUNT
    for name, what in (("liar", "'Liar'"), ("pointer", "'Pointer'"), ("object_array", "dtype object"),
                       ("nested_liar", "'Liar'"), ("sneaky_list", "'L'")):
        assert a[name].startswith("TypeError") and what in a[name] and "cannot cross" in a[name], (name, a[name])
    assert a["types"] == "NoneType,bool,int,float,str,bytes,list,dict,ndarray,float64,int32,ndarray"
    assert a["plain"] == "(None, True, 3, 2.5, 's', b'b', [1, (2, 3)], {'k': {1, 2}})"
    stand_in = a["stand_in"]
    assert "'len': False" in stand_in and "'iter': False" in stand_in and "'getitem': False" in stand_in
    assert "AttributeError" in stand_in and "dtype('O')" in stand_in  # numpy sees an opaque object


@pytest.mark.parametrize("name", ["lying_values", "pointer_array"])
def test_catalogue_wire_attacks_hold(box, host, name):
    attack = next(a for a in ATTACKS if a.name == name)
    row = check_attack(box, attack, host)
    assert row.passed, row.failures
    assert row.got == "error" and "cannot cross" in (row.result.error or "")


# -- the codec itself ---------------------------------------------------------------------------
def _roundtrip(value, exportable=lambda obj: False):
    end = _wire.Endpoint(socket.socket(), "c", None, None, exportable=exportable)
    return _wire.decode(end.pack(("ok", 1, value)), lambda h: ("handle", h.owner, h.oid))


def test_codec_refuses_what_is_not_plain_and_copies_arrays():
    class Sub(list):
        pass

    for value in (Sub([1]), object(), np.array([object()]), np.array(["text"]), {1: Sub()}):
        with pytest.raises(TypeError, match="cannot cross"):
            _roundtrip(value)
    arr = np.arange(4.0)
    back = _roundtrip(arr)[2]
    assert back.flags.owndata and back.tolist() == [0, 1, 2, 3] and back.ctypes.data != arr.ctypes.data
    assert _roundtrip(print, exportable=callable)[2] == ("handle", "c", 1)


@pytest.mark.parametrize("body, why", [
    (b"a\x03<O8\x01" + b"\x01\x00\x00\x00" + b"\x08\x00\x00\x00" + b"\x00" * 8, "not numeric"),
    (b"a\x03<f8\x01" + b"\x02\x00\x00\x00" + b"\x08\x00\x00\x00" + b"\x00" * 8, "does not match"),
    (b"a\x03<f8\x40" + b"\x00\x00\x00\x00" * 64 + b"\x00\x00\x00\x00", "dimensions"),
    ((b"l" + (1).to_bytes(4, "little")) * (_wire.MAX_DEPTH + 2) + b"N", "deeply"),
])
def test_decoder_bounds_hostile_bytes(body, why):
    with pytest.raises(_wire.WireError, match=why):
        _wire.decode(body, lambda h: None)


def test_decoder_bounds_the_number_of_values(monkeypatch):
    monkeypatch.setattr(_wire, "MAX_ITEMS", 10)
    body = b"l" + (20).to_bytes(4, "little") + b"N" * 20
    with pytest.raises(_wire.WireError, match="more than 10 values"):
        _wire.decode(body, lambda h: None)
