//! Envelope bytes → value tree.
//!
//! A single-pass recursive-descent parser reads the JSON header straight into
//! [`Value`]s (no intermediate JSON tree) and slices array and bytes
//! attachments out of the received frame without copying them. Every length,
//! offset, count, dtype and depth is checked before anything is allocated for
//! it.
//!
//! Tagged objects are normally written with `"t"` first; when a `"v"` member
//! comes before the tag, it is parsed at once in the only shapes a `v` can
//! have (a scalar, an array of values, an array of `[key, value]` entries, an
//! object) and checked against the tag once it is known, so any member order
//! is accepted and every byte of the header is parsed once: decoding is
//! linear in the input whatever the member order (only a scalar `v` before
//! its tag is scanned twice, and scalars do not nest).

mod kept_tree;
pub(crate) mod reply;
pub(crate) mod request;
mod tagged;

use super::array::{element_count, NdArray, MAX_DIMS};
use super::dtype::DType;
use super::error::{truncate, CodecError};
use super::limits::MAX_DEPTH;
use super::value::{BigInt, Dict, Graph, ObjectArray, Value};
use bytes::Bytes;
use std::borrow::Cow;
use std::collections::HashSet;

/// Deepest raw JSON nesting tolerated while skipping text (tagged values nest
/// at most three JSON levels per value level).
const MAX_JSON_DEPTH: usize = 4 * (MAX_DEPTH + 2);

/// Decodes one envelope. `frame` is kept alive by the returned arrays and
/// byte strings, which are slices of it.
pub(crate) fn decode(
    frame: Bytes,
    max_message_size: usize,
    max_tree_bytes: usize,
) -> Result<(Value, usize), CodecError> {
    let len = frame.len();
    if len > max_message_size {
        return Err(CodecError::MessageTooLarge {
            size: len,
            max: max_message_size,
        });
    }
    if len < 4 {
        return Err(CodecError::TooShort { len });
    }
    let header_len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    if header_len > len - 4 {
        return Err(CodecError::HeaderLength {
            header_len,
            available: len - 4,
        });
    }
    let header = match std::str::from_utf8(&frame[4..4 + header_len]) {
        Ok(text) => text,
        Err(e) => {
            return Err(CodecError::Utf8 {
                offset: e.valid_up_to(),
            })
        }
    };
    let mut p = Parser {
        src: header.as_bytes(),
        text: header,
        pos: 0,
        frame: &frame,
        attach_base: 4 + header_len,
        attach_len: len - 4 - header_len,
        cursor: 0,
        max_message_size,
        tree_bytes: 0,
        max_tree_bytes,
    };
    p.ws();
    let value = p.value(0)?;
    p.ws();
    if p.pos != p.src.len() {
        return Err(p.err("unexpected text after the value"));
    }
    if p.cursor != p.attach_len {
        return Err(CodecError::TrailingData {
            used: p.cursor,
            total: p.attach_len,
            unused: p.attach_len - p.cursor,
        });
    }
    Ok((value, p.tree_bytes))
}

/// Estimated memory of one value node: its slot (twice, for the slack of
/// growing vectors).
const NODE_BYTES: usize = 2 * std::mem::size_of::<Value>();
/// Estimated memory of one dict entry besides its value: the key's slot.
const ENTRY_BYTES: usize = 2 * std::mem::size_of::<String>();

/// The nine tags.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tag {
    Float,
    Dict,
    List,
    Tuple,
    Bytes,
    Array,
    ObjectArray,
    Graph,
}

impl Tag {
    fn parse(s: &str) -> Option<Tag> {
        Some(match s {
            "float" => Tag::Float,
            "dict" => Tag::Dict,
            "list" => Tag::List,
            "tuple" => Tag::Tuple,
            "bytes" => Tag::Bytes,
            "array" => Tag::Array,
            "object_array" => Tag::ObjectArray,
            "graph" => Tag::Graph,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Tag::Float => "float",
            Tag::Dict => "dict",
            Tag::List => "list",
            Tag::Tuple => "tuple",
            Tag::Bytes => "bytes",
            Tag::Array => "array",
            Tag::ObjectArray => "object_array",
            Tag::Graph => "graph",
        }
    }

    /// Members besides `t`, as a bit set over [`Member`].
    fn members(self) -> u8 {
        match self {
            Tag::Float | Tag::Dict | Tag::List | Tag::Tuple | Tag::Graph => V,
            Tag::Bytes => OFFSET | LENGTH,
            Tag::Array => DTYPE | SHAPE | OFFSET | LENGTH,
            Tag::ObjectArray => SHAPE | V,
        }
    }
}

const V: u8 = 1;
const DTYPE: u8 = 2;
const SHAPE: u8 = 4;
const OFFSET: u8 = 8;
const LENGTH: u8 = 16;
const T: u8 = 32;

fn member_name(bit: u8) -> &'static str {
    match bit {
        V => "v",
        DTYPE => "dtype",
        SHAPE => "shape",
        OFFSET => "offset",
        LENGTH => "length",
        _ => "t",
    }
}

/// A `v` member parsed before its object's tag was known.
enum Early {
    /// A JSON scalar at this header position (parsed again with the tag).
    Scalar { at: usize },
    /// `[]`.
    Empty { at: usize },
    /// A JSON array of value nodes (list, tuple, object array); `first` is
    /// the position of its first item.
    Items {
        at: usize,
        first: usize,
        items: Vec<Value>,
    },
    /// A JSON array of `[key, value]` entries (dict).
    Entries { at: usize, dict: Dict },
    /// A JSON object: a value node (a graph's dict).
    Object { value: Value },
}

/// What a tagged object's members held, before the tag is applied.
#[derive(Default)]
struct Members<'a> {
    seen: u8,
    tag: Option<Tag>,
    v: Option<Value>,
    /// A `v` that preceded the tag, parsed without knowing the tag.
    early_v: Option<Early>,
    /// The dtype and its spelling (kept for error messages).
    dtype: Option<(DType, Cow<'a, str>)>,
    shape: Option<Vec<usize>>,
    offset: Option<usize>,
    length: Option<usize>,
}

struct Parser<'a> {
    src: &'a [u8],
    /// `src` as text (validated once, up front).
    text: &'a str,
    pos: usize,
    frame: &'a Bytes,
    attach_base: usize,
    attach_len: usize,
    /// Where the next attachment must start.
    cursor: usize,
    max_message_size: usize,
    /// Estimated memory of the tree built so far, and its budget.
    tree_bytes: usize,
    max_tree_bytes: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, reason: &'static str) -> CodecError {
        CodecError::Json {
            offset: self.pos,
            reason,
        }
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn expect(&mut self, b: u8, reason: &'static str) -> Result<(), CodecError> {
        self.ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(reason))
        }
    }

    /// Whether `NaN` or `Infinity` starts at `at` (JSON's non-standard
    /// constants, which Python's json module would read).
    fn at_constant(&self, at: usize) -> bool {
        let rest = &self.src[at.min(self.src.len())..];
        rest.starts_with(b"NaN") || rest.starts_with(b"Infinity")
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), CodecError> {
        if self.src[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    /// A value node at tagged depth `depth`.
    fn value(&mut self, depth: usize) -> Result<Value, CodecError> {
        #[cfg(test)]
        work::tick();
        self.grow(NODE_BYTES)?;
        if depth > MAX_DEPTH {
            return Err(CodecError::TooDeep { max: MAX_DEPTH });
        }
        self.ws();
        match self.peek() {
            Some(b'n') => self.literal(b"null").map(|_| Value::Null),
            Some(b't') => self.literal(b"true").map(|_| Value::Bool(true)),
            Some(b'f') => self.literal(b"false").map(|_| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'N' | b'I') if self.at_constant(self.pos) => {
                Err(CodecError::NonStandardConstant { offset: self.pos })
            }
            Some(b'{') => self.tagged(depth),
            Some(b'[') => Err(CodecError::BareArray { offset: self.pos }),
            Some(_) => Err(self.err("expected a value")),
            None => Err(self.err("unexpected end of header")),
        }
    }

    fn number(&mut self) -> Result<Value, CodecError> {
        let start = self.pos;
        let s = self.src;
        let mut i = self.pos;
        let negative = s[i] == b'-';
        if negative {
            i += 1;
            if self.at_constant(i) {
                return Err(CodecError::NonStandardConstant { offset: start });
            }
        }
        match s.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(s.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => {
                self.pos = i;
                return Err(self.err("expected a digit"));
            }
        }
        let int_end = i;
        let mut is_float = false;
        if s.get(i) == Some(&b'.') {
            is_float = true;
            i += 1;
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                self.pos = i;
                return Err(self.err("expected a digit after the decimal point"));
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            is_float = true;
            i += 1;
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                self.pos = i;
                return Err(self.err("expected a digit in the exponent"));
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        self.pos = i;
        // The token is ASCII digits and signs only.
        // The token is ASCII, so both ends are character boundaries.
        let text = &self.text[start..i];
        if is_float {
            let f: f64 = text.parse().map_err(|_| self.err("invalid number"))?;
            if !f.is_finite() {
                return Err(CodecError::FloatOutOfRange { offset: start });
            }
            return Ok(Value::Float(f));
        }
        debug_assert_eq!(int_end, i);
        let parsed = if negative {
            text.parse::<i64>().map(Value::Int).ok()
        } else {
            text.parse::<u64>().map(Value::from).ok()
        };
        // Outside both ranges: the digits themselves (up to Python's limit).
        parsed
            .or_else(|| BigInt::parse(text).map(Value::BigInt))
            .ok_or(CodecError::IntegerOutOfRange { offset: start })
    }

    /// A non-negative integer member (offsets, lengths, dimensions).
    fn uint_member(&mut self, tag: &'static str, field: &'static str) -> Result<usize, CodecError> {
        self.ws();
        let start = self.pos;
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => {}
            _ => {
                return Err(CodecError::BadField {
                    tag,
                    field,
                    reason: "must be a non-negative integer",
                })
            }
        }
        match self.number()? {
            Value::Int(i) if i >= 0 => Ok(i as usize),
            _ => {
                self.pos = start;
                Err(CodecError::BadField {
                    tag,
                    field,
                    reason: "must be a non-negative integer",
                })
            }
        }
    }

    /// A JSON string as an owned `String`.
    fn string(&mut self) -> Result<String, CodecError> {
        let s = self.str_token().map(Cow::into_owned)?;
        self.grow(s.len())?;
        Ok(s)
    }

    /// Counts `n` more bytes of tree against the budget.
    #[inline]
    fn grow(&mut self, n: usize) -> Result<(), CodecError> {
        self.tree_bytes = self.tree_bytes.saturating_add(n);
        if self.tree_bytes > self.max_tree_bytes {
            return Err(CodecError::TreeTooLarge {
                max: self.max_tree_bytes,
            });
        }
        Ok(())
    }

    /// A JSON string, borrowed from the header when it has no escapes (member
    /// names, tags and dtypes never do), so that it costs no allocation.
    fn str_token(&mut self) -> Result<Cow<'a, str>, CodecError> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        let s = self.src;
        let text = self.text;
        let start = self.pos + 1;
        let mut i = plain_run(s, start);
        if s.get(i) == Some(&b'"') {
            self.pos = i + 1;
            // Stop bytes are ASCII, so these are character boundaries.
            return Ok(Cow::Borrowed(&text[start..i]));
        }
        let mut out = String::with_capacity(i - start + 16);
        out.push_str(&text[start..i]);
        loop {
            match s.get(i) {
                None => {
                    self.pos = i;
                    return Err(self.err("unterminated string"));
                }
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    let Some(&e) = s.get(i + 1) else {
                        self.pos = i;
                        return Err(self.err("unterminated escape"));
                    };
                    i += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            self.pos = i;
                            let hi = self.hex4()?;
                            i = self.pos;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if s.get(i) != Some(&b'\\') || s.get(i + 1) != Some(&b'u') {
                                    return Err(self.err("unpaired surrogate in \\u escape"));
                                }
                                self.pos = i + 2;
                                let lo = self.hex4()?;
                                i = self.pos;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("unpaired surrogate in \\u escape"));
                                }
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                            } else {
                                char::from_u32(hi)
                            };
                            let Some(c) = c else {
                                return Err(self.err("unpaired surrogate in \\u escape"));
                            };
                            out.push(c);
                        }
                        _ => {
                            self.pos = i - 1;
                            return Err(self.err("invalid escape"));
                        }
                    }
                }
                Some(_) => {
                    self.pos = i;
                    return Err(self.err("control character in string"));
                }
            }
            let next = plain_run(s, i);
            out.push_str(&text[i..next]);
            i = next;
        }
    }

    fn hex4(&mut self) -> Result<u32, CodecError> {
        let digits = self
            .src
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let mut v = 0u32;
        for &d in digits {
            let x = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.err("invalid \\u escape")),
            };
            v = v * 16 + x as u32;
        }
        self.pos += 4;
        Ok(v)
    }

    /// Skips one JSON value (validating its syntax) without building it.
    fn skip(&mut self, json_depth: usize) -> Result<(), CodecError> {
        #[cfg(test)]
        work::tick();
        if json_depth > MAX_JSON_DEPTH {
            return Err(CodecError::TooDeep { max: MAX_DEPTH });
        }
        self.ws();
        match self.peek() {
            Some(b'n') => self.literal(b"null"),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'"') => self.str_token().map(drop),
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
            Some(b'N' | b'I') if self.at_constant(self.pos) => {
                Err(CodecError::NonStandardConstant { offset: self.pos })
            }
            Some(open @ (b'[' | b'{')) => {
                let close = if open == b'[' { b']' } else { b'}' };
                self.pos += 1;
                self.ws();
                if self.peek() == Some(close) {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    if open == b'{' {
                        self.ws();
                        if self.peek() != Some(b'"') {
                            return Err(self.err("expected a member name"));
                        }
                        self.str_token()?;
                        self.expect(b':', "expected ':'")?;
                    }
                    self.skip(json_depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(c) if c == close => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(self.err("expected ',' or a closing bracket")),
                    }
                }
            }
            Some(_) => Err(self.err("expected a value")),
            None => Err(self.err("unexpected end of header")),
        }
    }
}

/// Test-only count of parser steps (value and skip calls), to check that
/// decoding is linear in the input without timing it.
#[cfg(test)]
pub(crate) mod work {
    use std::cell::Cell;
    thread_local!(static STEPS: Cell<u64> = const { Cell::new(0) });
    pub(crate) fn tick() {
        STEPS.with(|s| s.set(s.get() + 1));
    }
    /// Steps since the last call.
    pub(crate) fn take() -> u64 {
        STEPS.with(|s| s.replace(0))
    }
}

/// Bytes that end a run of plain string bytes: `"`, `\` and the control
/// characters JSON forbids in strings.
static STRING_STOP: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// The position of the first stop byte at or after `from`, or `s.len()`.
#[inline]
fn plain_run(s: &[u8], from: usize) -> usize {
    s[from.min(s.len())..]
        .iter()
        .position(|&b| STRING_STOP[b as usize])
        .map_or(s.len(), |n| from + n)
}

#[cfg(test)]
mod tests;
