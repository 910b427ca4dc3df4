//! The node lifecycle phases with priority sets, and the snapshot fields a
//! node exposes: the vocabulary shared by the node traits and the
//! type-erased [`Tree`](super::Tree).

/// The priority UniEnv's combined node reserves for its own after-hooks
/// (−1 000 000); it appears in every combined node's after_reset and
/// after_reload priority sets.
pub const RESERVED_PRIORITY: i64 = -1_000_000;

/// The six node lifecycle phases that have priority sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// `reset_priorities`
    Reset,
    /// `reload_priorities`
    Reload,
    /// `after_reset_priorities`
    AfterReset,
    /// `after_reload_priorities`
    AfterReload,
    /// `pre_environment_step_priorities`
    PreStep,
    /// `post_environment_step_priorities`
    PostStep,
}

impl Phase {
    /// All phases, in descriptor order.
    pub const ALL: [Phase; 6] = [
        Phase::Reset,
        Phase::Reload,
        Phase::AfterReset,
        Phase::AfterReload,
        Phase::PreStep,
        Phase::PostStep,
    ];

    /// The descriptor key, e.g. `reset_priorities`.
    pub fn descriptor_key(self) -> &'static str {
        match self {
            Phase::Reset => "reset_priorities",
            Phase::Reload => "reload_priorities",
            Phase::AfterReset => "after_reset_priorities",
            Phase::AfterReload => "after_reload_priorities",
            Phase::PreStep => "pre_environment_step_priorities",
            Phase::PostStep => "post_environment_step_priorities",
        }
    }
}

/// A snapshot field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// `context`
    Context,
    /// `observation`
    Observation,
    /// `reward`
    Reward,
    /// `terminated`
    Terminated,
    /// `truncated`
    Truncated,
    /// `info`
    Info,
    /// `render`
    Render,
    /// `dt` (worlds only)
    Dt,
}

impl Field {
    /// The env and node fields, in no particular order.
    pub const NODE_FIELDS: [Field; 7] = [
        Field::Context,
        Field::Observation,
        Field::Reward,
        Field::Terminated,
        Field::Truncated,
        Field::Info,
        Field::Render,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Field::Context => "context",
            Field::Observation => "observation",
            Field::Reward => "reward",
            Field::Terminated => "terminated",
            Field::Truncated => "truncated",
            Field::Info => "info",
            Field::Render => "render",
            Field::Dt => "dt",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Field> {
        Some(match name {
            "context" => Field::Context,
            "observation" => Field::Observation,
            "reward" => Field::Reward,
            "terminated" => Field::Terminated,
            "truncated" => Field::Truncated,
            "info" => Field::Info,
            "render" => Field::Render,
            "dt" => Field::Dt,
            _ => return None,
        })
    }
}
