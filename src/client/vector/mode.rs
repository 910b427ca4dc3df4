//! [`AutoresetMode`]: when a vector env resets finished sub-environments.

/// When finished sub-environments are reset, following Gymnasium 1.x's
/// `gymnasium.vector.AutoresetMode` (see the [module docs](super)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoresetMode {
    /// Reset in the step after the episode ended (Gymnasium's default).
    #[default]
    NextStep,
    /// Reset right after the ending step, in the same call.
    SameStep,
    /// Never reset automatically.
    Disabled,
}

impl AutoresetMode {
    /// Gymnasium's value of the mode (`"NextStep"`, `"SameStep"`,
    /// `"Disabled"`).
    pub fn as_str(self) -> &'static str {
        match self {
            AutoresetMode::NextStep => "NextStep",
            AutoresetMode::SameStep => "SameStep",
            AutoresetMode::Disabled => "Disabled",
        }
    }

    /// The mode of a Gymnasium value or name (`"NextStep"` or `"NEXT_STEP"`,
    /// case-insensitive).
    pub fn parse(s: &str) -> Option<AutoresetMode> {
        match s.to_ascii_lowercase().replace('_', "").as_str() {
            "nextstep" => Some(AutoresetMode::NextStep),
            "samestep" => Some(AutoresetMode::SameStep),
            "disabled" => Some(AutoresetMode::Disabled),
            _ => None,
        }
    }
}
