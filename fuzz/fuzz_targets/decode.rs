//! Envelope decoding on arbitrary bytes.
//!
//! - `Codec::decode` never panics, whatever the input;
//! - whatever decodes re-encodes, and the re-encoded frame decodes to the
//!   same tree (floats compared bit for bit, NaN equal to NaN, `Int` and
//!   `UInt` distinct);
//! - our encoding is canonical: encoding the re-decoded tree gives the same
//!   bytes again;
//! - every decoded array's typed accessors (which use `unsafe` for views and
//!   copies) agree with each other for every element type: `view`, `to_vec`,
//!   `as_cow`, `to_native().view`, `get_f64`, `format_element`.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use unienv_remote::codec::{Element, NdArray};
use unienv_remote::{Codec, Value};
use unienv_remote_fuzz::same;

/// The decoding limit: small enough that the size checks are reachable.
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let codec = Codec::new(LIMIT).expect("limit");
    let Ok(value) = codec.decode(Bytes::copy_from_slice(data)) else {
        return;
    };
    // The re-encoding may be longer than the input (`\u` escapes, `1.0`
    // for `1e0`), so it is written without a practical limit.
    let wide = Codec::new(usize::MAX).expect("limit");
    let encoded = wide
        .encode(&value)
        .unwrap_or_else(|e| panic!("a decoded tree must re-encode: {e}\n{value:?}"));
    let again = wide
        .decode(Bytes::from(encoded.clone()))
        .unwrap_or_else(|e| panic!("our own encoding must decode: {e}\n{value:?}"));
    if let Err(path) = same(&value, &again, "$") {
        panic!("round trip changed the tree at {path}:\n{value:?}\n{again:?}");
    }
    let canonical = wide.encode(&again).expect("re-encode");
    assert_eq!(encoded, canonical, "the encoding is not canonical");
    visit_arrays(&value);
});

fn visit_arrays(v: &Value) {
    match v {
        Value::Array(a) => exercise(a),
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(visit_arrays),
        Value::Dict(d) => d.values().for_each(visit_arrays),
        Value::ObjectArray(o) => o.values().iter().for_each(visit_arrays),
        Value::Graph(g) => g.fields().iter().for_each(|(_, v)| visit_arrays(v)),
        _ => {}
    }
}

/// The typed accessors of one array, for every element type.
fn exercise(a: &NdArray) {
    use num_complex::Complex;
    typed::<bool>(a);
    typed::<i8>(a);
    typed::<i16>(a);
    typed::<i32>(a);
    typed::<i64>(a);
    typed::<u8>(a);
    typed::<u16>(a);
    typed::<u32>(a);
    typed::<u64>(a);
    typed::<half::f16>(a);
    typed::<f32>(a);
    typed::<f64>(a);
    typed::<Complex<f32>>(a);
    typed::<Complex<f64>>(a);
    let flat = a.to_f64_vec();
    assert!(flat.len() <= a.len());
    for i in 0..a.len().min(64) {
        assert_eq!(a.get_f64(i).is_some(), a.format_element(i).is_some());
    }
    assert!(a.get_f64(a.len()).is_none());
}

fn typed<T: Element>(a: &NdArray) {
    let debug = |items: &mut dyn Iterator<Item = T>| -> Vec<String> {
        items.map(|x| format!("{x:?}")).collect()
    };
    let Ok(copy) = a.to_vec::<T>() else {
        assert!(a.view::<T>().is_err(), "a view where to_vec fails");
        return;
    };
    assert_eq!(copy.len(), a.len());
    let expected = debug(&mut copy.iter().copied());
    if let Ok(view) = a.view::<T>() {
        assert_eq!(debug(&mut view.iter().copied()), expected, "view / to_vec");
        assert_eq!(view.shape(), a.shape());
    }
    let cow = a.as_cow::<T>().expect("as_cow where to_vec works");
    assert_eq!(debug(&mut cow.iter().copied()), expected, "as_cow / to_vec");
    let native = a.to_native();
    assert_eq!(
        native.to_vec::<T>().map(|v| debug(&mut v.into_iter())).ok(),
        Some(expected)
    );
}
