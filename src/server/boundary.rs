//! Boundary publication: a domain's subscriptions, the controller's
//! optional snapshots in a boundary's response, and the observer snapshots
//! published after it (SPEC section 8).

use super::instance::{Captures, Instance};
use super::outbound::{CloseReason, SessionShared};
use super::snapshot::{self, Boundary, PendingSnapshot, SharedTail};
use crate::codec::{Dict, Value};
use crate::host::Field;
use crate::protocol::{err, ErrorCode, ProtocolError, ResourceKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// One observer subscription.
pub(crate) struct Subscription {
    pub session: Arc<SessionShared>,
    pub id: Arc<str>,
    pub resource: usize,
    pub fields: Vec<Field>,
}

/// A publication to run after the boundary's response has been queued.
pub(crate) struct Publish {
    pub operation_id: Value,
    pub kind: &'static str,
    /// The mutated env of an env-mode boundary (other envs are not published).
    pub env_resource: Option<usize>,
    pub captures: Captures,
}

/// The subscriptions of one domain.
#[derive(Default)]
pub(crate) struct Subscriptions {
    list: Vec<Subscription>,
}

impl Subscriptions {
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Drops every subscription of `session`; whether there was any.
    pub(crate) fn detach(&mut self, session: &Arc<SessionShared>) -> bool {
        let before = self.list.len();
        self.list.retain(|s| !Arc::ptr_eq(&s.session, session));
        self.list.len() != before
    }

    /// Drops one subscription (by session ID); whether it existed.
    pub(crate) fn remove(&mut self, session_id: &str, subscription_id: &str) -> bool {
        let before = self.list.len();
        self.list
            .retain(|s| !(&*s.session.id == session_id && &*s.id == subscription_id));
        self.list.len() != before
    }

    /// `unsubscribe`: drops the session's subscription, and its pending snapshot.
    pub(crate) fn unsubscribe(&mut self, session: &Arc<SessionShared>, id: &str) {
        let before = self.list.len();
        self.list
            .retain(|s| !(Arc::ptr_eq(&s.session, session) && &*s.id == id));
        if self.list.len() != before {
            session.subscriptions.lock().remove(id);
        }
        session.drop_snapshot(id);
    }

    /// `subscribe`: validates the request's `subscription_id` and `fields`
    /// against resource `index` and the session's limit; the new ID.
    pub(crate) fn subscribe(
        &mut self,
        session: &Arc<SessionShared>,
        (subscription_id, fields): (Option<&str>, Option<&Value>),
        instance: &Instance,
        index: usize,
        limit: usize,
    ) -> Result<Value, ProtocolError> {
        let meta = &instance.resources[index];
        let fields = requested_fields(fields, meta.kind, &meta.id)?;
        let id = match subscription_id {
            Some(id) if !id.is_empty() => Arc::<str>::from(id),
            _ => {
                return Err(err(
                    ErrorCode::InvalidRequest,
                    "subscription_id must be a nonempty string",
                ))
            }
        };
        if !session.subscriptions.lock().insert(id.clone()) {
            return Err(err(
                ErrorCode::InvalidRequest,
                "Subscription ID already exists",
            ));
        }
        if session.subscriptions.lock().len() > limit {
            session.subscriptions.lock().remove(&id);
            return Err(err(
                ErrorCode::InvalidRequest,
                format!("a session may hold at most {limit} subscriptions"),
            ));
        }
        self.list.push(Subscription {
            session: session.clone(),
            id: id.clone(),
            resource: index,
            fields,
        });
        Ok(Value::from(&*id))
    }

    /// Adds the controller's snapshots to the descriptors of a completed
    /// boundary: node and world resources, and the mutated env when
    /// configured (SPEC 8.3).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn controller_snapshots(
        &self,
        instance: &mut Instance,
        controller: &Arc<SessionShared>,
        descriptors: &mut [Value],
        stamp: (u64, u64),
        env_resource: Option<usize>,
        env_snapshots: bool,
        captures: &mut Captures,
    ) {
        let (revision, sequence) = stamp;
        for (index, descriptor) in descriptors.iter_mut().enumerate() {
            let kind = instance.resources[index].kind;
            if kind == ResourceKind::Env && (Some(index) != env_resource || !env_snapshots) {
                continue;
            }
            // The union of the controller's own selections for this
            // resource (empty when it subscribed with `fields: []`: no
            // proactive reads, as in the reference), else every field.
            let mut selected: Vec<Field> = Vec::new();
            let mut subscribed = false;
            for s in &self.list {
                if Arc::ptr_eq(&s.session, controller) && s.resource == index {
                    subscribed = true;
                    selected.extend(s.fields.iter().copied());
                }
            }
            if !subscribed {
                selected = kind
                    .fields()
                    .iter()
                    .filter_map(|f| Field::parse(f))
                    .collect();
            }
            let allowed = instance.snapshot_fields(index);
            let mut fields: Vec<Field> = selected
                .into_iter()
                .filter(|f| *f != Field::Render && allowed.as_ref().is_none_or(|a| a.contains(f)))
                .collect();
            fields.sort_by_key(|f| f.name());
            fields.dedup();
            let Ok(data) = instance.capture(index, &fields, captures) else {
                continue;
            };
            let mut snap = Dict::with_capacity(4);
            snap.insert("sequence", sequence);
            snap.insert("revision", revision);
            snap.insert(
                "fields",
                Value::List(fields.iter().map(|f| Value::from(f.name())).collect()),
            );
            snap.insert("data", data);
            if let Some(d) = descriptor.as_dict_mut() {
                d.insert("snapshot", snap);
            }
        }
    }

    /// Publishes a completed boundary (sequence `sequence`) to every
    /// matching subscription; a capture failure ends the subscription with a
    /// reliable `subscription_error`.
    pub(crate) fn publish(
        &mut self,
        instance: &mut Instance,
        domain: usize,
        p: Publish,
        revision: u64,
        sequence: u64,
    ) {
        // Nobody observes this domain (a learner's usual case): nothing to
        // build. The boundary's sequence is the caller's, taken already.
        if self.list.is_empty() {
            return;
        }
        let Publish {
            operation_id,
            kind,
            env_resource,
            mut captures,
        } = p;
        let boundary = Arc::new(Boundary {
            operation_id,
            kind: Value::from(kind),
            sequence,
            timestamp_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64),
            revision,
        });
        // Observers of the same resource and fields share one tail (data and
        // descriptor), encoded at most once.
        let mut tails: HashMap<(usize, Vec<Field>), Arc<SharedTail>> = HashMap::new();
        let mut ended: Vec<usize> = Vec::new();
        for (i, sub) in self.list.iter().enumerate() {
            let resource = sub.resource;
            if instance.resources[resource].kind == ResourceKind::Env
                && Some(resource) != env_resource
            {
                continue;
            }
            let key = (resource, sub.fields.clone());
            let data = match tails.get(&key) {
                Some(tail) => Ok(tail.clone()),
                None => instance
                    .capture(resource, &key.1, &mut captures)
                    .map(|data| {
                        let descriptor = instance.descriptor(resource, revision, sequence);
                        let tail = Arc::new(SharedTail::new(data, descriptor));
                        tails.insert(key, tail.clone());
                        tail
                    }),
            };
            let resource_id = instance.resources[resource].id.as_str();
            match data {
                Ok(tail) => sub.session.send_snapshot(
                    sub.id.clone(),
                    PendingSnapshot {
                        domain,
                        subscription_id: sub.id.clone(),
                        resource_id: Arc::from(resource_id),
                        boundary: boundary.clone(),
                        tail,
                    },
                ),
                Err(message) => {
                    let head = snapshot::header(
                        &sub.session.id,
                        "subscription_error",
                        &sub.id,
                        resource_id,
                        &boundary,
                    );
                    match snapshot::subscription_error(&sub.session.codec(), head, &message) {
                        Ok(bytes) => sub.session.send_reliable(bytes),
                        // Not even the error fits the session's limit: the
                        // session is closed (as for a response).
                        Err(e) => sub.session.close(CloseReason::InvalidEnvelope(e)),
                    }
                    sub.session.subscriptions.lock().remove(&sub.id);
                    ended.push(i);
                }
            }
        }
        for i in ended.into_iter().rev() {
            self.list.remove(i);
        }
    }
}

/// The fields a `subscribe` asks for: every field but `render` when absent,
/// else the listed ones (each a field of the resource's kind).
fn requested_fields(
    requested: Option<&Value>,
    kind: ResourceKind,
    resource_id: &str,
) -> Result<Vec<Field>, ProtocolError> {
    match requested {
        None => Ok(kind
            .fields()
            .iter()
            .filter(|f| **f != "render")
            .filter_map(|f| Field::parse(f))
            .collect()),
        Some(Value::List(items)) => {
            let mut fields = Vec::with_capacity(items.len());
            for item in items {
                match item
                    .as_str()
                    .filter(|f| kind.fields().contains(f))
                    .and_then(Field::parse)
                {
                    Some(f) => fields.push(f),
                    None => {
                        let asked = match item.as_str() {
                            Some(name) => name.to_string(),
                            None => format!("a {}", item.type_name()),
                        };
                        return Err(err(
                            ErrorCode::InvalidRequest,
                            format!(
                                "Unsupported snapshot fields: {} '{resource_id}' has no field '{asked}'{}",
                                kind.as_str(),
                                super::suggest::valid_list(&asked, kind.fields())
                            ),
                        ));
                    }
                }
            }
            Ok(fields)
        }
        Some(other) => Err(err(
            ErrorCode::InvalidRequest,
            format!(
                "Unsupported snapshot fields: fields must be a list of names, got a {}; {} fields are {}",
                other.type_name(),
                kind.as_str(),
                kind.fields().join(", ")
            ),
        )),
    }
}
