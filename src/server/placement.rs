//! Server placement: the CPUs a server's threads may run on
//! ([`ServerConfig::cpus`](super::ServerConfig::cpus)).
//!
//! On a machine that runs several server processes beside a learner, each
//! server pinned to a vCPU of its own steps faster, mostly at less CPU per
//! step, the more so the busier the machine (BENCHMARKS.md, "Vector envs
//! and throughput"): its domain thread is never migrated
//! and never waits behind another server's, and the hand-off between a
//! runtime worker and the domain thread wakes a thread on the same CPU
//! instead of interrupting another one (an inter-processor interrupt, which
//! costs 10–25 µs through a hypervisor).
//!
//! Pinning uses `sched_setaffinity(2)` (Linux). Elsewhere a configured
//! placement is refused at startup with [`PlacementError::Unsupported`].

/// Why a placement ([`ServerConfig::cpus`](super::ServerConfig::cpus), a
/// CPU list) cannot be used; in a refused configuration, as
/// [`ServerConfigError::Placement`](super::ServerConfigError::Placement).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// The CPU list is empty.
    #[error("the CPU list is empty: name at least one CPU, or no placement")]
    NoCpus,
    /// A CPU list could not be read.
    #[error("invalid CPU list {list:?}: {reason}")]
    InvalidCpuList {
        /// The list (its first 64 characters).
        list: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A placement names a CPU this machine does not have.
    #[error("CPU {cpu} does not exist: this machine has CPUs 0 to {}", .available.saturating_sub(1))]
    CpuOutOfRange {
        /// The CPU named.
        cpu: usize,
        /// How many CPUs the machine has (configured ones).
        available: usize,
    },
    /// A placement names a CPU outside the set this process may run on
    /// (limited by `taskset`, cgroups' cpusets or a container).
    #[error("CPU {cpu} is not one this process may run on (allowed: {allowed})")]
    CpuNotAllowed {
        /// The CPU named.
        cpu: usize,
        /// The allowed CPUs, as a list (`0-3,6`).
        allowed: String,
    },
    /// The kernel refused to pin a thread (or to say where it may run).
    #[error("cannot pin a thread to CPUs {cpus}: {error}")]
    PinFailed {
        /// The CPUs asked for, as a list (empty when reading the allowed set failed).
        cpus: String,
        /// The OS error.
        error: String,
    },
    /// Threads cannot be pinned on this platform (only Linux can).
    #[error("a CPU placement (cpus) is not supported on this platform")]
    Unsupported,
}

/// The most CPUs a placement may name (the kernel's `cpu_set_t` size).
pub(crate) const MAX_CPUS: usize = 1024;

/// Parses a CPU list as `taskset -c` and `/proc/*/status`'s
/// `Cpus_allowed_list` write it: CPU numbers and inclusive ranges separated
/// by commas (`0`, `0,1`, `0-3,6`). The CPUs come back sorted, without
/// repeats. An empty list, a malformed item or a range that runs backwards
/// is a [`PlacementError::InvalidCpuList`]; whether the CPUs exist is
/// checked by [`check_cpus`].
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, PlacementError> {
    let invalid = |reason: &'static str| PlacementError::InvalidCpuList {
        list: list.chars().take(64).collect(),
        reason,
    };
    let number = |s: &str| -> Result<usize, PlacementError> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid("CPUs are numbers (0, 1, ...) or ranges (0-3)"));
        }
        s.parse::<usize>()
            .ok()
            .filter(|&n| n < MAX_CPUS)
            .ok_or(PlacementError::CpuOutOfRange {
                cpu: s.parse::<usize>().unwrap_or(usize::MAX),
                available: MAX_CPUS,
            })
    };
    if list.trim().is_empty() {
        return Err(PlacementError::NoCpus);
    }
    let mut cpus = Vec::new();
    for item in list.split(',') {
        match item.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (number(first)?, number(last)?);
                if first > last {
                    return Err(invalid("a range runs from its lower CPU to its higher"));
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(number(item)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Checks that `cpus` can be used: not empty, each CPU exists on this
/// machine and is in the calling thread's allowed set (the process's, as
/// `taskset` or a container limited it). Called by
/// [`ServerConfig::validate`](super::ServerConfig::validate).
pub fn check_cpus(cpus: &[usize]) -> Result<(), PlacementError> {
    if cpus.is_empty() {
        return Err(PlacementError::NoCpus);
    }
    imp::check(cpus)
}

/// Pins the calling thread to `cpus` (it may then run on any of them, and
/// only on them). The server pins its domain threads and its recorder
/// itself; a tokio runtime is its owner's, which pins its threads with
/// `tokio::runtime::Builder::on_thread_start` (as `unienv-remote serve` and
/// the Python `RemoteServer` do):
///
/// ```no_run
/// # fn demo() -> std::io::Result<()> {
/// let cpus = vec![0];
/// let runtime = tokio::runtime::Builder::new_multi_thread()
///     .on_thread_start(move || {
///         let _ = unienv_remote::server::pin_current_thread(&cpus);
///     })
///     .enable_all()
///     .build()?;
/// # Ok(()) }
/// ```
///
/// Errors as [`check_cpus`]; and
/// [`PlacementError::PinFailed`] if the kernel refused.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), PlacementError> {
    check_cpus(cpus)?;
    imp::pin(cpus)
}

/// The CPUs the calling thread may run on (`sched_getaffinity(2)`), sorted.
pub fn current_thread_cpus() -> Result<Vec<usize>, PlacementError> {
    imp::allowed()
}

/// `cpus` as a CPU list (`0-2,5`), as [`parse_cpu_list`] reads it.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j > i {
            out.push_str(&format!("{}-{}", cpus[i], cpus[j]));
        } else {
            out.push_str(&cpus[i].to_string());
        }
        i = j + 1;
    }
    out
}

#[cfg(target_os = "linux")]
mod imp {
    use crate::server::placement::{format_cpu_list, PlacementError, MAX_CPUS};

    fn empty_set() -> libc::cpu_set_t {
        // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
        unsafe { std::mem::zeroed() }
    }

    pub(super) fn allowed() -> Result<Vec<usize>, PlacementError> {
        let mut set = empty_set();
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is
        // the calling thread.
        let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        if r != 0 {
            return Err(PlacementError::PinFailed {
                cpus: String::new(),
                error: std::io::Error::last_os_error().to_string(),
            });
        }
        // SAFETY: CPU_ISSET reads a bit of a valid set; i < CPU_SETSIZE.
        Ok((0..MAX_CPUS)
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect())
    }

    pub(super) fn check(cpus: &[usize]) -> Result<(), PlacementError> {
        // SAFETY: sysconf has no preconditions.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let available = usize::try_from(configured)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(MAX_CPUS)
            .min(MAX_CPUS);
        if let Some(&cpu) = cpus.iter().find(|&&c| c >= available) {
            return Err(PlacementError::CpuOutOfRange { cpu, available });
        }
        let allowed = allowed()?;
        if let Some(&cpu) = cpus.iter().find(|c| allowed.binary_search(c).is_err()) {
            return Err(PlacementError::CpuNotAllowed {
                cpu,
                allowed: format_cpu_list(&allowed),
            });
        }
        Ok(())
    }

    pub(super) fn pin(cpus: &[usize]) -> Result<(), PlacementError> {
        let mut set = empty_set();
        for &cpu in cpus {
            // SAFETY: `cpu` < MAX_CPUS == CPU_SETSIZE (checked).
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is
        // the calling thread.
        let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        if r != 0 {
            return Err(PlacementError::PinFailed {
                cpus: format_cpu_list(cpus),
                error: std::io::Error::last_os_error().to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use crate::server::placement::PlacementError;

    pub(super) fn allowed() -> Result<Vec<usize>, PlacementError> {
        Err(PlacementError::Unsupported)
    }

    pub(super) fn check(_: &[usize]) -> Result<(), PlacementError> {
        Err(PlacementError::Unsupported)
    }

    pub(super) fn pin(_: &[usize]) -> Result<(), PlacementError> {
        Err(PlacementError::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_taskset_writes_them() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("0,1"), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list("0-1"), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list(" 3 , 0-2,2"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list(""), Err(PlacementError::NoCpus));
        assert_eq!(parse_cpu_list(" "), Err(PlacementError::NoCpus));
        for bad in ["a", "1,", "-1", "0-", "1-0", "0x1", "+1"] {
            assert!(
                matches!(
                    parse_cpu_list(bad),
                    Err(PlacementError::InvalidCpuList { .. })
                ),
                "{bad}: {:?}",
                parse_cpu_list(bad)
            );
        }
        assert_eq!(
            parse_cpu_list("1024"),
            Err(PlacementError::CpuOutOfRange {
                cpu: 1024,
                available: MAX_CPUS
            })
        );
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn cpus_outside_the_machine_or_the_allowed_set_are_refused() {
        assert_eq!(check_cpus(&[]), Err(PlacementError::NoCpus));
        match check_cpus(&[MAX_CPUS - 1]) {
            Err(PlacementError::CpuOutOfRange { cpu, available }) => {
                assert_eq!(cpu, MAX_CPUS - 1);
                assert!(available < MAX_CPUS);
            }
            other => panic!("{other:?}"),
        }
        let allowed = current_thread_cpus().expect("sched_getaffinity");
        assert!(!allowed.is_empty());
        assert_eq!(check_cpus(&allowed), Ok(()));
        // A CPU that exists but is outside the allowed set: narrow a thread
        // of our own to one CPU, then ask for another from it.
        if allowed.len() >= 2 {
            let (first, second) = (allowed[0], allowed[1]);
            let refused = std::thread::spawn(move || {
                pin_current_thread(&[first]).expect("pin");
                assert_eq!(current_thread_cpus(), Ok(vec![first]));
                check_cpus(&[second])
            })
            .join()
            .expect("thread");
            assert_eq!(
                refused,
                Err(PlacementError::CpuNotAllowed {
                    cpu: second,
                    allowed: first.to_string()
                })
            );
        }
    }

    #[cfg(not(target_os = "linux"))]
    #[test]
    fn placement_is_refused_where_unsupported() {
        assert_eq!(check_cpus(&[0]), Err(PlacementError::Unsupported));
    }
}
