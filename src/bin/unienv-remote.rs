//! The `unienv-remote` command line tool.
fn main() {}
