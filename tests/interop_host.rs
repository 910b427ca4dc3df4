//! Interop with the reference (`unienv==0.0.1b14`): space documents, and the
//! same WorldEnv / CombinedWorldNode composition run in Python and in Rust.
//!
//! Values travel between the two through the reference codec, so types
//! (tuple vs list, int vs float, NumPy dtypes) are compared exactly.

mod common;

use bytes::Bytes;
use unienv_remote::host::space::{DynamicBoxSpace, GraphSpace, TextSpace};
use unienv_remote::host::Space;
use unienv_remote::{Codec, DType, Dict, NdArray, Value};

fn decode(frame: Vec<u8>) -> Value {
    Codec::default().decode(Bytes::from(frame)).expect("decode the reference's envelope")
}

fn encode(value: &Value) -> Vec<u8> {
    Codec::default().encode(value).expect("encode")
}

/// The spaces of `tests/py/host_spaces.py`, built with the Rust API.
fn rust_spaces() -> Vec<(&'static str, Space)> {
    let inf = f64::INFINITY;
    let box3 = Space::unbounded_f32(vec![3]);
    let f32s = |shape: Vec<usize>, v: Vec<f32>| NdArray::from_shape_vec(shape, v).unwrap();
    let text = |max: i64, charset: Option<&str>| {
        Space::Text(TextSpace {
            min_length: 0,
            max_length: max,
            charset: charset.map(String::from),
        })
    };
    vec![
        ("box_f32_unbounded", box3.clone()),
        ("box_f64_scalar_bounds_2x2", Space::boxed(DType::F64, vec![2, 2], -1.0, 1.0)),
        (
            "box_f32_array_bounds",
            Space::box_with_bounds(
                DType::F32,
                vec![2, 3],
                f32s(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
                f32s(vec![2, 3], vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0]),
            )
            .unwrap(),
        ),
        (
            "box_f32_broadcast_bounds",
            Space::box_with_bounds(
                DType::F32,
                vec![2, 3],
                f32s(vec![2, 1], vec![0.0, 0.5]),
                f32s(vec![1, 3], vec![1.0, 2.0, 3.0]),
            )
            .unwrap(),
        ),
        ("box_i32_infinite", Space::boxed(DType::I32, vec![2], -inf, inf)),
        ("box_i64_infinite", Space::boxed(DType::I64, vec![1], -inf, inf)),
        ("box_u64_scalar_shape", Space::boxed(DType::U64, vec![], 0.0, inf)),
        ("box_f32_scalar_shape", Space::boxed(DType::F32, vec![], 0.1, 0.5)),
        ("box_f64_scalar_shape", Space::boxed(DType::F64, vec![], -2.5, 2.5)),
        ("box_i8", Space::boxed(DType::I8, vec![4], -5.0, 5.0)),
        ("box_u8_image", Space::boxed(DType::U8, vec![2, 2, 3], 0.0, 255.0)),
        (
            "box_u16_u32_i16",
            Space::tuple(vec![
                Space::boxed(DType::U16, vec![1], 0.0, 1000.0),
                Space::boxed(DType::U32, vec![1], 0.0, inf),
                Space::boxed(DType::I16, vec![2], -inf, 7.0),
            ]),
        ),
        ("binary", Space::binary(vec![2, 3])),
        ("binary_scalar", Space::binary(vec![])),
        (
            "dynamic_box",
            Space::DynamicBox(DynamicBoxSpace {
                low: f32s(vec![1, 1], vec![-1.0]),
                high: f32s(vec![1, 1], vec![1.0]),
                shape_low: vec![0, 3],
                shape_high: vec![10, 3],
                dtype: DType::F32,
                fill_value: Value::Int(0),
            }),
        ),
        (
            "dynamic_box_int",
            Space::DynamicBox(DynamicBoxSpace {
                low: NdArray::from_vec(vec![0i64]),
                high: NdArray::from_vec(vec![9i64]),
                shape_low: vec![1],
                shape_high: vec![5],
                dtype: DType::I64,
                fill_value: Value::Int(-1),
            }),
        ),
        ("tuple", Space::tuple(vec![box3.clone(), Space::binary(vec![1])])),
        ("tuple_empty", Space::tuple(vec![])),
        (
            "dict_nested",
            Space::dict([
                ("z", box3.clone()),
                ("", Space::binary(vec![2])),
                ("a", Space::dict([("y", text(4, None)), ("x", box3.clone())])),
            ]),
        ),
        (
            "text_charset",
            Space::Text(TextSpace {
                min_length: 1,
                max_length: 5,
                charset: Some("hello".into()),
            }),
        ),
        ("text_any", text(8, None)),
        (
            "graph",
            Space::Graph(Box::new(GraphSpace {
                max_nodes: Some(6),
                min_nodes: 2,
                max_edges: Some(9),
                min_edges: 1,
                is_edge: true,
                node_feature_space: Space::boxed(DType::F32, vec![2], -1.0, 1.0),
                edge_feature_space: Some(Space::boxed(DType::F64, vec![1], 0.0, 1.0)),
                batch_shape: vec![2],
            })),
        ),
        (
            "graph_no_edges",
            Space::Graph(Box::new(GraphSpace {
                max_nodes: Some(4),
                min_nodes: 1,
                max_edges: Some(1),
                min_edges: 1,
                is_edge: false,
                node_feature_space: box3.clone(),
                edge_feature_space: None,
                batch_shape: vec![],
            })),
        ),
        ("union", Space::Union(vec![box3.clone(), text(2, None)])),
        ("batched_box", Space::batched(box3, vec![4])),
        ("batched_text", Space::batched(text(3, Some("ba")), vec![2, 3])),
    ]
}

#[test]
fn space_documents_match_the_reference() {
    let Some(python) = common::ref_python() else { return };
    let spaces = rust_spaces();
    let docs: Dict = spaces.iter().map(|(name, s)| (*name, s.to_value())).collect();
    let out = decode(common::run_python(&python, "host_spaces.py", &[], Some(&encode(&Value::Dict(docs.clone())))));
    let reference = out.get("reference").and_then(Value::as_dict).unwrap();
    let roundtrip = out.get("roundtrip").and_then(Value::as_dict).unwrap();
    assert_eq!(
        reference.keys().collect::<Vec<_>>(),
        docs.keys().collect::<Vec<_>>(),
        "the same spaces on both sides"
    );
    for (name, space) in &spaces {
        let ours = docs.get(name).unwrap();
        assert_eq!(Some(ours), reference.get(name), "space_to_json of {name}");
        // Same bytes on the wire, too.
        assert_eq!(encode(ours), encode(reference.get(name).unwrap()), "{name} encodes identically");
        assert_eq!(Some(ours), roundtrip.get(name), "json_to_space → space_to_json of {name}");
        assert_eq!(&Space::from_value(ours).unwrap(), space, "Rust parses its own {name}");
        assert_eq!(
            &Space::from_value(reference.get(name).unwrap()).unwrap(),
            space,
            "Rust parses the reference's {name}"
        );
    }
}
