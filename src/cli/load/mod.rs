//! `unienv-remote load`: a bounded load test of a server (ours, in process,
//! or a running one on loopback) with checks, not only figures.
//!
//! N controllers each drive their own env domain over their own WebSocket
//! connection with the raw protocol (pipelined `step` calls and periodic
//! `reset`s), while M observers subscribe to those envs. At the end it
//! checks that every request ID was answered exactly once, in order, with
//! the right result; that every observer's last snapshot is the final state
//! of its domain; and that memory stayed bounded (the process RSS, sampled
//! from `/proc/self/status`). It prints requests/s, latency percentiles and
//! each check, and exits with 1 if any check failed.
//!
//! The envs must behave like the fixture `counter`: `reset(seed=s)` sets
//! every element of `observation["position"]` to `s`, `step([1, 1])` adds 1.
//! In process, N such counters are registered as `load-0` … `load-{N-1}`;
//! against `serve --fixtures`, `--env counter --env counter3 --env lazy`
//! (and `broken_render`, `large_render`, `large_info`) qualify.

mod drive;
mod report;
#[cfg(test)]
mod tests;

use crate::fixtures::{CounterEnv, CounterVariant};
use crate::server::{Listener, Server, ServerConfig};
use clap::Args;
use drive::{control, observe, Connector, Plan, SETTLE};
use report::{rss_kib, ControllerReport, Histogram, ObserverState};
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Longest run accepted (`--seconds`).
pub const MAX_SECONDS: f64 = 86_400.0;
/// Most controllers accepted (`--controllers`).
pub const MAX_CONTROLLERS: usize = 256;
/// Most observers accepted (`--observers`).
pub const MAX_OBSERVERS: usize = 1024;
/// Most pipelined requests per controller (a session may have 64 in flight).
pub const MAX_PIPELINE: usize = 64;

/// Options of `load`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// How long to apply load, in seconds (at most 86400).
    #[arg(long, value_name = "SECONDS")]
    pub seconds: f64,
    /// Controllers, each driving its own env domain (1 to 256).
    #[arg(long, value_name = "N")]
    pub controllers: usize,
    /// Observers, spread round-robin over the controllers' envs (0 to 1024).
    #[arg(long, value_name = "M", default_value_t = 0)]
    pub observers: usize,
    /// Requests each controller keeps in flight (1 to 64).
    #[arg(long, value_name = "DEPTH", default_value_t = 4)]
    pub pipeline: usize,
    /// Load a running server at this ws:// URL instead of an in-process one
    /// (loopback addresses only). It must host counter-like envs (see --env),
    /// as `unienv-remote serve --fixtures` does.
    #[arg(long)]
    pub url: Option<String>,
    /// With --url: the counter-like env IDs to drive (repeatable; one per
    /// controller, at least as many as controllers).
    #[arg(long = "env", value_name = "ID")]
    pub envs: Vec<String>,
    /// With --url: the bearer token (visible to every local user in `ps`:
    /// prefer --token-file or the UNIENV_TOKEN environment variable).
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// With --url: read the bearer token from FILE (its first line).
    /// Without --token or --token-file, UNIENV_TOKEN is used when set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Fail when the RSS grows by more than this after the warm-up (MiB;
    /// not checked with --hostile, whose attackers' buffers come and go).
    #[arg(long, value_name = "MIB", default_value_t = 64.0)]
    pub max_rss_growth_mib: f64,
    /// Fail when the peak RSS exceeds this (MiB).
    #[arg(long, value_name = "MIB")]
    pub max_rss_mib: Option<f64>,
    /// Also run N attackers of each hostile kind (0 to 128; see
    /// `unienv-remote load --help`): oversized and v-before-t envelopes,
    /// silent and stalled connections, peers that never read, reserved
    /// opcodes. The bystanders' checks and latency are reported as usual.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub hostile: usize,
    /// Size of the attackers' large envelopes (MiB, 1 to 60).
    #[arg(long, value_name = "MIB", default_value_t = 16)]
    pub hostile_mib: usize,
    /// With --hostile: only these kinds (comma-separated: v-first, zeros,
    /// silent-ws, silent-tcp, stall, unread, lazy-observer, garbage).
    #[arg(long, value_name = "KINDS", value_delimiter = ',')]
    pub hostile_kinds: Vec<String>,
}

/// Whether a `ws://` URL names a loopback host.
fn loopback_url(url: &str) -> Result<(), String> {
    let (_, authority, _) = crate::transport::ws::parse_url(url).map_err(|e| e.to_string())?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority
            .rsplit_once(':')
            .map_or(authority.as_str(), |(h, _)| h),
    };
    let ok = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "refusing to load {host}: load tests target loopback addresses only"
        ))
    }
}

fn validate(args: &LoadArgs) -> Result<(), String> {
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= MAX_SECONDS) {
        return Err(format!(
            "--seconds must be in (0, {MAX_SECONDS}], got {}",
            args.seconds
        ));
    }
    if !(1..=MAX_CONTROLLERS).contains(&args.controllers) {
        return Err(format!(
            "--controllers must be 1 to {MAX_CONTROLLERS}, got {}",
            args.controllers
        ));
    }
    if args.observers > MAX_OBSERVERS {
        return Err(format!(
            "--observers must be at most {MAX_OBSERVERS}, got {}",
            args.observers
        ));
    }
    if !(1..=MAX_PIPELINE).contains(&args.pipeline) {
        return Err(format!(
            "--pipeline must be 1 to {MAX_PIPELINE}, got {}",
            args.pipeline
        ));
    }
    if !(args.max_rss_growth_mib.is_finite() && args.max_rss_growth_mib >= 0.0) {
        return Err("--max-rss-growth-mib must be a non-negative number".into());
    }
    if args
        .max_rss_mib
        .is_some_and(|m| !(m.is_finite() && m > 0.0))
    {
        return Err("--max-rss-mib must be a positive number".into());
    }
    if args.hostile > 128 {
        return Err(format!("--hostile must be 0 to 128, got {}", args.hostile));
    }
    if let Some(k) = args
        .hostile_kinds
        .iter()
        .find(|k| !super::hostile::KINDS.contains(&k.as_str()))
    {
        return Err(format!(
            "unknown --hostile-kinds {k:?} (known: {})",
            super::hostile::KINDS.join(", ")
        ));
    }
    if !(1..=60).contains(&args.hostile_mib) {
        return Err(format!(
            "--hostile-mib must be 1 to 60, got {}",
            args.hostile_mib
        ));
    }
    match &args.url {
        Some(url) => {
            loopback_url(url)?;
            if args.envs.len() < args.controllers {
                return Err(format!(
                    "--url needs an --env for each controller ({} given, {} controllers): \
                     envs that behave like the fixture `counter`, which `unienv-remote serve \
                     --fixtures` hosts, e.g. `--controllers 3 --env counter --env counter3 --env lazy`",
                    args.envs.len(),
                    args.controllers
                ));
            }
        }
        None if !args.envs.is_empty() => {
            return Err("--env applies to --url only (in process, the envs are load-0…)".into())
        }
        None => {}
    }
    Ok(())
}

/// `load`: runs the load test and prints its figures and checks; the exit
/// code is 1 when the arguments are invalid or any check failed.
pub fn load(args: LoadArgs) -> ExitCode {
    if let Err(e) = validate(&args) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the in-process server with N counters; returns it and its URL.
async fn in_process(args: &LoadArgs) -> Result<(Server, Listener, Vec<String>), String> {
    let config = ServerConfig {
        idle_timeout: None,
        max_connections: args.controllers
            + args.observers
            + 16
            + args.hostile * super::hostile::KINDS.len(),
        ..ServerConfig::default()
    };
    let mut builder = Server::builder(config);
    let mut envs = Vec::with_capacity(args.controllers);
    for i in 0..args.controllers {
        let id = format!("load-{i}");
        builder
            .register_env(&id, CounterEnv::new(None, CounterVariant::Plain))
            .map_err(|e| e.to_string())?;
        envs.push(id);
    }
    let server = builder.start().map_err(|e| e.to_string())?;
    let listener = server
        .listen("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?;
    Ok((server, listener, envs))
}

async fn run(args: LoadArgs) -> Result<bool, String> {
    // The in-process server has no token.
    let token = match &args.url {
        Some(_) => super::shared::resolve_token(args.token.as_deref(), args.token_file.as_deref())?,
        None => None,
    };
    let (server, url, envs) = match &args.url {
        Some(url) => (None, url.clone(), args.envs.clone()),
        None => {
            let (server, listener, envs) = in_process(&args).await?;
            let url = listener.url();
            (Some((server, listener)), url, envs)
        }
    };
    let duration = Duration::from_secs_f64(args.seconds);
    out!(
        "load: {} controllers on {} domains, {} observers, pipeline {}, {:.1} s, {} server at {url}",
        args.controllers,
        args.controllers,
        args.observers,
        args.pipeline,
        args.seconds,
        if server.is_some() {
            "in-process"
        } else {
            "external"
        },
    );
    let connect = Connector {
        url: url.clone(),
        token: token.clone(),
    };

    // Observers first, so that they see every boundary from the start.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut observers = Vec::with_capacity(args.observers);
    for j in 0..args.observers {
        let env = envs[j % args.controllers].clone();
        let (session, reader, writer) = connect.hello().await?;
        let state = Arc::new(parking_lot::Mutex::new(ObserverState::default()));
        let task = tokio::spawn(observe(
            session,
            reader,
            writer,
            env,
            format!("obs{j}"),
            state.clone(),
            stop_rx.clone(),
        ));
        observers.push((j % args.controllers, state, task));
    }
    // Wait for every subscription to be acknowledged.
    let deadline = Instant::now() + SETTLE;
    for (_, state, _) in &observers {
        while !state.lock().subscribed && state.lock().failure.is_none() {
            if Instant::now() > deadline {
                return Err("observers did not subscribe in time".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    if let Some(f) = observers
        .iter()
        .find_map(|(_, s, _)| s.lock().failure.clone())
    {
        return Err(format!("an observer failed to subscribe: {f}"));
    }

    let requests = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let end = started + duration;
    let mut controllers = Vec::with_capacity(args.controllers);
    for (i, env) in envs.iter().take(args.controllers).enumerate() {
        let (session, reader, writer) = connect.hello().await?;
        let plan = Plan {
            env: env.clone(),
            seed: i as i64,
            depth: args.pipeline,
            end,
            requests: requests.clone(),
        };
        controllers.push(tokio::spawn(control(session, reader, writer, plan)));
    }
    let tally = Arc::new(parking_lot::Mutex::new(super::hostile::Tally::default()));
    let attackers = if args.hostile > 0 {
        let addr = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let target = super::hostile::Target {
            addr,
            token: token.clone(),
            envs: envs.clone(),
            mib: args.hostile_mib,
        };
        super::hostile::spawn(
            target,
            args.hostile,
            &args.hostile_kinds,
            end,
            tally.clone(),
        )
    } else {
        Vec::new()
    };

    // Sample memory and report progress until the end.
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let progress_every = (duration / 10).max(Duration::from_secs(5));
    let mut next_progress = started + progress_every;
    let mut last_count = 0;
    let mut last_time = started;
    while Instant::now() < end {
        if let Some(kib) = rss_kib() {
            samples.push((started.elapsed().as_secs_f64(), kib));
        }
        if Instant::now() >= next_progress {
            let n = requests.load(Ordering::Relaxed);
            let rate = (n - last_count) as f64 / last_time.elapsed().as_secs_f64();
            out!(
                "  t={:>6.0}s  requests {n:>10}  {rate:>9.0}/s  rss {:.1} MiB",
                started.elapsed().as_secs_f64(),
                samples.last().map_or(0.0, |s| s.1 as f64 / 1024.0)
            );
            last_count = n;
            last_time = Instant::now();
            next_progress += progress_every;
        }
        let left = end.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(250))).await;
    }
    // The last sample is taken under load, before connections close.
    if let Some(kib) = rss_kib() {
        samples.push((started.elapsed().as_secs_f64(), kib));
    }
    for a in attackers {
        let _ = tokio::time::timeout(SETTLE, a).await;
    }
    let mut latency = Histogram::new();
    let mut reports = Vec::new();
    for c in controllers {
        let (report, histogram) = c.await.map_err(|e| e.to_string())?;
        latency.merge(&histogram);
        reports.push(report);
    }
    let elapsed = started.elapsed().as_secs_f64();

    // Observers converge on the final state of their domain.
    let deadline = Instant::now() + SETTLE;
    loop {
        let pending = observers.iter().any(|(d, state, _)| {
            let s = state.lock();
            s.failure.is_none() && s.last_sequence < reports[*d].final_sequence
        });
        if !pending || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_tx.send_replace(true);
    let mut observed = Vec::new();
    for (d, state, task) in observers {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        observed.push((d, state.lock().clone()));
    }
    if let Some((server, listener)) = server {
        server.shutdown().await;
        drop(listener);
    }
    if args.hostile > 0 {
        out!(
            "attackers ({} of each kind, {} MiB envelopes; how the server ended their connections):",
            args.hostile, args.hostile_mib
        );
        for line in tally.lock().lines() {
            out!("  {line}");
        }
    }
    Ok(print_report(
        &args, &reports, &observed, &latency, elapsed, &samples,
    ))
}

fn print_report(
    args: &LoadArgs,
    reports: &[ControllerReport],
    observed: &[(usize, ObserverState)],
    latency: &Histogram,
    elapsed: f64,
    samples: &[(f64, u64)],
) -> bool {
    let sum = |f: fn(&ControllerReport) -> u64| reports.iter().map(f).sum::<u64>();
    let (sent, answered) = (sum(|r| r.sent), sum(|r| r.answered));
    let snapshots: u64 = observed.iter().map(|(_, s)| s.snapshots).sum();
    out!(
        "requests: {answered} answered of {sent} sent in {elapsed:.1} s: {:.0} requests/s ({:.0} per controller)",
        answered as f64 / elapsed,
        answered as f64 / elapsed / reports.len() as f64
    );
    out!(
        "latency (µs, ±6%): p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        latency.percentile(50.0),
        latency.percentile(90.0),
        latency.percentile(99.0),
        latency.percentile(99.9),
        latency.max
    );
    if !observed.is_empty() {
        out!(
            "snapshots: {snapshots} received by {} observers ({:.0}/s; latest wins, so fewer than boundaries)",
            observed.len(),
            snapshots as f64 / elapsed
        );
    }
    // Memory: the baseline is the first sample after a fifth of the run
    // (sockets, buffers and allocator pools warmed up); the last is taken at
    // the end of the load, before connections close.
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let baseline = samples
        .iter()
        .find(|s| s.0 >= elapsed / 5.0)
        .or(samples.first())
        .map_or(0, |s| s.1);
    let last = samples.last().map_or(0, |s| s.1);
    let growth_mib = (last as f64 - baseline as f64) / 1024.0;
    out!(
        "rss: start {:.1} MiB, after warm-up {:.1} MiB, peak {:.1} MiB, end of load {:.1} MiB, growth after warm-up {growth_mib:+.1} MiB ({} samples{})",
        samples.first().map_or(0.0, |s| s.1 as f64 / 1024.0),
        baseline as f64 / 1024.0,
        peak as f64 / 1024.0,
        last as f64 / 1024.0,
        samples.len(),
        if args.url.is_some() {
            "; this process only, not the server's"
        } else {
            "; server and load in one process"
        }
    );

    let mut ok = true;
    let mut check = |name: &str, passed: bool, detail: String| {
        out!(
            "check {name:<42} {}  {detail}",
            if passed { "ok  " } else { "FAIL" }
        );
        ok &= passed;
    };
    for r in reports.iter().filter(|r| r.failure.is_some()) {
        check(
            &format!("controller {}", r.env),
            false,
            r.failure.clone().unwrap_or_default(),
        );
    }
    check(
        "every request answered exactly once",
        sum(|r| r.lost) == 0 && answered == sent && sent > 0,
        format!("{sent} sent, {answered} answered, {} lost", sum(|r| r.lost)),
    );
    check(
        "no misrouted or duplicate response",
        sum(|r| r.unknown) == 0,
        format!("{} unknown request IDs", sum(|r| r.unknown)),
    );
    check(
        "responses in request order per domain",
        sum(|r| r.out_of_order) == 0,
        format!("{} out of order", sum(|r| r.out_of_order)),
    );
    check(
        "every result correct",
        sum(|r| r.wrong) == 0 && sum(|r| r.errors) == 0,
        format!(
            "{} wrong values, {} error responses",
            sum(|r| r.wrong),
            sum(|r| r.errors)
        ),
    );
    let converged = observed
        .iter()
        .filter(|(d, s)| {
            let r = &reports[*d];
            s.failure.is_none()
                && s.last_sequence == r.final_sequence
                && s.last_position.is_some()
                && s.last_position == r.final_position
        })
        .count();
    let failures: Vec<String> = observed
        .iter()
        .filter_map(|(_, s)| s.failure.clone())
        .take(3)
        .collect();
    check(
        "observers' last snapshot = final state",
        converged == observed.len(),
        format!(
            "{converged}/{} converged{}",
            observed.len(),
            if failures.is_empty() {
                String::new()
            } else {
                format!("; {}", failures.join("; "))
            }
        ),
    );
    let regressions: u64 = observed
        .iter()
        .map(|(_, s)| s.regressions + s.foreign)
        .sum();
    check(
        "snapshot sequences increase, none foreign",
        regressions == 0,
        format!("{regressions} regressions or foreign snapshots"),
    );
    if args.hostile == 0 {
        check(
            "memory bounded",
            growth_mib <= args.max_rss_growth_mib,
            format!(
                "growth {growth_mib:+.1} MiB ≤ {} MiB, peak {:.1} MiB",
                args.max_rss_growth_mib,
                peak as f64 / 1024.0
            ),
        );
    }
    if let Some(max) = args.max_rss_mib {
        check(
            "peak memory bounded",
            peak as f64 / 1024.0 <= max,
            format!("peak {:.1} MiB ≤ {max} MiB", peak as f64 / 1024.0),
        );
    }
    out!("{}", if ok { "PASS" } else { "FAIL" });
    ok
}
