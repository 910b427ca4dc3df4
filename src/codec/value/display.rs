//! Python-like notation for values (`Debug` and `Display`).

use super::{Dict, Graph, ObjectArray, Value};
use std::fmt;

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Debug for Dict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_dict(self, f)
    }
}

impl fmt::Debug for ObjectArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "object_array(shape={:?}, ", self.shape)?;
        write_seq(f, "[", &self.values, "]")?;
        f.write_str(")")
    }
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GraphInstance(")?;
        for (i, (k, v)) in self.fields().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}={v}")?;
        }
        f.write_str(")")
    }
}

fn write_seq(f: &mut fmt::Formatter<'_>, open: &str, items: &[Value], close: &str) -> fmt::Result {
    f.write_str(open)?;
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{v}")?;
    }
    f.write_str(close)
}

fn write_dict(d: &Dict, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str("{")?;
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{k:?}: {v}")?;
    }
    f.write_str("}")
}

/// Python-like notation: `None`, `True`, `1.0`, `'text'` (as Rust debug
/// strings), `b'..'`, `[..]`, `(..)`, `{..}`, arrays summarized.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("None"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(u) => write!(f, "{u}"),
            Value::BigInt(b) => f.write_str(b.as_str()),
            Value::Float(x) if x.is_nan() => f.write_str("nan"),
            Value::Float(x) if x.is_infinite() => {
                f.write_str(if *x > 0.0 { "inf" } else { "-inf" })
            }
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bytes(b) => {
                f.write_str("b'")?;
                for &c in b.iter().take(64) {
                    match c {
                        b'\'' => f.write_str("\\'")?,
                        b'\\' => f.write_str("\\\\")?,
                        0x20..=0x7e => write!(f, "{}", c as char)?,
                        _ => write!(f, "\\x{c:02x}")?,
                    }
                }
                if b.len() > 64 {
                    write!(f, "…({} bytes)", b.len())?;
                }
                f.write_str("'")
            }
            Value::Array(a) => write!(f, "{a:?}"),
            Value::List(v) => write_seq(f, "[", v, "]"),
            Value::Tuple(v) if v.len() == 1 => write!(f, "({},)", v[0]),
            Value::Tuple(v) => write_seq(f, "(", v, ")"),
            Value::Dict(d) => write_dict(d, f),
            Value::ObjectArray(o) => write!(f, "{o:?}"),
            Value::Graph(g) => write!(f, "{g:?}"),
        }
    }
}
