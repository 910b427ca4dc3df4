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

use super::array::{element_count, NdArray, MAX_DIMS};
use super::dtype::DType;
use super::error::{truncate, CodecError};
use super::value::{BigInt, Dict, Graph, ObjectArray, Value};
use super::MAX_DEPTH;
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

    /// A tagged object: `{"t": ..., ...}`.
    fn tagged(&mut self, depth: usize) -> Result<Value, CodecError> {
        let open = self.pos;
        self.pos += 1;
        let mut m = Members::default();
        self.ws();
        if self.peek() == Some(b'}') {
            return Err(CodecError::MissingTag { offset: open });
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a member name"));
            }
            let key_at = self.pos;
            let key = self.str_token()?;
            self.expect(b':', "expected ':'")?;
            self.ws();
            let bit = match key.as_ref() {
                "t" => T,
                "v" => V,
                "dtype" => DTYPE,
                "shape" => SHAPE,
                "offset" => OFFSET,
                "length" => LENGTH,
                _ => {
                    return Err(CodecError::UnexpectedField {
                        tag: m.tag.map_or("?", Tag::name),
                        field: truncate(&key),
                    })
                }
            };
            if m.seen & bit != 0 {
                return Err(CodecError::DuplicateMember {
                    offset: key_at,
                    field: key.into_owned(),
                });
            }
            m.seen |= bit;
            if let Some(tag) = m.tag {
                if bit != T && tag.members() & bit == 0 {
                    return Err(CodecError::UnexpectedField {
                        tag: tag.name(),
                        field: key.into_owned(),
                    });
                }
            }
            let tag_name = m.tag.map_or("?", Tag::name);
            match bit {
                T => {
                    if self.peek() != Some(b'"') {
                        return Err(CodecError::BadField {
                            tag: "?",
                            field: "t",
                            reason: "must be a string",
                        });
                    }
                    let t = self.str_token()?;
                    let tag = Tag::parse(&t)
                        .ok_or_else(|| CodecError::UnknownTag { tag: truncate(&t) })?;
                    // Members that came before the tag must belong to it.
                    let extra = m.seen & !(T | tag.members());
                    if extra != 0 {
                        return Err(CodecError::UnexpectedField {
                            tag: tag.name(),
                            field: member_name(extra & extra.wrapping_neg()).to_string(),
                        });
                    }
                    m.tag = Some(tag);
                }
                V => match m.tag {
                    Some(tag) => m.v = Some(self.payload(tag, depth)?),
                    None => m.early_v = Some(self.early(depth)?),
                },
                DTYPE => {
                    if self.peek() != Some(b'"') {
                        return Err(CodecError::BadField {
                            tag: tag_name,
                            field: "dtype",
                            reason: "must be a string",
                        });
                    }
                    let s = self.str_token()?;
                    m.dtype = Some((DType::parse(&s)?, s));
                }
                SHAPE => m.shape = Some(self.shape(tag_name)?),
                OFFSET => m.offset = Some(self.uint_member(tag_name, "offset")?),
                _ => m.length = Some(self.uint_member(tag_name, "length")?),
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
        let Some(tag) = m.tag else {
            return Err(CodecError::MissingTag { offset: open });
        };
        let missing = tag.members() & !m.seen;
        if missing != 0 {
            return Err(CodecError::MissingField {
                tag: tag.name(),
                field: member_name(missing & missing.wrapping_neg()),
            });
        }
        if let Some(early) = m.early_v.take() {
            m.v = Some(self.apply_early(tag, early, depth)?);
        }
        self.build(tag, m)
    }

    /// A `v` member met before the tag: parsed once, in the shape its first
    /// byte announces (no container is ever skipped and parsed again).
    fn early(&mut self, depth: usize) -> Result<Early, CodecError> {
        self.ws();
        let at = self.pos;
        match self.peek() {
            Some(b'[') => {
                let mut i = at + 1;
                while matches!(self.src.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    i += 1;
                }
                match self.src.get(i) {
                    Some(b']') => {
                        self.pos = i + 1;
                        Ok(Early::Empty { at })
                    }
                    Some(b'[') => Ok(Early::Entries {
                        at,
                        dict: self.dict_entries(depth)?,
                    }),
                    _ => Ok(Early::Items {
                        at,
                        first: i,
                        items: self.items(Tag::List, depth)?,
                    }),
                }
            }
            Some(b'{') => Ok(Early::Object {
                value: self.value(depth + 1)?,
            }),
            _ => {
                // A scalar: validated now, parsed again (once) with its tag.
                self.skip(0)?;
                Ok(Early::Scalar { at })
            }
        }
    }

    /// Checks an early `v` against the tag that followed it; the errors are
    /// those the tag's own parser gives for the same text.
    fn apply_early(&mut self, tag: Tag, early: Early, depth: usize) -> Result<Value, CodecError> {
        let not_array = |tag: Tag| CodecError::BadField {
            tag: tag.name(),
            field: "v",
            reason: if tag == Tag::Dict {
                "must be a JSON array of [key, value] pairs"
            } else {
                "must be a JSON array"
            },
        };
        match (tag, early) {
            (_, Early::Scalar { at }) => {
                let resume = self.pos;
                self.pos = at;
                let v = self.payload(tag, depth);
                self.pos = resume;
                v
            }
            (Tag::Float, _) => Err(CodecError::BadField {
                tag: "float",
                field: "v",
                reason: "must be \"nan\", \"inf\" or \"-inf\"",
            }),
            (Tag::Graph, Early::Object { value, .. }) => Ok(value),
            (
                Tag::Graph,
                Early::Empty { at } | Early::Items { at, .. } | Early::Entries { at, .. },
            ) => Err(CodecError::BareArray { offset: at }),
            (_, Early::Object { .. }) => Err(not_array(tag)),
            (Tag::Dict, Early::Empty { .. }) => Ok(Value::Dict(Dict::new())),
            (Tag::Dict, Early::Entries { dict, .. }) => Ok(Value::Dict(dict)),
            (Tag::Dict, Early::Items { first, .. }) => {
                Err(CodecError::BadDictEntry { offset: first })
            }
            (Tag::Tuple, Early::Empty { .. }) => Ok(Value::Tuple(Vec::new())),
            (Tag::Tuple, Early::Items { items, .. }) => Ok(Value::Tuple(items)),
            (_, Early::Empty { .. }) => Ok(Value::List(Vec::new())),
            (_, Early::Items { items, .. }) => Ok(Value::List(items)),
            (_, Early::Entries { at, .. }) => {
                // The first entry is a bare JSON array inside a list.
                let mut i = at + 1;
                while matches!(self.src.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    i += 1;
                }
                Err(CodecError::BareArray { offset: i })
            }
        }
    }

    /// The `v` member of a tagged node.
    fn payload(&mut self, tag: Tag, depth: usize) -> Result<Value, CodecError> {
        self.ws();
        match tag {
            Tag::Float => {
                if self.peek() != Some(b'"') {
                    return Err(CodecError::BadField {
                        tag: "float",
                        field: "v",
                        reason: "must be \"nan\", \"inf\" or \"-inf\"",
                    });
                }
                let s = self.str_token()?;
                Ok(Value::Float(match s.as_ref() {
                    "nan" => f64::NAN,
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    _ => {
                        return Err(CodecError::BadField {
                            tag: "float",
                            field: "v",
                            reason: "must be \"nan\", \"inf\" or \"-inf\"",
                        })
                    }
                }))
            }
            Tag::List | Tag::Tuple | Tag::ObjectArray => {
                let items = self.items(tag, depth)?;
                Ok(if tag == Tag::Tuple {
                    Value::Tuple(items)
                } else {
                    Value::List(items)
                })
            }
            Tag::Dict => self.dict_entries(depth).map(Value::Dict),
            Tag::Graph => {
                let fields = self.value(depth + 1)?;
                Ok(fields)
            }
            Tag::Bytes | Tag::Array => Err(CodecError::UnexpectedField {
                tag: tag.name(),
                field: "v".into(),
            }),
        }
    }

    fn items(&mut self, tag: Tag, depth: usize) -> Result<Vec<Value>, CodecError> {
        if self.peek() != Some(b'[') {
            return Err(CodecError::BadField {
                tag: tag.name(),
                field: "v",
                reason: "must be a JSON array",
            });
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(items);
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    fn dict_entries(&mut self, depth: usize) -> Result<Dict, CodecError> {
        if self.peek() != Some(b'[') {
            return Err(CodecError::BadField {
                tag: "dict",
                field: "v",
                reason: "must be a JSON array of [key, value] pairs",
            });
        }
        self.pos += 1;
        let mut dict = Dict::new();
        // Linear duplicate checks for small dicts, a hash set past that.
        let mut index: Option<HashSet<String>> = None;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(dict);
        }
        loop {
            self.ws();
            let entry_at = self.pos;
            if self.peek() != Some(b'[') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            self.pos += 1;
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            let key = self.string()?;
            self.grow(ENTRY_BYTES)?;
            let duplicate = match index.as_mut() {
                Some(set) => !set.insert(key.clone()),
                None => {
                    let dup = dict.contains_key(&key);
                    if dict.len() >= 16 {
                        index = Some(
                            dict.keys()
                                .map(str::to_owned)
                                .chain([key.clone()])
                                .collect(),
                        );
                    }
                    dup
                }
            };
            if duplicate {
                return Err(CodecError::DuplicateKey {
                    key: truncate(&key),
                });
            }
            self.ws();
            if self.peek() != Some(b',') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            self.pos += 1;
            let value = self.value(depth + 1)?;
            self.ws();
            if self.peek() != Some(b']') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            self.pos += 1;
            dict.push_unique(key, value);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(dict);
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// A raw JSON array of at most 32 non-negative integers.
    fn shape(&mut self, tag: &'static str) -> Result<Vec<usize>, CodecError> {
        if self.peek() != Some(b'[') {
            return Err(CodecError::BadField {
                tag,
                field: "shape",
                reason: "must be a JSON array of integers",
            });
        }
        self.pos += 1;
        let mut shape = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(shape);
        }
        loop {
            self.ws();
            let at = self.pos;
            if !matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
                return Err(CodecError::BadDimension { offset: at });
            }
            match self.number()? {
                Value::Int(i) if i >= 0 => {
                    if shape.len() == MAX_DIMS {
                        return Err(CodecError::TooManyDims { ndim: MAX_DIMS + 1 });
                    }
                    shape.push(i as usize);
                }
                _ => return Err(CodecError::BadDimension { offset: at }),
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(shape);
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// Claims the next attachment: it must start exactly where the previous
    /// one ended and fit in the attachment section.
    fn attachment(&mut self, offset: usize, length: usize) -> Result<Bytes, CodecError> {
        if offset != self.cursor {
            return Err(CodecError::AttachmentOrder {
                expected: self.cursor,
                offset,
            });
        }
        if length > self.attach_len - offset {
            return Err(CodecError::AttachmentOutOfBounds {
                offset,
                length,
                available: self.attach_len,
            });
        }
        self.cursor += length;
        let start = self.attach_base + offset;
        Ok(self.frame.slice(start..start + length))
    }

    fn build(&mut self, tag: Tag, m: Members<'_>) -> Result<Value, CodecError> {
        match tag {
            Tag::Float | Tag::List | Tag::Tuple | Tag::Dict => Ok(m.v.unwrap_or_default()),
            Tag::Graph => match m.v {
                Some(Value::Dict(d)) => graph_from(d),
                _ => Err(CodecError::GraphFields),
            },
            Tag::ObjectArray => {
                let shape = m.shape.unwrap_or_default();
                let values = match m.v {
                    Some(Value::List(v)) => v,
                    _ => Vec::new(),
                };
                let count = element_count(&shape);
                if count
                    .and_then(|n| n.checked_mul(8))
                    .is_none_or(|bytes| bytes > self.max_message_size)
                {
                    return Err(CodecError::ObjectArrayTooLarge { shape });
                }
                if count != Some(values.len()) {
                    return Err(CodecError::ObjectArrayCount {
                        shape,
                        actual: values.len(),
                    });
                }
                Ok(Value::ObjectArray(ObjectArray::new_unchecked(
                    shape, values,
                )))
            }
            Tag::Bytes => {
                let data = self.attachment(m.offset.unwrap_or(0), m.length.unwrap_or(0))?;
                Ok(Value::Bytes(data))
            }
            Tag::Array => {
                let (dtype, dtype_str) = m.dtype.unwrap_or((DType::U8, Cow::Borrowed("")));
                let shape = m.shape.unwrap_or_default();
                let (offset, length) = (m.offset.unwrap_or(0), m.length.unwrap_or(0));
                let expected = element_count(&shape)
                    .and_then(|n| n.checked_mul(dtype.itemsize()))
                    .ok_or_else(|| CodecError::SizeOverflow {
                        shape: shape.clone(),
                        itemsize: dtype.itemsize(),
                    })?;
                if expected != length {
                    return Err(CodecError::LengthMismatch {
                        dtype: dtype_str.into_owned(),
                        shape,
                        expected,
                        length,
                    });
                }
                let data = self.attachment(offset, length)?;
                Ok(Value::Array(NdArray::from_bytes(dtype, shape, data)?))
            }
        }
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

fn graph_from(d: Dict) -> Result<Value, CodecError> {
    if d.len() != 5 || !Graph::FIELDS.iter().all(|f| d.contains_key(f)) {
        return Err(CodecError::GraphFields);
    }
    let mut g = Graph::default();
    for (k, v) in d {
        match k.as_str() {
            "n_nodes" => g.n_nodes = v,
            "n_edges" => g.n_edges = v,
            "nodes_features" => g.nodes_features = v,
            "edges_features" => g.edges_features = v,
            _ => g.edges = v,
        }
    }
    Ok(Value::Graph(Box::new(g)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(header: &str) -> Bytes {
        let mut out = (header.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        Bytes::from(out)
    }

    fn decode_str(header: &str) -> Result<Value, CodecError> {
        decode(envelope(header), 1 << 30, usize::MAX).map(|(v, _)| v)
    }

    /// A tree is refused as it grows past its budget, and its estimate is
    /// returned: a flat list of n zeros costs n nodes.
    #[test]
    fn tree_budget() {
        let n = 10_000;
        let header = format!(r#"{{"t":"list","v":[{}]}}"#, vec!["0"; n].join(","));
        let (_, bytes) = decode(envelope(&header), 1 << 30, usize::MAX).unwrap();
        assert_eq!(bytes, (n + 1) * NODE_BYTES);
        assert!(matches!(
            decode(envelope(&header), 1 << 30, bytes - 1),
            Err(CodecError::TreeTooLarge { .. })
        ));
        assert!(decode(envelope(&header), 1 << 30, bytes).is_ok());
    }

    /// A `v` before `t`, nested 60 deep around 100,000 zeros: every level
    /// used to skip its whole `v` and parse it again (60 × the input); now
    /// each token is parsed once.
    #[test]
    fn v_before_t_is_parsed_once_at_every_depth() {
        let n = 100_000;
        let zeros = vec!["0"; n].join(",");
        let mut header = format!(r#"{{"v":[{zeros}],"t":"list"}}"#);
        for _ in 0..60 {
            header = format!(r#"{{"v":[{header}],"t":"tuple"}}"#);
        }
        work::take();
        let value = decode_str(&header).unwrap();
        let steps = work::take();
        assert!(
            steps <= 2 * (n as u64 + 200),
            "{steps} parser steps for {n} values: not linear"
        );
        let mut v = &value;
        for _ in 0..60 {
            match v {
                Value::Tuple(items) if items.len() == 1 => v = &items[0],
                other => panic!("expected a one-item tuple, got {other:?}"),
            }
        }
        assert!(matches!(v, Value::List(items) if items.len() == n));
    }

    /// The same trees, and the same errors, whatever the member order.
    #[test]
    fn member_order_does_not_change_the_result() {
        let cases = [
            (
                r#"{"t":"dict","v":[["a",1],["b",{"t":"list","v":[]}]]}"#,
                r#"{"v":[["a",1],["b",{"v":[],"t":"list"}]],"t":"dict"}"#,
            ),
            (
                r#"{"t":"tuple","v":[1,2.5,"x",null]}"#,
                r#"{"v":[1,2.5,"x",null],"t":"tuple"}"#,
            ),
            (r#"{"t":"float","v":"nan"}"#, r#"{"v":"nan","t":"float"}"#),
            (r#"{"t":"dict","v":[]}"#, r#"{"v":[],"t":"dict"}"#),
            (
                r#"{"t":"object_array","shape":[2],"v":[1,2]}"#,
                r#"{"v":[1,2],"shape":[2],"t":"object_array"}"#,
            ),
            (
                r#"{"t":"graph","v":{"t":"dict","v":[["n_nodes",1],["n_edges",0],["nodes_features",null],["edges_features",null],["edges",null]]}}"#,
                r#"{"v":{"v":[["n_nodes",1],["n_edges",0],["nodes_features",null],["edges_features",null],["edges",null]],"t":"dict"},"t":"graph"}"#,
            ),
        ];
        for (t_first, v_first) in cases {
            let a = decode_str(t_first).unwrap();
            let b = decode_str(v_first).unwrap();
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{v_first}");
        }
        let errors = [
            (r#"{"t":"list","v":5}"#, r#"{"v":5,"t":"list"}"#),
            (r#"{"t":"dict","v":[1]}"#, r#"{"v":[1],"t":"dict"}"#),
            (r#"{"t":"list","v":[[1]]}"#, r#"{"v":[[1]],"t":"list"}"#),
            (r#"{"t":"float","v":"x"}"#, r#"{"v":"x","t":"float"}"#),
            (r#"{"t":"float","v":[1]}"#, r#"{"v":[1],"t":"float"}"#),
            (r#"{"t":"graph","v":[]}"#, r#"{"v":[],"t":"graph"}"#),
            (r#"{"t":"graph","v":3}"#, r#"{"v":3,"t":"graph"}"#),
            (
                r#"{"t":"tuple","v":{"t":"list","v":[]}}"#,
                r#"{"v":{"t":"list","v":[]},"t":"tuple"}"#,
            ),
        ];
        for (t_first, v_first) in errors {
            let a = decode_str(t_first).unwrap_err();
            let b = decode_str(v_first).unwrap_err();
            if v_first.starts_with(r#"{"v":[["#) {
                // Parsed as dict entries before the tag said list: an error
                // either way, named differently.
                continue;
            }
            assert_eq!(
                std::mem::discriminant(&a),
                std::mem::discriminant(&b),
                "{v_first}: {a} vs {b}"
            );
        }
    }
}
