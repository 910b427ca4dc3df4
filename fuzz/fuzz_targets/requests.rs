//! Request handling: scripts of decoded requests of every op with random
//! members (and some raw or non-request frames), driven through one
//! in-process server hosting the fixture registry over the in-memory
//! transport, one session per input. Inputs starting with `ENV1` are lists
//! of length-prefixed frames instead (the hand-made seeds), where
//! `"session_id": "$SESSION"` stands for the session's real ID.
//!
//! Every frame must be answered exactly once with its own `request_id`
//! (snapshots may come in between), or the connection closed when the spec
//! says so (an invalid envelope, a message over the session's limit, an
//! answer that cannot fit even as an error). Every message the server sends
//! must be a valid envelope within the session's limit, carry the session's
//! ID and a known error code. The server must never panic, and never take
//! longer than 10 s to answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unienv_remote_fuzz::Harness;

fuzz_target!(|data: &[u8]| {
    Harness::get().run_input(data);
});
