//! A session's repeated requests decoded from a kept tree.
//!
//! From one env step to the next, a client's `step` request differs only in
//! its request ID, its operation ID and its action's bytes (the client
//! writes it from a template, `client::template`). The server decoded every
//! such request from scratch: ~12.5k instructions, a fifth of what a request
//! costs it beyond the simulator. A request in the layout our clients
//! write,
//!
//! ```text
//! {"t":"dict","v":[["version",1],["type","request"],["request_id","R"],
//!  ...MIDDLE...,["operation_id","O"]]}
//! ```
//!
//! (`R` and `O` without escapes, quotes or control characters) is kept
//! here, after [`decode`] decoded it, as its header cut around `R` and `O`,
//! its tree and its tree estimate (one per header shape: a vector env's
//! connection steps several resources). A later frame of the same session
//! whose header is a kept one with other plain texts in place of `R` and `O`,
//! and whose attachment section has the same length, is the kept tree with
//! those two strings replaced and its arrays and byte strings sliced out of
//! the new frame at the same places. That is the tree [`decode`] gives for
//! it: the two headers tokenize alike (a plain run inside a string token
//! does not change where any token starts or ends; the run after the prefix
//! is the content of the request ID's string, the run before the closing
//! `"]]}` the content of the last entry's string), so the parse, every
//! check and the attachments' offsets and lengths are the same, and the
//! estimate differs by the two strings' lengths. Anything else is decoded
//! as before (and becomes the kept request if it has the layout). Where the kept tree's
//! attachments lie is checked when it is kept, not assumed: in tree order,
//! back to back from the attachment section's start.

use super::kept_tree::{owned_attachments, reslice};
use super::*;

/// Frames larger than this are never kept (a kept request holds a copy of
/// its header, attachments and tree).
const KEEP_MAX_FRAME: usize = 1024;

/// Kept requests per session: one per resource and method in use (a vector
/// env's connection steps up to one resource per env), at most this many;
/// once full, nothing more is kept (no churn of copies when a connection
/// steps more resources than this).
const CAPACITY: usize = 16;

/// What every kept request's header starts with, up to the request ID's text.
const PREFIX: &[u8] = br#"{"t":"dict","v":[["version",1],["type","request"],["request_id",""#;

/// How a kept request's header ends, after the operation ID's text.
const SUFFIX: &[u8] = br#""]]}"#;

/// How the entry before the operation ID's text starts.
const OPERATION: &[u8] = br#"],["operation_id",""#;

/// A session's requests in the kept layout (see the module docs), one per
/// header shape (resource, method, action dtype and shape), at most
/// [`CAPACITY`].
///
/// What a kept request holds (its header piece, attachments and tree, by
/// [`Kept::bytes`]) is reserved, when the template has a [`Reserve`]
/// ([`RequestTemplate::reserving`]: the server charges the session's byte
/// account), and given back when the kept request is dropped (the template
/// with its session). A refused reservation leaves the request unkept: the
/// frame is decoded by the general decoder as any other.
#[derive(Default)]
pub(crate) struct RequestTemplate {
    kept: Vec<Kept>,
    reserve: Option<Reserve>,
}

/// What holds a kept request's bytes reserved; dropped with it.
pub(crate) type Held = Box<dyn Send>;

/// Reserves the bytes a request would hold if kept, or refuses them (`None`).
pub(crate) type Reserve = Box<dyn Fn(usize) -> Option<Held> + Send>;

struct Kept {
    /// The header between the request ID's text and the operation ID's.
    middle: Vec<u8>,
    /// The length of the attachment section.
    attach_len: usize,
    /// The decoded tree; its attachments are copies (re-sliced on use).
    tree: Value,
    /// The tree estimate without the two IDs' lengths.
    base_bytes: usize,
    /// Its bytes as reserved (given back on drop).
    _held: Option<Held>,
}

impl Kept {
    /// The bytes a kept request holds: its header piece, its attachments'
    /// copies, and its tree (by the decoder's estimate, which counts the
    /// attachments' nodes, not their data), with the record itself.
    fn bytes(middle: usize, attach_len: usize, base_bytes: usize) -> usize {
        std::mem::size_of::<Kept>()
            .saturating_add(middle)
            .saturating_add(attach_len)
            .saturating_add(base_bytes)
    }
}

impl RequestTemplate {
    /// A template that keeps a request only once `reserve` has reserved
    /// its bytes.
    pub(crate) fn reserving(reserve: Reserve) -> RequestTemplate {
        RequestTemplate {
            kept: Vec::new(),
            reserve: Some(reserve),
        }
    }

    /// Bytes the kept requests hold (reserved, when the template reserves).
    #[cfg(test)]
    pub(crate) fn kept_bytes(&self) -> usize {
        self.kept
            .iter()
            .map(|k| Kept::bytes(k.middle.len(), k.attach_len, k.base_bytes))
            .sum()
    }

    /// Decodes `frame` as [`decode`] does (same tree, same estimate, same
    /// errors), from the kept request when the frame fits it.
    pub(crate) fn decode(
        &mut self,
        frame: Bytes,
        max_message_size: usize,
        max_tree_bytes: usize,
    ) -> Result<(Value, usize), CodecError> {
        if let Some(hit) = self.reuse(&frame, max_message_size, max_tree_bytes) {
            return Ok(hit);
        }
        let decoded = decode(frame.clone(), max_message_size, max_tree_bytes)?;
        // A request of another layout (a describe between steps) leaves
        // the kept ones in place.
        if self.kept.len() < CAPACITY {
            if let Some(kept) = keep(&frame, &decoded.0, decoded.1, self.reserve.as_ref()) {
                self.kept.push(kept);
            }
        }
        Ok(decoded)
    }

    /// The tree of `frame` from the kept request, if it fits.
    fn reuse(
        &self,
        frame: &Bytes,
        max_message_size: usize,
        max_tree_bytes: usize,
    ) -> Option<(Value, usize)> {
        let len = frame.len();
        if self.kept.is_empty() || len > max_message_size || len > KEEP_MAX_FRAME {
            return None;
        }
        let (header, attach_base) = split(frame)?;
        let rest = header.strip_prefix(PREFIX)?;
        let r = plain_run(rest, 0);
        let (request_id, rest) = rest.split_at(r);
        // The first kept request whose middle follows; if the rest does not
        // fit it, the frame is decoded (only a slower path, never another
        // result).
        let kept = self
            .kept
            .iter()
            .find(|k| k.attach_len == len - attach_base && rest.starts_with(&k.middle))?;
        let rest = &rest[kept.middle.len()..];
        let o = plain_run(rest, 0);
        let (operation_id, rest) = rest.split_at(o);
        if rest != SUFFIX {
            return None;
        }
        let request_id = std::str::from_utf8(request_id).ok()?;
        let operation_id = std::str::from_utf8(operation_id).ok()?;
        let bytes = kept
            .base_bytes
            .saturating_add(request_id.len())
            .saturating_add(operation_id.len());
        if bytes > max_tree_bytes {
            return None;
        }
        let mut tree = kept.tree.clone();
        let Value::Dict(d) = &mut tree else {
            return None;
        };
        // Kept only with both at these places (`keep`).
        let (_, first) = d.iter_mut().nth(2)?;
        *first = Value::Str(request_id.to_owned());
        let n = d.len();
        let (_, last) = d.iter_mut().nth(n.checked_sub(1)?)?;
        *last = Value::Str(operation_id.to_owned());
        let mut cursor = attach_base;
        reslice(&mut tree, frame, &mut cursor)?;
        (cursor == len).then_some((tree, bytes))
    }
}

/// The header text and where the attachments start, if the length prefix
/// fits the frame.
fn split(frame: &[u8]) -> Option<(&[u8], usize)> {
    let head = frame.get(..4)?;
    let header_len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let header = frame.get(4..4usize.checked_add(header_len)?)?;
    Some((header, 4 + header_len))
}

/// The kept form of a request `decode` just gave `tree` for, if it has the
/// kept layout and `reserve` (if any) reserves its bytes.
fn keep(frame: &Bytes, tree: &Value, tree_bytes: usize, reserve: Option<&Reserve>) -> Option<Kept> {
    if frame.len() > KEEP_MAX_FRAME {
        return None;
    }
    let (header, attach_base) = split(frame)?;
    let Value::Dict(d) = tree else {
        return None;
    };
    // The IDs' texts as the header holds them, checked against the tree:
    // the request ID is the third entry, the operation ID the last.
    let rest = header.strip_prefix(PREFIX)?;
    let r = plain_run(rest, 0);
    let request_id = rest.get(..r)?;
    let end = header.len().checked_sub(SUFFIX.len())?;
    if !header.ends_with(SUFFIX) {
        return None;
    }
    let before = &header[..end];
    let o_start = before.iter().rposition(|&b| b == b'"')? + 1;
    let operation_id = &header[o_start..end];
    if plain_run(operation_id, 0) != operation_id.len() {
        return None;
    }
    let middle_start = PREFIX.len() + r;
    let middle = header.get(middle_start..o_start)?;
    if middle_start > o_start || !middle.starts_with(br#"""#) || !middle.ends_with(OPERATION) {
        return None;
    }
    let entries: Vec<(&str, &Value)> = d.iter().collect();
    let (Some(&("request_id", Value::Str(rid))), Some(&("operation_id", Value::Str(oid)))) =
        (entries.get(2), entries.last())
    else {
        return None;
    };
    if rid.as_bytes() != request_id || oid.as_bytes() != operation_id || entries.len() < 4 {
        return None;
    }
    let attach_len = frame.len() - attach_base;
    let base_bytes = tree_bytes.checked_sub(request_id.len() + operation_id.len())?;
    // Reserved before anything is copied; refused, the request is not kept.
    let held = match reserve {
        Some(reserve) => Some(reserve(Kept::bytes(middle.len(), attach_len, base_bytes))?),
        None => None,
    };
    // The attachments: in tree order, back to back from the section's start.
    let mut tree = tree.clone();
    let mut at = attach_base;
    if !owned_attachments(&mut tree, frame, &mut at) || at != frame.len() {
        return None;
    }
    Some(Kept {
        middle: middle.to_vec(),
        attach_len,
        tree,
        base_bytes,
        _held: held,
    })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
