//! Everything that can be wrong with an envelope or with a value to encode.

use super::array::ArrayError;
use super::dtype::DTypeError;

/// A value or an envelope that the v1 codec cannot represent.
///
/// Each variant names one rule of the wire format. `offset` fields are byte
/// offsets into the JSON header, counted from its first byte.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A message size limit below the smallest allowed.
    #[error("message size limit of {limit} bytes is below the minimum of {min} bytes")]
    LimitTooSmall {
        /// The limit asked for.
        limit: usize,
        /// The smallest limit allowed ([`MIN_MAX_MESSAGE_SIZE`](super::MIN_MAX_MESSAGE_SIZE)).
        min: usize,
    },
    /// Fewer than the four bytes of the header length.
    #[error("envelope of {len} bytes is shorter than its 4-byte header length")]
    TooShort {
        /// Bytes received.
        len: usize,
    },
    /// The whole message is over the configured limit.
    #[error("message of {size} bytes exceeds the limit of {max} bytes")]
    MessageTooLarge {
        /// Message size (or, when encoding, the size it would have).
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The header length prefix points past the end of the frame.
    #[error("header length {header_len} exceeds the {available} bytes after the prefix")]
    HeaderLength {
        /// Declared header length.
        header_len: usize,
        /// Bytes available after the 4-byte prefix.
        available: usize,
    },
    /// The header is not UTF-8.
    #[error("header is not valid UTF-8 at byte {offset}")]
    Utf8 {
        /// First invalid byte.
        offset: usize,
    },
    /// The header is not well-formed JSON.
    #[error("malformed JSON at byte {offset}: {reason}")]
    Json {
        /// Where the problem was found.
        offset: usize,
        /// What was expected.
        reason: &'static str,
    },
    /// JSON's non-standard `NaN` / `Infinity` literals.
    #[error("non-standard JSON constant at byte {offset} (non-finite floats use the float tag)")]
    NonStandardConstant {
        /// Where it starts.
        offset: usize,
    },
    /// A decoded value tree would exceed its memory budget.
    #[error("the decoded value tree exceeds {max} bytes")]
    TreeTooLarge {
        /// The budget.
        max: usize,
    },
    /// An integer token longer than Python's 4300-digit limit (the
    /// reference cannot read it either).
    #[error("integer at byte {offset} has more than 4300 digits")]
    IntegerOutOfRange {
        /// Where it starts.
        offset: usize,
    },
    /// A float token that overflows to infinity.
    #[error("number at byte {offset} is not a finite float")]
    FloatOutOfRange {
        /// Where it starts.
        offset: usize,
    },
    /// More than 64 levels of values.
    #[error("value nesting exceeds {max} levels")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// A JSON array where a value node was expected.
    #[error("bare JSON array at byte {offset} is not a value node (lists use the list tag)")]
    BareArray {
        /// Where it starts.
        offset: usize,
    },
    /// A JSON object without a `t` member.
    #[error("object at byte {offset} has no \"t\" tag")]
    MissingTag {
        /// Where it starts.
        offset: usize,
    },
    /// A tag other than the nine the format defines.
    #[error("unknown value tag {tag:?}")]
    UnknownTag {
        /// The tag (truncated to 64 characters).
        tag: String,
    },
    /// A tagged node lacks a required member.
    #[error("{tag} node lacks the {field:?} member")]
    MissingField {
        /// The node's tag.
        tag: &'static str,
        /// The missing member.
        field: &'static str,
    },
    /// A tagged node has a member its tag does not define.
    #[error("{tag} node has an unexpected member {field:?}")]
    UnexpectedField {
        /// The node's tag (or `"?"` when the tag was not yet known).
        tag: &'static str,
        /// The member (truncated to 64 characters).
        field: String,
    },
    /// A JSON object repeats a member name.
    #[error("object at byte {offset} repeats the member {field:?}")]
    DuplicateMember {
        /// Where the repeat starts.
        offset: usize,
        /// The member (truncated to 64 characters).
        field: String,
    },
    /// A member has the wrong JSON type or an invalid value.
    #[error("{tag} node: {field} {reason}")]
    BadField {
        /// The node's tag.
        tag: &'static str,
        /// The member.
        field: &'static str,
        /// What was expected.
        reason: &'static str,
    },
    /// A dict entry that is not a `[string, value]` pair.
    #[error("dict entry at byte {offset} is not a [key, value] pair with a string key")]
    BadDictEntry {
        /// Where the entry starts.
        offset: usize,
    },
    /// A dict repeats a key.
    #[error("dict repeats the key {key:?}")]
    DuplicateKey {
        /// The key (truncated to 64 characters).
        key: String,
    },
    /// A dictionary to encode has a non-string key (only reachable through
    /// foreign data; the Rust [`Dict`](crate::Dict) type has string keys).
    #[error("dict keys must be strings")]
    NonStringKey,
    /// A bad dtype string.
    #[error(transparent)]
    DType(#[from] DTypeError),
    /// More than 32 dimensions.
    #[error("shape has {ndim} dimensions, at most 32 are allowed")]
    TooManyDims {
        /// Dimensions found (at least 33).
        ndim: usize,
    },
    /// A dimension that is negative, not an integer, or above `i64::MAX`.
    #[error("shape dimension at byte {offset} is not a non-negative 64-bit integer")]
    BadDimension {
        /// Where it starts.
        offset: usize,
    },
    /// product(shape) × itemsize overflows.
    #[error("shape {shape:?} with item size {itemsize} overflows")]
    SizeOverflow {
        /// The shape.
        shape: Vec<usize>,
        /// Bytes per element.
        itemsize: usize,
    },
    /// product(shape) × itemsize differs from the attachment length.
    #[error("array of dtype {dtype} and shape {shape:?} needs {expected} bytes but its attachment has {length}")]
    LengthMismatch {
        /// The dtype string.
        dtype: String,
        /// The shape.
        shape: Vec<usize>,
        /// product(shape) × itemsize.
        expected: usize,
        /// The declared attachment length.
        length: usize,
    },
    /// An attachment does not start where the previous one ended: a gap, an
    /// overlap, or one out of traversal order.
    #[error("attachment at offset {offset} should start at {expected} (attachments are contiguous, in traversal order)")]
    AttachmentOrder {
        /// Where the next attachment must start.
        expected: usize,
        /// Where this one claims to start.
        offset: usize,
    },
    /// An attachment reaches past the end of the frame.
    #[error("attachment at offset {offset} with length {length} exceeds the {available} attachment bytes")]
    AttachmentOutOfBounds {
        /// Declared offset.
        offset: usize,
        /// Declared length.
        length: usize,
        /// Bytes in the attachment section.
        available: usize,
    },
    /// Attachment bytes that no node refers to.
    #[error("{unused} trailing attachment bytes are not referenced (used {used} of {total})")]
    TrailingData {
        /// Bytes referenced.
        used: usize,
        /// Bytes present.
        total: usize,
        /// The difference.
        unused: usize,
    },
    /// An object array whose value count differs from product(shape).
    #[error("object_array of shape {shape:?} holds {actual} values")]
    ObjectArrayCount {
        /// The shape.
        shape: Vec<usize>,
        /// Values present.
        actual: usize,
    },
    /// An object array whose pointer allocation would exceed the message limit.
    #[error("object_array of shape {shape:?} exceeds the container size limit")]
    ObjectArrayTooLarge {
        /// The shape.
        shape: Vec<usize>,
    },
    /// A graph whose dictionary is not exactly the five GraphInstance fields.
    #[error("graph value must be a dict of exactly n_nodes, n_edges, nodes_features, edges_features, edges")]
    GraphFields,
    /// An invalid array built in Rust.
    #[error(transparent)]
    Array(#[from] ArrayError),
}

impl CodecError {
    /// Whether the message exceeded a size limit (rather than being malformed).
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            CodecError::MessageTooLarge { .. } | CodecError::ObjectArrayTooLarge { .. }
        )
    }
}

pub(crate) fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}
