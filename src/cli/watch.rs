//! `watch`: an observer printing a resource's live boundary snapshots.

use super::pretty::compact;
use super::shared::{interrupted, run_client, ClientArgs};
use crate::client::{ClientError, SnapshotEvent};
use clap::Args;
use std::collections::VecDeque;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The widest a field's summary may be on a snapshot line.
const FIELD_WIDTH: usize = 160;

/// Options of `watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The resource ID (an env, world or node).
    pub id: String,
    /// Fields to subscribe to, comma-separated (env and node: context,
    /// observation, reward, terminated, truncated, info, render; world: dt).
    /// Default: every field but render.
    #[arg(long, value_delimiter = ',', value_name = "F,...")]
    pub fields: Option<Vec<String>>,
    /// Exit after this many snapshots.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// Snapshots per second over the last second.
#[derive(Debug, Default)]
pub(crate) struct RateMeter {
    arrivals: VecDeque<Instant>,
    started: Option<Instant>,
}

impl RateMeter {
    /// Records an arrival at `now` and returns the rate over the last second
    /// (over the time since the first arrival while that is shorter).
    pub(crate) fn record(&mut self, now: Instant) -> f64 {
        const WINDOW: Duration = Duration::from_secs(1);
        let started = *self.started.get_or_insert(now);
        self.arrivals.push_back(now);
        while self
            .arrivals
            .front()
            .is_some_and(|t| now.duration_since(*t) > WINDOW)
        {
            self.arrivals.pop_front();
        }
        let span = now.duration_since(started).min(WINDOW).as_secs_f64();
        if span <= 0.0 {
            return 0.0;
        }
        (self.arrivals.len() as f64 - 1.0).max(0.0) / span
    }
}

/// One snapshot as a line: sequence, kind, rate, then each field.
pub(crate) fn snapshot_line(event: &SnapshotEvent, rate: f64, skipped: u64) -> String {
    let mut line = format!("#{:<6} {:<6} {:>7.1}/s", event.sequence, event.kind, rate);
    if skipped > 0 {
        line.push_str(&format!(" (+{skipped} skipped)"));
    }
    if event.data.is_empty() {
        line.push_str("  (no fields)");
    }
    for (name, value) in event.data.iter() {
        line.push_str(&format!("  {name}={}", compact(value, FIELD_WIDTH)));
    }
    line
}

/// `watch`: subscribes and prints every snapshot it receives (latest wins:
/// a slow terminal sees gaps in the sequence). Ends on Ctrl-C (unsubscribes
/// and closes), after `--count` snapshots, or when the subscription ends
/// (printing why; exit code 1).
pub fn watch(args: WatchArgs) -> ExitCode {
    run_client(async move {
        let stop = interrupted().map_err(|e| ClientError::invalid_use(e.to_string()))?;
        tokio::pin!(stop);
        let client = args.client.connect(false).await?;
        let descriptor = client.describe(&args.id).await?;
        let fields: Option<Vec<&str>> = args
            .fields
            .as_ref()
            .map(|f| f.iter().map(String::as_str).collect());
        let mut subscription = client.subscribe(&args.id, fields.as_deref()).await?;
        eprintln!(
            "watching {} ({}) on {}, fields {}; Ctrl-C to stop",
            args.id,
            descriptor.kind().as_str(),
            args.client.url,
            fields.map_or_else(|| "(default)".to_string(), |f| f.join(","))
        );
        let mut rate = RateMeter::default();
        let mut received = 0u64;
        let mut last_sequence: Option<u64> = None;
        let stdout = std::io::stdout();
        let code = loop {
            if args.count.is_some_and(|n| received >= n) {
                break ExitCode::SUCCESS;
            }
            let next = tokio::select! {
                _ = &mut stop => {
                    eprintln!("interrupted");
                    break ExitCode::SUCCESS;
                }
                next = subscription.next(None) => next,
            };
            match next {
                Ok(Some(event)) => {
                    received += 1;
                    let skipped =
                        last_sequence.map_or(0, |last| event.sequence.saturating_sub(last + 1));
                    last_sequence = Some(event.sequence);
                    let line = snapshot_line(&event, rate.record(Instant::now()), skipped);
                    let mut out = stdout.lock();
                    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                        // The reader went away (a closed pipe): stop quietly.
                        break ExitCode::SUCCESS;
                    }
                }
                Ok(None) => {
                    eprintln!("the subscription ended");
                    break ExitCode::FAILURE;
                }
                Err(ClientError::Remote(e)) => {
                    eprintln!("the subscription ended: {e}");
                    break ExitCode::FAILURE;
                }
                Err(e) => {
                    eprintln!("the subscription ended: {}: {e}", e.code());
                    break ExitCode::FAILURE;
                }
            }
        };
        if !subscription.is_closed() {
            let _ = subscription.unsubscribe().await;
        }
        client.close().await;
        Ok(code)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict;

    #[test]
    fn rate_over_the_last_second() {
        let mut meter = RateMeter::default();
        let t0 = Instant::now();
        assert_eq!(meter.record(t0), 0.0);
        for i in 1..=20 {
            meter.record(t0 + Duration::from_millis(50 * i));
        }
        // 21 arrivals over one second: 20 intervals.
        let r = meter.record(t0 + Duration::from_millis(1050));
        assert!((r - 20.0).abs() < 1e-9, "{r}");
        // After a pause, only the recent arrivals count.
        let r = meter.record(t0 + Duration::from_millis(5000));
        assert_eq!(r, 0.0);
    }

    #[test]
    fn lines() {
        let event = SnapshotEvent {
            subscription_id: "s".into(),
            resource_id: "cartpole".into(),
            operation_id: None,
            kind: "step".into(),
            sequence: 12,
            timestamp_ns: 0,
            descriptor_revision: 1,
            descriptor: None,
            data: dict! { "reward" => 1.0, "terminated" => false },
        };
        let line = snapshot_line(&event, 50.0, 2);
        assert_eq!(
            line,
            "#12     step      50.0/s (+2 skipped)  reward=1.0  terminated=False"
        );
    }
}
