//! The portable value tree carried by every envelope.

mod convert;
mod display;

use super::array::{element_count, NdArray, MAX_DIMS};
use bytes::Bytes;
use std::fmt;

/// One node of the protocol's value tree.
///
/// Integers are lossless: values that fit in `i64` are [`Value::Int`], larger
/// unsigned values are [`Value::UInt`] (equality compares the numbers, so
/// `Int(5) == UInt(5)`), and every other integer up to Python's 4300-digit
/// conversion limit is a [`Value::BigInt`] holding its decimal digits. [`Value::Float`] may
/// hold any `f64`; non-finite values travel with the `float` tag. Equality is
/// structural: `NaN` equals `NaN`, dictionaries compare in order, lists and
/// tuples are different things.
#[derive(Clone, Default)]
pub enum Value {
    /// JSON `null`, Python `None`.
    #[default]
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer in the `i64` range.
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    /// An integer outside both the `i64` and the `u64` range (Python's
    /// `2**64`, a 128-bit `SeedSequence().entropy`), carried exactly as its
    /// decimal digits and re-encoded byte for byte. No numeric accessor
    /// (`as_i64`, `as_u64`, `as_f64`) returns it; hosts that need a machine
    /// integer refuse it as an invalid argument.
    BigInt(BigInt),
    /// A float (finite or not).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// A byte string (an attachment).
    Bytes(Bytes),
    /// A numeric array (an attachment).
    Array(NdArray),
    /// A list.
    List(Vec<Value>),
    /// A tuple.
    Tuple(Vec<Value>),
    /// An ordered dictionary with unique string keys.
    Dict(Dict),
    /// A shaped container of values (NumPy object array).
    ObjectArray(ObjectArray),
    /// A UniEnv graph instance.
    Graph(Box<Graph>),
}

impl Value {
    /// A list from anything that converts into values.
    pub fn list<I, T>(items: I) -> Value
    where
        I: IntoIterator<Item = T>,
        T: Into<Value>,
    {
        Value::List(items.into_iter().map(Into::into).collect())
    }

    /// A tuple from anything that converts into values.
    pub fn tuple<I, T>(items: I) -> Value
    where
        I: IntoIterator<Item = T>,
        T: Into<Value>,
    {
        Value::Tuple(items.into_iter().map(Into::into).collect())
    }

    /// A byte string.
    pub fn bytes(data: impl Into<Bytes>) -> Value {
        Value::Bytes(data.into())
    }

    /// A short name of the node type, for error messages: `null`, `bool`,
    /// `int`, `float`, `str`, `bytes`, `array`, `list`, `tuple`, `dict`,
    /// `object_array`, `graph`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) | Value::BigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Array(_) => "array",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::ObjectArray(_) => "object_array",
            Value::Graph(_) => "graph",
        }
    }

    /// Whether this is `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is an integer in the `i64` range.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    /// The integer, if this is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::UInt(u) => Some(*u),
            _ => None,
        }
    }

    /// The number as `f64`, if this is a float or an integer (Python's
    /// `float(x)` for numbers; booleans are not numbers here).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            Value::UInt(u) => Some(*u as f64),
            _ => None,
        }
    }

    /// Like [`Value::as_f64`], but also accepts booleans and one-element real
    /// arrays (NumPy scalars travel as zero-dimensional arrays).
    pub fn as_scalar_f64(&self) -> Option<f64> {
        match self {
            Value::Bool(b) => Some(*b as u8 as f64),
            Value::Array(a) if a.len() == 1 && a.dtype().kind() != super::ScalarKind::Complex => {
                a.get_f64(0)
            }
            other => other.as_f64(),
        }
    }

    /// The string, if this is a `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if this is a `Bytes`.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The array, if this is an `Array`.
    pub fn as_array(&self) -> Option<&NdArray> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The items, if this is a `List` or a `Tuple`.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// The dictionary, if this is a `Dict`.
    pub fn as_dict(&self) -> Option<&Dict> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// The dictionary, mutably, if this is a `Dict`.
    pub fn as_dict_mut(&mut self) -> Option<&mut Dict> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// `self[key]` for dictionaries; `None` for other nodes or missing keys.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_dict().and_then(|d| d.get(key))
    }

    /// Python truthiness where it is defined without ambiguity: `None`,
    /// `False`, zero and empty containers are false. Arrays follow NumPy: a
    /// one-element array is its element, an empty array is false, and a larger
    /// array has no truth value (`None`).
    pub fn truthy(&self) -> Option<bool> {
        Some(match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::UInt(u) => *u != 0,
            // Never zero: zero is an `Int`.
            Value::BigInt(_) => true,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(v) | Value::Tuple(v) => !v.is_empty(),
            Value::Dict(d) => !d.is_empty(),
            Value::Graph(_) => true,
            Value::Array(a) => match a.len() {
                0 => false,
                1 => a.get_complex(0).map(|(re, im)| re != 0.0 || im != 0.0)?,
                _ => return None,
            },
            Value::ObjectArray(o) => match o.values.len() {
                0 => false,
                1 => o.values[0].truthy()?,
                _ => return None,
            },
        })
    }
}

/// Structural equality, as the values would be encoded: integers by value
/// whatever their Rust type, floats by value with the sign of zero (`0.0` and
/// `-0.0` differ, every NaN is equal to every NaN).
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (Int(_) | UInt(_), Int(_) | UInt(_)) => {
                self.as_i64() == other.as_i64() && self.as_u64() == other.as_u64()
            }
            (BigInt(a), BigInt(b)) => a == b,
            // Equal when they encode alike: NaNs are one `NaN`, and `0.0`
            // and `-0.0` are two texts.
            (Float(a), Float(b)) => {
                (a == b && a.is_sign_negative() == b.is_sign_negative())
                    || (a.is_nan() && b.is_nan())
            }
            (Str(a), Str(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            (Array(a), Array(b)) => a == b,
            (List(a), List(b)) | (Tuple(a), Tuple(b)) => a == b,
            (Dict(a), Dict(b)) => a == b,
            (ObjectArray(a), ObjectArray(b)) => a == b,
            (Graph(a), Graph(b)) => a == b,
            _ => false,
        }
    }
}

/// An integer outside the `i64` and `u64` ranges, as its canonical decimal
/// digits (an optional `-`, no leading zero), at most
/// [`BigInt::MAX_DIGITS`] digits.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BigInt(Box<str>);

impl BigInt {
    /// Python's default limit on the digits of an integer converted from or
    /// to text (`sys.int_info.default_max_str_digits`): the reference cannot
    /// decode or encode a longer one.
    pub const MAX_DIGITS: usize = 4300;

    /// The integer written as `text` (a JSON integer token: `-`?, digits,
    /// no leading zero), if it is outside both the `i64` and the `u64`
    /// range and has at most [`BigInt::MAX_DIGITS`] digits. Integers in
    /// range are [`Value::Int`] / [`Value::UInt`] instead.
    pub fn parse(text: &str) -> Option<BigInt> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let canonical = !digits.is_empty()
            && digits.len() <= Self::MAX_DIGITS
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits.len() == 1 || !digits.starts_with('0'));
        if !canonical || text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
            return None;
        }
        Some(BigInt(text.into()))
    }

    /// The decimal digits, with a leading `-` when negative.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it is negative (below `i64::MIN`).
    pub fn is_negative(&self) -> bool {
        self.0.starts_with('-')
    }
}

impl fmt::Debug for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An ordered dictionary with unique string keys, as Python's `dict`.
///
/// Inserting an existing key replaces its value in place (keeping its
/// position), as Python does. Single lookups are linear, which is the fastest
/// choice for the small dictionaries the protocol carries; building a dict in
/// bulk (`collect`, `extend`) indexes its keys past 16 entries, so it stays
/// linear in the number of entries however many a peer sends.
#[derive(Clone, Default, PartialEq)]
pub struct Dict {
    entries: Vec<(String, Value)>,
}

impl Dict {
    /// An empty dictionary.
    pub fn new() -> Dict {
        Dict::default()
    }

    /// An empty dictionary with room for `n` entries.
    pub fn with_capacity(n: usize) -> Dict {
        Dict {
            entries: Vec::with_capacity(n),
        }
    }

    /// Builder form of [`Dict::insert`].
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Dict {
        self.insert(key, value);
        self
    }

    /// Sets `key` to `value`, returning the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        let key = key.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| {
            #[cfg(test)]
            key_comparisons::tick();
            *k == key
        }) {
            Some((_, slot)) => Some(std::mem::replace(slot, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Appends an entry whose key the caller knows to be new (checked in
    /// debug builds for small dicts only: a check per key of a large one
    /// would make building it quadratic).
    pub(crate) fn push_unique(&mut self, key: String, value: Value) {
        debug_assert!(self.entries.len() > DICT_INDEX_THRESHOLD || !self.contains_key(&key));
        self.entries.push((key, value));
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value for `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Entries in insertion order, values mutable.
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut Value)> {
        self.entries.iter_mut().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys in insertion order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// Values in insertion order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.entries.iter().map(|(_, v)| v)
    }
}

impl IntoIterator for Dict {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a> IntoIterator for &'a Dict {
    type Item = (&'a str, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a str, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Dict {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Dict {
        let mut d = Dict::new();
        d.extend(iter);
        d
    }
}

/// Test-only count of key comparisons made by [`Dict::insert`].
#[cfg(test)]
pub(crate) mod key_comparisons {
    use std::cell::Cell;
    thread_local!(static COUNT: Cell<u64> = const { Cell::new(0) });
    pub(crate) fn tick() {
        COUNT.with(|c| c.set(c.get() + 1));
    }
    /// Comparisons since the last call.
    pub(crate) fn take() -> u64 {
        COUNT.with(|c| c.replace(0))
    }
}

/// Past this many entries, [`Dict`]'s bulk insertion ([`Extend`],
/// [`FromIterator`]) looks keys up in a hash index instead of scanning, so
/// building a dict of n entries is linear in n, not quadratic.
const DICT_INDEX_THRESHOLD: usize = 16;

impl<K: Into<String>, V: Into<Value>> Extend<(K, V)> for Dict {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let mut iter = iter.into_iter();
        // Small dicts: linear insertion (no hashing, no allocation).
        while self.entries.len() < DICT_INDEX_THRESHOLD {
            match iter.next() {
                Some((k, v)) => {
                    self.insert(k, v);
                }
                None => return,
            }
        }
        let mut index: Option<std::collections::HashMap<String, usize>> = None;
        for (k, v) in iter {
            let index = index.get_or_insert_with(|| {
                self.entries
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect()
            });
            let key: String = k.into();
            let value: Value = v.into();
            match index.get(&key) {
                Some(&i) => self.entries[i].1 = value,
                None => {
                    index.insert(key.clone(), self.entries.len());
                    self.entries.push((key, value));
                }
            }
        }
    }
}

/// A shaped container of values in C order (NumPy object array). It carries
/// UniEnv's batched structured values.
#[derive(Clone, PartialEq)]
pub struct ObjectArray {
    shape: Vec<usize>,
    values: Vec<Value>,
}

/// Why an object array could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object array of shape {shape:?} needs {expected:?} values, got {actual}")]
pub struct ObjectArrayError {
    /// The shape.
    pub shape: Vec<usize>,
    /// product(shape), or `None` when it overflows, a dimension exceeds
    /// `i64::MAX`, or the shape has too many dimensions.
    pub expected: Option<usize>,
    /// Values given.
    pub actual: usize,
}

impl ObjectArray {
    /// Builds an object array; `values` must hold exactly product(shape) items.
    pub fn new(shape: Vec<usize>, values: Vec<Value>) -> Result<ObjectArray, ObjectArrayError> {
        let expected = if shape.len() > MAX_DIMS {
            None
        } else {
            element_count(&shape)
        };
        if expected != Some(values.len()) {
            return Err(ObjectArrayError {
                shape,
                expected,
                actual: values.len(),
            });
        }
        Ok(ObjectArray { shape, values })
    }

    pub(crate) fn new_unchecked(shape: Vec<usize>, values: Vec<Value>) -> ObjectArray {
        ObjectArray { shape, values }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values, flat, in C order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// Splits into shape and values.
    pub fn into_parts(self) -> (Vec<usize>, Vec<Value>) {
        (self.shape, self.values)
    }
}

/// A UniEnv `GraphInstance`: exactly these five fields.
#[derive(Clone, Default, PartialEq)]
pub struct Graph {
    /// Node counts (an array of the batch shape).
    pub n_nodes: Value,
    /// Edge counts, or null.
    pub n_edges: Value,
    /// Node features, or null.
    pub nodes_features: Value,
    /// Edge features, or null.
    pub edges_features: Value,
    /// Node-index pairs, or null.
    pub edges: Value,
}

impl Graph {
    /// The five field names, in wire order.
    pub const FIELDS: [&'static str; 5] = [
        "n_nodes",
        "n_edges",
        "nodes_features",
        "edges_features",
        "edges",
    ];

    /// The fields in wire order.
    pub fn fields(&self) -> [(&'static str, &Value); 5] {
        [
            ("n_nodes", &self.n_nodes),
            ("n_edges", &self.n_edges),
            ("nodes_features", &self.nodes_features),
            ("edges_features", &self.edges_features),
            ("edges", &self.edges),
        ]
    }
}

// ---- conversions into Value ----

#[cfg(test)]
mod tests;
