//! Hosted objects as the server sees them: their resources (IDs, kinds,
//! links), descriptors, method dispatch and snapshot reads.

use crate::codec::{Dict, Value};
use crate::host::tree::{NodeAttrs, Tree};
use crate::host::{
    CallArgs, Env, Field, HostError, HostResult, Node, Phase, ResetArgs, Space, World,
};
use crate::protocol::ResourceKind;

/// What a domain hosts: an env (possibly composed of a world and nodes), a
/// bare world, an attached or detached node tree, several registrations
/// sharing one world (see [`Hosted::with_env`]), or objects laid out by a
/// foreign runtime ([`Hosted::foreign`]).
pub struct Hosted {
    pub(crate) inner: HostedInner,
}

pub(crate) enum HostedInner {
    Native(Native),
    Foreign(Box<dyn ForeignHost>),
}

/// Rust objects: envs, a world-and-node tree, and what is registered.
pub(crate) struct Native {
    /// Registered envs, in registration order.
    envs: Vec<Box<dyn Env>>,
    /// The domain's world and node tree when it is not reached through the
    /// first env's [`Env::as_tree`].
    tree: Option<Box<dyn Tree>>,
    /// Registrations in order: the first one is the root ID given to the
    /// server (`None`), the others carry their own ID.
    members: Vec<(Option<String>, Addr)>,
}

/// One resource of a [`ForeignHost`]: its identity and relationships, as the
/// reference's registry records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignResource {
    /// Resource ID.
    pub id: String,
    /// Resource kind.
    pub kind: ResourceKind,
    /// `world_id` (an env or node attached to a world).
    pub world_id: Option<String>,
    /// `node_id` (an env composed of a world and nodes).
    pub node_id: Option<String>,
    /// (child name, child resource ID), in child order.
    pub children: Vec<(String, String)>,
}

/// Objects of a foreign runtime (such as Python) hosted by one domain, which
/// lays out its own resources and is addressed by resource index (the order
/// of [`ForeignHost::resources`]). Every method runs on the domain's thread.
///
/// Unlike [`Env`] and [`Tree`], arguments are passed through unbound: the
/// foreign object binds them itself, as the reference does, so a binding
/// failure is an execution error of the call.
pub trait ForeignHost: 'static {
    /// The resources in the reference's registration order; the first one is
    /// the domain's root (`root_id`).
    fn resources(&mut self, root_id: &str) -> Result<Vec<ForeignResource>, String>;
    /// Resource `index`'s descriptor members after `domain_id`, `operations`
    /// included, in the reference's order.
    fn descriptor(&mut self, index: usize) -> Dict;
    /// Resource `index`'s descriptor members as [`ForeignHost::descriptor`]
    /// gives them, or `None` when the host knows they are the same as the
    /// last ones it gave for the resource (through either method): every
    /// call's response carries the descriptors, and a host that notices
    /// change cheaply saves building them. By default, always built.
    fn descriptor_if_changed(&mut self, index: usize) -> Option<Dict> {
        Some(self.descriptor(index))
    }
    /// Whether `method` (one of the kind's protocol methods) is exported.
    fn exports(&mut self, index: usize, method: &str) -> bool;
    /// `remote_snapshot_fields` of a node (`None`: every field).
    fn snapshot_fields(&mut self, index: usize) -> Option<Vec<Field>>;
    /// Calls `method` with the request's arguments (arrays already in native
    /// byte order). [`HostErrorKind::Serialization`](crate::host::HostErrorKind::Serialization)
    /// reports a result that cannot be encoded;
    /// [`HostErrorKind::ResultTooLarge`](crate::host::HostErrorKind::ResultTooLarge)
    /// one that ran but was found over the server's `max_message_size` while
    /// converted (so that it is never built in full).
    fn call(
        &mut self,
        index: usize,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> HostResult<Value>;
    /// Reads a snapshot field: a node's getter when the field applies to it,
    /// or an env's `render` (`Ok(None)`: not applicable).
    fn read(&mut self, index: usize, field: Field) -> HostResult<Option<Value>>;
    /// **Extension** (SPEC.md, "Extension: sub-env attributes"): env
    /// resource `index`'s [`Env::call_attribute`]; by default not
    /// implemented.
    fn call_attribute(
        &mut self,
        index: usize,
        name: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> HostResult<Vec<Value>> {
        let _ = (index, name, args, kwargs);
        Err(HostError::not_implemented("ext:call"))
    }
    /// **Extension**: env resource `index`'s [`Env::set_attribute`]; by
    /// default not implemented.
    fn set_attribute(&mut self, index: usize, name: &str, values: Vec<Value>) -> HostResult<()> {
        let _ = (index, name, values);
        Err(HostError::not_implemented("ext:set_attr"))
    }
    /// Releases everything, once, as the reference disposes of a domain.
    fn close(&mut self);
}

impl Hosted {
    fn native(envs: Vec<Box<dyn Env>>, tree: Option<Box<dyn Tree>>, root: Addr) -> Hosted {
        Hosted {
            inner: HostedInner::Native(Native {
                envs,
                tree,
                members: vec![(None, root)],
            }),
        }
    }

    /// An environment. When it is composed of a world and nodes (a
    /// [`WorldEnv`](crate::host::WorldEnv), or a wrapper forwarding
    /// [`Env::as_tree`]), the world and every node are exported too, as
    /// `ID/world`, `ID/node` and `ID/node/<child>`.
    pub fn env(env: impl Env) -> Hosted {
        Hosted::boxed_env(Box::new(env))
    }

    /// A boxed env.
    pub fn boxed_env(env: Box<dyn Env>) -> Hosted {
        Hosted::native(vec![env], None, Addr::Env(0))
    }

    /// A detached node tree (no world): a device with its own execution
    /// domain, driven in components mode only.
    pub fn detached(node: impl Node<()>) -> Hosted {
        Hosted::native(
            Vec::new(),
            Some(Box::new(crate::host::Detached::new(node))),
            Addr::Node(Vec::new()),
        )
    }

    /// A bare world, registered on its own (kind `world`, no nodes): a
    /// coordinator drives it in components mode.
    pub fn world(world: impl World) -> Hosted {
        Hosted::native(
            Vec::new(),
            Some(Box::new(crate::host::tree::WorldOnly::new(world))),
            Addr::World,
        )
    }

    /// A node attached to a world, registered as the root: the node (and its
    /// descendants, as `ID/<child>`) and its world, as `ID/world`.
    pub fn attached<W: World>(world: W, node: Box<dyn Node<W>>) -> Hosted {
        Hosted::native(
            Vec::new(),
            Some(Box::new(crate::host::tree::Attached::new(world, node))),
            Addr::Node(Vec::new()),
        )
    }

    /// A world-and-node tree (any [`Tree`], for example a
    /// `Rc<RefCell<WorldEnv<W>>>` that envs registered with
    /// [`Hosted::with_env`] share), registered as its root node — or, for a
    /// tree with a world but no nodes, as its world.
    pub fn tree(tree: impl Tree + 'static) -> Hosted {
        let root = if tree.node_children(&[]).is_some() {
            Addr::Node(Vec::new())
        } else {
            Addr::World
        };
        Hosted::native(Vec::new(), Some(Box::new(tree)), root)
    }

    /// Registers another env in the same domain under `id` — the
    /// wrapper-plus-base pattern: a wrapper and the env it wraps, both
    /// addressable. When the domain has a world (the tree given to
    /// [`Hosted::tree`]/[`Hosted::with_tree`], or the first env's
    /// [`Env::as_tree`]), the env is composed of it: its descriptor links the
    /// already exported world and root node. The objects share state the Rust
    /// way, e.g. through `Rc<RefCell<_>>` ([`Env`] and [`Tree`] are
    /// implemented for `Rc<RefCell<T>>`); they are built on the domain's own
    /// thread with [`ServerBuilder::register_with`](super::ServerBuilder::register_with).
    /// At disposal only the first registered env is closed (it closes what it
    /// wraps), as the reference closes the outermost registered wrapper.
    pub fn with_env(mut self, id: &str, env: impl Env) -> Hosted {
        if let HostedInner::Native(n) = &mut self.inner {
            n.envs.push(Box::new(env));
            let slot = n.envs.len() - 1;
            n.members.push((Some(id.to_string()), Addr::Env(slot)));
        }
        self
    }

    /// Sets the world-and-node tree the domain's envs are composed of, when
    /// the first env does not hand it out through [`Env::as_tree`].
    pub fn with_tree(mut self, tree: impl Tree + 'static) -> Hosted {
        if let HostedInner::Native(n) = &mut self.inner {
            n.tree = Some(Box::new(tree));
        }
        self
    }

    /// Also registers the domain's world under `id`. An object that is
    /// already exported keeps its first ID (the reference returns the
    /// existing ID of a re-registered object, without aliases).
    pub fn with_world(mut self, id: &str) -> Hosted {
        if let HostedInner::Native(n) = &mut self.inner {
            n.members.push((Some(id.to_string()), Addr::World));
        }
        self
    }

    /// Also registers the node at `path` (child indices from the root node)
    /// under `id`, with its world and descendants (see [`Hosted::with_world`]
    /// for objects already exported).
    pub fn with_node(mut self, id: &str, path: &[usize]) -> Hosted {
        if let HostedInner::Native(n) = &mut self.inner {
            n.members
                .push((Some(id.to_string()), Addr::Node(path.to_vec())));
        }
        self
    }

    /// Objects of a foreign runtime, which lays out its own resources.
    pub fn foreign(host: impl ForeignHost) -> Hosted {
        Hosted {
            inner: HostedInner::Foreign(Box::new(host)),
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
    /// A registered env, by slot.
    Env(usize),
    World,
    Node(Vec<usize>),
    /// A resource of a foreign host, by index.
    Foreign(usize),
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

/// Why a hosted object's resources cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TopologyError {
    /// Two resources would have this ID (the server reports
    /// [`RegisterError::Taken`](super::RegisterError::Taken)).
    #[error("Resource ID already registered: {0}")]
    Taken(String),
    /// Anything else wrong with the tree.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for TopologyError {
    fn from(message: String) -> TopologyError {
        TopologyError::Invalid(message)
    }
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

/// Whether a resource ID may be hosted: non-empty, at most 1,024 bytes, no
/// control characters (Unicode category `Cc`: a NUL, a newline).
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 1024 && !id.chars().any(char::is_control)
}

/// The resources of a hosted object registered as `root_id`, in the
/// reference's registration order: each registration in turn — an env, then
/// its world and root node; a node, then its world and its descendants depth
/// first; a world — where an object already exported keeps its first ID.
pub(crate) fn topology(
    root_id: &str,
    hosted: &mut Hosted,
) -> Result<Vec<ResourceMeta>, TopologyError> {
    match &mut hosted.inner {
        HostedInner::Foreign(host) => {
            let resources = host.resources(root_id)?;
            if resources.first().is_none_or(|r| r.id != root_id) {
                return Err(format!("the first resource must be the root {root_id:?}").into());
            }
            let mut out: Vec<ResourceMeta> = Vec::with_capacity(resources.len());
            for (i, r) in resources.into_iter().enumerate() {
                if !valid_id(&r.id) {
                    let shown: String = r.id.chars().take(64).collect();
                    return Err(format!(
                        "invalid resource ID {shown:?}: IDs are non-empty, at most 1024 bytes, without control characters"
                    )
                    .into());
                }
                if out.iter().any(|m| m.id == r.id) {
                    return Err(TopologyError::Taken(r.id));
                }
                out.push(ResourceMeta {
                    id: r.id,
                    kind: r.kind,
                    addr: Addr::Foreign(i),
                    world_id: r.world_id,
                    node_id: r.node_id,
                    children: r.children,
                });
            }
            Ok(out)
        }
        HostedInner::Native(native) => {
            let members = native.members.clone();
            let env_count = native.envs.len();
            let tree = native.tree_mut().map(|t| &*t);
            let mut layout = Layout {
                tree,
                out: Vec::new(),
            };
            for (id, addr) in members {
                let id = id.unwrap_or_else(|| root_id.to_string());
                if let Addr::Env(slot) = addr {
                    if slot >= env_count {
                        return Err(format!("no env in slot {slot}").into());
                    }
                }
                layout.visit(&id, addr)?;
            }
            Ok(layout.out)
        }
    }
}

struct Layout<'a> {
    tree: Option<&'a dyn Tree>,
    out: Vec<ResourceMeta>,
}

impl Layout<'_> {
    fn has_world(&self) -> bool {
        self.tree.is_some_and(|t| t.has_world())
    }

    /// Exports the object at `addr` as `id` (or returns its existing ID).
    fn visit(&mut self, id: &str, addr: Addr) -> Result<String, TopologyError> {
        if let Some(existing) = self.out.iter().find(|m| m.addr == addr) {
            return Ok(existing.id.clone());
        }
        if self.out.iter().any(|m| m.id == id) {
            return Err(TopologyError::Taken(id.to_string()));
        }
        let index = self.out.len();
        let (kind, children) = match &addr {
            Addr::Env(_) => (ResourceKind::Env, Vec::new()),
            Addr::World => {
                if !self.has_world() {
                    return Err(format!("{id}: the domain has no world").into());
                }
                (ResourceKind::World, Vec::new())
            }
            Addr::Node(path) => {
                let names = self
                    .tree
                    .and_then(|t| t.node_children(path))
                    .ok_or_else(|| format!("node {id} is missing from its tree"))?;
                let mut children: Vec<(String, String)> = Vec::with_capacity(names.len());
                for name in names {
                    if children.iter().any(|(n, _)| *n == name) {
                        return Err(format!("duplicate child node name {name:?} under {id}").into());
                    }
                    let child_id = format!("{id}/{}", quote(&name));
                    children.push((name, child_id));
                }
                (ResourceKind::Node, children)
            }
            Addr::Foreign(_) => {
                return Err(TopologyError::Invalid(
                    "a foreign address in a native tree".into(),
                ))
            }
        };
        self.out.push(ResourceMeta {
            id: id.to_string(),
            kind,
            addr: addr.clone(),
            world_id: None,
            node_id: None,
            children: Vec::new(),
        });
        let composed = self.has_world();
        match &addr {
            Addr::Env(_) if composed => {
                let world_id = self.visit(&format!("{id}/world"), Addr::World)?;
                let node_id = self.visit(&format!("{id}/node"), Addr::Node(Vec::new()))?;
                self.out[index].world_id = Some(world_id);
                self.out[index].node_id = Some(node_id);
            }
            Addr::Node(path) => {
                if composed {
                    let world_id = self.visit(&format!("{id}/world"), Addr::World)?;
                    self.out[index].world_id = Some(world_id);
                }
                let mut linked = Vec::with_capacity(children.len());
                for (i, (name, child_id)) in children.into_iter().enumerate() {
                    let mut child = path.clone();
                    child.push(i);
                    linked.push((name, self.visit(&child_id, Addr::Node(child))?));
                }
                self.out[index].children = linked;
            }
            _ => {}
        }
        Ok(id.to_string())
    }
}

impl Native {
    /// The domain's world and node tree: the one given, or the first env's.
    fn tree_mut(&mut self) -> Option<&mut dyn Tree> {
        match &mut self.tree {
            Some(t) => Some(t.as_mut()),
            None => self.envs.first_mut().and_then(|e| e.as_tree()),
        }
    }
}

impl Hosted {
    fn native_tree(&mut self) -> Option<&mut dyn Tree> {
        match &mut self.inner {
            HostedInner::Native(n) => n.tree_mut(),
            HostedInner::Foreign(_) => None,
        }
    }

    pub(crate) fn env_mut(&mut self, slot: usize) -> Option<&mut dyn Env> {
        match &mut self.inner {
            HostedInner::Native(n) => n.envs.get_mut(slot).map(|e| e.as_mut() as &mut dyn Env),
            HostedInner::Foreign(_) => None,
        }
    }

    /// Whether `method` is exported for the resource.
    pub(crate) fn exports(&mut self, meta: &ResourceMeta, method: &str) -> bool {
        if meta.kind.is_mutation(method).is_none() {
            return false;
        }
        match &meta.addr {
            Addr::Foreign(i) => match &mut self.inner {
                HostedInner::Foreign(host) => host.exports(*i, method),
                HostedInner::Native(_) => false,
            },
            Addr::Env(slot) if method == "reload" => {
                self.env_mut(*slot).is_some_and(|e| e.supports_reload())
            }
            _ => true,
        }
    }

    /// The resource's current descriptor attributes, as comparable data.
    pub(crate) fn attrs(&mut self, meta: &ResourceMeta) -> Attrs {
        match &meta.addr {
            Addr::Foreign(i) => match &mut self.inner {
                HostedInner::Foreign(host) => Attrs::Raw(Box::new(host.descriptor(*i))),
                HostedInner::Native(_) => Attrs::Missing,
            },
            Addr::Env(slot) => match self.env_mut(*slot) {
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
                .native_tree()
                .map_or(Attrs::Missing, |t| Attrs::World(t.world_attrs())),
            Addr::Node(path) => self
                .native_tree()
                .and_then(|t| t.node_attrs(path))
                .map_or(Attrs::Missing, |a| Attrs::Node(Box::new(a))),
        }
    }

    /// The resource's descriptor attributes when they may differ from the
    /// last ones read (`None`: a foreign host knows they are the same).
    pub(crate) fn attrs_if_changed(&mut self, meta: &ResourceMeta) -> Option<Attrs> {
        match (&meta.addr, &mut self.inner) {
            (Addr::Foreign(i), HostedInner::Foreign(host)) => host
                .descriptor_if_changed(*i)
                .map(|d| Attrs::Raw(Box::new(d))),
            _ => Some(self.attrs(meta)),
        }
    }

    /// The declared action space of an env or node resource hosted in Rust
    /// (`None` for foreign hosts, worlds, and resources without one), read
    /// alone (not with every other descriptor attribute).
    pub(crate) fn action_space(&mut self, meta: &ResourceMeta) -> Option<Space> {
        match &meta.addr {
            Addr::Env(slot) => self.env_mut(*slot)?.action_space(),
            Addr::Node(path) => self.native_tree()?.node_attrs(path)?.action_space,
            _ => None,
        }
    }

    /// `remote_snapshot_fields` of a node resource.
    pub(crate) fn snapshot_fields(&mut self, meta: &ResourceMeta) -> Option<Vec<Field>> {
        match &meta.addr {
            Addr::Node(path) => self.native_tree()?.node_attrs(path)?.remote_snapshot_fields,
            Addr::Foreign(i) if meta.kind == ResourceKind::Node => match &mut self.inner {
                HostedInner::Foreign(host) => host.snapshot_fields(*i),
                HostedInner::Native(_) => None,
            },
            _ => None,
        }
    }

    /// Calls an exported method (the caller checked the allowlist).
    pub(crate) fn call(
        &mut self,
        meta: &ResourceMeta,
        method: &'static str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> HostResult<Value> {
        match &meta.addr {
            Addr::Foreign(i) => match &mut self.inner {
                HostedInner::Foreign(host) => host.call(*i, method, args, kwargs),
                HostedInner::Native(_) => Err(HostError::new("not a foreign host")),
            },
            Addr::Env(slot) => {
                let env = self
                    .env_mut(*slot)
                    .ok_or_else(|| HostError::new("not an env"))?;
                call_env(env, method, CallArgs::new(method, args, kwargs))
            }
            Addr::World => self
                .native_tree()
                .ok_or_else(|| HostError::new("no world"))?
                .world_call(method, CallArgs::new(method, args, kwargs)),
            Addr::Node(path) => self
                .native_tree()
                .ok_or_else(|| HostError::new("no node tree"))?
                .node_call(path, method, CallArgs::new(method, args, kwargs)),
        }
    }

    /// Reads a snapshot field through the object: a node's getter, or an
    /// env's `render` (`Ok(None)` when it does not apply).
    pub(crate) fn read(&mut self, meta: &ResourceMeta, field: Field) -> HostResult<Option<Value>> {
        match &meta.addr {
            Addr::Foreign(i) => match &mut self.inner {
                HostedInner::Foreign(host) => host.read(*i, field),
                HostedInner::Native(_) => Ok(None),
            },
            Addr::Node(path) => self
                .native_tree()
                .ok_or_else(|| HostError::new("no node tree"))?
                .node_read(path, field),
            Addr::Env(slot) if field == Field::Render => match self.env_mut(*slot) {
                Some(env) => env.render().map(Some),
                None => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// Closes everything once: the first env (which closes what it wraps),
    /// or else the tree (the root node closes its children, then the world);
    /// or the foreign host.
    pub(crate) fn close(&mut self) {
        match &mut self.inner {
            HostedInner::Foreign(host) => host.close(),
            HostedInner::Native(n) => match n.envs.first_mut() {
                Some(env) => env.close(),
                None => {
                    if let Some(t) = n.tree.as_mut() {
                        t.close();
                    }
                }
            },
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
    /// Members produced by a foreign host, `operations` included.
    Raw(Box<Dict>),
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
            Attrs::Raw(members) => {
                for (k, v) in members.iter() {
                    d.insert(k, v.clone());
                }
                return;
            }
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

/// Calls an env method. A leaf env's invalid-argument error passes through
/// (a certain refusal); a composite's (an env exposing a world and nodes,
/// e.g. a `WorldEnv`) becomes an execution failure, since parts may have
/// changed — except `step` before the first reset, refused before it runs.
fn call_env(env: &mut dyn Env, method: &str, mut args: CallArgs) -> HostResult<Value> {
    use crate::host::tree::ran;
    let composite = env.as_tree().is_some();
    let settle = |r: HostResult<Value>| if composite { ran(r) } else { r };
    match method {
        "reset" => {
            let a = ResetArgs::bind(&mut args)?;
            settle(env.reset(a).map(|r| r.into_value()))
        }
        "reload" => {
            let a = ResetArgs::bind(&mut args)?;
            settle(env.reload(a).map(|r| r.into_value()))
        }
        "step" => {
            let action = args.required("action", 0)?;
            args.finish()?;
            if env.awaits_reset() {
                return Err(HostError::invalid_argument(crate::host::STEP_BEFORE_RESET));
            }
            settle(env.step(action).map(|r| r.into_value()))
        }
        "render" => {
            args.finish()?;
            settle(env.render())
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
