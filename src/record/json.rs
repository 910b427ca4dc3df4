//! Value trees as the JSON text Python's `json` module reads: the space
//! documents (`space_to_json`) and metadata of a recording.
//!
//! Unlike strict JSON (and `serde_json`), non-finite floats are written as
//! `Infinity`, `-Infinity` and `NaN`, as Python's `json.dump` writes the
//! unbounded limits of a `BoxSpace` and `json.load` reads them back.

use crate::codec::Value;
use std::fmt::Write;

/// Writes `value` as JSON. Arrays, byte strings, object arrays and graphs
/// (which no space document holds) are written as `null`.
pub(crate) fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        Value::BigInt(b) => out.push_str(b.as_str()),
        Value::Float(f) => float(*f, out),
        Value::Str(s) => string(s, out),
        Value::List(items) | Value::Tuple(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(v, out);
            }
            out.push(']');
        }
        Value::Dict(d) => {
            out.push('{');
            for (i, (k, v)) in d.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string(k, out);
                out.push_str(": ");
                write(v, out);
            }
            out.push('}');
        }
        Value::Bytes(_) | Value::Array(_) | Value::ObjectArray(_) | Value::Graph(_) => {
            out.push_str("null")
        }
    }
}

/// `value` as JSON text.
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn float(f: f64, out: &mut String) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        // Shortest round-trip digits; always with a '.' or an exponent, so
        // that Python reads a float back.
        let mut buf = ryu::Buffer::new();
        out.push_str(buf.format_finite(f));
    }
}

/// A JSON string literal.
pub(crate) fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Dict;

    #[test]
    fn non_finite_floats_use_python_literals() {
        let v = Value::List(vec![
            Value::Float(f64::NEG_INFINITY),
            Value::Float(f64::INFINITY),
            Value::Float(f64::NAN),
            Value::Float(1.0),
            Value::Float(0.1),
        ]);
        assert_eq!(to_string(&v), "[-Infinity, Infinity, NaN, 1.0, 0.1]");
    }

    #[test]
    fn dicts_and_strings_are_escaped() {
        let d = Dict::new().with("a\"b", "x\ny").with(
            "t",
            Value::Tuple(vec![Value::Int(3), Value::Null, Value::Bool(true)]),
        );
        assert_eq!(
            to_string(&Value::Dict(d)),
            "{\"a\\\"b\": \"x\\ny\", \"t\": [3, null, true]}"
        );
    }
}
