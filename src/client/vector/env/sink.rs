//! Single envs' steps answered without a task: each step request's reply is
//! handed to the vector env's [`StepSink`] by its connection's reader task
//! as it arrives, and turned into the env's outcome there.
//!
//! The general path ([`carry`](super::arrivals::carry)) gives each
//! resource's request a future, polled in a set by a task: a oneshot channel,
//! a timer and a task wake-up per request. A learner stepping hundreds of
//! single-env resources pays that per env step; here it pays none of it
//! (the connection's deadline watch times the requests). Batched
//! resources, `NextStep` resets and envs whose descriptor is not known yet
//! take the general path; a `SameStep` env whose episode ended is reset by
//! a task of the sink, which delivers its outcome when the reset is done,
//! as the general path does.

use super::arrivals::{Arrivals, Outcome, Undelivered};
use super::resource::{reset_after, single_step, SingleStep, Stepped};
use crate::client::pending::{Reply, ReplySink};
use crate::client::vector::AutoresetMode;
use crate::client::EnvProxy;
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::task::JoinSet;

/// Where a vector env's single envs' step replies go (the tag of a request
/// is its resource's index).
pub(super) struct StepSink {
    arrivals: Arc<Arrivals>,
    /// Each resource's proxy when it is a single env (`None`: batched).
    envs: Vec<Option<EnvProxy>>,
    mode: AutoresetMode,
    /// The `SameStep` resets of envs whose episode ended.
    resets: Mutex<JoinSet<()>>,
}

impl StepSink {
    /// The sink of a vector env's resources (`(proxy, batch)` each).
    pub(super) fn new<'a>(
        arrivals: Arc<Arrivals>,
        resources: impl Iterator<Item = (&'a EnvProxy, Option<usize>)>,
        mode: AutoresetMode,
    ) -> Arc<StepSink> {
        Arc::new(StepSink {
            arrivals,
            envs: resources
                .map(|(p, batch)| batch.is_none().then(|| p.clone()))
                .collect(),
            mode,
            resets: Mutex::new(JoinSet::new()),
        })
    }

    /// Forgets the resets that are done (their outcomes are delivered).
    pub(super) fn reap(&self) {
        let mut resets = self.resets.lock();
        while resets.try_join_next().is_some() {}
    }

    /// Stops the resets under way (the vector env is closing).
    pub(super) fn abort(&self) {
        self.resets.lock().abort_all();
    }
}

impl ReplySink for StepSink {
    fn deliver(&self, k: usize, reply: Reply) {
        let Some(env) = self.envs.get(k).and_then(Option::as_ref) else {
            return;
        };
        let outcome = env
            .step_reply(reply)
            .and_then(|s| single_step(s, self.mode));
        match outcome {
            Ok(SingleStep::Done(e)) => {
                self.arrivals
                    .deliver(k, 1, Outcome::Stepped(Stepped::single(e)));
            }
            Ok(SingleStep::Ended(e)) => {
                let mut undelivered = Undelivered::new(self.arrivals.clone(), vec![(k, 1)]);
                let env = env.clone();
                let reset = async move {
                    let result = reset_after(&env, e).await.map(Stepped::single);
                    undelivered.deliver(0, Outcome::from(result));
                };
                // Replies come from the reader task, on the runtime; if
                // not, the reset is never started: dropping it reports the
                // env's step as lost.
                if let Ok(handle) = Handle::try_current() {
                    self.resets.lock().spawn_on(reset, &handle);
                }
            }
            Err(error) => self.arrivals.deliver(k, 1, Outcome::Failed(error)),
        }
    }
}
