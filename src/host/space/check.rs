//! Membership: [`Space::check`], with the reference's wording of each
//! refusal.

use super::Space;
use crate::codec::{DType, NdArray, ScalarKind, Value};

impl Space {
    /// Checks that `value` belongs to the space, as an action would be
    /// checked before the simulator sees it: dtype kind, shape, bounds and
    /// finiteness of boxes and binary arrays, keys of dicts, lengths of
    /// tuples. `name` is how the value is named in the message (`action`).
    ///
    /// Lenient where clients legitimately differ: any float width fits a
    /// float box and any integer fits an integer or float box (values are
    /// compared, not dtypes), and a one-element array fits a scalar space.
    /// Text, graph, union, batched and dynamic spaces are not checked.
    ///
    /// ```
    /// use unienv_remote::host::Space;
    /// use unienv_remote::{DType, NdArray, Value};
    /// let space = Space::boxed(DType::F32, vec![2], -1.0, 1.0);
    /// assert!(space.check(&Value::Array(NdArray::from_vec(vec![0.5f32, -0.5])), "action").is_ok());
    /// let e = space.check(&Value::Array(NdArray::from_vec(vec![0.5f32, 2.5])), "action").unwrap_err();
    /// assert_eq!(e, "action[1] = 2.5 is above the high bound 1 of the action space");
    /// let e = space.check(&Value::Array(NdArray::from_vec(vec![f32::NAN, 0.0])), "action").unwrap_err();
    /// assert_eq!(e, "action[0] is NaN: actions must be finite numbers");
    /// ```
    pub fn check(&self, value: &Value, name: &str) -> Result<(), String> {
        match self {
            Space::Box(b) => check_numeric(
                value,
                name,
                &b.shape,
                b.dtype,
                Some((&b.low, &b.high)),
                &self.to_string(),
            ),
            Space::Binary(b) => {
                check_numeric(value, name, &b.shape, b.dtype, None, &self.to_string())
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
                    space.check(item, &format!("{name}['{key}']"))?;
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
                    space.check(item, &format!("{name}[{i}]"))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn keys_list<'a>(keys: impl Iterator<Item = &'a str>) -> String {
    let keys: Vec<String> = keys.map(|k| format!("'{k}'")).collect();
    if keys.is_empty() {
        "no keys".into()
    } else {
        keys.join(", ")
    }
}

/// The numbers of an action value and its shape, when it is numeric.
fn numbers(value: &Value) -> Option<(ScalarKind, Vec<usize>, Vec<f64>)> {
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
                let (k, s, v) = numbers(item)?;
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
fn element_index(mut flat: usize, shape: &[usize]) -> Vec<usize> {
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

fn format_number(x: f64) -> String {
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

fn check_numeric(
    value: &Value,
    name: &str,
    shape: &[usize],
    dtype: DType,
    bounds: Option<(&NdArray, &NdArray)>,
    space: &str,
) -> Result<(), String> {
    let Some((kind, got_shape, values)) = numbers(value) else {
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
            bound_at(bounds, &element_index(flat, shape))
        }
    };
    for (flat, &x) in values.iter().enumerate() {
        // Named only for a refusal: building it for every element was most
        // of an accepted action's check.
        let element = || {
            let index = element_index(flat, shape);
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
                format_number(x)
            ));
        }
        if let Some((low, high)) = bounds {
            if let Some(lo) = at(low, flat).filter(|lo| x < *lo) {
                return Err(format!(
                    "{} = {} is below the low bound {} of the action space",
                    element(),
                    format_number(x),
                    format_number(lo)
                ));
            }
            if let Some(hi) = at(high, flat).filter(|hi| x > *hi) {
                return Err(format!(
                    "{} = {} is above the high bound {} of the action space",
                    element(),
                    format_number(x),
                    format_number(hi)
                ));
            }
        }
    }
    Ok(())
}

fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}
