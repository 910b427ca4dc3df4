//! [`Codec`]: envelopes encoded and decoded under a message size limit, and
//! header inspection.

use super::decode;
use super::encode::{self, DictText, Fragment};
use super::error::CodecError;
use super::limits::{DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE};
use super::value::Value;
use bytes::Bytes;

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
    /// A codec with the given limit; [`CodecError::LimitTooSmall`] when it
    /// is below [`MIN_MAX_MESSAGE_SIZE`] (a tiny limit is refused, never
    /// replaced by the default).
    pub fn new(max_message_size: usize) -> Result<Codec, CodecError> {
        if max_message_size < MIN_MAX_MESSAGE_SIZE {
            return Err(CodecError::LimitTooSmall {
                limit: max_message_size,
                min: MIN_MAX_MESSAGE_SIZE,
            });
        }
        Ok(Codec { max_message_size })
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
    /// building a [`Dict`](super::Dict); equivalent to encoding the dict.
    pub fn encode_entries(&self, entries: &[(&str, &Value)]) -> Result<Vec<u8>, CodecError> {
        encode::encode_entries(entries, self.max_message_size)
    }

    /// [`Codec::encode_entries`], writing each dict named in `texts` (by
    /// address) from its kept text when it still fits it: the same bytes as
    /// long as the caller names a dict only with the text made from it
    /// (holes aside), which is the caller's to know.
    pub(crate) fn encode_entries_with<'v>(
        &self,
        entries: &[(&str, &'v Value)],
        texts: &'v [(&'v Value, &'v DictText)],
    ) -> Result<Vec<u8>, CodecError> {
        encode::encode_entries_with(entries, texts, self.max_message_size)
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
