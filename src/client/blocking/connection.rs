//! The blocking [`Client`]: the async client on a [`Driver`] runtime.

use super::driver::Driver;
use crate::client::{
    BoundarySnapshot, ClientConfig, ClientError, ClientResult, ConnectFailure, Descriptor, Mode,
    ServerInfo,
};
use crate::codec::{Dict, Value};
use crate::transport::MemoryTransport;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The driver and the async client it serves; closed gracefully when the
/// last blocking handle goes away.
pub(super) struct Core {
    pub(super) client: crate::client::Client,
    driver: Arc<Driver>,
    idler: Option<std::thread::JoinHandle<()>>,
}

impl Core {
    pub(super) fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future,
        F::Output: crate::client::interrupt::Interruptible,
    {
        self.driver.block_on(future)
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.driver.stop();
        if let Some(idler) = self.idler.take() {
            let _ = idler.join();
        }
        if tokio::runtime::Handle::try_current().is_err() {
            let client = self.client.clone();
            self.driver.block_on(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), client.close()).await;
            });
        }
    }
}

/// A blocking connection (see [`crate::client::Client`]). Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(super) core: Arc<Core>,
}

impl Client {
    /// Connects over WebSocket (see [`crate::client::Client::connect`]).
    pub fn connect(url: &str, config: ClientConfig) -> ClientResult<Client> {
        let driver = Driver::new()?;
        let client = driver.block_on(crate::client::Client::connect(url, config))?;
        Client::wrap(client, driver)
    }

    /// Connects through an in-memory transport (see
    /// [`crate::client::Client::over_memory`]).
    pub fn over_memory(transport: MemoryTransport, config: ClientConfig) -> ClientResult<Client> {
        let driver = Driver::new()?;
        let client = driver.block_on(crate::client::Client::over_memory(transport, config))?;
        Client::wrap(client, driver)
    }

    fn wrap(client: crate::client::Client, driver: Arc<Driver>) -> ClientResult<Client> {
        let idle = driver.clone();
        let idler = std::thread::Builder::new()
            .name("unienv-client-idle".into())
            .spawn(move || idle.idle());
        let idler = match idler {
            Ok(handle) => handle,
            Err(e) => {
                driver.block_on(client.close());
                return Err(ClientError::Connect(ConnectFailure::Runtime {
                    what: "'s idle thread",
                    detail: e.to_string(),
                }));
            }
        };
        Ok(Client {
            core: Arc::new(Core {
                client,
                driver,
                idler: Some(idler),
            }),
        })
    }

    pub(super) fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future,
        F::Output: crate::client::interrupt::Interruptible,
    {
        self.core.block_on(future)
    }

    /// Whether both handles share one connection.
    pub fn same_connection(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }

    /// See [`crate::client::Client::server_info`].
    pub fn server_info(&self) -> &ServerInfo {
        self.core.client.server_info()
    }

    /// See [`crate::client::Client::session_id`].
    pub fn session_id(&self) -> &str {
        self.core.client.session_id()
    }

    /// See [`crate::client::Client::max_message_size`].
    pub fn max_message_size(&self) -> usize {
        self.core.client.max_message_size()
    }

    /// See [`crate::client::Client::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.core.client.is_closed()
    }

    /// See [`crate::client::Client::timeout`].
    pub fn timeout(&self) -> Option<Duration> {
        self.core.client.timeout()
    }

    /// See [`crate::client::Client::set_timeout`].
    pub fn set_timeout(&self, timeout: Option<Duration>) {
        self.core.client.set_timeout(timeout);
    }

    /// See [`crate::client::Client::requests_sent`].
    pub fn requests_sent(&self) -> u64 {
        self.core.client.requests_sent()
    }

    /// See [`crate::client::Client::close`].
    pub fn close(&self) {
        self.block_on(self.core.client.close());
    }

    /// See [`crate::client::Client::discover`].
    pub fn discover(&self) -> ClientResult<Vec<Arc<Descriptor>>> {
        self.block_on(self.core.client.discover())
    }

    /// See [`crate::client::Client::describe`].
    pub fn describe(&self, resource_id: &str) -> ClientResult<Arc<Descriptor>> {
        self.block_on(self.core.client.describe(resource_id))
    }

    /// See [`crate::client::Client::descriptor`].
    pub fn descriptor(&self, resource_id: &str) -> Option<Arc<Descriptor>> {
        self.core.client.descriptor(resource_id)
    }

    /// See [`crate::client::Client::descriptors`].
    pub fn descriptors(&self) -> Vec<Arc<Descriptor>> {
        self.core.client.descriptors()
    }

    /// See [`crate::client::Client::acquire`].
    pub fn acquire(&self, resource_id: &str, mode: Option<Mode>) -> ClientResult<()> {
        self.block_on(self.core.client.acquire(resource_id, mode))
    }

    /// See [`crate::client::Client::release`].
    pub fn release(&self, resource_id: &str, close_subscriptions: bool) -> ClientResult<()> {
        self.block_on(self.core.client.release(resource_id, close_subscriptions))
    }

    /// See [`crate::client::Client::current_operation`].
    pub fn current_operation(&self, resource_id: &str) -> Option<String> {
        self.core.client.current_operation(resource_id)
    }

    /// See [`crate::client::Client::call`].
    pub fn call(
        &self,
        resource_id: &str,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> ClientResult<Value> {
        self.block_on(self.core.client.call(resource_id, method, args, kwargs))
    }

    /// See [`crate::client::Client::boundary_snapshot`].
    pub fn boundary_snapshot(&self, resource_id: &str) -> Option<BoundarySnapshot> {
        self.core.client.boundary_snapshot(resource_id)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Client")
            .field(&self.core.client)
            .finish()
    }
}
