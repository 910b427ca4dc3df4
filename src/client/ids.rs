//! The IDs a connection writes: request IDs in hexadecimal, fresh
//! operation IDs.

use std::sync::atomic::{AtomicU64, Ordering};

/// Fresh random-looking 128-bit IDs: a per-client random prefix and a counter,
/// mixed so that IDs of different clients and processes do not collide.
pub(super) struct IdSource {
    seed: u64,
    counter: AtomicU64,
}

impl IdSource {
    pub(super) fn new() -> IdSource {
        use std::collections::hash_map::RandomState;
        use std::hash::BuildHasher;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        IdSource {
            seed: RandomState::new().hash_one(nanos),
            counter: AtomicU64::new(0),
        }
    }

    pub(super) fn next(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mixed = splitmix(self.seed ^ n.rotate_left(32));
        // `format!("{:016x}{:016x}", ...)`, written without the formatter
        // (an ID per env call).
        let mut text = [0u8; 32];
        for (half, x) in [self.seed ^ splitmix(n), mixed].into_iter().enumerate() {
            for (k, b) in text[16 * half..16 * (half + 1)].iter_mut().enumerate() {
                *b = HEX[((x >> (60 - 4 * k)) & 15) as usize];
            }
        }
        // ASCII digits only.
        String::from(std::str::from_utf8(&text).unwrap_or_default())
    }
}

/// Lowercase hexadecimal digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// `n` in lowercase hexadecimal without leading zeros (`format!("{n:x}")`),
/// written into `buf`.
pub(super) fn lower_hex(n: u64, buf: &mut [u8; 16]) -> &str {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = HEX[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    // ASCII digits only.
    std::str::from_utf8(&buf[i..]).unwrap_or_default()
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_written_as_the_formatter_writes_them() {
        let mut samples: Vec<u64> = vec![
            0,
            1,
            9,
            10,
            15,
            16,
            255,
            256,
            4095,
            4096,
            u64::MAX,
            u64::MAX - 1,
        ];
        samples.extend((0..64).map(|k| 1u64 << k));
        samples.extend((0..1000u64).map(splitmix));
        for n in samples {
            let mut digits = [0u8; 16];
            assert_eq!(lower_hex(n, &mut digits), format!("{n:x}"));
        }
        let ids = IdSource::new();
        for n in 0..1000u64 {
            let mixed = splitmix(ids.seed ^ n.rotate_left(32));
            let want = format!("{:016x}{:016x}", ids.seed ^ splitmix(n), mixed);
            assert_eq!(ids.next(), want);
        }
    }

    #[test]
    fn ids_are_fresh() {
        let ids = IdSource::new();
        let a = ids.next();
        let b = ids.next();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert_ne!(IdSource::new().next(), a);
    }
}
