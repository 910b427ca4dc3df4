"""The golden interop cases, built in Python with NumPy and the reference types.

Used by tests/golden/generate.py (writes tests/golden/<name>.bin with the
reference encoder) and by tests/py/golden_check.py (checks envelopes written by
the Rust encoder). The Rust twin of every case is `golden_cases()` in
tests/codec/golden.rs; both sides must build exactly the same values, and each
side checks its own expected values against what the other side encoded.

Besides the shared CASES, `stress_cases()` builds inputs from a SplitMix64
stream that tests/codec/golden.rs reproduces bit for bit (floats from raw bit
patterns and strings from random code points); they check our float `repr` and
string escaping against the reference byte for byte.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List

import numpy as np
from unienv_interface.space.spaces.graph import GraphInstance

nan = float("nan")
inf = float("inf")


def obj(shape, items) -> np.ndarray:
    """An object array of `shape` holding `items` in C order."""
    result = np.empty(shape, dtype=object)
    assert result.size == len(items)
    for i, item in enumerate(items):
        result.flat[i] = item
    return result


# One (2, 3) array per dtype, with boundary values of each type. The same
# values are listed in tests/codec/golden.rs (fn dtype_arrays).
DTYPE_VALUES: Dict[str, List[Any]] = {
    "b1": [True, False, True, True, False, False],
    "i1": [-128, -1, 0, 1, 2, 127],
    "i2": [-32768, -1, 0, 1, 258, 32767],
    "i4": [-(2**31), -1, 0, 1, 16909060, 2**31 - 1],
    "i8": [-(2**63), -1, 0, 1, 72623859790382856, 2**63 - 1],
    "u1": [0, 1, 2, 127, 128, 255],
    "u2": [0, 1, 258, 32768, 65534, 65535],
    "u4": [0, 1, 16909060, 2**31, 2**32 - 2, 2**32 - 1],
    "u8": [0, 1, 72623859790382856, 2**63, 2**64 - 2, 2**64 - 1],
    "f2": [0.0, -0.0, 1.5, -2.25, 65504.0, 6.103515625e-05],
    "f4": [0.0, -0.0, 1.5, -2.25, 3.4028234663852886e38, 1.401298464324817e-45],
    "f8": [0.0, -0.0, 0.1, -2.25, 1.7976931348623157e308, 5e-324],
    "c8": [0j, 1 + 2j, -1.5 - 0.25j, 1j, -2.5 + 0j, 3 - 4j],
    "c16": [0j, 1 + 2j, 0.1 - 0.2j, 1e300j, -2.5 + 0j, 3 - 4j],
}


def dtype_arrays(order: str) -> Dict[str, np.ndarray]:
    out = {}
    for code, values in DTYPE_VALUES.items():
        marker = "|" if code[1:] == "1" and code[0] in "biu" else order
        out[code] = np.array(values, dtype=marker + code).reshape(2, 3)
    return out


def step_result() -> Dict[str, Any]:
    observation = {
        "state": np.arange(32, dtype="<f4") * np.float32(0.25) - np.float32(4.0),
        "image": (np.arange(8 * 8 * 3) % 256).astype(np.uint8).reshape(8, 8, 3),
    }
    info = {
        "TimeLimit.truncated": True,
        "episode": {"r": 12.5, "l": 200},
        "timestamp_ns": 1800000000000000123,
    }
    return {
        "version": 1,
        "type": "response",
        "session_id": "s-1f2e",
        "request_id": "r42",
        "resource_id": "env",
        "operation_id": "op-7",
        "result": {"value": (observation, 1.25, False, True, info), "descriptors": []},
    }


def hello_request() -> Dict[str, Any]:
    return {"version": 1, "type": "request", "request_id": "r1", "session_id": None, "op": "hello",
            "resource_id": None, "max_message_size": 67108864}


def snapshot() -> Dict[str, Any]:
    return {"version": 1, "type": "snapshot", "session_id": "s", "subscription_id": "sub",
            "resource_id": "env/node", "operation_id": "op", "kind": "step", "sequence": 12,
            "timestamp_ns": 1800000000000000000, "descriptor_revision": 3, "descriptor": {},
            "data": {"observation": [np.array([1, 2], dtype="<i8")], "reward": np.float32(3.0)}}


def numpy_scalars() -> Dict[str, Any]:
    return {
        "f4": np.float32(1.5),
        "f2": np.float16(-0.5),
        "i8": np.int64(-7),
        "i1": np.int8(-128),
        "u1": np.uint8(255),
        "u8": np.uint64(2**64 - 1),
        "b1": np.bool_(True),
        "c8": np.complex64(1 - 2j),
        "c16": np.complex128(0.5 + 0.25j),
        # np.float64 subclasses float, so the reference writes a plain float.
        "f8_is_float": np.float64(2.5),
        "f8_nan_is_float": np.float64(nan),
        "be_i4": np.array(-3, dtype=">i4"),
        "i4_0d": np.array(7, dtype="<i4"),
    }


def containers() -> Dict[str, Any]:
    return {
        "tuple": (1, (2, 3.5), [], ()),
        "single": (1,),
        "list": [None, True, False, "x", [[], [()]]],
        "ordered": {"z": 1, "a": 2, "m": 3},
        "empty_dict": {},
        "nested": {"a": {"b": {"c": [1, (2.0,)]}}},
        "bool_int_float": [True, 1, 1.0, 0, False, 0.0],
        "many_keys": {f"k{i:02}": i for i in range(20)},
    }


def byte_strings() -> Dict[str, Any]:
    return {
        "empty": b"",
        "all_bytes": bytes(range(256)),
        "large": bytes((i * 7 + 3) % 256 for i in range(70000)),
        "in_tuple": (b"a", b"", b"bc"),
    }


def _from_bits(bits: List[int]) -> np.ndarray:
    return np.array(bits, dtype="<u8").view("<f8")


def floats() -> Dict[str, Any]:
    return {
        "scalars": [nan, inf, -inf, -0.0, 0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                    0.1, 1e16, 1e15, 1e-05, 0.0001, 123456789.125, -1.5e-07, 1 / 3, 1e22, 9007199254740993.0],
        "f4": np.array([nan, inf, -inf, -0.0, 1.0], dtype="<f4"),
        "f8_be": np.array([nan, -inf, inf], dtype=">f8"),
        "f2": np.array([nan, inf, -inf], dtype="<f2"),
        "c16": np.array([complex(nan, 1.0), complex(inf, -inf)], dtype="<c16"),
        # NaN payloads travel unchanged inside arrays: signalling, negative, payload.
        "nan_payloads": _from_bits([0x7FF0000000000001, 0xFFF8000000000000, 0x7FF8DEAD00000000]),
    }


def big_ints() -> tuple:
    return (0, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 1800000000000000000, -(2**31), 2**53 + 1)


def object_arrays() -> Dict[str, Any]:
    return {
        "batch": obj((2,), [{"pos": np.array([1.0, 2.0], dtype="<f4"), "id": 0},
                            {"pos": np.array([3.0, 4.0], dtype="<f4"), "id": 1}]),
        "grid": obj((2, 2), [1, "two", None, (3.0, b"four")]),
        "scalar": obj((), [{"k": [1]}]),
        "empty": obj((0,), []),
        "empty_2d": obj((3, 0), []),
        "nested": obj((1,), [obj((2,), [1, 2])]),
    }


def graphs() -> Dict[str, Any]:
    return {
        "full": GraphInstance(
            n_nodes=np.array([3, 2], dtype="<i8"),
            n_edges=np.array([2, 1], dtype="<i8"),
            nodes_features=np.arange(24, dtype="<f4").reshape(2, 3, 4),
            edges_features=None,
            edges=np.array([[[0, 1], [1, 2]], [[0, 1], [0, 0]]], dtype="<i8"),
        ),
        "minimal": GraphInstance(n_nodes=np.array(4, dtype="<i8")),
        "batched": obj((2,), [GraphInstance(n_nodes=np.array(1, dtype="<i8")), None]),
    }


def unicode() -> Dict[str, Any]:
    return {
        "": "",
        "ascii": "plain",
        "latin": "h\u00e9llo w\u00f6rld",
        "cjk": "\u65e5\u672c\u8a9e",
        "emoji": "\U0001F600 \U0001F44D\U0001F3FD",
        "controls": "\x00\x01\x08\x0c\n\r\t\x1f\x7f",
        "quotes": "\"quoted\" \\ back / slash",
        "separators": "\u2028\u2029\ufeff\uffff",
        "non_bmp": "\U00010000\U0010FFFF",
        "\u043a\u043b\u044e\u0447": "\u0437\u043d\u0430\u0447\u0435\u043d\u0438\u0435",
        "\U0001F600": ["emoji key", "\u00e9"],
    }


def shapes() -> Dict[str, Any]:
    return {
        "scalar_f8": np.array(2.5, dtype="<f8"),
        "zero_1d": np.zeros((0,), dtype="<f4"),
        "zero_3d": np.zeros((3, 0, 2), dtype=">i2"),
        "dims32": np.arange(2, dtype="<u2").reshape([1] * 31 + [2]),
        # Non-C layouts are written in C order.
        "transposed": np.arange(6, dtype="<i2").reshape(2, 3).T,
        "fortran": np.asfortranarray(np.arange(6, dtype="<u4").reshape(2, 3)),
    }


def deep() -> Any:
    """The deepest allowed tree: a leaf at depth 64 (the root is depth 0)."""
    value: Any = 1
    for level in range(64):
        kind = level % 3
        value = [value] if kind == 0 else ((value,) if kind == 1 else {"k": value})
    return value


CASES: Dict[str, Callable[[], Any]] = {
    "step_result": step_result,
    "hello_request": hello_request,
    "snapshot": snapshot,
    "dtypes_little": lambda: dtype_arrays("<"),
    "dtypes_big": lambda: dtype_arrays(">"),
    "numpy_scalars": numpy_scalars,
    "containers": containers,
    "bytes": byte_strings,
    "floats": floats,
    "big_ints": big_ints,
    "object_arrays": object_arrays,
    "graphs": graphs,
    "unicode": unicode,
    "shapes": shapes,
    "deep": deep,
    "none_root": lambda: None,
    "array_root": lambda: np.array([1, 2, 3], dtype="<i4"),
}


# ---- SplitMix64 stress inputs, mirrored in tests/codec/golden.rs ----

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed: int) -> None:
        self.state = seed & MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def float_stress() -> List[float]:
    rng = SplitMix64(0x5EED)
    out: List[float] = []
    for _ in range(2000):  # any f64 bit pattern
        out.append(struct.unpack("<d", struct.pack("<Q", rng.next()))[0])
    for _ in range(2000):  # f32 values widened to f64
        out.append(struct.unpack("<f", struct.pack("<I", rng.next() & 0xFFFFFFFF))[0])
    for _ in range(2000):  # short decimals
        r = rng.next()
        out.append(float(r % 1000000) / float(10 ** ((r >> 32) % 9)))
    for _ in range(1000):  # around repr's switches to exponent notation (1e-4, 1e16)
        r = rng.next()
        e = (r >> 32) % 30 - 12
        m = float(r % 100000)
        out.append(m * float(10**e) if e >= 0 else m / float(10 ** (-e)))
    return out


def string_stress() -> List[str]:
    rng = SplitMix64(0x57A1)
    out: List[str] = []
    for _ in range(500):
        n = rng.next() % 13
        chars = []
        for _ in range(n):
            r = rng.next()
            kind, x = r % 4, r >> 8
            if kind == 0:
                cp = x % 0x80
            elif kind == 1:
                cp = 0x80 + x % (0x800 - 0x80)
            elif kind == 2:
                cp = 0x800 + x % (0x10000 - 0x800)
                if 0xD800 <= cp < 0xE000:
                    cp += 0x800
            else:
                cp = 0x10000 + x % (0x110000 - 0x10000)
            chars.append(chr(cp))
        out.append("".join(chars))
    return out


def stress_cases() -> Dict[str, Callable[[], Any]]:
    return {"stress_floats": float_stress, "stress_strings": string_stress}
