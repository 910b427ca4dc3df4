//! The `unienv-remote` command line tool; see `unienv-remote --help`.
use clap::Parser;

fn main() -> std::process::ExitCode {
    unienv_remote::cli::run(unienv_remote::cli::Cli::parse())
}
