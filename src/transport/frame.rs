//! RFC 6455 frames without I/O: header parsing with every rule the reader
//! enforces, header and frame encoding, masking, close payloads.

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Receives masked frames, sends unmasked ones.
    Server,
    /// Receives unmasked frames, sends masked ones.
    Client,
}

/// Continuation frame.
pub const OP_CONTINUATION: u8 = 0x0;
/// Text frame (refused by this protocol).
pub const OP_TEXT: u8 = 0x1;
/// Binary frame.
pub const OP_BINARY: u8 = 0x2;
/// Close frame.
pub const OP_CLOSE: u8 = 0x8;
/// Ping frame.
pub const OP_PING: u8 = 0x9;
/// Pong frame.
pub const OP_PONG: u8 = 0xA;

/// A peer's violation of RFC 6455 framing; every one closes with 1002.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// RSV1–3 set, and no extension was negotiated (section 5.2).
    #[error("reserved bits set (no extension was negotiated)")]
    ReservedBits,
    /// A client frame without a mask (section 5.1).
    #[error("unmasked client frame")]
    UnmaskedClientFrame,
    /// A server frame with a mask (section 5.1).
    #[error("masked server frame")]
    MaskedServerFrame,
    /// Opcodes 0x3–0x7 and 0xB–0xF are reserved (section 5.2).
    #[error("unknown opcode {0:#x}")]
    UnknownOpcode(u8),
    /// A control frame that is fragmented or longer than 125 bytes
    /// (section 5.5).
    #[error("fragmented or oversized control frame")]
    BadControlFrame,
    /// A 64-bit length with its most significant bit set (section 5.2).
    #[error("a payload length with the most significant bit set")]
    LengthOverflow,
    /// A continuation without a message begun, or a new message before the
    /// last one ended (section 5.4).
    #[error("unexpected continuation or interleaved message")]
    UnexpectedContinuation,
    /// A close payload of one byte (section 5.5.1).
    #[error("a close payload of one byte")]
    CloseOneByte,
    /// A close code that may not be sent (section 7.4).
    #[error("an invalid close code {0}")]
    InvalidCloseCode(u16),
    /// A close reason that is not UTF-8 (section 5.5.1).
    #[error("a close reason that is not UTF-8")]
    CloseReasonNotUtf8,
}

impl FrameError {
    /// The close code for this violation: 1002 (protocol error).
    pub fn close_code(&self) -> u16 {
        1002
    }
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The final fragment of a message.
    pub fin: bool,
    /// The opcode.
    pub opcode: u8,
    /// Whether a masking key follows the length.
    pub masked: bool,
    /// The payload length.
    pub len: u64,
    /// Bytes of header, masking key included.
    pub header_len: usize,
}

impl Header {
    /// A control frame (close, ping, pong).
    pub fn is_control(&self) -> bool {
        self.opcode >= 0x8
    }

    /// The masking key, once the whole header is in `buf`.
    pub fn mask(&self, buf: &[u8]) -> Option<[u8; 4]> {
        if !self.masked || buf.len() < self.header_len {
            return None;
        }
        let k = &buf[self.header_len - 4..self.header_len];
        Some([k[0], k[1], k[2], k[3]])
    }
}

/// What [`parse_header`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// At least this many bytes are needed to know the length.
    Incomplete(usize),
    /// The header (its masking key may still be missing from the buffer:
    /// the length is known, so a frame can be refused before its payload).
    Header(Header),
}

/// Parses the frame header at the start of `buf`, received by `role`,
/// checking reserved bits, masking, opcodes, control frame rules and the
/// length encoding.
pub fn parse_header(buf: &[u8], role: Role) -> Result<Parsed, FrameError> {
    if buf.len() < 2 {
        return Ok(Parsed::Incomplete(2));
    }
    let (b0, b1) = (buf[0], buf[1]);
    let fin = b0 & 0x80 != 0;
    let opcode = b0 & 0x0F;
    let masked = b1 & 0x80 != 0;
    if b0 & 0x70 != 0 {
        return Err(FrameError::ReservedBits);
    }
    match (role, masked) {
        (Role::Server, false) => return Err(FrameError::UnmaskedClientFrame),
        (Role::Client, true) => return Err(FrameError::MaskedServerFrame),
        _ => {}
    }
    let (len, ext) = match b1 & 0x7F {
        126 => {
            if buf.len() < 4 {
                return Ok(Parsed::Incomplete(4));
            }
            (u16::from_be_bytes([buf[2], buf[3]]) as u64, 2)
        }
        127 => {
            if buf.len() < 10 {
                return Ok(Parsed::Incomplete(10));
            }
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            let len = u64::from_be_bytes(b);
            if len >> 63 != 0 {
                return Err(FrameError::LengthOverflow);
            }
            (len, 8)
        }
        n => (n as u64, 0),
    };
    if !matches!(
        opcode,
        OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
    ) {
        return Err(FrameError::UnknownOpcode(opcode));
    }
    if opcode >= 0x8 && (!fin || len > 125) {
        return Err(FrameError::BadControlFrame);
    }
    Ok(Parsed::Header(Header {
        fin,
        opcode,
        masked,
        len,
        header_len: 2 + ext + if masked { 4 } else { 0 },
    }))
}

/// Whether a received close code may appear in a close frame (RFC 6455
/// section 7.4: 1000–1003, 1007–1014 as registered, 3000–4999 for
/// libraries and applications; 1004–1006 and 1015 are reserved, the rest
/// unassigned).
pub fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// The code a received close payload (unmasked) is answered with: its own
/// code when valid, 1000 for an empty payload; an error otherwise.
pub fn parse_close(payload: &[u8]) -> Result<u16, FrameError> {
    match payload.len() {
        0 => Ok(1000),
        1 => Err(FrameError::CloseOneByte),
        _ => {
            let code = u16::from_be_bytes([payload[0], payload[1]]);
            if !valid_close_code(code) {
                Err(FrameError::InvalidCloseCode(code))
            } else if std::str::from_utf8(&payload[2..]).is_err() {
                Err(FrameError::CloseReasonNotUtf8)
            } else {
                Ok(code)
            }
        }
    }
}

/// A close payload: the code and at most 100 characters of reason.
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend(reason.chars().take(100).collect::<String>().as_bytes());
    payload
}

/// The header of a final, unmasked frame: bytes and their count.
pub fn header(opcode: u8, len: usize) -> ([u8; 10], usize) {
    let mut h = [0u8; 10];
    h[0] = 0x80 | opcode;
    if len < 126 {
        h[1] = len as u8;
        (h, 2)
    } else if len <= u16::MAX as usize {
        h[1] = 126;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        (h, 4)
    } else {
        h[1] = 127;
        h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        (h, 10)
    }
}

/// Appends one final frame: its header and payload, masked with `mask`
/// when given (client frames).
pub fn encode_into(out: &mut Vec<u8>, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) {
    let (mut h, n) = header(opcode, payload.len());
    if mask.is_some() {
        h[1] |= 0x80;
    }
    out.extend_from_slice(&h[..n]);
    match mask {
        Some(mask) => {
            out.extend_from_slice(&mask);
            let start = out.len();
            out.extend_from_slice(payload);
            apply_mask(&mut out[start..], mask);
        }
        None => out.extend_from_slice(payload),
    }
}

/// XORs `data` with the repeating 4-byte `mask`, eight bytes at a time.
pub fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
}

/// 64 unpredictable bits (randomly keyed SipHash of a counter and the time):
/// masking keys and handshake keys.
pub(crate) fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
