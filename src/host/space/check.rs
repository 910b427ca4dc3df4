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
                self,
            ),
            Space::Binary(b) => check_numeric(value, name, &b.shape, b.dtype, None, self),
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

/// The kind, shape and numbers of an action value: an array's borrowed in
/// place (no copy: most actions are arrays), a plain value's collected by
/// [`numbers`].
enum Numbers<'a> {
    Array(&'a NdArray),
    Plain(Vec<usize>, Vec<f64>),
}

impl Numbers<'_> {
    fn shape(&self) -> &[usize] {
        match self {
            Numbers::Array(a) => a.shape(),
            Numbers::Plain(shape, _) => shape,
        }
    }

    fn len(&self) -> usize {
        match self {
            Numbers::Array(a) => a.len(),
            Numbers::Plain(_, values) => values.len(),
        }
    }
}

/// Element `i` (flat, C order) of an array as `f64`, exactly as
/// [`NdArray::get_f64`] gives it, read directly when the array is native
/// `float32`/`float64` (the usual action).
#[derive(Clone, Copy)]
enum Reader<'a> {
    F32(&'a [u8]),
    F64(&'a [u8]),
    Any(&'a NdArray),
}

impl<'a> Reader<'a> {
    fn of(a: &'a NdArray) -> Reader<'a> {
        match (a.dtype(), a.dtype().is_native()) {
            (DType::F32, true) => Reader::F32(a.as_bytes()),
            (DType::F64, true) => Reader::F64(a.as_bytes()),
            _ => Reader::Any(a),
        }
    }

    fn get(self, i: usize) -> Option<f64> {
        match self {
            Reader::F32(b) => {
                let raw = b.get(i * 4..i * 4 + 4)?;
                Some(f64::from(f32::from_ne_bytes([
                    raw[0], raw[1], raw[2], raw[3],
                ])))
            }
            Reader::F64(b) => {
                let raw: [u8; 8] = b.get(i * 8..i * 8 + 8)?.try_into().ok()?;
                Some(f64::from_ne_bytes(raw))
            }
            Reader::Any(a) => a.get_f64(i),
        }
    }
}

/// Where a bound of shape `bounds` is read for the element at flat index
/// `flat` of an action of shape `shape`: the same index when the shapes
/// agree, the broadcast element's otherwise (`None` for a bound of another
/// rank). Computed without building the element's multi-index.
#[derive(Clone, Copy)]
enum BoundIndex<'a> {
    Same,
    One,
    Broadcast(&'a [usize], &'a [usize]),
    Unknown,
}

impl<'a> BoundIndex<'a> {
    fn of(bounds: &'a NdArray, shape: &'a [usize]) -> BoundIndex<'a> {
        if bounds.shape() == shape {
            BoundIndex::Same
        } else if bounds.len() == 1 {
            BoundIndex::One
        } else if bounds.ndim() == shape.len() {
            BoundIndex::Broadcast(bounds.shape(), shape)
        } else {
            BoundIndex::Unknown
        }
    }

    /// The flat index into the bounds; what `bound_at(bounds,
    /// &element_index(flat, shape))` reads.
    fn at(self, flat: usize) -> Option<usize> {
        match self {
            BoundIndex::Same => Some(flat),
            BoundIndex::One => Some(0),
            BoundIndex::Unknown => None,
            BoundIndex::Broadcast(bshape, shape) => {
                let (mut rest, mut stride, mut out) = (flat, 1usize, 0usize);
                for axis in (0..shape.len()).rev() {
                    let d = shape[axis].max(1);
                    let i = rest % d;
                    rest /= d;
                    if bshape[axis] != 1 {
                        out += i * stride;
                    }
                    stride *= bshape[axis];
                }
                Some(out)
            }
        }
    }
}

fn check_numeric(
    value: &Value,
    name: &str,
    shape: &[usize],
    dtype: DType,
    bounds: Option<(&NdArray, &NdArray)>,
    space: &Space,
) -> Result<(), String> {
    let (kind, got) = match value {
        Value::Array(a) => (a.dtype().kind(), Numbers::Array(a)),
        other => match numbers(other) {
            Some((kind, shape, values)) => (kind, Numbers::Plain(shape, values)),
            None => {
                return Err(format!(
                    "{name} must be an array of shape {} and dtype {}, got {}",
                    shape_text(shape),
                    dtype.name(),
                    value.type_name()
                ))
            }
        },
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
    // A complex array has no numbers to compare (`numbers` gave none).
    let count = if kind == ScalarKind::Complex {
        0
    } else {
        got.len()
    };
    let scalar_ok = shape.is_empty() && count == 1;
    if got.shape() != shape && !scalar_ok {
        return Err(format!(
            "{name} has shape {} but the action space {space} has shape {}",
            shape_text(got.shape()),
            shape_text(shape)
        ));
    }
    if want == ScalarKind::Complex {
        return Ok(());
    }
    let reader = match &got {
        Numbers::Array(a) => Some(Reader::of(a)),
        Numbers::Plain(..) => None,
    };
    // Bounds of the action's own shape are read at the element's flat
    // index; others (broadcast) at the broadcast element's.
    let bounds = bounds.map(|(low, high)| {
        (
            (Reader::of(low), BoundIndex::of(low, shape)),
            (Reader::of(high), BoundIndex::of(high, shape)),
        )
    });
    let bound = |(r, index): (Reader<'_>, BoundIndex<'_>), flat: usize| r.get(index.at(flat)?);
    for flat in 0..count {
        let x = match (reader, &got) {
            (Some(r), _) => r.get(flat),
            (None, Numbers::Plain(_, values)) => values.get(flat).copied(),
            (None, Numbers::Array(_)) => None,
        };
        let Some(x) = x else { continue };
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
            if let Some(lo) = bound(low, flat).filter(|lo| x < *lo) {
                return Err(format!(
                    "{} = {} is below the low bound {} of the action space",
                    element(),
                    format_number(x),
                    format_number(lo)
                ));
            }
            if let Some(hi) = bound(high, flat).filter(|hi| x > *hi) {
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

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
