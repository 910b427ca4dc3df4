//! The v1 envelope codec: value tree ⇄ bytes. Pure: no I/O.
//!
//! # Wire format
//! An envelope is a 4-byte big-endian header length, that many bytes of UTF-8
//! JSON (the tagged value tree), then the binary attachments of every `bytes`
//! and `array` node, contiguous and in traversal order. See `SPEC.md` for the
//! full contract as this crate implements it.
//!
//! Decoding is zero-copy: arrays and byte strings in the decoded tree are
//! [`bytes::Bytes`] slices of the received frame. Encoding measures the
//! message first and writes it into one buffer allocated at its final size.
//!
//! ```
//! use unienv_remote::{dict, Codec, NdArray, Value};
//! let codec = Codec::default();
//! let value = Value::from(dict! {
//!     "obs" => NdArray::from_vec(vec![1.0f32, 2.0]),
//!     "reward" => 1.5,
//! });
//! let frame = codec.encode(&value).unwrap();
//! assert_eq!(codec.decode(frame.into()).unwrap(), value);
//! ```

mod array;
mod decode;
mod dtype;
mod encode;
mod error;
mod value;

pub use array::{ArrayError, NdArray, MAX_DIMS};
pub use dtype::{ByteOrder, DType, DTypeError, Element, ScalarKind};
pub use encode::Fragment;
pub use error::CodecError;
pub use value::{BigInt, Dict, Graph, ObjectArray, ObjectArrayError, Value};

use bytes::Bytes;

/// The default limit on a whole message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;
/// The smallest message limit either peer may configure.
pub const MIN_MAX_MESSAGE_SIZE: usize = 8;
/// Deepest value nesting: the root is depth 0 and no node may be deeper than 64.
pub const MAX_DEPTH: usize = 64;

/// Encodes and decodes envelopes under a message size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    max_message_size: usize,
}

impl Default for Codec {
    /// A codec with the default 64 MiB limit.
    fn default() -> Codec {
        Codec {
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }
}

impl Codec {
    /// A codec with the given limit; `None` when it is below
    /// [`MIN_MAX_MESSAGE_SIZE`].
    pub fn new(max_message_size: usize) -> Option<Codec> {
        (max_message_size >= MIN_MAX_MESSAGE_SIZE).then_some(Codec { max_message_size })
    }

    /// The message size limit in bytes.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// Encodes a value into one envelope.
    pub fn encode(&self, value: &Value) -> Result<Vec<u8>, CodecError> {
        encode::encode(value, self.max_message_size)
    }

    /// Encodes a dictionary given as borrowed `(key, value)` entries, without
    /// building a [`Dict`]; equivalent to encoding the dict.
    pub fn encode_entries(&self, entries: &[(&str, &Value)]) -> Result<Vec<u8>, CodecError> {
        encode::encode_entries(entries, self.max_message_size)
    }

    /// Encodes trailing dict entries once, to be shared by many messages
    /// (see [`Codec::assemble`]).
    pub fn encode_fragment(&self, entries: &[(&str, &Value)]) -> Result<Fragment, CodecError> {
        encode::encode_fragment(entries, self.max_message_size)
    }

    /// A dict message made of `head` entries (without attachments) followed
    /// by a shared [`Fragment`], as two parts: the envelope up to the end of
    /// its header, and the attachments. Concatenated, they are exactly what
    /// [`Codec::encode_entries`] writes for all the entries.
    pub fn assemble(
        &self,
        head: &[(&str, &Value)],
        tail: &Fragment,
    ) -> Result<(Vec<u8>, Bytes), CodecError> {
        encode::assemble(head, tail, self.max_message_size)
    }

    /// Checks that a value can be encoded within the limit and returns the
    /// size its envelope would have, without writing it.
    pub fn measure(&self, value: &Value) -> Result<usize, CodecError> {
        encode::measure(value, self.max_message_size)
    }

    /// Decodes one envelope. Arrays and byte strings in the result are slices
    /// of `frame`.
    pub fn decode(&self, frame: Bytes) -> Result<Value, CodecError> {
        decode::decode(frame, self.max_message_size, usize::MAX).map(|(v, _)| v)
    }

    /// Decodes one envelope whose value tree (its nodes, strings and
    /// containers, attachments excluded) may take at most `max_tree_bytes`
    /// of memory, estimated as it is built; returns the tree and that
    /// estimate. The server uses it to refuse a tree before it grows and to
    /// charge what it holds.
    pub fn decode_bounded(
        &self,
        frame: Bytes,
        max_tree_bytes: usize,
    ) -> Result<(Value, usize), CodecError> {
        decode::decode(frame, self.max_message_size, max_tree_bytes)
    }
}

/// The JSON header that [`Codec::encode`] would write for `value`, as text.
pub fn header_json(value: &Value) -> Result<String, CodecError> {
    encode::encode_header(value)
}

/// The JSON header of an envelope as text, with its declared length checked
/// against the frame (nothing else is validated).
pub fn envelope_header(frame: &[u8]) -> Result<&str, CodecError> {
    if frame.len() < 4 {
        return Err(CodecError::TooShort { len: frame.len() });
    }
    let header_len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    if header_len > frame.len() - 4 {
        return Err(CodecError::HeaderLength {
            header_len,
            available: frame.len() - 4,
        });
    }
    std::str::from_utf8(&frame[4..4 + header_len]).map_err(|e| CodecError::Utf8 {
        offset: e.valid_up_to(),
    })
}
