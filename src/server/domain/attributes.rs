//! **Extension** of our servers (SPEC.md, "Extension: sub-env attributes"):
//! a `call` whose method is `ext:call` or `ext:set_attr`
//! ([`crate::protocol::attributes`]) reaches the attributes of an env
//! resource's sub-envs, in the domain's order like any call of its
//! controller. It is neither a lifecycle step nor a boundary: no revision,
//! no sequence, no snapshot, no fault.

use super::{CallRequest, Domain, Outcome};
use crate::codec::Dict;
use crate::codec::Value;
use crate::host::HostErrorKind;
use crate::protocol::attributes::{AttributeRequest, EXTENSION};
use crate::protocol::{err, ErrorCode, ProtocolError, ResourceKind};
use crate::server::hosted::{Addr, HostedInner};
use crate::server::instance::panic_message;
use crate::server::outbound::SessionShared;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

impl Domain {
    /// Runs an extension request on env resource `index` (the session's
    /// control already claimed, in env mode).
    pub(super) fn attribute(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        index: usize,
        call: &CallRequest<'_>,
    ) -> Outcome {
        let method = call.method.unwrap_or_default();
        let parsed = AttributeRequest::parse(method, call.args, call.kwargs)
            .map_err(|m| err(ErrorCode::InvalidRequest, m))?;
        let meta = &self.instance.resources[index];
        let id = meta.id.clone();
        if meta.kind != ResourceKind::Env {
            return Err(err(
                ErrorCode::UnsupportedOperation,
                format!(
                    "{method} applies to env resources: {} '{id}' is not one",
                    meta.kind.as_str()
                ),
            ));
        }
        let addr = meta.addr.clone();
        let Some(hosted) = self.instance.hosted.as_mut() else {
            return Err(err(ErrorCode::ExecutionError, "domain not instantiated"));
        };
        let setting = matches!(parsed, AttributeRequest::Set { .. });
        let name = parsed.name().to_string();
        let outcome = catch_unwind(AssertUnwindSafe(|| match (&addr, parsed) {
            (Addr::Foreign(i), request) => match &mut hosted.inner {
                HostedInner::Foreign(host) => match request {
                    AttributeRequest::Call { name, args, kwargs } => host
                        .call_attribute(*i, &name, args, kwargs)
                        .map(Value::List),
                    AttributeRequest::Set { name, values } => {
                        host.set_attribute(*i, &name, values).map(|()| Value::Null)
                    }
                },
                HostedInner::Native(_) => Err(crate::host::HostError::new("not a foreign host")),
            },
            (Addr::Env(slot), request) => match hosted.env_mut(*slot) {
                Some(env) => match request {
                    AttributeRequest::Call { name, args, kwargs } => {
                        env.call_attribute(&name, args, kwargs).map(Value::List)
                    }
                    AttributeRequest::Set { name, values } => {
                        env.set_attribute(&name, values).map(|()| Value::Null)
                    }
                },
                None => Err(crate::host::HostError::new("not an env")),
            },
            _ => Err(crate::host::HostError::not_implemented(method)),
        }));
        // Ran: the hosted code may have changed something (a certain
        // refusal comes before it runs).
        let ran = |code: ErrorCode, message: String| ProtocolError::uncertain(code, message);
        let value = match outcome {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                let message = e.message().to_string();
                return Err(match e.kind() {
                    HostErrorKind::NotImplemented => err(
                        ErrorCode::UnsupportedOperation,
                        format!(
                            "env '{id}' has no attributes to reach ({EXTENSION}): its host does not implement {method}"
                        ),
                    ),
                    HostErrorKind::InvalidArgument => err(ErrorCode::InvalidRequest, message),
                    HostErrorKind::Serialization | HostErrorKind::ResultTooLarge => {
                        ran(ErrorCode::SerializationError, message)
                    }
                    _ => ran(ErrorCode::ExecutionError, message),
                });
            }
            Err(p) => {
                let message = format!("{method}('{name}') panicked: {}", panic_message(&p));
                return Err(ran(ErrorCode::ExecutionError, message));
            }
        };
        tracing::debug!(resource = %id, %method, attribute = %name, setting, "attribute request");
        self.call_response(session, request, value, None)
            .map_err(|message| ran(ErrorCode::SerializationError, message))
    }
}
