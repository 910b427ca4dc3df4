//! The pure WebSocket frame parser (`unienv_remote::transport::frame`), on
//! arbitrary bytes: the first byte picks the receiving role (even: server,
//! which receives masked client frames; odd: client), the rest is a stream
//! of frames. No I/O: coverage-guided fuzzing runs at parser speed.
//!
//! Properties, frame after frame until the bytes run out or a frame is
//! refused: no panic; `Incomplete(n)` asks for more than the bytes at hand
//! and for 2, 4 or 10; a parsed header is consistent (header length 2, 4 or
//! 10 plus 4 for a mask; the mask bit matches the role; the opcode is one of
//! the six defined; control frames are final and at most 125 bytes; the
//! length's top bit is clear); every shorter prefix of the bytes parses as
//! `Incomplete` or as the same header; a frame whose length is in its
//! shortest form re-encodes (`encode_into`, with its own mask) to exactly
//! its bytes; close payloads either give a code a close frame may carry
//! (or 1000 for an empty one) or a `FrameError`, whose close code is 1002.
//! The loopback server harness that was this target is `frames_server`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unienv_remote::transport::frame::{
    apply_mask, encode_into, parse_close, parse_header, valid_close_code, Parsed, Role, OP_CLOSE,
};

fuzz_target!(|data: &[u8]| {
    let Some((&role_byte, mut rest)) = data.split_first() else {
        return;
    };
    let role = if role_byte % 2 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    for _ in 0..64 {
        let h = match parse_header(rest, role) {
            Err(e) => {
                assert_eq!(e.close_code(), 1002);
                return;
            }
            Ok(Parsed::Incomplete(n)) => {
                assert!(
                    n > rest.len() && matches!(n, 2 | 4 | 10),
                    "{n} {}",
                    rest.len()
                );
                return;
            }
            Ok(Parsed::Header(h)) => h,
        };
        assert_eq!(h.masked, role == Role::Server);
        let base = h.header_len - if h.masked { 4 } else { 0 };
        assert!(matches!(base, 2 | 4 | 10), "{h:?}");
        assert!(base <= rest.len());
        assert!(h.len >> 63 == 0);
        assert!(matches!(h.opcode, 0x0 | 0x1 | 0x2 | 0x8 | 0x9 | 0xA));
        if h.is_control() {
            assert!(h.fin && h.len <= 125, "{h:?}");
        }
        for cut in 0..base {
            match parse_header(&rest[..cut], role) {
                Ok(Parsed::Incomplete(n)) => assert!(n > cut),
                other => panic!("prefix {cut} of {h:?}: {other:?}"),
            }
        }
        for cut in base..h.header_len.min(rest.len()) {
            assert_eq!(parse_header(&rest[..cut], role), Ok(Parsed::Header(h)));
        }
        let Ok(len) = usize::try_from(h.len) else {
            return;
        };
        let Some(total) = h.header_len.checked_add(len) else {
            return;
        };
        if rest.len() < total {
            return;
        }
        let mask = h.mask(rest);
        assert_eq!(mask.is_some(), h.masked);
        let mut payload = rest[h.header_len..total].to_vec();
        if let Some(m) = mask {
            apply_mask(&mut payload, m);
        }
        let minimal = match base {
            2 => true,
            4 => (126..=0xFFFF).contains(&len),
            _ => len > 0xFFFF,
        };
        if minimal && h.fin {
            let mut again = Vec::new();
            encode_into(&mut again, h.opcode, &payload, mask);
            assert!(again == rest[..total], "re-encoding differs: {h:?}");
        }
        if h.opcode == OP_CLOSE {
            match parse_close(&payload) {
                Ok(code) => assert!(valid_close_code(code) && (code != 1000 || payload.len() != 1)),
                Err(e) => assert_eq!(e.close_code(), 1002),
            }
        }
        rest = &rest[total..];
    }
});
