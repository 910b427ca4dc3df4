//! Round trips through `Codec::encode` / `Codec::decode`: every dtype and byte
//! order, every shape class, every node kind, the integer and float edges,
//! strings, bytes, and zero-copy decoding.

use crate::support;

use bytes::Bytes;
use half::f16;
use num_complex::Complex;
use support::{arr, assert_same, frame, header_of, points_inside};
use unienv_remote::codec::{envelope_header, header_json, ByteOrder, MAX_DEPTH};
use unienv_remote::{dict, Codec, CodecError, DType, Dict, Graph, NdArray, ObjectArray, Value};

const KIND_SIZES: [(char, &[usize]); 5] = [
    ('b', &[1]),
    ('i', &[1, 2, 4, 8]),
    ('u', &[1, 2, 4, 8]),
    ('f', &[2, 4, 8]),
    ('c', &[8, 16]),
];

/// Every accepted dtype spelling: `<` and `>` for all, `|` for one-byte types.
fn dtype_spellings() -> Vec<String> {
    let mut out = Vec::new();
    for (kind, sizes) in KIND_SIZES {
        for &size in sizes {
            let markers: &[char] = if size == 1 {
                &['<', '>', '|']
            } else {
                &['<', '>']
            };
            for m in markers {
                out.push(format!("{m}{kind}{size}"));
            }
        }
    }
    out
}

/// Distinct, non-palindromic bytes so that any swap or shift shows.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed))
        .collect()
}

fn round_trip(value: &Value) -> (Bytes, Value) {
    let codec = Codec::default();
    let frame = Bytes::from(codec.encode(value).unwrap());
    let decoded = codec.decode(frame.clone()).unwrap();
    assert_same(value, &decoded);
    (frame, decoded)
}

#[test]
fn every_dtype_and_endian_marker_round_trips() {
    let spellings = dtype_spellings();
    assert_eq!(
        spellings.len(),
        14 * 2 + 3,
        "< and > for the 14 dtypes, | for b1, i1, u1"
    );
    for s in &spellings {
        let dtype = DType::parse(s).unwrap();
        let size = dtype.itemsize();
        for shape in [vec![2, 3], vec![], vec![0], vec![4, 0, 2]] {
            let n: usize = shape.iter().product();
            let mut data = pattern(n * size, size as u8);
            if dtype.kind() == unienv_remote::ScalarKind::Bool {
                data.iter_mut().for_each(|b| *b &= 1);
            }
            let a = NdArray::from_bytes(dtype, shape.clone(), Bytes::from(data)).unwrap();
            let (frame, decoded) = round_trip(&Value::Array(a.clone()));
            // One-byte types are written with `|`, as NumPy's dtype.str does;
            // multi-byte types keep their byte order.
            let written = if size == 1 {
                format!("|{}", &s[1..])
            } else {
                s.clone()
            };
            let header = header_of(&frame);
            assert!(
                header.contains(&format!("\"dtype\":\"{written}\"")),
                "{s}: {header}"
            );
            assert_eq!(decoded.as_array().unwrap().dtype(), dtype, "{s}");
            assert_eq!(decoded.as_array().unwrap().shape(), &shape[..], "{s}");
        }
    }
}

#[test]
fn one_byte_types_read_with_any_marker_are_the_same_dtype() {
    for kind in ['b', 'i', 'u'] {
        let values: Vec<Value> = ['<', '>', '|']
            .iter()
            .map(|m| {
                let header = format!(
                    r#"{{"t":"array","dtype":"{m}{kind}1","shape":[2],"offset":0,"length":2}}"#
                );
                Codec::default().decode(frame(&header, &[1, 0])).unwrap()
            })
            .collect();
        assert_same(&values[0], &values[1]);
        assert_same(&values[0], &values[2]);
    }
}

#[test]
fn byte_order_is_kept_and_values_read_correctly() {
    let le = arr(&[3], vec![1.5f32, -2.0, 1e-3]);
    let be = support::big(le.clone());
    assert_ne!(le.as_bytes(), be.as_bytes());
    let (_, d) = round_trip(&Value::Array(be.clone()));
    let d = d.as_array().unwrap();
    assert_eq!(d.dtype().byte_order(), Some(ByteOrder::Big));
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 1e-3]);
    let c = support::big(arr(&[1], vec![Complex::new(1.25f64, -4.5)]));
    let (_, d) = round_trip(&Value::Array(c));
    assert_eq!(
        d.as_array().unwrap().to_vec::<Complex<f64>>().unwrap(),
        vec![Complex::new(1.25, -4.5)]
    );
}

#[test]
fn scalar_shape_arrays_round_trip_for_every_element_type() {
    let values: Vec<Value> = vec![
        NdArray::scalar(true).into(),
        NdArray::scalar(-5i8).into(),
        NdArray::scalar(-300i16).into(),
        NdArray::scalar(-70000i32).into(),
        NdArray::scalar(i64::MIN).into(),
        NdArray::scalar(200u8).into(),
        NdArray::scalar(60000u16).into(),
        NdArray::scalar(u32::MAX).into(),
        NdArray::scalar(u64::MAX).into(),
        NdArray::scalar(f16::from_f32(0.25)).into(),
        NdArray::scalar(1.5f32).into(),
        NdArray::scalar(-0.0f64).into(),
        NdArray::scalar(Complex::new(1.0f32, 2.0)).into(),
        NdArray::scalar(Complex::new(-1.0f64, 0.5)).into(),
    ];
    for v in values {
        let (frame, d) = round_trip(&v);
        assert!(header_of(&frame).contains(r#""shape":[]"#));
        assert_eq!(d.as_array().unwrap().ndim(), 0);
        assert_eq!(d.as_array().unwrap().len(), 1);
    }
}

#[test]
fn zero_size_shapes_round_trip() {
    for shape in [
        vec![0],
        vec![3, 0],
        vec![0, 5, 7],
        vec![2, 0, 0, 4],
        vec![0; 32],
    ] {
        let a = NdArray::zeros(DType::F64, shape.clone()).unwrap();
        let (frame, d) = round_trip(&Value::Array(a));
        assert!(header_of(&frame).ends_with(r#""offset":0,"length":0}"#));
        assert_eq!(d.as_array().unwrap().shape(), &shape[..]);
        assert_eq!(frame.len(), 4 + header_of(&frame).len());
    }
    // A zero dimension makes the others free, up to the i64 range.
    let a = NdArray::zeros(DType::U8, vec![0, i64::MAX as usize]).unwrap();
    let (frame, _) = round_trip(&Value::Array(a));
    assert!(header_of(&frame).contains(&format!("[0,{}]", i64::MAX)));
}

#[test]
fn thirty_two_dimensions_round_trip() {
    let mut shape = vec![1usize; 29];
    shape.extend([2, 3, 2]);
    assert_eq!(shape.len(), 32);
    let a = arr(&shape, (0..12).collect::<Vec<i32>>());
    let (_, d) = round_trip(&Value::Array(a));
    assert_eq!(d.as_array().unwrap().ndim(), 32);
    let o = ObjectArray::new(vec![1; 32], vec![Value::Int(1)]).unwrap();
    round_trip(&Value::ObjectArray(o));
}

#[test]
fn non_finite_floats_inside_arrays_travel_unchanged() {
    let f64s = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        f64::from_bits(0x7FF0_0000_0000_0001),
    ];
    let f32s = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        f32::from_bits(0x7F80_0001),
    ];
    let arrays = [
        arr(&[6], f64s.to_vec()),
        support::big(arr(&[6], f64s.to_vec())),
        arr(&[5], f32s.to_vec()),
        support::big(arr(&[5], f32s.to_vec())),
        arr(&[3], vec![f16::NAN, f16::INFINITY, f16::from_bits(0x7C01)]),
        arr(
            &[2],
            vec![
                Complex::new(f32::NAN, f32::INFINITY),
                Complex::new(-0.0, f32::NEG_INFINITY),
            ],
        ),
        arr(&[1], vec![Complex::new(f64::NEG_INFINITY, f64::NAN)]),
    ];
    for a in arrays {
        let (frame, d) = round_trip(&Value::Array(a.clone()));
        assert!(
            !header_of(&frame).contains("float"),
            "arrays carry raw IEEE bytes"
        );
        assert_eq!(d.as_array().unwrap().as_bytes(), a.as_bytes());
    }
}

#[test]
fn non_finite_scalars_use_the_float_tag() {
    for (f, text) in [
        (f64::NAN, "nan"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
    ] {
        let (frame, d) = round_trip(&Value::Float(f));
        assert_eq!(
            header_of(&frame),
            format!(r#"{{"t":"float","v":"{text}"}}"#)
        );
        let d = d.as_f64().unwrap();
        assert!(d.is_nan() == f.is_nan() && (f.is_nan() || d == f));
    }
    let (frame, d) = round_trip(&Value::Float(-0.0));
    assert_eq!(header_of(&frame), "-0.0");
    assert!(d.as_f64().unwrap().is_sign_negative());
    for (f, text) in [
        (1.0, "1.0"),
        (1e16, "1e+16"),
        (1e-5, "1e-05"),
        (0.1, "0.1"),
        (5e-324, "5e-324"),
    ] {
        let (frame, _) = round_trip(&Value::Float(f));
        assert_eq!(header_of(&frame), text);
    }
}

#[test]
fn integers_at_the_64_bit_edges_round_trip_exactly() {
    let cases = [
        (Value::Int(i64::MIN), "-9223372036854775808"),
        (Value::Int(i64::MAX), "9223372036854775807"),
        (Value::UInt(i64::MAX as u64 + 1), "9223372036854775808"),
        (Value::UInt(u64::MAX), "18446744073709551615"),
        (Value::Int(0), "0"),
        (Value::Int(-1), "-1"),
        (Value::Int(1_800_000_000_000_000_123), "1800000000000000123"),
    ];
    for (v, text) in cases {
        let (frame, d) = round_trip(&v);
        assert_eq!(header_of(&frame), text);
        // Integers in the i64 range always decode as Int, larger ones as UInt.
        assert_eq!(
            matches!(d, Value::Int(_)),
            text.parse::<i64>().is_ok(),
            "{text}"
        );
    }
    // Integer tokens are never floats, and `-0` is the integer 0.
    let d = Codec::default().decode(frame("-0", b"")).unwrap();
    assert_same(&Value::Int(0), &d);
}

#[test]
fn containers_round_trip_keeping_kind_and_order() {
    let empty_list = Value::list(Vec::<Value>::new());
    let empty_tuple = Value::tuple(Vec::<Value>::new());
    let d = dict! { "zeta" => 1, "alpha" => 2, "mid" => (3, "x"), "" => Dict::new() };
    let tree = Value::from(dict! {
        "list" => Value::list([Value::Int(1), Value::Float(2.0), Value::Null, Value::Bool(true)]),
        "tuple" => (1, (2, (3,)), empty_tuple.clone()),
        "empties" => Value::list([empty_list, empty_tuple, Value::from(Dict::new())]),
        "ordered" => d.clone(),
        "nested" => Value::list([Value::list([Value::list([Value::from(d)])])]),
    });
    let (frame, decoded) = round_trip(&tree);
    let keys: Vec<&str> = decoded
        .get("ordered")
        .unwrap()
        .as_dict()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["zeta", "alpha", "mid", ""]);
    assert!(header_of(&frame)
        .starts_with(r#"{"t":"dict","v":[["list",{"t":"list","v":[1,2.0,null,true]}]"#));
    assert!(matches!(decoded.get("tuple"), Some(Value::Tuple(_))));
}

#[test]
fn object_arrays_of_several_shapes_round_trip() {
    let item =
        |i: i64| Value::from(dict! { "i" => i, "a" => arr(&[2], vec![i as f32, -(i as f32)]) });
    let shapes: [(&[usize], usize); 6] = [
        (&[], 1),
        (&[0], 0),
        (&[3], 3),
        (&[2, 3], 6),
        (&[1, 1, 1], 1),
        (&[2, 0, 5], 0),
    ];
    for (shape, n) in shapes {
        let o = ObjectArray::new(shape.to_vec(), (0..n as i64).map(item).collect()).unwrap();
        let (frame, d) = round_trip(&Value::ObjectArray(o));
        assert!(header_of(&frame)
            .starts_with(&format!(r#"{{"t":"object_array","shape":{shape:?}"#).replace(' ', "")));
        assert!(matches!(d, Value::ObjectArray(_)));
    }
    // Elements of any kind, including nested object arrays and graphs.
    let inner = ObjectArray::new(vec![2], vec![Value::Null, Value::bytes(&b"x"[..])]).unwrap();
    let g = Graph {
        n_nodes: NdArray::scalar(2i64).into(),
        ..Graph::default()
    };
    let mixed = ObjectArray::new(
        vec![2, 2],
        vec![
            inner.into(),
            g.into(),
            Value::Float(f64::NAN),
            Value::tuple(["a", "b"]),
        ],
    )
    .unwrap();
    round_trip(&Value::ObjectArray(mixed));
}

#[test]
fn graphs_round_trip() {
    let full = Graph {
        n_nodes: arr(&[2], vec![3i64, 2]).into(),
        n_edges: arr(&[2], vec![2i64, 1]).into(),
        nodes_features: arr(&[2, 3, 1], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).into(),
        edges_features: arr(&[2, 2, 1], vec![0.5f64, 1.5, 2.5, 3.5]).into(),
        edges: arr(&[2, 2, 2], vec![0i64, 1, 1, 2, 0, 1, 0, 0]).into(),
    };
    let (frame, _) = round_trip(&full.clone().into());
    let header = header_of(&frame);
    assert!(
        header.starts_with(r#"{"t":"graph","v":{"t":"dict","v":[["n_nodes","#),
        "{header}"
    );
    let fields: Vec<usize> = Graph::FIELDS
        .iter()
        .map(|f| header.find(&format!("[\"{f}\",")).unwrap())
        .collect();
    assert!(
        fields.windows(2).all(|w| w[0] < w[1]),
        "fields in wire order"
    );
    let sparse = Graph {
        n_nodes: NdArray::scalar(1i64).into(),
        ..Graph::default()
    };
    round_trip(&Value::list([Value::from(full), sparse.into()]));
}

#[test]
fn strings_with_escapes_and_non_bmp_characters_round_trip() {
    let cases = [
        ("", r#""""#),
        ("plain", r#""plain""#),
        ("q\"b\\s/", r#""q\"b\\s/""#),
        ("\n\r\t\u{8}\u{c}", r#""\n\r\t\b\f""#),
        ("\0\u{1}\u{1f}\u{7f}", r#""\u0000\u0001\u001f\u007f""#),
        ("é日", r#""\u00e9\u65e5""#),
        ("\u{1F600}", r#""\ud83d\ude00""#),
        ("\u{10000}\u{10FFFF}", r#""\ud800\udc00\udbff\udfff""#),
        ("\u{2028}\u{feff}\u{ffff}", r#""\u2028\ufeff\uffff""#),
    ];
    for (s, json) in cases {
        let (frame, _) = round_trip(&Value::from(s));
        assert_eq!(header_of(&frame), json, "{s:?}");
        // Dict keys are written the same way.
        let (frame, _) = round_trip(&dict! { s => 1 }.into());
        assert_eq!(
            header_of(&frame),
            format!(r#"{{"t":"dict","v":[[{json},1]]}}"#)
        );
    }
}

#[test]
fn strings_python_would_not_write_still_decode() {
    let codec = Codec::default();
    let cases = [
        (r#""\u00E9\u00e9""#, "éé"),
        (r#""\/""#, "/"),
        (r#""\uD83D\uDE00""#, "\u{1F600}"),
        ("\"raw é 日 \u{1F600}\"", "raw é 日 \u{1F600}"),
        ("\"\u{7f}\"", "\u{7f}"),
    ];
    for (json, s) in cases {
        assert_same(&Value::from(s), &codec.decode(frame(json, b"")).unwrap());
    }
}

#[test]
fn whitespace_and_member_order_do_not_matter() {
    let codec = Codec::default();
    // Python's json.dumps default separators, newlines, and tags after other members.
    let spaced = "{\"t\": \"dict\", \"v\": [[\"a\", {\"t\": \"list\", \"v\": [1, 2.5]}]]}";
    assert_same(
        &dict! { "a" => Value::list([Value::Int(1), Value::Float(2.5)]) }.into(),
        &codec.decode(frame(spaced, b"")).unwrap(),
    );
    let newlines = " \n\t{\r\n\"v\" : [ ] ,\n \"t\" : \"tuple\" } \n";
    assert_same(
        &Value::tuple(Vec::<Value>::new()),
        &codec.decode(frame(newlines, b"")).unwrap(),
    );
    let reordered = r#"{"length":8,"shape":[2],"offset":0,"dtype":"<f4","t":"array"}"#;
    let data = [1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat();
    assert_same(
        &arr(&[2], vec![1.0f32, 2.0]).into(),
        &codec.decode(frame(reordered, &data)).unwrap(),
    );
    // A `v` before its tag is parsed once the tag is known; attachments inside
    // it still come in traversal order relative to later siblings.
    let deferred = r#"{"t":"list","v":[{"v":[{"t":"bytes","offset":0,"length":1}],"t":"tuple"},{"t":"bytes","offset":1,"length":2}]}"#;
    let expected = Value::list([
        Value::tuple([Value::bytes(&b"a"[..])]),
        Value::bytes(&b"bc"[..]),
    ]);
    assert_same(&expected, &codec.decode(frame(deferred, b"abc")).unwrap());
    let graph_first = r#"{"v":{"t":"dict","v":[["n_nodes",1],["n_edges",null],["nodes_features",null],["edges_features",null],["edges",null]]},"t":"graph"}"#;
    let g = Graph {
        n_nodes: Value::Int(1),
        ..Graph::default()
    };
    assert_same(&g.into(), &codec.decode(frame(graph_first, b"")).unwrap());
    // Graph fields may arrive in any order.
    let shuffled = r#"{"t":"graph","v":{"t":"dict","v":[["edges",null],["n_edges",null],["nodes_features",null],["edges_features",null],["n_nodes",7]]}}"#;
    let d = codec.decode(frame(shuffled, b"")).unwrap();
    let Value::Graph(g) = d else { panic!("{d:?}") };
    assert_same(&Value::Int(7), &g.n_nodes);
}

#[test]
fn bytes_empty_and_large_round_trip_without_copies() {
    let large: Vec<u8> = pattern(3 * 1024 * 1024 + 7, 11);
    let tree = Value::list([
        Value::bytes(Bytes::new()),
        Value::bytes(Bytes::from(large.clone())),
        Value::bytes(&b"\0\xff"[..]),
        Value::bytes(Bytes::new()),
    ]);
    let (frame, d) = round_trip(&tree);
    assert_eq!(frame.len(), 4 + header_of(&frame).len() + large.len() + 2);
    let items = d.as_seq().unwrap();
    assert!(points_inside(items[1].as_bytes().unwrap(), &frame));
    assert!(points_inside(items[2].as_bytes().unwrap(), &frame));
    assert!(header_of(&frame).contains(&format!(
        r#"{{"t":"bytes","offset":{},"length":2}}"#,
        large.len()
    )));
}

#[test]
fn decoded_arrays_point_into_the_received_frame() {
    let image = arr(&[84, 84, 3], pattern(84 * 84 * 3, 1));
    let state = arr(&[32], (0..32).map(|i| i as f32).collect::<Vec<_>>());
    let nested = ObjectArray::new(vec![1], vec![dict! { "s" => state.clone() }.into()]).unwrap();
    let g = Graph {
        n_nodes: arr(&[1], vec![3i64]).into(),
        ..Graph::default()
    };
    let tree = Value::from((
        dict! { "image" => image, "state" => state },
        nested,
        g,
        Value::bytes(&b"x"[..]),
    ));
    let codec = Codec::default();
    let frame = Bytes::from(codec.encode(&tree).unwrap());
    let d = codec.decode(frame.clone()).unwrap();
    let parts = d.as_seq().unwrap();
    let obs = parts[0].as_dict().unwrap();
    let image = obs.get("image").unwrap().as_array().unwrap();
    assert!(points_inside(image.as_bytes(), &frame));
    assert!(points_inside(
        obs.get("state").unwrap().as_array().unwrap().as_bytes(),
        &frame
    ));
    let Value::ObjectArray(o) = &parts[1] else {
        panic!()
    };
    assert!(points_inside(
        o.values()[0]
            .get("s")
            .unwrap()
            .as_array()
            .unwrap()
            .as_bytes(),
        &frame
    ));
    let Value::Graph(g) = &parts[2] else { panic!() };
    assert!(points_inside(
        g.n_nodes.as_array().unwrap().as_bytes(),
        &frame
    ));
    // The slices are the attachments themselves: the image is the first one,
    // right after the header.
    let header_len = header_of(&frame).len();
    assert_eq!(image.as_bytes().as_ptr(), frame[4 + header_len..].as_ptr());
    // They keep the frame alive after it is dropped here.
    let kept = image.clone();
    drop((d, frame));
    assert_eq!(kept.as_bytes()[..4], pattern(4, 1)[..]);
}

#[test]
fn messages_exactly_at_the_limit_are_accepted() {
    let value = Value::bytes(vec![7u8; 100]);
    let size = Codec::default().encode(&value).unwrap().len();
    let codec = Codec::new(size).unwrap();
    let frame = Bytes::from(codec.encode(&value).unwrap());
    assert_eq!(frame.len(), size);
    assert_same(&value, &codec.decode(frame).unwrap());
    // A limit below the minimum is an error naming both, never the default.
    assert_eq!(
        Codec::new(7),
        Err(CodecError::LimitTooSmall { limit: 7, min: 8 })
    );
    assert_eq!(Codec::new(8).unwrap().max_message_size(), 8);
    assert_eq!(Codec::default().max_message_size(), 64 * 1024 * 1024);
}

#[test]
fn the_deepest_allowed_tree_round_trips() {
    // Root at depth 0; the leaf at depth MAX_DEPTH is still allowed.
    let mut v = Value::Float(f64::NAN);
    for _ in 0..MAX_DEPTH {
        v = Value::List(vec![v]);
    }
    round_trip(&v);
    // A graph uses two levels: the graph node and its dict.
    let mut g = Value::from(Graph::default());
    for _ in 0..MAX_DEPTH - 2 {
        g = Value::Tuple(vec![g]);
    }
    round_trip(&g);
}

#[test]
fn inspect_helpers_show_the_header() {
    let tree = Value::from(dict! { "x" => arr(&[2], vec![1u16, 2]), "s" => "é" });
    let frame = Codec::default().encode(&tree).unwrap();
    let header = envelope_header(&frame).unwrap();
    assert_eq!(header, header_json(&tree).unwrap());
    assert_eq!(
        header,
        r#"{"t":"dict","v":[["x",{"t":"array","dtype":"<u2","shape":[2],"offset":0,"length":4}],["s","\u00e9"]]}"#
    );
    assert!(matches!(
        envelope_header(&[0, 0, 0]),
        Err(CodecError::TooShort { len: 3 })
    ));
    assert!(matches!(
        envelope_header(&[0, 0, 0, 9, b'1']),
        Err(CodecError::HeaderLength {
            header_len: 9,
            available: 1
        })
    ));
    assert!(matches!(
        envelope_header(&[0, 0, 0, 2, b'"', 0xff]),
        Err(CodecError::Utf8 { offset: 1 })
    ));
    // header_json has no size limit and writes the offsets encode would.
    let big = Value::list([Value::bytes(vec![0u8; 10]), Value::bytes(vec![0u8; 5])]);
    assert_eq!(
        header_json(&big).unwrap(),
        r#"{"t":"list","v":[{"t":"bytes","offset":0,"length":10},{"t":"bytes","offset":10,"length":5}]}"#
    );
}
