//! The codec's limits: message size and value nesting depth.

/// The default limit on a whole message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;
/// The smallest message limit either peer may configure.
pub const MIN_MAX_MESSAGE_SIZE: usize = 8;
/// Deepest value nesting: the root is depth 0 and no node may be deeper than 64.
pub const MAX_DEPTH: usize = 64;
