//! Simulators and helpers for the fault tests: a gate that holds a hosted
//! call until the test opens it, an env that blocks, fails or panics on
//! command, and an env wrapper that counts closes.
#![allow(dead_code)]

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
use unienv_remote::{Dict, NdArray, Value};

/// Holds hosted calls until opened; counts the calls that reached it.
#[derive(Default)]
pub struct Gate {
    state: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Gate {
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    /// Called by a simulator: waits until the gate is open.
    pub fn pass(&self) {
        let mut s = self.state.lock();
        s.1 += 1;
        self.cv.notify_all();
        while !s.0 {
            self.cv.wait(&mut s);
        }
    }

    /// Lets every held and future call through.
    pub fn open(&self) {
        self.state.lock().0 = true;
        self.cv.notify_all();
    }

    /// How many calls reached the gate.
    pub fn reached(&self) -> usize {
        self.state.lock().1
    }

    /// Waits (without blocking the runtime) until `n` calls reached it.
    pub async fn wait_reached(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.reached() < n {
            assert!(Instant::now() < deadline, "no call reached the gate");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// An env whose state is one number: reset sets it to the seed, step adds
/// the action. Action 5 waits at the gate first; 7 panics; -1 fails.
pub struct GatedEnv {
    pub gate: Arc<Gate>,
    pub value: f64,
}

impl GatedEnv {
    pub fn new(gate: Arc<Gate>) -> GatedEnv {
        GatedEnv { gate, value: 0.0 }
    }
}

impl Env for GatedEnv {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.value = args.seed.unwrap_or(0) as f64;
        Ok(ResetResult::new(
            (),
            NdArray::from_vec(vec![self.value]),
            Dict::new(),
        ))
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let a = action
            .as_scalar_f64()
            .ok_or_else(|| HostError::new("action must be a number"))?;
        if a == 5.0 {
            self.gate.pass();
        }
        if a == 7.0 {
            panic!("simulator exploded");
        }
        if a == -1.0 {
            return Err(HostError::new("physics diverged"));
        }
        self.value += a;
        Ok(StepResult::new(
            NdArray::from_vec(vec![self.value]),
            self.value,
            false,
            false,
            Dict::new(),
        ))
    }
    fn render(&mut self) -> HostResult<Value> {
        Ok(Value::Float(self.value))
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
}

/// Forwards to an env and counts its closes (and, optionally, panics in close).
pub struct CountClose<E: Env> {
    pub inner: E,
    pub closes: Arc<AtomicUsize>,
    pub panic_on_close: bool,
}

impl<E: Env> Env for CountClose<E> {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.inner.reset(args)
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.inner.step(action)
    }
    fn render(&mut self) -> HostResult<Value> {
        self.inner.render()
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
        self.inner.close();
        if self.panic_on_close {
            panic!("close exploded");
        }
    }
    fn action_space(&self) -> Option<Space> {
        self.inner.action_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.inner.observation_space()
    }
    fn context_space(&self) -> Option<Space> {
        self.inner.context_space()
    }
}

/// `[v, v]` as float32, the fixture counter's action and position.
pub fn pair(v: f32) -> Value {
    Value::Array(NdArray::from_vec(vec![v, v]))
}

/// The float64 elements of an array value (empty otherwise).
pub fn numbers(v: Option<&Value>) -> Vec<f64> {
    v.and_then(Value::as_array)
        .map(NdArray::to_f64_vec)
        .unwrap_or_default()
}

/// The revision and sequence of the descriptor of `id` in a call or
/// complete result.
pub fn revision_of(result: &Value, id: &str) -> (u64, u64) {
    let descriptors = result
        .get("descriptors")
        .or(Some(result))
        .and_then(Value::as_seq)
        .expect("descriptors");
    let d = descriptors
        .iter()
        .find(|d| d.get("id").and_then(Value::as_str) == Some(id))
        .unwrap_or_else(|| panic!("no descriptor of {id}"));
    (
        d.get("revision").and_then(Value::as_u64).expect("revision"),
        d.get("sequence").and_then(Value::as_u64).expect("sequence"),
    )
}
