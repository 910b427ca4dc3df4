//! A C ABI over unienv-remote's server: C and C++ programs (game engines,
//! physics engines, in-house simulators) host UniEnv envs that Python
//! learners drive with `unienv_remote.RemoteClient` or the reference
//! `unienv_interface.remote.RemoteClient`.
//!
//! The header is `include/unienv_remote.h` (generated from this crate by
//! cbindgen; `cargo test -p unienv-remote-capi` checks it is current), the
//! C++17 wrapper `include/unienv_remote.hpp`. See the header's opening
//! comment for ownership, errors and the two threading modes.
//!
//! No Rust panic crosses the boundary: every exported function runs its
//! body under `catch_unwind` and reports a panic as `UNIENV_ERR_INTERNAL`.

#![allow(clippy::missing_safety_doc)]

mod dial;
mod env;
mod error;
mod pump;
mod server;
mod space;
mod value;

pub use dial::*;
pub use env::*;
pub use error::{
    unienv_last_error_code, unienv_last_error_message, unienv_status_name, UNIENV_ERR_CONFIG,
    UNIENV_ERR_INTERNAL, UNIENV_ERR_INVALID_ARGUMENT, UNIENV_ERR_IO, UNIENV_ERR_NOT_FOUND,
    UNIENV_ERR_REGISTER, UNIENV_ERR_STATE, UNIENV_ERR_WRONG_TYPE, UNIENV_OK,
};
pub use server::*;
pub use space::*;
pub use value::*;

use std::ffi::c_char;

/// Version of this C ABI: bumped on every incompatible change of the
/// header. Compare `unienv_abi_version()` with `UNIENV_ABI_VERSION` (the
/// header's) at start-up to catch a header and library that do not match.
pub const UNIENV_ABI_VERSION: u32 = 1;

/// The version of the UniEnv remote protocol spoken (1).
pub const UNIENV_PROTOCOL_VERSION: u32 = 1;

/// The library's version, e.g. `"0.1.0"` (static text).
#[no_mangle]
pub extern "C" fn unienv_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The library's C ABI version (`UNIENV_ABI_VERSION` when it was built).
#[no_mangle]
pub extern "C" fn unienv_abi_version() -> u32 {
    UNIENV_ABI_VERSION
}

/// The remote protocol version the server speaks.
#[no_mangle]
pub extern "C" fn unienv_protocol_version() -> u32 {
    unienv_remote::protocol::PROTOCOL_VERSION as u32
}

#[cfg(test)]
mod tests;
