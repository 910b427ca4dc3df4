//! A response envelope read without building its envelope.
//!
//! A client decodes every reply into a value tree, envelope included,
//! only to compare the session ID, read the request ID and keep the
//! `result`: about 14 strings allocated per reply (every key, the IDs) and
//! thrown away. A response written in the layout servers write,
//!
//! ```text
//! {"t":"dict","v":[["version",1],["type","response"],["session_id",S],
//!  ["request_id",R],["resource_id",X],["operation_id",Y],["result",VALUE]]}
//! ```
//!
//! (no whitespace; `S` and `R` strings, `X` and `Y` strings or `null`, all
//! without escapes or control characters) is read here: the envelope's
//! texts borrowed from the header, `VALUE` parsed as [`decode`] parses it
//! there (depth 1, the same attachment cursor). For such a header the
//! general decoder gives the same tree (these bytes are one valid
//! envelope, its keys distinct); anything else, including a `VALUE` the
//! parser refuses, is `None`, and the caller decodes the frame as before,
//! which then gives the usual value or error.
//!
//! The client reads replies through [`KeptReplies`] (`reply_kept.rs`):
//! the same envelope, and a `VALUE` whose text is a kept one's but for its
//! scalars taken from the kept tree instead of parsed again.

use super::*;

#[path = "reply_kept.rs"]
mod kept;
pub(crate) use kept::KeptReplies;

/// What a response in the servers' layout holds, its texts borrowed.
pub(crate) struct Reply<'a> {
    /// The session ID.
    pub(crate) session_id: &'a str,
    /// The request ID.
    pub(crate) request_id: &'a str,
    /// The `result` value.
    pub(crate) result: Value,
}

/// Reads `frame` as a response in the servers' layout; `None` when it is
/// not one (see the module docs). The client reads replies through
/// [`KeptReplies::decode`], which gives the same; this is the plain path
/// the tests compare it with.
#[cfg(test)]
pub(crate) fn decode_reply(frame: &Bytes, max_message_size: usize) -> Option<Reply<'_>> {
    let (session_id, request_id, mut p) = envelope(frame, max_message_size)?;
    let result = p.value(1).ok()?;
    finish(&p)?;
    Some(Reply {
        session_id,
        request_id,
        result,
    })
}

/// The envelope of a response in the servers' layout up to its result: the
/// session ID, the request ID, and a parser at the start of `VALUE` (depth
/// 1, no attachment claimed yet).
fn envelope(frame: &Bytes, max_message_size: usize) -> Option<(&str, &str, Parser<'_>)> {
    let len = frame.len();
    if len > max_message_size || len < 4 {
        return None;
    }
    let header_len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    if header_len > len - 4 {
        return None;
    }
    let header = std::str::from_utf8(&frame[4..4 + header_len]).ok()?;
    let src = header.as_bytes();
    let mut at = 0;
    let literal = |at: &mut usize, text: &[u8]| -> Option<()> {
        src.get(*at..*at + text.len())
            .filter(|s| *s == text)
            .map(|_| *at += text.len())
    };
    literal(
        &mut at,
        br#"{"t":"dict","v":[["version",1],["type","response"],["session_id","#,
    )?;
    let session_id = plain(header, &mut at)?;
    literal(&mut at, br#"],["request_id","#)?;
    let request_id = plain(header, &mut at)?;
    literal(&mut at, br#"],["resource_id","#)?;
    plain_or_null(header, &mut at)?;
    literal(&mut at, br#"],["operation_id","#)?;
    plain_or_null(header, &mut at)?;
    literal(&mut at, br#"],["result","#)?;
    let p = Parser {
        src,
        text: header,
        pos: at,
        frame,
        attach_base: 4 + header_len,
        attach_len: len - 4 - header_len,
        cursor: 0,
        max_message_size,
        tree_bytes: 0,
        max_tree_bytes: usize::MAX,
    };
    Some((session_id, request_id, p))
}

/// The end of a response after its `VALUE`: the envelope closed, the
/// header and the attachments used up.
fn finish(p: &Parser<'_>) -> Option<()> {
    let end = p.pos.checked_add(3)?;
    (p.src.get(p.pos..end) == Some(b"]]}") && end == p.src.len() && p.cursor == p.attach_len)
        .then_some(())
}

/// A JSON string at `at` without escapes or control characters (the text
/// between its quotes); `at` moves past it.
fn plain<'a>(text: &'a str, at: &mut usize) -> Option<&'a str> {
    let s = text.as_bytes();
    if s.get(*at) != Some(&b'"') {
        return None;
    }
    let start = *at + 1;
    let end = plain_run(s, start);
    if s.get(end) != Some(&b'"') {
        return None;
    }
    *at = end + 1;
    // Quotes are ASCII: both ends are character boundaries.
    text.get(start..end)
}

/// [`plain`], or `null`.
fn plain_or_null<'a>(text: &'a str, at: &mut usize) -> Option<Option<&'a str>> {
    if text.as_bytes()[*at..].starts_with(b"null") {
        *at += 4;
        return Some(None);
    }
    plain(text, at).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Codec, Dict, NdArray};

    /// `decode_reply` gives what the general decoder gives, or nothing.
    fn agrees(frame: &Bytes) -> bool {
        let general = decode(frame.clone(), 1 << 24, usize::MAX).map(|(v, _)| v);
        let Some(reply) = decode_reply(frame, 1 << 24) else {
            return false;
        };
        let Ok(Value::Dict(d)) = general else {
            panic!("decode_reply read a frame the decoder refuses: {general:?}");
        };
        assert_eq!(
            d.get("session_id").and_then(Value::as_str),
            Some(reply.session_id)
        );
        assert_eq!(
            d.get("request_id").and_then(Value::as_str),
            Some(reply.request_id)
        );
        assert_eq!(d.get("type").and_then(Value::as_str), Some("response"));
        assert_eq!(d.get("version"), Some(&Value::Int(1)));
        assert_eq!(d.get("result"), Some(&reply.result));
        true
    }

    fn envelope(entries: Vec<(&str, Value)>) -> Bytes {
        let codec = Codec::new(1 << 24).expect("a codec");
        let refs: Vec<(&str, &Value)> = entries.iter().map(|(k, v)| (*k, v)).collect();
        Bytes::from(codec.encode_entries(&refs).expect("encoded"))
    }

    fn response(session: &str, request: &str, resource: Value, result: Value) -> Bytes {
        envelope(vec![
            ("version", Value::Int(1)),
            ("type", Value::from("response")),
            ("session_id", Value::from(session)),
            ("request_id", Value::from(request)),
            ("resource_id", resource),
            (
                "operation_id",
                Value::from("0123456789abcdef0123456789abcdef"),
            ),
            ("result", result),
        ])
    }

    /// The reference server's replies are in the same layout: its step
    /// reply (written by the reference codec, `tests/golden/step_result.bin`,
    /// `generate.py`) takes the fast path and reads as the decoder reads it.
    #[test]
    fn the_reference_servers_reply_takes_the_fast_path() {
        let frame = Bytes::from_static(include_bytes!("../../../tests/golden/step_result.bin"));
        assert!(
            agrees(&frame),
            "the reference's step reply was left to the decoder"
        );
    }

    #[test]
    fn servers_replies_are_read_as_the_decoder_reads_them() {
        let obs = NdArray::from_shape_vec(vec![8, 3], (0..24).map(|x| x as f32).collect())
            .expect("an array");
        let step = Value::Tuple(vec![
            Value::Array(obs),
            Value::Array(NdArray::from_vec(vec![0.5f64; 8])),
            Value::Array(NdArray::from_vec(vec![false; 8])),
            Value::Array(NdArray::from_vec(vec![true; 8])),
            Value::Dict(Dict::new()),
        ]);
        let result = |value: Value| {
            Value::Dict(
                Dict::new()
                    .with("value", value)
                    .with("descriptors", Value::List(Vec::new())),
            )
        };
        let read = [
            response("s1", "1f", Value::from("env"), result(step.clone())),
            response("s1", "ffffffffffffffff", Value::Null, result(Value::Null)),
            response(
                "s",
                "0",
                Value::from("r/x"),
                result(Value::from("text \"q\" \\ é")),
            ),
            response("s", "2", Value::from("r"), Value::Dict(Dict::new())),
            response("s", "2", Value::from("r"), Value::Float(1.5)),
        ];
        for frame in &read {
            assert!(agrees(frame), "read: {:?}", String::from_utf8_lossy(frame));
        }
        // Not in the layout (escaped IDs, another order, an error, another
        // version, a tagged ID, whitespace, trailing data): left to the
        // decoder.
        let skipped = [
            response("s\"", "1", Value::Null, Value::Null),
            response("s", "1\n", Value::Null, Value::Null),
            response("s", "1", Value::Int(3), Value::Null),
            response("s", "1", Value::from("é"), Value::Null),
            envelope(vec![
                ("version", Value::Int(1)),
                ("type", Value::from("error")),
                ("session_id", Value::from("s")),
                ("request_id", Value::from("1")),
                ("resource_id", Value::Null),
                ("operation_id", Value::Null),
                ("error", Value::Null),
            ]),
            envelope(vec![
                ("version", Value::Int(2)),
                ("type", Value::from("response")),
                ("session_id", Value::from("s")),
                ("request_id", Value::from("1")),
                ("resource_id", Value::Null),
                ("operation_id", Value::Null),
                ("result", Value::Null),
            ]),
            envelope(vec![
                ("type", Value::from("response")),
                ("version", Value::Int(1)),
                ("session_id", Value::from("s")),
                ("request_id", Value::from("1")),
                ("resource_id", Value::Null),
                ("operation_id", Value::Null),
                ("result", Value::Null),
            ]),
        ];
        for frame in &skipped {
            assert!(!agrees(frame), "skipped");
        }
        // The same bytes with a space, trailing data, a torn header, a
        // malformed value, an attachment too many: left to the decoder.
        let good = &read[0];
        let header_len = u32::from_be_bytes([good[0], good[1], good[2], good[3]]) as usize;
        let header = &good[4..4 + header_len];
        let rebuilt = |header: &[u8], attachments: &[u8]| {
            let mut f = (header.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(header);
            f.extend_from_slice(attachments);
            Bytes::from(f)
        };
        let attachments = &good[4 + header_len..];
        assert!(agrees(&rebuilt(header, attachments)));
        let mut spaced = header.to_vec();
        spaced.insert(1, b' ');
        assert!(!agrees(&rebuilt(&spaced, attachments)));
        let mut trailing = header.to_vec();
        trailing.push(b' ');
        assert!(!agrees(&rebuilt(&trailing, attachments)));
        let mut extra = attachments.to_vec();
        extra.push(0);
        assert!(decode_reply(&rebuilt(header, &extra), 1 << 24).is_none());
        assert!(decode_reply(&rebuilt(header, &attachments[1..]), 1 << 24).is_none());
        for cut in [1, 40, header_len / 2, header_len - 3, header_len - 1] {
            assert!(decode_reply(&rebuilt(&header[..cut], attachments), 1 << 24).is_none());
        }
        let mut broken = header.to_vec();
        let at = header_len - 10;
        broken[at] = b'{';
        assert!(decode_reply(&rebuilt(&broken, attachments), 1 << 24).is_none());
        assert!(decode_reply(good, 10).is_none(), "over the size limit");
    }
}
