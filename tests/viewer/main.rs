//! The browser viewer: headless Chromium, its command line, latest-frame delivery.
//!
//! One test binary; each module was once a test file of its own.

#[path = "../cli/support.rs"]
mod cli_support;
#[path = "../common/mod.rs"]
mod common;
mod support;

mod browser;
mod cli;
mod closed;
mod floods;
mod idle;
mod latest;
mod relay;
mod timeline;
