//! A connection's reply values kept by their text.
//!
//! From one step to the next, the `result` of an env's step reply (once
//! its descriptor is recognised and blanked, `client::known`) is the same
//! text but for its scalars: a single env's reward and flags
//! (`-7.59,false,false`), nothing at all for a batched env's (its arrays
//! are attachments: only their bytes change). Parsing it again cost the
//! learner 10k instructions per single-env reply and 18k per
//! `BatchedEnv(8)` reply. So the first reply of a shape is parsed as
//! [`decode_reply`] parses it and kept as its `VALUE` text cut around the
//! scalars of its tuples, lists and dicts (the *holes*), the tree, and the
//! length of the attachment section. A later reply whose envelope is in the
//! servers' layout, whose text after the envelope's fields is the kept
//! pieces with one scalar token (`null`, `true`, `false` or a number) in
//! each hole, and whose attachment section has the same length, is the
//! kept tree with each hole's scalar as the parser reads it (the same
//! parser call at the same depth) and its arrays and byte strings sliced
//! out of the new frame at the same places.
//!
//! That is the tree [`decode_reply`] gives: the general parser reads the
//! same bytes around the holes, and in each hole one value at the same
//! depth, which is the scalar read here (a scalar claims no attachment and
//! ends where the next piece, which starts with `,` or `]`, begins); every
//! check and every attachment's offset and length is the same. Anything
//! else (another token in a hole, other text, another attachment length)
//! is parsed as before, and kept if it has a shape to keep. Where the kept
//! tree's attachments lie is checked when it is kept, not assumed: in tree
//! order, back to back from the attachment section's start.

use super::*;
use crate::codec::decode::kept_tree::{owned_attachments, reslice};

/// Reply shapes kept per connection (one per resource, method and value
/// shape in use); once full, nothing more is kept.
const CAPACITY: usize = 32;
/// Texts longer than this (after the envelope's fields) are not kept.
const KEEP_MAX_TEXT: usize = 4096;
/// Attachment sections larger than this are not kept (the kept tree holds
/// a copy of them).
const KEEP_MAX_ATTACHMENTS: usize = 1 << 20;
/// Replies with more scalars than this are not kept (an unrecognised
/// descriptor has dozens: it is not the reply of every step).
const MAX_HOLES: usize = 8;

/// A connection's kept reply values (see the module docs).
#[derive(Default)]
pub(crate) struct KeptReplies {
    kept: Vec<Kept>,
    /// Replies read from a kept value (tests).
    #[cfg(test)]
    pub(crate) hits: usize,
}

/// One scalar of a kept value: where it sits in the tree (item or entry
/// indices from the root) and the depth the parser reads it at.
struct Hole {
    path: Vec<usize>,
    depth: usize,
}

struct Kept {
    /// The header's text from `VALUE` to its end, cut around the holes:
    /// one more piece than holes.
    pieces: Vec<Vec<u8>>,
    holes: Vec<Hole>,
    attach_len: usize,
    /// The value; its attachments are copies (re-sliced on use).
    tree: Value,
}

impl KeptReplies {
    /// Reads `frame` as [`decode_reply`] does (the same IDs and result, or
    /// `None`), from a kept value when the frame fits one.
    pub(crate) fn decode<'f>(
        &mut self,
        frame: &'f Bytes,
        max_message_size: usize,
    ) -> Option<Reply<'f>> {
        let (session_id, request_id, mut p) = envelope(frame, max_message_size)?;
        let start = p.pos;
        for kept in &self.kept {
            if let Some(result) = kept.reuse(&mut p, frame) {
                #[cfg(test)]
                {
                    self.hits += 1;
                }
                return Some(Reply {
                    session_id,
                    request_id,
                    result,
                });
            }
            p.pos = start;
        }
        let result = p.value(1).ok()?;
        finish(&p)?;
        if self.kept.len() < CAPACITY {
            if let Some(kept) = keep(frame, &p, start, &result) {
                self.kept.push(kept);
            }
        }
        Some(Reply {
            session_id,
            request_id,
            result,
        })
    }
}

impl Kept {
    /// The value of the frame `p` reads (at the start of `VALUE`), if it
    /// fits this kept one.
    fn reuse(&self, p: &mut Parser<'_>, frame: &Bytes) -> Option<Value> {
        if p.attach_len != self.attach_len {
            return None;
        }
        let mut scalars = Vec::with_capacity(self.holes.len());
        for (i, piece) in self.pieces.iter().enumerate() {
            let end = p.pos.checked_add(piece.len())?;
            if p.src.get(p.pos..end) != Some(piece.as_slice()) {
                return None;
            }
            p.pos = end;
            let Some(hole) = self.holes.get(i) else {
                break;
            };
            if !matches!(p.peek(), Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n')) {
                return None;
            }
            let v = p.value(hole.depth).ok()?;
            if !is_scalar(&v) {
                return None;
            }
            scalars.push(v);
        }
        if p.pos != p.src.len() {
            return None;
        }
        let mut tree = self.tree.clone();
        for (hole, v) in self.holes.iter().zip(scalars) {
            *at_path(&mut tree, &hole.path)? = v;
        }
        let mut cursor = p.attach_base;
        reslice(&mut tree, frame, &mut cursor)?;
        (cursor == frame.len()).then_some(tree)
    }
}

fn is_scalar(v: &Value) -> bool {
    matches!(
        v,
        Value::Null
            | Value::Bool(_)
            | Value::Int(_)
            | Value::UInt(_)
            | Value::BigInt(_)
            | Value::Float(_)
    )
}

/// The node at `path` (item or entry indices) of `tree`.
fn at_path<'v>(tree: &'v mut Value, path: &[usize]) -> Option<&'v mut Value> {
    let Some((&i, rest)) = path.split_first() else {
        return Some(tree);
    };
    let child = match tree {
        Value::List(items) | Value::Tuple(items) => items.get_mut(i)?,
        Value::Dict(d) => d.iter_mut().nth(i)?.1,
        _ => return None,
    };
    at_path(child, rest)
}

/// How the containers the holes are found in open, as servers write them.
const TUPLE: &[u8] = br#"{"t":"tuple","v":["#;
const LIST: &[u8] = br#"{"t":"list","v":["#;
const DICT: &[u8] = br#"{"t":"dict","v":["#;

/// The kept form of the reply `p` just read `result` from (`VALUE` from
/// `start`), if it has a shape to keep.
fn keep(frame: &Bytes, p: &Parser<'_>, start: usize, result: &Value) -> Option<Kept> {
    if p.src.len() - start > KEEP_MAX_TEXT || p.attach_len > KEEP_MAX_ATTACHMENTS {
        return None;
    }
    // The text walked again, beside the tree: the scalars' places.
    let mut h = Parser {
        pos: start,
        cursor: 0,
        tree_bytes: 0,
        ..*p
    };
    let mut holes = Vec::new();
    walk(&mut h, result, 1, &mut Vec::new(), &mut holes)?;
    if holes.len() > MAX_HOLES || finish(&h).is_none() {
        return None;
    }
    let mut tree = result.clone();
    let mut at = p.attach_base;
    if !owned_attachments(&mut tree, frame, &mut at) || at != frame.len() {
        return None;
    }
    let mut pieces = Vec::with_capacity(holes.len() + 1);
    let mut from = start;
    let mut kept_holes = Vec::with_capacity(holes.len());
    for (range, path, depth) in holes {
        pieces.push(p.src[from..range.start].to_vec());
        from = range.end;
        kept_holes.push(Hole { path, depth });
    }
    pieces.push(p.src[from..].to_vec());
    Some(Kept {
        pieces,
        holes: kept_holes,
        attach_len: p.attach_len,
        tree,
    })
}

/// A found scalar: its text, its path in the tree, its depth.
type Found = (std::ops::Range<usize>, Vec<usize>, usize);

/// Reads the value `v` (at depth `depth`) again from `h`'s position,
/// noting the scalars inside tuples, lists and dicts written as servers
/// write them; any other node is read whole (its text is then fixed).
/// `None` when the text does not read as `v`.
fn walk(
    h: &mut Parser<'_>,
    v: &Value,
    depth: usize,
    path: &mut Vec<usize>,
    holes: &mut Vec<Found>,
) -> Option<()> {
    let rest = &h.src[h.pos.min(h.src.len())..];
    match v {
        Value::Tuple(items) if rest.starts_with(TUPLE) => {
            items_of(h, items, TUPLE, depth, path, holes)
        }
        Value::List(items) if rest.starts_with(LIST) => {
            items_of(h, items, LIST, depth, path, holes)
        }
        Value::Dict(d) if rest.starts_with(DICT) => {
            h.pos += DICT.len();
            let n = d.len();
            if n == 0 {
                return eat(h, b"]}");
            }
            for (i, (key, value)) in d.iter().enumerate() {
                if plain_run(key.as_bytes(), 0) != key.len() {
                    return None;
                }
                eat(h, b"[\"")?;
                eat(h, key.as_bytes())?;
                eat(h, b"\",")?;
                path.push(i);
                walk(h, value, depth + 1, path, holes)?;
                path.pop();
                eat(h, b"]")?;
                eat(h, if i + 1 < n { b"," } else { b"]}" })?;
            }
            Some(())
        }
        _ if is_scalar(v)
            && matches!(rest.first(), Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n')) =>
        {
            let at = h.pos;
            let read = h.value(depth).ok()?;
            if &read != v {
                return None;
            }
            holes.push((at..h.pos, path.clone(), depth));
            Some(())
        }
        _ => {
            let read = h.value(depth).ok()?;
            (&read == v).then_some(())
        }
    }
}

/// The items of a tuple or list opened by `open`.
fn items_of(
    h: &mut Parser<'_>,
    items: &[Value],
    open: &[u8],
    depth: usize,
    path: &mut Vec<usize>,
    holes: &mut Vec<Found>,
) -> Option<()> {
    h.pos += open.len();
    let n = items.len();
    if n == 0 {
        return eat(h, b"]}");
    }
    for (i, item) in items.iter().enumerate() {
        path.push(i);
        walk(h, item, depth + 1, path, holes)?;
        path.pop();
        eat(h, if i + 1 < n { b"," } else { b"]}" })?;
    }
    Some(())
}

/// Moves past `text` if it is next.
fn eat(h: &mut Parser<'_>, text: &[u8]) -> Option<()> {
    let end = h.pos.checked_add(text.len())?;
    (h.src.get(h.pos..end) == Some(text)).then(|| h.pos = end)
}

#[cfg(test)]
#[path = "reply_kept_tests.rs"]
mod tests;
