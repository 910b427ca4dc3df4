"""Space documents of the reference, for tests/interop/host.rs.

Reads a codec envelope from stdin: a dict {name: document} produced by the
Rust `Space::to_value()`. Writes a codec envelope to stdout:
{"reference": {name: space_to_json(space)} for the spaces built below,
 "roundtrip": {name: space_to_json(json_to_space(rust_document))}}.
"""
import sys

import numpy as np
from unienv_interface.backends import NumpyComputeBackend as B
from unienv_interface.remote import Codec
from unienv_interface.space import (
    BatchedSpace, BinarySpace, BoxSpace, DictSpace, DynamicBoxSpace, GraphSpace, TextSpace, TupleSpace, UnionSpace,
)
from unienv_interface.space.space_utils.serialization_utils import json_to_space, space_to_json


def spaces():
    inf = np.inf
    box3 = BoxSpace(B, -inf, inf, np.float32, shape=(3,))
    return {
        "box_f32_unbounded": box3,
        "box_f64_scalar_bounds_2x2": BoxSpace(B, -1.0, 1.0, np.float64, shape=(2, 2)),
        "box_f32_array_bounds": BoxSpace(
            B,
            np.array([[0, 1, 2], [3, 4, 5]], dtype=np.float32),
            np.array([[10, 11, 12], [13, 14, 15]], dtype=np.float32),
            np.float32,
            shape=(2, 3),
        ),
        "box_f32_broadcast_bounds": BoxSpace(
            B, np.array([[0.0], [0.5]], dtype=np.float32), np.array([[1.0, 2.0, 3.0]], dtype=np.float32),
            np.float32, shape=(2, 3),
        ),
        "box_i32_infinite": BoxSpace(B, -inf, inf, np.int32, shape=(2,)),
        "box_i64_infinite": BoxSpace(B, -inf, inf, np.int64, shape=(1,)),
        "box_u64_scalar_shape": BoxSpace(B, 0, inf, np.uint64, shape=()),
        "box_f32_scalar_shape": BoxSpace(B, 0.1, 0.5, np.float32, shape=()),
        "box_f64_scalar_shape": BoxSpace(B, -2.5, 2.5, np.float64, shape=()),
        "box_i8": BoxSpace(B, -5, 5, np.int8, shape=(4,)),
        "box_u8_image": BoxSpace(B, 0, 255, np.uint8, shape=(2, 2, 3)),
        "box_u16_u32_i16": TupleSpace(B, [
            BoxSpace(B, 0, 1000, np.uint16, shape=(1,)),
            BoxSpace(B, 0, inf, np.uint32, shape=(1,)),
            BoxSpace(B, -inf, 7, np.int16, shape=(2,)),
        ]),
        "binary": BinarySpace(B, (2, 3)),
        "binary_scalar": BinarySpace(B, ()),
        "dynamic_box": DynamicBoxSpace(B, -1.0, 1.0, shape_low=(0, 3), shape_high=(10, 3), dtype=np.float32),
        "dynamic_box_int": DynamicBoxSpace(B, 0, 9, shape_low=(1,), shape_high=(5,), dtype=np.int64, fill_value=-1),
        "tuple": TupleSpace(B, [box3, BinarySpace(B, (1,))]),
        "tuple_empty": TupleSpace(B, []),
        "dict_nested": DictSpace(B, {
            "z": box3,
            "": BinarySpace(B, (2,)),
            "a": DictSpace(B, {"y": TextSpace(B, 4), "x": box3}),
        }),
        "text_charset": TextSpace(B, 5, min_length=1, charset="hello"),
        "text_any": TextSpace(B, 8),
        "graph": GraphSpace(
            B,
            BoxSpace(B, -1.0, 1.0, np.float32, shape=(2,)),
            edge_feature_space=BoxSpace(B, 0.0, 1.0, np.float64, shape=(1,)),
            is_edge=True,
            min_nodes=2,
            max_nodes=6,
            min_edges=1,
            max_edges=9,
            batch_shape=(2,),
        ),
        "graph_no_edges": GraphSpace(B, BoxSpace(B, -inf, inf, np.float32, shape=(3,)), max_nodes=4, max_edges=1),
        "union": UnionSpace(B, [box3, TextSpace(B, 2)]),
        "batched_box": BatchedSpace(box3, (4,)),
        "batched_text": BatchedSpace(TextSpace(B, 3, charset="ab"), (2, 3)),
    }


def main():
    codec = Codec()
    rust_docs = codec.decode(sys.stdin.buffer.read())
    reference = {name: space_to_json(space) for name, space in spaces().items()}
    roundtrip = {name: space_to_json(json_to_space(doc, B, None)) for name, doc in rust_docs.items()}
    sys.stdout.buffer.write(codec.encode({"reference": reference, "roundtrip": roundtrip}))


if __name__ == "__main__":
    main()
