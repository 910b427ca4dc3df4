//! What a request asks for: its operation ([`Op`]), and the control
//! modes and component operation kinds it names.

/// Protocol operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `hello`
    Hello,
    /// `discover`
    Discover,
    /// `describe`
    Describe,
    /// `acquire`
    Acquire,
    /// `release`
    Release,
    /// `begin`
    Begin,
    /// `complete`
    Complete,
    /// `abort`
    Abort,
    /// `call`
    Call,
    /// `subscribe`
    Subscribe,
    /// `unsubscribe`
    Unsubscribe,
}

impl Op {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "hello" => Op::Hello,
            "discover" => Op::Discover,
            "describe" => Op::Describe,
            "acquire" => Op::Acquire,
            "release" => Op::Release,
            "begin" => Op::Begin,
            "complete" => Op::Complete,
            "abort" => Op::Abort,
            "call" => Op::Call,
            "subscribe" => Op::Subscribe,
            "unsubscribe" => Op::Unsubscribe,
            _ => return None,
        })
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Hello => "hello",
            Op::Discover => "discover",
            Op::Describe => "describe",
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Begin => "begin",
            Op::Complete => "complete",
            Op::Abort => "abort",
            Op::Call => "call",
            Op::Subscribe => "subscribe",
            Op::Unsubscribe => "unsubscribe",
        }
    }
}

/// Control modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Whole env methods.
    Env,
    /// World and node methods inside explicit operations.
    Components,
}

impl Mode {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "env" => Some(Mode::Env),
            "components" => Some(Mode::Components),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Env => "env",
            Mode::Components => "components",
        }
    }
}

/// Component operation kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationKind {
    /// `reset`
    Reset,
    /// `reload`
    Reload,
    /// `step`
    Step,
}

impl OperationKind {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<OperationKind> {
        match s {
            "reset" => Some(OperationKind::Reset),
            "reload" => Some(OperationKind::Reload),
            "step" => Some(OperationKind::Step),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Reset => "reset",
            OperationKind::Reload => "reload",
            OperationKind::Step => "step",
        }
    }

    /// Whether this is a reset or reload operation.
    pub fn is_reset_family(self) -> bool {
        !matches!(self, OperationKind::Step)
    }
}
