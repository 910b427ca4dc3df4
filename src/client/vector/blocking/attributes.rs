//! The vector client's side of our servers' attribute extension (SPEC.md,
//! "Extension: sub-env attributes"): Gymnasium's `call` / `get_attr` /
//! `set_attr` on one resource's sub-envs, over the vector env's own
//! connection and session (the one controlling the resource).

use super::BlockingVectorEnv;
use crate::client::ClientError;
use crate::codec::{Dict, Value};
use crate::protocol::attributes::{CALL, EXTENSION, SET_ATTR};

/// Why an attribute request was not answered with a value.
#[derive(Debug, thiserror::Error)]
pub enum AttributeError {
    /// No resource has this index.
    #[error("no resource {index} ({count} resources)")]
    NoResource {
        /// The index asked for.
        index: usize,
        /// How many resources there are.
        count: usize,
    },
    /// A step is in flight: its results must be received first (a request
    /// now would be answered after the step, in the domain's order, and
    /// the vector env reads replies in its own order).
    #[error("a step is in flight: receive its results first")]
    StepPending,
    /// The resource's server does not list the extension in `hello` (the
    /// reference server, or another): nothing was sent.
    #[error(
        "the server of '{resource_id}' ({server} {version}) does not support sub-env attributes: \
         it lists no '{EXTENSION}' extension in hello (unienv-remote servers do)"
    )]
    Unsupported {
        /// The resource.
        resource_id: String,
        /// The server's name (`hello`'s `server`).
        server: String,
        /// The server's version.
        version: String,
    },
    /// The request failed (the server's error, or the connection's).
    #[error("{0}")]
    Client(#[from] ClientError),
}

impl BlockingVectorEnv {
    /// Whether resource `index`'s server supports the attribute extension.
    pub fn supports_attributes(&self, index: usize) -> bool {
        self.env.envs().get(index).is_some_and(|p| {
            p.client()
                .server_info()
                .extensions
                .iter()
                .any(|e| e == EXTENSION)
        })
    }

    /// `ext:call` on resource `index`: attribute `name` of each of its
    /// sub-envs, called with `args` and `kwargs` when it is a method, or
    /// read; one value per sub-env.
    pub fn call_attribute(
        &mut self,
        index: usize,
        name: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> Result<Vec<Value>, AttributeError> {
        let mut request = Dict::with_capacity(3);
        request.insert("name", name);
        request.insert("args", Value::List(args));
        request.insert("kwargs", Value::Dict(kwargs));
        match self.attribute_request(index, CALL, request)? {
            Value::List(values) | Value::Tuple(values) => Ok(values),
            other => Err(AttributeError::Client(ClientError::Protocol(
                crate::client::ProtocolViolation::WrongType {
                    what: "an ext:call result",
                    expected: "a list",
                    found: other.type_name(),
                },
            ))),
        }
    }

    /// `ext:set_attr` on resource `index`: attribute `name` of its sub-env
    /// `i` set to `values[i]`.
    pub fn set_attribute(
        &mut self,
        index: usize,
        name: &str,
        values: Vec<Value>,
    ) -> Result<(), AttributeError> {
        let mut request = Dict::with_capacity(2);
        request.insert("name", name);
        request.insert("values", Value::List(values));
        self.attribute_request(index, SET_ATTR, request).map(|_| ())
    }

    /// Protocol v1's `render` call on resource `index` (any server): its
    /// value as the env renders it.
    pub fn render_resource(&mut self, index: usize) -> Result<Value, AttributeError> {
        let proxy = self.resource_proxy(index)?;
        Ok(self.driver.block_on(async move {
            proxy
                .client()
                .call(proxy.id(), "render", Vec::new(), Dict::new())
                .await
        })?)
    }

    /// Resource `index`'s proxy, when no step is in flight.
    fn resource_proxy(&self, index: usize) -> Result<crate::client::EnvProxy, AttributeError> {
        let proxies = self.env.envs();
        let Some(proxy) = proxies.get(index).cloned() else {
            return Err(AttributeError::NoResource {
                index,
                count: proxies.len(),
            });
        };
        if self.env.is_step_pending() {
            return Err(AttributeError::StepPending);
        }
        Ok(proxy)
    }

    fn attribute_request(
        &mut self,
        index: usize,
        method: &str,
        kwargs: Dict,
    ) -> Result<Value, AttributeError> {
        let proxy = self.resource_proxy(index)?;
        let info = proxy.client().server_info();
        if !info.extensions.iter().any(|e| e == EXTENSION) {
            return Err(AttributeError::Unsupported {
                resource_id: proxy.id().to_string(),
                server: info.server.clone(),
                version: info.server_version.clone(),
            });
        }
        let method = method.to_string();
        Ok(self.driver.block_on(async move {
            proxy
                .client()
                .call(proxy.id(), &method, Vec::new(), kwargs)
                .await
        })?)
    }
}
