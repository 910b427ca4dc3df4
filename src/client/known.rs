//! Descriptors recognised by their text, not parsed again.
//!
//! Every env call's reply carries the env's descriptor (`{"value": ...,
//! "descriptors": [...]}`, SPEC.md section 7): for a Pendulum step about
//! 900 of the reply's 1,200 header bytes, most of the learner's decoding
//! time, although from one step to the next only its `sequence` changes.
//! The reader task therefore remembers, per resource, the text of the last
//! descriptor it parsed (split around its `sequence` number) and the
//! descriptor parsed from it. A reply whose descriptors list is that same
//! single descriptor, byte for byte but for the sequence number, has the
//! list replaced in place by an empty one (padded with spaces, so the
//! header's length and the attachments' offsets do not move) before the
//! frame is decoded, and the remembered descriptor, with the new sequence,
//! is applied instead: what parsing it would have given.
//!
//! Only a compact call reply whose header ends with the descriptors entry
//! of its `result` (`...["descriptors",{"t":"list","v":[D]}]]}]]}`, as
//! servers write it, the result's first entry being `value`) qualifies;
//! the remembered texts are matched from the header's end (the header cut
//! at each length the remembered texts have before and after their
//! sequence number, then a hash lookup and a few `memcmp`s; past a few
//! such shapes, a SIMD search for the list; only the envelope's fields
//! before `result` are scanned), and
//! only a descriptor `D` that held no attachment, no boundary snapshot, no
//! `"descriptors"` text and a single `["sequence",` key when it was parsed
//! is remembered. Anything else is decoded as before.

use super::descriptor::Descriptor;
use crate::codec::Value;
use bytes::{Bytes, BytesMut};
use rustc_hash::{FxBuildHasher, FxHasher};
use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::Arc;

/// The descriptors entry's opening, as servers write it.
const OPEN: &[u8] = br#"["descriptors",{"t":"list","v":["#;
/// The end of a header whose last entry is `result` and whose result's
/// last entry is `descriptors`: the list, the entry, the result's entries,
/// the result, its entry, the envelope's entries, the envelope.
const CLOSE: &[u8] = br#"]}]]}]]}"#;
/// The start of a call result (`{"value": ..., "descriptors": ...}`): the
/// header's first `["result",` must open it.
const RESULT: &[u8] = br#"["result",{"t":"dict","v":[["value","#;
/// The sequence number's key inside a descriptor.
const SEQUENCE: &[u8] = br#"["sequence","#;
/// The empty list written over a recognised one.
const EMPTY: &[u8] = br#"{"t":"list","v":[]}"#;
/// At most this many bytes (the header's end and the attachments) are
/// moved up over the removed list; past it, the list is blanked with spaces
/// (the decoder skips them) rather than large attachments moved.
const MAX_MOVE: usize = 16 * 1024;
/// How many descriptors a connection remembers: one per resource whose
/// replies it reads, up to this many (past it, an arbitrary one is
/// forgotten).
const CAPACITY: usize = 4096;
/// Frames with large attachments larger than this are not copied to be
/// edited when they are shared (they are decoded as before).
const MAX_COPY: usize = 1024 * 1024;

/// A descriptor's text around its sequence number, and what it parsed to.
struct Known {
    before: Vec<u8>,
    after: Vec<u8>,
    descriptor: Arc<Descriptor>,
}

/// Where a reply's single descriptor sits in its frame.
struct Span {
    /// The descriptors list's value: `{"t":"list","v":[D]}`.
    list: std::ops::Range<usize>,
    /// `D`.
    inner: std::ops::Range<usize>,
    /// The sequence number's digits, inside `D`.
    digits: std::ops::Range<usize>,
}

/// The descriptors a connection's replies carried lately, found by their
/// text: a reply of any of the connection's resources costs the same
/// whatever their number.
#[derive(Default)]
pub(super) struct KnownDescriptors {
    /// By the hash of their text around the sequence number ([`text_key`]);
    /// a hit is checked byte for byte.
    entries: HashMap<u64, Known, FxBuildHasher>,
    /// Each remembered descriptor's key by its resource ID (one per ID).
    by_id: HashMap<String, u64, FxBuildHasher>,
    /// The key recognised or learned last, tried first: the replies of a
    /// single resource match it without locating the list.
    last: Option<u64>,
    /// How many entries have each length of the text before and after the
    /// sequence number. A recognised reply's list has one of these shapes:
    /// while they are few, cutting the header's end at each (a few
    /// comparisons from the end) finds the candidates without searching
    /// the header for the list.
    shapes: HashMap<(usize, usize), usize, FxBuildHasher>,
}

/// Past this many shapes, the list is searched for instead.
const MAX_SHAPES: usize = 4;

/// The key of a descriptor's text around its sequence number.
fn text_key(before: &[u8], after: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write_usize(before.len());
    h.write(before);
    h.write(after);
    h.finish()
}

/// Searchers of the texts looked for in every reply, built once.
struct Finders {
    open: memchr::memmem::Finder<'static>,
    result: memchr::memmem::Finder<'static>,
    sequence: memchr::memmem::Finder<'static>,
    descriptors: memchr::memmem::Finder<'static>,
}

fn finders() -> &'static Finders {
    static FINDERS: std::sync::OnceLock<Finders> = std::sync::OnceLock::new();
    FINDERS.get_or_init(|| Finders {
        open: memchr::memmem::Finder::new(OPEN),
        result: memchr::memmem::Finder::new(br#"["result","#),
        sequence: memchr::memmem::Finder::new(SEQUENCE),
        descriptors: memchr::memmem::Finder::new(b"\"descriptors\""),
    })
}

/// The last occurrence of OPEN in `hay`: the forward searcher (SIMD) run
/// from each occurrence to the next (the text rarely occurs more than
/// once).
fn rfind_open(hay: &[u8]) -> Option<usize> {
    let open = &finders().open;
    let mut last = open.find(hay)?;
    while let Some(k) = open.find(&hay[last + 1..]) {
        last += 1 + k;
    }
    Some(last)
}

/// The header of a frame, and the header without CLOSE when the frame is
/// a call reply (its first `["result",` opens `{"value": ...` and the
/// header ends with CLOSE).
fn call_reply(frame: &[u8]) -> Option<&[u8]> {
    let header_len = u32::from_be_bytes(frame.get(..4)?.try_into().ok()?) as usize;
    let header = frame.get(4..4usize.checked_add(header_len)?)?;
    let body = header.strip_suffix(CLOSE)?;
    // The entries before the first `["result",` are the envelope's
    // scalars (no string holds an unescaped quote), so this is the
    // envelope's `result`: a dict whose first entry is the value, and
    // whose last (CLOSE) the descriptors list.
    let result = finders().result.find(body)?;
    body[result..].starts_with(RESULT).then_some(body)
}

/// The sequence number's digits in `d` (a descriptor's text): after its
/// only `["sequence",`.
fn digits(d: &[u8]) -> Option<std::ops::Range<usize>> {
    let sequence = &finders().sequence;
    let start = sequence.find(d)? + SEQUENCE.len();
    if sequence.find(&d[start..]).is_some() {
        return None;
    }
    let count = d[start..].iter().take_while(|b| b.is_ascii_digit()).count();
    (1..=19).contains(&count).then_some(start..start + count)
}

/// The span of a call reply's descriptors list when it holds one
/// descriptor (for learning: the list is the last `["descriptors",` of
/// the header, and the descriptor must not hold that text itself).
fn locate(frame: &[u8]) -> Option<Span> {
    let body = call_reply(frame)?;
    // The last occurrence (the list is last).
    let open = rfind_open(body)?;
    let inner = open + OPEN.len()..body.len();
    let d = &body[inner.clone()];
    if finders().descriptors.find(d).is_some() {
        return None;
    }
    let digits = digits(d)?;
    Some(span(open, inner, digits))
}

/// A span in frame coordinates from header positions: the list opens
/// inside OPEN (after `["descriptors",`) and closes 2 bytes into CLOSE.
fn span(open: usize, inner: std::ops::Range<usize>, digits: std::ops::Range<usize>) -> Span {
    let base = 4 + inner.start;
    Span {
        list: 4 + open + OPEN.len() - br#"{"t":"list","v":["#.len()..4 + inner.end + 2,
        inner: base..4 + inner.end,
        digits: base + digits.start..base + digits.end,
    }
}

/// The span of a call reply whose descriptors list is `before`, a number,
/// `after`: matched from the end of the header, where the list is.
fn matches(body: &[u8], before: &[u8], after: &[u8]) -> Option<Span> {
    let span = cut(body, before.len(), after.len())?;
    let (b, a) = texts(body, &span);
    (b == before && a == after).then_some(span)
}

/// The span of a call reply whose descriptors list is `before_len` bytes,
/// a number, `after_len` bytes (the header's end cut at those lengths).
fn cut(body: &[u8], before_len: usize, after_len: usize) -> Option<Span> {
    let rest = &body[..body.len().checked_sub(after_len)?];
    let count = rest.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=19).contains(&count) {
        return None;
    }
    let rest = &rest[..rest.len() - count];
    let open_end = rest.len().checked_sub(before_len)?;
    if !rest[..open_end].ends_with(OPEN) {
        return None;
    }
    let open = open_end - OPEN.len();
    let inner = open + OPEN.len()..body.len();
    Some(span(open, inner, before_len..before_len + count))
}

/// The texts before and after the sequence number of a span of `body`
/// (header coordinates, as `cut` and `locate` give them less 4).
fn texts<'b>(body: &'b [u8], span: &Span) -> (&'b [u8], &'b [u8]) {
    (
        &body[span.inner.start - 4..span.digits.start - 4],
        &body[span.digits.end - 4..span.inner.end - 4],
    )
}

fn number(digits: &[u8]) -> Option<u64> {
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Whether a decoded descriptor holds an array or byte string anywhere
/// (an attachment: its text alone does not say what it held).
fn has_attachment(v: &Value) -> bool {
    match v {
        Value::Array(_) | Value::Bytes(_) | Value::ObjectArray(_) | Value::Graph(_) => true,
        Value::List(items) | Value::Tuple(items) => items.iter().any(has_attachment),
        Value::Dict(d) => d.values().any(has_attachment),
        _ => false,
    }
}

impl KnownDescriptors {
    /// When `frame`'s descriptors list is a remembered descriptor with
    /// another sequence number: the frame with the list emptied, and that
    /// descriptor at the new sequence. Otherwise the frame unchanged.
    pub(super) fn strip(&mut self, frame: Bytes) -> (Bytes, Option<Descriptor>) {
        if self.entries.is_empty() {
            return (frame, None);
        }
        let Some(body) = call_reply(&frame) else {
            return (frame, None);
        };
        let last = self
            .last
            .and_then(|k| Some((k, self.entries.get(&k)?)))
            .and_then(|(k, e)| Some((k, matches(body, &e.before, &e.after)?)));
        let known = |span: Span| {
            let (before, after) = texts(body, &span);
            let key = text_key(before, after);
            let e = self.entries.get(&key)?;
            (e.before == before && e.after == after).then_some((key, span))
        };
        let found = last.or_else(|| {
            if self.shapes.len() <= MAX_SHAPES {
                self.shapes
                    .keys()
                    .find_map(|&(b, a)| known(cut(body, b, a)?))
            } else {
                known(locate(&frame)?)
            }
        });
        let Some((key, span)) = found else {
            return (frame, None);
        };
        let Some(known) = self.entries.get(&key).map(|e| Arc::clone(&e.descriptor)) else {
            return (frame, None);
        };
        let Some(sequence) = number(&frame[span.digits.clone()]) else {
            return (frame, None);
        };
        let list = span.list.clone();
        let gap = list.start + EMPTY.len()..list.end;
        let edited = if frame.len() - gap.end <= MAX_MOVE {
            // A new frame without the list's text: the envelope's fields,
            // an empty list, the header's end and the attachments (a few
            // hundred bytes copied, nothing left for the decoder to skip).
            let removed = gap.len();
            let mut out = BytesMut::with_capacity(frame.len() - removed);
            out.extend_from_slice(&frame[..list.start]);
            out.extend_from_slice(EMPTY);
            out.extend_from_slice(&frame[gap.end..]);
            let header_len = u32::from_be_bytes([out[0], out[1], out[2], out[3]]);
            // `removed` < the header's length, which fits in a u32.
            let header_len = header_len - removed as u32;
            out[..4].copy_from_slice(&header_len.to_be_bytes());
            out
        } else {
            // Large attachments stay where they are: the list is blanked
            // with spaces in place (in a copy if the frame is shared).
            let mut edited = match frame.try_into_mut() {
                Ok(m) => m,
                Err(shared) if shared.len() <= MAX_COPY => BytesMut::from(&shared[..]),
                Err(shared) => return (shared, None),
            };
            edited[list.start..list.start + EMPTY.len()].copy_from_slice(EMPTY);
            edited[gap].fill(b' ');
            edited
        };
        self.last = Some(key);
        let descriptor = known.with_sequence(sequence);
        (edited.freeze(), Some(descriptor))
    }

    /// Remembers the descriptor of a reply decoded in full (`frame`, and
    /// its `descriptors` list) when it qualifies. `previous` gives the
    /// descriptor held so far for an ID, whose unchanged spaces are kept
    /// (as applying the reply keeps them).
    pub(super) fn learn(
        &mut self,
        frame: &[u8],
        descriptors: Option<&Value>,
        previous: impl FnOnce(&str) -> Option<Arc<Descriptor>>,
    ) {
        let Some(Value::List(items)) = descriptors else {
            return;
        };
        let [item] = items.as_slice() else { return };
        if item.get("snapshot").is_some() || has_attachment(item) {
            return;
        }
        let Some(span) = locate(frame) else { return };
        let held = item.get("id").and_then(Value::as_str).and_then(previous);
        let Ok((descriptor, None)) = Descriptor::parse(item.clone(), held.as_deref()) else {
            return;
        };
        if number(&frame[span.digits.clone()]) != Some(descriptor.sequence())
            || item.get("sequence").and_then(Value::as_u64) != Some(descriptor.sequence())
        {
            return;
        }
        let before = frame[span.inner.start..span.digits.start].to_vec();
        let after = frame[span.digits.end..span.inner.end].to_vec();
        let key = text_key(&before, &after);
        if let Some(old) = self.by_id.insert(descriptor.id().to_string(), key) {
            self.remove(old);
        }
        if self.entries.len() >= CAPACITY && !self.entries.contains_key(&key) {
            let evicted = self.entries.keys().next().copied();
            if let Some(evicted) = evicted.and_then(|k| self.remove(k)) {
                self.by_id.remove(evicted.descriptor.id());
            }
        }
        *self.shapes.entry((before.len(), after.len())).or_default() += 1;
        let known = Known {
            before,
            after,
            descriptor: Arc::new(descriptor),
        };
        if let Some(replaced) = self.entries.insert(key, known) {
            self.unshape(&replaced);
        }
        self.last = Some(key);
    }

    /// Forgets entry `key`, and its shape when no other entry has it.
    fn remove(&mut self, key: u64) -> Option<Known> {
        let known = self.entries.remove(&key)?;
        self.unshape(&known);
        Some(known)
    }

    fn unshape(&mut self, known: &Known) {
        let shape = (known.before.len(), known.after.len());
        if let Some(count) = self.shapes.get_mut(&shape) {
            *count -= 1;
            if *count == 0 {
                self.shapes.remove(&shape);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Codec, Dict, NdArray};

    fn descriptor(sequence: u64, low: f64) -> Value {
        descriptor_of("e", sequence, low)
    }

    fn descriptor_of(id: &str, sequence: u64, low: f64) -> Value {
        let space = Dict::new()
            .with("type", "BoxSpace")
            .with("shape", Value::Tuple(vec![Value::Int(1)]))
            .with("low", Value::List(vec![Value::Float(low)]))
            .with("high", Value::List(vec![Value::Float(2.0)]))
            .with("dtype", "float32");
        Value::Dict(
            Dict::new()
                .with("id", id)
                .with("kind", "env")
                .with("revision", 2)
                .with("sequence", sequence as i64)
                .with("domain_id", id)
                .with("action_space", space)
                .with("operations", Value::List(vec!["step".into()])),
        )
    }

    fn reply(value: Value, descriptors: Vec<Value>) -> Bytes {
        let result = Dict::new()
            .with("value", value)
            .with("descriptors", Value::List(descriptors));
        let message = Dict::new()
            .with("version", 1)
            .with("type", "response")
            .with("request_id", "1")
            .with("result", result);
        Bytes::from(Codec::default().encode(&Value::Dict(message)).unwrap())
    }

    fn descriptors_of(frame: Bytes) -> Value {
        let Value::Dict(m) = Codec::default().decode(frame).unwrap() else {
            panic!("not a dict")
        };
        m.get("result").unwrap().get("descriptors").unwrap().clone()
    }

    /// The searches are the plain byte-by-byte ones: the last OPEN (also
    /// when the text occurs several times, overlapping or at either end),
    /// the first of anything else.
    #[test]
    fn searches_find_what_a_plain_scan_finds() {
        fn plain_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
            (0..(hay.len() + 1).checked_sub(needle.len())?)
                .rev()
                .find(|&i| hay[i..].starts_with(needle))
        }
        let open = std::str::from_utf8(OPEN).unwrap();
        let texts = [
            String::new(),
            open.to_string(),
            format!("x{open}"),
            format!("{open}y"),
            format!("{open}{open}"),
            format!("[[{open}[\"descriptors\",{open}]]"),
            format!("{}{open}{}", "a".repeat(700), "b".repeat(900)),
            open[..open.len() - 1].to_string(),
        ];
        for t in &texts {
            assert_eq!(
                rfind_open(t.as_bytes()),
                plain_last(t.as_bytes(), OPEN),
                "{t}"
            );
            let s = finders().sequence.find(t.as_bytes());
            assert_eq!(s, None, "{t}");
        }
        let d = br#"{"t":"dict","v":[["id","e"],["sequence",12],["descriptors",1]]}"#;
        assert_eq!(finders().sequence.find(d), Some(28));
        assert_eq!(digits(d), Some(40..42));
        assert_eq!(finders().descriptors.find(d), Some(45));
        // Escaped quotes inside a string are not the key.
        let escaped = br#"[["x","\"descriptors\""]]"#;
        assert_eq!(finders().descriptors.find(escaped), None);
    }

    #[test]
    fn an_unchanged_descriptor_is_recognised_with_its_new_sequence() {
        let obs = || Value::from(NdArray::from_vec(vec![1.0f32, 2.0, 3.0]));
        let mut known = KnownDescriptors::default();
        let first = reply(obs(), vec![descriptor(7, -2.0)]);
        let (same, none) = known.strip(first.clone());
        assert!(none.is_none(), "nothing known yet");
        known.learn(&same, Some(&descriptors_of(first)), |_| None);

        let second = reply(obs(), vec![descriptor(1234, -2.0)]);
        let (edited, d) = known.strip(second.clone());
        let d = d.expect("recognised");
        assert_eq!((d.id(), d.sequence(), d.revision()), ("e", 1234, 2));
        assert_eq!(d.get("sequence"), Some(&Value::Int(1234)));
        assert!(edited.len() < second.len(), "the list's text is removed");
        // The edited frame decodes to the same message with an empty list.
        let Value::Dict(mut a) = Codec::default().decode(edited).unwrap() else {
            panic!()
        };
        let Value::Dict(mut b) = Codec::default().decode(second).unwrap() else {
            panic!()
        };
        for m in [&mut a, &mut b] {
            if let Some(Value::Dict(r)) = m.get_mut("result") {
                r.insert("descriptors", Value::List(Vec::new()));
            }
        }
        assert_eq!(a, b);
        // A parsed descriptor equals the recognised one field by field.
        let (parsed, _) = Descriptor::parse(descriptor(1234, -2.0), None).unwrap();
        assert_eq!(parsed.raw(), d.raw());
    }

    /// Replies of many resources taking turns on one connection (single-env
    /// resources of a vector env) are each recognised, however many: the
    /// descriptors are found by their text, not among the most recent few.
    #[test]
    fn every_resource_of_a_connection_is_recognised_in_turn() {
        // IDs of 3 lengths: found by cutting the header at each shape.
        let ids: Vec<String> = (0..300).map(|i| format!("pendulum{i}")).collect();
        let known = recognised_in_turn(&ids);
        assert_eq!(known.shapes.len(), 3);
        assert_eq!(known.shapes.values().sum::<usize>(), ids.len());
        // IDs of 10 lengths: past MAX_SHAPES, found by searching the header.
        let ids: Vec<String> = (0..50)
            .map(|i| format!("{}{i}", "x".repeat(i % 10)))
            .collect();
        let known = recognised_in_turn(&ids);
        assert!(known.shapes.len() > MAX_SHAPES);
        assert_eq!(known.shapes.values().sum::<usize>(), ids.len());
    }

    fn recognised_in_turn(ids: &[String]) -> KnownDescriptors {
        let obs = || Value::from(NdArray::from_vec(vec![1.0f32]));
        let mut known = KnownDescriptors::default();
        for id in ids {
            let first = reply(obs(), vec![descriptor_of(id, 1, -2.0)]);
            let (same, none) = known.strip(first.clone());
            assert!(none.is_none(), "{id} is not known yet");
            known.learn(&same, Some(&descriptors_of(first)), |_| None);
        }
        for round in 2..4u64 {
            for id in ids {
                let (_, d) = known.strip(reply(obs(), vec![descriptor_of(id, round, -2.0)]));
                let d = d.unwrap_or_else(|| panic!("{id} recognised in round {round}"));
                assert_eq!((d.id(), d.sequence()), (id.as_str(), round));
            }
        }
        // A changed descriptor of one of them is not taken for its old text.
        let (_, d) = known.strip(reply(obs(), vec![descriptor_of(&ids[7], 9, -3.0)]));
        assert!(d.is_none());
        // Learning it again replaces the old text: one entry per ID.
        let changed = reply(obs(), vec![descriptor_of(&ids[7], 9, -3.0)]);
        known.learn(&changed.clone(), Some(&descriptors_of(changed)), |_| None);
        assert_eq!(
            (known.entries.len(), known.by_id.len()),
            (ids.len(), ids.len())
        );
        let (_, old) = known.strip(reply(obs(), vec![descriptor_of(&ids[7], 10, -2.0)]));
        assert!(old.is_none(), "the old text of a relearned ID is forgotten");
        let (_, new) = known.strip(reply(obs(), vec![descriptor_of(&ids[7], 10, -3.0)]));
        assert_eq!(new.map(|d| d.sequence()), Some(10), "its new text is known");
        known
    }

    #[test]
    fn behind_large_attachments_the_list_is_blanked_in_place() {
        let big = || Value::from(NdArray::from_vec(vec![0.5f64; 4096]));
        let mut known = KnownDescriptors::default();
        let first = reply(big(), vec![descriptor(1, -2.0)]);
        known.learn(&first, Some(&descriptors_of(first.clone())), |_| None);
        let second = reply(big(), vec![descriptor(2, -2.0)]);
        let (edited, d) = known.strip(second.clone());
        assert_eq!(d.map(|d| d.sequence()), Some(2));
        assert_eq!(edited.len(), second.len(), "32 KiB of attachments stay put");
        let Value::Dict(m) = Codec::default().decode(edited).unwrap() else {
            panic!()
        };
        let result = m.get("result").unwrap();
        assert_eq!(result.get("value"), Some(&big()));
        assert_eq!(result.get("descriptors"), Some(&Value::List(Vec::new())));
    }

    #[test]
    fn a_changed_descriptor_or_an_odd_reply_is_decoded_in_full() {
        let mut known = KnownDescriptors::default();
        let first = reply(Value::Null, vec![descriptor(1, -2.0)]);
        known.learn(&first, Some(&descriptors_of(first.clone())), |_| None);
        // Another bound: not the remembered text.
        let changed = reply(Value::Null, vec![descriptor(2, -3.0)]);
        assert!(known.strip(changed).1.is_none());
        // Two descriptors: never recognised.
        let two = reply(Value::Null, vec![descriptor(2, -2.0), descriptor(2, -2.0)]);
        assert!(known.strip(two).1.is_none());
        // A leading zero is not a JSON number: left to the decoder.
        let text = reply(Value::Null, vec![descriptor(5, -2.0)]);
        let zero = Bytes::from(
            String::from_utf8_lossy(&text)
                .replace(r#"["sequence",5]"#, r#"["sequence",05]"#)
                .into_bytes(),
        );
        assert!(known.strip(zero).1.is_none());
        // A descriptor with a snapshot is never learnt.
        let mut fresh = KnownDescriptors::default();
        let mut with_snapshot = descriptor(1, -2.0);
        if let Value::Dict(d) = &mut with_snapshot {
            d.insert("snapshot", Dict::new().with("sequence", 1));
        }
        let frame = reply(Value::Null, vec![with_snapshot]);
        fresh.learn(&frame, Some(&descriptors_of(frame.clone())), |_| None);
        assert!(fresh.entries.is_empty());
        // Truncated frames are refused without panicking.
        for n in 0..first.len() {
            let _ = locate(&first[..n]);
        }
        // User data that looks like a descriptors list does not move it.
        let tricky = reply(
            Value::Dict(Dict::new().with("descriptors", Value::List(vec![descriptor(1, -2.0)]))),
            vec![descriptor(3, -2.0)],
        );
        let span = locate(&tricky).expect("the reply's own list");
        assert_eq!(&tricky[span.digits], b"3");
        // ... and it is recognised once learnt, the user's copy untouched.
        let mut fresh = KnownDescriptors::default();
        fresh.learn(&tricky, Some(&descriptors_of(tricky.clone())), |_| None);
        let again = reply(
            Value::Dict(Dict::new().with("descriptors", Value::List(vec![descriptor(1, -2.0)]))),
            vec![descriptor(4, -2.0)],
        );
        let (edited, d) = fresh.strip(again);
        assert_eq!(d.map(|d| d.sequence()), Some(4));
        let Value::Dict(m) = Codec::default().decode(edited).unwrap() else {
            panic!()
        };
        let result = m.get("result").unwrap();
        assert_eq!(result.get("descriptors"), Some(&Value::List(Vec::new())));
        assert_eq!(
            result.get("value").and_then(|v| v.get("descriptors")),
            Some(&Value::List(vec![descriptor(1, -2.0)]))
        );
    }
}
