//! [`BlockingVectorEnv`]: a [`VectorEnv`] on its own runtime, for code that
//! is not async.

use super::env::{AutoresetMode, EnvAddress, VectorEnv, VectorError, VectorReset, VectorStep};
use crate::client::{ClientConfig, ClientError, ConnectFailure};
use crate::codec::Value;
use crate::host::ResetArgs;

/// A [`VectorEnv`] for code that is not async: it owns a tokio runtime with
/// one worker thread, which carries every request (so
/// [`step_async`](Self::step_async) returns at once and the requests
/// progress while the caller computes). Do not use it from async code.
pub struct BlockingVectorEnv {
    env: VectorEnv,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for BlockingVectorEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.env.fmt(f)
    }
}

impl BlockingVectorEnv {
    /// Connects (see [`VectorEnv::connect`]).
    pub fn connect(
        addresses: &[EnvAddress],
        config: ClientConfig,
        mode: AutoresetMode,
    ) -> Result<BlockingVectorEnv, VectorError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("unienv-vector")
            .enable_all()
            .build()
            .map_err(|e| VectorError::Connect {
                url: String::new(),
                error: ClientError::Connect(ConnectFailure::Runtime {
                    what: " runtime",
                    detail: e.to_string(),
                }),
            })?;
        let env = runtime.block_on(VectorEnv::connect(addresses, config, mode))?;
        Ok(BlockingVectorEnv { env, runtime })
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
        crate::client::interrupt::block_on(&self.runtime, self.env.reset(args))
    }

    /// See [`VectorEnv::reset_masked`].
    pub fn reset_masked(
        &mut self,
        args: Vec<ResetArgs>,
        mask: Option<&[bool]>,
    ) -> Result<(VectorReset, Vec<bool>), VectorError> {
        crate::client::interrupt::block_on(&self.runtime, self.env.reset_masked(args, mask))
    }

    /// See [`VectorEnv::step_async`]; returns without waiting.
    pub fn step_async(&mut self, actions: Vec<Value>) -> Result<(), VectorError> {
        self.env.step_async(actions)
    }

    /// See [`VectorEnv::step_async_stacked`]; returns without waiting.
    pub fn step_async_stacked(&mut self, actions: &Value) -> Result<(), VectorError> {
        self.env.step_async_stacked(actions)
    }

    /// See [`VectorEnv::send`]; returns without waiting.
    pub fn send(&mut self, actions: Vec<Value>, env_id: &[usize]) -> Result<(), VectorError> {
        self.env.send(actions, env_id)
    }

    /// See [`VectorEnv::send_stacked`]; returns without waiting.
    pub fn send_stacked(&mut self, actions: &Value, env_id: &[usize]) -> Result<(), VectorError> {
        self.env.send_stacked(actions, env_id)
    }

    /// See [`VectorEnv::recv`].
    pub fn recv(&mut self, min: usize) -> Result<VectorStep, VectorError> {
        self.runtime.block_on(self.env.recv(min))
    }

    /// See [`VectorEnv::step_wait`].
    pub fn step_wait(&mut self) -> Result<VectorStep, VectorError> {
        crate::client::interrupt::block_on(&self.runtime, self.env.step_wait())
    }

    /// See [`VectorEnv::step`].
    pub fn step(&mut self, actions: Vec<Value>) -> Result<VectorStep, VectorError> {
        self.env.step_async(actions)?;
        self.step_wait()
    }

    /// Closes the connections (see [`VectorEnv::close`]).
    pub fn close(&mut self) {
        self.runtime.block_on(self.env.close());
    }
}

impl Drop for BlockingVectorEnv {
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err() {
            self.runtime.block_on(self.env.close());
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
        crate::client::interrupt::block_on(&self.runtime, self.env.reconnect(changes, config))
    }
}
