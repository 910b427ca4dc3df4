//! Component operations: explicit reset/reload/step boundaries around
//! world and node calls.

use super::connection::Client;
use super::descriptor::Descriptor;
use super::error::{ClientError, ClientResult, InvalidUse};
use crate::codec::Value;
use crate::protocol::{Op, OperationKind};
use std::sync::Arc;

/// An open component operation on one domain.
///
/// While it is open, every call on the domain's resources carries its ID and
/// node getters read live. [`Operation::complete`] publishes the boundary
/// (and refreshes descriptors and the boundary cache from the result);
/// [`Operation::abort`] — or dropping the guard, or a failed completion —
/// aborts it, which faults the domain until a reset or reload operation
/// recovers it. There is no rollback.
///
/// Prefer [`Client::with_operation`], which cannot forget either step.
#[must_use = "an operation is aborted when dropped; call complete()"]
pub struct Operation {
    client: Client,
    domain_id: Arc<str>,
    id: Arc<str>,
    kind: OperationKind,
    finished: bool,
}

impl Operation {
    pub(crate) fn new(
        client: Client,
        domain_id: Arc<str>,
        id: Arc<str>,
        kind: OperationKind,
    ) -> Operation {
        Operation {
            client,
            domain_id,
            id,
            kind,
            finished: false,
        }
    }

    /// The operation ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The domain it runs on.
    pub fn domain_id(&self) -> &str {
        &self.domain_id
    }

    /// Its kind.
    pub fn kind(&self) -> OperationKind {
        self.kind
    }

    /// Completes the operation: the server publishes the boundary and
    /// returns the domain's refreshed descriptors, which (with their
    /// boundary snapshots) refresh the client. If completion fails, the
    /// operation is aborted (unless the connection is gone) and the
    /// completion error is returned.
    pub async fn complete(mut self) -> ClientResult<Vec<Arc<Descriptor>>> {
        let id = Value::from(&*self.id);
        let shared = self.client.shared.clone();
        let outcome = shared
            .request(
                Op::Complete,
                Some(&self.domain_id),
                &[("operation_id", &id)],
                true,
            )
            .await
            .and_then(|descriptors| shared.apply_descriptors(descriptors, true));
        self.finished = true;
        if outcome.is_err() && !shared.is_closed() {
            let _ = shared
                .request(
                    Op::Abort,
                    Some(&self.domain_id),
                    &[("operation_id", &id)],
                    true,
                )
                .await;
        }
        self.unregister();
        outcome
    }

    /// Aborts the operation (the domain is faulted until recovered).
    pub async fn abort(mut self) -> ClientResult<()> {
        let id = Value::from(&*self.id);
        self.finished = true;
        let outcome = self
            .client
            .shared
            .request(
                Op::Abort,
                Some(&self.domain_id),
                &[("operation_id", &id)],
                true,
            )
            .await;
        self.unregister();
        outcome.map(|_| ())
    }

    fn unregister(&self) {
        let mut st = self.client.shared.state.lock();
        if st
            .operations
            .get(&*self.domain_id)
            .is_some_and(|id| *id == self.id)
        {
            st.operations.remove(&*self.domain_id);
        }
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.unregister();
        let id = Value::from(&*self.id);
        self.client.shared.send_detached(
            Op::Abort,
            &self.domain_id,
            &[("operation_id", &id)],
            true,
        );
    }
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("id", &self.id)
            .field("domain_id", &self.domain_id)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Client {
    /// Begins a component operation on the resource's domain (the domain of
    /// a world or node). Nested operations on one domain are refused. Prefer
    /// [`Client::with_operation`].
    pub async fn operation(
        &self,
        resource_id: &str,
        kind: OperationKind,
    ) -> ClientResult<Operation> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        let domain: Arc<str> = Arc::from(descriptor.domain_id());
        let id: Arc<str> = Arc::from(self.shared.fresh_id());
        {
            let mut st = self.shared.state.lock();
            if st.operations.contains_key(&*domain) {
                return Err(ClientError::InvalidUse(InvalidUse::NestedOperation {
                    domain: domain.to_string(),
                }));
            }
            st.operations.insert(domain.to_string(), id.clone());
        }
        let kind_value = Value::from(kind.as_str());
        let id_value = Value::from(&*id);
        let begun = self
            .shared
            .request(
                Op::Begin,
                Some(&domain),
                &[("kind", &kind_value), ("operation_id", &id_value)],
                true,
            )
            .await;
        match begun {
            Ok(_) => Ok(Operation::new(self.clone(), domain, id, kind)),
            Err(e) => {
                let mut st = self.shared.state.lock();
                if st.operations.get(&*domain).is_some_and(|o| *o == id) {
                    st.operations.remove(&*domain);
                }
                Err(e)
            }
        }
    }

    /// Runs `body` inside a component operation: begins it, completes it
    /// when `body` succeeds (a completion failure is returned), aborts it
    /// when `body` fails or is cancelled. The operation is passed to `body`
    /// for its ID; calls made during it find it through the client.
    pub async fn with_operation<T, E, F>(
        &self,
        resource_id: &str,
        kind: OperationKind,
        body: F,
    ) -> Result<T, E>
    where
        F: AsyncFnOnce(&Operation) -> Result<T, E>,
        E: From<ClientError>,
    {
        let operation = self.operation(resource_id, kind).await?;
        match body(&operation).await {
            Ok(value) => {
                operation.complete().await?;
                Ok(value)
            }
            Err(e) => {
                let _ = operation.abort().await;
                Err(e)
            }
        }
    }
}
