//! `cartpole`: Gymnasium's `CartPole-v1`, step for step.
//!
//! A pole is hinged on a cart that moves along a frictionless track; the
//! agent pushes the cart left (action 0) or right (action 1) with a fixed
//! force. The dynamics, constants, thresholds, reward and the 500-step time
//! limit are those of `gymnasium.envs.classic_control.CartPoleEnv` wrapped in
//! `TimeLimit(max_episode_steps=500)`, as `gymnasium.make("CartPole-v1")`
//! builds it:
//!
//! - state `(x, ẋ, θ, θ̇)` in `f64`, observed as float32 `(4,)`;
//! - Euler integration with `tau = 0.02` s;
//! - terminated when `|x| > 2.4` or `|θ| > 12°` (`12·2π/360` rad);
//! - reward 1.0 on every step up to and including the terminating one,
//!   0.0 on steps taken after termination (stepping on is allowed and keeps
//!   integrating; Gymnasium's warning is not reproduced);
//! - truncated from the 500th step after a reset on;
//! - a reset draws each state component uniformly in `[-0.05, 0.05)` (or in
//!   `[low, high)` from `options={"low": .., "high": ..}`), from a
//!   [`SplitMix64`] reseeded by `seed`; unseeded resets continue the stream.
//!
//! The action space is a UniEnv `BoxSpace` of dtype int64 and shape `()` from
//! 0 to 1 (Gymnasium's `Discrete(2)` has no UniEnv counterpart).

use super::raster::Canvas;
use super::rng::SplitMix64;
use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};
use crate::host::space::BoxSpace;
use crate::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};

/// Gravitational acceleration (m/s²).
pub const GRAVITY: f64 = 9.8;
/// Mass of the cart (kg).
pub const MASS_CART: f64 = 1.0;
/// Mass of the pole (kg).
pub const MASS_POLE: f64 = 0.1;
/// Cart plus pole.
pub const TOTAL_MASS: f64 = MASS_POLE + MASS_CART;
/// Half the pole's length (m).
pub const LENGTH: f64 = 0.5;
/// Pole mass times half-length.
pub const POLEMASS_LENGTH: f64 = MASS_POLE * LENGTH;
/// Magnitude of the push (N).
pub const FORCE_MAG: f64 = 10.0;
/// Seconds between state updates.
pub const TAU: f64 = 0.02;
/// The episode terminates when `|θ|` exceeds this (12° in radians).
pub const THETA_THRESHOLD_RADIANS: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
/// The episode terminates when `|x|` exceeds this (m).
pub const X_THRESHOLD: f64 = 2.4;
/// Steps after which an episode is truncated (`CartPole-v1`'s time limit).
pub const MAX_EPISODE_STEPS: u64 = 500;
/// Frames per second of the rendering (`1 / TAU`).
pub const RENDER_FPS: i64 = 50;
/// Width of rendered frames (pixels).
pub const FRAME_WIDTH: usize = 300;
/// Height of rendered frames (pixels).
pub const FRAME_HEIGHT: usize = 200;

/// Gymnasium's CartPole-v1 (see the [module documentation](self)).
///
/// ```
/// use unienv_remote::host::{Env, ResetArgs};
/// use unienv_remote::sims::CartPole;
/// use unienv_remote::Value;
///
/// let mut env = CartPole::new();
/// let reset = env.reset(ResetArgs::with_seed(0)).unwrap();
/// assert_eq!(reset.observation.as_array().unwrap().shape(), &[4]);
/// let step = env.step(Value::Int(1)).unwrap();
/// assert_eq!(step.reward, Value::Float(1.0));
/// ```
#[derive(Debug, Clone)]
pub struct CartPole {
    state: Option<[f64; 4]>,
    rng: SplitMix64,
    elapsed_steps: u64,
    steps_beyond_terminated: Option<u64>,
}

impl Default for CartPole {
    fn default() -> CartPole {
        CartPole::new()
    }
}

impl CartPole {
    /// A cart-pole that has not been reset yet; its generator starts from
    /// entropy until a reset passes a seed.
    pub fn new() -> CartPole {
        CartPole {
            state: None,
            rng: SplitMix64::from_entropy(),
            elapsed_steps: 0,
            steps_beyond_terminated: None,
        }
    }

    /// The physical state `[x, ẋ, θ, θ̇]`, `None` before the first reset.
    pub fn state(&self) -> Option<[f64; 4]> {
        self.state
    }

    /// Overwrites the physical state (as assigning `env.unwrapped.state` does
    /// in Gymnasium); the step counters are left alone.
    pub fn set_state(&mut self, state: [f64; 4]) {
        self.state = Some(state);
    }

    /// Steps taken since the last reset.
    pub fn elapsed_steps(&self) -> u64 {
        self.elapsed_steps
    }

    /// One Euler step of the dynamics from `state` under `force`.
    pub fn dynamics(state: [f64; 4], force: f64) -> [f64; 4] {
        let [x, x_dot, theta, theta_dot] = state;
        let (sintheta, costheta) = theta.sin_cos();
        let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASS_POLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
        [
            x + TAU * x_dot,
            x_dot + TAU * xacc,
            theta + TAU * theta_dot,
            theta_dot + TAU * thetaacc,
        ]
    }

    /// Whether `state` is outside the allowed region.
    // Written as Gymnasium's comparisons (a NaN component does not terminate).
    #[allow(clippy::manual_range_contains)]
    pub fn is_terminal(state: [f64; 4]) -> bool {
        let [x, _, theta, _] = state;
        x < -X_THRESHOLD
            || x > X_THRESHOLD
            || theta < -THETA_THRESHOLD_RADIANS
            || theta > THETA_THRESHOLD_RADIANS
    }

    /// Draws the scene: white background, black track and cart, a brown pole
    /// and a blue axle, at half the size of Gymnasium's 600×400 pygame frame.
    pub fn render_frame(state: [f64; 4]) -> HostResult<NdArray> {
        let (w, h) = (FRAME_WIDTH as f64, FRAME_HEIGHT as f64);
        let scale = w / (X_THRESHOLD * 2.0);
        let pole_width = 5.0;
        let pole_len = scale * (2.0 * LENGTH);
        let (cart_width, cart_height) = (25.0, 15.0);
        let cart_y = 50.0; // height of the track above the bottom edge
        let axle_offset = cart_height / 4.0;
        let [x, _, theta, _] = state;
        let cart_x = x * scale + w / 2.0;
        // Gymnasium draws with y upwards, then flips: image y = h - y.
        let flip = |(px, py): (f64, f64)| (px, h - py);

        let mut canvas = Canvas::new(FRAME_WIDTH, FRAME_HEIGHT, [255, 255, 255]);
        canvas.fill_rect(
            cart_x - cart_width / 2.0,
            h - (cart_y + cart_height / 2.0),
            cart_x + cart_width / 2.0,
            h - (cart_y - cart_height / 2.0),
            [0, 0, 0],
        );
        let (l, r) = (-pole_width / 2.0, pole_width / 2.0);
        let (t, b) = (pole_len - pole_width / 2.0, -pole_width / 2.0);
        let (sin, cos) = theta.sin_cos();
        // Rotation by -θ (pygame's rotate_rad), then translation to the axle.
        let corner = |(px, py): (f64, f64)| {
            flip((
                px * cos + py * sin + cart_x,
                -px * sin + py * cos + cart_y + axle_offset,
            ))
        };
        let pole = [
            corner((l, b)),
            corner((l, t)),
            corner((r, t)),
            corner((r, b)),
        ];
        canvas.fill_convex(&pole, [202, 152, 101]);
        let (ax, ay) = flip((cart_x, cart_y + axle_offset));
        canvas.fill_disk(ax, ay, pole_width / 2.0, [129, 132, 203]);
        canvas.hline(FRAME_HEIGHT - 1 - cart_y as usize, [0, 0, 0]);
        Ok(canvas.into_array()?)
    }

    fn observation(state: [f64; 4]) -> NdArray {
        NdArray::from_vec(state.iter().map(|&v| v as f32).collect::<Vec<f32>>())
    }
}

/// Reads a cart-pole action: 0 or 1 as a Python int, a NumPy integer scalar
/// (a 0-d array) or any one-element integer array.
pub fn parse_action(action: &Value) -> HostResult<i64> {
    const EXPECTED: &str =
        "cartpole's action must be 0 or 1 (a Python int, a NumPy integer or a one-element integer array)";
    let (value, shown) = match action {
        Value::Int(_) | Value::UInt(_) => {
            let v = action.as_i64();
            (v.map(|v| v as f64), v.map(|v| v.to_string()))
        }
        Value::Array(a)
            if a.len() == 1 && matches!(a.dtype().kind(), ScalarKind::Int | ScalarKind::UInt) =>
        {
            (a.get_f64(0), a.format_element(0))
        }
        Value::Array(a) => {
            return Err(HostError::invalid_argument(format!(
                "{EXPECTED}, got an array of dtype {} and shape {:?}",
                a.dtype().name(),
                a.shape()
            )))
        }
        other => {
            return Err(HostError::invalid_argument(format!(
                "{EXPECTED}, got {}",
                other.type_name()
            )))
        }
    };
    match value {
        Some(0.0) => Ok(0),
        Some(1.0) => Ok(1),
        _ => Err(HostError::invalid_argument(format!(
            "{EXPECTED}, got {}",
            shown.unwrap_or_else(|| "an out-of-range integer".into())
        ))),
    }
}

/// Reset bounds from Gymnasium's `options={"low": .., "high": ..}`.
fn reset_bounds(args: &ResetArgs) -> HostResult<(f64, f64)> {
    let (mut low, mut high) = (-0.05, 0.05);
    for (key, value) in args.kwargs.iter() {
        if key != "options" {
            return Err(HostError::invalid_argument(format!(
                "reset() got an unexpected keyword argument '{key}'"
            )));
        }
        match value {
            Value::Null => {}
            Value::Dict(options) => {
                let number = |name: &str, default: f64| -> HostResult<f64> {
                    match options.get(name) {
                        None => Ok(default),
                        Some(v) => v
                            .as_scalar_f64()
                            .filter(|x| x.is_finite() && !matches!(v, Value::Bool(_)))
                            .ok_or_else(|| {
                                HostError::invalid_argument(format!(
                                    "options[{name:?}] must be a finite number, got {}",
                                    v.type_name()
                                ))
                            }),
                    }
                };
                low = number("low", low)?;
                high = number("high", high)?;
            }
            other => {
                return Err(HostError::invalid_argument(format!(
                    "options must be a dict or None, got {}",
                    other.type_name()
                )))
            }
        }
    }
    if low > high {
        return Err(HostError::invalid_argument(format!(
            "Lower bound ({low}) must be lower than higher bound ({high})."
        )));
    }
    Ok((low, high))
}

impl Env for CartPole {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        if args.mask.is_some() {
            return Err(HostError::invalid_argument(
                "cartpole is not batched: reset takes no mask",
            ));
        }
        let (low, high) = reset_bounds(&args)?;
        if let Some(seed) = args.seed {
            self.rng = SplitMix64::from_seed(seed);
        }
        let state = [(); 4].map(|_| self.rng.uniform(low, high));
        self.state = Some(state);
        self.elapsed_steps = 0;
        self.steps_beyond_terminated = None;
        Ok(ResetResult::new(
            (),
            CartPole::observation(state),
            Dict::new(),
        ))
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        // Refusals before anything changes: the env stays usable.
        let state = self
            .state
            .ok_or_else(|| HostError::invalid_argument(crate::host::STEP_BEFORE_RESET))?;
        let action = parse_action(&action)?;
        let force = if action == 1 { FORCE_MAG } else { -FORCE_MAG };
        let state = CartPole::dynamics(state, force);
        self.state = Some(state);
        let terminated = CartPole::is_terminal(state);
        let reward = if !terminated {
            1.0
        } else if let Some(beyond) = self.steps_beyond_terminated.as_mut() {
            *beyond += 1;
            0.0
        } else {
            self.steps_beyond_terminated = Some(0);
            1.0
        };
        self.elapsed_steps += 1;
        let truncated = self.elapsed_steps >= MAX_EPISODE_STEPS;
        Ok(StepResult::new(
            CartPole::observation(state),
            reward,
            terminated,
            truncated,
            Dict::new(),
        ))
    }

    fn render(&mut self) -> HostResult<Value> {
        match self.state {
            None => Ok(Value::Null),
            Some(state) => Ok(Value::Array(CartPole::render_frame(state)?)),
        }
    }

    fn action_space(&self) -> Option<Space> {
        Some(Space::boxed(DType::I64, vec![], 0.0, 1.0))
    }

    fn observation_space(&self) -> Option<Space> {
        let high = [
            (X_THRESHOLD * 2.0) as f32,
            f32::INFINITY,
            (THETA_THRESHOLD_RADIANS * 2.0) as f32,
            f32::INFINITY,
        ];
        Some(Space::Box(BoxSpace {
            shape: vec![4],
            low: NdArray::from_vec(high.iter().map(|v| -v).collect::<Vec<f32>>()),
            high: NdArray::from_vec(high.to_vec()),
            dtype: DType::F32,
        }))
    }

    fn render_mode(&self) -> Option<String> {
        Some("rgb_array".into())
    }

    fn render_fps(&self) -> Option<i64> {
        Some(RENDER_FPS)
    }

    fn metadata(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("render_modes", Value::list(["rgb_array"]));
        d.insert("render_fps", RENDER_FPS);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostErrorKind;

    fn obs_of(v: &Value) -> Vec<f32> {
        v.as_array().unwrap().to_vec::<f32>().unwrap()
    }

    fn assert_close(a: [f64; 4], b: [f64; 4], tol: f64) {
        for i in 0..4 {
            assert!((a[i] - b[i]).abs() <= tol, "component {i}: {a:?} vs {b:?}");
        }
    }

    #[test]
    fn first_step_from_rest_by_hand() {
        // From the upright rest state, pushing right (F = +10 N):
        // temp = F / (m_c + m_p) = 10 / 1.1
        // θ̈ = (g sin 0 − cos 0 · temp) / (l (4/3 − m_p cos² 0 / (m_c + m_p)))
        //    = −(10/1.1) / (0.5 (4/3 − 0.1/1.1))
        // ẍ = temp − m_p l θ̈ cos 0 / (m_c + m_p)
        let temp: f64 = 10.0 / 1.1;
        let thetaacc = -temp / (0.5 * (4.0 / 3.0 - 0.1 / 1.1));
        let xacc = temp - 0.05 * thetaacc / 1.1;
        assert!((thetaacc - (-14.634146341463415)).abs() < 1e-12);
        assert!((xacc - 9.75609756097561).abs() < 1e-12);
        let next = CartPole::dynamics([0.0; 4], FORCE_MAG);
        // Euler: positions move with the old velocities (zero), velocities
        // with the accelerations.
        assert_close(next, [0.0, 0.02 * xacc, 0.0, 0.02 * thetaacc], 1e-15);
        // Pushing left mirrors it.
        let left = CartPole::dynamics([0.0; 4], -FORCE_MAG);
        assert_close(left, [0.0, -0.02 * xacc, 0.0, -0.02 * thetaacc], 1e-15);
    }

    #[test]
    fn trajectory_matches_gymnasium() {
        // Recorded from gymnasium 1.4.0: `gym.make("CartPole-v1")`, reset,
        // `env.unwrapped.state = [0.01, -0.02, 0.03, 0.04]`, then these actions.
        let actions = [1, 0, 0, 1, 1, 1, 0, 1, 0, 0];
        let expected: [[f64; 4]; 10] = [
            [
                0.009600000000000001,
                0.17467919574755525,
                0.030799999999999998,
                -0.2430687179600081,
            ],
            [
                0.013093583914951107,
                -0.020868848948191993,
                0.025938625640799837,
                0.0591679999394166,
            ],
            [
                0.012676206935987267,
                -0.21635292104612766,
                0.02712198563958817,
                0.3599205713784138,
            ],
            [
                0.008349148515064714,
                -0.021626799199488206,
                0.03432039706715644,
                0.0759116989474441,
            ],
            [
                0.00791661253107495,
                0.17298676004769037,
                0.035838631046105324,
                -0.20574851582677406,
            ],
            [
                0.011376347732028757,
                0.3675783725675468,
                0.03172366072956984,
                -0.4869142013445082,
            ],
            [
                0.01872791518337969,
                0.17202349486382784,
                0.02198537670267968,
                -0.18440428392099584,
            ],
            [
                0.022168385080656248,
                0.36682408600495897,
                0.01829729102425976,
                -0.4700713747851109,
            ],
            [
                0.02950486680075543,
                0.1714485132472654,
                0.008895863528557544,
                -0.17167796834313398,
            ],
            [
                0.03293383706570074,
                -0.02379962460232901,
                0.0054623041616948635,
                0.12379799946559022,
            ],
        ];
        let mut env = CartPole::new();
        env.reset(ResetArgs::with_seed(0)).unwrap();
        env.set_state([0.01, -0.02, 0.03, 0.04]);
        for (a, want) in actions.iter().zip(expected) {
            let step = env.step(Value::Int(*a)).unwrap();
            assert_close(env.state().unwrap(), want, 1e-14);
            let obs = obs_of(&step.observation);
            assert_eq!(obs, want.map(|v| v as f32).to_vec());
            assert_eq!(step.reward, Value::Float(1.0));
            assert_eq!(step.terminated, Value::Bool(false));
            assert_eq!(step.truncated, Value::Bool(false));
            assert!(step.info.is_empty());
        }
    }

    #[test]
    fn termination_rewards_the_falling_step_then_nothing() {
        // gymnasium 1.4.0 from [0, 0, 0.15, 0.5], pushing left every step.
        let expected: [([f64; 4], f64, bool); 6] = [
            (
                [0.0, -0.19688288629351874, 0.16, 0.8359429665086409],
                1.0,
                false,
            ),
            (
                [
                    -0.003937657725870375,
                    -0.3937861968022097,
                    0.1767188593301728,
                    1.174364999734973,
                ],
                1.0,
                false,
            ),
            (
                [
                    -0.01181338166191457,
                    -0.5907082595473366,
                    0.20020615932487226,
                    1.5168330863560202,
                ],
                1.0,
                false,
            ),
            (
                [
                    -0.0236275468528613,
                    -0.787609139002748,
                    0.23054282105199267,
                    1.8647531246675373,
                ],
                1.0,
                true,
            ),
            (
                [
                    -0.03937972963291626,
                    -0.9843944520492429,
                    0.26783788354534344,
                    2.219302192136438,
                ],
                0.0,
                true,
            ),
            (
                [
                    -0.05906761867390112,
                    -1.1808978019735659,
                    0.3122239273880722,
                    2.581354055887729,
                ],
                0.0,
                true,
            ),
        ];
        let mut env = CartPole::new();
        env.reset(ResetArgs::with_seed(1)).unwrap();
        env.set_state([0.0, 0.0, 0.15, 0.5]);
        for (want, reward, terminated) in expected {
            let step = env.step(Value::Int(0)).unwrap();
            assert_close(env.state().unwrap(), want, 1e-14);
            assert_eq!(step.reward, Value::Float(reward));
            assert_eq!(step.terminated, Value::Bool(terminated));
        }
        // A reset clears the post-termination bookkeeping.
        env.reset(ResetArgs::default()).unwrap();
        assert_eq!(env.step(Value::Int(0)).unwrap().reward, Value::Float(1.0));
        // The cart leaving the track terminates too, on either side.
        assert!(CartPole::is_terminal([2.41, 0.0, 0.0, 0.0]));
        assert!(CartPole::is_terminal([-2.41, 0.0, 0.0, 0.0]));
        assert!(!CartPole::is_terminal([2.4, 0.0, 0.0, 0.0]));
        assert!(CartPole::is_terminal([0.0, 0.0, -0.21, 0.0]));
        assert!(!CartPole::is_terminal([0.0, 0.0, 0.2094, 0.0]));
        assert!((THETA_THRESHOLD_RADIANS - 0.20943951023931953).abs() < 1e-17);
    }

    #[test]
    fn truncation_at_500_steps() {
        let mut env = CartPole::new();
        env.reset(ResetArgs::with_seed(2)).unwrap();
        for i in 1..=MAX_EPISODE_STEPS + 2 {
            // Keep the pole upright so that only the time limit can end it.
            env.set_state([0.0; 4]);
            let step = env.step(Value::Int((i % 2) as i64)).unwrap();
            assert_eq!(step.terminated, Value::Bool(false));
            assert_eq!(step.truncated, Value::Bool(i >= 500), "step {i}");
            assert_eq!(step.reward, Value::Float(1.0));
        }
        assert_eq!(env.elapsed_steps(), 502);
        env.reset(ResetArgs::default()).unwrap();
        assert_eq!(env.elapsed_steps(), 0);
        assert_eq!(
            env.step(Value::Int(1)).unwrap().truncated,
            Value::Bool(false)
        );
    }

    #[test]
    fn seeded_resets_are_reproducible_and_unseeded_ones_continue_the_stream() {
        let mut a = CartPole::new();
        let mut b = CartPole::new();
        let first = obs_of(&a.reset(ResetArgs::with_seed(123)).unwrap().observation);
        assert_eq!(
            first,
            obs_of(&b.reset(ResetArgs::with_seed(123)).unwrap().observation)
        );
        assert!(first.iter().all(|v| (-0.05..0.05).contains(v)));
        assert_ne!(
            first,
            obs_of(&b.reset(ResetArgs::with_seed(124)).unwrap().observation)
        );
        // The state is the generator's next four uniforms in [-0.05, 0.05).
        let mut g = SplitMix64::from_seed(123);
        let want: Vec<f32> = (0..4).map(|_| g.uniform(-0.05, 0.05) as f32).collect();
        assert_eq!(first, want);
        let next = obs_of(&a.reset(ResetArgs::default()).unwrap().observation);
        let want: Vec<f32> = (0..4).map(|_| g.uniform(-0.05, 0.05) as f32).collect();
        assert_eq!(next, want);
        assert_ne!(next, first);
        b.reset(ResetArgs::with_seed(123)).unwrap();
        assert_eq!(
            next,
            obs_of(&b.reset(ResetArgs::default()).unwrap().observation)
        );
        // Steps do not draw random numbers: a seeded episode replays exactly.
        let run = |env: &mut CartPole| -> Vec<Vec<f32>> {
            env.reset(ResetArgs::with_seed(9)).unwrap();
            (0..20)
                .map(|i| obs_of(&env.step(Value::Int(i % 3 % 2)).unwrap().observation))
                .collect()
        };
        assert_eq!(run(&mut a), run(&mut b));
        // Negative seeds are seeds too.
        let neg = obs_of(&a.reset(ResetArgs::with_seed(-5)).unwrap().observation);
        assert_eq!(
            neg,
            obs_of(&b.reset(ResetArgs::with_seed(-5)).unwrap().observation)
        );
    }

    #[test]
    fn reset_options_and_arguments() {
        let mut env = CartPole::new();
        let mut args = ResetArgs::with_seed(0);
        args.kwargs
            .insert("options", Dict::new().with("low", -0.2).with("high", -0.1));
        let obs = obs_of(&env.reset(args).unwrap().observation);
        assert!(obs.iter().all(|v| (-0.2..-0.1).contains(v)), "{obs:?}");
        let mut args = ResetArgs::default();
        args.kwargs.insert("options", Value::Null);
        env.reset(args).unwrap();
        let mut bad = ResetArgs::default();
        bad.kwargs.insert("options", Dict::new().with("low", 0.3));
        assert_eq!(
            env.reset(bad).unwrap_err().kind(),
            HostErrorKind::InvalidArgument
        );
        let mut bad = ResetArgs::default();
        bad.kwargs.insert("bogus", 1);
        assert!(env.reset(bad).unwrap_err().message().contains("bogus"));
        let bad = ResetArgs {
            mask: Some(NdArray::from_vec(vec![true])),
            ..ResetArgs::default()
        };
        assert!(env.reset(bad).is_err());
    }

    #[test]
    fn actions_in_every_accepted_form_and_clear_errors_otherwise() {
        assert_eq!(parse_action(&Value::Int(0)).unwrap(), 0);
        assert_eq!(parse_action(&Value::Int(1)).unwrap(), 1);
        assert_eq!(parse_action(&NdArray::scalar(1i64).into()).unwrap(), 1);
        assert_eq!(parse_action(&NdArray::scalar(0i32).into()).unwrap(), 0);
        assert_eq!(
            parse_action(&NdArray::from_vec(vec![1u8]).into()).unwrap(),
            1
        );
        let nested = NdArray::from_shape_vec(vec![1, 1], vec![1i64]).unwrap();
        assert_eq!(parse_action(&nested.into()).unwrap(), 1);
        let bad: Vec<Value> = vec![
            Value::Int(2),
            Value::Int(-1),
            Value::UInt(u64::MAX),
            Value::Float(1.0),
            Value::Bool(true),
            Value::Null,
            Value::from("1"),
            NdArray::scalar(1.0f32).into(),
            NdArray::from_vec(vec![0i64, 1]).into(),
            NdArray::scalar(7i64).into(),
            NdArray::from_vec(vec![true]).into(),
            Value::list([1]),
        ];
        for action in bad {
            let e = parse_action(&action).unwrap_err();
            assert_eq!(e.kind(), HostErrorKind::InvalidArgument, "{action:?}");
            assert!(e.message().contains("must be 0 or 1"), "{}", e.message());
        }
        let e = parse_action(&Value::Int(7)).unwrap_err();
        assert!(e.message().ends_with("got 7"), "{}", e.message());
        // A rejected action changes nothing.
        let mut env = CartPole::new();
        env.reset(ResetArgs::with_seed(0)).unwrap();
        let before = env.state();
        assert!(env.step(Value::Float(0.5)).is_err());
        assert_eq!(env.state(), before);
        assert_eq!(env.elapsed_steps(), 0);
    }

    #[test]
    fn stepping_before_reset_fails() {
        let mut env = CartPole::new();
        let e = env.step(Value::Int(1)).unwrap_err();
        assert_eq!(e.kind(), HostErrorKind::InvalidArgument);
        assert!(e.message().contains("reset"));
        assert_eq!(env.render().unwrap(), Value::Null);
    }

    #[test]
    fn spaces_and_attributes_follow_gymnasium() {
        let env = CartPole::new();
        let obs = env.observation_space().unwrap().to_value();
        let inf = f64::INFINITY;
        // Gymnasium's float32 bounds: [4.8, inf, 0.41887903, inf].
        let high = [4.800000190734863, inf, 0.41887903213500977, inf];
        assert_eq!(obs.get("type"), Some(&Value::from("BoxSpace")));
        assert_eq!(obs.get("shape"), Some(&Value::tuple([4])));
        assert_eq!(obs.get("high"), Some(&Value::list(high)));
        assert_eq!(obs.get("low"), Some(&Value::list(high.map(|v| -v))));
        assert_eq!(obs.get("dtype"), Some(&Value::from("float32")));
        let act = env.action_space().unwrap().to_value();
        assert_eq!(act.get("shape"), Some(&Value::tuple(Vec::<i64>::new())));
        assert_eq!(act.get("low"), Some(&Value::Int(0)));
        assert_eq!(act.get("high"), Some(&Value::Int(1)));
        assert_eq!(act.get("dtype"), Some(&Value::from("int64")));
        assert_eq!(env.render_mode().as_deref(), Some("rgb_array"));
        assert_eq!(env.render_fps(), Some(50));
        let meta = env.metadata();
        assert_eq!(meta.get("render_modes"), Some(&Value::list(["rgb_array"])));
        assert_eq!(meta.get("render_fps"), Some(&Value::Int(50)));
        assert_eq!(env.context_space(), None);
        assert_eq!(env.batch_size(), None);
    }

    fn pixel(frame: &NdArray, row: usize, col: usize) -> [u8; 3] {
        let v: Vec<u8> = frame.to_vec().unwrap();
        let i = (row * FRAME_WIDTH + col) * 3;
        [v[i], v[i + 1], v[i + 2]]
    }

    #[test]
    fn renders_the_cart_and_the_pole() {
        const POLE: [u8; 3] = [202, 152, 101];
        let upright = CartPole::render_frame([0.0; 4]).unwrap();
        assert_eq!(upright.shape(), &[FRAME_HEIGHT, FRAME_WIDTH, 3]);
        assert_eq!(upright.dtype(), DType::U8);
        // Track: the row 50 px above the bottom, full width.
        assert_eq!(pixel(&upright, 149, 0), [0, 0, 0]);
        assert_eq!(pixel(&upright, 149, 299), [0, 0, 0]);
        // Cart centred at x = 150, rows 143..157; sky above and around.
        assert_eq!(pixel(&upright, 155, 140), [0, 0, 0]);
        assert_eq!(pixel(&upright, 155, 125), [255, 255, 255]);
        assert_eq!(pixel(&upright, 20, 20), [255, 255, 255]);
        // The upright pole rises ~60 px above the axle (row ~146).
        assert_eq!(pixel(&upright, 100, 150), POLE);
        assert_eq!(pixel(&upright, 90, 150), POLE);
        assert_eq!(pixel(&upright, 100, 155), [255, 255, 255]);
        // Tilted right by 0.3 rad, the pole's upper part is right of centre.
        let tilted = CartPole::render_frame([0.0, 0.0, 0.3, 0.0]).unwrap();
        let (s, c) = 0.3f64.sin_cos();
        let (col, row) = (150.0 + 50.0 * s, 146.25 - 50.0 * c);
        assert_eq!(pixel(&tilted, row as usize, col as usize), POLE);
        assert_eq!(pixel(&tilted, row as usize, 150), [255, 255, 255]);
        // Moving the cart moves the drawing: x = 1 is 62.5 px to the right.
        let moved = CartPole::render_frame([1.0, 0.0, 0.0, 0.0]).unwrap();
        assert_eq!(pixel(&moved, 155, 212), [0, 0, 0]);
        assert_eq!(pixel(&moved, 155, 150), [255, 255, 255]);
        assert_eq!(pixel(&moved, 100, 212), POLE);
        // Far off-screen states still render (just the track).
        let gone = CartPole::render_frame([100.0, 0.0, 0.0, 0.0]).unwrap();
        assert_eq!(pixel(&gone, 155, 150), [255, 255, 255]);
        // Through the env: after a reset, `render` returns the frame.
        let mut env = CartPole::new();
        env.reset(ResetArgs::with_seed(0)).unwrap();
        let frame = env.render().unwrap();
        assert_eq!(frame.as_array().unwrap().shape(), &[200, 300, 3]);
    }
}
