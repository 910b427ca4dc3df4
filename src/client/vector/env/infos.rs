//! The infos of a vector step: one dict per env, except that a batched
//! resource's info, which arrives in Gymnasium's vector layout (key `k`
//! with one entry per sub-env, `_k` the bool mask of those that have it),
//! is kept whole as it arrived when none of its sub-envs was reset in the
//! step. Splitting it into one dict per sub-env costs what the rest of a
//! step's gather costs, and the learner usually wants the vector layout
//! again; [`StepInfos::to_vec`] and [`StepInfos::env`] split it for those
//! who want one dict per env.

use crate::codec::vector_info::split as split_info;
use crate::codec::Dict;

/// A batched resource's info as it arrived, for the envs
/// `start..start + width` of a step's results (positions in the step's
/// `env_id` order, not env indices).
#[derive(Debug, Clone, PartialEq)]
pub struct InfoBlock {
    /// The position of the resource's first sub-env among the step's
    /// results.
    pub start: usize,
    /// How many sub-envs the resource holds.
    pub width: usize,
    /// The info as the batched env returned it: key `k` holds one entry
    /// per sub-env, `_k` the bool mask of the sub-envs that have it.
    pub info: Dict,
}

impl InfoBlock {
    /// Whether position `slot` of the step's results is one of its envs.
    fn holds(&self, slot: usize) -> bool {
        (self.start..self.start + self.width).contains(&slot)
    }
}

/// The infos of a vector step's envs, in the order of its other fields.
/// (Not `PartialEq`: a block and the rows it splits into are the same
/// infos in two forms; compare [`to_vec`](Self::to_vec)s.)
#[derive(Debug, Clone, Default)]
pub struct StepInfos {
    /// One dict per env; empty for the envs of `blocks`.
    rows: Vec<Dict>,
    /// Batched resources' infos kept whole, by ascending `start`.
    blocks: Vec<InfoBlock>,
}

impl StepInfos {
    /// `n` envs' infos, all empty.
    pub(super) fn empty(n: usize) -> StepInfos {
        StepInfos {
            rows: vec![Dict::new(); n],
            blocks: Vec::new(),
        }
    }

    /// Sets the info of the env at position `slot`.
    pub(super) fn set(&mut self, slot: usize, info: Dict) {
        self.rows[slot] = info;
    }

    /// Keeps a batched resource's info whole for the positions
    /// `start..start + width` (called in ascending `start`).
    pub(super) fn keep(&mut self, start: usize, width: usize, info: Dict) {
        self.blocks.push(InfoBlock { start, width, info });
    }

    /// How many envs.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no envs.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The per-env infos, empty at the positions of [`blocks`](Self::blocks).
    pub fn rows(&self) -> &[Dict] {
        &self.rows
    }

    /// The batched resources' infos kept whole, by ascending position.
    pub fn blocks(&self) -> &[InfoBlock] {
        &self.blocks
    }

    /// The info of the env at position `slot` (split out of its resource's
    /// info when it is in a block: that splits the whole block, so for
    /// every env use [`to_vec`](Self::to_vec)), `None` past the end.
    pub fn env(&self, slot: usize) -> Option<Dict> {
        match self.blocks.iter().find(|b| b.holds(slot)) {
            Some(b) => split_info(&b.info, b.width).into_iter().nth(slot - b.start),
            None => self.rows.get(slot).cloned(),
        }
    }

    /// One dict per env: each block split by its masks (a key without a
    /// mask of `width` booleans, or that cannot be split into `width`
    /// entries, is given whole to every sub-env; dicts nest).
    pub fn to_vec(&self) -> Vec<Dict> {
        let mut out = self.rows.clone();
        for b in &self.blocks {
            for (slot, info) in (b.start..).zip(split_info(&b.info, b.width)) {
                if let Some(row) = out.get_mut(slot) {
                    *row = info;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{NdArray, Value};

    #[test]
    fn blocks_split_where_asked() {
        let mut infos = StepInfos::empty(4);
        infos.set(0, Dict::new().with("a", 1.0));
        infos.keep(
            1,
            3,
            Dict::new()
                .with("a", NdArray::from_vec(vec![2.0f64, 3.0, 4.0]))
                .with("_a", NdArray::from_vec(vec![true, false, true])),
        );
        assert_eq!(infos.len(), 4);
        assert!(infos.rows()[1..].iter().all(Dict::is_empty));
        let all = infos.to_vec();
        assert_eq!(all[0].get("a"), Some(&Value::Float(1.0)));
        assert_eq!(all[1].get("a"), Some(&Value::Float(2.0)));
        assert!(all[2].is_empty());
        assert_eq!(all[3].get("a"), Some(&Value::Float(4.0)));
        for (slot, want) in all.iter().enumerate() {
            assert_eq!(infos.env(slot).as_ref(), Some(want));
        }
        assert_eq!(infos.env(4), None);
    }
}
