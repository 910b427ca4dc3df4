//! One resource of a vector env: an unbatched env (one sub-environment) or
//! a batched env (`batch_size` B: B consecutive sub-environments), and the
//! requests that step and reset it.
//!
//! A batched resource gets one request per step whatever its sub-envs
//! need: the step of all B, and, when some of them must be reset (their
//! episode ended, in `NextStep` or `SameStep` mode), one `reset` with a
//! mask of those. In `NextStep` mode the finished sub-envs are known before
//! the step, and the reset goes out right behind the step request
//! (pipelined on the connection; the server runs a resource's calls in
//! order), so the step costs one round trip; in `SameStep` mode the reset
//! follows the step's reply, which says who ended. In `NextStep` mode the
//! finished sub-envs are stepped once more (their action is
//! ignored, their result discarded) before they are reset: a batched env
//! steps all of its sub-envs or none. Their reported result is the reset's,
//! as Gymnasium's `NEXT_STEP` reports it.

use super::super::mode::AutoresetMode;
use crate::client::{ClientError, EnvProxy, ProtocolViolation};
use crate::codec::stack::unstack;
use crate::codec::vector_info::split as split_info;
use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};
use crate::host::space::{BinarySpace, BoxSpace, DictSpace, DynamicBoxSpace};
use crate::host::{ResetArgs, ResetResult, Space, StepResult};

/// A resource: its proxy, how many sub-envs it holds, and the index of
/// its first one.
#[derive(Clone)]
pub(super) struct Resource {
    pub(super) proxy: EnvProxy,
    /// `None`: an unbatched env (one sub-env); `Some(b)`: a batched env.
    pub(super) batch: Option<usize>,
    /// The index of its first sub-env in the vector env.
    pub(super) offset: usize,
}

impl Resource {
    /// How many sub-envs it holds.
    pub(super) fn width(&self) -> usize {
        self.batch.unwrap_or(1)
    }

    /// Its sub-envs' indices.
    pub(super) fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.width()
    }
}

/// One sub-env's outcome of a step call.
#[derive(Debug, Clone)]
pub(super) struct EnvStep {
    pub(super) observation: Value,
    pub(super) reward: f64,
    pub(super) terminated: bool,
    pub(super) truncated: bool,
    pub(super) info: Dict,
    pub(super) autoreset: bool,
    pub(super) final_: Option<(Value, Dict)>,
}

/// A resource's step outcome: one result per sub-env. A batched resource
/// whose observation arrived as one array (leading dimension its
/// `batch_size`) and none of whose sub-envs was reset in the step keeps it
/// as it arrived, in `stacked`: the rows' `observation` is then `Null`, and
/// row `i` is the array's row `i` (what [`unstack`] gives), split out only
/// when a row is needed on its own (the vector env's output copies the
/// whole array at once).
/// Its info likewise: when none of its sub-envs was reset in the step,
/// `info` is the batched env's info as it arrived (the rows' `info` is then
/// empty), split only by those who want one dict per sub-env.
#[derive(Debug, Clone)]
pub(super) struct Stepped {
    pub(super) steps: Vec<EnvStep>,
    pub(super) stacked: Option<NdArray>,
    pub(super) info: Option<Dict>,
}

impl Stepped {
    /// A single env's outcome.
    pub(super) fn single(e: EnvStep) -> Stepped {
        Stepped {
            steps: vec![e],
            stacked: None,
            info: None,
        }
    }
}

/// One sub-env's outcome of a reset.
#[derive(Debug, Clone)]
pub(super) struct EnvReset {
    pub(super) context: Value,
    pub(super) observation: Value,
    pub(super) info: Dict,
}

fn malformed(what: &str, detail: impl std::fmt::Display) -> ClientError {
    ClientError::malformed(format!("a batched env's {what}: {detail}"))
}

fn flag(v: &Value, flag: &'static str) -> Result<bool, ClientError> {
    v.truthy().ok_or_else(|| {
        ClientError::Protocol(ProtocolViolation::FlagNotABool {
            flag,
            value: v.to_string(),
        })
    })
}

/// The `b` entries of a batched reward or signal: an array (or list) of
/// `b` numbers or booleans.
fn entries(v: &Value, b: usize, what: &str) -> Result<Vec<f64>, ClientError> {
    match v {
        Value::Array(a) if a.len() == b && a.ndim() == 1 => {
            // The dtypes batched envs send, read straight from their bytes
            // (what `get_f64` gives for them); the others element by element.
            let d = a.dtype();
            if d == DType::F64 {
                return Ok(a
                    .as_bytes()
                    .chunks_exact(8)
                    .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect());
            }
            if d.kind() == ScalarKind::Bool {
                return Ok(a
                    .as_bytes()
                    .iter()
                    .map(|&x| (x != 0) as u8 as f64)
                    .collect());
            }
            Ok((0..b).map(|i| a.get_f64(i).unwrap_or(f64::NAN)).collect())
        }
        Value::List(items) | Value::Tuple(items) if items.len() == b => items
            .iter()
            .map(|x| {
                x.as_scalar_f64()
                    .or_else(|| x.as_bool().map(|t| t as u8 as f64))
                    .ok_or_else(|| malformed(what, format!("{} is not a number", x.type_name())))
            })
            .collect(),
        other => Err(malformed(
            what,
            format!("expected {b} entries, got {}", other.type_name()),
        )),
    }
}

/// The reset arguments of a batched resource for its masked sub-envs:
/// the mask (`None` when all), and one seed derived as Gymnasium derives
/// per-env seeds (`seed + i` for sub-env `i`) when the masked sub-envs'
/// seeds follow that rule, or else the list of the B seeds (`None` for the
/// unmasked) as the `seed` keyword. The other keywords are the first masked
/// sub-env's.
pub(super) fn batched_reset_args(args: &[ResetArgs], mask: &[bool]) -> ResetArgs {
    let on: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
    let first = on.first().map_or(0, |&i| i);
    let mut out = ResetArgs {
        kwargs: args
            .get(first)
            .map(|a| a.kwargs.clone())
            .unwrap_or_default(),
        mask: (on.len() != mask.len()).then(|| NdArray::from_vec(mask.to_vec())),
        seed: None,
    };
    let seeds: Vec<Option<i64>> = on.iter().map(|&i| args[i].seed).collect();
    if seeds.iter().all(Option::is_none) {
        return out;
    }
    let base = |i: usize, s: i64| s.wrapping_sub(i as i64);
    let bases: Vec<Option<i64>> = on
        .iter()
        .zip(&seeds)
        .map(|(&i, s)| s.map(|s| base(i, s)))
        .collect();
    match bases.first() {
        Some(Some(b0)) if bases.iter().all(|b| *b == Some(*b0)) => out.seed = Some(*b0),
        _ => {
            let list: Vec<Value> = (0..mask.len())
                .map(|i| match (mask[i], args[i].seed) {
                    (true, Some(s)) => Value::Int(s),
                    _ => Value::Null,
                })
                .collect();
            out.kwargs.insert("seed", Value::List(list));
        }
    }
    out
}

/// Resets sub-envs `mask` of a resource with their arguments; returns one
/// outcome per masked sub-env, in order.
pub(super) async fn reset_resource(
    r: &Resource,
    args: Vec<ResetArgs>,
    mask: &[bool],
) -> Result<Vec<EnvReset>, ClientError> {
    let Some(b) = r.batch else {
        let a = args.into_iter().next().unwrap_or_default();
        let res = r.proxy.reset(a).await?;
        return Ok(vec![EnvReset {
            context: res.context,
            observation: res.observation,
            info: res.info,
        }]);
    };
    let res = r.proxy.reset(batched_reset_args(&args, mask)).await?;
    reset_rows(res, b, mask)
}

/// A batched resource's masked reset result as one outcome per masked
/// sub-env, in order.
fn reset_rows(res: ResetResult, b: usize, mask: &[bool]) -> Result<Vec<EnvReset>, ClientError> {
    let k = mask.iter().filter(|&&m| m).count();
    let observations = unstack(&res.observation, k).map_err(|e| malformed("reset", e))?;
    let contexts = if res.context.is_null() {
        vec![Value::Null; k]
    } else {
        unstack(&res.context, k).map_err(|e| malformed("reset context", e))?
    };
    let mut infos = split_info(&res.info, b);
    let mut out = Vec::with_capacity(k);
    for ((i, o), c) in (0..b).filter(|&i| mask[i]).zip(observations).zip(contexts) {
        let info = std::mem::take(&mut infos[i]);
        out.push(EnvReset {
            context: c,
            observation: o,
            info,
        });
    }
    Ok(out)
}

/// Steps a resource with its action (a batched resource's stacked along
/// the first axis): `ended[k]` marks its sub-envs to reset instead
/// (`NextStep` mode). Returns one outcome per sub-env.
pub(super) async fn step_resource(
    r: Resource,
    action: Value,
    ended: Vec<bool>,
    mode: AutoresetMode,
) -> Result<Stepped, ClientError> {
    let Some(b) = r.batch else {
        let reset_instead = ended.first().copied().unwrap_or(false);
        return Ok(Stepped::single(
            step_single(&r.proxy, action, reset_instead, mode).await?,
        ));
    };
    let step = r.proxy.step(action);
    // NextStep: the reset of the sub-envs whose episode ended goes out
    // right behind the step (pipelined on the connection: the server runs
    // them in order), not after its reply.
    let (s, early_reset) = if mode == AutoresetMode::NextStep && ended.iter().any(|&e| e) {
        let reset = r
            .proxy
            .reset(batched_reset_args(&vec![ResetArgs::default(); b], &ended));
        let (s, res) = tokio::join!(step, reset);
        // The reset's failure first: a refused step (certain) with a reset
        // that failed is not a refusal that left everything as it was.
        let res = res?;
        (s?, Some(res))
    } else {
        (step.await?, None)
    };
    let (observations, mut stacked) = match s.observation {
        Value::Array(a) if a.shape().first() == Some(&b) => (vec![Value::Null; b], Some(a)),
        other => (
            unstack(&other, b).map_err(|e| malformed("observation", e))?,
            None,
        ),
    };
    let rewards = entries(&s.reward, b, "reward")?;
    let terminated = entries(&s.terminated, b, "terminated")?;
    let truncated = entries(&s.truncated, b, "truncated")?;
    let reset_mask: Vec<bool> = match mode {
        AutoresetMode::NextStep => ended,
        AutoresetMode::SameStep => (0..b)
            .map(|i| terminated[i] != 0.0 || truncated[i] != 0.0)
            .collect(),
        AutoresetMode::Disabled => vec![false; b],
    };
    let reset_any = reset_mask.iter().any(|&m| m);
    // Rows whose info is replaced (or kept as a final info) need their
    // own; otherwise the info stays whole.
    let (mut split, info) = if reset_any {
        (split_info(&s.info, b), None)
    } else {
        (Vec::new(), Some(s.info))
    };
    let mut out: Vec<EnvStep> = observations
        .into_iter()
        .enumerate()
        .map(|(i, observation)| EnvStep {
            observation,
            reward: rewards[i],
            terminated: terminated[i] != 0.0,
            truncated: truncated[i] != 0.0,
            info: split.get_mut(i).map(std::mem::take).unwrap_or_default(),
            autoreset: false,
            final_: None,
        })
        .collect();
    if !reset_any {
        return Ok(Stepped {
            steps: out,
            stacked,
            info,
        });
    }
    // Rows are replaced: split the stacked observation into them.
    if let Some(a) = stacked.take() {
        let rows = unstack(&Value::Array(a), b).map_err(|e| malformed("observation", e))?;
        for (e, row) in out.iter_mut().zip(rows) {
            e.observation = row;
        }
    }
    let resets = match early_reset {
        Some(res) => reset_rows(res, b, &reset_mask)?,
        None => reset_resource(&r, vec![ResetArgs::default(); b], &reset_mask).await?,
    };
    for (i, res) in (0..b).filter(|&i| reset_mask[i]).zip(resets) {
        let e = &mut out[i];
        if mode == AutoresetMode::NextStep {
            *e = EnvStep {
                observation: res.observation,
                reward: 0.0,
                terminated: false,
                truncated: false,
                info: res.info,
                autoreset: true,
                final_: None,
            };
        } else {
            let observation = std::mem::replace(&mut e.observation, res.observation);
            let info = std::mem::replace(&mut e.info, res.info);
            e.final_ = Some((observation, info));
        }
    }
    Ok(Stepped {
        steps: out,
        stacked: None,
        info: None,
    })
}

async fn step_single(
    env: &EnvProxy,
    action: Value,
    reset_instead: bool,
    mode: AutoresetMode,
) -> Result<EnvStep, ClientError> {
    if reset_instead {
        let r = env.reset(ResetArgs::default()).await?;
        return Ok(EnvStep {
            observation: r.observation,
            reward: 0.0,
            terminated: false,
            truncated: false,
            info: r.info,
            autoreset: true,
            final_: None,
        });
    }
    match single_step(env.step(action).await?, mode)? {
        SingleStep::Done(e) => Ok(e),
        SingleStep::Ended(e) => reset_after(env, e).await,
    }
}

/// A single env's step result, as the vector env reports it.
pub(super) enum SingleStep {
    /// Its outcome.
    Done(EnvStep),
    /// `SameStep` mode, the episode ended: the env is to be reset, and
    /// its outcome is then the reset's with this step's as final
    /// ([`reset_after`]).
    Ended(EnvStep),
}

/// A single env's step result as its outcome in `mode`.
pub(super) fn single_step(s: StepResult, mode: AutoresetMode) -> Result<SingleStep, ClientError> {
    let reward = s.reward.as_scalar_f64().ok_or_else(|| {
        ClientError::Protocol(ProtocolViolation::RewardNotANumber {
            found: s.reward.type_name(),
        })
    })?;
    let terminated = flag(&s.terminated, "terminated")?;
    let truncated = flag(&s.truncated, "truncated")?;
    let e = EnvStep {
        observation: s.observation,
        reward,
        terminated,
        truncated,
        info: s.info,
        autoreset: false,
        final_: None,
    };
    Ok(
        if mode == AutoresetMode::SameStep && (terminated || truncated) {
            SingleStep::Ended(e)
        } else {
            SingleStep::Done(e)
        },
    )
}

/// `SameStep` mode: resets a single env whose episode ended in step `e`;
/// the outcome is the reset's observation and info, `e`'s as final.
pub(super) async fn reset_after(env: &EnvProxy, e: EnvStep) -> Result<EnvStep, ClientError> {
    let r = env.reset(ResetArgs::default()).await?;
    Ok(EnvStep {
        observation: r.observation,
        info: r.info,
        final_: Some((e.observation, e.info)),
        ..e
    })
}

/// The space of one element of a batched space, as unienv's
/// `unbatch_spaces` builds it (its first element): the leading axis dropped,
/// box bounds taken from their first row. `None` for a space that is not
/// batched.
pub(crate) fn unbatched(space: &Space) -> Option<Space> {
    fn row(a: &NdArray) -> Option<NdArray> {
        let (&n, rest) = a.shape().split_first()?;
        let size = a.as_bytes().len() / n.max(1);
        NdArray::from_bytes(a.dtype(), rest.to_vec(), a.bytes().slice(0..size)).ok()
    }
    fn tail(shape: &[usize]) -> Option<Vec<usize>> {
        shape.split_first().map(|(_, rest)| rest.to_vec())
    }
    Some(match space {
        Space::Box(b) => Space::Box(BoxSpace {
            shape: tail(&b.shape)?,
            low: row(&b.low)?,
            high: row(&b.high)?,
            dtype: b.dtype,
        }),
        Space::Binary(b) => Space::Binary(BinarySpace {
            shape: tail(&b.shape)?,
            dtype: b.dtype,
        }),
        Space::DynamicBox(b) => Space::DynamicBox(DynamicBoxSpace {
            low: row(&b.low)?,
            high: row(&b.high)?,
            shape_low: tail(&b.shape_low)?,
            shape_high: tail(&b.shape_high)?,
            dtype: b.dtype,
            fill_value: b.fill_value.clone(),
        }),
        Space::Dict(d) => Space::Dict(DictSpace::new(
            d.entries()
                .iter()
                .map(|(k, s)| unbatched(s).map(|s| (k.clone(), s)))
                .collect::<Option<Vec<_>>>()?,
        )),
        Space::Tuple(t) => Space::Tuple(t.iter().map(unbatched).collect::<Option<Vec<_>>>()?),
        Space::Graph(g) => {
            let mut g = (**g).clone();
            g.batch_shape = tail(&g.batch_shape)?;
            Space::Graph(Box::new(g))
        }
        Space::Batched(b) => match b.batch_shape.as_slice() {
            [] => return None,
            [_] => b.single_space.clone(),
            [_, rest @ ..] => Space::batched(b.single_space.clone(), rest.to_vec()),
        },
        Space::Text(_) | Space::Union(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_as_get_f64_reads_them() {
        let arrays = [
            NdArray::from_vec(vec![1.5f64, -0.0, f64::MAX, f64::MIN_POSITIVE]),
            NdArray::from_vec(vec![true, false, true, true]),
            NdArray::from_bytes(
                DType::BOOL,
                vec![4],
                bytes::Bytes::from(vec![0u8, 2, 255, 1]),
            )
            .expect("an array"),
            NdArray::from_vec(vec![0.25f32, 3.0, -1.0, 7.5]),
            NdArray::from_vec(vec![3i64, -4, 5, 0]),
            NdArray::from_bytes(
                DType::parse(">f8").expect("a dtype"),
                vec![4],
                bytes::Bytes::from((0..32).map(|i| i as u8 * 7).collect::<Vec<u8>>()),
            )
            .expect("an array"),
        ];
        for a in arrays {
            let want: Vec<u64> = (0..4)
                .map(|i| a.get_f64(i).unwrap_or(f64::NAN).to_bits())
                .collect();
            let got: Vec<u64> = entries(&Value::Array(a.clone()), 4, "reward")
                .expect("entries")
                .into_iter()
                .map(f64::to_bits)
                .collect();
            assert_eq!(got, want, "{:?}", a.dtype());
        }
    }

    #[test]
    fn infos_split_by_their_masks() {
        let info = Dict::new()
            .with("x", NdArray::from_vec(vec![1.5f64, 2.5, 0.0]))
            .with("_x", NdArray::from_vec(vec![true, true, false]))
            .with("f", NdArray::from_vec(vec![1.0f32, 2.0, 3.0]))
            .with("_f", NdArray::from_vec(vec![false, false, true]))
            .with(
                "d",
                Dict::new()
                    .with("n", NdArray::from_vec(vec![7i64, 8, 9]))
                    .with("_n", NdArray::from_vec(vec![true, false, true])),
            )
            .with("_d", NdArray::from_vec(vec![true, false, true]))
            .with("plain", "everyone");
        let split = split_info(&info, 3);
        assert_eq!(split[0].get("x"), Some(&Value::Float(1.5)));
        assert_eq!(split[2].get("x"), None);
        // A float32 entry stays a 0-d float32 array, as a single env sent it.
        assert_eq!(
            split[2]
                .get("f")
                .and_then(Value::as_array)
                .map(|a| (a.ndim(), a.dtype())),
            Some((0, DType::F32))
        );
        assert_eq!(
            split[2].get("d").and_then(|d| d.get("n")),
            Some(&Value::Int(9))
        );
        assert_eq!(split[1].get("d"), None);
        assert_eq!(split[1].get("plain"), Some(&Value::from("everyone")));
        assert!(split.iter().all(|d| !d.contains_key("_x")));
    }

    #[test]
    fn seeds_derive_like_gymnasium_or_travel_as_a_list() {
        let args: Vec<ResetArgs> = [Some(10), None, Some(12), Some(3)]
            .into_iter()
            .map(|seed| ResetArgs {
                seed,
                ..ResetArgs::default()
            })
            .collect();
        let a = batched_reset_args(&args, &[true, false, true, false]);
        assert_eq!(a.seed, Some(10));
        assert_eq!(
            a.mask.map(|m| m.to_f64_vec()),
            Some(vec![1.0, 0.0, 1.0, 0.0])
        );
        let all = batched_reset_args(&args[..1], &[true]);
        assert_eq!((all.seed, all.mask.is_none()), (Some(10), true));
        let odd = batched_reset_args(&args, &[true, false, true, true]);
        assert_eq!(odd.seed, None);
        assert_eq!(
            odd.kwargs.get("seed"),
            Some(&Value::List(vec![
                Value::Int(10),
                Value::Null,
                Value::Int(12),
                Value::Int(3)
            ]))
        );
    }
}
