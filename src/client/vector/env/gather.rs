//! Gathering the outcomes of resources into a [`VectorStep`]: one result
//! per sub-env, the observations stacked.
//!
//! A batched resource's observation array is not split into rows to be
//! stacked again: when every observation of the step is a native array of
//! one dtype and row shape (a batched resource's rows, as it sent them,
//! or a single env's array), the stacked output is their bytes one after
//! the other, in one copy: what [`stack_filled`] gives for the rows.
//! Anything else (failed envs, other dtypes or shapes, dicts, tuples,
//! scalars) goes through [`stack_filled`] over the rows.

use super::arrivals::Outcome;
use super::infos::StepInfos;
use super::latest::{row, Latest};
use super::{VectorEnv, VectorError, VectorStep};
use crate::client::ClientError;
use crate::codec::stack::stack_filled;
use crate::codec::{NdArray, Value};
use crate::protocol::ErrorCode;
use bytes::Bytes;
use std::sync::Arc;

/// Whether a resource's failed request was refused with nothing changed:
/// a certain `invalid_request` (the server checks a request, an action
/// among its arguments, before the env runs, and says so).
pub(super) fn is_refusal(error: &ClientError) -> bool {
    error
        .remote()
        .is_some_and(|e| e.code == ErrorCode::InvalidRequest && !e.uncertain)
}

/// The observations of one gathered resource.
enum Block {
    /// A batched resource's array, as it arrived.
    Stacked(Arc<NdArray>),
    /// One observation per sub-env (`None`: failed, zeros in the output).
    Rows(Vec<Option<Value>>),
}

/// The blocks' observations stacked: [`stack_filled`] over their rows.
fn stack_blocks(blocks: Vec<Block>) -> Value {
    if let Some(v) = concatenate(&blocks) {
        return v;
    }
    let mut rows: Vec<Option<Value>> = Vec::new();
    for b in blocks {
        match b {
            Block::Stacked(a) => {
                let n = a.shape().first().copied().unwrap_or(0);
                rows.extend((0..n).map(|i| Some(row(&a, i))));
            }
            Block::Rows(r) => rows.extend(r),
        }
    }
    stack_filled(&rows)
}

/// The fast path of [`stack_blocks`]: every row a native array of the
/// first row's dtype and shape, present; `None` otherwise.
fn concatenate(blocks: &[Block]) -> Option<Value> {
    // (dtype, row shape, bytes) of each part.
    let mut parts: Vec<(crate::codec::DType, &[usize], &[u8], usize)> = Vec::new();
    for b in blocks {
        match b {
            Block::Stacked(a) => {
                let (&n, shape) = a.shape().split_first()?;
                parts.push((a.dtype(), shape, a.as_bytes(), n));
            }
            Block::Rows(rows) => {
                for r in rows {
                    let a = r.as_ref()?.as_array()?;
                    parts.push((a.dtype(), a.shape(), a.as_bytes(), 1));
                }
            }
        }
    }
    let &(dtype, shape, _, _) = parts.first()?;
    if !dtype.is_native() {
        return None;
    }
    let mut total = 0;
    let mut len = 0;
    for &(d, s, bytes, n) in &parts {
        if d != dtype || s != shape {
            return None;
        }
        total += n;
        len += bytes.len();
    }
    let mut data = Vec::with_capacity(len);
    for &(_, _, bytes, _) in &parts {
        data.extend_from_slice(bytes);
    }
    let mut out_shape = Vec::with_capacity(shape.len() + 1);
    out_shape.push(total);
    out_shape.extend_from_slice(shape);
    NdArray::from_bytes(dtype, out_shape, Bytes::from(data))
        .ok()
        .map(Value::Array)
}

impl VectorEnv {
    /// The results of `outcomes` (resources in the order given), the
    /// state updated.
    pub(super) fn gather(&mut self, outcomes: Vec<(usize, Outcome)>) -> VectorStep {
        let ids: Vec<usize> = outcomes
            .iter()
            .flat_map(|(k, _)| self.resources[*k].range())
            .collect();
        let m = ids.len();
        let mut out = VectorStep {
            observation: Value::Null,
            reward: vec![0.0; m],
            terminated: vec![false; m],
            truncated: vec![false; m],
            infos: StepInfos::empty(m),
            autoreset: vec![false; m],
            final_observation: vec![None; m],
            final_info: vec![None; m],
            errors: vec![None; m],
            env_id: ids,
        };
        let mut blocks: Vec<Block> = Vec::with_capacity(outcomes.len());
        let mut slot = 0;
        for (k, outcome) in outcomes {
            self.busy[k] = false;
            let range = self.resources[k].range();
            match outcome {
                Outcome::Stepped(stepped) => {
                    if let Some(info) = stepped.info {
                        out.infos.keep(slot, range.len(), info);
                    }
                    let stacked = stepped.stacked.map(Arc::new);
                    let mut rows = Vec::new();
                    for (j, (i, s)) in range.zip(stepped.steps).enumerate() {
                        self.needs_autoreset[i] = s.terminated || s.truncated;
                        match &stacked {
                            Some(a) => self.last[i] = Some(Latest::Row(a.clone(), j)),
                            None => {
                                self.last[i] = Some(Latest::Value(s.observation.clone()));
                                rows.push(Some(s.observation));
                            }
                        }
                        out.reward[slot] = s.reward;
                        out.terminated[slot] = s.terminated;
                        out.truncated[slot] = s.truncated;
                        out.infos.set(slot, s.info);
                        out.autoreset[slot] = s.autoreset;
                        if let Some((obs, info)) = s.final_ {
                            out.final_observation[slot] = Some(obs);
                            out.final_info[slot] = Some(info);
                        }
                        slot += 1;
                    }
                    blocks.push(match stacked {
                        Some(a) => Block::Stacked(a),
                        None => Block::Rows(rows),
                    });
                }
                Outcome::Failed(error) => {
                    // A certain refusal (the action refused before the env
                    // ran: NaN, out of bounds, wrong shape) changed nothing:
                    // the sub-envs stay usable, as they were before the call.
                    let refused = is_refusal(&error);
                    for i in range.clone() {
                        if !refused {
                            self.needs_autoreset[i] = false;
                            self.failed[i] = Some(error.clone());
                        }
                        out.errors[slot] = Some(self.env_error(i, error.clone()));
                        slot += 1;
                    }
                    blocks.push(Block::Rows(vec![None; range.len()]));
                }
                Outcome::NotSent => {
                    let earlier = range.clone().find_map(|i| self.failed[i].clone());
                    for i in range.clone() {
                        let error = self.failed[i].clone().or_else(|| earlier.clone());
                        if let Some(error) = error {
                            out.errors[slot] = Some(VectorError::NeedsReset {
                                index: i,
                                resource_id: self.resources[k].proxy.id().to_string(),
                                error,
                            });
                        }
                        slot += 1;
                    }
                    blocks.push(Block::Rows(vec![None; range.len()]));
                }
            }
        }
        out.observation = stack_blocks(blocks);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::stack::unstack;
    use crate::codec::DType;
    use crate::codec::Dict;

    /// An array of `dtype` and `shape` whose bytes count from `seed`.
    fn array(dtype: DType, shape: &[usize], seed: u8) -> NdArray {
        let n: usize = shape.iter().product::<usize>() * dtype.itemsize();
        let bytes: Vec<u8> = (0..n)
            .map(|i| {
                let b = seed.wrapping_add((i * 37) as u8);
                // Booleans stay 0 or 1.
                if dtype == DType::BOOL {
                    b & 1
                } else {
                    b
                }
            })
            .collect();
        NdArray::from_bytes(dtype, shape.to_vec(), Bytes::from(bytes)).expect("an array")
    }

    /// The plain path: every block split into rows, then `stack_filled`.
    fn plain(blocks: &[Block]) -> Value {
        let mut rows = Vec::new();
        for b in blocks {
            match b {
                Block::Stacked(a) => {
                    let n = a.shape()[0];
                    let split = unstack(&Value::Array((**a).clone()), n).expect("rows");
                    rows.extend(split.into_iter().map(Some));
                }
                Block::Rows(r) => rows.extend(r.iter().cloned()),
            }
        }
        stack_filled(&rows)
    }

    fn check(blocks: Vec<Block>, what: &str) {
        let want = plain(&blocks);
        let got = stack_blocks(blocks);
        // Bit for bit: the dtype, the shape and the bytes.
        match (&got, &want) {
            (Value::Array(g), Value::Array(w)) => {
                assert_eq!(g.dtype(), w.dtype(), "{what}");
                assert_eq!(g.shape(), w.shape(), "{what}");
                assert_eq!(g.as_bytes(), w.as_bytes(), "{what}");
            }
            _ => assert_eq!(got, want, "{what}"),
        }
    }

    #[test]
    fn stacking_blocks_equals_stacking_their_rows() {
        let dtypes: Vec<DType> = [
            "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
            "<c8", "<c16", ">i4", ">f4", ">f8", ">c16",
        ]
        .iter()
        .map(|s| DType::parse(s).expect("a dtype"))
        .collect();
        for &d in &dtypes {
            for row in [vec![], vec![3], vec![2, 2]] {
                let batch = |n: usize, seed: u8| {
                    let mut shape = vec![n];
                    shape.extend(&row);
                    Block::Stacked(Arc::new(array(d, &shape, seed)))
                };
                let single = |seed: u8| Block::Rows(vec![Some(Value::Array(array(d, &row, seed)))]);
                let what = format!("{d:?} {row:?}");
                // Batched resources, mixed with single ones, in any order.
                check(vec![batch(4, 1), batch(4, 9)], &what);
                check(vec![single(3), batch(2, 5), single(7), batch(3, 2)], &what);
                check(vec![single(3), single(4)], &what);
                check(vec![batch(1, 6)], &what);
                // A failed resource (zeros), another dtype, another shape,
                // a scalar: the plain path's answer.
                check(vec![batch(2, 1), Block::Rows(vec![None, None])], &what);
                check(vec![Block::Rows(vec![None]), batch(2, 1)], &what);
                let other = if d == DType::F64 {
                    DType::F32
                } else {
                    DType::F64
                };
                check(
                    vec![
                        batch(2, 1),
                        Block::Rows(vec![Some(Value::Array(array(other, &row, 2)))]),
                    ],
                    &what,
                );
                check(
                    vec![
                        batch(2, 1),
                        Block::Rows(vec![Some(Value::Array(array(d, &[5], 2)))]),
                    ],
                    &what,
                );
                check(
                    vec![batch(2, 1), Block::Rows(vec![Some(Value::Float(1.5))])],
                    &what,
                );
            }
        }
        // Dicts and tuples (no fast path), and nothing at all.
        let dict = |x: f64| Some(Value::Dict(Dict::new().with("x", x)));
        check(vec![Block::Rows(vec![dict(1.0), dict(2.0)])], "dicts");
        check(vec![Block::Rows(vec![None, dict(2.0)])], "dicts");
        check(vec![], "nothing");
        check(vec![Block::Rows(vec![None, None])], "all failed");
    }

    #[test]
    fn a_latest_row_is_the_row_unstack_gives() {
        for shape in [vec![4], vec![4, 3], vec![4, 2, 2]] {
            for d in [
                DType::F32,
                DType::parse(">f8").expect("a dtype"),
                DType::BOOL,
            ] {
                let a = array(d, &shape, 3);
                let rows = unstack(&Value::Array(a.clone()), 4).expect("rows");
                let shared = Arc::new(a);
                for (i, r) in rows.iter().enumerate() {
                    assert_eq!(&Latest::Row(shared.clone(), i).value(), r);
                }
            }
        }
    }
}
