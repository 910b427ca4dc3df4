//! Blocking component operations and subscriptions.

use super::connection::Client;
use crate::client::{ClientError, ClientResult, Descriptor, OperationKind, SnapshotEvent};
use std::sync::Arc;
use std::time::Duration;

/// An open component operation (see [`crate::client::Operation`]); aborted when
/// dropped without [`Operation::complete`].
#[must_use = "an operation is aborted when dropped; call complete()"]
#[derive(Debug)]
pub struct Operation {
    inner: Option<crate::client::Operation>,
    client: Client,
}

impl Operation {
    fn inner(&self) -> &crate::client::Operation {
        match &self.inner {
            Some(op) => op,
            None => unreachable!("the operation is only taken by complete/abort"),
        }
    }

    /// The operation ID.
    pub fn id(&self) -> &str {
        self.inner().id()
    }

    /// The domain it runs on.
    pub fn domain_id(&self) -> &str {
        self.inner().domain_id()
    }

    /// Its kind.
    pub fn kind(&self) -> OperationKind {
        self.inner().kind()
    }

    /// See [`crate::client::Operation::complete`].
    pub fn complete(mut self) -> ClientResult<Vec<Arc<Descriptor>>> {
        match self.inner.take() {
            Some(op) => self.client.block_on(op.complete()),
            None => Ok(Vec::new()),
        }
    }

    /// See [`crate::client::Operation::abort`].
    pub fn abort(mut self) -> ClientResult<()> {
        match self.inner.take() {
            Some(op) => self.client.block_on(op.abort()),
            None => Ok(()),
        }
    }
}

/// A latest-value stream of snapshots (see [`crate::client::Subscription`]). As an
/// iterator it waits without a deadline and ends with the stream.
#[derive(Debug)]
pub struct Subscription {
    inner: Option<crate::client::Subscription>,
    client: Client,
}

impl Subscription {
    fn inner(&self) -> &crate::client::Subscription {
        match &self.inner {
            Some(s) => s,
            None => unreachable!("the subscription is only taken by unsubscribe"),
        }
    }

    /// The subscription ID.
    pub fn id(&self) -> &str {
        self.inner().id()
    }

    /// The observed resource.
    pub fn resource_id(&self) -> &str {
        self.inner().resource_id()
    }

    /// See [`crate::client::Subscription::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.inner().is_closed()
    }

    /// See [`crate::client::Subscription::next`].
    pub fn next(&mut self, timeout: Option<Duration>) -> ClientResult<Option<SnapshotEvent>> {
        match self.inner.as_mut() {
            Some(s) => self.client.core.block_on(s.next(timeout)),
            None => Ok(None),
        }
    }

    /// See [`crate::client::Subscription::unsubscribe`].
    pub fn unsubscribe(mut self) -> ClientResult<()> {
        match self.inner.take() {
            Some(s) => self.client.block_on(s.unsubscribe()),
            None => Ok(()),
        }
    }
}

impl Iterator for Subscription {
    type Item = ClientResult<SnapshotEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        Subscription::next(self, None).transpose()
    }
}

impl Client {
    /// See [`crate::client::Client::operation`]. Prefer [`Client::with_operation`].
    pub fn operation(&self, resource_id: &str, kind: OperationKind) -> ClientResult<Operation> {
        let inner = self.block_on(self.core.client.operation(resource_id, kind))?;
        Ok(Operation {
            inner: Some(inner),
            client: self.clone(),
        })
    }

    /// Runs `body` inside a component operation: completes it when `body`
    /// succeeds, aborts it when `body` fails (or panics).
    pub fn with_operation<T, E, F>(
        &self,
        resource_id: &str,
        kind: OperationKind,
        body: F,
    ) -> Result<T, E>
    where
        F: FnOnce(&Operation) -> Result<T, E>,
        E: From<ClientError>,
    {
        let operation = self.operation(resource_id, kind)?;
        match body(&operation) {
            Ok(value) => {
                operation.complete()?;
                Ok(value)
            }
            Err(e) => {
                let _ = operation.abort();
                Err(e)
            }
        }
    }

    /// See [`crate::client::Client::subscribe`].
    pub fn subscribe(
        &self,
        resource_id: &str,
        fields: Option<&[&str]>,
    ) -> ClientResult<Subscription> {
        let inner = self.block_on(self.core.client.subscribe(resource_id, fields))?;
        Ok(Subscription {
            inner: Some(inner),
            client: self.clone(),
        })
    }
}
