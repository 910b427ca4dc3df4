//! `pointmass`: a 2-D point mass pushed towards a goal in a walled square
//! arena, composed UniEnv-style as a [`WorldEnv`] of a [`PointMassWorld`] and
//! `CombinedNode("robot", [body, camera])`.
//!
//! - **World** ([`PointMassWorld`], `world_timestep` 0.01 s): a body of mass
//!   1 kg with linear damping 0.5 s⁻¹, integrated with semi-implicit Euler
//!   under the force the body node applies; the arena is `[-1, 1]²` and its
//!   walls reflect the body elastically (position mirrored, velocity
//!   component negated). A reset draws the goal uniformly in `[-0.8, 0.8]²`
//!   and the start likewise, at least 0.5 m from the goal.
//! - **Body** ([`PointMassBody`], `robot/body`, robots band priority 50):
//!   action float32 `(2,)` in `[-1, 1]`, the force in newtons, applied in
//!   `pre_environment_step` (control 0.04 s, update 0.02 s); context the goal,
//!   float32 `(2,)`; observation `{"position": (2,), "velocity": (2,)}`
//!   float32; reward the negative distance to the goal; terminated once the
//!   body has been within 0.1 m of the goal at an update; truncated after
//!   10 s of simulated time (250 control steps).
//! - **Camera** ([`PointMassCamera`], `robot/camera`, sensor band priority
//!   −50): no action; observation a uint8 `(64, 64, 3)` top view (walls
//!   grey, goal green, body red), captured after every update and after
//!   resets; `render_mode` `"rgb_array"`.
//!
//! One control step of the composed env is 2 update substeps of 2 world steps
//! each; the env's `control_timestep` is 0.04 s and its `render_fps` 25.
//! (The world timestep 0.01 s and the composer's exact-remainder rule make
//! 0.05 s an invalid control timestep: `0.05 % 0.01 != 0` in floating point.)

use super::raster::Canvas;
use super::rng::SplitMix64;
use crate::codec::{DType, Dict, NdArray, Value};
use crate::host::{
    CombinedNode, HostError, HostResult, Node, Phase, ResetArgs, Space, World, WorldEnv,
};

/// Seconds advanced by one world step.
pub const WORLD_TIMESTEP: f64 = 0.01;
/// The body's update timestep (force updates, goal checks).
pub const UPDATE_TIMESTEP: f64 = 0.02;
/// The body's control timestep (one action per control step).
pub const CONTROL_TIMESTEP: f64 = 0.04;
/// The arena is `[-ARENA_HALF_SIZE, ARENA_HALF_SIZE]²` (m).
pub const ARENA_HALF_SIZE: f64 = 1.0;
/// Mass of the body (kg).
pub const MASS: f64 = 1.0;
/// Linear damping coefficient (1/s): the acceleration is `F/m − c·v`.
pub const DAMPING: f64 = 0.5;
/// The force for an action of magnitude 1 (N).
pub const MAX_FORCE: f64 = 1.0;
/// The episode terminates within this distance of the goal (m).
pub const GOAL_RADIUS: f64 = 0.1;
/// Start and goal are drawn in `[-SPAWN_HALF_SIZE, SPAWN_HALF_SIZE]²`.
pub const SPAWN_HALF_SIZE: f64 = 0.8;
/// Smallest distance between the start and the goal after a reset (m).
pub const MIN_START_GOAL_DISTANCE: f64 = 0.5;
/// World steps after which the body reports truncation (10 s).
pub const EPISODE_WORLD_STEPS: u64 = 1000;
/// Width and height of the camera image (pixels).
pub const CAMERA_SIZE: usize = 64;
/// Priority of the body's hooks (UniEnv's robots band).
pub const BODY_PRIORITY: i64 = 50;
/// Priority of the camera's hooks (UniEnv's sensor band, after everything).
pub const CAMERA_PRIORITY: i64 = -50;

/// Radius the body is drawn with (m).
const BODY_DRAW_RADIUS: f64 = 0.08;

/// The point-mass world: the physics state and the goal.
#[derive(Debug, Clone)]
pub struct PointMassWorld {
    position: [f64; 2],
    velocity: [f64; 2],
    force: [f64; 2],
    goal: [f64; 2],
    steps: u64,
    rng: SplitMix64,
}

impl Default for PointMassWorld {
    fn default() -> PointMassWorld {
        PointMassWorld::new()
    }
}

impl PointMassWorld {
    /// A world at rest at the origin with the goal at `(0.5, 0.5)`, its
    /// generator seeded from entropy until a reset passes a seed.
    pub fn new() -> PointMassWorld {
        PointMassWorld {
            position: [0.0; 2],
            velocity: [0.0; 2],
            force: [0.0; 2],
            goal: [0.5, 0.5],
            steps: 0,
            rng: SplitMix64::from_entropy(),
        }
    }

    /// The body's position (m).
    pub fn position(&self) -> [f64; 2] {
        self.position
    }

    /// The body's velocity (m/s).
    pub fn velocity(&self) -> [f64; 2] {
        self.velocity
    }

    /// The force applied during the coming world steps (N).
    pub fn force(&self) -> [f64; 2] {
        self.force
    }

    /// The goal position (m).
    pub fn goal(&self) -> [f64; 2] {
        self.goal
    }

    /// World steps since the last reset.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Simulated seconds since the last reset.
    pub fn time(&self) -> f64 {
        self.steps as f64 * WORLD_TIMESTEP
    }

    /// Distance from the body to the goal (m).
    pub fn distance_to_goal(&self) -> f64 {
        let (dx, dy) = (
            self.goal[0] - self.position[0],
            self.goal[1] - self.position[1],
        );
        dx.hypot(dy)
    }

    /// Sets the force applied by the following world steps.
    pub fn set_force(&mut self, force: [f64; 2]) -> HostResult<()> {
        if force.iter().any(|f| !f.is_finite()) {
            return Err(HostError::new(format!(
                "force must be finite, got {force:?}"
            )));
        }
        self.force = force;
        Ok(())
    }

    /// Places the body (clamped to the arena) with the given velocity.
    pub fn set_body(&mut self, position: [f64; 2], velocity: [f64; 2]) -> HostResult<()> {
        if position.iter().chain(&velocity).any(|v| !v.is_finite()) {
            return Err(HostError::new("body state must be finite"));
        }
        self.position = position.map(|p| p.clamp(-ARENA_HALF_SIZE, ARENA_HALF_SIZE));
        self.velocity = velocity;
        Ok(())
    }

    /// Moves the goal (clamped to the arena).
    pub fn set_goal(&mut self, goal: [f64; 2]) -> HostResult<()> {
        if goal.iter().any(|v| !v.is_finite()) {
            return Err(HostError::new("goal must be finite"));
        }
        self.goal = goal.map(|p| p.clamp(-ARENA_HALF_SIZE, ARENA_HALF_SIZE));
        Ok(())
    }

    /// Draws a uniform point of the spawn square.
    fn spawn_point(&mut self) -> [f64; 2] {
        [(); 2].map(|_| self.rng.uniform(-SPAWN_HALF_SIZE, SPAWN_HALF_SIZE))
    }

    /// The top view: dark floor, grey walls, the goal disk in green and the
    /// body in red, `size × size` pixels.
    pub fn render_frame(&self, size: usize) -> HostResult<NdArray> {
        let s = size as f64;
        let to_px = |p: [f64; 2]| {
            (
                (p[0] + ARENA_HALF_SIZE) / (2.0 * ARENA_HALF_SIZE) * s,
                (ARENA_HALF_SIZE - p[1]) / (2.0 * ARENA_HALF_SIZE) * s,
            )
        };
        let scale = s / (2.0 * ARENA_HALF_SIZE);
        let mut canvas = Canvas::new(size, size, [32, 32, 40]);
        canvas.border((size / 32).max(1), [170, 170, 170]);
        let (gx, gy) = to_px(self.goal);
        canvas.fill_disk(gx, gy, GOAL_RADIUS * scale, [40, 200, 80]);
        let (bx, by) = to_px(self.position);
        canvas.fill_disk(bx, by, BODY_DRAW_RADIUS * scale, [230, 60, 50]);
        Ok(canvas.into_array()?)
    }
}

impl World for PointMassWorld {
    fn step(&mut self) -> HostResult<f64> {
        let dt = WORLD_TIMESTEP;
        let l = ARENA_HALF_SIZE;
        for i in 0..2 {
            let acceleration = self.force[i] / MASS - DAMPING * self.velocity[i];
            self.velocity[i] += acceleration * dt;
            self.position[i] += self.velocity[i] * dt;
            // Elastic walls: mirror the overshoot, reverse the velocity.
            if self.position[i] > l {
                self.position[i] = 2.0 * l - self.position[i];
                self.velocity[i] = -self.velocity[i];
            } else if self.position[i] < -l {
                self.position[i] = -2.0 * l - self.position[i];
                self.velocity[i] = -self.velocity[i];
            }
            // Only a body crossing the whole arena in one step needs this.
            self.position[i] = self.position[i].clamp(-l, l);
        }
        self.steps += 1;
        Ok(dt)
    }

    /// Reseeds the generator when `seed` is given (unseeded resets continue
    /// the stream), then draws the goal and a start at least
    /// [`MIN_START_GOAL_DISTANCE`] from it; the body starts at rest.
    fn reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        if args.mask.is_some() {
            return Err(HostError::invalid_argument(
                "pointmass is not batched: reset takes no mask",
            ));
        }
        if let Some(seed) = args.seed {
            self.rng = SplitMix64::from_seed(seed);
        }
        self.goal = self.spawn_point();
        let mut start = self.spawn_point();
        let far_enough =
            |p: [f64; 2], g: [f64; 2]| (p[0] - g[0]).hypot(p[1] - g[1]) >= MIN_START_GOAL_DISTANCE;
        // Each draw succeeds with probability > 0.6: 64 tries practically
        // always suffice; the fallback keeps the guarantee regardless.
        for _ in 0..64 {
            if far_enough(start, self.goal) {
                break;
            }
            start = self.spawn_point();
        }
        if !far_enough(start, self.goal) {
            let shift = if self.goal[0] >= 0.0 { -1.0 } else { 1.0 };
            start = [self.goal[0] + shift * MIN_START_GOAL_DISTANCE, self.goal[1]];
        }
        self.position = start;
        self.velocity = [0.0; 2];
        self.force = [0.0; 2];
        self.steps = 0;
        Ok(())
    }

    fn world_timestep(&self) -> Option<f64> {
        Some(WORLD_TIMESTEP)
    }

    fn world_subtimestep(&self) -> Option<f64> {
        Some(WORLD_TIMESTEP)
    }
}

fn f32_vec(values: &[f64]) -> Value {
    Value::Array(NdArray::from_vec(
        values.iter().map(|&v| v as f32).collect::<Vec<f32>>(),
    ))
}

/// Reads a force command: two finite numbers as an array (any real dtype,
/// two elements) or a list/tuple; `None` holds still (zero force).
fn parse_force(action: &Value) -> HostResult<[f64; 2]> {
    let values: Option<Vec<f64>> = match action {
        Value::Null => return Ok([0.0; 2]),
        Value::Array(a)
            if a.len() == 2 && a.dtype().kind() != crate::codec::ScalarKind::Complex =>
        {
            Some(a.to_f64_vec())
        }
        Value::List(items) | Value::Tuple(items) if items.len() == 2 => {
            items.iter().map(Value::as_f64).collect()
        }
        _ => None,
    };
    const EXPECTED: &str =
        "pointmass body action must be two finite numbers in [-1, 1] (an array of shape (2,))";
    match values.as_deref() {
        Some(&[x, y]) if x.is_finite() && y.is_finite() => Ok([x, y].map(|v| v.clamp(-1.0, 1.0))),
        // The right container with a non-finite element: say which.
        Some(&[x, y]) => {
            let (i, v) = if x.is_finite() { (1, y) } else { (0, x) };
            let what = if v.is_nan() {
                "NaN".to_string()
            } else {
                format!("{v}")
            };
            Err(HostError::new(format!(
                "{EXPECTED}, but action[{i}] is {what}"
            )))
        }
        _ => Err(HostError::new(format!(
            "{EXPECTED}, got {}",
            describe(action)
        ))),
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Array(a) => format!(
            "an array of dtype {} and shape {:?}",
            a.dtype().name(),
            a.shape()
        ),
        other => other.type_name().to_string(),
    }
}

/// The actuated body (`robot/body`): applies the commanded force and reports
/// reward, termination and truncation (see the [module documentation](self)).
#[derive(Debug, Clone, Default)]
pub struct PointMassBody {
    action: [f64; 2],
    reached: bool,
}

impl PointMassBody {
    /// A body with a zero command.
    pub fn new() -> PointMassBody {
        PointMassBody::default()
    }
}

impl Node<PointMassWorld> for PointMassBody {
    fn name(&self) -> &str {
        "body"
    }
    fn control_timestep(&self) -> Option<f64> {
        Some(CONTROL_TIMESTEP)
    }
    fn update_timestep(&self) -> Option<f64> {
        Some(UPDATE_TIMESTEP)
    }
    fn context_space(&self) -> Option<Space> {
        Some(Space::boxed(
            DType::F32,
            vec![2],
            -ARENA_HALF_SIZE,
            ARENA_HALF_SIZE,
        ))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::dict([
            (
                "position",
                Space::boxed(DType::F32, vec![2], -ARENA_HALF_SIZE, ARENA_HALF_SIZE),
            ),
            ("velocity", Space::unbounded_f32(vec![2])),
        ]))
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::boxed(DType::F32, vec![2], -1.0, 1.0))
    }
    fn has_reward(&self) -> bool {
        true
    }
    fn has_termination_signal(&self) -> bool {
        true
    }
    fn has_truncation_signal(&self) -> bool {
        true
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        match phase {
            Phase::Reset | Phase::Reload | Phase::PreStep | Phase::PostStep => vec![BODY_PRIORITY],
            Phase::AfterReset | Phase::AfterReload => Vec::new(),
        }
    }
    /// Stores the force command (clipped to `[-1, 1]`); `None` means zero.
    fn set_next_action(&mut self, _: &mut PointMassWorld, action: Value) -> HostResult<()> {
        self.action = parse_force(&action)?;
        Ok(())
    }
    fn pre_environment_step(
        &mut self,
        world: &mut PointMassWorld,
        _dt: Option<f64>,
        _priority: i64,
    ) -> HostResult<()> {
        world.set_force(self.action.map(|a| a * MAX_FORCE))
    }
    fn post_environment_step(
        &mut self,
        world: &mut PointMassWorld,
        _dt: Option<f64>,
        _priority: i64,
    ) -> HostResult<()> {
        self.reached |= world.distance_to_goal() <= GOAL_RADIUS;
        Ok(())
    }
    fn reset(&mut self, world: &mut PointMassWorld, _: i64, _: &ResetArgs) -> HostResult<()> {
        self.action = [0.0; 2];
        world.set_force([0.0; 2])?;
        self.reached = world.distance_to_goal() <= GOAL_RADIUS;
        Ok(())
    }
    fn get_context(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        Ok(f32_vec(&world.goal()))
    }
    fn get_observation(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        let mut d = Dict::with_capacity(2);
        d.insert("position", f32_vec(&world.position()));
        d.insert("velocity", f32_vec(&world.velocity()));
        Ok(Value::Dict(d))
    }
    fn get_reward(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        Ok(Value::Float(-world.distance_to_goal()))
    }
    fn get_termination(&mut self, _: &mut PointMassWorld) -> HostResult<Value> {
        Ok(Value::Bool(self.reached))
    }
    fn get_truncation(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        Ok(Value::Bool(world.steps() >= EPISODE_WORLD_STEPS))
    }
    fn get_info(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        let mut d = Dict::with_capacity(2);
        d.insert("distance", world.distance_to_goal());
        d.insert("time", world.time());
        Ok(Value::Dict(d))
    }
}

/// The overhead camera (`robot/camera`): captures the arena after every
/// update and after resets (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct PointMassCamera {
    size: usize,
    frame: Option<NdArray>,
}

impl Default for PointMassCamera {
    fn default() -> PointMassCamera {
        PointMassCamera::new(CAMERA_SIZE)
    }
}

impl PointMassCamera {
    /// A camera producing `size × size` RGB images.
    pub fn new(size: usize) -> PointMassCamera {
        PointMassCamera { size, frame: None }
    }

    fn capture(&mut self, world: &PointMassWorld) -> HostResult<NdArray> {
        let frame = world.render_frame(self.size)?;
        self.frame = Some(frame.clone());
        Ok(frame)
    }
}

impl Node<PointMassWorld> for PointMassCamera {
    fn name(&self) -> &str {
        "camera"
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::boxed(
            DType::U8,
            vec![self.size, self.size, 3],
            0.0,
            255.0,
        ))
    }
    fn supported_render_modes(&self) -> Vec<String> {
        vec!["rgb_array".into()]
    }
    fn render_mode(&self) -> Option<String> {
        Some("rgb_array".into())
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        match phase {
            Phase::AfterReset | Phase::AfterReload | Phase::PostStep => vec![CAMERA_PRIORITY],
            Phase::Reset | Phase::Reload | Phase::PreStep => Vec::new(),
        }
    }
    fn post_environment_step(
        &mut self,
        world: &mut PointMassWorld,
        _dt: Option<f64>,
        _priority: i64,
    ) -> HostResult<()> {
        self.capture(world).map(drop)
    }
    fn after_reset(
        &mut self,
        world: &mut PointMassWorld,
        _: i64,
        _: Option<&NdArray>,
    ) -> HostResult<()> {
        self.capture(world).map(drop)
    }
    /// The last captured image (captured now if there is none yet).
    fn get_observation(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        match &self.frame {
            Some(frame) => Ok(Value::Array(frame.clone())),
            None => self.capture(world).map(Value::Array),
        }
    }
    /// A fresh image of the current state.
    fn render(&mut self, world: &mut PointMassWorld) -> HostResult<Value> {
        world.render_frame(self.size).map(Value::Array)
    }
}

/// Builds the `pointmass` env: `WorldEnv(PointMassWorld,
/// CombinedNode("robot", [PointMassBody, PointMassCamera]))`.
///
/// Its action space is the body's (the only actuated child), its context the
/// goal, its observation `{"body": {...}, "camera": image}`, and `render`
/// returns the camera's image.
///
/// ```
/// use unienv_remote::host::{Env, ResetArgs};
/// use unienv_remote::sims::pointmass::make_pointmass;
/// use unienv_remote::{NdArray, Value};
///
/// let mut env = make_pointmass().unwrap();
/// let reset = env.reset(ResetArgs::with_seed(0)).unwrap();
/// let goal: Vec<f32> = reset.context.as_array().unwrap().to_vec().unwrap();
/// let step = env.step(NdArray::from_vec(vec![1.0f32, 0.0]).into()).unwrap();
/// assert!(step.reward.as_f64().unwrap() < 0.0);
/// assert_eq!(goal.len(), 2);
/// ```
pub fn make_pointmass() -> HostResult<WorldEnv<PointMassWorld>> {
    let robot = CombinedNode::new(
        "robot",
        vec![
            Box::new(PointMassBody::new()) as Box<dyn Node<PointMassWorld>>,
            Box::new(PointMassCamera::new(CAMERA_SIZE)),
        ],
    )?;
    // `step` before `reset` is refused (nothing runs), as in every built-in
    // simulator.
    Ok(WorldEnv::new(PointMassWorld::new(), Box::new(robot))?.refusing_step_before_reset())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Env;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn world_at(position: [f64; 2], velocity: [f64; 2]) -> PointMassWorld {
        let mut w = PointMassWorld::new();
        w.reset(&ResetArgs::with_seed(0)).unwrap();
        w.set_body(position, velocity).unwrap();
        w
    }

    fn f32s(v: &Value) -> Vec<f32> {
        v.as_array().unwrap().to_vec().unwrap()
    }

    fn force(x: f32, y: f32) -> Value {
        NdArray::from_vec(vec![x, y]).into()
    }

    #[test]
    fn free_flight_under_force_and_damping() {
        // From rest, F = (1, 0): v' = (F/m − c·0)·dt = 0.01, x' = x + v'·dt.
        let mut w = world_at([0.0, 0.0], [0.0, 0.0]);
        w.set_force([1.0, 0.0]).unwrap();
        assert_eq!(w.step().unwrap(), 0.01);
        assert!(close(w.velocity()[0], 0.01) && w.velocity()[1] == 0.0);
        assert!(close(w.position()[0], 0.0001) && w.position()[1] == 0.0);
        // Second step: a = 1 − 0.5·0.01 = 0.995, v = 0.01 + 0.00995.
        w.step().unwrap();
        assert!(close(w.velocity()[0], 0.01995));
        assert!(close(w.position()[0], 0.0001 + 0.0001995));
        // Without force the velocity decays by (1 − c·dt) per step.
        let mut w = world_at([0.0, 0.0], [0.4, -0.2]);
        for _ in 0..10 {
            w.step().unwrap();
        }
        let decay = (1.0 - DAMPING * WORLD_TIMESTEP).powi(10);
        assert!(close(w.velocity()[0], 0.4 * decay));
        assert!(close(w.velocity()[1], -0.2 * decay));
        // Under a constant force the speed approaches F / (m·c) = 2 m/s:
        // semi-implicit Euler gives v_n = F/(m·c) · (1 − (1 − c·dt)^n).
        let mut w = world_at([0.0, -1.0], [0.0, 0.0]);
        w.set_force([0.0, 1.0]).unwrap();
        for _ in 0..100 {
            w.step().unwrap();
        }
        let v100 = 1.0 / (MASS * DAMPING) * (1.0 - (1.0 - DAMPING * WORLD_TIMESTEP).powi(100));
        assert!(close(w.velocity()[1], v100));
        assert!((v100 - 2.0 * (1.0 - (-0.5f64).exp())).abs() < 2e-3);
        assert_eq!(w.steps(), 100);
        assert!(close(w.time(), 1.0));
        assert!(w.set_force([f64::NAN, 0.0]).is_err());
    }

    #[test]
    fn walls_bounce_elastically() {
        // x = 0.999, v = 1: v' = 0.995, x' = 1.00895 → mirrored to 0.99105.
        let mut w = world_at([0.999, 0.3], [1.0, 0.0]);
        w.step().unwrap();
        assert!(close(w.position()[0], 2.0 - (0.999 + 0.995 * 0.01)));
        assert!(close(w.velocity()[0], -0.995));
        assert!(close(w.position()[1], 0.3));
        // The bottom wall, the same way.
        let mut w = world_at([0.0, -0.995], [0.0, -2.0]);
        w.step().unwrap();
        let v = -2.0 * (1.0 - DAMPING * WORLD_TIMESTEP);
        assert!(close(w.position()[1], -2.0 - (-0.995 + v * 0.01)));
        assert!(close(w.velocity()[1], -v));
        // A corner reflects both components; speed is kept (no loss at walls).
        let mut w = world_at([0.999, 0.999], [1.0, 1.0]);
        w.step().unwrap();
        assert!(w.velocity()[0] < 0.0 && w.velocity()[1] < 0.0);
        assert!(close(
            w.velocity()[0].hypot(w.velocity()[1]),
            0.995 * 2f64.sqrt()
        ));
        // Whatever happens, the body stays inside the arena.
        let mut w = world_at([0.0, 0.0], [150.0, -333.0]);
        for _ in 0..100 {
            w.step().unwrap();
            assert!(w.position().iter().all(|p| p.abs() <= ARENA_HALF_SIZE));
        }
    }

    #[test]
    fn seeded_resets_randomize_start_and_goal_reproducibly() {
        let mut a = PointMassWorld::new();
        let mut b = PointMassWorld::new();
        let mut seen = Vec::new();
        for seed in 0..200 {
            a.reset(&ResetArgs::with_seed(seed)).unwrap();
            b.reset(&ResetArgs::with_seed(seed)).unwrap();
            assert_eq!((a.position(), a.goal()), (b.position(), b.goal()));
            for p in a.position().iter().chain(&a.goal()) {
                assert!(p.abs() <= SPAWN_HALF_SIZE);
            }
            assert!(a.distance_to_goal() >= MIN_START_GOAL_DISTANCE);
            assert_eq!(
                (a.velocity(), a.force(), a.steps()),
                ([0.0; 2], [0.0; 2], 0)
            );
            seen.push((a.position(), a.goal()));
        }
        seen.dedup();
        assert_eq!(seen.len(), 200);
        // Unseeded resets continue the stream.
        a.reset(&ResetArgs::with_seed(5)).unwrap();
        a.reset(&ResetArgs::default()).unwrap();
        b.reset(&ResetArgs::with_seed(5)).unwrap();
        let first = b.goal();
        b.reset(&ResetArgs::default()).unwrap();
        assert_eq!(a.goal(), b.goal());
        assert_ne!(a.goal(), first);
        let masked = ResetArgs {
            mask: Some(NdArray::from_vec(vec![true])),
            ..ResetArgs::default()
        };
        assert!(a.reset(&masked).is_err());
    }

    #[test]
    fn the_composition_and_its_spaces() {
        let env = make_pointmass().unwrap();
        assert_eq!(env.n_update_substeps(), 2);
        assert_eq!(env.n_world_substeps(), 2);
        assert_eq!(env.update_dt(), Some(UPDATE_TIMESTEP));
        assert_eq!(Env::control_timestep(&env), Some(CONTROL_TIMESTEP));
        assert_eq!(env.render_fps(), Some(25));
        assert_eq!(env.render_mode().as_deref(), Some("rgb_array"));
        assert_eq!(
            env.action_space(),
            Some(Space::boxed(DType::F32, vec![2], -1.0, 1.0))
        );
        assert_eq!(
            env.context_space(),
            Some(Space::boxed(DType::F32, vec![2], -1.0, 1.0))
        );
        let body_obs = PointMassBody::new().observation_space().unwrap();
        assert_eq!(
            env.observation_space(),
            Some(Space::dict([
                ("body", body_obs),
                (
                    "camera",
                    Space::boxed(DType::U8, vec![64, 64, 3], 0.0, 255.0)
                ),
            ]))
        );
        let root = env.node();
        assert_eq!(root.name(), "robot");
        assert_eq!(root.child_count(), 2);
        assert_eq!(root.priorities(Phase::PostStep), vec![50, -50]);
        assert_eq!(root.priorities(Phase::PreStep), vec![50]);
        assert_eq!(
            root.priorities(Phase::AfterReset),
            vec![-50, crate::host::RESERVED_PRIORITY]
        );
        let camera = env.get_node(&["camera"]).unwrap();
        assert_eq!(camera.action_space(), None);
        assert_eq!(camera.control_timestep(), None);
        assert!(env.get_node(&["body"]).unwrap().has_reward());
    }

    #[test]
    fn reset_then_steps_towards_the_goal_terminate() {
        let mut env = make_pointmass().unwrap();
        let reset = env.reset(ResetArgs::with_seed(11)).unwrap();
        let goal = f32s(&reset.context);
        let world_goal = env.world().goal();
        assert_eq!(goal, vec![world_goal[0] as f32, world_goal[1] as f32]);
        let body = reset.observation.get("body").unwrap();
        let start = f32s(body.get("position").unwrap());
        assert_eq!(f32s(body.get("velocity").unwrap()), vec![0.0, 0.0]);
        let image = reset.observation.get("camera").unwrap().as_array().unwrap();
        assert_eq!(
            (image.shape(), image.dtype()),
            (&[64, 64, 3][..], DType::U8)
        );
        let d0 = env.world().distance_to_goal();
        let info = reset.info.get("body").unwrap();
        assert_eq!(info.get("distance"), Some(&Value::Float(d0)));
        assert_eq!(info.get("time"), Some(&Value::Float(0.0)));

        // A proportional-derivative push towards the goal.
        let mut pos = start;
        let mut vel = vec![0.0f32; 2];
        let mut last = None;
        let mut frame = Value::Null;
        for i in 0..250 {
            let a: Vec<f32> = (0..2)
                .map(|k| (3.0 * (goal[k] - pos[k]) - 1.5 * vel[k]).clamp(-1.0, 1.0))
                .collect();
            let step = env.step(force(a[0], a[1])).unwrap();
            let body = step.observation.get("body").unwrap();
            pos = f32s(body.get("position").unwrap());
            vel = f32s(body.get("velocity").unwrap());
            frame = step.observation.get("camera").unwrap().clone();
            let d = env.world().distance_to_goal();
            assert!(close(step.reward.as_f64().unwrap(), -d));
            let elapsed = step.info.get("control_step_elapsed_time").unwrap();
            assert!((elapsed.as_f64().unwrap() - 0.04).abs() < 1e-12);
            assert_eq!(
                step.info.get("body").unwrap().get("distance"),
                Some(&Value::Float(d))
            );
            assert_eq!(env.world().steps(), 4 * (i + 1));
            if step.terminated == Value::Bool(true) {
                assert!(d <= GOAL_RADIUS + 0.05, "terminated at {d}");
                last = Some(i);
                break;
            }
            assert_eq!(step.truncated, Value::Bool(false));
        }
        let steps = last.expect("the goal was never reached");
        assert!(steps < 100, "took {steps} steps from {d0} m");
        // The camera's observation is captured after the last update: it
        // equals a fresh rendering, and `render` returns the same picture.
        let now = Value::Array(env.world().render_frame(CAMERA_SIZE).unwrap());
        assert_eq!(frame, now);
        assert_eq!(env.render().unwrap(), now);
    }

    #[test]
    fn pushing_away_never_terminates_and_time_truncates() {
        let mut env = make_pointmass().unwrap();
        env.reset(ResetArgs::with_seed(3)).unwrap();
        // Hold still: only the time limit can end the episode.
        for i in 1..=251u64 {
            let step = env.step(Value::Null).unwrap();
            assert_eq!(step.terminated, Value::Bool(false));
            assert_eq!(step.truncated, Value::Bool(i >= 250), "step {i}");
        }
        assert_eq!(env.world().velocity(), [0.0, 0.0]);
        // Rejected actions say what is expected.
        for bad in [
            Value::Float(1.0),
            force(f32::NAN, 0.0),
            NdArray::from_vec(vec![1.0f32; 3]).into(),
            Value::from("left"),
        ] {
            let e = env.step(bad).unwrap_err();
            assert!(
                e.message().contains("two finite numbers"),
                "{}",
                e.message()
            );
        }
        // Lists work too, and commands are clipped to [-1, 1].
        env.reset(ResetArgs::with_seed(3)).unwrap();
        env.step(Value::list([5.0, -5.0])).unwrap();
        assert_eq!(env.world().force(), [1.0, -1.0]);
    }

    #[test]
    fn goal_termination_is_latched_at_updates() {
        let mut env = make_pointmass().unwrap();
        env.reset(ResetArgs::with_seed(1)).unwrap();
        let goal = env.world().goal();
        // Put the body next to the goal, still: the first step terminates.
        env.world_mut()
            .set_body([goal[0] + 0.05, goal[1]], [0.0, 0.0])
            .unwrap();
        let step = env.step(force(0.0, 0.0)).unwrap();
        assert_eq!(step.terminated, Value::Bool(true));
        assert!(close(step.reward.as_f64().unwrap(), -0.05));
        // Flying through the goal region within a control step counts.
        env.reset(ResetArgs::with_seed(1)).unwrap();
        env.world_mut()
            .set_body([goal[0] - 0.12, goal[1]], [6.0, 0.0])
            .unwrap();
        let step = env.step(force(0.0, 0.0)).unwrap();
        assert!(env.world().distance_to_goal() > GOAL_RADIUS);
        assert_eq!(step.terminated, Value::Bool(true));
        // And a reset clears it.
        let r = env.reset(ResetArgs::with_seed(1)).unwrap();
        assert!(r.context.as_array().is_some());
        assert_eq!(
            env.step(force(0.0, 0.0)).unwrap().terminated,
            Value::Bool(false)
        );
    }

    #[test]
    fn the_camera_draws_goal_and_body() {
        let mut w = world_at([-0.5, -0.5], [0.0, 0.0]);
        w.set_goal([0.5, 0.5]).unwrap();
        let frame = w.render_frame(64).unwrap();
        let px: Vec<u8> = frame.to_vec().unwrap();
        let at = |col: usize, row: usize| {
            let i = (row * 64 + col) * 3;
            [px[i], px[i + 1], px[i + 2]]
        };
        // (0.5, 0.5) is pixel (48, 16); (−0.5, −0.5) is pixel (16, 48).
        assert_eq!(at(48, 16), [40, 200, 80]);
        assert_eq!(at(16, 48), [230, 60, 50]);
        assert_eq!(at(32, 32), [32, 32, 40]);
        assert_eq!(at(0, 10), [170, 170, 170]);
        assert_eq!(at(63, 63), [170, 170, 170]);
        // Moving the body moves its disk.
        w.set_body([0.0, 0.0], [0.0, 0.0]).unwrap();
        let moved: Vec<u8> = w.render_frame(64).unwrap().to_vec().unwrap();
        let i = (32 * 64 + 32) * 3;
        assert_eq!(&moved[i..i + 3], &[230, 60, 50]);
        assert_ne!(moved, px);

        // Through the nodes: the observation is captured at the camera's
        // hooks, not at read time.
        let mut camera = PointMassCamera::default();
        let mut w = world_at([-0.5, -0.5], [0.0, 0.0]);
        camera.after_reset(&mut w, CAMERA_PRIORITY, None).unwrap();
        let captured = camera.get_observation(&mut w).unwrap();
        w.set_body([0.5, -0.5], [0.0, 0.0]).unwrap();
        assert_eq!(camera.get_observation(&mut w).unwrap(), captured);
        assert_ne!(camera.render(&mut w).unwrap(), captured);
        camera
            .post_environment_step(&mut w, None, CAMERA_PRIORITY)
            .unwrap();
        assert_eq!(
            camera.get_observation(&mut w).unwrap(),
            camera.render(&mut w).unwrap()
        );
    }
}
