//! What the load test records: each controller's and observer's tally, the
//! latency histogram and the process's memory.

/// What one controller saw.
#[derive(Debug, Default)]
pub(super) struct ControllerReport {
    pub(super) env: String,
    pub(super) sent: u64,
    pub(super) answered: u64,
    pub(super) errors: u64,
    pub(super) wrong: u64,
    pub(super) out_of_order: u64,
    pub(super) unknown: u64,
    pub(super) lost: u64,
    pub(super) final_position: Option<f64>,
    pub(super) final_sequence: u64,
    pub(super) failure: Option<String>,
}

/// What one observer saw.
#[derive(Debug, Default, Clone)]
pub(super) struct ObserverState {
    pub(super) subscribed: bool,
    pub(super) snapshots: u64,
    pub(super) regressions: u64,
    pub(super) foreign: u64,
    pub(super) last_sequence: u64,
    pub(super) last_position: Option<f64>,
    pub(super) failure: Option<String>,
}

/// A log-linear latency histogram (microseconds, 16 sub-buckets per power
/// of two: at most 6.25 % relative error; percentiles report the upper end
/// of their bucket), so that hours of samples cost a few kilobytes.
#[derive(Debug, Clone)]
pub(super) struct Histogram {
    pub(super) counts: Vec<u64>,
    pub(super) max: u64,
}

impl Histogram {
    pub(super) fn new() -> Histogram {
        Histogram {
            counts: vec![0; 64 * 16],
            max: 0,
        }
    }

    pub(super) fn index(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let bits = 63 - v.leading_zeros() as u64;
        let sub = (v >> (bits - 4)) & 15;
        ((bits - 3) * 16 + sub) as usize
    }

    pub(super) fn lower_bound(index: usize) -> u64 {
        if index < 16 {
            return index as u64;
        }
        let bits = (index / 16) as u64 + 3;
        let sub = (index % 16) as u64;
        (16 + sub) << (bits - 4)
    }

    pub(super) fn record(&mut self, micros: u64) {
        self.counts[Histogram::index(micros)] += 1;
        self.max = self.max.max(micros);
    }

    pub(super) fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.max = self.max.max(other.max);
    }

    pub(super) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub(super) fn percentile(&self, p: f64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                // The bucket's upper end: never below the true percentile.
                return (Histogram::lower_bound(i + 1) - 1).min(self.max);
            }
        }
        self.max
    }
}

/// The resident set size of this process in KiB, from `/proc/self/status`.
pub(super) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}
