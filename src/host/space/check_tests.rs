//! The action check ([`Space::check`]) against the plain algorithm it
//! replaced (kept here verbatim as `reference`: every action's numbers copied
//! to a `Vec<f64>`, each bound read through the element's multi-index): the
//! same verdict and the same message, for every action and space below.

use super::*;
use crate::codec::{Dict, NdArray, ScalarKind, Value};
use crate::host::space::BoxSpace;
use bytes::Bytes;

fn reference(space: &Space, value: &Value, name: &str) -> Result<(), String> {
    match space {
        Space::Box(b) => ref_check_numeric(
            value,
            name,
            &b.shape,
            b.dtype,
            Some((&b.low, &b.high)),
            &space.to_string(),
        ),
        Space::Binary(b) => {
            ref_check_numeric(value, name, &b.shape, b.dtype, None, &space.to_string())
        }
        Space::Dict(d) => {
            let Value::Dict(v) = value else {
                return Err(format!(
                    "{name} must be a dict with keys {}, got {}",
                    keys_list(d.entries().iter().map(|(k, _)| k.as_str())),
                    value.type_name()
                ));
            };
            for (key, space) in d.entries() {
                let Some(item) = v.get(key) else {
                    return Err(format!("{name} is missing the key '{key}'"));
                };
                reference(space, item, &format!("{name}['{key}']"))?;
            }
            if let Some(extra) = v.keys().find(|k| d.get(k).is_none()) {
                return Err(format!(
                    "{name} has the unexpected key '{extra}' (the space has {})",
                    keys_list(d.entries().iter().map(|(k, _)| k.as_str()))
                ));
            }
            Ok(())
        }
        Space::Tuple(spaces) => {
            let items = match value {
                Value::Tuple(v) | Value::List(v) => v,
                other => {
                    return Err(format!(
                        "{name} must be a tuple of {} values, got {}",
                        spaces.len(),
                        other.type_name()
                    ))
                }
            };
            if items.len() != spaces.len() {
                return Err(format!(
                    "{name} must be a tuple of {} values, got {}",
                    spaces.len(),
                    items.len()
                ));
            }
            for (i, (space, item)) in spaces.iter().zip(items).enumerate() {
                reference(space, item, &format!("{name}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The numbers of an action value and its shape, when it is numeric.
fn ref_numbers(value: &Value) -> Option<(ScalarKind, Vec<usize>, Vec<f64>)> {
    match value {
        Value::Array(a) => {
            let kind = a.dtype().kind();
            if kind == ScalarKind::Complex {
                return Some((kind, a.shape().to_vec(), Vec::new()));
            }
            Some((kind, a.shape().to_vec(), a.to_f64_vec()))
        }
        Value::Bool(b) => Some((ScalarKind::Bool, Vec::new(), vec![f64::from(u8::from(*b))])),
        Value::Int(_) | Value::UInt(_) => {
            Some((ScalarKind::Int, Vec::new(), vec![value.as_f64()?]))
        }
        Value::Float(f) => Some((ScalarKind::Float, Vec::new(), vec![*f])),
        Value::List(items) | Value::Tuple(items) => {
            let mut kind = ScalarKind::Bool;
            let mut shape: Option<Vec<usize>> = None;
            let mut all = Vec::new();
            for item in items {
                let (k, s, v) = ref_numbers(item)?;
                if shape.as_ref().is_some_and(|shape| *shape != s) {
                    return None;
                }
                shape = Some(s);
                kind = match (kind, k) {
                    (ScalarKind::Complex, _) | (_, ScalarKind::Complex) => ScalarKind::Complex,
                    (ScalarKind::Float, _) | (_, ScalarKind::Float) => ScalarKind::Float,
                    (ScalarKind::Int | ScalarKind::UInt, _)
                    | (_, ScalarKind::Int | ScalarKind::UInt) => ScalarKind::Int,
                    _ => ScalarKind::Bool,
                };
                all.extend(v);
            }
            let mut full = vec![items.len()];
            full.extend(shape.unwrap_or_default());
            Some((kind, full, all))
        }
        _ => None,
    }
}

/// `[i, j]` of a flat C-order index.
fn ref_element_index(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for axis in (0..shape.len()).rev() {
        let d = shape[axis].max(1);
        index[axis] = flat % d;
        flat /= d;
    }
    index
}

/// The flat index into broadcast bounds of the element at `index`.
fn bound_at(bounds: &NdArray, index: &[usize]) -> Option<f64> {
    if bounds.len() == 1 {
        return bounds.get_f64(0);
    }
    let shape = bounds.shape();
    if shape.len() != index.len() {
        return None;
    }
    let mut flat = 0;
    for (axis, &i) in index.iter().enumerate() {
        let i = if shape[axis] == 1 { 0 } else { i };
        flat = flat * shape[axis] + i;
    }
    bounds.get_f64(flat)
}

fn ref_format_number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        format!("{x}")
    }
}

fn ref_check_numeric(
    value: &Value,
    name: &str,
    shape: &[usize],
    dtype: DType,
    bounds: Option<(&NdArray, &NdArray)>,
    space: &str,
) -> Result<(), String> {
    let Some((kind, got_shape, values)) = ref_numbers(value) else {
        return Err(format!(
            "{name} must be an array of shape {} and dtype {}, got {}",
            shape_text(shape),
            dtype.name(),
            value.type_name()
        ));
    };
    let want = dtype.kind();
    let fits = match want {
        ScalarKind::Float => matches!(kind, ScalarKind::Float | ScalarKind::Int | ScalarKind::UInt),
        ScalarKind::Int | ScalarKind::UInt => matches!(kind, ScalarKind::Int | ScalarKind::UInt),
        ScalarKind::Bool => kind == ScalarKind::Bool,
        ScalarKind::Complex => kind != ScalarKind::Bool,
    };
    let kind_name = |k: ScalarKind| match k {
        ScalarKind::Bool => "boolean",
        ScalarKind::Int | ScalarKind::UInt => "integer",
        ScalarKind::Float => "floating-point",
        ScalarKind::Complex => "complex",
    };
    if !fits {
        return Err(format!(
            "{name} has {} values but the action space {space} holds {} values (dtype {})",
            kind_name(kind),
            kind_name(want),
            dtype.name()
        ));
    }
    let scalar_ok = shape.is_empty() && values.len() == 1;
    if got_shape != shape && !scalar_ok {
        return Err(format!(
            "{name} has shape {} but the action space {space} has shape {}",
            shape_text(&got_shape),
            shape_text(shape)
        ));
    }
    if want == ScalarKind::Complex {
        return Ok(());
    }
    // Bounds of the action's own shape are read at the element's flat
    // index; others (broadcast) by its multi-index.
    let at = |bounds: &NdArray, flat: usize| {
        if bounds.shape() == shape {
            bounds.get_f64(flat)
        } else {
            bound_at(bounds, &ref_element_index(flat, shape))
        }
    };
    for (flat, &x) in values.iter().enumerate() {
        // Named only for a refusal: building it for every element was most
        // of an accepted action's check.
        let element = || {
            let index = ref_element_index(flat, shape);
            if index.is_empty() {
                name.to_string()
            } else {
                let parts: Vec<String> = index.iter().map(usize::to_string).collect();
                format!("{name}[{}]", parts.join(", "))
            }
        };
        if !x.is_finite() {
            return Err(format!(
                "{} is {}: actions must be finite numbers",
                element(),
                ref_format_number(x)
            ));
        }
        if let Some((low, high)) = bounds {
            if let Some(lo) = at(low, flat).filter(|lo| x < *lo) {
                return Err(format!(
                    "{} = {} is below the low bound {} of the action space",
                    element(),
                    ref_format_number(x),
                    ref_format_number(lo)
                ));
            }
            if let Some(hi) = at(high, flat).filter(|hi| x > *hi) {
                return Err(format!(
                    "{} = {} is above the high bound {} of the action space",
                    element(),
                    ref_format_number(x),
                    ref_format_number(hi)
                ));
            }
        }
    }
    Ok(())
}

/// A small deterministic generator (no dependency, the same cases every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[(self.next() as usize) % items.len()].clone()
    }
}

/// Numbers that sit on and around bounds, plus the non-finite ones.
const SPECIAL: [f64; 14] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    -2.0,
    f32::from_bits(0x4000_0001) as f64, // the f32 after 2.0
    f32::from_bits(0xc000_0001) as f64,
    3.0,
    4.0,
    7.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
];

/// An array of `dtype` (native or not, aligned or not) holding `values`
/// converted as NumPy's `astype` would for these numbers.
fn array(dtype: DType, shape: &[usize], values: &[f64], misaligned: bool) -> NdArray {
    let native = dtype.to_native();
    let mut bytes: Vec<u8> = Vec::new();
    for &x in values {
        let mut one: Vec<u8> = match (native.kind(), native.itemsize()) {
            (ScalarKind::Bool, _) => vec![u8::from(x != 0.0)],
            (ScalarKind::Int, 1) => (x as i8).to_ne_bytes().to_vec(),
            (ScalarKind::Int, 2) => (x as i16).to_ne_bytes().to_vec(),
            (ScalarKind::Int, 4) => (x as i32).to_ne_bytes().to_vec(),
            (ScalarKind::Int, _) => (x as i64).to_ne_bytes().to_vec(),
            (ScalarKind::UInt, 1) => (x as u8).to_ne_bytes().to_vec(),
            (ScalarKind::UInt, 2) => (x as u16).to_ne_bytes().to_vec(),
            (ScalarKind::UInt, 4) => (x as u32).to_ne_bytes().to_vec(),
            (ScalarKind::UInt, _) => (x as u64).to_ne_bytes().to_vec(),
            (ScalarKind::Float, 2) => half::f16::from_f64(x).to_ne_bytes().to_vec(),
            (ScalarKind::Float, 4) => (x as f32).to_ne_bytes().to_vec(),
            (ScalarKind::Float, _) => x.to_ne_bytes().to_vec(),
            (ScalarKind::Complex, 8) => [(x as f32).to_ne_bytes(), 0f32.to_ne_bytes()].concat(),
            (ScalarKind::Complex, _) => [x.to_ne_bytes(), 0f64.to_ne_bytes()].concat(),
        };
        if !dtype.is_native() {
            let unit = native.itemsize()
                / if native.kind() == ScalarKind::Complex {
                    2
                } else {
                    1
                };
            for chunk in one.chunks_mut(unit) {
                chunk.reverse();
            }
        }
        bytes.extend(one);
    }
    let data = if misaligned {
        let mut padded = vec![0u8];
        padded.extend(&bytes);
        Bytes::from(padded).slice(1..)
    } else {
        Bytes::from(bytes)
    };
    NdArray::from_bytes(dtype, shape.to_vec(), data).expect("a valid array")
}

fn boxed(dtype: DType, shape: &[usize], low: NdArray, high: NdArray) -> Space {
    Space::Box(BoxSpace {
        shape: shape.to_vec(),
        dtype,
        low,
        high,
    })
}

/// Box spaces: scalar bounds broadcast (as `Space::boxed` builds them), full
/// bounds, bounds broadcast along one axis, integer boxes of Discrete spaces
/// with a start offset (`[start, start + n - 1]`), unsigned and half boxes,
/// batched boxes (a leading axis of 8), binary spaces.
fn spaces() -> Vec<Space> {
    let f32_full = |shape: &[usize], lo: &[f64], hi: &[f64]| {
        boxed(
            DType::F32,
            shape,
            array(DType::F32, shape, lo, false),
            array(DType::F32, shape, hi, false),
        )
    };
    vec![
        Space::boxed(DType::F32, vec![1], -2.0, 2.0),
        Space::boxed(DType::F32, vec![8, 1], -2.0, 2.0),
        Space::boxed(DType::F32, vec![], -1.0, 1.0),
        Space::boxed(DType::F64, vec![2, 3], -1.0, 3.0),
        Space::boxed(DType::F16, vec![2], -2.0, 2.0),
        Space::boxed(DType::F32, vec![3], f64::NEG_INFINITY, f64::INFINITY),
        f32_full(&[3], &[-1.0, -2.0, 0.0], &[1.0, 2.0, 7.0]),
        f32_full(&[2, 3], &[-1.0; 6], &[1.0, 2.0, 3.0, 4.0, 7.0, 2.0]),
        boxed(
            DType::F32,
            &[2, 3],
            array(DType::F32, &[1, 3], &[-1.0, -2.0, 0.0], false),
            array(DType::F64, &[2, 1], &[2.0, 3.0], false),
        ),
        boxed(
            DType::F32,
            &[8, 2],
            array(DType::F32, &[1, 2], &[-1.0, -2.0], false),
            array(
                DType::F32,
                &[8, 1],
                &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 7.0],
                false,
            ),
        ),
        // A Discrete(n=5, start=3) as FromGymnasiumEnv's host checks it.
        Space::boxed(DType::I64, vec![], 3.0, 7.0),
        // A batched Discrete (8 envs) and a MultiDiscrete with starts.
        Space::boxed(DType::I64, vec![8], 0.0, 1.0),
        boxed(
            DType::I64,
            &[3],
            array(DType::I64, &[3], &[-1.0, 0.0, 2.0], false),
            array(DType::I64, &[3], &[1.0, 3.0, 4.0], false),
        ),
        Space::boxed(DType::U8, vec![2], 0.0, 3.0),
        Space::boxed(DType::I32, vec![2, 2], -2.0, 2.0),
        Space::binary(vec![3]),
        Space::binary(vec![]),
        Space::boxed(DType::C64, vec![2], -1.0, 1.0),
    ]
}

const DTYPES: [&str; 14] = [
    "float32",
    "float64",
    "float16",
    "int64",
    "int32",
    "int8",
    "uint8",
    "uint64",
    "bool",
    "complex64",
    ">f4",
    ">f8",
    ">i8",
    "<i2",
];

/// A dtype by NumPy name (`float32`) or with a byte order (`>f4`).
fn dtype_of(name: &str) -> DType {
    DType::from_name(name)
        .or_else(|| DType::parse(name).ok())
        .expect("a known dtype")
}

fn shapes_for(space: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![
        space.to_vec(),
        vec![],
        vec![1],
        vec![1, 1],
        vec![3],
        vec![2, 3],
    ];
    if let Some((first, rest)) = space.split_first() {
        let mut grown = vec![first + 1];
        grown.extend(rest);
        out.push(grown);
        out.push(rest.to_vec());
    }
    out
}

fn random_array(rng: &mut Lcg, shape: &[usize]) -> NdArray {
    let dtype = dtype_of(rng.pick(&DTYPES));
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n)
        .map(|_| {
            if rng.next().is_multiple_of(3) {
                rng.pick(&SPECIAL)
            } else {
                // Mostly inside the bounds, so later elements are reached.
                rng.pick(&[0.0, 0.5, 1.0, -1.0, 1.5, 2.0])
            }
        })
        .collect();
    let misaligned = rng.next().is_multiple_of(4);
    array(dtype, shape, &values, misaligned)
}

fn random_plain(rng: &mut Lcg, shape: &[usize]) -> Value {
    match shape.split_first() {
        None => match rng.next() % 4 {
            0 => Value::Int(rng.pick(&[-3i64, 0, 1, 3, 7, 8])),
            1 => Value::Bool(rng.next().is_multiple_of(2)),
            2 => Value::UInt(rng.pick(&[0u64, 2, 300])),
            _ => Value::Float(rng.pick(&SPECIAL)),
        },
        Some((&n, rest)) => Value::List((0..n).map(|_| random_plain(rng, rest)).collect()),
    }
}

fn assert_same(space: &Space, value: &Value) {
    assert_eq!(
        space.check(value, "action"),
        reference(space, value, "action"),
        "space {space}, action {value:?}"
    );
}

#[test]
fn every_box_and_binary_action_is_judged_as_the_plain_check_judges_it() {
    let mut rng = Lcg(25);
    let mut refused = 0;
    let mut cases = 0;
    for space in spaces() {
        let shape = match &space {
            Space::Box(b) => b.shape.clone(),
            Space::Binary(b) => b.shape.clone(),
            _ => unreachable!("only boxes and binary spaces above"),
        };
        for got in shapes_for(&shape) {
            for _ in 0..60 {
                let value = Value::Array(random_array(&mut rng, &got));
                assert_same(&space, &value);
                refused += usize::from(space.check(&value, "action").is_err());
                let plain = random_plain(&mut rng, &got);
                assert_same(&space, &plain);
                cases += 2;
            }
        }
        assert_same(&space, &Value::Str("left".into()));
        assert_same(&space, &Value::Null);
    }
    // Both verdicts were exercised, many times.
    assert!(
        refused > cases / 10 && refused < cases * 9 / 10,
        "{refused} of {cases}"
    );
}

#[test]
fn bounds_edges_and_non_finite_numbers_are_named_as_before() {
    let pendulum = Space::boxed(DType::F32, vec![8, 1], -2.0, 2.0);
    for x in SPECIAL {
        for at in [0, 3, 7] {
            let mut values = vec![0.5; 8];
            values[at] = x;
            for dtype in ["float32", "float64", ">f4", "float16"] {
                let dtype = dtype_of(dtype);
                let value = Value::Array(array(dtype, &[8, 1], &values, false));
                assert_same(&pendulum, &value);
            }
        }
    }
    let e = pendulum
        .check(
            &Value::Array(array(
                DType::F32,
                &[8, 1],
                &[0.0, 0.0, 2.5, 0.0, 0.0, 0.0, 0.0, 0.0],
                false,
            )),
            "action",
        )
        .unwrap_err();
    assert_eq!(
        e,
        "action[2, 0] = 2.5 is above the high bound 2 of the action space"
    );
    let e = pendulum
        .check(
            &Value::Array(array(DType::I64, &[8], &[0.0; 8], false)),
            "action",
        )
        .unwrap_err();
    assert_eq!(
        e,
        "action has shape (8,) but the action space Box(float32, [8, 1]) has shape (8, 1)"
    );
}

#[test]
fn dict_and_tuple_spaces_are_judged_as_the_plain_check_judges_them() {
    let mut rng = Lcg(7);
    let space = Space::dict([
        ("move", Space::boxed(DType::F32, vec![2], -1.0, 1.0)),
        (
            "pick",
            Space::tuple(vec![
                Space::boxed(DType::I64, vec![], 3.0, 7.0),
                Space::binary(vec![2]),
            ]),
        ),
    ]);
    for _ in 0..400 {
        let mut d = Dict::new();
        if !rng.next().is_multiple_of(8) {
            d.insert("move", Value::Array(random_array(&mut rng, &[2])));
        }
        let pick = vec![
            Value::Array(random_array(&mut rng, &[])),
            Value::Array(random_array(&mut rng, &[2])),
        ];
        d.insert(
            "pick",
            if rng.next().is_multiple_of(2) {
                Value::Tuple(pick)
            } else {
                Value::List(pick[..1].to_vec())
            },
        );
        if rng.next().is_multiple_of(8) {
            d.insert("extra", Value::Int(1));
        }
        assert_same(&space, &Value::Dict(d));
    }
    assert_same(&space, &Value::List(vec![]));
}
