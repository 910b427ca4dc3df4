//! Small hosted simulators for server tests.
#![allow(dead_code)]

use parking_lot::Mutex;
use std::sync::Arc;
use unienv_remote::host::{
    Env, HostError, HostResult, Node, Phase, ResetArgs, ResetResult, Space, StepResult,
};
use unienv_remote::{Dict, NdArray, Value};

pub type Log = Arc<Mutex<Vec<String>>>;

pub fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

/// An env that records its calls; `step` with action 7 panics, with action
/// -1 returns an error, with action 99 sleeps 1.5 s.
pub struct RecordingEnv {
    pub name: &'static str,
    pub log: Log,
    pub value: f64,
}

impl RecordingEnv {
    pub fn new(name: &'static str, log: Log) -> RecordingEnv {
        RecordingEnv {
            name,
            log,
            value: 0.0,
        }
    }
}

impl Env for RecordingEnv {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.log
            .lock()
            .push(format!("{}.reset({:?})", self.name, args.seed));
        self.value = args.seed.unwrap_or(0) as f64;
        Ok(ResetResult::new(
            (),
            NdArray::from_vec(vec![self.value as f32]),
            Dict::new(),
        ))
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let a = action
            .as_scalar_f64()
            .ok_or_else(|| HostError::new("action must be a number"))?;
        self.log.lock().push(format!("{}.step({a})", self.name));
        if a == 7.0 {
            panic!("simulator exploded");
        }
        if a == -1.0 {
            return Err(HostError::new("physics diverged"));
        }
        if a == 99.0 {
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        self.value += a;
        Ok(StepResult::new(
            NdArray::from_vec(vec![self.value as f32]),
            self.value,
            false,
            false,
            Dict::new(),
        ))
    }
    fn render(&mut self) -> HostResult<Value> {
        Ok(Value::Array(NdArray::from_vec(vec![self.value as u8])))
    }
    fn close(&mut self) {
        self.log.lock().push(format!("{}.close", self.name));
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
}

/// An env wrapper: closes itself, then what it wraps.
pub struct Wrapper<E: Env> {
    pub inner: E,
    pub log: Log,
}

impl<E: Env> Env for Wrapper<E> {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.inner.reset(args)
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.inner.step(action)
    }
    fn close(&mut self) {
        self.log.lock().push("wrapper.close".into());
        self.inner.close();
    }
    fn action_space(&self) -> Option<Space> {
        self.inner.action_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.inner.observation_space()
    }
}

/// A detached node that records lifecycle calls and closes its children.
pub struct RecNode {
    pub name: String,
    pub log: Log,
    pub value: f64,
    pub children: Vec<RecNode>,
    pub fail_getter: bool,
    pub snapshot_fields: Option<Vec<unienv_remote::host::Field>>,
}

impl RecNode {
    pub fn new(name: &str, log: Log, children: Vec<RecNode>) -> RecNode {
        RecNode {
            name: name.into(),
            log,
            value: 0.0,
            children,
            fail_getter: false,
            snapshot_fields: None,
        }
    }
}

#[allow(clippy::only_used_in_recursion)]
impl Node<()> for RecNode {
    fn name(&self) -> &str {
        &self.name
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
    fn has_reward(&self) -> bool {
        true
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        match phase {
            Phase::PreStep => vec![],
            _ => vec![0],
        }
    }
    fn remote_snapshot_fields(&self) -> Option<Vec<unienv_remote::host::Field>> {
        self.snapshot_fields.clone()
    }
    fn child_count(&self) -> usize {
        self.children.len()
    }
    fn child(&self, i: usize) -> Option<&dyn Node<()>> {
        self.children.get(i).map(|c| c as &dyn Node<()>)
    }
    fn child_mut(&mut self, i: usize) -> Option<&mut dyn Node<()>> {
        self.children.get_mut(i).map(|c| c as &mut dyn Node<()>)
    }
    fn set_next_action(&mut self, _: &mut (), action: Value) -> HostResult<()> {
        let a = action.as_scalar_f64().unwrap_or(0.0);
        if a == 7.0 {
            panic!("node exploded");
        }
        self.value += a;
        self.log
            .lock()
            .push(format!("{}.set_next_action({a})", self.name));
        Ok(())
    }
    fn reset(&mut self, _: &mut (), priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.value = args.seed.unwrap_or(0) as f64;
        self.log
            .lock()
            .push(format!("{}.reset(p={priority})", self.name));
        Ok(())
    }
    fn get_observation(&mut self, _: &mut ()) -> HostResult<Value> {
        self.log
            .lock()
            .push(format!("{}.get_observation", self.name));
        if self.fail_getter {
            return Err(HostError::new("sensor offline"));
        }
        Ok(Value::Array(NdArray::from_vec(vec![self.value as f32])))
    }
    fn get_reward(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(Value::Float(self.value))
    }
    fn close(&mut self, w: &mut ()) {
        self.log.lock().push(format!("{}.close", self.name));
        for c in &mut self.children {
            c.close(w);
        }
    }
}
