//! Human-readable printing of value trees: nested containers indented,
//! arrays summarized by dtype, shape and a few values.

use crate::codec::{NdArray, Value};
use std::fmt::Write;

/// How many array elements a summary shows.
const SHOWN: usize = 6;

/// A one-line summary of an array: `float32 (84, 84, 3) [0.0, 1.0, … ]`.
pub fn array_summary(a: &NdArray) -> String {
    let shape: Vec<String> = a.shape().iter().map(ToString::to_string).collect();
    let shape = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.join(", ")),
    };
    let order = match a.dtype().byte_order() {
        Some(o) if !a.dtype().is_native() => format!(" {o:?}-endian"),
        _ => String::new(),
    };
    let n = a.len();
    let mut values: Vec<String> = (0..n.min(SHOWN))
        .filter_map(|i| a.format_element(i))
        .collect();
    if n > SHOWN {
        values.push(format!("… {} more", n - SHOWN));
    }
    let mut stats = String::new();
    if n > SHOWN && a.dtype().kind() != crate::codec::ScalarKind::Complex {
        let v = a.to_f64_vec();
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = v.iter().sum::<f64>() / n as f64;
        stats = format!("  min {min} max {max} mean {mean:.4}");
    }
    format!(
        "{}{order} {shape} [{}]{stats}",
        a.dtype().name(),
        values.join(", ")
    )
}

/// Writes `value` indented by `indent` levels.
pub fn pretty(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out
}

fn pad(out: &mut String, indent: usize) {
    for _ in 0..indent {
        out.push_str("  ");
    }
}

fn is_simple(v: &Value) -> bool {
    match v {
        Value::List(items) | Value::Tuple(items) => items.len() <= 8 && items.iter().all(is_scalar),
        Value::Dict(d) => d.is_empty(),
        other => is_scalar(other) || matches!(other, Value::Array(_)),
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(
        v,
        Value::List(_)
            | Value::Tuple(_)
            | Value::Dict(_)
            | Value::ObjectArray(_)
            | Value::Graph(_)
            | Value::Array(_)
    )
}

fn write_value(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Array(a) => out.push_str(&array_summary(a)),
        v if is_simple(v) => {
            let _ = write!(out, "{v}");
        }
        Value::List(items) | Value::Tuple(items) => {
            let (open, close) = if matches!(v, Value::List(_)) {
                ("[", "]")
            } else {
                ("(", ")")
            };
            out.push_str(open);
            out.push('\n');
            for item in items {
                pad(out, indent + 1);
                write_value(out, item, indent + 1);
                out.push_str(",\n");
            }
            pad(out, indent);
            out.push_str(close);
        }
        Value::Dict(d) => {
            out.push_str("{\n");
            for (k, item) in d.iter() {
                pad(out, indent + 1);
                let _ = write!(out, "{k:?}: ");
                write_value(out, item, indent + 1);
                out.push_str(",\n");
            }
            pad(out, indent);
            out.push('}');
        }
        Value::ObjectArray(o) => {
            let _ = writeln!(out, "object_array(shape={:?}) [", o.shape());
            for item in o.values() {
                pad(out, indent + 1);
                write_value(out, item, indent + 1);
                out.push_str(",\n");
            }
            pad(out, indent);
            out.push(']');
        }
        Value::Graph(g) => {
            out.push_str("GraphInstance(\n");
            for (k, item) in g.fields() {
                pad(out, indent + 1);
                let _ = write!(out, "{k}=");
                write_value(out, item, indent + 1);
                out.push_str(",\n");
            }
            pad(out, indent);
            out.push(')');
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// A one-line summary of `value`: scalars as Python prints them, arrays via
/// [`array_summary`], containers with their items summarized likewise, and
/// anything longer than `width` characters cut with `…`.
pub fn compact(value: &Value, width: usize) -> String {
    let mut out = String::new();
    write_compact(&mut out, value);
    if out.chars().count() > width {
        let mut cut: String = out.chars().take(width.saturating_sub(1)).collect();
        cut.push('…');
        return cut;
    }
    out
}

fn write_compact(out: &mut String, v: &Value) {
    let items = |out: &mut String, items: &[Value]| {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_compact(out, item);
        }
    };
    match v {
        Value::Array(a) => out.push_str(&array_summary(a)),
        Value::List(v) => {
            out.push('[');
            items(out, v);
            out.push(']');
        }
        Value::Tuple(v) => {
            out.push('(');
            items(out, v);
            out.push_str(if v.len() == 1 { ",)" } else { ")" });
        }
        Value::Dict(d) => {
            out.push('{');
            for (i, (k, item)) in d.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{k}: ");
                write_compact(out, item);
            }
            out.push('}');
        }
        Value::ObjectArray(o) => {
            let _ = write!(out, "object_array(shape={:?})", o.shape());
        }
        Value::Graph(g) => {
            out.push_str("GraphInstance(");
            for (i, (k, item)) in g.fields().iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{k}=");
                write_compact(out, item);
            }
            out.push(')');
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// Re-indents compact JSON text (two spaces per level), leaving every token
/// exactly as written.
pub fn indent_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                if matches!(chars.peek(), Some('}') | Some(']')) {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                    continue;
                }
                depth += 1;
                out.push('\n');
                out.push_str(&"  ".repeat(depth));
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                out.push('\n');
                out.push_str(&"  ".repeat(depth));
                out.push(c);
            }
            ',' => {
                out.push(c);
                out.push('\n');
                out.push_str(&"  ".repeat(depth));
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// A plain text table: the header, then one line per row; columns two
/// spaces apart, each as wide as its widest cell (in characters),
/// left-aligned unless `right` says so; the last column is not padded.
pub fn table<const N: usize>(header: [&str; N], rows: &[[String; N]], right: [bool; N]) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; N]| {
        for (i, cell) in cells.into_iter().enumerate() {
            if i + 1 == N {
                out.push_str(cell);
                break;
            }
            let pad = std::iter::repeat_n(' ', widths[i].saturating_sub(cell.chars().count()));
            if right[i] {
                out.extend(pad);
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.extend(pad);
            }
            out.push_str("  ");
        }
        out.push('\n');
    };
    line(header);
    for row in rows {
        line(std::array::from_fn(|i| row[i].as_str()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict;

    /// Columns as wide as their widest cell in characters, aligned as asked,
    /// two spaces apart, the last one unpadded.
    #[test]
    fn tables_align_their_columns() {
        let rows = [
            ["é".to_string(), "7".to_string(), "last".to_string()],
            ["long".to_string(), "12345".to_string(), "x".to_string()],
        ];
        assert_eq!(
            table(["ID", "N", "TAIL"], &rows, [false, true, false]),
            "ID        N  TAIL\né         7  last\nlong  12345  x\n"
        );
        assert_eq!(table(["A", "B"], &[], [false, false]), "A  B\n");
    }

    #[test]
    fn summaries() {
        let a = NdArray::from_vec((0..10).map(|i| i as f32).collect());
        let s = array_summary(&a);
        assert!(
            s.starts_with("float32 (10,) [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, … 4 more]"),
            "{s}"
        );
        assert!(s.contains("mean 4.5"), "{s}");
        let v = Value::from(dict! { "a" => 1, "b" => Value::list([1, 2]) });
        assert_eq!(pretty(&v), "{\n  \"a\": 1,\n  \"b\": [1, 2],\n}");
    }

    #[test]
    fn compact_lines() {
        let v = Value::from(dict! {
            "position" => NdArray::from_vec(vec![0.5f32, -1.0]),
            "pair" => Value::tuple([1]),
            "flag" => true,
        });
        assert_eq!(
            compact(&v, 200),
            "{position: float32 (2,) [0.5, -1.0], pair: (1,), flag: True}"
        );
        let cut = compact(&v, 10);
        assert_eq!(cut.chars().count(), 10);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn json_indentation_keeps_tokens() {
        let s = indent_json(r#"{"t":"list","v":[1,"a,b",{"t":"dict","v":[]}]}"#);
        assert!(s.contains("\"a,b\""));
        assert!(s.contains("\"v\": []"));
    }
}

/// A value tree as plain JSON for scripts (`--json` of `discover` and
/// `call`): dicts are objects, lists and tuples arrays, numeric arrays nested
/// lists in C order (complex elements `[re, im]`), object arrays nested
/// lists, graphs objects, bytes `{"base64": "…"}`, integers beyond 64 bits
/// their decimal digits as a string, and non-finite floats the strings
/// `"nan"`, `"inf"`, `"-inf"` (JSON has no such numbers).
pub fn to_plain_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    let float = |f: f64| {
        if f.is_finite() {
            serde_json::Number::from_f64(f).map_or(J::Null, J::Number)
        } else if f.is_nan() {
            J::from("nan")
        } else if f > 0.0 {
            J::from("inf")
        } else {
            J::from("-inf")
        }
    };
    match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        // Beyond 64 bits JSON readers lose precision: the decimal digits.
        Value::BigInt(b) => J::from(b.as_str()),
        Value::Float(f) => float(*f),
        Value::Str(s) => J::from(s.as_str()),
        Value::Bytes(b) => {
            let mut o = serde_json::Map::new();
            o.insert("base64".into(), J::from(base64_encode(b)));
            J::Object(o)
        }
        Value::List(items) | Value::Tuple(items) => {
            J::Array(items.iter().map(to_plain_json).collect())
        }
        Value::Dict(d) => J::Object(
            d.iter()
                .map(|(k, v)| (k.to_string(), to_plain_json(v)))
                .collect(),
        ),
        Value::Array(a) => {
            use crate::codec::ScalarKind;
            let elements: Vec<J> = match a.dtype().kind() {
                ScalarKind::Complex => (0..a.len())
                    .map(|i| {
                        a.get_complex(i)
                            .map_or(J::Null, |(re, im)| J::Array(vec![float(re), float(im)]))
                    })
                    .collect(),
                ScalarKind::Bool => a
                    .to_f64_vec()
                    .into_iter()
                    .map(|x| J::Bool(x != 0.0))
                    .collect(),
                ScalarKind::Int | ScalarKind::UInt => (0..a.len())
                    .map(|i| {
                        a.format_element(i)
                            .and_then(|t| t.parse::<serde_json::Number>().ok())
                            .map_or(J::Null, J::Number)
                    })
                    .collect(),
                ScalarKind::Float => a.to_f64_vec().into_iter().map(float).collect(),
            };
            nest(elements, a.shape())
        }
        Value::ObjectArray(o) => nest(o.values().iter().map(to_plain_json).collect(), o.shape()),
        Value::Graph(g) => {
            let mut o = serde_json::Map::new();
            o.insert("n_nodes".into(), to_plain_json(&g.n_nodes));
            o.insert("n_edges".into(), to_plain_json(&g.n_edges));
            o.insert("nodes_features".into(), to_plain_json(&g.nodes_features));
            o.insert("edges_features".into(), to_plain_json(&g.edges_features));
            o.insert("edges".into(), to_plain_json(&g.edges));
            J::Object(o)
        }
    }
}

/// Nests C-order elements by `shape` (a scalar shape gives the element).
fn nest(elements: Vec<serde_json::Value>, shape: &[usize]) -> serde_json::Value {
    match shape {
        [] => elements
            .into_iter()
            .next()
            .unwrap_or(serde_json::Value::Null),
        [_] => serde_json::Value::Array(elements),
        [_, rest @ ..] => {
            let inner: usize = rest.iter().product();
            if inner == 0 {
                return serde_json::Value::Array(
                    (0..shape[0]).map(|_| nest(Vec::new(), rest)).collect(),
                );
            }
            let mut out = Vec::with_capacity(shape[0]);
            let mut it = elements.into_iter();
            for _ in 0..shape[0] {
                let chunk: Vec<serde_json::Value> = it.by_ref().take(inner).collect();
                out.push(nest(chunk, rest));
            }
            serde_json::Value::Array(out)
        }
    }
}

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod plain_json_tests {
    use super::*;

    #[test]
    fn plain_json_of_values() {
        let a = NdArray::from_shape_vec(vec![2, 2], vec![1.0f32, f32::NAN, 3.0, 4.0]).unwrap();
        let mut d = crate::codec::Dict::new();
        d.insert("obs", Value::Array(a));
        d.insert("ok", true);
        d.insert("raw", Value::Bytes(bytes::Bytes::from_static(b"hi!")));
        let j = to_plain_json(&Value::Dict(d));
        assert_eq!(
            j.to_string(),
            r#"{"obs":[[1.0,"nan"],[3.0,4.0]],"ok":true,"raw":{"base64":"aGkh"}}"#
        );
        assert_eq!(base64_encode(b"ab"), "YWI=");
    }
}
