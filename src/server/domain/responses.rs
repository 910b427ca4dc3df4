//! A domain's responses and boundaries: the descriptors that go with a
//! reply, the controller's snapshots, and publishing a completed boundary.

use super::{call, Domain, Reply};
use crate::codec::{Dict, Value};
use crate::server::boundary::Publish;
use crate::server::outbound::SessionShared;
use std::sync::Arc;

impl Domain {
    /// A copy of every descriptor.
    pub(super) fn descriptors(&mut self) -> Vec<Value> {
        let (revision, sequence) = (self.control.revision(), self.control.sequence());
        self.instance.descriptors(revision, sequence)
    }

    /// The controller's snapshots of a boundary about to be published.
    pub(super) fn controller_snapshots(
        &mut self,
        session: &Arc<SessionShared>,
        descriptors: &mut [Value],
        publish: &mut Publish,
    ) {
        let controller = self
            .control
            .owner()
            .map_or_else(|| session.clone(), |(o, _)| o.clone());
        self.subscriptions.controller_snapshots(
            &mut self.instance,
            &controller,
            descriptors,
            (self.control.revision(), self.control.next_sequence()),
            publish.env_resource,
            self.server.config.env_boundary_snapshots,
            &mut publish.captures,
        );
    }

    /// The response of `complete`: the boundary's descriptors (with the
    /// controller's snapshots). On an encoding failure, the boundary still
    /// stands (it is published at once) and the message is returned.
    pub(super) fn boundary_response(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        mut publish: Publish,
    ) -> Result<(Reply, Option<Publish>), String> {
        let sequence = self.control.next_sequence();
        let mut descriptors = self
            .instance
            .take_descriptors_to_send(self.control.revision(), sequence);
        self.controller_snapshots(session, &mut descriptors, &mut publish);
        let mut result = Value::List(descriptors);
        let texts = self.instance.descriptor_texts();
        let bytes = call::encode_response(session, request, &mut result, &texts);
        if let Value::List(descriptors) = result {
            self.instance.restore_descriptors(descriptors);
        }
        match bytes {
            Ok(b) => Ok((Reply::Encoded(b), Some(publish))),
            Err(e) => {
                self.publish(publish);
                Err(e)
            }
        }
    }

    /// The response of a call: `{value, descriptors}`, the descriptors of
    /// an env mutation's boundary with the controller's snapshots.
    pub(super) fn call_response(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        value: Value,
        mut boundary: Option<Publish>,
    ) -> Result<(Reply, Option<Publish>), String> {
        let sequence = match boundary {
            Some(_) => self.control.next_sequence(),
            None => self.control.sequence(),
        };
        let mut descriptors = self
            .instance
            .take_descriptors_to_send(self.control.revision(), sequence);
        if let Some(publish) = boundary.as_mut() {
            self.controller_snapshots(session, &mut descriptors, publish);
        }
        let mut result = Dict::with_capacity(2);
        result.insert("value", value);
        result.insert("descriptors", Value::List(descriptors));
        let mut result = Value::Dict(result);
        let texts = self.instance.descriptor_texts();
        let encoded = call::encode_response(session, request, &mut result, &texts);
        if let Value::Dict(mut d) = result {
            if let Some(Value::List(descriptors)) = d.remove("descriptors") {
                self.instance.restore_descriptors(descriptors);
            }
        }
        Ok((Reply::Encoded(encoded?), boundary))
    }

    /// Publishes a completed boundary to every matching subscription.
    pub(super) fn publish(&mut self, p: Publish) {
        let sequence = self.control.publish();
        self.subscriptions.publish(
            &mut self.instance,
            self.index,
            p,
            self.control.revision(),
            sequence,
        );
    }
}
