//! Hosted objects as the server sees them: their resources (IDs, kinds,
//! links), descriptors, method dispatch and snapshot reads.

use crate::codec::{Dict, Value};
use crate::host::tree::{NodeAttrs, Tree};
use crate::host::{CallArgs, Env, Field, HostError, HostResult, Node, Phase, ResetArgs, Space};
use crate::protocol::ResourceKind;

/// What a domain hosts: an env (possibly composed of a world and nodes), or
/// a detached node tree.
pub struct Hosted {
    pub(crate) inner: HostedInner,
}

pub(crate) enum HostedInner {
    Env(Box<dyn Env>),
    Tree(Box<dyn Tree>),
}

impl Hosted {
    /// An environment. When it is composed of a world and nodes (a
    /// [`WorldEnv`](crate::host::WorldEnv), or a wrapper forwarding
    /// [`Env::as_tree`]), the world and every node are exported too, as
    /// `ID/world`, `ID/node` and `ID/node/<child>`.
    pub fn env(env: impl Env) -> Hosted {
        Hosted {
            inner: HostedInner::Env(Box::new(env)),
        }
    }

    /// A detached node tree (no world): a device with its own execution
    /// domain, driven in components mode only.
    pub fn detached(node: impl Node<()>) -> Hosted {
        Hosted {
            inner: HostedInner::Tree(Box::new(crate::host::Detached::new(node))),
        }
    }

    /// A boxed env.
    pub fn boxed_env(env: Box<dyn Env>) -> Hosted {
        Hosted {
            inner: HostedInner::Env(env),
        }
    }
}

impl<E: Env> From<E> for Hosted {
    fn from(env: E) -> Hosted {
        Hosted::env(env)
    }
}

/// Where a resource lives inside the hosted object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Addr {
    Env,
    World,
    Node(Vec<usize>),
}

/// A resource's identity and relationships (frozen at instantiation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceMeta {
    pub id: String,
    pub kind: ResourceKind,
    pub addr: Addr,
    pub world_id: Option<String>,
    pub node_id: Option<String>,
    /// (child name, child resource ID), in child order.
    pub children: Vec<(String, String)>,
}

/// Percent-encodes a child name as Python's `urllib.parse.quote(name,
/// safe="")`: everything but ASCII letters, digits and `-._~`, as UTF-8 bytes
/// with uppercase hex.
pub(crate) fn quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[(b >> 4) as usize]));
            out.push(char::from(b"0123456789ABCDEF"[(b & 15) as usize]));
        }
    }
    out
}

/// The resources of a hosted object registered as `root_id`, in the
/// reference's registration order: an env, its world, its root node, then the
/// node's descendants depth first; or a detached root and its descendants.
pub(crate) fn topology(root_id: &str, hosted: &Hosted) -> Result<Vec<ResourceMeta>, String> {
    let mut out = Vec::new();
    match &hosted.inner {
        HostedInner::Env(env) => {
            let tree = env.tree();
            let has_tree = tree.is_some_and(|t| t.has_world());
            let world_id = format!("{root_id}/world");
            let node_id = format!("{root_id}/node");
            out.push(ResourceMeta {
                id: root_id.to_string(),
                kind: ResourceKind::Env,
                addr: Addr::Env,
                world_id: has_tree.then(|| world_id.clone()),
                node_id: has_tree.then(|| node_id.clone()),
                children: Vec::new(),
            });
            if let Some(tree) = tree.filter(|t| t.has_world()) {
                out.push(ResourceMeta {
                    id: world_id.clone(),
                    kind: ResourceKind::World,
                    addr: Addr::World,
                    world_id: None,
                    node_id: None,
                    children: Vec::new(),
                });
                visit_nodes(tree, &node_id, Some(&world_id), &mut Vec::new(), &mut out)?;
            }
        }
        HostedInner::Tree(tree) => {
            visit_nodes(tree.as_ref(), root_id, None, &mut Vec::new(), &mut out)?
        }
    }
    Ok(out)
}

fn visit_nodes(
    tree: &dyn Tree,
    id: &str,
    world_id: Option<&str>,
    path: &mut Vec<usize>,
    out: &mut Vec<ResourceMeta>,
) -> Result<(), String> {
    let names = tree
        .node_children(path)
        .ok_or_else(|| format!("node {id} is missing from its tree"))?;
    let mut children: Vec<(String, String)> = Vec::with_capacity(names.len());
    for name in &names {
        if children.iter().any(|(n, _)| n == name) {
            return Err(format!("duplicate child node name {name:?} under {id}"));
        }
        children.push((name.clone(), format!("{id}/{}", quote(name))));
    }
    out.push(ResourceMeta {
        id: id.to_string(),
        kind: ResourceKind::Node,
        addr: Addr::Node(path.clone()),
        world_id: world_id.map(str::to_string),
        node_id: None,
        children: children.clone(),
    });
    for (i, (_, child_id)) in children.iter().enumerate() {
        path.push(i);
        visit_nodes(tree, child_id, world_id, path, out)?;
        path.pop();
    }
    Ok(())
}

impl Hosted {
    fn tree(&self) -> Option<&dyn Tree> {
        match &self.inner {
            HostedInner::Env(env) => env.tree(),
            HostedInner::Tree(t) => Some(t.as_ref()),
        }
    }

    fn tree_mut(&mut self) -> Option<&mut dyn Tree> {
        match &mut self.inner {
            HostedInner::Env(env) => env.as_tree(),
            HostedInner::Tree(t) => Some(t.as_mut()),
        }
    }

    fn env_ref(&self) -> Option<&dyn Env> {
        match &self.inner {
            HostedInner::Env(env) => Some(env.as_ref()),
            HostedInner::Tree(_) => None,
        }
    }

    /// Whether `method` is exported for the resource.
    pub(crate) fn exports(&self, meta: &ResourceMeta, method: &str) -> bool {
        match meta.kind.is_mutation(method) {
            None => false,
            Some(_) if meta.kind == ResourceKind::Env && method == "reload" => {
                self.env_ref().is_some_and(|e| e.supports_reload())
            }
            Some(_) => true,
        }
    }

    /// The resource's current descriptor attributes, as comparable data.
    pub(crate) fn attrs(&self, meta: &ResourceMeta) -> Attrs {
        match &meta.addr {
            Addr::Env => match self.env_ref() {
                Some(env) => Attrs::Env(Box::new(EnvAttrs {
                    batch_size: env.batch_size(),
                    control_timestep: env.has_control_timestep().then(|| env.control_timestep()),
                    render_mode: env.render_mode(),
                    render_fps: env.render_fps(),
                    metadata: env.metadata(),
                    spaces: [
                        env.action_space(),
                        env.observation_space(),
                        env.context_space(),
                    ],
                    reload: env.supports_reload(),
                })),
                None => Attrs::Missing,
            },
            Addr::World => self
                .tree()
                .map_or(Attrs::Missing, |t| Attrs::World(t.world_attrs())),
            Addr::Node(path) => self
                .tree()
                .and_then(|t| t.node_attrs(path))
                .map_or(Attrs::Missing, |a| Attrs::Node(Box::new(a))),
        }
    }

    /// `remote_snapshot_fields` of a node resource.
    pub(crate) fn snapshot_fields(&self, meta: &ResourceMeta) -> Option<Vec<Field>> {
        match &meta.addr {
            Addr::Node(path) => self.tree()?.node_attrs(path)?.remote_snapshot_fields,
            _ => None,
        }
    }

    /// Calls an exported method (the caller checked the allowlist).
    pub(crate) fn call(
        &mut self,
        meta: &ResourceMeta,
        method: &str,
        args: CallArgs,
    ) -> HostResult<Value> {
        match &meta.addr {
            Addr::Env => {
                let HostedInner::Env(env) = &mut self.inner else {
                    return Err(HostError::new("not an env"));
                };
                call_env(env.as_mut(), method, args)
            }
            Addr::World => self
                .tree_mut()
                .ok_or_else(|| HostError::new("no world"))?
                .world_call(method, args),
            Addr::Node(path) => self
                .tree_mut()
                .ok_or_else(|| HostError::new("no node tree"))?
                .node_call(path, method, args),
        }
    }

    /// Reads a node field through its getter (`Ok(None)` when it does not apply).
    pub(crate) fn read_node(
        &mut self,
        meta: &ResourceMeta,
        field: Field,
    ) -> HostResult<Option<Value>> {
        match &meta.addr {
            Addr::Node(path) => self
                .tree_mut()
                .ok_or_else(|| HostError::new("no node tree"))?
                .node_read(path, field),
            _ => Ok(None),
        }
    }

    /// Renders an env (for observers that subscribed to `render`).
    pub(crate) fn render_env(&mut self) -> HostResult<Value> {
        match &mut self.inner {
            HostedInner::Env(env) => env.render(),
            HostedInner::Tree(_) => Ok(Value::Null),
        }
    }

    /// Closes everything once: the env (which closes what it wraps), or the
    /// detached root (which closes its children).
    pub(crate) fn close(&mut self) {
        match &mut self.inner {
            HostedInner::Env(env) => env.close(),
            HostedInner::Tree(t) => t.close(),
        }
    }
}

/// A resource's descriptor attributes as data: compared with the last ones
/// to reuse the last descriptor when nothing changed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attrs {
    Env(Box<EnvAttrs>),
    World(crate::host::tree::WorldAttrs),
    Node(Box<NodeAttrs>),
    /// The hosted object is gone (disposed).
    Missing,
}

/// An env's descriptor attributes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EnvAttrs {
    batch_size: Option<usize>,
    /// `Some` when the env has the attribute (a `WorldEnv`).
    control_timestep: Option<Option<f64>>,
    render_mode: Option<String>,
    render_fps: Option<i64>,
    metadata: Dict,
    /// action, observation, context.
    spaces: [Option<Space>; 3],
    reload: bool,
}

impl Attrs {
    /// Writes the kind-specific descriptor members (everything after
    /// `domain_id`, `operations` included), in the reference's order.
    pub(crate) fn write(&self, kind: ResourceKind, d: &mut Dict) {
        let space = |s: &Option<Space>| s.as_ref().map_or(Value::Null, Space::to_value);
        match self {
            Attrs::Env(e) => {
                d.insert("batch_size", e.batch_size);
                if let Some(ct) = e.control_timestep {
                    d.insert("control_timestep", ct);
                }
                d.insert("render_mode", e.render_mode.clone());
                d.insert("render_fps", e.render_fps);
                d.insert("metadata", e.metadata.clone());
                d.insert("action_space", space(&e.spaces[0]));
                d.insert("observation_space", space(&e.spaces[1]));
                d.insert("context_space", space(&e.spaces[2]));
            }
            Attrs::World(w) => {
                d.insert("batch_size", w.batch_size);
                d.insert("world_timestep", w.world_timestep);
                d.insert("world_subtimestep", w.world_subtimestep);
            }
            Attrs::Node(a) => node_attrs_into(a, d),
            Attrs::Missing => return,
        }
        let reload = matches!(self, Attrs::Env(e) if e.reload);
        let mut ops: Vec<&'static str> = kind
            .methods()
            .iter()
            .map(|(m, _)| *m)
            .filter(|m| kind != ResourceKind::Env || *m != "reload" || reload)
            .collect();
        ops.sort_unstable();
        d.insert(
            "operations",
            Value::List(ops.into_iter().map(Value::from).collect()),
        );
    }
}

fn node_attrs_into(a: &NodeAttrs, d: &mut Dict) {
    let space = |s: &Option<Space>| s.as_ref().map_or(Value::Null, Space::to_value);
    d.insert("name", a.name.as_str());
    d.insert("control_timestep", a.control_timestep);
    d.insert("update_timestep", a.update_timestep);
    d.insert("render_mode", a.render_mode.clone());
    d.insert(
        "supported_render_modes",
        Value::Tuple(a.supported_render_modes.iter().map(Value::from).collect()),
    );
    d.insert("has_reward", a.has_reward);
    d.insert("has_termination_signal", a.has_termination_signal);
    d.insert("has_truncation_signal", a.has_truncation_signal);
    d.insert("action_space", space(&a.action_space));
    d.insert("observation_space", space(&a.observation_space));
    d.insert("context_space", space(&a.context_space));
    for (phase, prios) in Phase::ALL.iter().zip(&a.priorities) {
        d.insert(
            phase.descriptor_key(),
            Value::List(prios.iter().map(|p| Value::Int(*p)).collect()),
        );
    }
}

fn call_env(env: &mut dyn Env, method: &str, mut args: CallArgs) -> HostResult<Value> {
    use crate::host::tree::ran;
    match method {
        "reset" => {
            let a = ResetArgs::bind(&mut args)?;
            ran(env.reset(a)).map(|r| r.into_value())
        }
        "reload" => {
            let a = ResetArgs::bind(&mut args)?;
            ran(env.reload(a)).map(|r| r.into_value())
        }
        "step" => {
            let action = args.required("action", 0)?;
            args.finish()?;
            ran(env.step(action)).map(|r| r.into_value())
        }
        "render" => {
            args.finish()?;
            ran(env.render())
        }
        other => Err(HostError::invalid_argument(format!(
            "{other} is not an env method"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_python() {
        assert_eq!(quote("arm/grip"), "arm%2Fgrip");
        assert_eq!(quote("a b~c.d-e_f"), "a%20b~c.d-e_f");
        assert_eq!(quote("é"), "%C3%A9");
        assert_eq!(quote("%"), "%25");
    }
}
