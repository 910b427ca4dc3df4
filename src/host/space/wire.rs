//! Spaces as documents: [`Space::to_value`] / [`Space::from_value`], the
//! reference's `space_to_json` / `json_to_space`.

use super::{
    bad, sorted_charset, BinarySpace, DictSpace, DynamicBoxSpace, GraphSpace, Space, SpaceError,
    TextSpace,
};
use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};

impl Space {
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

fn shape_tuple(shape: &[usize]) -> Value {
    Value::Tuple(shape.iter().map(|&d| Value::from(d)).collect())
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
