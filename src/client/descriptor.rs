//! Resource descriptors as the client keeps them, and controller boundary
//! snapshots.

use crate::codec::{Dict, Value};
use crate::host::{Phase, Space};
use crate::protocol::ResourceKind;
use std::sync::{Arc, OnceLock};

/// A resource descriptor, as last received from the server.
///
/// The typed accessors cover the fields of the protocol; [`Descriptor::get`]
/// and [`Descriptor::raw`] give every field as received (unknown fields
/// included, the optional `snapshot` excluded). Spaces are parsed with
/// [`Space::from_value`]; a refreshed descriptor whose serialized space is
/// unchanged keeps the previously parsed `Arc<Space>` (so
/// [`Arc::ptr_eq`] tells whether a space changed).
#[derive(Debug, Clone)]
pub struct Descriptor {
    /// The fields as received; for a descriptor recognised by its text
    /// ([`Descriptor::with_sequence`]) those of the one first parsed, whose
    /// `sequence` is then stale ([`Descriptor::raw`] patches it).
    raw: Arc<Dict>,
    /// `raw` with the current `sequence`, built when first asked for.
    patched: OnceLock<Dict>,
    /// Whether `raw`'s `sequence` is not this descriptor's.
    stale: bool,
    id: String,
    kind: ResourceKind,
    world_id: Option<String>,
    node_id: Option<String>,
    /// Shared by the copies [`Descriptor::with_sequence`] makes (one per
    /// recognised reply), as `operations`.
    children: Arc<[(String, String)]>,
    revision: u64,
    sequence: u64,
    domain_id: String,
    operations: Arc<[String]>,
    spaces: [SpaceSlot; 3],
}

/// A space parsed from the descriptor's document (`raw[key]`, which is
/// what a later descriptor's document is compared with).
#[derive(Debug, Clone, Default)]
struct SpaceSlot {
    parsed: Option<Arc<Space>>,
}

const SPACE_KEYS: [&str; 3] = ["action_space", "observation_space", "context_space"];

impl Descriptor {
    /// Parses a descriptor; returns it with its optional boundary snapshot.
    /// `previous` (the descriptor of the same ID held so far) lends its
    /// parsed spaces when their serialized form is unchanged.
    pub(crate) fn parse(
        value: Value,
        previous: Option<&Descriptor>,
    ) -> Result<(Descriptor, Option<BoundarySnapshot>), String> {
        let Value::Dict(mut raw) = value else {
            return Err(format!(
                "a descriptor must be a dict, got {}",
                value.type_name()
            ));
        };
        let snapshot = raw.remove("snapshot").and_then(BoundarySnapshot::parse);
        let text = |key: &str| -> Result<Option<String>, String> {
            match raw.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Str(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!(
                    "descriptor field {key} must be a string, got {}",
                    other.type_name()
                )),
            }
        };
        let id = text("id")?.ok_or("descriptor without an id")?;
        let kind = raw
            .get("kind")
            .and_then(Value::as_str)
            .and_then(ResourceKind::parse)
            .ok_or_else(|| format!("descriptor {id} has no valid kind"))?;
        let world_id = text("world_id")?;
        let node_id = text("node_id")?;
        let domain_id = text("domain_id")?
            .or_else(|| world_id.clone())
            .unwrap_or_else(|| id.clone());
        let revision = raw
            .get("revision")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("descriptor {id} has no valid revision"))?;
        let sequence = match raw.get("sequence") {
            None => 0,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| format!("descriptor {id} has an invalid sequence"))?,
        };
        let children: Arc<[(String, String)]> = match raw.get("children") {
            None | Some(Value::Null) => Arc::new([]),
            Some(Value::Dict(d)) => d
                .iter()
                .map(|(name, child)| {
                    child
                        .as_str()
                        .map(|c| (name.to_string(), c.to_string()))
                        .ok_or_else(|| format!("descriptor {id} has a non-string child ID"))
                })
                .collect::<Result<Vec<_>, _>>()?
                .into(),
            Some(_) => return Err(format!("descriptor {id} has invalid children")),
        };
        let operations: Arc<[String]> = raw
            .get("operations")
            .and_then(Value::as_seq)
            .map(|ops| {
                ops.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect::<Arc<[String]>>()
            })
            .unwrap_or_else(|| Arc::new([]));
        let mut spaces: [SpaceSlot; 3] = Default::default();
        for (i, key) in SPACE_KEYS.iter().enumerate() {
            let Some(doc) = raw.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            // An unchanged document keeps its parsed space (compared with
            // the previous descriptor's own document: no copy is kept).
            let kept = previous.and_then(|p| {
                p.raw
                    .get(key)
                    .filter(|r| !r.is_null() && documents_equal(r, doc))
                    .map(|_| p.spaces[i].parsed.clone())
            });
            spaces[i] = SpaceSlot {
                parsed: match kept {
                    Some(parsed) => parsed,
                    None => Space::from_value(doc).ok().map(Arc::new),
                },
            };
        }
        Ok((
            Descriptor {
                raw: Arc::new(raw),
                patched: OnceLock::new(),
                stale: false,
                id,
                kind,
                world_id,
                node_id,
                children,
                revision,
                sequence,
                domain_id,
                operations,
                spaces,
            },
            snapshot,
        ))
    }

    /// The resource ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The resource kind.
    pub fn kind(&self) -> ResourceKind {
        self.kind
    }

    /// The world of an env, a world's own ID is not given (`None`), nodes of
    /// a world name it; detached nodes have none.
    pub fn world_id(&self) -> Option<&str> {
        self.world_id.as_deref()
    }

    /// The root node of a composed env.
    pub fn node_id(&self) -> Option<&str> {
        self.node_id.as_deref()
    }

    /// Child names and IDs, in the server's order.
    pub fn children(&self) -> &[(String, String)] {
        &self.children
    }

    /// The ID of the child called `name`.
    pub fn child(&self, name: &str) -> Option<&str> {
        self.children
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| id.as_str())
    }

    /// The domain's descriptor revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The domain's latest completed boundary (0 when the server does not
    /// send it).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The execution domain (`domain_id`, else `world_id`, else the ID).
    pub fn domain_id(&self) -> &str {
        &self.domain_id
    }

    /// The exported method names.
    pub fn operations(&self) -> &[String] {
        &self.operations
    }

    /// Whether `method` is exported.
    pub fn exports(&self, method: &str) -> bool {
        self.operations.iter().any(|m| m == method)
    }

    /// Any field as received (the `snapshot` field excluded).
    pub fn get(&self, key: &str) -> Option<&Value> {
        if key == "sequence" {
            return self.raw().get(key);
        }
        self.raw.get(key)
    }

    /// Every field as received (the `snapshot` field excluded).
    pub fn raw(&self) -> &Dict {
        if !self.stale {
            return &self.raw;
        }
        self.patched.get_or_init(|| {
            let mut raw = (*self.raw).clone();
            let sequence = match raw.get("sequence") {
                Some(Value::UInt(_)) => Value::UInt(self.sequence),
                _ => i64::try_from(self.sequence).map_or(Value::UInt(self.sequence), Value::Int),
            };
            raw.insert("sequence", sequence);
            raw
        })
    }

    /// This descriptor at another `sequence`, every other field the same
    /// (a reply whose descriptor text differed from this one's only in its
    /// sequence number; see `client/known.rs`). Shares the fields.
    pub(crate) fn with_sequence(&self, sequence: u64) -> Descriptor {
        let mut d = self.clone_fields();
        d.stale = self.stale || sequence != self.sequence;
        d.sequence = sequence;
        d
    }

    /// A copy sharing `raw` (the patched copy is not kept).
    fn clone_fields(&self) -> Descriptor {
        Descriptor {
            raw: self.raw.clone(),
            patched: OnceLock::new(),
            stale: self.stale,
            id: self.id.clone(),
            kind: self.kind,
            world_id: self.world_id.clone(),
            node_id: self.node_id.clone(),
            children: self.children.clone(),
            revision: self.revision,
            sequence: self.sequence,
            domain_id: self.domain_id.clone(),
            operations: self.operations.clone(),
            spaces: self.spaces.clone(),
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.raw.get(key).and_then(Value::as_str)
    }

    fn float(&self, key: &str) -> Option<f64> {
        self.raw.get(key).and_then(Value::as_f64)
    }

    fn flag(&self, key: &str) -> bool {
        self.raw.get(key).and_then(Value::truthy).unwrap_or(false)
    }

    /// `name` (nodes).
    pub fn name(&self) -> Option<&str> {
        self.text("name")
    }

    /// `batch_size`.
    pub fn batch_size(&self) -> Option<usize> {
        self.raw
            .get("batch_size")
            .and_then(Value::as_u64)
            .and_then(|b| usize::try_from(b).ok())
    }

    /// `world_timestep` (worlds).
    pub fn world_timestep(&self) -> Option<f64> {
        self.float("world_timestep")
    }

    /// `world_subtimestep` (worlds).
    pub fn world_subtimestep(&self) -> Option<f64> {
        self.float("world_subtimestep")
    }

    /// `control_timestep` (nodes, composed envs).
    pub fn control_timestep(&self) -> Option<f64> {
        self.float("control_timestep")
    }

    /// `update_timestep` (nodes).
    pub fn update_timestep(&self) -> Option<f64> {
        self.float("update_timestep")
    }

    /// `render_mode`.
    pub fn render_mode(&self) -> Option<&str> {
        self.text("render_mode")
    }

    /// `render_fps`.
    pub fn render_fps(&self) -> Option<i64> {
        self.raw.get("render_fps").and_then(Value::as_i64)
    }

    /// `supported_render_modes` (nodes).
    pub fn supported_render_modes(&self) -> Vec<&str> {
        self.raw
            .get("supported_render_modes")
            .and_then(Value::as_seq)
            .map(|s| s.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// `has_reward` (nodes).
    pub fn has_reward(&self) -> bool {
        self.flag("has_reward")
    }

    /// `has_termination_signal` (nodes).
    pub fn has_termination_signal(&self) -> bool {
        self.flag("has_termination_signal")
    }

    /// `has_truncation_signal` (nodes).
    pub fn has_truncation_signal(&self) -> bool {
        self.flag("has_truncation_signal")
    }

    /// `metadata` (envs).
    pub fn metadata(&self) -> Option<&Dict> {
        self.raw.get("metadata").and_then(Value::as_dict)
    }

    /// The priority set of a node lifecycle phase, as sent (highest first).
    pub fn priorities(&self, phase: Phase) -> Vec<i64> {
        self.raw
            .get(phase.descriptor_key())
            .and_then(Value::as_seq)
            .map(|s| s.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default()
    }

    /// `action_space`, parsed (`None` when null, absent or not parseable;
    /// the document itself is in [`Descriptor::get`]).
    pub fn action_space(&self) -> Option<Arc<Space>> {
        self.spaces[0].parsed.clone()
    }

    /// `observation_space`, parsed (see [`Descriptor::action_space`]).
    pub fn observation_space(&self) -> Option<Arc<Space>> {
        self.spaces[1].parsed.clone()
    }

    /// `context_space`, parsed (see [`Descriptor::action_space`]).
    pub fn context_space(&self) -> Option<Arc<Space>> {
        self.spaces[2].parsed.clone()
    }

    /// The boundary version `(revision, sequence)` that orders descriptors
    /// of one domain.
    pub(crate) fn version(&self) -> (u64, u64) {
        (self.revision, self.sequence)
    }
}

/// Field values captured by the server at a completed boundary and attached
/// to a controller's response (the `snapshot` member of a descriptor).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundarySnapshot {
    /// The boundary sequence.
    pub sequence: u64,
    /// The descriptor revision at the boundary.
    pub revision: u64,
    /// The sorted capture selection.
    pub fields: Vec<String>,
    /// The captured values (unavailable fields are absent).
    pub data: Dict,
}

impl BoundarySnapshot {
    /// Takes the snapshot's data out of `v` (no copy).
    fn parse(v: Value) -> Option<BoundarySnapshot> {
        let Value::Dict(mut d) = v else { return None };
        let Some(Value::Dict(data)) = d.remove("data") else {
            return None;
        };
        Some(BoundarySnapshot {
            sequence: d.get("sequence")?.as_u64()?,
            revision: d.get("revision")?.as_u64()?,
            fields: d
                .get("fields")?
                .as_seq()?
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            data,
        })
    }
}

/// Compares two serialized space documents as the reference does: dict keys
/// as sets, lists and tuples by type and items, integers and floats by value,
/// NaN equal to NaN; arrays are never equal (documents hold none).
pub(crate) fn documents_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Dict(x), Value::Dict(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| documents_equal(v, w)))
        }
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| documents_equal(v, w))
        }
        (Value::Array(_), _) | (_, Value::Array(_)) => false,
        (Value::Float(x), Value::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Value::Float(x), int @ (Value::Int(_) | Value::UInt(_)))
        | (int @ (Value::Int(_) | Value::UInt(_)), Value::Float(x)) => int_matches(int, *x),
        _ => a == b,
    }
}

/// Whether an integer equals a float exactly, as Python compares them (no
/// rounding of large integers through `f64`).
fn int_matches(int: &Value, x: f64) -> bool {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x.fract() != 0.0 {
        return false;
    }
    match int {
        Value::Int(i) => (-TWO_63..TWO_63).contains(&x) && *i == x as i64,
        Value::UInt(u) => (0.0..2.0 * TWO_63).contains(&x) && *u == x as u64,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict;

    fn descriptor(space: Value, revision: i64) -> Value {
        Value::Dict(dict! {
            "id" => "n", "kind" => "node", "world_id" => (), "node_id" => (),
            "children" => dict! { "a/b" => "n/a%2Fb" }, "revision" => revision, "sequence" => 2,
            "domain_id" => "n", "observation_space" => space, "action_space" => (),
            "reset_priorities" => Value::list([3, 1]), "has_reward" => true,
            "operations" => Value::list(["reset", "get_observation"]),
            "snapshot" => dict! { "sequence" => 2, "revision" => revision, "fields" => Value::list(["reward"]), "data" => dict! { "reward" => 1.5 } },
        })
    }

    #[test]
    fn parses_fields_and_keeps_unchanged_spaces() {
        let space = Space::unbounded_f32(vec![2]).to_value();
        let (first, snap) = Descriptor::parse(descriptor(space.clone(), 1), None).unwrap();
        assert_eq!(first.id(), "n");
        assert_eq!(first.kind(), ResourceKind::Node);
        assert_eq!(first.child("a/b"), Some("n/a%2Fb"));
        assert_eq!(first.version(), (1, 2));
        assert_eq!(first.priorities(Phase::Reset), vec![3, 1]);
        assert!(first.has_reward() && !first.has_truncation_signal());
        assert!(first.exports("reset") && !first.exports("step"));
        assert!(first.action_space().is_none());
        assert!(first.get("snapshot").is_none());
        let snap = snap.unwrap();
        assert_eq!(snap.data.get("reward"), Some(&Value::Float(1.5)));
        let obs = first.observation_space().unwrap();
        let (second, _) = Descriptor::parse(descriptor(space, 2), Some(&first)).unwrap();
        assert!(Arc::ptr_eq(&obs, &second.observation_space().unwrap()));
        let other = Space::unbounded_f32(vec![3]).to_value();
        let (third, _) = Descriptor::parse(descriptor(other, 3), Some(&second)).unwrap();
        assert!(!Arc::ptr_eq(&obs, &third.observation_space().unwrap()));
        assert_eq!(third.observation_space().unwrap().shape(), Some(vec![3]));
    }

    #[test]
    fn rejects_malformed_descriptors() {
        assert!(Descriptor::parse(Value::Null, None).is_err());
        assert!(Descriptor::parse(Value::Dict(dict! { "id" => "x" }), None).is_err());
        let bad_kind = dict! { "id" => "x", "kind" => "robot", "revision" => 0 };
        assert!(Descriptor::parse(Value::Dict(bad_kind), None).is_err());
    }

    #[test]
    fn document_equality_follows_python() {
        assert!(documents_equal(&Value::Int(1), &Value::Float(1.0)));
        assert!(!documents_equal(&Value::Int(1), &Value::Float(1.5)));
        assert!(documents_equal(
            &Value::Float(f64::NAN),
            &Value::Float(f64::NAN)
        ));
        assert!(!documents_equal(&Value::list([1]), &Value::tuple([1])));
        let a = Value::Dict(dict! { "x" => 1, "y" => 2 });
        let b = Value::Dict(dict! { "y" => 2, "x" => 1 });
        assert!(documents_equal(&a, &b));
        assert!(!documents_equal(
            &Value::Int(i64::MAX),
            &Value::Float(i64::MAX as f64)
        ));
    }
}
