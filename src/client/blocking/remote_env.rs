//! [`RemoteWorldEnv`]: the crate's [`WorldEnv`] composer running client-side
//! over a remote world and remote nodes, with an explicit component
//! operation around each reset, reload and step (the reference's
//! `RemoteWorldEnv`).

use super::connection::Client;
use super::proxy::{host_error, NodeProxy, WorldProxy};
use crate::client::{ClientError, ClientResult, InvalidUse, OperationKind};
use crate::codec::{Dict, Value};
use crate::host::{
    Env, HostError, HostResult, Node, RenderModeArg, ResetArgs, ResetResult, Space, StepResult,
    WorldEnv,
};

/// A local lifecycle composition of a remote world and remote nodes of that
/// world, from one blocking client.
///
/// Each [`reset`](Env::reset), [`reload`](Env::reload) and
/// [`step`](Env::step) runs inside one component operation on the world's
/// domain (kind `reload` for the first reset or a reset with a truthy
/// `reload` keyword, as `WorldEnv` takes the reload path then): the
/// operation completes when the composed method succeeds — publishing the
/// boundary to observers and filling the boundary cache — and is aborted
/// when it fails. The nodes themselves always run on the server; a
/// client-side combination of several remote nodes is allowed, combining
/// different simulator worlds is not. Detached nodes have no world and are
/// used standalone instead.
///
/// ```
/// use unienv_remote::client::{blocking, ClientConfig};
/// use unienv_remote::host::{Env, ResetArgs};
/// use unienv_remote::server::{Server, ServerConfig};
/// use unienv_remote::{dict, fixtures, NdArray, Value};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let runtime = tokio::runtime::Runtime::new()?;
/// # let mut builder = Server::builder(ServerConfig::default());
/// # fixtures::register(&mut builder)?;
/// # let server = builder.start()?;
/// # let listener = runtime.block_on(server.listen("127.0.0.1:0"))?;
/// let client = blocking::Client::connect(&listener.url(), ClientConfig::default())?;
/// let world = client.world("composed/world")?;
/// let root = client.node("composed/node")?;
/// let mut env = blocking::RemoteWorldEnv::new(world, root)?;
/// env.reset(ResetArgs::with_seed(1))?; // one `reload` operation
/// // The root node combines two nodes: one action each.
/// let action = dict! { "a" => NdArray::from_vec(vec![0.0f32]), "b" => NdArray::from_vec(vec![0.0f32]) };
/// let step = env.step(Value::Dict(action))?; // one `step` operation
/// assert_eq!(step.info.get("control_step_elapsed_time").and_then(|v| v.as_f64()), Some(0.5));
/// env.close()?; // releases control of the world's domain
/// # runtime.block_on(server.shutdown());
/// # Ok(()) }
/// ```
pub struct RemoteWorldEnv {
    env: WorldEnv<WorldProxy>,
    client: Client,
    world_id: String,
    closed: bool,
}

impl RemoteWorldEnv {
    /// Composes `world` with one root node of it.
    pub fn new(world: WorldProxy, node: NodeProxy) -> ClientResult<RemoteWorldEnv> {
        check(&world, std::slice::from_ref(&node))?;
        let (client, world_id) = (world.client().clone(), world.id().to_string());
        let env = WorldEnv::new(world, Box::new(node)).map_err(composition)?;
        Ok(RemoteWorldEnv {
            env,
            client,
            world_id,
            closed: false,
        })
    }

    /// Composes `world` with several of its nodes, combined client-side as
    /// `WorldEnv` does (`CombinedNode("combined", nodes, render_mode)`).
    pub fn from_nodes(
        world: WorldProxy,
        nodes: Vec<NodeProxy>,
        render_mode: impl Into<RenderModeArg>,
    ) -> ClientResult<RemoteWorldEnv> {
        check(&world, &nodes)?;
        let (client, world_id) = (world.client().clone(), world.id().to_string());
        let nodes: Vec<Box<dyn Node<WorldProxy>>> = nodes
            .into_iter()
            .map(|n| Box::new(n) as Box<dyn Node<WorldProxy>>)
            .collect();
        let env = WorldEnv::from_nodes(world, nodes, render_mode).map_err(composition)?;
        Ok(RemoteWorldEnv {
            env,
            client,
            world_id,
            closed: false,
        })
    }

    /// The composer (read-only: calls through it would bypass operations).
    pub fn composer(&self) -> &WorldEnv<WorldProxy> {
        &self.env
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The remote world's ID (the domain the operations run on).
    pub fn world_id(&self) -> &str {
        &self.world_id
    }

    /// Releases control of the world's domain, keeping subscriptions; the
    /// composer refuses further lifecycle calls.
    pub fn close(&mut self) -> ClientResult<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.client.release(&self.world_id, false)
    }

    fn run<T>(
        &mut self,
        kind: OperationKind,
        method: impl FnOnce(&mut WorldEnv<WorldProxy>) -> HostResult<T>,
    ) -> HostResult<T> {
        if self.closed {
            return Err(HostError::new("the composer is closed"));
        }
        let operation = self
            .client
            .operation(&self.world_id, kind)
            .map_err(host_error)?;
        match method(&mut self.env) {
            Ok(value) => {
                operation.complete().map_err(host_error)?;
                Ok(value)
            }
            Err(e) => {
                let _ = operation.abort();
                Err(e)
            }
        }
    }
}

fn composition(e: HostError) -> ClientError {
    ClientError::InvalidUse(InvalidUse::Composer { source: e })
}

/// The nodes must be non-detached proxies of `world`, from its client.
fn check(world: &WorldProxy, nodes: &[NodeProxy]) -> ClientResult<()> {
    if nodes.is_empty() {
        return Err(ClientError::InvalidUse(InvalidUse::Composition {
            detail: "no nodes to compose".into(),
        }));
    }
    for node in nodes {
        let descriptor = node.descriptor();
        match descriptor.world_id() {
            None => {
                return Err(ClientError::InvalidUse(InvalidUse::Composition {
                    detail: format!(
                    "detached node {} cannot be composed with RemoteWorldEnv; use it standalone",
                    node.id()
                ),
                }))
            }
            Some(w) if w != world.id() || !node.client().same_connection(world.client()) => {
                return Err(ClientError::InvalidUse(InvalidUse::Composition {
                    detail: format!(
                        "node {} is not a remote proxy of world {} on this client",
                        node.id(),
                        world.id()
                    ),
                }))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn reload_requested(args: &ResetArgs) -> bool {
    args.kwargs
        .get("reload")
        .and_then(Value::truthy)
        .unwrap_or(false)
}

impl Env for RemoteWorldEnv {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let kind = if self.env.is_first_reset() || reload_requested(&args) {
            OperationKind::Reload
        } else {
            OperationKind::Reset
        };
        self.run(kind, |env| env.reset(args))
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.run(OperationKind::Step, |env| env.step(action))
    }

    /// Renders through the root node (a read; no operation).
    fn render(&mut self) -> HostResult<Value> {
        self.env.render()
    }

    fn supports_reload(&self) -> bool {
        true
    }

    fn reload(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.run(OperationKind::Reload, |env| env.reload(args))
    }

    /// Releases control of the world's domain (see
    /// [`RemoteWorldEnv::close`]); the remote objects are not closed.
    fn close(&mut self) {
        let _ = RemoteWorldEnv::close(self);
    }

    fn batch_size(&self) -> Option<usize> {
        self.env.batch_size()
    }

    fn action_space(&self) -> Option<Space> {
        self.env.action_space()
    }

    fn observation_space(&self) -> Option<Space> {
        self.env.observation_space()
    }

    fn context_space(&self) -> Option<Space> {
        self.env.context_space()
    }

    fn render_mode(&self) -> Option<String> {
        self.env.render_mode()
    }

    fn render_fps(&self) -> Option<i64> {
        self.env.render_fps()
    }

    fn metadata(&self) -> Dict {
        self.env.metadata()
    }

    fn has_control_timestep(&self) -> bool {
        true
    }

    fn control_timestep(&self) -> Option<f64> {
        self.env.control_timestep()
    }
}

impl std::fmt::Debug for RemoteWorldEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteWorldEnv")
            .field("world_id", &self.world_id)
            .field("closed", &self.closed)
            .finish()
    }
}
