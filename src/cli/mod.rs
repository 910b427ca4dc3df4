//! The `unienv-remote` command line: `serve` the built-in simulators (or the
//! conformance fixtures), poke at any UniEnv server (`discover`, `describe`,
//! `call`, `watch`, `bench`), and `inspect` captured envelopes.

/// Prints a line on stdout; a closed pipe (`load | head -c 10`) ends the
/// process quietly with success, as `call`'s output does (see
/// `shared::write_out`), where `println!` would panic.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::shared::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod bench;
mod client_cmds;
mod hostile;
mod inspect;
mod json_args;
mod load;
mod placement;
mod pretty;
mod shared;
mod view;
mod watch;

pub use bench::{bench, neutral_action, BenchArgs};
pub use client_cmds::{call, describe, discover, CallArgs, DescribeArgs, DiscoverArgs};
pub use json_args::{base64_decode, convert_arguments, json_to_value, CallArguments};
pub use load::{load, LoadArgs};
pub use pretty::{array_summary, compact, indent_json, pretty};
pub use relay::{relay, relay_config, DialArgs, RelayArgs, DEFAULT_RELAY_ADDR};
pub use serve::{
    banner_head, client_urls, host_names_line, serve, RecordFormatArg, ServeArgs, DEFAULT_ADDR,
};
pub use shared::{client_fail, interrupted, space_summary, ClientArgs};
pub use view::{view, viewer_config, ViewArgs};
pub use watch::{watch, WatchArgs};

use crate::codec::{Codec, DEFAULT_MAX_MESSAGE_SIZE};
use clap::{Args, Parser, Subcommand};
use shared::{fail, STARTUP_SPAN};
use std::path::PathBuf;
use std::process::ExitCode;

/// Prints a line on stdout, ignoring a closed pipe (`serve | head -1` must
/// not take the server down).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

// After `say!`, which they use.
mod relay;
mod serve;

/// Server and client for UniEnv's remote environment protocol v1.
#[derive(Debug, Parser)]
#[command(name = "unienv-remote", version, about)]
pub struct Cli {
    /// Log more (repeatable): `-v` debug, `-vv` trace. `RUST_LOG` (e.g.
    /// `RUST_LOG=unienv_remote=debug`) overrides it. `serve` logs at info by
    /// default, the client commands only warnings.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Installs the `tracing` subscriber (to stderr): `RUST_LOG` when set, else
/// `unienv_remote` at `default` (info for a server, warn for a client)
/// raised by each `-v`. Does nothing if a subscriber is already installed.
pub fn init_logging(verbose: u8, default: tracing::Level) {
    use tracing_subscriber::EnvFilter;
    let level = match (verbose, default) {
        (0, level) => level,
        (1, _) => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(format!(
            "unienv_remote={}",
            level.as_str().to_ascii_lowercase()
        )),
    };
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let quiet_startup = tracing_subscriber::filter::dynamic_filter_fn(|meta, cx| {
        if !meta.is_event() || *meta.level() <= tracing::Level::WARN {
            return true;
        }
        cx.lookup_current()
            .is_none_or(|span| !span.scope().any(|s| s.name() == STARTUP_SPAN))
    });
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(filter)
        .with_filter(quiet_startup);
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Host the built-in simulators (or, with --fixtures, the conformance registry).
    Serve(ServeArgs),
    /// List every resource of a server: ID, kind, domain, revision, sequence, spaces.
    Discover(DiscoverArgs),
    /// Print one resource's descriptor readably (or, with --json, as sent).
    Describe(DescribeArgs),
    /// Call a method of a resource and print the result.
    #[command(after_help = json_args::CONVENTIONS)]
    Call(CallArgs),
    /// Print live boundary snapshots of a resource (an observer: needs no control).
    Watch(WatchArgs),
    /// Measure step round trips of an env (reset, then steps with a neutral action).
    Bench(BenchArgs),
    /// Print a captured envelope readably and name its first problem.
    Inspect(InspectArgs),
    /// Load-test a server (in process, or a running one on loopback) and check that nothing is lost.
    Load(load::LoadArgs),
    /// Serve a browser viewer of a UniEnv server (ours or the reference): live frames and plots.
    View(ViewArgs),
    /// Relay clients to hosts that dial out (`serve --dial URL --name NAME`), behind NAT or firewalls.
    Relay(RelayArgs),
}

/// Options of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The envelope file (4-byte length, JSON header, attachments).
    pub file: PathBuf,
    /// Print the tagged JSON header instead of the decoded values.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let default = match cli.command {
        Command::Serve(_) | Command::View(_) | Command::Relay(_) => tracing::Level::INFO,
        _ => tracing::Level::WARN,
    };
    init_logging(cli.verbose, default);
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Discover(args) => discover(args),
        Command::Describe(args) => describe(args),
        Command::Call(args) => call(args),
        Command::Watch(args) => watch(args),
        Command::Bench(args) => bench(args),
        Command::Inspect(args) => inspect(args),
        Command::Load(args) => load::load(args),
        Command::View(args) => view(args),
        Command::Relay(args) => relay(args),
    }
}

/// `inspect`: decodes a captured envelope and prints it, or names its first
/// problem (exit code 1).
pub fn inspect(args: InspectArgs) -> ExitCode {
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => return fail(format!("cannot read {}: {e}", args.file.display())),
    };
    let size = bytes.len();
    if args.json {
        match crate::codec::envelope_header(&bytes) {
            Ok(header) => {
                out!("{}", indent_json(header));
                out!(
                    "-- {} header bytes, {} attachment bytes",
                    header.len(),
                    size - 4 - header.len()
                );
            }
            Err(e) => return fail(format!("invalid envelope: {e}")),
        }
    }
    let codec = Codec::new(size.max(DEFAULT_MAX_MESSAGE_SIZE)).unwrap_or_default();
    match codec.decode(bytes::Bytes::from(bytes)) {
        Ok(value) => {
            if !args.json {
                out!("{}", pretty(&value));
            }
            let problems = inspect::protocol_problems(&value);
            if problems.is_empty() {
                out!("-- valid envelope and protocol v1 message, {size} bytes");
                ExitCode::SUCCESS
            } else {
                out!("-- valid envelope ({size} bytes), but not a valid protocol v1 message:");
                for p in &problems {
                    out!("   - {p}");
                }
                ExitCode::FAILURE
            }
        }
        Err(e) => fail(format!("invalid envelope: {e}")),
    }
}
