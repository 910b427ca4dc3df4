//! Objects shared on one thread: a wrapper and the env it wraps, both
//! registered in one domain (see
//! [`Hosted::with_env`](crate::server::Hosted::with_env)).

use super::args::{ResetArgs, ResetResult, StepResult};
use super::error::HostResult;
use super::space::Space;
use super::traits::Env;
use crate::codec::{Dict, Value};
use std::cell::RefCell;
use std::rc::Rc;

/// An env shared on one thread: every call borrows it for its duration.
///
/// It cannot lend its world and node tree through [`Env::as_tree`] (the
/// borrow would outlive the call), so a domain of shared envs is given the
/// tree with [`Hosted::with_tree`](crate::server::Hosted::with_tree) (a
/// `Rc<RefCell<WorldEnv<W>>>` is a [`Tree`](super::Tree) too).
impl<E: Env> Env for Rc<RefCell<E>> {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.borrow_mut().reset(args)
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.borrow_mut().step(action)
    }
    fn render(&mut self) -> HostResult<Value> {
        self.borrow_mut().render()
    }
    fn supports_reload(&self) -> bool {
        self.borrow().supports_reload()
    }
    fn reload(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.borrow_mut().reload(args)
    }
    fn close(&mut self) {
        self.borrow_mut().close()
    }
    fn batch_size(&self) -> Option<usize> {
        self.borrow().batch_size()
    }
    fn action_space(&self) -> Option<Space> {
        self.borrow().action_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.borrow().observation_space()
    }
    fn context_space(&self) -> Option<Space> {
        self.borrow().context_space()
    }
    fn render_mode(&self) -> Option<String> {
        self.borrow().render_mode()
    }
    fn render_fps(&self) -> Option<i64> {
        self.borrow().render_fps()
    }
    fn metadata(&self) -> Dict {
        self.borrow().metadata()
    }
    fn has_control_timestep(&self) -> bool {
        self.borrow().has_control_timestep()
    }
    fn control_timestep(&self) -> Option<f64> {
        self.borrow().control_timestep()
    }
}
