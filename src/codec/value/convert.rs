//! Conversions into [`Value`] from Rust values, and the [`dict!`](crate::dict)
//! macro.

use super::{Dict, Graph, ObjectArray, Value};
use crate::codec::array::NdArray;
use crate::codec::dtype::Element;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};

impl From<()> for Value {
    fn from(_: ()) -> Value {
        Value::Null
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}
macro_rules! from_signed {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value { Value::Int(v as i64) }
        }
    )*};
}
from_signed!(i8, i16, i32, i64, u8, u16, u32);
impl From<isize> for Value {
    fn from(v: isize) -> Value {
        Value::Int(v as i64)
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Value {
        match i64::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(v),
        }
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::from(v as u64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}
impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Float(v as f64)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v)
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Str(v.clone())
    }
}
impl From<Bytes> for Value {
    fn from(v: Bytes) -> Value {
        Value::Bytes(v)
    }
}
impl From<NdArray> for Value {
    fn from(v: NdArray) -> Value {
        Value::Array(v)
    }
}
impl<T: Element, D: ndarray::Dimension> From<ndarray::Array<T, D>> for Value {
    fn from(v: ndarray::Array<T, D>) -> Value {
        Value::Array(NdArray::from(v))
    }
}
impl<T: Element, D: ndarray::Dimension> From<&ndarray::Array<T, D>> for Value {
    fn from(v: &ndarray::Array<T, D>) -> Value {
        Value::Array(NdArray::from(v))
    }
}
impl<'a, T: Element, D: ndarray::Dimension> From<ndarray::ArrayView<'a, T, D>> for Value {
    fn from(v: ndarray::ArrayView<'a, T, D>) -> Value {
        Value::Array(NdArray::from(v))
    }
}
impl From<Dict> for Value {
    fn from(v: Dict) -> Value {
        Value::Dict(v)
    }
}
impl From<ObjectArray> for Value {
    fn from(v: ObjectArray) -> Value {
        Value::ObjectArray(v)
    }
}
impl From<Graph> for Value {
    fn from(v: Graph) -> Value {
        Value::Graph(Box::new(v))
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Value {
        Value::List(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}
impl<K: Into<String>, V: Into<Value>, S> From<HashMap<K, V, S>> for Value {
    fn from(v: HashMap<K, V, S>) -> Value {
        Value::Dict(v.into_iter().collect())
    }
}
impl<K: Into<String>, V: Into<Value>> From<BTreeMap<K, V>> for Value {
    fn from(v: BTreeMap<K, V>) -> Value {
        Value::Dict(v.into_iter().collect())
    }
}

macro_rules! from_tuple {
    ($($name:ident),+) => {
        impl<$($name: Into<Value>),+> From<($($name,)+)> for Value {
            #[allow(non_snake_case)]
            fn from(($($name,)+): ($($name,)+)) -> Value {
                Value::Tuple(vec![$($name.into()),+])
            }
        }
    };
}
from_tuple!(A);
from_tuple!(A, B);
from_tuple!(A, B, C);
from_tuple!(A, B, C, D);
from_tuple!(A, B, C, D, E);
from_tuple!(A, B, C, D, E, F);

/// Builds a [`Dict`] from `key => value` pairs, converting each value with `Into<Value>`.
///
/// ```
/// use unienv_remote::{dict, Value};
/// let d = dict! { "seed" => 3, "name" => "arm" };
/// assert_eq!(d.get("seed"), Some(&Value::Int(3)));
/// ```
#[macro_export]
macro_rules! dict {
    () => { $crate::Dict::new() };
    ($($key:expr => $value:expr),+ $(,)?) => {{
        let mut d = $crate::Dict::new();
        $( d.insert($key, $value); )+
        d
    }};
}
