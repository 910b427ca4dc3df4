//! Python-style arithmetic, as UniEnv's Python code computes it: float
//! `min`/`max`/division/`round`, integer `%` and `math.lcm`, and `+` / logical
//! OR on reward and signal values. Used by the combined node (timestep ratios,
//! aggregation) and the `WorldEnv` composer.

use super::error::{HostError, HostResult};

/// Python's `min` over floats (the first of equal values wins).
pub(crate) fn py_min(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m, v| match m {
        Some(m) if v.partial_cmp(&m) != Some(std::cmp::Ordering::Less) => Some(m),
        _ => Some(v),
    })
}

/// Python's `max` over floats.
pub(crate) fn py_max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m, v| match m {
        Some(m) if v.partial_cmp(&m) != Some(std::cmp::Ordering::Greater) => Some(m),
        _ => Some(v),
    })
}

/// Python's float division: dividing by zero is an error.
pub(crate) fn py_div(a: f64, b: f64) -> HostResult<f64> {
    if b == 0.0 {
        return Err(HostError::invalid_argument("float division by zero"));
    }
    Ok(a / b)
}

/// Python's `round(x)` for floats: half to even, an error for NaN and infinities.
pub(crate) fn py_round(x: f64) -> HostResult<i64> {
    let r = x.round_ties_even();
    if !r.is_finite() || r.abs() >= 9.2e18 {
        return Err(HostError::invalid_argument(format!(
            "cannot round {x} to an integer"
        )));
    }
    Ok(r as i64)
}

/// Python's `a % b` for integers (the result has the sign of `b`).
pub(crate) fn py_mod(a: i64, b: i64) -> HostResult<i64> {
    if b == 0 {
        return Err(HostError::new("integer modulo by zero"));
    }
    Ok(a.rem_euclid(b) + if b < 0 && a.rem_euclid(b) != 0 { b } else { 0 })
}

/// Python's `math.lcm(*values)` (1 for no values).
pub(crate) fn lcm_all(values: &[i64]) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    values.iter().fold(1i64, |acc, &v| {
        let v = v.saturating_abs();
        if acc == 0 || v == 0 {
            0
        } else {
            (acc / gcd(acc, v)).saturating_mul(v)
        }
    })
}

/// Python-style arithmetic on reward and signal values: scalars keep Python's
/// int/float distinction; arrays (0-d or 1-d, any real dtype) broadcast and
/// produce float64 (sums) or bool (logical OR) arrays.
pub(crate) mod numeric {
    use crate::codec::{NdArray, ScalarKind, Value};
    use crate::host::error::{HostError, HostResult};

    /// An operand of `+` or `logical_or`.
    #[derive(Debug, Clone)]
    pub(crate) enum Operand {
        /// A Python int (bools count as ints).
        Int(i128),
        /// A Python float.
        Float(f64),
        /// A 0-d or 1-d array: its shape and elements as `f64`.
        Array(Vec<usize>, Vec<f64>),
    }

    impl Operand {
        pub(crate) fn float_zeros(n: usize) -> Operand {
            Operand::Array(vec![n], vec![0.0; n])
        }

        pub(crate) fn bool_zeros(n: usize) -> Operand {
            Operand::float_zeros(n)
        }

        /// Converts a value; `complex_ok` accepts complex arrays (for truth
        /// tests, which look at both parts).
        pub(crate) fn from_value(v: &Value, complex_ok: bool) -> HostResult<Operand> {
            Ok(match v {
                Value::Bool(b) => Operand::Int(i128::from(*b)),
                Value::Int(i) => Operand::Int(i128::from(*i)),
                Value::UInt(u) => Operand::Int(i128::from(*u)),
                Value::Float(f) => Operand::Float(*f),
                Value::Array(a) if a.ndim() <= 1 => {
                    let complex = a.dtype().kind() == ScalarKind::Complex;
                    if complex && !complex_ok {
                        return Err(HostError::new(
                            "cannot add a complex array to a real reward",
                        ));
                    }
                    let elements = (0..a.len())
                        .map(|i| {
                            let (re, im) = a.get_complex(i).unwrap_or((0.0, 0.0));
                            if complex && im != 0.0 {
                                1.0
                            } else {
                                re
                            }
                        })
                        .collect();
                    Operand::Array(a.shape().to_vec(), elements)
                }
                Value::Array(a) => {
                    return Err(HostError::new(format!(
                        "arrays of {} dimensions are not supported here (0 or 1 expected)",
                        a.ndim()
                    )))
                }
                other => {
                    return Err(HostError::new(format!(
                        "unsupported operand type for + or logical_or: '{}'",
                        other.type_name()
                    )))
                }
            })
        }

        fn as_array(&self) -> (Vec<usize>, Vec<f64>) {
            match self {
                Operand::Int(i) => (Vec::new(), vec![*i as f64]),
                Operand::Float(f) => (Vec::new(), vec![*f]),
                Operand::Array(shape, values) => (shape.clone(), values.clone()),
            }
        }

        /// The value of a sum: an int, a float or a float64 array.
        pub(crate) fn into_value(self) -> HostResult<Value> {
            Ok(match self {
                Operand::Int(i) => match i64::try_from(i) {
                    Ok(i) => Value::Int(i),
                    Err(_) => Value::UInt(
                        u64::try_from(i)
                            .map_err(|_| HostError::new("integer reward sum out of range"))?,
                    ),
                },
                Operand::Float(f) => Value::Float(f),
                Operand::Array(shape, values) => {
                    Value::Array(NdArray::from_shape_vec(shape, values)?)
                }
            })
        }

        /// The value of a logical OR: a bool array.
        pub(crate) fn into_bool_value(self) -> HostResult<Value> {
            let (shape, values) = self.as_array();
            let bools: Vec<bool> = values.iter().map(|&x| x != 0.0).collect();
            Ok(Value::Array(NdArray::from_shape_vec(shape, bools)?))
        }
    }

    /// NumPy broadcasting of two 0-d / 1-d operands.
    fn broadcast(a: &Operand, b: &Operand, f: impl Fn(f64, f64) -> f64) -> HostResult<Operand> {
        let (sa, va) = a.as_array();
        let (sb, vb) = b.as_array();
        let (la, lb) = (va.len(), vb.len());
        let len = match (sa.len(), sb.len()) {
            (0, 0) => None,
            (0, _) => Some(lb),
            (_, 0) => Some(la),
            _ if la == lb || lb == 1 => Some(la),
            _ if la == 1 => Some(lb),
            _ => {
                return Err(HostError::new(format!(
                    "operands could not be broadcast together with shapes ({la},) ({lb},)"
                )))
            }
        };
        let n = len.unwrap_or(1);
        let pick = |v: &[f64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let values = (0..n).map(|i| f(pick(&va, i), pick(&vb, i))).collect();
        Ok(Operand::Array(
            len.map(|l| vec![l]).unwrap_or_default(),
            values,
        ))
    }

    /// `a + b` with Python and NumPy semantics.
    pub(crate) fn add(a: &Operand, b: &Operand) -> HostResult<Operand> {
        Ok(match (a, b) {
            (Operand::Int(x), Operand::Int(y)) => Operand::Int(
                x.checked_add(*y)
                    .ok_or_else(|| HostError::new("integer reward sum overflow"))?,
            ),
            (Operand::Int(x), Operand::Float(y)) => Operand::Float(*x as f64 + y),
            (Operand::Float(x), Operand::Int(y)) => Operand::Float(x + *y as f64),
            (Operand::Float(x), Operand::Float(y)) => Operand::Float(x + y),
            _ => broadcast(a, b, |x, y| x + y)?,
        })
    }

    /// `logical_or(a, b)`: element-wise, non-zero is true.
    pub(crate) fn logical_or(a: &Operand, b: &Operand) -> HostResult<Operand> {
        broadcast(a, b, |x, y| f64::from(u8::from(x != 0.0 || y != 0.0)))
    }

    /// Python truthiness of a signal; an error for arrays of several elements.
    pub(crate) fn truthy(v: &Value) -> HostResult<bool> {
        v.truthy().ok_or_else(|| {
            HostError::new(
                "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::numeric::{add, logical_or, Operand};
    use super::*;
    use crate::codec::{NdArray, Value};

    fn sum(values: &[Value]) -> Value {
        let mut total = Operand::Int(0);
        for v in values {
            total = add(&total, &Operand::from_value(v, false).unwrap()).unwrap();
        }
        total.into_value().unwrap()
    }

    #[test]
    fn python_sums() {
        assert_eq!(sum(&[Value::Int(1), Value::Int(2)]), Value::Int(3));
        assert!(matches!(
            sum(&[Value::Int(1), Value::Int(2)]),
            Value::Int(3)
        ));
        assert!(matches!(sum(&[Value::Int(1), Value::Float(0.5)]), Value::Float(f) if f == 1.5));
        assert!(matches!(
            sum(&[Value::Bool(true), Value::Bool(true)]),
            Value::Int(2)
        ));
        assert!(matches!(sum(&[]), Value::Int(0)));
        let a = sum(&[
            Value::Float(1.0),
            Value::Array(NdArray::from_vec(vec![1i32, 2])),
        ]);
        assert_eq!(a, Value::Array(NdArray::from_vec(vec![2.0f64, 3.0])));
        let b = sum(&[Value::Array(NdArray::scalar(2.5f32))]);
        assert_eq!(b, Value::Array(NdArray::scalar(2.5f64)));
        let bad = add(
            &Operand::from_value(&Value::Array(NdArray::from_vec(vec![1.0f64, 2.0])), false)
                .unwrap(),
            &Operand::from_value(
                &Value::Array(NdArray::from_vec(vec![1.0f64, 2.0, 3.0])),
                false,
            )
            .unwrap(),
        );
        assert!(bad.is_err());
        assert!(Operand::from_value(&Value::Null, false).is_err());
        assert!(Operand::from_value(&Value::Str("x".into()), false).is_err());
    }

    #[test]
    fn logical_or_broadcasts() {
        let acc = Operand::bool_zeros(3);
        let x = logical_or(
            &acc,
            &Operand::from_value(&Value::Bool(true), true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            x.into_bool_value().unwrap(),
            Value::Array(NdArray::from_vec(vec![true; 3]))
        );
        let y = logical_or(
            &acc,
            &Operand::from_value(&Value::Array(NdArray::from_vec(vec![0u8, 3, 0])), true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            y.into_bool_value().unwrap(),
            Value::Array(NdArray::from_vec(vec![false, true, false]))
        );
    }

    #[test]
    fn python_arithmetic_helpers() {
        assert_eq!(py_mod(-1, 3).unwrap(), 2);
        assert_eq!(py_mod(4, 3).unwrap(), 1);
        assert_eq!(py_mod(1, -3).unwrap(), -2);
        assert!(py_mod(1, 0).is_err());
        assert_eq!(py_round(2.5).unwrap(), 2);
        assert_eq!(py_round(3.5).unwrap(), 4);
        assert_eq!(py_round(-0.5).unwrap(), 0);
        assert!(py_round(f64::NAN).is_err());
        assert!(py_round(f64::INFINITY).is_err());
        assert!(py_div(1.0, 0.0).is_err());
        assert_eq!(lcm_all(&[1, 2, 3]), 6);
        assert_eq!(lcm_all(&[]), 1);
        assert_eq!(lcm_all(&[4, 6]), 12);
        assert_eq!(py_min([0.5, 0.25, 0.25].into_iter()), Some(0.25));
        assert_eq!(py_max([0.5, 1.0].into_iter()), Some(1.0));
        assert_eq!(py_min(std::iter::empty()), None);
    }
}
