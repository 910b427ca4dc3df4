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
mod envelope;
mod error;
mod limits;
pub mod stack;
mod value;
pub mod vector_info;

pub use array::{ArrayError, NdArray, MAX_DIMS};
pub(crate) use decode::reply::KeptReplies;
pub(crate) use decode::request::{Held, RequestTemplate};
pub use dtype::{ByteOrder, DType, DTypeError, Element, ScalarKind};
pub(crate) use encode::DictText;
pub use encode::Fragment;
pub use envelope::{envelope_header, header_json, Codec};
pub use error::CodecError;
pub use limits::{DEFAULT_MAX_MESSAGE_SIZE, MAX_DEPTH, MIN_MAX_MESSAGE_SIZE};
pub use value::{BigInt, Dict, Graph, ObjectArray, ObjectArrayError, Value};
