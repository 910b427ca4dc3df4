//! The methods each resource kind exports ([`Method`], [`ResourceKind`]).

use std::fmt;

/// The protocol methods of every resource kind (see
/// [`ResourceKind::methods`] for which kind exports which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `reset`
    Reset,
    /// `step`
    Step,
    /// `render`
    Render,
    /// `reload`
    Reload,
    /// `after_reset`
    AfterReset,
    /// `after_reload`
    AfterReload,
    /// `pre_environment_step`
    PreEnvironmentStep,
    /// `post_environment_step`
    PostEnvironmentStep,
    /// `set_next_action`
    SetNextAction,
    /// `get_context`
    GetContext,
    /// `get_observation`
    GetObservation,
    /// `get_reward`
    GetReward,
    /// `get_termination`
    GetTermination,
    /// `get_truncation`
    GetTruncation,
    /// `get_info`
    GetInfo,
}

impl Method {
    /// Every method, in no particular order.
    pub const ALL: [Method; 15] = [
        Method::Reset,
        Method::Step,
        Method::Render,
        Method::Reload,
        Method::AfterReset,
        Method::AfterReload,
        Method::PreEnvironmentStep,
        Method::PostEnvironmentStep,
        Method::SetNextAction,
        Method::GetContext,
        Method::GetObservation,
        Method::GetReward,
        Method::GetTermination,
        Method::GetTruncation,
        Method::GetInfo,
    ];

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Reset => "reset",
            Method::Step => "step",
            Method::Render => "render",
            Method::Reload => "reload",
            Method::AfterReset => "after_reset",
            Method::AfterReload => "after_reload",
            Method::PreEnvironmentStep => "pre_environment_step",
            Method::PostEnvironmentStep => "post_environment_step",
            Method::SetNextAction => "set_next_action",
            Method::GetContext => "get_context",
            Method::GetObservation => "get_observation",
            Method::GetReward => "get_reward",
            Method::GetTermination => "get_termination",
            Method::GetTruncation => "get_truncation",
            Method::GetInfo => "get_info",
        }
    }

    /// `reset` or `reload`: the calls that recover a faulted domain.
    pub fn is_reset_or_reload(self) -> bool {
        matches!(self, Method::Reset | Method::Reload)
    }

    /// The reset/reload lifecycle (`reset`, `reload` and their after-hooks):
    /// not allowed inside a step operation; each advances the revision.
    pub fn is_reset_lifecycle(self) -> bool {
        matches!(
            self,
            Method::Reset | Method::Reload | Method::AfterReset | Method::AfterReload
        )
    }

    /// Stepping and action hooks: not allowed inside a reset/reload operation.
    pub fn is_step_lifecycle(self) -> bool {
        matches!(
            self,
            Method::Step
                | Method::SetNextAction
                | Method::PreEnvironmentStep
                | Method::PostEnvironmentStep
        )
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Resource kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// An environment.
    Env,
    /// A world.
    World,
    /// A node.
    Node,
}

impl ResourceKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Env => "env",
            ResourceKind::World => "world",
            ResourceKind::Node => "node",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<ResourceKind> {
        match s {
            "env" => Some(ResourceKind::Env),
            "world" => Some(ResourceKind::World),
            "node" => Some(ResourceKind::Node),
            _ => None,
        }
    }

    /// The exported methods of this kind, with whether each mutates.
    /// Env `reload` is exported only when the env implements it.
    pub fn methods(self) -> &'static [(&'static str, bool)] {
        match self {
            ResourceKind::Env => &[
                ("reset", true),
                ("step", true),
                ("render", false),
                ("reload", true),
            ],
            ResourceKind::World => &[
                ("step", true),
                ("reset", true),
                ("reload", true),
                ("after_reset", true),
                ("after_reload", true),
            ],
            ResourceKind::Node => &[
                ("reset", true),
                ("reload", true),
                ("after_reset", true),
                ("after_reload", true),
                ("pre_environment_step", true),
                ("post_environment_step", true),
                ("set_next_action", true),
                ("get_context", false),
                ("get_observation", false),
                ("get_reward", false),
                ("get_termination", false),
                ("get_truncation", false),
                ("get_info", false),
                ("render", false),
            ],
        }
    }

    /// Whether `method` of this kind mutates (`None` when not a method of the kind).
    pub fn is_mutation(self, method: &str) -> Option<bool> {
        self.methods()
            .iter()
            .find(|(m, _)| *m == method)
            .map(|(_, mutation)| *mutation)
    }

    /// Whether this kind exports `method` at all (env `reload` only when
    /// implemented, which the hosted object decides).
    pub fn has_method(self, method: Method) -> bool {
        self.is_mutation(method.as_str()).is_some()
    }

    /// The snapshot fields of this kind.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            ResourceKind::World => &["dt"],
            _ => &[
                "context",
                "info",
                "observation",
                "render",
                "reward",
                "terminated",
                "truncated",
            ],
        }
    }
}
