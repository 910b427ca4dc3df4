//! One test per RFC 6455 framing rule the parser enforces or the encoder
//! follows.

use super::*;

fn header_of(bytes: &[u8], role: Role) -> Header {
    match parse_header(bytes, role) {
        Ok(Parsed::Header(h)) => h,
        other => panic!("{bytes:?}: {other:?}"),
    }
}

/// Section 5.2: 7-bit, 16-bit and 64-bit lengths; the mask key follows.
#[test]
fn lengths_in_three_encodings() {
    let h = header_of(&[0x82, 0x85, 1, 2, 3, 4], Role::Server);
    assert_eq!(
        (h.len, h.header_len, h.fin, h.opcode),
        (5, 6, true, OP_BINARY)
    );
    let h = header_of(&[0x82, 0xFE, 0x01, 0x00], Role::Server);
    assert_eq!((h.len, h.header_len), (256, 8));
    let mut b = vec![0x02, 0xFF];
    b.extend_from_slice(&(1u64 << 20).to_be_bytes());
    let h = header_of(&b, Role::Server);
    assert_eq!((h.len, h.header_len, h.fin), (1 << 20, 14, false));
    let h = header_of(&[0x82, 0x03], Role::Client);
    assert_eq!((h.len, h.header_len, h.masked), (3, 2, false));
}

/// A header is parsed only once its length is complete; the mask key may
/// still be missing (so an oversized frame is refused before it arrives).
#[test]
fn incomplete_headers_say_what_they_need() {
    assert_eq!(parse_header(&[], Role::Server), Ok(Parsed::Incomplete(2)));
    assert_eq!(
        parse_header(&[0x82], Role::Server),
        Ok(Parsed::Incomplete(2))
    );
    assert_eq!(
        parse_header(&[0x82, 0xFE, 0x01], Role::Server),
        Ok(Parsed::Incomplete(4))
    );
    assert_eq!(
        parse_header(&[0x82, 0xFF, 0, 0, 0], Role::Server),
        Ok(Parsed::Incomplete(10))
    );
    let h = header_of(&[0x82, 0x85], Role::Server);
    assert_eq!(h.mask(&[0x82, 0x85]), None);
    assert_eq!(h.mask(&[0x82, 0x85, 9, 8, 7, 6]), Some([9, 8, 7, 6]));
}

/// Section 5.2: the most significant bit of a 64-bit length must be 0.
#[test]
fn a_64_bit_length_with_its_top_bit_set_is_refused() {
    let mut b = vec![0x82, 0xFF];
    b.extend_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(
        parse_header(&b, Role::Server),
        Err(FrameError::LengthOverflow)
    );
}

/// Section 5.2: RSV1–3 must be 0 without a negotiated extension.
#[test]
fn reserved_bits_are_refused() {
    for b0 in [0xC2, 0xA2, 0x92] {
        assert_eq!(
            parse_header(&[b0, 0x80], Role::Server),
            Err(FrameError::ReservedBits)
        );
    }
}

/// Section 5.1: clients mask every frame, servers none.
#[test]
fn masking_direction_is_enforced() {
    assert_eq!(
        parse_header(&[0x82, 0x01], Role::Server),
        Err(FrameError::UnmaskedClientFrame)
    );
    assert_eq!(
        parse_header(&[0x82, 0x81], Role::Client),
        Err(FrameError::MaskedServerFrame)
    );
}

/// Section 5.2: opcodes 0x3–0x7 and 0xB–0xF are reserved.
#[test]
fn reserved_opcodes_are_refused() {
    for op in (0x3..=0x7).chain(0xB..=0xF) {
        assert_eq!(
            parse_header(&[0x80 | op, 0x80], Role::Server),
            Err(FrameError::UnknownOpcode(op))
        );
    }
    for op in [
        OP_CONTINUATION,
        OP_TEXT,
        OP_BINARY,
        OP_CLOSE,
        OP_PING,
        OP_PONG,
    ] {
        assert!(
            parse_header(&[0x80 | op, 0x80], Role::Server).is_ok(),
            "{op}"
        );
    }
}

/// Section 5.5: control frames are final and at most 125 bytes.
#[test]
fn control_frames_are_short_and_whole() {
    assert_eq!(
        parse_header(&[OP_PING, 0x80], Role::Server),
        Err(FrameError::BadControlFrame)
    );
    assert_eq!(
        parse_header(&[0x80 | OP_CLOSE, 0x80 | 126, 0, 126], Role::Server),
        Err(FrameError::BadControlFrame)
    );
    let h = header_of(&[0x80 | OP_PONG, 0x80 | 125], Role::Server);
    assert!(h.is_control());
    // Data frames may be fragmented.
    assert!(!header_of(&[OP_BINARY, 0x80], Role::Server).fin);
}

/// Sections 5.5.1 and 7.4: close payloads.
#[test]
fn close_payloads() {
    assert_eq!(parse_close(&[]), Ok(1000));
    assert_eq!(parse_close(&[0x03]), Err(FrameError::CloseOneByte));
    assert_eq!(parse_close(&[0x03, 0xE8, b'o', b'k']), Ok(1000));
    assert_eq!(parse_close(&[0x0F, 0xA0]), Ok(4000));
    assert_eq!(
        parse_close(&[0x03, 0xE8, 0xFF]),
        Err(FrameError::CloseReasonNotUtf8)
    );
    for code in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, u16::MAX] {
        assert!(!valid_close_code(code), "{code}");
        assert_eq!(
            parse_close(&code.to_be_bytes()),
            Err(FrameError::InvalidCloseCode(code))
        );
    }
    for code in [1000, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999] {
        assert!(valid_close_code(code), "{code}");
    }
    let p = close_payload(1008, &"x".repeat(300));
    assert_eq!(&p[..2], &[0x03, 0xF0]);
    assert_eq!(p.len(), 102);
    assert_eq!(FrameError::ReservedBits.close_code(), 1002);
}

/// Section 5.2 and 5.3: encoding round-trips through the parser, with the
/// smallest length encoding, masked for clients.
#[test]
fn encoding_round_trips() {
    for len in [0usize, 1, 125, 126, 65535, 65536, 70000] {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        for (mask, role) in [(None, Role::Client), (Some([7, 1, 9, 3]), Role::Server)] {
            let mut out = Vec::new();
            encode_into(&mut out, OP_BINARY, &payload, mask);
            let h = header_of(&out, role);
            let want_ext = match len {
                0..=125 => 0,
                126..=65535 => 2,
                _ => 8,
            };
            assert_eq!(
                h.header_len,
                2 + want_ext + if mask.is_some() { 4 } else { 0 }
            );
            assert_eq!(h.len as usize, len);
            assert_eq!(h.mask(&out), mask);
            let mut body = out[h.header_len..].to_vec();
            if let Some(m) = mask {
                apply_mask(&mut body, m);
            }
            assert!(body == payload, "len {len}");
        }
    }
    let (h, n) = header(OP_PING, 3);
    assert_eq!(&h[..n], &[0x89, 3]);
}

/// Section 5.3: masking is an XOR with the key, repeating every 4 bytes.
#[test]
fn masking_is_an_involution() {
    let mut data: Vec<u8> = (0..37u8).collect();
    apply_mask(&mut data, [1, 2, 3, 4]);
    assert_eq!(data[0], 1);
    assert_eq!(data[5], 5 ^ 2);
    apply_mask(&mut data, [1, 2, 3, 4]);
    assert_eq!(data, (0..37u8).collect::<Vec<_>>());
}
