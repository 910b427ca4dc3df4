//! The load test's raw protocol sessions: a controller pipelining steps
//! (and periodic resets) on its env, and an observer recording snapshots.

use super::report::{ControllerReport, Histogram, ObserverState};
use crate::codec::{Codec, Dict, NdArray, Value};
use crate::transport::{Reader, TransportError, Writer};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A controller resets its env after this many steps.
const RESET_EVERY: u64 = 500;
/// How long the end of the run may take (draining, observers converging).
pub(super) const SETTLE: Duration = Duration::from_secs(10);

/// Opens raw protocol sessions.
pub(super) struct Connector {
    pub(super) url: String,
    pub(super) token: Option<String>,
}

impl Connector {
    /// Connects and completes hello; returns the session ID and both halves.
    pub(super) async fn hello(&self) -> Result<(Value, Reader, Writer), String> {
        let headers: Vec<(String, String)> = self
            .token
            .iter()
            .map(|t| ("Authorization".to_string(), format!("Bearer {t}")))
            .collect();
        let (ws_reader, ws_writer) = tokio::time::timeout(
            SETTLE,
            crate::transport::ws::connect_with(
                &self.url,
                &headers,
                crate::codec::DEFAULT_MAX_MESSAGE_SIZE,
                None,
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

pub(super) fn encode(d: &Dict) -> Bytes {
    // Requests are small and well formed; encoding cannot fail.
    Bytes::from(
        Codec::default()
            .encode_entries(&d.iter().collect::<Vec<_>>())
            .unwrap_or_default(),
    )
}

pub(super) async fn send(writer: &mut Writer, frame: Bytes) -> Result<(), String> {
    writer.feed(frame).await.map_err(|e| e.to_string())?;
    writer.flush().await.map_err(|e| e.to_string())
}

pub(super) async fn receive(reader: &mut Reader) -> Result<Value, String> {
    let frame = tokio::time::timeout(SETTLE, reader.recv())
        .await
        .map_err(|_| "no message within 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    Codec::default().decode(frame).map_err(|e| e.to_string())
}

/// Every element of `observation["position"]` when they are all equal.
pub(super) fn uniform_position(observation: Option<&Value>) -> Option<f64> {
    let values = observation?
        .get("position")
        .and_then(Value::as_array)
        .map(NdArray::to_f64_vec)?;
    let first = *values.first()?;
    values.iter().all(|&v| v == first).then_some(first)
}

/// What a controller expects of an outstanding request.
pub(super) struct Outstanding {
    pub(super) id: String,
    pub(super) sent_at: Instant,
    pub(super) position: f64,
}

/// What a controller does.
pub(super) struct Plan {
    /// Its env.
    pub(super) env: String,
    /// The seed of its resets (its index).
    pub(super) seed: i64,
    /// Requests kept in flight.
    pub(super) depth: usize,
    /// When to stop sending.
    pub(super) end: Instant,
    /// Answered requests of every controller (for progress lines).
    pub(super) requests: Arc<AtomicU64>,
}

/// One controller: pipelined steps (and a reset every [`RESET_EVERY`]) on
/// its env until the end of the plan, then drains its outstanding requests.
pub(super) async fn control(
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
pub(super) async fn observe(
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
