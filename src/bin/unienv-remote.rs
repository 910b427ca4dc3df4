//! The `unienv-remote` command line tool; see `unienv-remote --help`.
use clap::Parser;

/// mimalloc, as the Python package uses: it reuses freed memory per thread
/// instead of going through glibc's arenas for every request's value trees
/// and frames (BENCHMARKS.md, "Round trips").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    unienv_remote::cli::run(unienv_remote::cli::Cli::parse())
}
