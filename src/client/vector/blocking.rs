//! [`BlockingVectorEnv`]: a [`VectorEnv`] on its own runtime, for code that
//! is not async.

use super::env::{AutoresetMode, EnvAddress, VectorEnv, VectorError, VectorReset, VectorStep};
use crate::client::blocking::driver::Driver;
use crate::client::{ClientConfig, ClientError, ConnectFailure};
use crate::codec::Value;
use crate::host::ResetArgs;
use std::future::Future;
use std::sync::Arc;

pub mod attributes;

/// A [`VectorEnv`] for code that is not async. It owns a current-thread
/// tokio runtime, driven by the threads that call into it, as the blocking
/// [`Client`](crate::client::blocking::Client) is: [`step_async`](Self::step_async)
/// writes every request before it returns (the requests progress while the
/// caller computes), and the thread waiting in [`step_wait`](Self::step_wait)
/// (or [`recv`](Self::recv)) reads the replies itself, so a vector step costs
/// no hand-off between threads on this side. After 200 ms without calls an
/// idle thread drives the connections (pings, closure) until the next call.
/// Do not use it from async code.
pub struct BlockingVectorEnv {
    env: VectorEnv,
    driver: Arc<Driver>,
    idler: Option<std::thread::JoinHandle<()>>,
    /// How many times the last `launch` polled its wait (tests: it sleeps
    /// until woken, it does not spin).
    #[cfg(test)]
    pub(crate) launch_polls: u64,
}

impl std::fmt::Debug for BlockingVectorEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.env.fmt(f)
    }
}

/// A connection failure of the runtime or of its idle thread.
fn runtime_error(what: &'static str, detail: String) -> VectorError {
    VectorError::Connect {
        url: String::new(),
        error: ClientError::Connect(ConnectFailure::Runtime { what, detail }),
    }
}

impl BlockingVectorEnv {
    /// Connects (see [`VectorEnv::connect`]).
    pub fn connect(
        addresses: &[EnvAddress],
        config: ClientConfig,
        mode: AutoresetMode,
    ) -> Result<BlockingVectorEnv, VectorError> {
        BlockingVectorEnv::connect_idle_after(addresses, config, mode, None)
    }

    /// [`connect`](Self::connect), the idle thread taking over after
    /// `idle_after` without calls (tests) instead of the default.
    pub(crate) fn connect_idle_after(
        addresses: &[EnvAddress],
        config: ClientConfig,
        mode: AutoresetMode,
        idle_after: Option<std::time::Duration>,
    ) -> Result<BlockingVectorEnv, VectorError> {
        let driver = match idle_after {
            Some(d) => Driver::with_idle_after(d),
            None => Driver::new(),
        };
        let driver = driver.map_err(|error| VectorError::Connect {
            url: String::new(),
            error,
        })?;
        let mut env = driver.block_on(VectorEnv::connect(addresses, config, mode))?;
        let idle = driver.clone();
        let idler = std::thread::Builder::new()
            .name("unienv-vector-idle".into())
            .spawn(move || idle.idle());
        match idler {
            Ok(idler) => Ok(BlockingVectorEnv {
                env,
                driver,
                idler: Some(idler),
                #[cfg(test)]
                launch_polls: 0,
            }),
            Err(e) => {
                driver.block_on(env.close());
                Err(runtime_error("'s idle thread", e.to_string()))
            }
        }
    }

    /// The async vector env inside (for its accessors).
    pub fn inner(&self) -> &VectorEnv {
        &self.env
    }

    /// See [`VectorEnv::seeded`].
    pub fn seeded(seed: Option<i64>, num_envs: usize) -> Vec<ResetArgs> {
        VectorEnv::seeded(seed, num_envs)
    }

    /// See [`VectorEnv::num_envs`].
    pub fn num_envs(&self) -> usize {
        self.env.num_envs()
    }

    /// See [`VectorEnv::reset`].
    pub fn reset(&mut self, args: Vec<ResetArgs>) -> Result<VectorReset, VectorError> {
        self.driver.block_on(self.env.reset(args))
    }

    /// See [`VectorEnv::reset_masked`].
    pub fn reset_masked(
        &mut self,
        args: Vec<ResetArgs>,
        mask: Option<&[bool]>,
    ) -> Result<(VectorReset, Vec<bool>), VectorError> {
        self.driver.block_on(self.env.reset_masked(args, mask))
    }

    /// Runs `start` (which spawns the task carrying some requests) on the
    /// runtime, then lets the runtime run until the requests are written to
    /// the sockets (`VectorEnv::requests_written`): they are on their way
    /// when this returns, whichever thread drove the runtime meanwhile.
    /// While the idle thread still holds the runtime, this thread sleeps
    /// until the idle thread has written them or hands the runtime over
    /// (it does so at its next turn: the call woke it), then drives it.
    fn launch(
        &mut self,
        start: impl FnOnce(&mut VectorEnv) -> Result<(), VectorError>,
    ) -> Result<(), VectorError> {
        let env = &mut self.env;
        let mut polls = 0u64;
        let counted = &mut polls;
        let result = self.driver.block_on(async move {
            start(env)?;
            let mut written = std::pin::pin!(env.requests_written());
            std::future::poll_fn(|cx| {
                *counted += 1;
                written.as_mut().poll(cx)
            })
            .await;
            Ok(())
        });
        #[cfg(test)]
        {
            self.launch_polls = polls;
        }
        let _ = polls;
        result
    }

    /// See [`VectorEnv::step_async`]; returns once the requests are written,
    /// without waiting for replies.
    pub fn step_async(&mut self, actions: Vec<Value>) -> Result<(), VectorError> {
        self.launch(|env| env.step_async(actions))
    }

    /// See [`VectorEnv::step_async_stacked`]; returns once the requests are
    /// written, without waiting for replies.
    pub fn step_async_stacked(&mut self, actions: &Value) -> Result<(), VectorError> {
        self.launch(|env| env.step_async_stacked(actions))
    }

    /// See [`VectorEnv::send`]; returns once the requests are written,
    /// without waiting for replies.
    pub fn send(&mut self, actions: Vec<Value>, env_id: &[usize]) -> Result<(), VectorError> {
        self.launch(|env| env.send(actions, env_id))
    }

    /// See [`VectorEnv::send_stacked`]; returns once the requests are
    /// written, without waiting for replies.
    pub fn send_stacked(&mut self, actions: &Value, env_id: &[usize]) -> Result<(), VectorError> {
        self.launch(|env| env.send_stacked(actions, env_id))
    }

    /// See [`VectorEnv::recv`].
    pub fn recv(&mut self, min: usize) -> Result<VectorStep, VectorError> {
        self.driver.block_on(self.env.recv(min))
    }

    /// See [`VectorEnv::step_wait`].
    pub fn step_wait(&mut self) -> Result<VectorStep, VectorError> {
        self.driver.block_on(self.env.step_wait())
    }

    /// See [`VectorEnv::step`].
    pub fn step(&mut self, actions: Vec<Value>) -> Result<VectorStep, VectorError> {
        self.step_async(actions)?;
        self.step_wait()
    }

    /// Closes the connections (see [`VectorEnv::close`]).
    pub fn close(&mut self) {
        self.driver.block_on(self.env.close());
    }
}

impl Drop for BlockingVectorEnv {
    fn drop(&mut self) {
        self.driver.stop();
        if let Some(idler) = self.idler.take() {
            let _ = idler.join();
        }
        if tokio::runtime::Handle::try_current().is_err() {
            self.driver.block_on(self.env.close());
        }
    }
}

impl BlockingVectorEnv {
    /// See [`VectorEnv::reconnect`].
    pub fn reconnect(
        &mut self,
        changes: &[(usize, EnvAddress)],
        config: ClientConfig,
    ) -> Result<(), VectorError> {
        self.driver.block_on(self.env.reconnect(changes, config))
    }
}
