//! Helpers shared by the codec integration tests (`tests/codec_*.rs`).
#![allow(dead_code)]

use bytes::Bytes;
use unienv_remote::codec::ByteOrder;
use unienv_remote::{Element, NdArray, ScalarKind, Value};

/// An envelope from a header text and the attachment section.
pub fn frame(header: &str, attachments: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(4 + header.len() + attachments.len());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(attachments);
    Bytes::from(out)
}

/// The JSON header of an envelope, as text.
pub fn header_of(frame: &[u8]) -> &str {
    unienv_remote::codec::envelope_header(frame).unwrap()
}

/// A C-order array of the given shape.
pub fn arr<T: Element>(shape: &[usize], values: Vec<T>) -> NdArray {
    NdArray::from_shape_vec(shape.to_vec(), values).unwrap()
}

/// The same array with its bytes in the given order.
pub fn with_order(a: NdArray, order: ByteOrder) -> NdArray {
    let dtype = a.dtype();
    if dtype.byte_order().is_none_or(|o| o == order) {
        return a;
    }
    let unit = match dtype.kind() {
        ScalarKind::Complex => dtype.itemsize() / 2,
        _ => dtype.itemsize(),
    };
    let mut bytes = a.as_bytes().to_vec();
    for chunk in bytes.chunks_exact_mut(unit) {
        chunk.reverse();
    }
    NdArray::from_bytes(
        dtype.with_byte_order(order),
        a.shape().to_vec(),
        Bytes::from(bytes),
    )
    .unwrap()
}

/// The same array, big-endian.
pub fn big(a: NdArray) -> NdArray {
    with_order(a, ByteOrder::Big)
}

/// The same array, little-endian.
pub fn little(a: NdArray) -> NdArray {
    with_order(a, ByteOrder::Little)
}

/// Checks that two trees are identical, more strictly than `==`: floats are
/// compared bit for bit (any NaN equals any NaN, but `-0.0` differs from
/// `0.0`), and `Int` / `UInt` must be the same variant. Returns where they
/// first differ.
pub fn same(expected: &Value, actual: &Value) -> Result<(), String> {
    same_at(expected, actual, &mut String::from("$"))
}

/// Panics with the path of the first difference (see [`same`]).
#[track_caller]
pub fn assert_same(expected: &Value, actual: &Value) {
    if let Err(e) = same(expected, actual) {
        panic!("{e}");
    }
}

fn same_at(e: &Value, a: &Value, path: &mut String) -> Result<(), String> {
    let fail = |path: &str, what: String| Err(format!("at {path}: {what}"));
    match (e, a) {
        (Value::Null, Value::Null) => Ok(()),
        (Value::Bool(x), Value::Bool(y)) if x == y => Ok(()),
        (Value::Int(x), Value::Int(y)) if x == y => Ok(()),
        (Value::UInt(x), Value::UInt(y)) if x == y => Ok(()),
        (Value::BigInt(x), Value::BigInt(y)) if x == y => Ok(()),
        (Value::Float(x), Value::Float(y)) => {
            if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) {
                Ok(())
            } else {
                fail(path, format!("expected float {x:?}, got {y:?}"))
            }
        }
        (Value::Str(x), Value::Str(y)) if x == y => Ok(()),
        (Value::Bytes(x), Value::Bytes(y)) if x == y => Ok(()),
        (Value::Array(x), Value::Array(y)) => {
            if x.dtype() != y.dtype() || x.shape() != y.shape() || x.as_bytes() != y.as_bytes() {
                fail(path, format!("expected {x:?}, got {y:?}"))
            } else {
                Ok(())
            }
        }
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => seq_at(x, y, path),
        (Value::Dict(x), Value::Dict(y)) => {
            let ek: Vec<&str> = x.keys().collect();
            let ak: Vec<&str> = y.keys().collect();
            if ek != ak {
                return fail(path, format!("expected keys {ek:?}, got {ak:?}"));
            }
            for ((k, ev), (_, av)) in x.iter().zip(y.iter()) {
                let len = path.len();
                path.push_str(&format!("[{k:?}]"));
                same_at(ev, av, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::ObjectArray(x), Value::ObjectArray(y)) => {
            if x.shape() != y.shape() {
                return fail(
                    path,
                    format!(
                        "expected object_array shape {:?}, got {:?}",
                        x.shape(),
                        y.shape()
                    ),
                );
            }
            seq_at(x.values(), y.values(), path)
        }
        (Value::Graph(x), Value::Graph(y)) => {
            for ((k, ev), (_, av)) in x.fields().iter().zip(y.fields().iter()) {
                let len = path.len();
                path.push_str(&format!(".{k}"));
                same_at(ev, av, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        _ => fail(path, format!("expected {e:?}, got {a:?}")),
    }
}

fn seq_at(x: &[Value], y: &[Value], path: &mut String) -> Result<(), String> {
    if x.len() != y.len() {
        return Err(format!(
            "at {path}: expected {} items, got {}",
            x.len(),
            y.len()
        ));
    }
    for (i, (ev, av)) in x.iter().zip(y).enumerate() {
        let len = path.len();
        path.push_str(&format!("[{i}]"));
        same_at(ev, av, path)?;
        path.truncate(len);
    }
    Ok(())
}

/// SplitMix64, as in tests/py/golden_cases.py.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Whether `inner` lies entirely inside `outer` (pointer ranges).
pub fn points_inside(inner: &[u8], outer: &[u8]) -> bool {
    let o = outer.as_ptr_range();
    let i = inner.as_ptr_range();
    o.start <= i.start && i.end <= o.end
}
