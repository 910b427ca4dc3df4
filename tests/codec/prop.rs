//! Property tests: arbitrary value trees round-trip exactly; arbitrary bytes,
//! token soups and mutated valid envelopes never panic, and whatever decodes
//! re-encodes to a frame that decodes to the same tree.

use crate::support;

use bytes::Bytes;
use proptest::prelude::*;
use support::same;
use unienv_remote::codec::{envelope_header, header_json, MAX_DIMS};
use unienv_remote::{Codec, DType, Dict, Graph, NdArray, ObjectArray, Value};

const DTYPES: [&str; 31] = [
    "|b1", "|i1", "|u1", "<b1", ">i1", "<u1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "<u2",
    ">u2", "<u4", ">u4", "<u8", ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8",
    "<c16", ">c16", ">b1", "|b1", "|u1",
];

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        any::<u64>().prop_map(f64::from_bits),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(1e16),
        Just(1e-5),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..8).prop_map(String::from_iter)
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        4 => prop::collection::vec(0usize..4, 0..4),
        1 => (28usize..=MAX_DIMS).prop_map(|n| vec![1; n]),
    ]
}

fn array() -> impl Strategy<Value = NdArray> {
    (prop::sample::select(&DTYPES[..]), shape())
        .prop_flat_map(|(dtype, shape)| {
            let dtype = DType::parse(dtype).unwrap();
            let n = shape.iter().product::<usize>() * dtype.itemsize();
            (
                Just(dtype),
                Just(shape),
                prop::collection::vec(any::<u8>(), n),
            )
        })
        .prop_map(|(dtype, shape, data)| {
            NdArray::from_bytes(dtype, shape, Bytes::from(data)).unwrap()
        })
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(Value::UInt),
        float().prop_map(Value::Float),
        string().prop_map(Value::Str),
        prop::collection::vec(any::<u8>(), 0..24).prop_map(Value::bytes),
        array().prop_map(Value::Array),
    ]
}

fn object_array(items: Vec<Value>, layout: u8) -> Value {
    let n = items.len();
    let shape = match layout % 4 {
        0 => vec![n],
        1 => vec![1, n],
        2 => vec![n, 1],
        _ if n == 1 => vec![],
        _ => vec![n, 1, 1],
    };
    Value::ObjectArray(ObjectArray::new(shape, items).unwrap())
}

fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Tuple),
            prop::collection::vec((string(), inner.clone()), 0..6)
                .prop_map(|entries| Value::Dict(entries.into_iter().collect::<Dict>())),
            (prop::collection::vec(inner.clone(), 0..5), any::<u8>())
                .prop_map(|(v, l)| object_array(v, l)),
            (
                inner.clone(),
                inner.clone(),
                inner.clone(),
                inner.clone(),
                inner
            )
                .prop_map(|(a, b, c, d, e)| {
                    Value::from(Graph {
                        n_nodes: a,
                        n_edges: b,
                        nodes_features: c,
                        edges_features: d,
                        edges: e,
                    })
                }),
        ]
    })
}

/// A frame whose 4-byte prefix matches its header.
fn framed(header: &[u8], attachments: &[u8]) -> Bytes {
    let mut out = (header.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(header);
    out.extend_from_slice(attachments);
    Bytes::from(out)
}

/// Decoding never panics; anything it accepts encodes again and decodes to
/// the same tree (the encoder accepts everything the decoder does).
fn decode_is_total(frame: Bytes) -> Result<(), TestCaseError> {
    let codec = Codec::default();
    if let Ok(value) = codec.decode(frame) {
        let again = codec.encode(&value);
        prop_assert!(
            again.is_ok(),
            "decoded {value:?} but cannot encode it: {:?}",
            again.err()
        );
        let back = codec.decode(Bytes::from(again.unwrap()));
        prop_assert!(
            back.is_ok(),
            "re-encoded {value:?} does not decode: {:?}",
            back.err()
        );
        if let Err(e) = same(&value, &back.unwrap()) {
            return Err(TestCaseError::fail(e));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    /// Replaces the n-th digit with another digit: still JSON, often still valid.
    Digit(usize, u8),
    /// Swaps the n-th of `"list"`/`"tuple"`/`true`/`false` for its partner.
    Swap(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (
            any::<usize>(),
            prop::sample::select(&b"{}[],:\"0-9eE.tfn\\uNI "[..])
        )
            .prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), b'0'..=b'9').prop_map(|(i, d)| Mutation::Digit(i, d)),
        any::<usize>().prop_map(Mutation::Swap),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match *m {
        Mutation::Flip(i, bit) if len > 0 => bytes[i % len] ^= 1 << bit,
        Mutation::Set(i, b) if len > 0 => bytes[i % len] = b,
        Mutation::Insert(i, b) => bytes.insert(i % (len + 1), b),
        Mutation::Delete(i) if len > 0 => {
            bytes.remove(i % len);
        }
        Mutation::Truncate(i) => bytes.truncate(i % (len + 1)),
        Mutation::Digit(i, d) => {
            let digits: Vec<usize> = (0..len).filter(|&j| bytes[j].is_ascii_digit()).collect();
            if !digits.is_empty() {
                bytes[digits[i % digits.len()]] = d;
            }
        }
        Mutation::Swap(i) => {
            const PAIRS: [(&[u8], &[u8]); 4] = [
                (b"\"list\"", b"\"tuple\""),
                (b"\"tuple\"", b"\"list\""),
                (b"true", b"false"),
                (b"false", b"true"),
            ];
            let mut found: Vec<(usize, &[u8], &[u8])> = Vec::new();
            for j in 0..len {
                for (from, to) in PAIRS {
                    if bytes[j..].starts_with(from) {
                        found.push((j, from, to));
                    }
                }
            }
            if !found.is_empty() {
                let (at, from, to) = found[i % found.len()];
                bytes.splice(at..at + from.len(), to.iter().copied());
            }
        }
        _ => {}
    }
}

const TOKENS: [&str; 40] = [
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"t\"",
    "\"v\"",
    "\"list\"",
    "\"tuple\"",
    "\"dict\"",
    "\"array\"",
    "\"bytes\"",
    "\"float\"",
    "\"graph\"",
    "\"object_array\"",
    "\"offset\"",
    "\"length\"",
    "\"shape\"",
    "\"dtype\"",
    "\"<f4\"",
    "\"|u1\"",
    "\"nan\"",
    "\"n_nodes\"",
    "0",
    "1",
    "2",
    "4",
    "-1",
    "1.5",
    "1e400",
    "18446744073709551616",
    "null",
    "true",
    "\"x\"",
    "\"\\ud800\"",
    "NaN",
    "-Infinity",
    " ",
    "\"\\u00e9\"",
];

proptest! {
    #[test]
    fn any_tree_round_trips_exactly(value in tree()) {
        let codec = Codec::default();
        let frame = Bytes::from(codec.encode(&value).unwrap());
        let decoded = codec.decode(frame.clone()).unwrap();
        if let Err(e) = same(&value, &decoded) {
            return Err(TestCaseError::fail(e));
        }
        // Encoding is deterministic, and the inspect helper shows the header.
        prop_assert_eq!(&codec.encode(&decoded).unwrap()[..], &frame[..]);
        prop_assert_eq!(envelope_header(&frame).unwrap(), header_json(&value).unwrap());
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..96)) {
        decode_is_total(Bytes::from(data.clone()))?;
        // The same bytes as a header with a consistent length prefix.
        decode_is_total(framed(&data, b""))?;
    }

    #[test]
    fn token_soups_never_panic(
        tokens in prop::collection::vec(prop::sample::select(&TOKENS[..]), 0..48),
        attachments in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        decode_is_total(framed(tokens.concat().as_bytes(), &attachments))?;
    }

    #[test]
    fn mutated_envelopes_never_panic(
        value in tree(),
        mutations in prop::collection::vec(mutation(), 1..4),
        in_header in any::<bool>(),
    ) {
        let frame = Codec::default().encode(&value).unwrap();
        let header_len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        if in_header {
            // Mutate the JSON and keep the prefix consistent, so that the
            // parser sees the damage.
            let mut header = frame[4..4 + header_len].to_vec();
            mutations.iter().for_each(|m| apply(&mut header, m));
            decode_is_total(framed(&header, &frame[4 + header_len..]))?;
        } else {
            let mut bytes = frame;
            mutations.iter().for_each(|m| apply(&mut bytes, m));
            decode_is_total(Bytes::from(bytes))?;
        }
    }
}
