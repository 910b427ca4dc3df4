//! UniEnv spaces and their JSON documents (`space_to_json` / `json_to_space`).
//!
//! [`Space::to_value`] produces exactly the document the reference's
//! `space_to_json` produces, as a value tree: shapes are tuples, bounds are
//! nested lists (a bare number for shape `()`), float bounds are floats and
//! integer bounds integers, dtypes are NumPy names, dict spaces have sorted
//! keys. [`Space::from_value`] parses such documents back, also accepting
//! lists where tuples are written (as the reference does).

use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};
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

    /// The document `space_to_json` produces, as a value tree.
    pub fn to_value(&self) -> Value {
        let mut d = Dict::with_capacity(9);
        d.insert("type", self.type_name());
        match self {
            Space::Box(b) => {
                d.insert("shape", shape_tuple(&b.shape));
                d.insert("low", bounds_to_value(&b.low));
                d.insert("high", bounds_to_value(&b.high));
                d.insert("dtype", b.dtype.name());
            }
            Space::Binary(b) => {
                d.insert("shape", shape_tuple(&b.shape));
                d.insert("dtype", b.dtype.name());
            }
            Space::DynamicBox(b) => {
                d.insert("low", bounds_to_value(&b.low));
                d.insert("high", bounds_to_value(&b.high));
                d.insert("shape_low", shape_tuple(&b.shape_low));
                d.insert("shape_high", shape_tuple(&b.shape_high));
                d.insert("dtype", b.dtype.name());
                d.insert("fill_value", b.fill_value.clone());
            }
            Space::Tuple(spaces) | Space::Union(spaces) => {
                d.insert(
                    "spaces",
                    Value::List(spaces.iter().map(Space::to_value).collect()),
                );
            }
            Space::Dict(s) => {
                let spaces: Dict = s
                    .entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect();
                d.insert("spaces", spaces);
            }
            Space::Text(t) => {
                d.insert("min_length", t.min_length);
                d.insert("max_length", t.max_length);
                d.insert("charset", t.charset.as_ref().map(|c| sorted_charset(c)));
            }
            Space::Graph(g) => {
                d.insert("max_nodes", g.max_nodes);
                d.insert("min_nodes", g.min_nodes);
                d.insert("max_edges", g.max_edges);
                d.insert("min_edges", g.min_edges);
                d.insert("is_edge", g.is_edge);
                d.insert("node_feature_space", g.node_feature_space.to_value());
                d.insert(
                    "edge_feature_space",
                    g.edge_feature_space.as_ref().map(Space::to_value),
                );
                d.insert("batch_shape", shape_tuple(&g.batch_shape));
            }
            Space::Batched(b) => {
                d.insert("single_space", b.single_space.to_value());
                d.insert("batch_shape", shape_tuple(&b.batch_shape));
            }
        }
        Value::Dict(d)
    }

    /// Parses a `space_to_json` document.
    pub fn from_value(value: &Value) -> Result<Space, SpaceError> {
        let d = value
            .as_dict()
            .ok_or_else(|| bad("a space document must be a dict"))?;
        let ty = d
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing \"type\""))?;
        let field = |k: &str| d.get(k).ok_or_else(|| bad(format!("{ty} lacks {k:?}")));
        Ok(match ty {
            "BoxSpace" => {
                let dtype = dtype_field(field("dtype")?)?;
                if !matches!(
                    dtype.kind(),
                    ScalarKind::Float | ScalarKind::Int | ScalarKind::UInt
                ) {
                    return Err(bad("BoxSpace dtype must be a real float or integer type"));
                }
                let shape = shape_field(field("shape")?)?;
                let low = bounds_from_value(field("low")?, dtype)?;
                let high = bounds_from_value(field("high")?, dtype)?;
                Space::box_with_bounds(dtype, shape, low, high)?
            }
            "BinarySpace" => Space::Binary(BinarySpace {
                shape: shape_field(field("shape")?)?,
                dtype: match d.get("dtype") {
                    None | Some(Value::Null) => DType::BOOL,
                    Some(v) => dtype_field(v)?,
                },
            }),
            "DynamicBoxSpace" => {
                let dtype = dtype_field(field("dtype")?)?;
                Space::DynamicBox(DynamicBoxSpace {
                    low: bounds_from_value(field("low")?, dtype)?,
                    high: bounds_from_value(field("high")?, dtype)?,
                    shape_low: shape_field(field("shape_low")?)?,
                    shape_high: shape_field(field("shape_high")?)?,
                    dtype,
                    fill_value: d.get("fill_value").cloned().unwrap_or(Value::Int(0)),
                })
            }
            "TupleSpace" | "UnionSpace" => {
                let items = field("spaces")?
                    .as_seq()
                    .ok_or_else(|| bad("spaces must be a list"))?;
                let spaces = items
                    .iter()
                    .map(Space::from_value)
                    .collect::<Result<Vec<_>, _>>()?;
                if ty == "TupleSpace" {
                    Space::Tuple(spaces)
                } else {
                    if spaces.is_empty() {
                        return Err(bad("UnionSpace needs at least one space"));
                    }
                    Space::Union(spaces)
                }
            }
            "DictSpace" => {
                let spaces = field("spaces")?
                    .as_dict()
                    .ok_or_else(|| bad("spaces must be a dict"))?;
                let entries = spaces
                    .iter()
                    .map(|(k, v)| Ok((k.to_string(), Space::from_value(v)?)))
                    .collect::<Result<Vec<_>, SpaceError>>()?;
                Space::Dict(DictSpace::new(entries))
            }
            "TextSpace" => Space::Text(TextSpace {
                min_length: int_field(field("min_length")?)?,
                max_length: int_field(field("max_length")?)?,
                charset: match d.get("charset") {
                    None | Some(Value::Null) => None,
                    Some(Value::Str(s)) => Some(s.clone()),
                    Some(_) => return Err(bad("charset must be a string or null")),
                },
            }),
            "GraphSpace" => Space::Graph(std::boxed::Box::new(GraphSpace {
                max_nodes: opt_int(d.get("max_nodes"))?,
                min_nodes: int_field(field("min_nodes")?)?,
                max_edges: opt_int(d.get("max_edges"))?,
                min_edges: int_field(field("min_edges")?)?,
                is_edge: field("is_edge")?
                    .as_bool()
                    .ok_or_else(|| bad("is_edge must be a bool"))?,
                node_feature_space: Space::from_value(field("node_feature_space")?)?,
                edge_feature_space: match d.get("edge_feature_space") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(Space::from_value(v)?),
                },
                batch_shape: match d.get("batch_shape") {
                    None => Vec::new(),
                    Some(v) => shape_field(v)?,
                },
            })),
            "BatchedSpace" => {
                let batch_shape = shape_field(field("batch_shape")?)?;
                if batch_shape.is_empty() {
                    return Err(bad("BatchedSpace needs a non-empty batch_shape"));
                }
                Space::batched(Space::from_value(field("single_space")?)?, batch_shape)
            }
            other => return Err(bad(format!("unknown space type {other:?}"))),
        })
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
    for (flat, &x) in values.iter().enumerate() {
        let index = element_index(flat, shape);
        let element = if index.is_empty() {
            name.to_string()
        } else {
            let parts: Vec<String> = index.iter().map(usize::to_string).collect();
            format!("{name}[{}]", parts.join(", "))
        };
        if !x.is_finite() {
            return Err(format!(
                "{element} is {}: actions must be finite numbers",
                format_number(x)
            ));
        }
        if let Some((low, high)) = bounds {
            if let Some(lo) = bound_at(low, &index).filter(|lo| x < *lo) {
                return Err(format!(
                    "{element} = {} is below the low bound {} of the action space",
                    format_number(x),
                    format_number(lo)
                ));
            }
            if let Some(hi) = bound_at(high, &index).filter(|hi| x > *hi) {
                return Err(format!(
                    "{element} = {} is above the high bound {} of the action space",
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

fn shape_tuple(shape: &[usize]) -> Value {
    Value::Tuple(shape.iter().map(|&d| Value::from(d)).collect())
}

fn sorted_charset(c: &str) -> String {
    let mut chars: Vec<char> = c.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    chars.into_iter().collect()
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

/// Bounds as nested lists (or a bare number for zero dimensions).
fn bounds_to_value(a: &NdArray) -> Value {
    fn element(a: &NdArray, i: usize) -> Value {
        let d = a.dtype();
        match d.kind() {
            ScalarKind::Float => Value::Float(a.get_f64(i).unwrap_or(f64::NAN)),
            ScalarKind::Bool => Value::Bool(a.get_f64(i).unwrap_or(0.0) != 0.0),
            _ => a
                .format_element(i)
                .and_then(|s| {
                    s.parse::<i64>()
                        .map(Value::Int)
                        .ok()
                        .or_else(|| s.parse::<u64>().ok().map(Value::UInt))
                })
                .unwrap_or(Value::Null),
        }
    }
    fn nest(a: &NdArray, dims: &[usize], start: usize, stride: usize) -> Value {
        match dims.split_first() {
            None => element(a, start),
            Some((&n, rest)) => {
                let inner = stride / n.max(1);
                Value::List(
                    (0..n)
                        .map(|i| nest(a, rest, start + i * inner, inner))
                        .collect(),
                )
            }
        }
    }
    nest(a, a.shape(), 0, a.len())
}

/// Parses nested lists (or a bare number) into an array of `dtype`.
fn bounds_from_value(v: &Value, dtype: DType) -> Result<NdArray, SpaceError> {
    let mut shape = Vec::new();
    let mut cur = v;
    while let Some(items) = cur.as_seq() {
        shape.push(items.len());
        match items.first() {
            Some(first) => cur = first,
            None => break,
        }
    }
    let mut flat = Vec::new();
    fn collect(
        v: &Value,
        depth: usize,
        shape: &[usize],
        out: &mut Vec<f64>,
    ) -> Result<(), SpaceError> {
        if depth == shape.len() {
            let x = match v {
                Value::Float(f) => *f,
                Value::Int(_) | Value::UInt(_) => v.as_f64().unwrap_or(0.0),
                Value::Bool(b) => *b as u8 as f64,
                _ => return Err(bad("bounds must be numbers")),
            };
            out.push(x);
            return Ok(());
        }
        let items = v
            .as_seq()
            .ok_or_else(|| bad("bounds are not a regular nested list"))?;
        if items.len() != shape[depth] {
            return Err(bad("bounds are not a regular nested list"));
        }
        for item in items {
            collect(item, depth + 1, shape, out)?;
        }
        Ok(())
    }
    // Integer bounds are parsed exactly (u64/i64 extremes do not survive f64).
    if matches!(dtype.kind(), ScalarKind::Int | ScalarKind::UInt) {
        let mut ints: Vec<Value> = Vec::new();
        fn leaves(v: &Value, out: &mut Vec<Value>) {
            match v.as_seq() {
                Some(items) => items.iter().for_each(|i| leaves(i, out)),
                None => out.push(v.clone()),
            }
        }
        collect(v, 0, &shape, &mut flat)?;
        leaves(v, &mut ints);
        return int_array(dtype, shape, &ints);
    }
    collect(v, 0, &shape, &mut flat)?;
    let arr = match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Float, 2) => NdArray::from_shape_vec(
            shape,
            flat.iter().map(|&x| half::f16::from_f64(x)).collect(),
        ),
        (ScalarKind::Float, 4) => {
            NdArray::from_shape_vec(shape, flat.iter().map(|&x| x as f32).collect())
        }
        (ScalarKind::Float, _) => NdArray::from_shape_vec(shape, flat),
        (ScalarKind::Bool, _) => {
            NdArray::from_shape_vec(shape, flat.iter().map(|&x| x != 0.0).collect())
        }
        _ => return Err(bad(format!("unsupported bound dtype {}", dtype.name()))),
    };
    arr.map_err(|e| bad(e.to_string()))
}

fn int_array(dtype: DType, shape: Vec<usize>, values: &[Value]) -> Result<NdArray, SpaceError> {
    macro_rules! conv {
        ($t:ty) => {{
            let v = values
                .iter()
                .map(|x| {
                    x.as_i64()
                        .and_then(|i| <$t>::try_from(i).ok())
                        .or_else(|| x.as_u64().and_then(|u| <$t>::try_from(u).ok()))
                        .ok_or_else(|| bad(format!("bound {x} does not fit {}", dtype.name())))
                })
                .collect::<Result<Vec<$t>, _>>()?;
            NdArray::from_shape_vec(shape, v).map_err(|e| bad(e.to_string()))
        }};
    }
    match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Int, 1) => conv!(i8),
        (ScalarKind::Int, 2) => conv!(i16),
        (ScalarKind::Int, 4) => conv!(i32),
        (ScalarKind::Int, _) => conv!(i64),
        (ScalarKind::UInt, 1) => conv!(u8),
        (ScalarKind::UInt, 2) => conv!(u16),
        (ScalarKind::UInt, 4) => conv!(u32),
        _ => conv!(u64),
    }
}

fn dtype_field(v: &Value) -> Result<DType, SpaceError> {
    let name = v.as_str().ok_or_else(|| bad("dtype must be a string"))?;
    DType::from_name(name).ok_or_else(|| bad(format!("unknown dtype {name:?}")))
}

fn shape_field(v: &Value) -> Result<Vec<usize>, SpaceError> {
    let items = v
        .as_seq()
        .ok_or_else(|| bad("shape must be a tuple or list"))?;
    items
        .iter()
        .map(|d| {
            d.as_u64()
                .map(|u| u as usize)
                .ok_or_else(|| bad("shape dimensions must be non-negative integers"))
        })
        .collect()
}

fn int_field(v: &Value) -> Result<i64, SpaceError> {
    v.as_i64().ok_or_else(|| bad("expected an integer"))
}

fn opt_int(v: Option<&Value>) -> Result<Option<i64>, SpaceError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => int_field(v).map(Some),
    }
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
