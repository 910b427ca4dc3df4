//! A small seeded pseudo-random generator for the built-in simulators.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit generator with one word
/// of state that passes BigCrush, used to draw reset states.
///
/// A seed fully determines the stream, so a seeded reset is reproducible;
/// a generator made with [`SplitMix64::from_entropy`] starts at an
/// unpredictable point, as Gymnasium's unseeded generators do.
///
/// ```
/// use unienv_remote::sims::SplitMix64;
/// let mut a = SplitMix64::new(7);
/// let mut b = SplitMix64::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let x = a.uniform(-0.05, 0.05);
/// assert!((-0.05..0.05).contains(&x));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream is determined by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// A generator seeded from the process's hash randomness and the clock.
    pub fn from_entropy() -> SplitMix64 {
        let mut hasher = RandomState::new().build_hasher();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        hasher.write_u64(nanos);
        SplitMix64::new(hasher.finish())
    }

    /// A generator for a protocol seed: the `i64` is reinterpreted as `u64`
    /// (two's complement), so every integer seed is accepted.
    pub fn from_seed(seed: i64) -> SplitMix64 {
        SplitMix64::new(seed as u64)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform float in `[low, high)` (NumPy's `uniform(low, high)`).
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_splitmix64_outputs() {
        // Reference values of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(g.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut g = SplitMix64::new(42);
        let xs: Vec<f64> = (0..10_000).map(|_| g.uniform(-0.05, 0.05)).collect();
        assert!(xs.iter().all(|x| (-0.05..0.05).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.002, "mean {mean}");
        assert!(xs.iter().any(|&x| x < -0.049) && xs.iter().any(|&x| x > 0.049));
    }

    #[test]
    fn entropy_generators_differ() {
        assert_ne!(
            SplitMix64::from_entropy().next_u64(),
            SplitMix64::from_entropy().next_u64()
        );
    }
}
