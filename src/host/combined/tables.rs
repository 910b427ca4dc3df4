//! The dispatch tables of a combined node, computed once at construction:
//! its members (children, then the optional root node), the timestep ratios
//! and periods, and per phase the priorities with their participants.

use crate::host::error::{HostError, HostResult};
use crate::host::phase::{Phase, RESERVED_PRIORITY};
use crate::host::pyops::{lcm_all, py_div, py_max, py_min, py_round};
use crate::host::space::Space;
use crate::host::traits::Node;

/// The reserved internal key of the root node in routing and aggregation.
pub(super) const ROOT_KEY: &str = "";

/// Tolerance of the timestep-multiple checks, as in UniEnv.
const RATIO_TOLERANCE: f64 = 1e-9;

/// One pre/post-step participant: member index, update ratio, and the
/// member's effective update timestep captured at construction.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepEntry {
    pub(super) member: usize,
    pub(super) ratio: i64,
    pub(super) dt: Option<f64>,
}

/// One phase's cached dispatch table.
#[derive(Debug, Clone, Default)]
pub(super) struct PhaseTable {
    /// The aggregated priorities, descending.
    pub(super) order: Vec<i64>,
    /// For each priority of `order` (same index), the participants in member order.
    pub(super) participants: Vec<Vec<StepEntry>>,
}

impl PhaseTable {
    pub(super) fn participants(&self, priority: i64) -> &[StepEntry] {
        self.order
            .iter()
            .position(|&p| p == priority)
            .map_or(&[], |i| self.participants[i].as_slice())
    }

    pub(super) fn first(&self) -> Option<i64> {
        self.order.first().copied()
    }

    pub(super) fn last(&self) -> Option<i64> {
        self.order.last().copied()
    }
}

pub(super) fn phase_index(phase: Phase) -> usize {
    match phase {
        Phase::Reset => 0,
        Phase::Reload => 1,
        Phase::AfterReset => 2,
        Phase::AfterReload => 3,
        Phase::PreStep => 4,
        Phase::PostStep => 5,
    }
}

/// The members of a combined node: the public children, then the optional
/// root node (member index `children.len()`).
pub(super) struct Members<W: ?Sized + 'static> {
    pub(super) children: Vec<Box<dyn Node<W>>>,
    pub(super) root: Option<Box<dyn Node<W>>>,
}

impl<W: ?Sized + 'static> Members<W> {
    pub(super) fn len(&self) -> usize {
        self.children.len() + usize::from(self.root.is_some())
    }

    pub(super) fn is_root(&self, i: usize) -> bool {
        i == self.children.len()
    }

    pub(super) fn get(&self, i: usize) -> &dyn Node<W> {
        match self.children.get(i) {
            Some(child) => child.as_ref(),
            None => self.root.as_deref().expect("member index in range"),
        }
    }

    pub(super) fn get_mut(&mut self, i: usize) -> &mut dyn Node<W> {
        match self.children.get_mut(i) {
            Some(child) => child.as_mut(),
            None => self.root.as_deref_mut().expect("member index in range"),
        }
    }

    /// The routing key: the child's name, or `""` for the root node.
    pub(super) fn key(&self, i: usize) -> &str {
        if self.is_root(i) {
            ROOT_KEY
        } else {
            self.children[i].name()
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &dyn Node<W>> {
        self.children
            .iter()
            .map(|c| c.as_ref())
            .chain(self.root.as_deref())
    }
}

/// A space channel.
#[derive(Debug, Clone, Copy)]
pub(super) enum Channel {
    Context,
    Observation,
    Action,
}

impl Channel {
    pub(super) fn space<W: ?Sized + 'static>(self, node: &dyn Node<W>) -> Option<Space> {
        match self {
            Channel::Context => node.context_space(),
            Channel::Observation => node.observation_space(),
            Channel::Action => node.action_space(),
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Channel::Context => "context",
            Channel::Observation => "observation",
            Channel::Action => "action",
        }
    }
}

/// The timestep bookkeeping of a combined node, frozen at construction.
#[derive(Debug, Clone)]
pub(super) struct Rates {
    /// The smallest effective update timestep of the members.
    pub(super) smallest_update_ts: Option<f64>,
    /// The smallest control timestep of the members.
    pub(super) smallest_control_ts: Option<f64>,
    /// Per member: its update timestep over the smallest one.
    pub(super) update_ratios: Vec<i64>,
    /// Per member: its control timestep over the smallest one.
    pub(super) action_ratios: Vec<i64>,
    /// The least common multiple of the update ratios.
    pub(super) update_period: i64,
    /// The least common multiple of the action ratios.
    pub(super) action_period: i64,
}

/// Validates the members' timesteps (each an integer multiple of the
/// smallest, tolerance 1e-9) and computes the smallest timesteps, the update
/// and action ratios and both periods.
pub(super) fn compute_rates<W: ?Sized + 'static>(members: &Members<W>) -> HostResult<Rates> {
    let n = members.len();
    let eff: Vec<Option<f64>> = members
        .iter()
        .map(|m| m.effective_update_timestep())
        .collect();
    let ctrl: Vec<Option<f64>> = members.iter().map(|m| m.control_timestep()).collect();
    let name = |i: usize| members.get(i).name().to_owned();

    let smallest_update_ts = py_min(eff.iter().flatten().copied());
    if let Some(smallest) = smallest_update_ts {
        for (i, es) in eff.iter().enumerate() {
            if let Some(es) = *es {
                if !is_integer_ratio(py_div(es, smallest)?)? {
                    return Err(HostError::invalid_argument(format!(
                        "Node {} update_timestep ({es}) not integer multiple of smallest ({smallest})",
                        name(i)
                    )));
                }
            }
        }
    }
    let smallest_control_ts = py_min(ctrl.iter().flatten().copied());
    if smallest_control_ts.is_some() {
        let largest = py_max(ctrl.iter().flatten().copied()).unwrap_or(f64::NAN);
        for (i, ct) in ctrl.iter().enumerate() {
            if let Some(ct) = *ct {
                if !is_integer_ratio(py_div(largest, ct)?)? {
                    return Err(HostError::invalid_argument(format!(
                        "Largest control ({largest}) not integer multiple of {}'s ({ct})",
                        name(i)
                    )));
                }
            }
        }
    }
    let ratio = |ts: Option<f64>, smallest: Option<f64>| -> HostResult<i64> {
        match (ts, smallest) {
            (Some(ts), Some(s)) if ts != 0.0 && s != 0.0 => py_round(ts / s),
            _ => Ok(1),
        }
    };
    let mut update_ratios = Vec::with_capacity(n);
    let mut action_ratios = Vec::with_capacity(n);
    for i in 0..n {
        update_ratios.push(ratio(eff[i], smallest_update_ts)?);
        action_ratios.push(ratio(ctrl[i], smallest_control_ts)?);
    }
    Ok(Rates {
        smallest_update_ts,
        smallest_control_ts,
        update_period: lcm_all(&update_ratios),
        action_period: lcm_all(&action_ratios),
        update_ratios,
        action_ratios,
    })
}

/// The six phases' dispatch tables (indexed by [`phase_index`]): each
/// phase's priorities are the union of the members' sets (plus
/// [`RESERVED_PRIORITY`] for the after-hooks), descending, each with its
/// participants in member order.
pub(super) fn phase_tables<W: ?Sized + 'static>(
    members: &Members<W>,
    update_ratios: &[i64],
) -> [PhaseTable; 6] {
    let member_sets: Vec<Vec<Vec<i64>>> = members
        .iter()
        .map(|m| Phase::ALL.iter().map(|&p| m.priorities(p)).collect())
        .collect();
    let eff: Vec<Option<f64>> = members
        .iter()
        .map(|m| m.effective_update_timestep())
        .collect();
    let mut phases: [PhaseTable; 6] = Default::default();
    for (pi, &phase) in Phase::ALL.iter().enumerate() {
        let mut order: Vec<i64> = member_sets
            .iter()
            .flat_map(|sets| sets[pi].iter().copied())
            .collect();
        if matches!(phase, Phase::AfterReset | Phase::AfterReload) {
            order.push(RESERVED_PRIORITY);
        }
        order.sort_unstable_by(|a, b| b.cmp(a));
        order.dedup();
        let participants = order
            .iter()
            .map(|p| {
                (0..member_sets.len())
                    .filter(|&m| member_sets[m][pi].contains(p))
                    .map(|m| StepEntry {
                        member: m,
                        ratio: update_ratios[m],
                        dt: eff[m],
                    })
                    .collect()
            })
            .collect();
        phases[phase_index(phase)] = PhaseTable {
            order,
            participants,
        };
    }
    phases
}

/// `abs(r - round(r)) < 1e-9`.
fn is_integer_ratio(r: f64) -> HostResult<bool> {
    Ok((r - py_round(r)? as f64).abs() < RATIO_TOLERANCE)
}
