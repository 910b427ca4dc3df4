//! `serve --cpus LIST`: the server process's placement on CPUs.

use crate::server::pin_current_thread;

/// `--cpus`'s CPUs, sorted (an alias: clap would read a `Vec` field as
/// repeated values).
pub type CpuList = Vec<usize>;

/// Reads `--cpus` (`0`, `0,1`, `0-3`), as `taskset -c` does.
pub(super) fn parse_cpus(list: &str) -> Result<CpuList, String> {
    crate::server::parse_cpu_list(list).map_err(|e| e.to_string())
}

/// `serve`'s runtime. With `cpus`, the whole process runs on them: the
/// calling thread (which runs `block_on`) and every runtime thread (workers
/// and blocking threads, as they start); the server pins its domain threads
/// and recorder itself (`ServerConfig::cpus`, checked by then).
pub(super) fn runtime(cpus: Option<&[usize]>) -> Result<tokio::runtime::Runtime, String> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(cpus) = cpus {
        pin_current_thread(cpus).map_err(|e| format!("--cpus: {e}"))?;
        let cpus = cpus.to_vec();
        builder.on_thread_start(move || {
            if let Err(e) = pin_current_thread(&cpus) {
                tracing::warn!(error = %e, "a runtime thread runs unpinned");
            }
        });
    }
    builder.enable_all().build().map_err(|e| e.to_string())
}
