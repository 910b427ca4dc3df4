//! Call requests written from a kept template.
//!
//! From one vector step to the next, an env's `step` request differs only
//! in its request ID, its operation ID and its action's bytes: the header
//! names the same session, resource, method and action dtype and shape.
//! So the first such request of a connection is encoded as usual with two
//! sentinel texts in place of the IDs, the header is kept cut around them,
//! and later requests of the same resource, method, dtype and shape are
//! the kept pieces with the IDs in between and the action's bytes after:
//! the bytes [`Codec::encode_entries`](crate::codec::Codec) gives for them
//! (checked when the template is made: the sentinels occur once each, and
//! the attachments are the action's bytes as they are). Anything else (other
//! arguments, keywords, an action that is not one array) is encoded as
//! before.

use crate::codec::{Codec, CodecError, DType, Dict, Value};
use crate::protocol::Op;
use bytes::{BufMut, Bytes, BytesMut};
use rustc_hash::FxBuildHasher;
use std::collections::HashMap;

/// Stands for the request ID while a template is made (16 characters, as
/// long as the longest hexadecimal request ID, never one: not hexadecimal).
const REQUEST: &str = "request-id-here!";
/// Stands for the operation ID (32 characters, not hexadecimal).
const OPERATION: &str = "operation-id-goes-here-32-chars!";

/// What a template fits, beside its resource: a call of `method` whose
/// only argument is an array of `dtype` and `shape`, without keywords.
#[derive(PartialEq, Eq)]
struct Key {
    method: String,
    dtype: DType,
    shape: Vec<usize>,
}

/// A call request's header cut around its request ID and operation ID.
struct Template {
    key: Key,
    /// `None`: the plain encoding did not have the expected form.
    pieces: Option<[Vec<u8>; 3]>,
}

/// A connection's call templates (one per resource and method in use),
/// found by resource ID: a request costs the same whatever the number of
/// resources the connection calls.
#[derive(Default)]
pub(super) struct CallTemplates {
    kept: HashMap<String, Vec<Template>, FxBuildHasher>,
    /// Templates in `kept`.
    count: usize,
}

/// How many templates a connection keeps (past it, an arbitrary
/// resource's are dropped).
const CAPACITY: usize = 4096;

/// The array argument and the operation ID of a call's parameters when
/// they have the templated form: `method`, `args` (one array), `kwargs`
/// (empty), `operation_id` (a string).
fn templated<'p>(params: &[(&str, &'p Value)]) -> Option<(&'p str, &'p Value, &'p str)> {
    let [("method", method), ("args", args), ("kwargs", kwargs), ("operation_id", op)] = params
    else {
        return None;
    };
    let method = method.as_str()?;
    let Value::Tuple(args) = args else {
        return None;
    };
    let [action @ Value::Array(_)] = args.as_slice() else {
        return None;
    };
    let kwargs: &Dict = kwargs.as_dict()?;
    if !kwargs.is_empty() {
        return None;
    }
    Some((method, action, op.as_str()?))
}

impl CallTemplates {
    /// The frame of a call request of session `session` (its request ID
    /// `request_id`, hexadecimal), written from a template when the
    /// parameters fit one; `None` to encode it as usual.
    pub(super) fn encode(
        &mut self,
        codec: &Codec,
        session: &Value,
        request_id: &str,
        resource_id: &str,
        params: &[(&str, &Value)],
    ) -> Option<Bytes> {
        let (method, action, operation_id) = templated(params)?;
        let array = action.as_array()?;
        if request_id.len() > REQUEST.len() || operation_id.len() != OPERATION.len() {
            return None;
        }
        let fits = |t: &Template| {
            t.key.method == method && t.key.dtype == array.dtype() && t.key.shape == array.shape()
        };
        let found = self
            .kept
            .get(resource_id)
            .and_then(|ts| ts.iter().position(fits));
        let at = match found {
            Some(at) => at,
            None => {
                if self.count >= CAPACITY {
                    let evicted = self.kept.keys().next().cloned();
                    if let Some(dropped) = evicted.and_then(|id| self.kept.remove(&id)) {
                        self.count -= dropped.len();
                    }
                }
                let pieces = make(codec, session, resource_id, params, array.as_bytes());
                let ts = self.kept.entry(resource_id.to_string()).or_default();
                ts.push(Template {
                    key: Key {
                        method: method.to_string(),
                        dtype: array.dtype(),
                        shape: array.shape().to_vec(),
                    },
                    pieces,
                });
                self.count += 1;
                ts.len() - 1
            }
        };
        let [a, b, c] = self.kept.get(resource_id)?.get(at)?.pieces.as_ref()?;
        let data = array.as_bytes();
        let header = a.len() + request_id.len() + b.len() + operation_id.len() + c.len();
        let total = 4 + header + data.len();
        if total > codec.max_message_size() {
            return None;
        }
        let mut out = BytesMut::with_capacity(total);
        out.put_u32(u32::try_from(header).ok()?);
        out.put_slice(a);
        out.put_slice(request_id.as_bytes());
        out.put_slice(b);
        out.put_slice(operation_id.as_bytes());
        out.put_slice(c);
        out.put_slice(data);
        Some(out.freeze())
    }
}

/// A request's frame as the codec encodes it: the envelope's leading
/// entries (`request_id` in hexadecimal), then `params`.
pub(super) fn plain_request(
    codec: &Codec,
    session: Value,
    request_id: u64,
    op: Op,
    resource_id: Option<&str>,
    params: &[(&str, &Value)],
) -> Result<Vec<u8>, CodecError> {
    let head = crate::protocol::request_head(
        op.as_str(),
        Value::Str(format!("{request_id:x}")),
        session,
        resource_id,
    );
    let mut entries: Vec<(&str, &Value)> = Vec::with_capacity(head.len() + params.len());
    entries.extend(head.iter().map(|(k, v)| (*k, v)));
    entries.extend_from_slice(params);
    codec.encode_entries(&entries)
}

/// Encodes the request with the sentinels for its IDs and cuts its header
/// around them; `None` unless each sentinel occurs once, quoted, the
/// request ID's first, and the attachments are exactly `data`.
fn make(
    codec: &Codec,
    session: &Value,
    resource_id: &str,
    params: &[(&str, &Value)],
    data: &[u8],
) -> Option<[Vec<u8>; 3]> {
    let head = crate::protocol::request_head(
        Op::Call.as_str(),
        Value::from(REQUEST),
        session.clone(),
        Some(resource_id),
    );
    let operation = Value::from(OPERATION);
    let mut entries: Vec<(&str, &Value)> = Vec::with_capacity(head.len() + params.len());
    entries.extend(head.iter().map(|(k, v)| (*k, v)));
    for (k, v) in params {
        entries.push((k, if *k == "operation_id" { &operation } else { v }));
    }
    let frame = codec.encode_entries(&entries).ok()?;
    let header_len = u32::from_be_bytes(frame.get(..4)?.try_into().ok()?) as usize;
    let header = frame.get(4..4 + header_len)?;
    if frame.get(4 + header_len..)? != data {
        return None;
    }
    let quoted = |s: &str| format!("\"{s}\"").into_bytes();
    let (r, o) = (quoted(REQUEST), quoted(OPERATION));
    let once = |needle: &[u8]| -> Option<usize> {
        let mut hits = header.windows(needle.len()).enumerate();
        let (at, _) = hits.find(|(_, w)| *w == needle)?;
        hits.all(|(_, w)| w != needle).then_some(at + 1)
    };
    let (ra, oa) = (once(&r)?, once(&o)?);
    if ra + REQUEST.len() >= oa {
        return None;
    }
    Some([
        header[..ra].to_vec(),
        header[ra + REQUEST.len()..oa].to_vec(),
        header[oa + OPERATION.len()..].to_vec(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::NdArray;

    fn array(dtype: &str, shape: &[usize], seed: u8) -> Value {
        let dtype = DType::parse(dtype).expect("a dtype");
        let n = shape.iter().product::<usize>() * dtype.itemsize();
        let data: Vec<u8> = (0..n)
            .map(|i| seed.wrapping_add((i as u8).wrapping_mul(13)) & 1)
            .collect();
        Value::Array(
            NdArray::from_bytes(dtype, shape.to_vec(), Bytes::from(data)).expect("an array"),
        )
    }

    /// Every request, through the templates and plainly: the same bytes.
    #[test]
    fn templated_requests_are_the_plain_encoding() {
        let codec = Codec::new(1 << 20).expect("a codec");
        let session = Value::from("c699e69c4494ba0c2934a9e7f270d282");
        let mut templates = CallTemplates::default();
        let empty = Value::Dict(Dict::new());
        let some = Value::Dict(Dict::new().with("seed", 3));
        let op = |i: u64| Value::from(format!("{:032x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        let actions = [
            array("<f4", &[8, 1], 1),
            array("<f4", &[8, 1], 2),
            array("<f4", &[1], 3),
            array("<f8", &[2, 3], 4),
            array(">f4", &[4], 5),
            array("|b1", &[3], 6),
            array("<i8", &[], 7),
            array("|u1", &[0], 8),
        ];
        let mut templated = 0;
        for (n, request_id) in [1u64, 15, 16, 255, 4096, 0xdead_beef, u64::MAX]
            .iter()
            .enumerate()
        {
            for (resource, method) in [
                ("pendulum_batch", "step"),
                ("env/with \"quotes\" and \\", "step"),
                ("e\u{e9}", "render"),
                (OPERATION, "step"),
                ("r", REQUEST),
            ] {
                for action in &actions {
                    let operation_id = op(request_id.wrapping_add(n as u64));
                    let one = Value::Tuple(vec![action.clone()]);
                    let two = Value::Tuple(vec![action.clone(), Value::Int(1)]);
                    let scalar = Value::Tuple(vec![Value::Float(0.5)]);
                    let cases: [(&Value, &Value); 4] = [
                        (&one, &empty),
                        (&one, &some),
                        (&two, &empty),
                        (&scalar, &empty),
                    ];
                    for (args, kwargs) in cases {
                        let method = Value::from(method);
                        let params: [(&str, &Value); 4] = [
                            ("method", &method),
                            ("args", args),
                            ("kwargs", kwargs),
                            ("operation_id", &operation_id),
                        ];
                        let plain = plain_request(
                            &codec,
                            session.clone(),
                            *request_id,
                            Op::Call,
                            Some(resource),
                            &params,
                        )
                        .expect("encoded");
                        let id = format!("{request_id:x}");
                        if let Some(frame) =
                            templates.encode(&codec, &session, &id, resource, &params)
                        {
                            templated += 1;
                            assert_eq!(
                                frame.as_ref(),
                                plain.as_slice(),
                                "{resource} {method:?} {action:?} {request_id}"
                            );
                        }
                    }
                }
            }
        }
        // The usual calls did go through templates; sentinel look-alikes,
        // keywords and other arguments did not.
        assert!(templated >= 7 * 3 * actions.len(), "{templated} templated");
        assert!(templated < 7 * 5 * actions.len() * 4);
    }

    /// Many resources taking turns on one connection (single-env resources
    /// of a vector env) each keep their template: after the first round no
    /// template is made again, and every request is still the plain bytes.
    #[test]
    fn every_resource_of_a_connection_keeps_its_template() {
        let codec = Codec::new(1 << 20).expect("a codec");
        let session = Value::from("c699e69c4494ba0c2934a9e7f270d282");
        let mut templates = CallTemplates::default();
        let kwargs = Value::Dict(Dict::new());
        let method = Value::from("step");
        let ids: Vec<String> = (0..300).map(|i| format!("pendulum{i}")).collect();
        for round in 0..3u64 {
            for (i, resource) in ids.iter().enumerate() {
                let request_id = round * 1000 + i as u64 + 1;
                let operation_id = Value::from(format!("{request_id:032x}"));
                let args = Value::Tuple(vec![array("<f4", &[1], i as u8)]);
                let params: [(&str, &Value); 4] = [
                    ("method", &method),
                    ("args", &args),
                    ("kwargs", &kwargs),
                    ("operation_id", &operation_id),
                ];
                let plain = plain_request(
                    &codec,
                    session.clone(),
                    request_id,
                    Op::Call,
                    Some(resource),
                    &params,
                )
                .expect("encoded");
                let frame = templates
                    .encode(
                        &codec,
                        &session,
                        &format!("{request_id:x}"),
                        resource,
                        &params,
                    )
                    .expect("templated");
                assert_eq!(frame.as_ref(), plain.as_slice(), "{resource} round {round}");
            }
            assert_eq!(templates.count, ids.len(), "one template per resource");
            assert_eq!(templates.kept.len(), ids.len());
        }
    }
}
