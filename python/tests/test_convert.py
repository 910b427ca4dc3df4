"""The value conversion (python/src/common/convert.rs) against the reference codec.

Every case encodes the same Python value with the reference's ``Codec()`` and
with ours and compares the bytes, then decodes both ways and compares the
results (types, dtypes, shapes, values, writability).
"""

import collections
import enum
import math

import numpy as np
import pytest
from unienv_interface.remote.codec import Codec, CodecError
from unienv_interface.space.spaces.graph import GraphInstance

from unienv_remote import _native

REF = Codec()

DTYPES = ["|b1", "|i1", "|u1"] + [
    f"{order}{kind}{size}"
    for order in "<>"
    for kind, sizes in (("i", (2, 4, 8)), ("u", (2, 4, 8)), ("f", (2, 4, 8)), ("c", (8, 16)))
    for size in sizes
]


def same(a, b):
    """Deep equality that also checks types, dtypes, shapes and NaNs."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.dtype.str == b.dtype.str
        assert a.shape == b.shape
        if a.dtype == object:
            for x, y in zip(a.flat, b.flat):
                same(x, y)
        else:
            assert a.tobytes() == b.tobytes()
        return
    if isinstance(a, GraphInstance):
        for name in ("n_nodes", "n_edges", "nodes_features", "edges_features", "edges"):
            same(getattr(a, name), getattr(b, name))
        return
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
        return
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    if isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
        return
    assert a == b


def roundtrip(value):
    ref_bytes = REF.encode(value)
    ours = _native.encode(value)
    assert ours == ref_bytes
    from_ref = REF.decode(ref_bytes)
    from_ours = _native.decode(ref_bytes)
    same(from_ref, from_ours)
    return from_ours


def arrays(value):
    if isinstance(value, np.ndarray):
        yield value
        if value.dtype == object:
            for v in value.flat:
                yield from arrays(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from arrays(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from arrays(v)
    elif isinstance(value, GraphInstance):
        for name in ("n_nodes", "n_edges", "nodes_features", "edges_features", "edges"):
            yield from arrays(getattr(value, name))


SCALARS = [
    None, True, False, 0, 1, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1,
    2**64, -(2**63) - 1, 2**128 + 7, -(10**80),
    0.0, -0.0, 1.5, 1e300, 5e-324, float("nan"), float("inf"), float("-inf"),
    "", "text", "ünïcödé ☃ 𝄞", "quote \" backslash \\ control \x01 \n",
    b"", b"\x00\xffbytes",
]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
def test_scalars(value):
    roundtrip(value)


def test_containers_keep_kind_and_order():
    value = {"z": [1, (2, 3), []], "a": (), "m": {"nested": {"deep": [None, {"x": 1.0}]}}, "": [()]}
    out = roundtrip(value)
    assert list(out) == ["z", "a", "m", ""]
    assert isinstance(out["z"][1], tuple) and isinstance(out["z"], list)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (2, 0, 4), (1, 1, 1, 2)])
def test_arrays_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    count = int(np.prod(shape))
    raw = rng.integers(0, 256, size=count * np.dtype(dtype).itemsize, dtype=np.uint8).tobytes()
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    if np.dtype(dtype).kind == "b":
        array = array.astype(bool).astype(dtype)
    out = roundtrip(array)
    assert out.flags.writeable and out.flags.c_contiguous and out.flags.owndata
    out[...] = 0  # writable, and independent of the frame


def test_received_arrays_are_independent():
    frame = REF.encode({"a": np.arange(4, dtype=np.float32), "b": np.arange(4, dtype=np.float32)})
    out = _native.decode(frame)
    out["a"][0] = 99
    assert out["b"][0] == 0
    assert _native.decode(frame)["a"][0] == 0


@pytest.mark.parametrize("make", [
    lambda: np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2],
    lambda: np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
    lambda: np.arange(24, dtype=">f4").reshape(2, 3, 4).transpose(2, 0, 1),
    lambda: np.arange(10, dtype=np.uint8)[::-1],
    lambda: np.broadcast_to(np.arange(3, dtype=np.int32), (4, 3)),
])
def test_non_contiguous_arrays(make):
    roundtrip(make())


@pytest.mark.parametrize("value", [
    np.float32(1.25), np.float16(-2), np.int64(-5), np.uint8(200), np.bool_(True), np.complex64(1 + 2j),
    np.float64(3.5), np.int8(-1), np.uint64(2**64 - 1),
])
def test_numpy_scalars(value):
    out = roundtrip(value)
    # np.float64 is a float subclass: the reference sends it as a float.
    assert isinstance(out, float) if isinstance(value, float) else (isinstance(out, np.ndarray) and out.shape == ())


def test_subclasses_travel_as_their_base():
    class Color(enum.IntEnum):
        RED = 3

    class Name(str):
        pass

    Point = collections.namedtuple("Point", "x y")
    ordered = collections.OrderedDict([("b", 1), ("a", Point(1, 2))])
    roundtrip({"c": Color.RED, "n": Name("x"), "p": Point(1.5, -2), "o": ordered})


def test_object_arrays_and_batches():
    batch = np.empty((2, 2), dtype=object)
    batch[0, 0] = {"pos": np.zeros(3, dtype=np.float32)}
    batch[0, 1] = {"pos": np.ones(3, dtype=np.float32)}
    batch[1, 0] = None
    batch[1, 1] = [1, (2, "x")]
    out = roundtrip(batch)
    assert out.dtype == object and out.shape == (2, 2)
    assert isinstance(out[1, 1], list)
    empty = np.empty((0, 3), dtype=object)
    roundtrip(empty)
    roundtrip({"obj": np.array([b"x", 1.5, np.int32(2)], dtype=object)})


def test_graph_instances():
    graph = GraphInstance(
        n_nodes=np.array([3, 2], dtype=np.int64),
        n_edges=np.array([1, 0], dtype=np.int64),
        nodes_features=np.arange(12, dtype=np.float32).reshape(2, 3, 2),
        edges_features=None,
        edges=np.zeros((2, 1, 2), dtype=np.int64),
    )
    out = roundtrip({"graph": graph, "batch": np.array([graph, None], dtype=object)})
    assert isinstance(out["graph"], GraphInstance)
    assert isinstance(out["batch"][0], GraphInstance)


def test_decoded_values_match_reference_for_our_own_frames():
    value = {"obs": np.arange(6, dtype="<f8").reshape(2, 3), "info": {"k": [1, 2]}, "b": b"x"}
    ours = _native.encode(value)
    same(REF.decode(ours), _native.decode(ours))


def test_arrays_are_read_in_place_but_values_stay_correct():
    # A C-contiguous array is borrowed while encoding; the bytes are the array's.
    array = np.arange(1000, dtype=np.float32)
    assert _native.encode(array) == REF.encode(array)
    view = array[10:20]
    assert _native.encode(view) == REF.encode(view)


@pytest.mark.parametrize("value, message", [
    ({1: 2}, "Dictionary keys must be strings"),
    ({"a": {3.5: 1}}, "Dictionary keys must be strings"),
    (object(), "Unsupported value type"),
    ({1, 2}, "Unsupported value type"),
    (np.array(["a", "b"]), "Unsupported array dtype"),
    (np.zeros(2, dtype=np.float128) if hasattr(np, "float128") else np.array([np.datetime64("2020")]), "Unsupported array dtype"),
    (np.zeros(2, dtype=[("x", np.int32)]), "Unsupported array dtype"),
])
def test_refusals_are_codec_errors(value, message):
    with pytest.raises(CodecError, match=message):
        REF.encode(value)
    with pytest.raises(CodecError, match=message):
        _native.encode(value)


def test_depth_limit_matches_reference():
    def nest(depth):
        value = 1
        for _ in range(depth):
            value = [value]
        return value

    roundtrip(nest(64))
    with pytest.raises(CodecError):
        REF.encode(nest(65))
    with pytest.raises(CodecError):
        _native.encode(nest(65))
    # NumPy scalars count one level more, as in the reference.
    inner = np.float32(1)
    value = inner
    for _ in range(63):
        value = [value]
    roundtrip(value)
    with pytest.raises(CodecError):
        REF.encode([value])
    with pytest.raises(CodecError):
        _native.encode([value])


def test_cycles_are_refused():
    cyclic = []
    cyclic.append(cyclic)
    with pytest.raises(CodecError):
        _native.encode(cyclic)


def test_message_limit():
    value = np.zeros(100, dtype=np.uint8)
    with pytest.raises(CodecError):
        Codec(64).encode(value)
    with pytest.raises(CodecError):
        _native.encode(value, 64)
    frame = REF.encode(value)
    with pytest.raises(CodecError):
        _native.decode(frame, 64)


@pytest.mark.parametrize("frame", [
    b"", b"\x00\x00\x00", b"\x00\x00\x00\x10{}", b"\x00\x00\x00\x02{}",
    b"\x00\x00\x00\x0bNaN" + b"\x00" * 8,
    REF.encode(np.zeros(3)) + b"extra",
])
def test_bad_frames_are_codec_errors(frame):
    with pytest.raises(CodecError):
        REF.decode(frame)
    with pytest.raises(CodecError):
        _native.decode(frame)


def test_large_dicts_convert_in_linear_time():
    """A 200,000-key dict: building the value tree once compared every new
    key with every earlier one (minutes at this size, even optimised); now
    keys are indexed. The bound is loose on purpose: it only tells linear
    (well under a second of work) from quadratic (minutes)."""
    import time

    n = 200_000
    value = {"x": {f"k{i}": i for i in range(n)}}
    start = time.perf_counter()
    frame = _native.encode(value)
    elapsed = time.perf_counter() - start
    assert elapsed < 30, f"{elapsed:.1f} s to convert {n} keys"
    assert frame == REF.encode(value)
    start = time.perf_counter()
    back = _native.decode(frame)
    elapsed = time.perf_counter() - start
    assert elapsed < 30, f"{elapsed:.1f} s to decode {n} keys"
    assert back == value


class _CountedGraph(GraphInstance):
    """A graph whose fields count how often the conversion reads them."""

    reads = 0

    def __getattribute__(self, name):
        if name in ("n_nodes", "n_edges", "nodes_features", "edges_features", "edges"):
            type(self).reads += 1
        return super().__getattribute__(name)


def test_over_limit_value_is_refused_before_it_is_converted_whole():
    """1,000 graphs of 1 KiB each under a 16 KiB limit: the conversion stops
    at the graph that passes the limit, not after reading all of them."""
    items = [
        _CountedGraph(n_nodes=np.int64(4), nodes_features=np.zeros(128))
        for _ in range(1000)
    ]
    _CountedGraph.reads = 0
    with pytest.raises(CodecError, match="exceeds the limit of 16384 bytes"):
        _native.encode(items, 16384)
    # Each graph is five field reads; about 16 graphs fit under the limit.
    assert 0 < _CountedGraph.reads <= 5 * 20, _CountedGraph.reads


def test_long_float_list_is_refused_early():
    """Python floats count at least one byte each: a list of a million under
    a 64 KiB limit is refused with the size it was stopped at."""
    with pytest.raises(CodecError, match=r"at least 65537 bytes exceeds the limit of 65536"):
        _native.encode([0.5] * 1_000_000, 65536)


def test_a_call_argument_over_the_limit_is_refused_before_it_is_converted_whole() -> None:
    """A client's call argument is converted against the connection's
    message limit: refused after about the limit's worth, not read whole."""
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    import unienv_remote

    server = unienv_remote.RemoteServer(idle_timeout=None, max_message_size=16384)
    server.register("e", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    client = unienv_remote.RemoteClient.connect(server.listen("127.0.0.1", 0), max_message_size=16384)
    try:
        items = [
            _CountedGraph(n_nodes=np.int64(4), nodes_features=np.zeros(128))
            for _ in range(1000)
        ]
        _CountedGraph.reads = 0
        with pytest.raises(CodecError, match="exceeds the limit of 16384 bytes"):
            client.call("e", "step", items)
        assert 0 < _CountedGraph.reads <= 5 * 20, _CountedGraph.reads
        client.env("e").reset(seed=0)  # nothing was sent: the connection serves on
    finally:
        client.close()
        server.close()
