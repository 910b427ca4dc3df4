//! The messages between the viewer and its page.
//!
//! Viewer → page: one binary WebSocket message per event, laid out as a
//! 4-byte big-endian header length, a UTF-8 JSON header, zero padding to a
//! multiple of 8 bytes, then a blob holding the elements of every array the
//! header refers to. An array appears in the header as
//! `{"$nd": {"dtype", "shape", "type", "offset", "length"}}`: `type` is the
//! element type of its bytes in the blob (`u8` for `uint8` and `bool`,
//! `f32` for `float32`, `f64` for everything else, converted; little-endian),
//! `offset` (a multiple of 8) and `length` (elements) locate them. Non-finite
//! floats are `{"$float": "nan" | "inf" | "-inf"}`, byte strings
//! `{"$bytes": LENGTH}`, tuples `{"$tuple": [...]}`, object arrays
//! `{"$object": {"shape", "values"}}` and graphs `{"$graph": {...}}`.
//!
//! Header `type`s: `upstream` (`state`: `connected` with the server's name,
//! version and session, `lost`, or `unreachable` with `code` and
//! `message`), `resources` (`descriptors`), `subscribed` (`panel`,
//! `descriptor`), `snapshot` and `render` (`panel`, `resource`, `kind`,
//! `sequence`, `timestamp_ns`, `revision`, `data`, `descriptor`; a snapshot
//! also says whether its panel is `gated`), `stale` (`panel`, the latest
//! `sequence` and the one `shown`), `subscription_error`, `render_error` and
//! `ended` (`panel`, `code`, `message`), and `error` (a page command the
//! viewer could not read).
//!
//! Page → viewer: binary messages holding one JSON object each (the
//! viewer's WebSocket layer refuses text messages), with `op`: `subscribe`
//! (`panel`, `resource`, optional `fields`), `unsubscribe` (`panel`),
//! `ready` (`panel`: one credit), `render` (`panel`, `resource`) and
//! `refresh`.

use crate::codec::{ScalarKind, Value};
use serde_json::{json, Map, Value as Json};

/// A message under construction: its header and its blob.
#[derive(Debug, Default)]
pub struct Frame {
    blob: Vec<u8>,
}

impl Frame {
    /// An empty frame.
    pub fn new() -> Frame {
        Frame::default()
    }

    /// `value` as header JSON; its arrays' elements go to the blob.
    pub fn value(&mut self, value: &Value) -> Json {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => json!(i),
            Value::UInt(u) => json!(u),
            // Beyond 64 bits: the decimal digits, shown as they are.
            Value::BigInt(b) => Json::String(b.as_str().to_string()),
            Value::Float(f) => float(*f),
            Value::Str(s) => Json::String(s.clone()),
            Value::Bytes(b) => json!({ "$bytes": b.len() }),
            Value::Array(a) => {
                let (kind, offset, length) = self.push_array(a);
                json!({ "$nd": {
                    "dtype": a.dtype().name(),
                    "shape": a.shape(),
                    "type": kind,
                    "offset": offset,
                    "length": length,
                }})
            }
            Value::List(items) => Json::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Tuple(items) => {
                json!({ "$tuple": items.iter().map(|v| self.value(v)).collect::<Vec<_>>() })
            }
            Value::Dict(d) => {
                let mut map = Map::new();
                for (k, v) in d.iter() {
                    map.insert(k.to_string(), self.value(v));
                }
                Json::Object(map)
            }
            Value::ObjectArray(o) => {
                let values: Vec<Json> = o.values().iter().map(|v| self.value(v)).collect();
                json!({ "$object": { "shape": o.shape(), "values": values } })
            }
            Value::Graph(g) => json!({ "$graph": {
                "n_nodes": self.value(&g.n_nodes),
                "n_edges": self.value(&g.n_edges),
                "nodes_features": self.value(&g.nodes_features),
                "edges_features": self.value(&g.edges_features),
            }}),
        }
    }

    /// Appends an array's elements (aligned to 8 bytes); returns the element
    /// type, the offset and the element count.
    fn push_array(&mut self, a: &crate::codec::NdArray) -> (&'static str, usize, usize) {
        let pad = (8 - self.blob.len() % 8) % 8;
        self.blob.extend(std::iter::repeat_n(0u8, pad));
        let offset = self.blob.len();
        let dtype = a.dtype();
        let length = a.len();
        if dtype.itemsize() == 1 && matches!(dtype.kind(), ScalarKind::UInt | ScalarKind::Bool) {
            self.blob.extend_from_slice(a.as_bytes());
            return ("u8", offset, length);
        }
        if dtype.kind() == ScalarKind::Float && dtype.itemsize() == 4 {
            let native = a.to_native();
            if let Ok(values) = native.to_vec::<f32>() {
                self.blob.reserve(values.len() * 4);
                for x in values {
                    self.blob.extend_from_slice(&x.to_le_bytes());
                }
                return ("f32", offset, length);
            }
        }
        let values = a.to_f64_vec();
        self.blob.reserve(values.len() * 8);
        for x in &values {
            self.blob.extend_from_slice(&x.to_le_bytes());
        }
        ("f64", offset, values.len())
    }

    /// The whole message: length, header, padding, blob.
    pub fn finish(self, header: &Json) -> (Vec<u8>, Vec<u8>) {
        let text = header.to_string();
        let mut head = Vec::with_capacity(text.len() + 12);
        head.extend_from_slice(&(text.len() as u32).to_be_bytes());
        head.extend_from_slice(text.as_bytes());
        let pad = (8 - head.len() % 8) % 8;
        head.extend(std::iter::repeat_n(0u8, pad));
        (head, self.blob)
    }
}

/// A float as JSON (non-finite values tagged).
fn float(f: f64) -> Json {
    if f.is_nan() {
        json!({ "$float": "nan" })
    } else if f.is_infinite() {
        json!({ "$float": if f > 0.0 { "inf" } else { "-inf" } })
    } else {
        json!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::NdArray;
    use crate::dict;

    fn parse(head: &[u8]) -> Json {
        let n = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        serde_json::from_slice(&head[4..4 + n]).expect("header JSON")
    }

    #[test]
    fn arrays_go_to_the_aligned_blob() {
        let image = NdArray::from_shape_vec(vec![2, 2, 3], (0u8..12).collect()).expect("image");
        let value = Value::Dict(dict! {
            "image" => Value::Array(image),
            "reward" => f64::NAN,
            "state" => Value::Array(NdArray::from_vec(vec![1.5f32, -2.0])),
            "count" => Value::Array(NdArray::from_vec(vec![7i64])),
            "pair" => Value::Tuple(vec![Value::bytes(vec![1u8, 2, 3]), Value::Null]),
        });
        let mut frame = Frame::new();
        let data = frame.value(&value);
        let (head, blob) = frame.finish(&json!({ "data": data }));
        assert_eq!(head.len() % 8, 0);
        let header = parse(&head);
        let image = &header["data"]["image"]["$nd"];
        assert_eq!(image["type"], "u8");
        assert_eq!(image["shape"], json!([2, 2, 3]));
        let at = image["offset"].as_u64().expect("offset") as usize;
        assert_eq!(&blob[at..at + 12], &(0u8..12).collect::<Vec<_>>()[..]);
        let state = &header["data"]["state"]["$nd"];
        assert_eq!(state["type"], "f32");
        let at = state["offset"].as_u64().expect("offset") as usize;
        assert_eq!(at % 8, 0);
        assert_eq!(&blob[at..at + 4], &1.5f32.to_le_bytes());
        let count = &header["data"]["count"]["$nd"];
        assert_eq!(count["type"], "f64");
        let at = count["offset"].as_u64().expect("offset") as usize;
        assert_eq!(&blob[at..at + 8], &7.0f64.to_le_bytes());
        assert_eq!(header["data"]["reward"], json!({ "$float": "nan" }));
        assert_eq!(
            header["data"]["pair"],
            json!({ "$tuple": [{ "$bytes": 3 }, null] })
        );
    }
}
