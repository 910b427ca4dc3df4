//! UniEnv spaces and their JSON documents (`space_to_json` / `json_to_space`).
//!
//! [`Space::to_value`] produces exactly the document the reference's
//! `space_to_json` produces, as a value tree: shapes are tuples, bounds are
//! nested lists (a bare number for shape `()`), float bounds are floats and
//! integer bounds integers, dtypes are NumPy names, dict spaces have sorted
//! keys. [`Space::from_value`] parses such documents back, also accepting
//! lists where tuples are written (as the reference does).

mod check;
mod coerce;
mod wire;

use crate::codec::{DType, NdArray, ScalarKind, Value};
use std::fmt;

/// A UniEnv space.
#[derive(Debug, Clone, PartialEq)]
pub enum Space {
    /// `BoxSpace`: a bounded numeric array.
    Box(BoxSpace),
    /// `BinarySpace`: a boolean array.
    Binary(BinarySpace),
    /// `DynamicBoxSpace`: a numeric array whose shape varies between bounds.
    DynamicBox(DynamicBoxSpace),
    /// `TupleSpace`.
    Tuple(Vec<Space>),
    /// `DictSpace`, keys sorted.
    Dict(DictSpace),
    /// `TextSpace`.
    Text(TextSpace),
    /// `GraphSpace`.
    Graph(std::boxed::Box<GraphSpace>),
    /// `UnionSpace` (non-empty).
    Union(Vec<Space>),
    /// `BatchedSpace`.
    Batched(std::boxed::Box<BatchedSpace>),
}

/// A bounded numeric array space.
///
/// The bounds are stored as given: arrays of the space's dtype with the same
/// number of dimensions as the shape, each axis either the full dimension or
/// 1 (broadcast). Scalar bounds are stored with every axis of length 1, as
/// UniEnv does.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSpace {
    /// The shape of values.
    pub shape: Vec<usize>,
    /// Lower bounds (broadcastable to `shape`).
    pub low: NdArray,
    /// Upper bounds (broadcastable to `shape`).
    pub high: NdArray,
    /// The element type (a real float or integer type).
    pub dtype: DType,
}

/// A boolean (or other binary) array space.
#[derive(Debug, Clone, PartialEq)]
pub struct BinarySpace {
    /// The shape of values.
    pub shape: Vec<usize>,
    /// The element type (`bool` by default).
    pub dtype: DType,
}

/// An array space whose shape lies between `shape_low` and `shape_high`.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicBoxSpace {
    /// Lower bounds.
    pub low: NdArray,
    /// Upper bounds.
    pub high: NdArray,
    /// Smallest shape.
    pub shape_low: Vec<usize>,
    /// Largest shape.
    pub shape_high: Vec<usize>,
    /// The element type.
    pub dtype: DType,
    /// Padding value, kept exactly as given (UniEnv's default is the integer 0).
    pub fill_value: Value,
}

/// A dictionary of spaces with sorted keys.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DictSpace {
    entries: Vec<(String, Space)>,
}

impl DictSpace {
    /// Builds a dict space; keys are sorted (by code point) as UniEnv does.
    pub fn new(entries: impl IntoIterator<Item = (String, Space)>) -> DictSpace {
        let mut entries: Vec<(String, Space)> = entries.into_iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        DictSpace { entries }
    }

    /// The entries, sorted by key.
    pub fn entries(&self) -> &[(String, Space)] {
        &self.entries
    }

    /// The space for `key`.
    pub fn get(&self, key: &str) -> Option<&Space> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, s)| s)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A string space.
///
/// Two text spaces are equal when they allow the same characters, whatever
/// the order or repetitions of `charset` (UniEnv keeps a set).
#[derive(Debug, Clone)]
pub struct TextSpace {
    /// Shortest length.
    pub min_length: i64,
    /// Longest length.
    pub max_length: i64,
    /// The allowed characters, `None` for any.
    pub charset: Option<String>,
}

impl PartialEq for TextSpace {
    fn eq(&self, other: &TextSpace) -> bool {
        self.min_length == other.min_length
            && self.max_length == other.max_length
            && self.charset.as_deref().map(sorted_charset)
                == other.charset.as_deref().map(sorted_charset)
    }
}

/// A graph space.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphSpace {
    /// Most nodes.
    pub max_nodes: Option<i64>,
    /// Fewest nodes (at least 1).
    pub min_nodes: i64,
    /// Most edges.
    pub max_edges: Option<i64>,
    /// Fewest edges (at least 1).
    pub min_edges: i64,
    /// Whether the graph has edges.
    pub is_edge: bool,
    /// The space of one node's features.
    pub node_feature_space: Space,
    /// The space of one edge's features.
    pub edge_feature_space: Option<Space>,
    /// Leading batch dimensions (empty by default).
    pub batch_shape: Vec<usize>,
}

/// A space of batched structured values.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchedSpace {
    /// The space of one element.
    pub single_space: Space,
    /// The batch dimensions (non-empty).
    pub batch_shape: Vec<usize>,
}

/// A space document that could not be parsed or a space that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid space: {0}")]
pub struct SpaceError(pub String);

fn bad(msg: impl Into<String>) -> SpaceError {
    SpaceError(msg.into())
}

impl Space {
    /// A box with scalar bounds broadcast over `shape`. For integer dtypes,
    /// infinite bounds become the dtype's minimum and maximum, as in UniEnv.
    pub fn boxed(dtype: DType, shape: Vec<usize>, low: f64, high: f64) -> Space {
        let ones = vec![1; shape.len()];
        Space::Box(BoxSpace {
            low: scalar_array(dtype, ones.clone(), low),
            high: scalar_array(dtype, ones, high),
            shape,
            dtype: dtype.to_native(),
        })
    }

    /// A float32 box from −∞ to ∞.
    pub fn unbounded_f32(shape: Vec<usize>) -> Space {
        Space::boxed(DType::F32, shape, f64::NEG_INFINITY, f64::INFINITY)
    }

    /// A box with array bounds, stored as given. The bounds must have the
    /// space's dtype and as many dimensions as `shape`, each axis the full
    /// dimension or 1.
    pub fn box_with_bounds(
        dtype: DType,
        shape: Vec<usize>,
        low: NdArray,
        high: NdArray,
    ) -> Result<Space, SpaceError> {
        for (name, b) in [("low", &low), ("high", &high)] {
            if b.dtype().to_native() != dtype.to_native() {
                return Err(bad(format!(
                    "{name} has dtype {}, the space {}",
                    b.dtype().name(),
                    dtype.name()
                )));
            }
            check_broadcast(name, b.shape(), &shape)?;
        }
        Ok(Space::Box(BoxSpace {
            shape,
            low: low.to_native(),
            high: high.to_native(),
            dtype: dtype.to_native(),
        }))
    }

    /// A boolean space of the given shape.
    pub fn binary(shape: Vec<usize>) -> Space {
        Space::Binary(BinarySpace {
            shape,
            dtype: DType::BOOL,
        })
    }

    /// A dict space (keys get sorted).
    pub fn dict<K: Into<String>>(entries: impl IntoIterator<Item = (K, Space)>) -> Space {
        Space::Dict(DictSpace::new(
            entries.into_iter().map(|(k, s)| (k.into(), s)),
        ))
    }

    /// A tuple space.
    pub fn tuple(spaces: Vec<Space>) -> Space {
        Space::Tuple(spaces)
    }

    /// A batched space.
    pub fn batched(single: Space, batch_shape: Vec<usize>) -> Space {
        Space::Batched(std::boxed::Box::new(BatchedSpace {
            single_space: single,
            batch_shape,
        }))
    }

    /// The UniEnv type name, e.g. `BoxSpace`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Space::Box(_) => "BoxSpace",
            Space::Binary(_) => "BinarySpace",
            Space::DynamicBox(_) => "DynamicBoxSpace",
            Space::Tuple(_) => "TupleSpace",
            Space::Dict(_) => "DictSpace",
            Space::Text(_) => "TextSpace",
            Space::Graph(_) => "GraphSpace",
            Space::Union(_) => "UnionSpace",
            Space::Batched(_) => "BatchedSpace",
        }
    }

    /// The shape of box, binary and batched spaces.
    pub fn shape(&self) -> Option<Vec<usize>> {
        match self {
            Space::Box(b) => Some(b.shape.clone()),
            Space::Binary(b) => Some(b.shape.clone()),
            Space::Batched(b) => {
                let mut s = b.batch_shape.clone();
                s.extend(b.single_space.shape().unwrap_or_default());
                Some(s)
            }
            _ => None,
        }
    }

    /// The element dtype of box, binary and dynamic box spaces.
    pub fn dtype(&self) -> Option<DType> {
        match self {
            Space::Box(b) => Some(b.dtype),
            Space::Binary(b) => Some(b.dtype),
            Space::DynamicBox(b) => Some(b.dtype),
            _ => None,
        }
    }
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Space::Box(b) => write!(f, "Box({}, {:?})", b.dtype.name(), b.shape),
            Space::Binary(b) => write!(f, "Binary({:?})", b.shape),
            Space::DynamicBox(b) => write!(
                f,
                "DynamicBox({}, {:?}..{:?})",
                b.dtype.name(),
                b.shape_low,
                b.shape_high
            ),
            Space::Tuple(s) => {
                f.write_str("Tuple(")?;
                for (i, s) in s.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str(")")
            }
            Space::Union(s) => write!(f, "Union({} spaces)", s.len()),
            Space::Dict(d) => {
                f.write_str("Dict(")?;
                for (i, (k, s)) in d.entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {s}")?;
                }
                f.write_str(")")
            }
            Space::Text(t) => write!(f, "Text({}..{})", t.min_length, t.max_length),
            Space::Graph(g) => write!(f, "Graph(nodes {}..{:?})", g.min_nodes, g.max_nodes),
            Space::Batched(b) => write!(f, "Batched({:?}, {})", b.batch_shape, b.single_space),
        }
    }
}

fn check_broadcast(name: &str, bounds: &[usize], shape: &[usize]) -> Result<(), SpaceError> {
    if bounds.len() != shape.len() || bounds.iter().zip(shape).any(|(&b, &s)| b != s && b != 1) {
        return Err(bad(format!(
            "{name} of shape {bounds:?} does not broadcast to {shape:?}"
        )));
    }
    Ok(())
}

/// An array of `dtype` and `shape` with every element `value` (saturated to
/// the dtype's range for integer types, as UniEnv does with infinite bounds).
fn scalar_array(dtype: DType, shape: Vec<usize>, value: f64) -> NdArray {
    let n: usize = shape.iter().product();
    macro_rules! fill {
        ($t:ty, $v:expr) => {
            NdArray::from_shape_vec(shape, vec![$v; n]).unwrap_or_else(|_| NdArray::scalar($v))
        };
    }
    match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Float, 2) => fill!(half::f16, half::f16::from_f64(value)),
        (ScalarKind::Float, 4) => fill!(f32, value as f32),
        (ScalarKind::Float, _) => fill!(f64, value),
        (ScalarKind::Int, 1) => fill!(i8, value as i8),
        (ScalarKind::Int, 2) => fill!(i16, value as i16),
        (ScalarKind::Int, 4) => fill!(i32, value as i32),
        (ScalarKind::Int, _) => fill!(i64, value as i64),
        (ScalarKind::UInt, 1) => fill!(u8, value as u8),
        (ScalarKind::UInt, 2) => fill!(u16, value as u16),
        (ScalarKind::UInt, 4) => fill!(u32, value as u32),
        (ScalarKind::UInt, _) => fill!(u64, value as u64),
        (ScalarKind::Bool, _) => fill!(bool, value != 0.0),
        (ScalarKind::Complex, _) => fill!(f64, value),
    }
}

fn sorted_charset(c: &str) -> String {
    let mut chars: Vec<char> = c.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    chars.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::header_json;

    #[test]
    fn box_document_matches_reference() {
        let s = Space::unbounded_f32(vec![3]);
        assert_eq!(
            header_json(&s.to_value()).unwrap(),
            r#"{"t":"dict","v":[["type","BoxSpace"],["shape",{"t":"tuple","v":[3]}],["low",{"t":"list","v":[{"t":"float","v":"-inf"}]}],["high",{"t":"list","v":[{"t":"float","v":"inf"}]}],["dtype","float32"]]}"#
        );
        assert_eq!(Space::from_value(&s.to_value()).unwrap(), s);
    }

    #[test]
    fn integer_boxes_saturate_infinite_bounds() {
        let s = Space::boxed(DType::I32, vec![2, 2], f64::NEG_INFINITY, f64::INFINITY);
        let v = s.to_value();
        assert_eq!(v.get("low").unwrap().to_string(), "[[-2147483648]]");
        assert_eq!(v.get("high").unwrap().to_string(), "[[2147483647]]");
        let u = Space::boxed(DType::U64, vec![], 0.0, f64::INFINITY);
        assert_eq!(u.to_value().get("high"), Some(&Value::UInt(u64::MAX)));
        assert_eq!(Space::from_value(&u.to_value()).unwrap(), u);
    }

    #[test]
    fn scalar_shapes_give_bare_numbers() {
        let s = Space::boxed(DType::F64, vec![], 0.0, 1.0);
        assert_eq!(s.to_value().get("low"), Some(&Value::Float(0.0)));
        assert_eq!(Space::from_value(&s.to_value()).unwrap(), s);
    }

    #[test]
    fn dict_keys_sorted_and_nested_round_trip() {
        let s = Space::dict([
            ("b", Space::binary(vec![2])),
            ("", Space::unbounded_f32(vec![1])),
            ("a", Space::tuple(vec![])),
        ]);
        let keys: Vec<_> = s
            .to_value()
            .get("spaces")
            .unwrap()
            .as_dict()
            .unwrap()
            .keys()
            .map(String::from)
            .collect();
        assert_eq!(keys, vec!["", "a", "b"]);
        assert_eq!(Space::from_value(&s.to_value()).unwrap(), s);
    }

    #[test]
    fn text_spaces_compare_their_character_sets() {
        let text = |c: &str| {
            Space::Text(TextSpace {
                min_length: 0,
                max_length: 3,
                charset: Some(c.into()),
            })
        };
        assert_eq!(text("hello"), text("ehlo"));
        assert_ne!(text("hello"), text("help"));
        assert_eq!(
            Space::from_value(&text("hello").to_value()).unwrap(),
            text("hello")
        );
    }
}
