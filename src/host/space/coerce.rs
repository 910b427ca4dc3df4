//! Conversion of plain actions into arrays: [`Space::coerce`], what a host
//! (and a client) does with `step(1)` or `step([0.5])` before checking the
//! action with [`Space::check`].

use super::Space;
use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};

/// One number of a plain action.
#[derive(Clone, Copy)]
enum Leaf {
    Bool(bool),
    Int(i128),
    Float(f64),
}

impl Space {
    /// Converts a plain action into the value the space holds, where that is
    /// unambiguous: a Python `int`, `float` or `bool`, or a nested list of
    /// them, becomes an array of the space's dtype and shape when its nested
    /// shape is the space's shape (or it holds one number and the space one
    /// element); dict and tuple spaces convert their members (a list given
    /// for a tuple space becomes a tuple). `None` when nothing converts:
    /// arrays are left as they are, and so is a value whose numbers do not
    /// fit the dtype (a float for an integer space, a number outside the
    /// dtype's range) or whose shape differs, for [`Space::check`] to name
    /// the problem.
    ///
    /// ```
    /// use unienv_remote::host::Space;
    /// use unienv_remote::{DType, NdArray, Value};
    /// let discrete = Space::boxed(DType::I64, vec![], 0.0, 1.0);
    /// assert_eq!(discrete.coerce(&Value::Int(1)), Some(Value::Array(NdArray::scalar(1i64))));
    /// let pendulum = Space::boxed(DType::F32, vec![1], -2.0, 2.0);
    /// let list = Value::List(vec![Value::Float(0.5)]);
    /// assert_eq!(pendulum.coerce(&list), Some(Value::Array(NdArray::from_vec(vec![0.5f32]))));
    /// assert_eq!(pendulum.coerce(&Value::Float(0.5)), Some(Value::Array(NdArray::from_vec(vec![0.5f32]))));
    /// // Ambiguous or ill-fitting: left for `check` to refuse.
    /// assert_eq!(discrete.coerce(&Value::Float(1.0)), None);
    /// assert_eq!(pendulum.coerce(&Value::List(vec![Value::Float(0.5); 2])), None);
    /// ```
    pub fn coerce(&self, value: &Value) -> Option<Value> {
        match self {
            Space::Box(b) => coerce_array(value, &b.shape, b.dtype),
            Space::Binary(b) => coerce_array(value, &b.shape, b.dtype),
            Space::Dict(d) => {
                let Value::Dict(items) = value else {
                    return None;
                };
                let mut changed = false;
                let out: Dict = items
                    .iter()
                    .map(
                        |(key, item)| match d.get(key).and_then(|space| space.coerce(item)) {
                            Some(converted) => {
                                changed = true;
                                (key.to_string(), converted)
                            }
                            None => (key.to_string(), item.clone()),
                        },
                    )
                    .collect();
                changed.then_some(Value::Dict(out))
            }
            Space::Tuple(spaces) => {
                let (items, mut changed) = match value {
                    Value::Tuple(items) => (items, false),
                    Value::List(items) => (items, true),
                    _ => return None,
                };
                if items.len() != spaces.len() {
                    return None;
                }
                let out: Vec<Value> = spaces
                    .iter()
                    .zip(items)
                    .map(|(space, item)| match space.coerce(item) {
                        Some(converted) => {
                            changed = true;
                            converted
                        }
                        None => item.clone(),
                    })
                    .collect();
                changed.then_some(Value::Tuple(out))
            }
            _ => None,
        }
    }
}

/// The nested shape of a plain numeric value, its numbers appended to
/// `leaves` in C order; `None` for anything else or a ragged list.
fn leaves_of(value: &Value, leaves: &mut Vec<Leaf>) -> Option<Vec<usize>> {
    match value {
        Value::Bool(b) => leaves.push(Leaf::Bool(*b)),
        Value::Int(i) => leaves.push(Leaf::Int(i128::from(*i))),
        Value::UInt(u) => leaves.push(Leaf::Int(i128::from(*u))),
        Value::Float(f) => leaves.push(Leaf::Float(*f)),
        Value::List(items) | Value::Tuple(items) => {
            let mut inner: Option<Vec<usize>> = None;
            for item in items {
                let shape = leaves_of(item, leaves)?;
                if inner.as_ref().is_some_and(|s| *s != shape) {
                    return None;
                }
                inner = Some(shape);
            }
            let mut shape = vec![items.len()];
            shape.extend(inner.unwrap_or_default());
            return Some(shape);
        }
        _ => return None,
    }
    Some(Vec::new())
}

fn coerce_array(value: &Value, shape: &[usize], dtype: DType) -> Option<Value> {
    if matches!(value, Value::Array(_)) {
        return None;
    }
    let mut leaves = Vec::new();
    let got = leaves_of(value, &mut leaves)?;
    let count: usize = shape.iter().product();
    if got != shape && !(leaves.len() == 1 && count == 1) {
        return None;
    }
    let shape = shape.to_vec();
    macro_rules! ints {
        ($t:ty) => {{
            let mut out: Vec<$t> = Vec::with_capacity(leaves.len());
            for leaf in &leaves {
                let Leaf::Int(i) = *leaf else { return None };
                out.push(<$t>::try_from(i).ok()?);
            }
            NdArray::from_shape_vec(shape, out).ok()
        }};
    }
    macro_rules! floats {
        ($t:ty, $from:expr, $back:expr) => {{
            let mut out: Vec<$t> = Vec::with_capacity(leaves.len());
            for leaf in &leaves {
                let x = match *leaf {
                    Leaf::Int(i) => i as f64,
                    Leaf::Float(f) => f,
                    Leaf::Bool(_) => return None,
                };
                let y: $t = $from(x);
                // A finite number the dtype cannot hold is not converted.
                if x.is_finite() && !$back(y).is_finite() {
                    return None;
                }
                out.push(y);
            }
            NdArray::from_shape_vec(shape, out).ok()
        }};
    }
    let array = match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Bool, _) => {
            let mut out = Vec::with_capacity(leaves.len());
            for leaf in &leaves {
                let Leaf::Bool(b) = *leaf else { return None };
                out.push(b);
            }
            NdArray::from_shape_vec(shape, out).ok()
        }
        (ScalarKind::Int, 1) => ints!(i8),
        (ScalarKind::Int, 2) => ints!(i16),
        (ScalarKind::Int, 4) => ints!(i32),
        (ScalarKind::Int, _) => ints!(i64),
        (ScalarKind::UInt, 1) => ints!(u8),
        (ScalarKind::UInt, 2) => ints!(u16),
        (ScalarKind::UInt, 4) => ints!(u32),
        (ScalarKind::UInt, _) => ints!(u64),
        (ScalarKind::Float, 2) => floats!(half::f16, half::f16::from_f64, half::f16::to_f64),
        (ScalarKind::Float, 4) => floats!(f32, |x: f64| x as f32, f64::from),
        (ScalarKind::Float, _) => floats!(f64, |x: f64| x, |y: f64| y),
        (ScalarKind::Complex, _) => None,
    }?;
    Some(Value::Array(array))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: Vec<Value>) -> Value {
        Value::List(items)
    }

    #[test]
    fn numbers_and_lists_become_arrays_of_the_space() {
        let b = Space::boxed(DType::F32, vec![2, 2], -1.0, 1.0);
        let v = list(vec![
            list(vec![Value::Int(0), Value::Float(0.5)]),
            list(vec![Value::Float(-0.5), Value::Int(1)]),
        ]);
        let want = NdArray::from_shape_vec(vec![2, 2], vec![0.0f32, 0.5, -0.5, 1.0]).unwrap();
        assert_eq!(b.coerce(&v), Some(Value::Array(want)));
        let u8box = Space::boxed(DType::U8, vec![], 0.0, 255.0);
        assert_eq!(
            u8box.coerce(&Value::Int(7)),
            Some(Value::Array(NdArray::scalar(7u8)))
        );
        // Outside the dtype: left for the bound check to name.
        assert_eq!(u8box.coerce(&Value::Int(300)), None);
        assert_eq!(u8box.coerce(&Value::Int(-1)), None);
        let bin = Space::binary(vec![2]);
        let bools = list(vec![Value::Bool(true), Value::Bool(false)]);
        assert_eq!(
            bin.coerce(&bools),
            Some(Value::Array(NdArray::from_vec(vec![true, false])))
        );
        assert_eq!(bin.coerce(&list(vec![Value::Int(1), Value::Int(0)])), None);
        let f32box = Space::unbounded_f32(vec![]);
        assert_eq!(f32box.coerce(&Value::Float(1e300)), None);
        assert_eq!(
            f32box
                .coerce(&Value::Float(f64::NAN))
                .map(|v| v.type_name()),
            Some("array")
        );
        // Ragged lists and wrong shapes are not converted.
        let ragged = list(vec![list(vec![Value::Int(1)]), Value::Int(2)]);
        assert_eq!(b.coerce(&ragged), None);
        assert_eq!(b.coerce(&list(vec![Value::Int(1); 4])), None);
        // Arrays are left alone.
        let a = Value::Array(NdArray::from_vec(vec![0.5f64]));
        assert_eq!(Space::unbounded_f32(vec![1]).coerce(&a), None);
    }

    #[test]
    fn dicts_and_tuples_convert_their_members() {
        let space = Space::dict([
            ("a", Space::boxed(DType::I64, vec![], 0.0, 3.0)),
            (
                "b",
                Space::tuple(vec![
                    Space::unbounded_f32(vec![1]),
                    Space::boxed(DType::I32, vec![], 0.0, 9.0),
                ]),
            ),
        ]);
        let mut d = Dict::new();
        d.insert("a", Value::Int(2));
        d.insert("b", list(vec![Value::Float(0.25), Value::Int(4)]));
        d.insert("extra", Value::Int(1));
        let Some(Value::Dict(out)) = space.coerce(&Value::Dict(d)) else {
            panic!("not converted");
        };
        assert_eq!(out.get("a"), Some(&Value::Array(NdArray::scalar(2i64))));
        assert_eq!(
            out.get("b"),
            Some(&Value::Tuple(vec![
                Value::Array(NdArray::from_vec(vec![0.25f32])),
                Value::Array(NdArray::scalar(4i32)),
            ]))
        );
        assert_eq!(out.get("extra"), Some(&Value::Int(1)));
        let check = Value::Dict(out);
        assert!(space.check(&check, "action").is_err(), "the extra key");
    }
}
