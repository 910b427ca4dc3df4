//! Closing a vector env: its requests in flight abandoned (as dropping
//! their futures abandons them), the connections it opened closed.

use super::VectorEnv;
use crate::client::EnvProxy;

impl VectorEnv {
    /// Closes the connections this vector env opened (those of
    /// [`VectorEnv::connect`]; proxies given to [`VectorEnv::from_envs`]
    /// are left to their owners). A pending step is abandoned.
    pub async fn close(&mut self) {
        self.in_flight.abort_all();
        while self.in_flight.join_next().await.is_some() {}
        self.abandon_sunk();
        self.sink.abort();
        self.arrivals.clear();
        self.busy.iter_mut().for_each(|b| *b = false);
        self.busy_width = 0;
        for c in self.clients.drain(..) {
            c.close().await;
        }
    }

    /// Abandons the step requests handed to the sink and not answered:
    /// what dropping their futures does on the general path (a mutation's
    /// connection closes: its outcome is unknown).
    fn abandon_sunk(&mut self) {
        for (k, id) in self.sunk.iter_mut().enumerate() {
            if let Some(id) = id.take() {
                let shared = &self.resources[k].proxy.client().shared;
                shared.abandon(id, EnvProxy::step_mutates());
            }
        }
    }
}

impl Drop for VectorEnv {
    fn drop(&mut self) {
        self.abandon_sunk();
        self.sink.abort();
    }
}
