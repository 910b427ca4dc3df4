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

use crate::codec::{Codec, Dict, NdArray, Value};
use crate::fixtures::{CounterEnv, CounterVariant};
use crate::server::{Listener, Server, ServerConfig};
use crate::transport::{Reader, TransportError, Writer};
use bytes::Bytes;
use clap::Args;
use std::collections::VecDeque;
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
/// A controller resets its env after this many steps.
const RESET_EVERY: u64 = 500;
/// How long the end of the run may take (draining, observers converging).
const SETTLE: Duration = Duration::from_secs(10);

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
    /// With --url: the bearer token.
    #[arg(long)]
    pub token: Option<String>,
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

/// What one controller saw.
#[derive(Debug, Default)]
struct ControllerReport {
    env: String,
    sent: u64,
    answered: u64,
    errors: u64,
    wrong: u64,
    out_of_order: u64,
    unknown: u64,
    lost: u64,
    final_position: Option<f64>,
    final_sequence: u64,
    failure: Option<String>,
}

/// What one observer saw.
#[derive(Debug, Default, Clone)]
struct ObserverState {
    subscribed: bool,
    snapshots: u64,
    regressions: u64,
    foreign: u64,
    last_sequence: u64,
    last_position: Option<f64>,
    failure: Option<String>,
}

/// A log-linear latency histogram (microseconds, 16 sub-buckets per power
/// of two: at most 6.25 % relative error; percentiles report the upper end
/// of their bucket), so that hours of samples cost a few kilobytes.
#[derive(Debug, Clone)]
struct Histogram {
    counts: Vec<u64>,
    max: u64,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            counts: vec![0; 64 * 16],
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let bits = 63 - v.leading_zeros() as u64;
        let sub = (v >> (bits - 4)) & 15;
        ((bits - 3) * 16 + sub) as usize
    }

    fn lower_bound(index: usize) -> u64 {
        if index < 16 {
            return index as u64;
        }
        let bits = (index / 16) as u64 + 3;
        let sub = (index % 16) as u64;
        (16 + sub) << (bits - 4)
    }

    fn record(&mut self, micros: u64) {
        self.counts[Histogram::index(micros)] += 1;
        self.max = self.max.max(micros);
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.max = self.max.max(other.max);
    }

    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn percentile(&self, p: f64) -> u64 {
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
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
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
    let server = builder.start();
    let listener = server
        .listen("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:0: {e}"))?;
    Ok((server, listener, envs))
}

async fn run(args: LoadArgs) -> Result<bool, String> {
    let (server, url, envs) = match &args.url {
        Some(url) => (None, url.clone(), args.envs.clone()),
        None => {
            let (server, listener, envs) = in_process(&args).await?;
            let url = listener.url();
            (Some((server, listener)), url, envs)
        }
    };
    let duration = Duration::from_secs_f64(args.seconds);
    println!(
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
        token: args.token.clone(),
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
            token: args.token.clone(),
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
            println!(
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
        println!(
            "attackers ({} of each kind, {} MiB envelopes; how the server ended their connections):",
            args.hostile, args.hostile_mib
        );
        for line in tally.lock().lines() {
            println!("  {line}");
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
    println!(
        "requests: {answered} answered of {sent} sent in {elapsed:.1} s: {:.0} requests/s ({:.0} per controller)",
        answered as f64 / elapsed,
        answered as f64 / elapsed / reports.len() as f64
    );
    println!(
        "latency (µs, ±6%): p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        latency.percentile(50.0),
        latency.percentile(90.0),
        latency.percentile(99.0),
        latency.percentile(99.9),
        latency.max
    );
    if !observed.is_empty() {
        println!(
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
    println!(
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
        println!(
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
    println!("{}", if ok { "PASS" } else { "FAIL" });
    ok
}

/// Opens raw protocol sessions.
struct Connector {
    url: String,
    token: Option<String>,
}

impl Connector {
    /// Connects and completes hello; returns the session ID and both halves.
    async fn hello(&self) -> Result<(Value, Reader, Writer), String> {
        let headers: Vec<(String, String)> = self
            .token
            .iter()
            .map(|t| ("Authorization".to_string(), format!("Bearer {t}")))
            .collect();
        let (ws_reader, ws_writer) = tokio::time::timeout(
            SETTLE,
            crate::transport::ws::connect(
                &self.url,
                &headers,
                crate::codec::DEFAULT_MAX_MESSAGE_SIZE,
            ),
        )
        .await
        .map_err(|_| format!("connecting to {} timed out", self.url))?
        .map_err(|e| format!("cannot connect to {}: {e}", self.url))?;
        let (mut reader, mut writer) = (Reader::Ws(ws_reader), Writer::Ws(ws_writer));
        let hello = encode(&crate::protocol::request_envelope(
            "hello",
            "hello",
            &Value::Null,
            None,
        ));
        send(&mut writer, hello).await?;
        let answer = receive(&mut reader).await?;
        let session = answer
            .get("result")
            .and_then(|r| r.get("session_id"))
            .cloned()
            .ok_or_else(|| format!("hello failed: {answer:?}"))?;
        Ok((session, reader, writer))
    }
}

fn encode(d: &Dict) -> Bytes {
    // Requests are small and well formed; encoding cannot fail.
    Bytes::from(
        Codec::default()
            .encode_entries(&d.iter().collect::<Vec<_>>())
            .unwrap_or_default(),
    )
}

async fn send(writer: &mut Writer, frame: Bytes) -> Result<(), String> {
    writer.feed(frame).await.map_err(|e| e.to_string())?;
    writer.flush().await.map_err(|e| e.to_string())
}

async fn receive(reader: &mut Reader) -> Result<Value, String> {
    let frame = tokio::time::timeout(SETTLE, reader.recv())
        .await
        .map_err(|_| "no message within 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    Codec::default().decode(frame).map_err(|e| e.to_string())
}

/// Every element of `observation["position"]` when they are all equal.
fn uniform_position(observation: Option<&Value>) -> Option<f64> {
    let values = observation?
        .get("position")
        .and_then(Value::as_array)
        .map(NdArray::to_f64_vec)?;
    let first = *values.first()?;
    values.iter().all(|&v| v == first).then_some(first)
}

/// What a controller expects of an outstanding request.
struct Outstanding {
    id: String,
    sent_at: Instant,
    position: f64,
}

/// What a controller does.
struct Plan {
    /// Its env.
    env: String,
    /// The seed of its resets (its index).
    seed: i64,
    /// Requests kept in flight.
    depth: usize,
    /// When to stop sending.
    end: Instant,
    /// Answered requests of every controller (for progress lines).
    requests: Arc<AtomicU64>,
}

/// One controller: pipelined steps (and a reset every [`RESET_EVERY`]) on
/// its env until the end of the plan, then drains its outstanding requests.
async fn control(
    session: Value,
    mut reader: Reader,
    mut writer: Writer,
    plan: Plan,
) -> (ControllerReport, Histogram) {
    let Plan {
        env,
        seed,
        depth,
        end,
        requests,
    } = plan;
    let mut report = ControllerReport {
        env: env.clone(),
        ..ControllerReport::default()
    };
    let mut histogram = Histogram::new();
    let mut outstanding: VecDeque<Outstanding> = VecDeque::new();
    let mut next: u64 = 0;
    let mut position = 0.0;
    let action = Value::Array(NdArray::from_vec(vec![1.0f32, 1.0]));
    let mut kwargs = Dict::new();
    kwargs.insert("seed", seed);
    let kwargs = Value::Dict(kwargs);
    let step_args = Value::Tuple(vec![action]);
    let no_args = Value::Tuple(Vec::new());
    let empty = Value::Dict(Dict::new());
    loop {
        let now = Instant::now();
        let sending = now < end && report.failure.is_none();
        let mut fed = false;
        while sending && outstanding.len() < depth {
            let reset = next.is_multiple_of(RESET_EVERY);
            let id = format!("c{seed}-{next}");
            next += 1;
            let mut d = crate::protocol::request_envelope("call", &id, &session, Some(&env));
            d.insert("method", if reset { "reset" } else { "step" });
            if reset {
                d.insert("args", no_args.clone());
                d.insert("kwargs", kwargs.clone());
                position = seed as f64;
            } else {
                d.insert("args", step_args.clone());
                d.insert("kwargs", empty.clone());
                position += 1.0;
            }
            d.insert("operation_id", id.as_str());
            if let Err(e) = writer.feed(encode(&d)).await {
                report.failure = Some(format!("send failed: {e}"));
                break;
            }
            fed = true;
            report.sent += 1;
            outstanding.push_back(Outstanding {
                id,
                sent_at: Instant::now(),
                position,
            });
        }
        if fed {
            if let Err(e) = writer.flush().await {
                report.failure = Some(format!("send failed: {e}"));
            }
        }
        if outstanding.is_empty() {
            break;
        }
        // A server that answers nothing for 10 s has lost the rest.
        let frame = match tokio::time::timeout(SETTLE, reader.recv()).await {
            Ok(Ok(f)) => f,
            Ok(Err(TransportError::Closed)) => {
                report.failure = Some("the server closed the connection".into());
                break;
            }
            Ok(Err(e)) => {
                report.failure = Some(e.to_string());
                break;
            }
            Err(_) => {
                report.failure = Some("no response within 10 s".into());
                break;
            }
        };
        let message = match Codec::default().decode(frame) {
            Ok(m) => m,
            Err(e) => {
                report.failure = Some(format!("invalid envelope from the server: {e}"));
                break;
            }
        };
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "snapshot" || kind == "subscription_error" {
            continue;
        }
        let Some(id) = message.get("request_id").and_then(Value::as_str) else {
            report.unknown += 1;
            continue;
        };
        let expected = match outstanding.iter().position(|o| o.id == id) {
            Some(0) => outstanding.pop_front(),
            Some(i) => {
                report.out_of_order += 1;
                outstanding.remove(i)
            }
            None => {
                report.unknown += 1;
                continue;
            }
        };
        let Some(expected) = expected else { continue };
        report.answered += 1;
        requests.fetch_add(1, Ordering::Relaxed);
        histogram.record(expected.sent_at.elapsed().as_micros() as u64);
        if kind != "response" {
            report.errors += 1;
            if report.errors == 1 {
                report.failure = Some(format!("error response: {:?}", message.get("error")));
            }
            continue;
        }
        let result = message.get("result");
        let observation = result
            .and_then(|r| r.get("value"))
            .and_then(Value::as_seq)
            .and_then(|v| {
                // reset: (context, observation, info); step: (observation, …)
                if v.len() == 3 {
                    v.get(1)
                } else {
                    v.first()
                }
            });
        let got = uniform_position(observation);
        if got != Some(expected.position) {
            report.wrong += 1;
        } else {
            report.final_position = got;
        }
        if let Some(sequence) = result
            .and_then(|r| r.get("descriptors"))
            .and_then(Value::as_seq)
            .and_then(|ds| {
                ds.iter()
                    .find(|d| d.get("id").and_then(Value::as_str) == Some(env.as_str()))
            })
            .and_then(|d| d.get("sequence"))
            .and_then(Value::as_u64)
        {
            report.final_sequence = report.final_sequence.max(sequence);
        }
    }
    report.lost = outstanding.len() as u64;
    writer.close(None).await;
    (report, histogram)
}

/// One observer: subscribes to `env`'s observation and records every
/// snapshot until told to stop.
async fn observe(
    session: Value,
    mut reader: Reader,
    mut writer: Writer,
    env: String,
    subscription: String,
    state: Arc<parking_lot::Mutex<ObserverState>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut d = crate::protocol::request_envelope("subscribe", "subscribe", &session, Some(&env));
    d.insert("subscription_id", subscription.as_str());
    d.insert("fields", Value::list(["observation"]));
    let fail = |message: String| {
        state.lock().failure = Some(message);
    };
    if let Err(e) = send(&mut writer, encode(&d)).await {
        return fail(e);
    }
    match receive(&mut reader).await {
        Ok(m) if m.get("type").and_then(Value::as_str) == Some("response") => {
            state.lock().subscribed = true;
        }
        Ok(m) => return fail(format!("subscribe failed: {m:?}")),
        Err(e) => return fail(e),
    }
    loop {
        let frame = tokio::select! {
            _ = stop.changed() => break,
            f = reader.recv() => f,
        };
        let frame = match frame {
            Ok(f) => f,
            Err(e) => return fail(format!("observer connection: {e}")),
        };
        let message = match Codec::default().decode(frame) {
            Ok(m) => m,
            Err(e) => return fail(format!("invalid envelope from the server: {e}")),
        };
        if message.get("type").and_then(Value::as_str) != Some("snapshot") {
            return fail(format!("unexpected message: {:?}", message.get("type")));
        }
        let mut s = state.lock();
        s.snapshots += 1;
        if message.get("subscription_id").and_then(Value::as_str) != Some(subscription.as_str())
            || message.get("resource_id").and_then(Value::as_str) != Some(env.as_str())
        {
            s.foreign += 1;
            continue;
        }
        let sequence = message.get("sequence").and_then(Value::as_u64).unwrap_or(0);
        if sequence <= s.last_sequence {
            s.regressions += 1;
        }
        s.last_sequence = sequence;
        s.last_position = uniform_position(message.get("data").and_then(|d| d.get("observation")));
    }
    writer.close(None).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 65_535, 1 << 40] {
            let i = Histogram::index(v);
            assert!(i >= last, "{v}");
            last = i;
            let low = Histogram::lower_bound(i);
            assert!(low <= v && v - low <= v / 16, "{v}: bucket starts at {low}");
        }
        let mut h = Histogram::new();
        for v in 1..=1000 {
            h.record(v);
        }
        let p50 = h.percentile(50.0);
        assert!((500..=531).contains(&p50), "{p50}");
        assert_eq!(h.percentile(100.0), 1000);
    }

    #[test]
    fn only_loopback_urls_are_loaded() {
        for ok in [
            "ws://127.0.0.1:8765",
            "ws://localhost:1",
            "ws://[::1]:9",
            "ws://127.1.2.3:5",
        ] {
            assert!(loopback_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ws://10.0.0.1:8765",
            "ws://192.168.1.2:1",
            "ws://example.com:80",
            "wss://127.0.0.1:1",
            "http://127.0.0.1:1",
        ] {
            assert!(loopback_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn arguments_are_bounded() {
        let args = LoadArgs {
            seconds: 1.0,
            controllers: 1,
            observers: 0,
            pipeline: 4,
            url: None,
            envs: Vec::new(),
            token: None,
            max_rss_growth_mib: 64.0,
            max_rss_mib: None,
            hostile: 0,
            hostile_mib: 16,
            hostile_kinds: Vec::new(),
        };
        assert!(validate(&args).is_ok());
        for bad in [
            LoadArgs {
                hostile: 129,
                ..args.clone()
            },
            LoadArgs {
                hostile_mib: 0,
                ..args.clone()
            },
            LoadArgs {
                hostile_kinds: vec!["nope".into()],
                ..args.clone()
            },
            LoadArgs {
                seconds: 0.0,
                ..args.clone()
            },
            LoadArgs {
                seconds: f64::INFINITY,
                ..args.clone()
            },
            LoadArgs {
                controllers: 0,
                ..args.clone()
            },
            LoadArgs {
                controllers: MAX_CONTROLLERS + 1,
                ..args.clone()
            },
            LoadArgs {
                observers: MAX_OBSERVERS + 1,
                ..args.clone()
            },
            LoadArgs {
                pipeline: 65,
                ..args.clone()
            },
            LoadArgs {
                url: Some("ws://127.0.0.1:1".into()),
                ..args.clone()
            },
            LoadArgs {
                url: Some("ws://8.8.8.8:1".into()),
                envs: vec!["counter".into()],
                ..args.clone()
            },
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
    }
}
