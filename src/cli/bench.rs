//! `bench`: step round trips on an env, measured from the client.

use super::shared::{run_client, ClientArgs};
use crate::client::ClientError;
use crate::codec::{DType, Dict, NdArray, Value};
use crate::host::{ResetArgs, Space};
use clap::Args;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Options of `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The env's resource ID.
    pub id: String,
    /// How long to step, in seconds.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub seconds: f64,
}

/// A valid action built from a space without randomness: every box
/// element is zero clamped into its bounds (the lower bound when zero is
/// below it, the upper when above), binary arrays are false, dynamic boxes
/// take their smallest shape, text its shortest string, a union its first
/// space; tuples, dicts and batched spaces are built element-wise.
pub fn neutral_action(space: &Space) -> Result<Value, String> {
    Ok(match space {
        Space::Box(b) => Value::Array(clamped_zeros(b.dtype, &b.shape, &b.low, &b.high)?),
        Space::Binary(b) => {
            Value::Array(NdArray::zeros(b.dtype, b.shape.clone()).map_err(|e| e.to_string())?)
        }
        Space::DynamicBox(b) => {
            let scalar = |a: &NdArray| a.len() == 1;
            if scalar(&b.low) && scalar(&b.high) {
                let one = vec![1; b.shape_low.len()];
                let low = reshape(&b.low, one.clone())?;
                let high = reshape(&b.high, one)?;
                Value::Array(clamped_zeros(b.dtype, &b.shape_low, &low, &high)?)
            } else {
                Value::Array(
                    NdArray::zeros(b.dtype, b.shape_low.clone()).map_err(|e| e.to_string())?,
                )
            }
        }
        Space::Tuple(spaces) => Value::Tuple(
            spaces
                .iter()
                .map(neutral_action)
                .collect::<Result<_, _>>()?,
        ),
        Space::Dict(d) => {
            let mut dict = Dict::with_capacity(d.len());
            for (key, s) in d.entries() {
                dict.insert(key.as_str(), neutral_action(s)?);
            }
            Value::Dict(dict)
        }
        Space::Text(t) => {
            let c = t
                .charset
                .as_deref()
                .and_then(|c| c.chars().next())
                .unwrap_or('a');
            let n = usize::try_from(t.min_length.max(0)).unwrap_or(0);
            Value::Str(std::iter::repeat_n(c, n).collect())
        }
        Space::Union(spaces) => match spaces.first() {
            Some(first) => neutral_action(first)?,
            None => return Err("an empty union space has no action".into()),
        },
        Space::Batched(b) => tile(neutral_action(&b.single_space)?, &b.batch_shape)?,
        Space::Graph(_) => return Err("cannot build an action for a GraphSpace".into()),
    })
}

fn reshape(a: &NdArray, shape: Vec<usize>) -> Result<NdArray, String> {
    NdArray::from_bytes(a.dtype(), shape, a.bytes().clone()).map_err(|e| e.to_string())
}

/// Zeros of `shape`, each element moved into `[low, high]` (bounds broadcast
/// along axes of length 1) by copying the bound's element bytes.
fn clamped_zeros(
    dtype: DType,
    shape: &[usize],
    low: &NdArray,
    high: &NdArray,
) -> Result<NdArray, String> {
    let zeros = NdArray::zeros(dtype, shape.to_vec()).map_err(|e| e.to_string())?;
    let fits = |a: &NdArray| {
        a.dtype() == dtype
            && a.ndim() == shape.len()
            && a.shape().iter().zip(shape).all(|(&b, &s)| b == s || b == 1)
    };
    if !fits(low) || !fits(high) {
        // Bounds this crate did not build: zeros are the best guess.
        return Ok(zeros);
    }
    let size = dtype.itemsize();
    let mut bytes = zeros.as_bytes().to_vec();
    let mut index = vec![0usize; shape.len()];
    for i in 0..zeros.len() {
        let (li, hi) = (
            broadcast_offset(&index, low.shape()),
            broadcast_offset(&index, high.shape()),
        );
        let source = match (low.get_f64(li), high.get_f64(hi)) {
            (Some(lo), _) if lo > 0.0 => low.as_bytes().get(li * size..(li + 1) * size),
            (_, Some(up)) if up < 0.0 => high.as_bytes().get(hi * size..(hi + 1) * size),
            _ => None,
        };
        if let Some(source) = source {
            bytes[i * size..(i + 1) * size].copy_from_slice(source);
        }
        // Advance the C-order multi-index.
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    NdArray::from_bytes(dtype, shape.to_vec(), bytes.into()).map_err(|e| e.to_string())
}

/// The flat offset into an array of `bshape` (axes of length 1 broadcast)
/// of the element at multi-index `index`.
fn broadcast_offset(index: &[usize], bshape: &[usize]) -> usize {
    index
        .iter()
        .zip(bshape)
        .fold(0, |acc, (&i, &b)| acc * b + if b == 1 { 0 } else { i })
}

/// Repeats every array leaf of `value` over leading `batch` dimensions.
fn tile(value: Value, batch: &[usize]) -> Result<Value, String> {
    Ok(match value {
        Value::Array(a) => {
            let copies: usize = batch.iter().product();
            let mut shape = batch.to_vec();
            shape.extend_from_slice(a.shape());
            let bytes = a.as_bytes().repeat(copies);
            Value::Array(
                NdArray::from_bytes(a.dtype(), shape, bytes.into()).map_err(|e| e.to_string())?,
            )
        }
        Value::Dict(d) => {
            let mut out = Dict::with_capacity(d.len());
            for (k, v) in d.iter() {
                out.insert(k, tile(v.clone(), batch)?);
            }
            Value::Dict(out)
        }
        Value::Tuple(items) => Value::Tuple(
            items
                .into_iter()
                .map(|v| tile(v, batch))
                .collect::<Result<_, _>>()?,
        ),
        other => {
            return Err(format!(
                "cannot batch a {} action element",
                other.type_name()
            ))
        }
    })
}

/// Whether a `terminated`/`truncated` value says the episode is over: a
/// bool, or every element of a batched array.
fn finished(v: &Value) -> bool {
    match v {
        Value::Array(a) => !a.is_empty() && a.to_f64_vec().iter().all(|&x| x != 0.0),
        other => other.truthy().unwrap_or(false),
    }
}

/// Latency statistics of a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stats {
    pub median: Duration,
    pub p99: Duration,
    pub min: Duration,
    pub max: Duration,
    pub mean: Duration,
}

impl Stats {
    /// Statistics of the samples (`None` when there are none). Percentiles
    /// are nearest-rank.
    pub(crate) fn of(samples: &mut [Duration]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let r = (p * samples.len() as f64).ceil() as usize;
            samples[r.clamp(1, samples.len()) - 1]
        };
        let total: Duration = samples.iter().sum();
        Some(Stats {
            median: rank(0.5),
            p99: rank(0.99),
            min: samples[0],
            max: samples[samples.len() - 1],
            mean: total / u32::try_from(samples.len()).unwrap_or(u32::MAX),
        })
    }
}

fn micros(d: Duration) -> String {
    format!("{:>10.1} µs", d.as_secs_f64() * 1e6)
}

/// `bench`: resets the env, then steps it with a neutral action (see
/// [`neutral_action`]) for `--seconds`, resetting whenever the episode is
/// over (for batched envs, when every element is); prints progress on
/// stderr, then the round-trip statistics of the steps.
pub fn bench(args: BenchArgs) -> ExitCode {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return super::shared::fail("--seconds must be a positive number");
    }
    let duration = Duration::from_secs_f64(args.seconds);
    run_client(async move {
        let client = args.client.connect(false).await?;
        let env = client.env(&args.id).await?;
        let action = match env.action_space() {
            Some(space) => neutral_action(&space).map_err(ClientError::invalid_use)?,
            None => Value::Null,
        };
        let mut samples = Vec::with_capacity(4096);
        let mut resets = 0u64;
        let outcome: Result<Duration, ClientError> = async {
            env.reset(ResetArgs::default()).await?;
            let started = Instant::now();
            let mut last_progress = started;
            let mut stderr = std::io::stderr();
            // A line redrawn in place on a terminal; otherwise a line a
            // second and one at the end.
            let terminal = stderr.is_terminal();
            let every = Duration::from_millis(if terminal { 200 } else { 1000 });
            while started.elapsed() < duration {
                let t = Instant::now();
                let step = env.step(action.clone()).await?;
                let now = Instant::now();
                samples.push(now - t);
                if finished(&step.terminated) || finished(&step.truncated) {
                    env.reset(ResetArgs::default()).await?;
                    resets += 1;
                }
                if now - last_progress >= every {
                    last_progress = now;
                    let elapsed = (now - started).as_secs_f64();
                    let progress = format!(
                        "  {} steps  {elapsed:.1}/{:.1} s  {:.0} steps/s",
                        samples.len(),
                        args.seconds,
                        samples.len() as f64 / elapsed
                    );
                    let _ = if terminal {
                        write!(stderr, "\r{progress}\x1b[K")
                    } else {
                        writeln!(stderr, "{progress}")
                    };
                    let _ = stderr.flush();
                }
            }
            let elapsed = started.elapsed();
            if terminal {
                let _ = write!(stderr, "\r\x1b[K");
            } else {
                // The last line covers the whole run, whenever the last
                // once-a-second line came.
                let secs = elapsed.as_secs_f64();
                let _ = writeln!(
                    stderr,
                    "  {} steps  {secs:.1}/{:.1} s  {:.0} steps/s",
                    samples.len(),
                    args.seconds,
                    samples.len() as f64 / secs
                );
            }
            Ok(elapsed)
        }
        .await;
        client.close().await;
        let elapsed = outcome?;
        let steps = samples.len();
        let Some(stats) = Stats::of(&mut samples) else {
            return Err(ClientError::invalid_use("no step completed"));
        };
        out!(
            "bench {} on {}: {steps} steps in {:.2} s ({resets} resets)",
            args.id,
            args.client.url,
            elapsed.as_secs_f64()
        );
        out!("  median  {}", micros(stats.median));
        out!("  p99     {}", micros(stats.p99));
        out!("  min     {}", micros(stats.min));
        out!("  max     {}", micros(stats.max));
        out!("  mean    {}", micros(stats.mean));
        out!(
            "  steps/s {:>10.0}",
            steps as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
        );
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_actions_are_in_bounds() {
        let cartpole = Space::boxed(DType::I64, vec![], 0.0, 1.0);
        let a = neutral_action(&cartpole).expect("action");
        let a = a.as_array().expect("array");
        assert_eq!((a.dtype(), a.shape()), (DType::I64, &[][..]));
        assert_eq!(a.to_f64_vec(), vec![0.0]);

        let shifted = Space::box_with_bounds(
            DType::F32,
            vec![2, 3],
            NdArray::from_shape_vec(vec![2, 1], vec![0.5f32, -2.0]).expect("low"),
            NdArray::from_shape_vec(vec![2, 3], vec![1.0f32, 1.0, 1.0, 3.0, -1.0, 3.0])
                .expect("high"),
        )
        .expect("space");
        let a = neutral_action(&shifted).expect("action");
        assert_eq!(
            a.as_array().map(NdArray::to_f64_vec),
            Some(vec![0.5, 0.5, 0.5, 0.0, -1.0, 0.0])
        );

        let nested = Space::dict([
            ("grip", Space::binary(vec![2])),
            (
                "arm",
                Space::batched(Space::boxed(DType::U8, vec![2], 3.0, 9.0), vec![4]),
            ),
        ]);
        let a = neutral_action(&nested).expect("action");
        let arm = a.get("arm").and_then(Value::as_array).expect("arm");
        assert_eq!((arm.dtype(), arm.shape()), (DType::U8, &[4usize, 2][..]));
        assert!(arm.to_f64_vec().iter().all(|&x| x == 3.0));
        let grip = a.get("grip").and_then(Value::as_array).expect("grip");
        assert_eq!(grip.dtype(), DType::BOOL);
    }

    #[test]
    fn statistics() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let s = Stats::of(&mut samples).expect("stats");
        assert_eq!(s.median, Duration::from_micros(50));
        assert_eq!(s.p99, Duration::from_micros(99));
        assert_eq!(s.min, Duration::from_micros(1));
        assert_eq!(s.max, Duration::from_micros(100));
        assert_eq!(s.mean, Duration::from_nanos(50_500));
        assert!(Stats::of(&mut []).is_none());
        assert!(finished(&Value::Bool(true)));
        assert!(!finished(&Value::Array(NdArray::from_vec(vec![
            true, false
        ]))));
        assert!(finished(&Value::Array(NdArray::from_vec(vec![true, true]))));
    }
}
