//! `gripper`: a detached parallel-jaw gripper (`W = ()`) with two finger
//! children, `gripper/left` and `gripper/right`.
//!
//! Each [`Finger`] is a first-order actuator: its opening `x` (metres from
//! the gripper's centre line, `0` closed to `0.04` open) follows the
//! commanded target with time constant 0.05 s, applied exactly over each
//! `post_environment_step(dt)`:
//! `x ← target + (x − target)·exp(−dt/τ)`.
//!
//! - finger: action float32 `(1,)` target in `[0, 0.04]`; observation float32
//!   `(1,)` actual opening; info `{"target": ..}`;
//! - [`Gripper`]: action float32 `(1,)` target width in `[0, 0.08]`, split
//!   evenly between the fingers; observation float32 `(1,)` actual width (sum
//!   of the openings); info `{"target_width": ..}`; its hooks run its
//!   fingers' hooks with the same `dt` and priority.
//!
//! A device has no task: no reward, termination or truncation signal. The
//! hooks declare the robots band priority 50: `reset`/`reload` open the
//! fingers fully (holding there), `post_environment_step` moves them. Each
//! declares a single priority, so the hooks act whatever priority they are
//! called with: a client driving the detached device directly need not pass
//! it. An action of `None` holds the current opening. `dt = None` means one update timestep
//! (0.01 s); the control timestep is 0.02 s.

use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};
use crate::host::{HostError, HostResult, Node, Phase, ResetArgs, Space};

/// Fully open finger position (m from the centre line).
pub const FINGER_MAX_OPENING: f64 = 0.04;
/// Time constant of the finger actuators (s).
pub const TIME_CONSTANT: f64 = 0.05;
/// Control timestep of the gripper and its fingers (s).
pub const CONTROL_TIMESTEP: f64 = 0.02;
/// Update timestep, and the `dt` used when a hook receives `None` (s).
pub const UPDATE_TIMESTEP: f64 = 0.01;
/// Priority of every hook (UniEnv's robots band).
pub const PRIORITY: i64 = 50;

fn priorities(phase: Phase) -> Vec<i64> {
    match phase {
        Phase::Reset | Phase::Reload | Phase::PostStep => vec![PRIORITY],
        Phase::AfterReset | Phase::AfterReload | Phase::PreStep => Vec::new(),
    }
}

/// A one-number command: a number, or a one-element real array; `None`
/// gives `Ok(None)` (hold).
fn parse_scalar(action: &Value, what: &str) -> HostResult<Option<f64>> {
    let value = match action {
        Value::Null => return Ok(None),
        Value::Array(a)
            if a.len() == 1
                && matches!(
                    a.dtype().kind(),
                    ScalarKind::Float | ScalarKind::Int | ScalarKind::UInt
                ) =>
        {
            a.get_f64(0)
        }
        Value::Float(_) | Value::Int(_) | Value::UInt(_) => action.as_f64(),
        _ => None,
    };
    match value {
        Some(v) if v.is_finite() => Ok(Some(v)),
        _ => Err(HostError::new(format!(
            "{what} must be one finite number (a float or an array of shape (1,)) or None, got {}",
            match action {
                Value::Array(a) => format!(
                    "an array of dtype {} and shape {:?}",
                    a.dtype().name(),
                    a.shape()
                ),
                Value::Float(f) => f.to_string(),
                other => other.type_name().to_string(),
            }
        ))),
    }
}

/// The elapsed time of a hook call: `None` is one update timestep.
fn step_dt(dt: Option<f64>) -> HostResult<f64> {
    match dt {
        None => Ok(UPDATE_TIMESTEP),
        Some(dt) if dt.is_finite() && dt >= 0.0 => Ok(dt),
        Some(dt) => Err(HostError::new(format!(
            "dt must be a finite non-negative number of seconds, got {dt}"
        ))),
    }
}

fn f32_array(value: f64) -> Value {
    Value::Array(NdArray::from_vec(vec![value as f32]))
}

/// One finger of the gripper: a first-order position actuator.
#[derive(Debug, Clone)]
pub struct Finger {
    name: String,
    position: f64,
    target: f64,
}

impl Finger {
    /// A fully open finger.
    pub fn new(name: impl Into<String>) -> Finger {
        Finger {
            name: name.into(),
            position: FINGER_MAX_OPENING,
            target: FINGER_MAX_OPENING,
        }
    }

    /// The actual opening (m).
    pub fn position(&self) -> f64 {
        self.position
    }

    /// The commanded opening (m).
    pub fn target(&self) -> f64 {
        self.target
    }

    /// Sets the target, clamped to `[0, FINGER_MAX_OPENING]`.
    fn command(&mut self, target: f64) {
        self.target = target.clamp(0.0, FINGER_MAX_OPENING);
    }

    /// Advances the actuator by `dt` seconds.
    fn advance(&mut self, dt: f64) {
        self.position = self.target + (self.position - self.target) * (-dt / TIME_CONSTANT).exp();
    }
}

fn finger_space() -> Space {
    Space::boxed(DType::F32, vec![1], 0.0, FINGER_MAX_OPENING)
}

impl Node<()> for Finger {
    fn name(&self) -> &str {
        &self.name
    }
    fn control_timestep(&self) -> Option<f64> {
        Some(CONTROL_TIMESTEP)
    }
    fn update_timestep(&self) -> Option<f64> {
        Some(UPDATE_TIMESTEP)
    }
    fn observation_space(&self) -> Option<Space> {
        Some(finger_space())
    }
    fn action_space(&self) -> Option<Space> {
        Some(finger_space())
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        priorities(phase)
    }
    fn set_next_action(&mut self, _: &mut (), action: Value) -> HostResult<()> {
        let target = parse_scalar(&action, "a finger's action")?;
        self.command(target.unwrap_or(self.position));
        Ok(())
    }
    fn post_environment_step(&mut self, _: &mut (), dt: Option<f64>, _: i64) -> HostResult<()> {
        self.advance(step_dt(dt)?);
        Ok(())
    }
    fn reset(&mut self, _: &mut (), _: i64, _: &ResetArgs) -> HostResult<()> {
        self.position = FINGER_MAX_OPENING;
        self.target = FINGER_MAX_OPENING;
        Ok(())
    }
    fn get_observation(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(f32_array(self.position))
    }
    fn get_info(&mut self, _: &mut ()) -> HostResult<Value> {
        let mut d = Dict::with_capacity(1);
        d.insert("target", self.target);
        Ok(Value::Dict(d))
    }
}

/// The gripper: commands a width, split evenly between its two fingers
/// (see the [module documentation](self)).
///
/// ```
/// use unienv_remote::host::{Node, ResetArgs};
/// use unienv_remote::sims::Gripper;
/// use unienv_remote::Value;
///
/// let mut g = Gripper::new();
/// g.reset(&mut (), 50, &ResetArgs::default()).unwrap();
/// g.set_next_action(&mut (), Value::Float(0.0)).unwrap(); // close
/// for _ in 0..50 {
///     g.post_environment_step(&mut (), Some(0.01), 50).unwrap();
/// }
/// let width = g.get_observation(&mut ()).unwrap();
/// assert!(width.as_scalar_f64().unwrap() < 0.001);
/// ```
#[derive(Debug, Clone)]
pub struct Gripper {
    fingers: [Finger; 2],
}

impl Default for Gripper {
    fn default() -> Gripper {
        Gripper::new()
    }
}

impl Gripper {
    /// An open gripper with fingers `left` and `right`.
    pub fn new() -> Gripper {
        Gripper {
            fingers: [Finger::new("left"), Finger::new("right")],
        }
    }

    /// The fingers, left then right.
    pub fn fingers(&self) -> &[Finger; 2] {
        &self.fingers
    }

    /// The actual width (m).
    pub fn width(&self) -> f64 {
        self.fingers.iter().map(Finger::position).sum()
    }
}

fn width_space() -> Space {
    Space::boxed(DType::F32, vec![1], 0.0, 2.0 * FINGER_MAX_OPENING)
}

impl Node<()> for Gripper {
    fn name(&self) -> &str {
        "gripper"
    }
    fn control_timestep(&self) -> Option<f64> {
        Some(CONTROL_TIMESTEP)
    }
    fn update_timestep(&self) -> Option<f64> {
        Some(UPDATE_TIMESTEP)
    }
    fn observation_space(&self) -> Option<Space> {
        Some(width_space())
    }
    fn action_space(&self) -> Option<Space> {
        Some(width_space())
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        priorities(phase)
    }
    fn child_count(&self) -> usize {
        self.fingers.len()
    }
    fn child(&self, index: usize) -> Option<&dyn Node<()>> {
        self.fingers.get(index).map(|f| f as &dyn Node<()>)
    }
    fn child_mut(&mut self, index: usize) -> Option<&mut dyn Node<()>> {
        self.fingers.get_mut(index).map(|f| f as &mut dyn Node<()>)
    }
    /// Sets both fingers' targets to half the width (clamped to
    /// `[0, 0.08]`); `None` holds both fingers where they are.
    fn set_next_action(&mut self, _: &mut (), action: Value) -> HostResult<()> {
        let width = parse_scalar(&action, "the gripper's action")?;
        for finger in &mut self.fingers {
            let target = width.map_or(finger.position, |w| {
                w.clamp(0.0, 2.0 * FINGER_MAX_OPENING) / 2.0
            });
            finger.command(target);
        }
        Ok(())
    }
    fn post_environment_step(
        &mut self,
        world: &mut (),
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        for finger in &mut self.fingers {
            finger.post_environment_step(world, dt, priority)?;
        }
        Ok(())
    }
    fn reset(&mut self, world: &mut (), priority: i64, args: &ResetArgs) -> HostResult<()> {
        for finger in &mut self.fingers {
            finger.reset(world, priority, args)?;
        }
        Ok(())
    }
    fn reload(&mut self, world: &mut (), priority: i64, args: &ResetArgs) -> HostResult<()> {
        for finger in &mut self.fingers {
            finger.reload(world, priority, args)?;
        }
        Ok(())
    }
    fn get_observation(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(f32_array(self.width()))
    }
    fn get_info(&mut self, _: &mut ()) -> HostResult<Value> {
        let mut d = Dict::with_capacity(1);
        d.insert(
            "target_width",
            self.fingers.iter().map(Finger::target).sum::<f64>(),
        );
        Ok(Value::Dict(d))
    }
    fn close(&mut self, world: &mut ()) {
        for finger in &mut self.fingers {
            finger.close(world);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn reset(g: &mut Gripper) {
        g.reset(&mut (), PRIORITY, &ResetArgs::default()).unwrap();
    }

    #[test]
    fn fingers_follow_their_targets_as_first_order_lags() {
        let mut f = Finger::new("left");
        assert_eq!(f.position(), FINGER_MAX_OPENING);
        f.set_next_action(&mut (), Value::Float(0.0)).unwrap();
        f.post_environment_step(&mut (), Some(0.05), PRIORITY)
            .unwrap();
        // One time constant: 1/e of the error remains.
        assert!(close(f.position(), 0.04 * (-1.0f64).exp()));
        // Ten 5 ms steps are one 50 ms step (exact discretization).
        let mut g = Finger::new("g");
        g.set_next_action(&mut (), NdArray::from_vec(vec![0.0f32]).into())
            .unwrap();
        for _ in 0..10 {
            g.post_environment_step(&mut (), Some(0.005), PRIORITY)
                .unwrap();
        }
        assert!(close(g.position(), f.position()));
        // dt None is one update timestep.
        let before = f.position();
        f.post_environment_step(&mut (), None, PRIORITY).unwrap();
        assert!(close(
            f.position(),
            before * (-UPDATE_TIMESTEP / TIME_CONSTANT).exp()
        ));
        // Targets are clamped to the stroke; None holds the current opening.
        f.set_next_action(&mut (), Value::Float(1.0)).unwrap();
        assert_eq!(f.target(), FINGER_MAX_OPENING);
        f.set_next_action(&mut (), Value::Float(-1.0)).unwrap();
        assert_eq!(f.target(), 0.0);
        f.set_next_action(&mut (), Value::Null).unwrap();
        assert_eq!(f.target(), f.position());
        let obs = f.get_observation(&mut ()).unwrap();
        assert_eq!(
            obs,
            Value::Array(NdArray::from_vec(vec![f.position() as f32]))
        );
        let info = f.get_info(&mut ()).unwrap();
        assert_eq!(info.get("target"), Some(&Value::Float(f.target())));
        // Bad commands and times are refused.
        for bad in [
            Value::Float(f64::NAN),
            Value::from("open"),
            NdArray::from_vec(vec![0.0f32, 0.0]).into(),
            Value::Bool(true),
        ] {
            assert!(f.set_next_action(&mut (), bad).is_err());
        }
        assert!(f
            .post_environment_step(&mut (), Some(-0.1), PRIORITY)
            .is_err());
        assert!(f
            .post_environment_step(&mut (), Some(f64::INFINITY), PRIORITY)
            .is_err());
    }

    #[test]
    fn the_gripper_splits_its_width_command_and_reports_the_actual_width() {
        let mut g = Gripper::new();
        reset(&mut g);
        assert!(close(g.width(), 0.08));
        g.set_next_action(&mut (), Value::Float(0.02)).unwrap();
        assert_eq!(g.fingers()[0].target(), 0.01);
        assert_eq!(g.fingers()[1].target(), 0.01);
        for _ in 0..5 {
            g.post_environment_step(&mut (), Some(0.01), PRIORITY)
                .unwrap();
        }
        // After 50 ms: 0.01 + 0.03/e per finger.
        let expected = 2.0 * (0.01 + 0.03 * (-1.0f64).exp());
        assert!(close(g.width(), expected));
        let obs = g.get_observation(&mut ()).unwrap();
        assert_eq!(obs, Value::Array(NdArray::from_vec(vec![expected as f32])));
        assert_eq!(
            g.get_info(&mut ()).unwrap().get("target_width"),
            Some(&Value::Float(0.02))
        );
        // The hooks act at any priority (they declare only one): a direct
        // call with the default priority 0 moves the fingers too.
        let mut h = g.clone();
        g.post_environment_step(&mut (), Some(0.01), 0).unwrap();
        h.post_environment_step(&mut (), Some(0.01), PRIORITY)
            .unwrap();
        assert_eq!(g.width(), h.width());
        assert!(g.width() < expected);
        // A finger driven on its own moves alone.
        g.child_mut(1)
            .unwrap()
            .set_next_action(&mut (), Value::Float(0.04))
            .unwrap();
        for _ in 0..100 {
            g.post_environment_step(&mut (), None, PRIORITY).unwrap();
        }
        assert!((g.fingers()[0].position() - 0.01).abs() < 1e-9);
        assert!((g.fingers()[1].position() - 0.04).abs() < 1e-9);
        // A reset opens both fingers again and holds them there.
        g.reload(&mut (), PRIORITY, &ResetArgs::default()).unwrap();
        g.post_environment_step(&mut (), None, PRIORITY).unwrap();
        assert!(close(g.width(), 0.08));
        assert!(g.set_next_action(&mut (), Value::list([0.0])).is_err());
    }

    #[test]
    fn tree_shape_flags_and_priorities() {
        let g = Gripper::new();
        assert_eq!(g.name(), "gripper");
        assert_eq!(g.child_count(), 2);
        assert_eq!(g.child(0).unwrap().name(), "left");
        assert_eq!(g.child(1).unwrap().name(), "right");
        assert!(g.child(2).is_none());
        for node in [&g as &dyn Node<()>, g.child(0).unwrap()] {
            assert!(!node.has_reward());
            assert!(!node.has_termination_signal());
            assert!(!node.has_truncation_signal());
            assert_eq!(node.priorities(Phase::PostStep), vec![50]);
            assert_eq!(node.priorities(Phase::Reset), vec![50]);
            assert_eq!(node.priorities(Phase::PreStep), Vec::<i64>::new());
            assert_eq!(node.control_timestep(), Some(0.02));
            assert_eq!(node.update_timestep(), Some(0.01));
            assert_eq!(node.render_mode(), None);
        }
        assert_eq!(
            g.action_space(),
            Some(Space::boxed(DType::F32, vec![1], 0.0, 0.08))
        );
        assert_eq!(
            g.child(0).unwrap().observation_space(),
            Some(Space::boxed(DType::F32, vec![1], 0.0, 0.04))
        );
    }
}
