//! Value tree → envelope bytes.
//!
//! A cheap walk (no formatting) validates the depth and sums the attachment
//! bytes and string lengths, a lower bound of the message size, so that an
//! oversized message fails before anything is allocated. The JSON header is
//! then formatted once, straight into the output buffer (allocated for the
//! attachments plus an estimate of the header), followed by the attachments.
//! The JSON text is what Python's
//! `json.dumps(..., allow_nan=False, separators=(",", ":"))` writes for the
//! same tree, byte for byte: ASCII-only strings and Python's float `repr`.

use super::error::CodecError;
use super::limits::MAX_DEPTH;
use super::value::{Dict, Value};

mod float;
mod text;
pub(crate) use float::python_float_repr;
pub(crate) use text::DictText;
use text::Hole;

/// Dicts of a message to write from their kept text: each dict value (by
/// address) and its text.
type Texts<'v> = &'v [(&'v Value, &'v DictText)];

/// Where the encoder writes: a byte counter, or the output buffer.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
    fn byte(&mut self, b: u8);
    /// Whether the sink refuses more (the message is over its limit): the
    /// writer then stops at the next value.
    fn full(&self) -> bool {
        false
    }
}

/// The output buffer of a message's header, which stops growing at `cap`
/// bytes: a header that would pass the message limit (a list of millions of
/// floats, whose text the planning walk does not count) costs at most the
/// limit in memory, and the writer stops as soon as it is reached.
struct Bounded {
    out: Vec<u8>,
    cap: usize,
    over: bool,
}

impl Sink for Bounded {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if self.out.len() + bytes.len() <= self.cap {
            self.out.extend_from_slice(bytes);
        } else {
            self.over = true;
        }
    }
    #[inline]
    fn byte(&mut self, b: u8) {
        if self.out.len() < self.cap {
            self.out.push(b);
        } else {
            self.over = true;
        }
    }
    #[inline]
    fn full(&self) -> bool {
        self.over
    }
}

struct Counter(usize);

impl Sink for Counter {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
    #[inline]
    fn byte(&mut self, _: u8) {
        self.0 += 1;
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline]
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
}

struct Writer<'v, S> {
    sink: S,
    /// Running attachment offset.
    offset: usize,
    /// Attachment slices in traversal order, when the caller wants them.
    attachments: Option<Vec<&'v [u8]>>,
    max_message_size: usize,
    /// Dicts written from their kept text.
    texts: Texts<'v>,
}

impl<'v, S: Sink> Writer<'v, S> {
    fn value(&mut self, v: &'v Value, depth: usize) -> Result<(), CodecError> {
        if depth > MAX_DEPTH {
            return Err(CodecError::TooDeep { max: MAX_DEPTH });
        }
        if self.sink.full() {
            return Err(CodecError::MessageTooLarge {
                size: self.max_message_size.saturating_add(1),
                max: self.max_message_size,
            });
        }
        match v {
            Value::Null => self.sink.put(b"null"),
            Value::Bool(true) => self.sink.put(b"true"),
            Value::Bool(false) => self.sink.put(b"false"),
            Value::Int(i) => self.sink.put(itoa::Buffer::new().format(*i).as_bytes()),
            Value::UInt(u) => self.sink.put(itoa::Buffer::new().format(*u).as_bytes()),
            Value::BigInt(b) => self.sink.put(b.as_str().as_bytes()),
            Value::Float(f) if f.is_finite() => {
                let mut buf = [0u8; 32];
                let n = python_float_repr(*f, &mut buf);
                self.sink.put(&buf[..n]);
            }
            Value::Float(f) => {
                self.sink.put(br#"{"t":"float","v":""#);
                self.sink.put(if f.is_nan() {
                    b"nan"
                } else if *f > 0.0 {
                    b"inf"
                } else {
                    b"-inf"
                });
                self.sink.put(br#""}"#);
            }
            Value::Str(s) => write_str(&mut self.sink, s),
            Value::Bytes(b) => {
                self.sink.put(br#"{"t":"bytes","offset":"#);
                self.attachment(b)?;
            }
            Value::Array(a) => {
                self.sink.put(br#"{"t":"array","dtype":""#);
                self.sink.put(a.dtype().as_str().as_bytes());
                self.sink.put(br#"","shape":"#);
                self.shape(a.shape());
                self.sink.put(br#","offset":"#);
                self.attachment(a.as_bytes())?;
            }
            Value::List(items) => {
                self.sink.put(br#"{"t":"list","v":"#);
                self.seq(items, depth)?;
                self.sink.byte(b'}');
            }
            Value::Tuple(items) => {
                self.sink.put(br#"{"t":"tuple","v":"#);
                self.seq(items, depth)?;
                self.sink.byte(b'}');
            }
            Value::Dict(d) => match text::find(self.texts, v, d, depth) {
                Some(t) => self.text(t, d, depth)?,
                None => self.dict(d.iter(), depth)?,
            },
            Value::ObjectArray(o) => {
                let pointer_bytes = o.values().len().saturating_mul(8);
                if pointer_bytes > self.max_message_size {
                    return Err(CodecError::ObjectArrayTooLarge {
                        shape: o.shape().to_vec(),
                    });
                }
                self.sink.put(br#"{"t":"object_array","shape":"#);
                self.shape(o.shape());
                self.sink.put(br#","v":"#);
                self.seq(o.values(), depth)?;
                self.sink.byte(b'}');
            }
            Value::Graph(g) => {
                if depth + 1 > MAX_DEPTH {
                    return Err(CodecError::TooDeep { max: MAX_DEPTH });
                }
                self.sink.put(br#"{"t":"graph","v":"#);
                self.dict(g.fields().into_iter(), depth + 1)?;
                self.sink.byte(b'}');
            }
        }
        Ok(())
    }

    fn seq(&mut self, items: &'v [Value], depth: usize) -> Result<(), CodecError> {
        self.sink.byte(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.sink.byte(b',');
            }
            self.value(item, depth + 1)?;
        }
        self.sink.byte(b']');
        Ok(())
    }

    fn dict<'k>(
        &mut self,
        entries: impl Iterator<Item = (&'k str, &'v Value)>,
        depth: usize,
    ) -> Result<(), CodecError> {
        self.sink.put(br#"{"t":"dict","v":["#);
        self.entries(entries, depth)?;
        self.sink.put(b"]}");
        Ok(())
    }

    /// Dict entries `["k",V],...` without the surrounding tag.
    fn entries<'k>(
        &mut self,
        entries: impl Iterator<Item = (&'k str, &'v Value)>,
        depth: usize,
    ) -> Result<(), CodecError> {
        for (i, (k, v)) in entries.enumerate() {
            if i > 0 {
                self.sink.byte(b',');
            }
            self.sink.byte(b'[');
            write_str(&mut self.sink, k);
            self.sink.byte(b',');
            self.value(v, depth + 1)?;
            self.sink.byte(b']');
        }
        Ok(())
    }

    fn shape(&mut self, shape: &[usize]) {
        self.sink.byte(b'[');
        let mut buf = itoa::Buffer::new();
        for (i, d) in shape.iter().enumerate() {
            if i > 0 {
                self.sink.byte(b',');
            }
            self.sink.put(buf.format(*d).as_bytes());
        }
        self.sink.byte(b']');
    }

    /// Writes `N,"length":M}` and records the attachment.
    fn attachment(&mut self, data: &'v [u8]) -> Result<(), CodecError> {
        let mut buf = itoa::Buffer::new();
        self.sink.put(buf.format(self.offset).as_bytes());
        self.sink.put(br#","length":"#);
        self.sink.put(buf.format(data.len()).as_bytes());
        self.sink.byte(b'}');
        self.offset = self
            .offset
            .checked_add(data.len())
            .filter(|&n| n <= self.max_message_size)
            .ok_or(CodecError::MessageTooLarge {
                size: self.offset.saturating_add(data.len()),
                max: self.max_message_size,
            })?;
        if let Some(list) = self.attachments.as_mut() {
            list.push(data);
        }
        Ok(())
    }
}

impl DictText {
    /// The text of dict `value` encoded at `depth` (at most), with holes for
    /// the values of the entries named in `holes`, which must be integers.
    /// `None` when the dict cannot be kept as text: not a dict, an
    /// attachment (bytes or array) anywhere in it, a hole entry that is not
    /// an integer, or an encoding error (depth) at `depth`.
    pub(crate) fn new(value: &Value, holes: &[&str], depth: usize) -> Option<DictText> {
        let Value::Dict(d) = value else {
            return None;
        };
        if depth > MAX_DEPTH {
            return None;
        }
        let mut w = Writer {
            sink: Vec::with_capacity(1024),
            offset: 0,
            attachments: Some(Vec::new()),
            max_message_size: usize::MAX,
            texts: &[],
        };
        let mut found = Vec::with_capacity(holes.len());
        // As `Writer::dict` writes it.
        w.sink.put(br#"{"t":"dict","v":["#);
        for (i, (k, v)) in d.iter().enumerate() {
            if i > 0 {
                w.sink.byte(b',');
            }
            w.sink.byte(b'[');
            write_str(&mut w.sink, k);
            w.sink.byte(b',');
            if holes.contains(&k) {
                if !matches!(v, Value::Int(_) | Value::UInt(_)) {
                    return None;
                }
                found.push(Hole {
                    at: w.sink.len(),
                    index: i,
                    key: k.to_string(),
                });
            } else {
                w.value(v, depth + 1).ok()?;
            }
            w.sink.byte(b']');
        }
        w.sink.put(b"]}");
        if w.offset != 0 || w.attachments.as_ref().is_some_and(|a| !a.is_empty()) {
            return None;
        }
        let mut plan = Plan::default();
        plan.walk(value, depth).ok()?;
        Some(DictText {
            text: w.sink,
            holes: found,
            len: d.len(),
            strings: plan.strings,
            depth,
        })
    }
}

impl<'v, S: Sink> Writer<'v, S> {
    /// Writes dict `d` (at `depth`) as `t`, its holes filled from `d`.
    fn text(&mut self, t: &DictText, d: &'v Dict, depth: usize) -> Result<(), CodecError> {
        let mut from = 0;
        for h in &t.holes {
            self.sink.put(&t.text[from..h.at]);
            if let Some((_, v)) = d.iter().nth(h.index) {
                self.value(v, depth + 1)?;
            }
            from = h.at;
        }
        self.sink.put(&t.text[from..]);
        Ok(())
    }
}

/// What a walk of the tree learns before anything is formatted.
#[derive(Default)]
struct Plan<'t> {
    /// Total attachment bytes.
    attachments: usize,
    /// Number of attachments.
    count: usize,
    /// Total bytes of strings and dict keys: the header is at least this long.
    strings: usize,
    /// A rough guess of the header length, to size the output buffer.
    header_estimate: usize,
    /// Dicts written from their kept text.
    texts: Texts<'t>,
}

impl Plan<'_> {
    /// Walks `v` at `depth`, with the encoder's depth rule.
    fn walk(&mut self, v: &Value, depth: usize) -> Result<(), CodecError> {
        if depth > MAX_DEPTH {
            return Err(CodecError::TooDeep { max: MAX_DEPTH });
        }
        let guess = match v {
            Value::Null | Value::Bool(_) | Value::Int(_) | Value::UInt(_) => 8,
            Value::BigInt(b) => b.as_str().len(),
            Value::Float(f) if f.is_finite() => 12,
            Value::Float(_) => 24,
            Value::Str(s) => {
                self.strings = self.strings.saturating_add(s.len());
                s.len() + 2
            }
            Value::Bytes(b) => {
                self.attachments = self.attachments.saturating_add(b.len());
                self.count += 1;
                44
            }
            Value::Array(a) => {
                self.attachments = self.attachments.saturating_add(a.as_bytes().len());
                self.count += 1;
                64 + 4 * a.ndim()
            }
            Value::List(items) | Value::Tuple(items) => {
                for item in items {
                    self.walk(item, depth + 1)?;
                }
                16 + items.len()
            }
            Value::ObjectArray(o) => {
                for item in o.values() {
                    self.walk(item, depth + 1)?;
                }
                32 + 4 * o.shape().len() + o.values().len()
            }
            Value::Dict(d) => match text::find(self.texts, v, d, depth) {
                Some(t) => {
                    self.strings = self.strings.saturating_add(t.strings());
                    t.len() + 16
                }
                None => {
                    for (k, item) in d.iter() {
                        self.strings = self.strings.saturating_add(k.len());
                        self.header_estimate = self.header_estimate.saturating_add(k.len() + 6);
                        self.walk(item, depth + 1)?;
                    }
                    20
                }
            },
            Value::Graph(g) => {
                if depth + 1 > MAX_DEPTH {
                    return Err(CodecError::TooDeep { max: MAX_DEPTH });
                }
                for (k, item) in g.fields() {
                    self.strings += k.len();
                    self.header_estimate += k.len() + 6;
                    self.walk(item, depth + 2)?;
                }
                36
            }
        };
        self.header_estimate = self.header_estimate.saturating_add(guess);
        Ok(())
    }
}

/// The exact size `value` would encode to, or the error encoding it meets
/// first (depth, sizes), without writing it.
pub(crate) fn measure(value: &Value, max_message_size: usize) -> Result<usize, CodecError> {
    let mut measure = Writer {
        sink: Counter(0),
        offset: 0,
        attachments: None,
        max_message_size,
        texts: &[],
    };
    measure.value(value, 0)?;
    Ok(4usize
        .saturating_add(measure.sink.0)
        .saturating_add(measure.offset))
}

/// Encodes `value` into one envelope no larger than `max_message_size`.
pub(crate) fn encode(value: &Value, max_message_size: usize) -> Result<Vec<u8>, CodecError> {
    let mut plan = Plan::default();
    plan.walk(value, 0)?;
    encode_planned(
        plan,
        max_message_size,
        &[],
        |w| w.value(value, 0),
        || measure(value, max_message_size),
    )
}

/// Encodes a top-level dict given as borrowed `(key, value)` entries, exactly
/// as encoding the same `Dict` would, without building it.
pub(crate) fn encode_entries(
    entries: &[(&str, &Value)],
    max_message_size: usize,
) -> Result<Vec<u8>, CodecError> {
    encode_entries_with(entries, &[], max_message_size)
}

/// [`encode_entries`], the dicts named in `texts` written from their kept
/// text when they fit it (the same bytes, as [`DictText`] explains).
pub(crate) fn encode_entries_with<'v>(
    entries: &[(&str, &'v Value)],
    texts: Texts<'v>,
    max_message_size: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut plan = Plan {
        texts,
        ..Plan::default()
    };
    for (k, v) in entries {
        plan.strings = plan.strings.saturating_add(k.len());
        plan.header_estimate = plan.header_estimate.saturating_add(k.len() + 6);
        plan.walk(v, 1)?;
    }
    plan.header_estimate = plan.header_estimate.saturating_add(20);
    let measure_entries = || {
        let mut m = Writer {
            sink: Counter(0),
            offset: 0,
            attachments: None,
            max_message_size,
            texts,
        };
        m.dict(entries.iter().copied(), 0)?;
        Ok(4usize.saturating_add(m.sink.0).saturating_add(m.offset))
    };
    encode_planned(
        plan,
        max_message_size,
        texts,
        |w| w.dict(entries.iter().copied(), 0),
        measure_entries,
    )
}

/// Writes a planned message: the header is formatted once into a buffer
/// reserved for the attachments and an estimate of the header, then the
/// attachments are appended. A message over the limit is refused before the
/// buffer is allocated whenever its strings and attachments alone exceed it.
fn encode_planned<'v>(
    plan: Plan<'_>,
    max_message_size: usize,
    texts: Texts<'v>,
    write_header: impl FnOnce(&mut Writer<'v, Bounded>) -> Result<(), CodecError>,
    measure: impl FnOnce() -> Result<usize, CodecError>,
) -> Result<Vec<u8>, CodecError> {
    let lower_bound = 4usize
        .saturating_add(plan.strings)
        .saturating_add(plan.attachments);
    if lower_bound > max_message_size {
        let size = measure()?;
        return Err(CodecError::MessageTooLarge {
            size,
            max: max_message_size,
        });
    }
    // A low estimate only costs the header a copy when the buffer grows.
    let header_estimate = plan.header_estimate.min(max_message_size - lower_bound);
    let mut out = Vec::with_capacity(4 + header_estimate + plan.attachments);
    out.extend_from_slice(&[0; 4]);
    let mut write = Writer {
        // The header may take what the attachments leave of the limit.
        sink: Bounded {
            out,
            cap: max_message_size - plan.attachments,
            over: false,
        },
        offset: 0,
        attachments: (plan.count > 0).then(|| Vec::with_capacity(plan.count)),
        max_message_size,
        texts,
    };
    let written = write_header(&mut write);
    if write.sink.over {
        // Stopped at the limit: the exact size is counted, not written.
        drop(write);
        let size = measure()?;
        return Err(CodecError::MessageTooLarge {
            size,
            max: max_message_size,
        });
    }
    written?;
    let attachments = write.attachments.take().unwrap_or_default();
    let mut out = write.sink.out;
    debug_assert_eq!(write.offset, plan.attachments);
    let header_len = out.len() - 4;
    let total = out.len().saturating_add(plan.attachments);
    if total > max_message_size || header_len > u32::MAX as usize {
        return Err(CodecError::MessageTooLarge {
            size: total,
            max: max_message_size,
        });
    }
    out[..4].copy_from_slice(&(header_len as u32).to_be_bytes());
    out.reserve_exact(plan.attachments);
    for a in attachments {
        out.extend_from_slice(a);
    }
    debug_assert_eq!(out.len(), total);
    Ok(out)
}

/// The trailing entries of a top-level dict, encoded once and shared by many
/// messages that differ only in their leading entries (snapshot fan-out).
#[derive(Debug, Clone, Default)]
pub struct Fragment {
    /// `["k1",V1],["k2",V2]` as JSON text.
    json: Vec<u8>,
    /// The attachments of those values, concatenated in order.
    attachments: bytes::Bytes,
}

impl Fragment {
    /// Bytes this fragment adds to a message.
    pub fn len(&self) -> usize {
        self.json.len() + self.attachments.len()
    }

    /// Whether the fragment is empty.
    pub fn is_empty(&self) -> bool {
        self.json.is_empty() && self.attachments.is_empty()
    }
}

/// Encodes trailing dict entries into a [`Fragment`].
pub(crate) fn encode_fragment(
    entries: &[(&str, &Value)],
    max_message_size: usize,
) -> Result<Fragment, CodecError> {
    let mut w = Writer {
        sink: Vec::new(),
        offset: 0,
        attachments: Some(Vec::new()),
        max_message_size,
        texts: &[],
    };
    w.entries(entries.iter().copied(), 0)?;
    let slices = w.attachments.take().unwrap_or_default();
    let mut blob = Vec::with_capacity(w.offset);
    for a in slices {
        blob.extend_from_slice(a);
    }
    Ok(Fragment {
        json: w.sink,
        attachments: bytes::Bytes::from(blob),
    })
}

/// A message made of leading entries (which must hold no attachments) and a
/// shared [`Fragment`]: the envelope up to the end of the header, and the
/// attachments (shared, not copied).
pub(crate) fn assemble(
    head: &[(&str, &Value)],
    tail: &Fragment,
    max_message_size: usize,
) -> Result<(Vec<u8>, bytes::Bytes), CodecError> {
    let mut w = Writer {
        sink: Vec::with_capacity(256 + tail.json.len()),
        offset: 0,
        attachments: None,
        max_message_size,
        texts: &[],
    };
    w.sink.extend_from_slice(&[0; 4]);
    w.sink.put(br#"{"t":"dict","v":["#);
    w.entries(head.iter().copied(), 0)?;
    if w.offset != 0 {
        return Err(CodecError::Json {
            offset: 0,
            reason: "leading entries of an assembled message cannot hold attachments",
        });
    }
    if !head.is_empty() && !tail.json.is_empty() {
        w.sink.byte(b',');
    }
    w.sink.put(&tail.json);
    w.sink.put(b"]}");
    let mut out = w.sink;
    let header_len = out.len() - 4;
    let total = out.len().saturating_add(tail.attachments.len());
    if total > max_message_size || header_len > u32::MAX as usize {
        return Err(CodecError::MessageTooLarge {
            size: total,
            max: max_message_size,
        });
    }
    out[..4].copy_from_slice(&(header_len as u32).to_be_bytes());
    Ok((out, tail.attachments.clone()))
}

/// The header alone, as JSON text (used by tools and tests).
pub(crate) fn encode_header(value: &Value) -> Result<String, CodecError> {
    let mut w = Writer {
        sink: Vec::new(),
        offset: 0,
        attachments: None,
        max_message_size: usize::MAX,
        texts: &[],
    };
    w.value(value, 0)?;
    // The writer only emits ASCII.
    String::from_utf8(w.sink).map_err(|_| CodecError::Utf8 { offset: 0 })
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes that Python's `json.dumps` (with `ensure_ascii`) does not copy as
/// they are: control characters, `"`, `\`, DEL and every non-ASCII byte.
static ESCAPED: [bool; 256] = {
    let mut table = [true; 256];
    let mut b = 0x20;
    while b < 0x7f {
        table[b] = false;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Writes a JSON string the way Python's `json.dumps` does with
/// `ensure_ascii=True`: printable ASCII as is, the short escapes for
/// `"`, `\`, `\n`, `\r`, `\t`, `\b`, `\f`, and `\uXXXX` (lowercase, surrogate
/// pairs above the BMP) for everything else.
fn write_str<S: Sink>(sink: &mut S, s: &str) {
    sink.byte(b'"');
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| ESCAPED[b as usize]) {
        sink.put(bytes);
        sink.byte(b'"');
        return;
    }
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if (c as u32) < 0x80 && !ESCAPED[c as usize] {
            continue;
        }
        sink.put(&bytes[start..i]);
        start = i + c.len_utf8();
        match c {
            '"' => sink.put(b"\\\""),
            '\\' => sink.put(b"\\\\"),
            '\n' => sink.put(b"\\n"),
            '\r' => sink.put(b"\\r"),
            '\t' => sink.put(b"\\t"),
            '\u{8}' => sink.put(b"\\b"),
            '\u{c}' => sink.put(b"\\f"),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let u = *unit;
                    sink.put(&[
                        b'\\',
                        b'u',
                        HEX[(u >> 12) as usize & 15],
                        HEX[(u >> 8) as usize & 15],
                        HEX[(u >> 4) as usize & 15],
                        HEX[u as usize & 15],
                    ]);
                }
            }
        }
    }
    sink.put(&bytes[start..]);
    sink.byte(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembled_messages_equal_whole_encodings() {
        use crate::codec::NdArray;
        let arr = Value::Array(NdArray::from_vec(vec![1u8, 2, 3]));
        let data = Value::List(vec![arr.clone(), Value::bytes(vec![9u8; 5]), arr]);
        let desc = Value::from("d");
        let sid = Value::from("session-é");
        let frag = encode_fragment(&[("data", &data), ("descriptor", &desc)], 1 << 20).unwrap();
        let (head, att) = assemble(
            &[("session_id", &sid), ("n", &Value::Int(3))],
            &frag,
            1 << 20,
        )
        .unwrap();
        let mut joined = head.clone();
        joined.extend_from_slice(&att);
        let whole = encode_entries(
            &[
                ("session_id", &sid),
                ("n", &Value::Int(3)),
                ("data", &data),
                ("descriptor", &desc),
            ],
            1 << 20,
        )
        .unwrap();
        assert_eq!(joined, whole);
        assert!(matches!(
            assemble(
                &[("session_id", &sid), ("n", &Value::Int(3))],
                &frag,
                whole.len() - 1
            ),
            Err(CodecError::MessageTooLarge { .. })
        ));
        assert!(assemble(&[("x", &data)], &frag, 1 << 20).is_err());
    }

    #[test]
    fn entries_encode_like_the_dict() {
        use crate::codec::{Dict, NdArray};
        let arr = Value::Array(NdArray::from_vec(vec![1.5f32, 2.0]));
        let nested = Value::List(vec![
            Value::Float(f64::NAN),
            Value::bytes(vec![1u8, 2, 3]),
            arr.clone(),
        ]);
        let entries: Vec<(&str, &Value)> = vec![("a", &arr), ("é", &nested), ("c", &Value::Null)];
        let mut d = Dict::new();
        for (k, v) in &entries {
            d.insert(*k, (*v).clone());
        }
        let whole = encode(&Value::Dict(d), 1 << 20).unwrap();
        assert_eq!(encode_entries(&entries, 1 << 20).unwrap(), whole);
        assert!(matches!(
            encode_entries(&entries, whole.len() - 1),
            Err(CodecError::MessageTooLarge { .. })
        ));
        assert_eq!(measure(&Value::Null, 100).unwrap(), 8);
    }

    #[test]
    fn strings_match_python_ensure_ascii() {
        let mut out = Vec::new();
        write_str(&mut out, "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{7f}é😀/");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\"b\\c\n\r\t\b\f\u0001\u007f\u00e9\ud83d\ude00/""#
        );
    }

    /// A header whose text passes the limit (floats, which the planning
    /// walk does not count) is stopped at the limit: refused with its exact
    /// size, its buffer never past the limit.
    #[test]
    fn a_header_over_the_limit_stops_at_the_limit() {
        let floats = Value::List((0..200_000).map(|i| Value::Float(i as f64 + 0.5)).collect());
        let max = 64 * 1024;
        let size = measure(&floats, usize::MAX).unwrap();
        assert!(size > 10 * max);
        match encode(&floats, max) {
            Err(CodecError::MessageTooLarge { size: s, max: m }) => {
                assert_eq!((s, m), (size, max));
            }
            other => panic!("{other:?}"),
        }
        let mut w = Writer {
            sink: Bounded {
                out: Vec::new(),
                cap: max,
                over: false,
            },
            offset: 0,
            attachments: None,
            max_message_size: max,
            texts: &[],
        };
        assert!(w.value(&floats, 0).is_err());
        assert!(w.sink.over && w.sink.out.len() <= max);
        assert!(encode(&floats, size).is_ok());
    }
}
