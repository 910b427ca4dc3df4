//! Method arguments written as JSON on the command line (`call --args`,
//! `--kwargs`), converted to value trees the way a Python caller would build
//! them with NumPy.
//!
//! - `null`, booleans, strings: `None`, `bool`, `str`.
//! - Numbers: `int` when written without a fraction or exponent and within
//!   the i64/u64 range, `float` otherwise.
//! - Objects: `dict` (keys in sorted order: the JSON reader does not keep
//!   the written order).
//! - A non-empty JSON array whose leaves are all numbers (or all booleans),
//!   rectangular at any depth: a NumPy array. Its dtype is the one the
//!   resource's space gives for that argument (the action space for the
//!   action of `step` and `set_next_action`; `bool` for a `mask`), else
//!   `float32` for numbers and `bool` for booleans. A ragged one is an
//!   error. Any other array (mixed leaves, strings, objects, empty) is a
//!   `list` of converted items.
//! - `{"$array": [...], "dtype": "int64"}`: an array of that dtype (a NumPy
//!   name such as `uint8`, or a `dtype.str` spelling such as `<f8`; the
//!   result is in native byte order). `dtype` may be left out;
//!   `{"$array": 3, "dtype": "int64"}` is a zero-dimensional array.
//! - `{"$tuple": [...]}`: a `tuple`.
//! - `{"$bytes": "aGVsbG8="}`: `bytes` from base64 (standard or URL-safe
//!   alphabet, padding optional).

use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};
use crate::host::Space;
use half::f16;
use serde_json::Value as Json;

/// The conventions, for `call --help`.
pub const CONVENTIONS: &str = r#"JSON arguments:
  null, true/false, strings, objects   None, bool, str, dict (keys sorted)
  numbers                              int (no fraction or exponent), else float
  [[1, 2], [3, 4]]                     a NumPy array (non-empty, rectangular, any
                                       depth): of the action space's dtype for the
                                       action of step/set_next_action, bool for
                                       `mask` or booleans, float32 otherwise
  other arrays                         lists
  {"$array": [1, 2], "dtype": "int64"} an array of that dtype (NumPy name or
                                       dtype string such as <f8); {"$array": 3,
                                       ...} is zero-dimensional
  {"$tuple": [...]}                    a tuple
  {"$bytes": "BASE64"}                 bytes

Operations: world and node mutations (reset, reload, after_reset, after_reload,
step, set_next_action, pre/post_environment_step) run in components mode inside
an operation of the matching kind (reset, reload or step); a reset/reload
operation completes only when the world's (or the detached root's) reset/reload
ran in it. Env calls and world/node reads run directly.

Examples:
  unienv-remote call ws://127.0.0.1:8765 cartpole reset --kwargs '{"seed": 1}'
  unienv-remote call ws://127.0.0.1:8765 cartpole step --args '[1]'
  unienv-remote call ws://127.0.0.1:8765 pointmass step --args '[[0.5, -0.5]]'
  unienv-remote call ws://127.0.0.1:8765 gripper reset --kwargs '{"seed": 3}'"#;

/// Positional and keyword arguments of a call, converted.
#[derive(Debug, Clone, PartialEq)]
pub struct CallArguments {
    /// Positional arguments.
    pub args: Vec<Value>,
    /// Keyword arguments.
    pub kwargs: Dict,
}

/// Arguments of a call as parsed JSON, before conversion.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonArguments {
    /// The items of `--args`.
    pub args: Vec<Json>,
    /// The members of `--kwargs`.
    pub kwargs: Vec<(String, Json)>,
}

/// Parses `--args` (a JSON array) and `--kwargs` (a JSON object) text.
pub fn parse_json_arguments(
    args: Option<&str>,
    kwargs: Option<&str>,
) -> Result<JsonArguments, String> {
    let args = match args {
        None => Vec::new(),
        Some(text) => match serde_json::from_str::<Json>(text) {
            Ok(Json::Array(items)) => items,
            Ok(other) => {
                return Err(format!(
                    "--args must be a JSON array of positional arguments, got {}",
                    json_type(&other)
                ))
            }
            Err(e) => return Err(format!("--args is not valid JSON: {e}")),
        },
    };
    let kwargs = match kwargs {
        None => Vec::new(),
        Some(text) => match serde_json::from_str::<Json>(text) {
            Ok(Json::Object(map)) => map.into_iter().collect(),
            Ok(other) => {
                return Err(format!(
                    "--kwargs must be a JSON object of keyword arguments, got {}",
                    json_type(&other)
                ))
            }
            Err(e) => return Err(format!("--kwargs is not valid JSON: {e}")),
        },
    };
    Ok(JsonArguments { args, kwargs })
}

/// Converts parsed arguments for `method`. `action_space` is the resource's
/// action space; it gives the dtype of the action of `step` and
/// `set_next_action` (the first positional argument or `action=`).
pub fn convert_arguments(
    method: &str,
    parsed: &JsonArguments,
    action_space: Option<&Space>,
) -> Result<CallArguments, String> {
    let (args, kwargs) = (&parsed.args, &parsed.kwargs);
    let takes_action = matches!(method, "step" | "set_next_action");
    let mask = Space::binary(Vec::new());
    let mut converted = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let hint = if takes_action && i == 0 {
            action_space
        } else {
            None
        };
        converted.push(json_to_value(arg, hint).map_err(|e| format!("argument {i}: {e}"))?);
    }
    let mut dict = Dict::with_capacity(kwargs.len());
    for (key, arg) in kwargs {
        let hint = match key.as_str() {
            "action" if takes_action => action_space,
            "mask" => Some(&mask),
            _ => None,
        };
        dict.insert(
            key.as_str(),
            json_to_value(arg, hint).map_err(|e| format!("keyword {key}: {e}"))?,
        );
    }
    Ok(CallArguments {
        args: converted,
        kwargs: dict,
    })
}

/// Converts one JSON value (see the module documentation); `hint`
/// is the space the value belongs to, if known, and gives array dtypes.
pub fn json_to_value(json: &Json, hint: Option<&Space>) -> Result<Value, String> {
    match json {
        Json::Null => Ok(Value::Null),
        Json::Bool(b) => Ok(Value::Bool(*b)),
        Json::String(s) => Ok(Value::Str(s.clone())),
        Json::Number(n) => Ok(number_value(n)),
        Json::Array(items) => {
            if let Some(shape) = numeric_shape(json)? {
                let dtype = space_dtype(hint).unwrap_or(if all_bool(json) {
                    DType::BOOL
                } else {
                    DType::F32
                });
                return build_array(dtype, shape, json).map(Value::Array);
            }
            let item_hint = match hint {
                Some(Space::Tuple(spaces)) => Some(spaces.as_slice()),
                _ => None,
            };
            items
                .iter()
                .enumerate()
                .map(|(i, item)| json_to_value(item, item_hint.and_then(|s| s.get(i))))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::List)
        }
        Json::Object(map) => {
            if map.contains_key("$array") {
                return special_array(map, hint);
            }
            if let Some(items) = map.get("$tuple") {
                only_keys(map, &["$tuple"])?;
                let Json::Array(items) = items else {
                    return Err("\"$tuple\" must be a JSON array".into());
                };
                let item_hint = match hint {
                    Some(Space::Tuple(spaces)) => Some(spaces.as_slice()),
                    _ => None,
                };
                return items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| json_to_value(item, item_hint.and_then(|s| s.get(i))))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Tuple);
            }
            if let Some(text) = map.get("$bytes") {
                only_keys(map, &["$bytes"])?;
                let Json::String(text) = text else {
                    return Err("\"$bytes\" must be a base64 string".into());
                };
                return base64_decode(text).map(Value::bytes);
            }
            let mut dict = Dict::with_capacity(map.len());
            for (key, item) in map {
                let item_hint = match hint {
                    Some(Space::Dict(d)) => d.get(key),
                    _ => None,
                };
                dict.insert(
                    key.as_str(),
                    json_to_value(item, item_hint).map_err(|e| format!("{key}: {e}"))?,
                );
            }
            Ok(Value::Dict(dict))
        }
    }
}

fn json_type(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn number_value(n: &serde_json::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Int(i)
    } else if let Some(u) = n.as_u64() {
        Value::UInt(u)
    } else {
        Value::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn only_keys(map: &serde_json::Map<String, Json>, allowed: &[&str]) -> Result<(), String> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(format!(
            "unexpected member {extra:?} next to {:?}",
            allowed[0]
        )),
        None => Ok(()),
    }
}

/// The element dtype a space gives its arrays (through batched spaces).
fn space_dtype(hint: Option<&Space>) -> Option<DType> {
    match hint? {
        Space::Batched(b) => space_dtype(Some(&b.single_space)),
        other => other.dtype().map(DType::to_native),
    }
}

fn all_bool(json: &Json) -> bool {
    match json {
        Json::Array(items) => items.iter().all(all_bool),
        Json::Bool(_) => true,
        _ => false,
    }
}

/// The shape of a JSON array that is a numeric array: `Ok(None)` when it is
/// not one (a leaf that is not a number or boolean, or no leaf at all), an
/// error when its leaves are all numeric but it is ragged.
fn numeric_shape(json: &Json) -> Result<Option<Vec<usize>>, String> {
    fn numeric_leaves(json: &Json, count: &mut usize) -> bool {
        match json {
            Json::Array(items) => items.iter().all(|i| numeric_leaves(i, count)),
            Json::Number(_) | Json::Bool(_) => {
                *count += 1;
                true
            }
            _ => false,
        }
    }
    let mut leaves = 0;
    if !numeric_leaves(json, &mut leaves) || leaves == 0 {
        return Ok(None);
    }
    rectangular_shape(json).map(Some)
}

/// The shape of nested JSON arrays, checking that every level is
/// rectangular (a scalar has shape `[]`).
fn rectangular_shape(json: &Json) -> Result<Vec<usize>, String> {
    let mut shape = Vec::new();
    let mut node = json;
    while let Json::Array(items) = node {
        shape.push(items.len());
        match items.first() {
            Some(first) => node = first,
            None => break,
        }
    }
    check_shape(json, &shape)?;
    Ok(shape)
}

fn check_shape(json: &Json, shape: &[usize]) -> Result<(), String> {
    match (json, shape.split_first()) {
        (Json::Array(items), Some((&n, rest))) if items.len() == n => {
            items.iter().try_for_each(|i| check_shape(i, rest))
        }
        (Json::Array(_), _) | (_, Some(_)) => Err(
            "a ragged numeric array (nested arrays of different lengths or depths); \
             NumPy would refuse it too"
                .into(),
        ),
        (_, None) => Ok(()),
    }
}

fn flatten<'a>(json: &'a Json, out: &mut Vec<&'a Json>) {
    match json {
        Json::Array(items) => items.iter().for_each(|i| flatten(i, out)),
        leaf => out.push(leaf),
    }
}

fn special_array(
    map: &serde_json::Map<String, Json>,
    hint: Option<&Space>,
) -> Result<Value, String> {
    only_keys(map, &["$array", "dtype"])?;
    let dtype = match map.get("dtype") {
        None | Some(Json::Null) => None,
        Some(Json::String(name)) => Some(
            DType::from_name(name)
                .or_else(|| DType::parse(name).ok().map(DType::to_native))
                .ok_or_else(|| format!("unknown dtype {name:?}"))?,
        ),
        Some(other) => return Err(format!("dtype must be a string, got {}", json_type(other))),
    };
    let data = &map["$array"];
    let mut leaves = Vec::new();
    flatten(data, &mut leaves);
    if let Some(leaf) = leaves
        .iter()
        .find(|leaf| !matches!(leaf, Json::Number(_) | Json::Bool(_)))
    {
        return Err(format!(
            "\"$array\" holds {}, not only numbers and booleans",
            json_type(leaf)
        ));
    }
    let shape = rectangular_shape(data)?;
    let default = if !leaves.is_empty() && all_bool(data) {
        DType::BOOL
    } else {
        DType::F32
    };
    let dtype = dtype.or_else(|| space_dtype(hint)).unwrap_or(default);
    build_array(dtype, shape, data).map(Value::Array)
}

/// An array of `dtype` and `shape` from the leaves of `json` (C order).
fn build_array(dtype: DType, shape: Vec<usize>, json: &Json) -> Result<NdArray, String> {
    let mut leaves = Vec::new();
    flatten(json, &mut leaves);
    let name = dtype.name();
    let reals = || -> Result<Vec<f64>, String> {
        leaves
            .iter()
            .map(|leaf| match leaf {
                Json::Bool(b) => Ok(f64::from(u8::from(*b))),
                Json::Number(n) => n
                    .as_f64()
                    .ok_or_else(|| format!("{n} is not representable as {name}")),
                other => Err(format!("{} in a numeric array", json_type(other))),
            })
            .collect()
    };
    macro_rules! floats {
        ($t:ty, $convert:expr, $max:expr) => {{
            let values = reals()?
                .into_iter()
                .map(|v| {
                    if v.abs() > $max {
                        Err(format!("{v} is out of range for {name}"))
                    } else {
                        Ok($convert(v))
                    }
                })
                .collect::<Result<Vec<$t>, String>>()?;
            NdArray::from_shape_vec(shape, values)
        }};
    }
    macro_rules! integers {
        ($t:ty) => {{
            let values = leaves
                .iter()
                .map(|leaf| integer_leaf(leaf, name))
                .map(|v| {
                    v.and_then(|v| {
                        <$t>::try_from(v).map_err(|_| format!("{v} is out of range for {name}"))
                    })
                })
                .collect::<Result<Vec<$t>, String>>()?;
            NdArray::from_shape_vec(shape, values)
        }};
    }
    let array = match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Bool, _) => {
            let values = reals()?.into_iter().map(|v| v != 0.0).collect::<Vec<_>>();
            NdArray::from_shape_vec(shape, values)
        }
        (ScalarKind::Float, 2) => floats!(f16, f16::from_f64, f64::from(f16::MAX)),
        (ScalarKind::Float, 4) => floats!(f32, |v: f64| v as f32, f64::from(f32::MAX)),
        (ScalarKind::Float, _) => floats!(f64, |v: f64| v, f64::MAX),
        (ScalarKind::Int, 1) => integers!(i8),
        (ScalarKind::Int, 2) => integers!(i16),
        (ScalarKind::Int, 4) => integers!(i32),
        (ScalarKind::Int, _) => integers!(i64),
        (ScalarKind::UInt, 1) => integers!(u8),
        (ScalarKind::UInt, 2) => integers!(u16),
        (ScalarKind::UInt, 4) => integers!(u32),
        (ScalarKind::UInt, _) => integers!(u64),
        (ScalarKind::Complex, _) => {
            return Err(format!("{name} arrays cannot be written in JSON arguments"))
        }
    };
    array.map_err(|e| e.to_string())
}

/// An integer leaf as i128 (wide enough for both i64 and u64): integers,
/// booleans, and floats without a fractional part.
fn integer_leaf(leaf: &Json, dtype: &str) -> Result<i128, String> {
    match leaf {
        Json::Bool(b) => Ok(i128::from(*b)),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                Ok(i128::from(u))
            } else {
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 1.8e19 => Ok(f as i128),
                    _ => Err(format!("{n} is not an integer (dtype {dtype})")),
                }
            }
        }
        other => Err(format!("{} in a numeric array", json_type(other))),
    }
}

/// Decodes base64 (standard or URL-safe alphabet; padding optional;
/// whitespace ignored).
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine as _;
    // The standard alphabet, padding optional, unused low bits of the last
    // symbol ignored: with the URL-safe symbols mapped to the standard ones,
    // this takes either alphabet.
    const TOLERANT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let symbols: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace())
        .map(|c| match c {
            b'-' => b'+',
            b'_' => b'/',
            c => c,
        })
        .collect();
    TOLERANT
        .decode(symbols)
        .map_err(|e| format!("invalid base64: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convert(json: Json) -> Value {
        json_to_value(&json, None).expect("converts")
    }

    #[test]
    fn scalars_and_containers() {
        assert_eq!(convert(json!(null)), Value::Null);
        assert_eq!(convert(json!(3)), Value::Int(3));
        assert_eq!(convert(json!(3.5)), Value::Float(3.5));
        assert_eq!(convert(json!(u64::MAX)), Value::UInt(u64::MAX));
        assert_eq!(convert(json!("x")), Value::from("x"));
        assert_eq!(convert(json!([])), Value::List(vec![]));
        assert_eq!(
            convert(json!(["a", 1])),
            Value::List(vec![Value::from("a"), Value::Int(1)])
        );
        let d = convert(json!({"seed": 1, "options": {"low": -0.1}}));
        assert_eq!(d.get("seed"), Some(&Value::Int(1)));
        assert_eq!(
            d.get("options").and_then(|o| o.get("low")),
            Some(&Value::Float(-0.1))
        );
        assert_eq!(
            convert(json!({"$tuple": [1, "a"]})),
            Value::Tuple(vec![Value::Int(1), Value::from("a")])
        );
    }

    #[test]
    fn numeric_arrays() {
        let a = convert(json!([[1, 2, 3], [4, 5, 6]]));
        let a = a.as_array().expect("array");
        assert_eq!(a.dtype(), DType::F32);
        assert_eq!(a.shape(), &[2, 3]);
        assert_eq!(a.to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = convert(json!([true, false]));
        assert_eq!(b.as_array().map(NdArray::dtype), Some(DType::BOOL));
        assert!(json_to_value(&json!([[1, 2], [3]]), None)
            .unwrap_err()
            .contains("ragged"));
        assert!(json_to_value(&json!([[1, 2], 3]), None).is_err());
        // A list of arrays stays a list when a leaf is not numeric.
        let mixed = convert(json!([[1, 2], "x"]));
        assert!(matches!(&mixed, Value::List(items) if items[0].as_array().is_some()));
    }

    #[test]
    fn forced_and_hinted_dtypes() {
        let a = convert(json!({"$array": [[1, 2]], "dtype": "int64"}));
        let a = a.as_array().expect("array");
        assert_eq!((a.dtype(), a.shape()), (DType::I64, &[1usize, 2][..]));
        let s = convert(json!({"$array": 3, "dtype": "<u2"}));
        assert_eq!(
            s.as_array().map(|a| (a.dtype(), a.shape().len())),
            Some((DType::U16, 0))
        );
        let empty = convert(json!({"$array": [], "dtype": "float64"}));
        assert_eq!(empty.as_array().map(NdArray::len), Some(0));
        assert!(json_to_value(&json!({"$array": [1.5], "dtype": "int8"}), None).is_err());
        assert!(json_to_value(&json!({"$array": [300], "dtype": "uint8"}), None).is_err());
        assert!(json_to_value(&json!({"$array": [1], "dtype": "str"}), None).is_err());
        assert!(json_to_value(&json!({"$array": [1], "extra": 1}), None).is_err());

        let action = Space::boxed(DType::I64, vec![2], 0.0, 1.0);
        let v = json_to_value(&json!([0, 1]), Some(&action)).expect("converts");
        assert_eq!(v.as_array().map(NdArray::dtype), Some(DType::I64));
        let nested = Space::dict([("body", Space::boxed(DType::F64, vec![2], -1.0, 1.0))]);
        let v = json_to_value(&json!({"body": [0.5, 1]}), Some(&nested)).expect("converts");
        assert_eq!(
            v.get("body").and_then(Value::as_array).map(NdArray::dtype),
            Some(DType::F64)
        );
    }

    #[test]
    fn arguments_use_the_action_space() {
        let space = Space::boxed(DType::I64, vec![1], 0.0, 1.0);
        let parsed = parse_json_arguments(Some("[[1]]"), Some(r#"{"mask": [1, 0], "x": [1]}"#))
            .expect("parses");
        let call = convert_arguments("step", &parsed, Some(&space)).expect("converts");
        assert_eq!(
            call.args[0].as_array().map(NdArray::dtype),
            Some(DType::I64)
        );
        assert_eq!(
            call.kwargs
                .get("mask")
                .and_then(Value::as_array)
                .map(NdArray::dtype),
            Some(DType::BOOL)
        );
        assert_eq!(
            call.kwargs
                .get("x")
                .and_then(Value::as_array)
                .map(NdArray::dtype),
            Some(DType::F32)
        );
        let positional = JsonArguments {
            args: parsed.args.clone(),
            kwargs: Vec::new(),
        };
        let reset = convert_arguments("reset", &positional, Some(&space)).expect("converts");
        assert_eq!(
            reset.args[0].as_array().map(NdArray::dtype),
            Some(DType::F32)
        );
        assert!(parse_json_arguments(Some("{}"), None).is_err());
        assert!(parse_json_arguments(None, Some("[1]")).is_err());
        assert!(parse_json_arguments(Some("[1,"), None).is_err());
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("aGVsbG8=").as_deref(), Ok(&b"hello"[..]));
        assert_eq!(base64_decode("aGVsbG8").as_deref(), Ok(&b"hello"[..]));
        assert_eq!(base64_decode("").as_deref(), Ok(&b""[..]));
        assert_eq!(base64_decode("+/8=").as_deref(), Ok(&[0xfb, 0xff][..]));
        assert_eq!(base64_decode("-_8").as_deref(), Ok(&[0xfb, 0xff][..]));
        assert!(base64_decode("a").is_err());
        assert!(base64_decode("aGVsbG8*").is_err());
        assert!(base64_decode("a===").is_err());
        assert!(base64_decode("aGVsbG8==").is_err());
        assert_eq!(base64_decode(" aGVs\nbG8= ").as_deref(), Ok(&b"hello"[..]));
        // The low bits of the last symbol that carry no byte are ignored.
        assert_eq!(base64_decode("aGVsbG9").as_deref(), Ok(&b"hello"[..]));
        assert_eq!(
            convert(json!({"$bytes": "AAEC"})),
            Value::bytes(vec![0u8, 1, 2])
        );
    }
}
