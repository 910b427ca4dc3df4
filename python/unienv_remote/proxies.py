"""UniEnv-compatible views of resources that remain on their server.

The same classes as ``unienv_interface.remote.proxies`` (unienv 0.0.1b14):
``RemoteEnv``, ``RemoteWorld`` and ``RemoteWorldNode`` are instances of
unienv's ``Env``, ``World`` and ``WorldNode``, so unienv's wrappers accept
them; ``RemoteWorldEnv`` composes a remote world and its nodes client-side.

Descriptor attributes (``name``, ``batch_size``, spaces, priorities, ...) are
read from the client's latest descriptor when accessed, instead of being
copied into every proxy after every response; space objects keep their
identity while their serialized form is unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TYPE_CHECKING, TypeVar, Union

from unienv_interface.env_base.env import Env
from unienv_interface.world.world import World
from unienv_interface.world.node import WorldNode
from unienv_interface.world.env_composer import WorldEnv
from unienv_interface.space.space_utils.serialization_utils import json_to_space

from . import _actions

if TYPE_CHECKING:
    from .client import RemoteClient

__all__ = ["RemoteEnv", "RemoteWorld", "RemoteWorldNode", "RemoteWorldEnv"]

_Result = TypeVar("_Result")
_MISSING = object()

_PLAIN = ("name", "batch_size", "world_timestep", "world_subtimestep", "control_timestep",
          "update_timestep", "render_mode", "render_fps", "supported_render_modes",
          "has_reward", "has_termination_signal", "has_truncation_signal", "metadata")
_SPACES = ("observation_space", "action_space", "context_space")
_PRIORITIES = tuple(f"{phase}_priorities" for phase in
                    ("reset", "reload", "after_reset", "after_reload", "pre_environment_step",
                     "post_environment_step"))


def _default(obj: Any, name: str) -> Any:
    """The attribute as it would be without the descriptor field: set on the
    instance, or the base classes' default."""
    if name in obj.__dict__:
        return obj.__dict__[name]
    for klass in type(obj).__mro__:
        value = vars(klass).get(name, _MISSING)
        if value is _MISSING or isinstance(value, _DescriptorField):
            continue
        return value
    raise AttributeError(name)


class _DescriptorField:
    """A proxy attribute served from the latest descriptor when present there."""

    def __init__(self, convert: Optional[Callable[[Any], Any]] = None) -> None:
        self.convert = convert

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Optional[type] = None) -> Any:
        if obj is None:
            return self
        value = obj._schema().get(self.name, _MISSING)
        if value is _MISSING:
            return _default(obj, self.name)
        return value if self.convert is None else self.convert(value)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value


class _SpaceField(_DescriptorField):
    """A space attribute: a unienv space object, rebuilt only when its
    serialized form changes."""

    def __get__(self, obj: Any, objtype: Optional[type] = None) -> Any:
        if obj is None:
            return self
        if self.name not in obj._schema():
            return _default(obj, self.name)
        cache = obj._spaces
        serial, space = cache.get(self.name, (None, None))
        changed = obj.client._space_since(obj.resource_id, self.name, serial)
        if changed is not None:
            serial, document = changed
            space = None if document is None else json_to_space(document, obj.client.backend, obj.client.device)
            cache[self.name] = (serial, space)
        return space


class _Proxy:
    """What the remote proxies share: the client, resource ID, descriptor
    attributes read from the latest descriptor, calls and close."""

    def __init__(self, client: RemoteClient, resource_id: str) -> None:
        self.client, self.resource_id = client, resource_id
        self._closed = False
        self._schema_key: Optional[Tuple[int, int, int]] = None
        self._schema_value: Dict[str, Any] = {}
        self._spaces: Dict[str, Any] = {}
        if not client._known(resource_id):
            client.describe(resource_id)
        self._schema()
        client._proxies[resource_id] = self

    def _schema(self) -> Dict[str, Any]:
        changed = self.client._schema_since(self.resource_id, self._schema_key)
        if changed is not None:
            self._schema_key, self._schema_value = changed
        return self._schema_value

    @property
    def descriptor(self) -> Dict[str, Any]:
        """The resource's latest descriptor."""
        return self._schema()

    name = _DescriptorField()
    batch_size = _DescriptorField()
    world_timestep = _DescriptorField()
    world_subtimestep = _DescriptorField()
    control_timestep = _DescriptorField()
    update_timestep = _DescriptorField()
    render_mode = _DescriptorField()
    render_fps = _DescriptorField()
    supported_render_modes = _DescriptorField()
    has_reward = _DescriptorField()
    has_termination_signal = _DescriptorField()
    has_truncation_signal = _DescriptorField()
    metadata = _DescriptorField()
    observation_space = _SpaceField()
    action_space = _SpaceField()
    context_space = _SpaceField()
    reset_priorities = _DescriptorField(set)
    reload_priorities = _DescriptorField(set)
    after_reset_priorities = _DescriptorField(set)
    after_reload_priorities = _DescriptorField(set)
    pre_environment_step_priorities = _DescriptorField(set)
    post_environment_step_priorities = _DescriptorField(set)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise ConnectionError("Proxy is closed")
        # RemoteClient.call without its lookup: a proxy's resource is known.
        client = self.client
        value = client._call_raw(self.resource_id, method, args, kwargs)
        return value if client._numpy else client._map(value)

    def _read(self, field: str, method: str) -> Any:
        if self._closed:
            raise ConnectionError("Proxy is closed")
        return self.client._read(self.resource_id, field)

    def close(self) -> None:
        """Close this proxy and release shared control, retaining subscriptions."""
        if not self._closed:
            self._closed = True
            self.client.release(self.resource_id)

    def __del__(self) -> None:
        # WorldNode's destructor calls close; GC must never release another
        # live proxy's shared control ownership. Use explicit close/context exit.
        pass


# unienv ships no type information: its base classes are ``Any`` to mypy.
class RemoteEnv(_Proxy, Env):  # type: ignore[misc]  # Env is untyped (unienv)
    """A remote environment, as a unienv ``Env``: ``reset``, ``step``,
    ``render`` ... run on the server; spaces and attributes come from its
    descriptor."""

    def __init__(self, client: RemoteClient, resource_id: str) -> None:
        self.backend, self.device = client.backend, client.device
        super().__init__(client, resource_id)
        self.rng = self.backend.random.random_number_generator(device=self.device)

    def reset(self, *, mask: Any = None, seed: Optional[int] = None, **kwargs: Any) -> Any:
        """Reset the environment remotely (``mask``: which sub-environments); returns the
        reference's ``(context, observation, info)``."""
        return self._call("reset", mask=mask, seed=seed, **kwargs)

    def reload(self, *, mask: Any = None, seed: Optional[int] = None, **kwargs: Any) -> Any:
        """Reload the environment remotely; returns the same as ``reset``."""
        return self._call("reload", mask=mask, seed=seed, **kwargs)

    def step(self, action: Any) -> Any:
        """Step the environment remotely with ``action`` (a list or scalar is coerced to the
        action space first); returns ``(observation, reward, terminated, truncated, info)``."""
        if type(action) in _actions.PLAIN:
            action = _actions.coerce(action, self._schema().get("action_space"))
        return self._call("step", action)

    def render(self) -> Any:
        """Render remotely; returns the frame (or ``None``), as the hosted environment does."""
        return self._call("render")

    def get_node(self, nested_keys: Union[str, Sequence[str]]) -> Optional[RemoteWorldNode]:
        """The remote node under the environment's own node at ``nested_keys``, or ``None`` (also
        when the environment has no node)."""
        node_id = self.descriptor["node_id"]
        return None if node_id is None else self.client.node(node_id).get_node(nested_keys)


class RemoteWorld(_Proxy, World):  # type: ignore[misc]  # World is untyped (unienv)
    """A remote world, as a unienv ``World``: each lifecycle method runs on
    the server (inside a ``client.operation`` when controlled by components)."""

    def __init__(self, client: RemoteClient, resource_id: str) -> None:
        self.backend, self.device = client.backend, client.device
        super().__init__(client, resource_id)

    def step(self) -> Any:
        """Advance the world by one step remotely; returns what the hosted world's ``step``
        returns."""
        return self._call("step")

    def reset(self, *, seed: Optional[int] = None, mask: Any = None, **kwargs: Any) -> None:
        """Reset the world state remotely."""
        self._call("reset", seed=seed, mask=mask, **kwargs)

    def reload(self, *, seed: Optional[int] = None, mask: Any = None, **kwargs: Any) -> None:
        """Reload the world remotely."""
        self._call("reload", seed=seed, mask=mask, **kwargs)

    def after_reset(self, *, seed: Optional[int] = None, mask: Any = None, **kwargs: Any) -> None:
        """Run the world's after-reset hook remotely."""
        self._call("after_reset", seed=seed, mask=mask, **kwargs)

    def after_reload(self, *, seed: Optional[int] = None, mask: Any = None, **kwargs: Any) -> None:
        """Run the world's after-reload hook remotely."""
        self._call("after_reload", seed=seed, mask=mask, **kwargs)


class RemoteWorldNode(_Proxy, WorldNode):  # type: ignore[misc]  # WorldNode is untyped (unienv)
    """A remote world node, as a unienv ``WorldNode``: lifecycle calls run on
    the server; getters read the boundary snapshot when allowed."""

    def __init__(self, client: RemoteClient, resource_id: str) -> None:
        super().__init__(client, resource_id)
        world_id = self.descriptor["world_id"]
        self.world = None if world_id is None else client.world(world_id)

    @property
    def backend(self) -> Any:
        """The compute backend of the client (results are converted to it)."""
        return self.client.backend

    @property
    def device(self) -> Optional[object]:
        """The device of the client (results are converted to it)."""
        return self.client.device

    def pre_environment_step(self, dt: Any, *, priority: int = 0) -> None:
        """Run the node's pre-environment-step hook remotely for ``dt`` at ``priority``."""
        self._call("pre_environment_step", dt, priority=priority)

    def post_environment_step(self, dt: Any, *, priority: int = 0) -> None:
        """Run the node's post-environment-step hook remotely for ``dt`` at ``priority``."""
        self._call("post_environment_step", dt, priority=priority)

    def set_next_action(self, action: Any) -> None:
        """Set the node's next action remotely (a list or scalar is coerced to the action space
        first)."""
        if type(action) in _actions.PLAIN:
            action = _actions.coerce(action, self._schema().get("action_space"))
        self._call("set_next_action", action)

    def get_context(self) -> Any:
        """The node's context (from the boundary snapshot when allowed)."""
        return self._read("context", "get_context")

    def get_observation(self) -> Any:
        """The node's observation (from the boundary snapshot when allowed)."""
        return self._read("observation", "get_observation")

    def get_reward(self) -> Any:
        """The node's reward (from the boundary snapshot when allowed)."""
        return self._read("reward", "get_reward")

    def get_termination(self) -> Any:
        """The node's termination flag(s) (from the boundary snapshot when allowed)."""
        return self._read("terminated", "get_termination")

    def get_truncation(self) -> Any:
        """The node's truncation flag(s) (from the boundary snapshot when allowed)."""
        return self._read("truncated", "get_truncation")

    def get_info(self) -> Optional[Dict[str, Any]]:
        """The node's info dict, or ``None`` (from the boundary snapshot when allowed)."""
        info: Optional[Dict[str, Any]] = self._read("info", "get_info")
        return info

    def render(self) -> Any:
        """Render the node remotely; returns the frame (or ``None``)."""
        return self._call("render")

    def reset(self, *, priority: int = 0, seed: Optional[int] = None, mask: Any = None, **kwargs: Any) -> None:
        """Reset the node remotely at ``priority``."""
        self._call("reset", priority=priority, seed=seed, mask=mask, **kwargs)

    def reload(self, *, priority: int = 0, seed: Optional[int] = None, mask: Any = None, **kwargs: Any) -> None:
        """Reload the node remotely at ``priority``."""
        self._call("reload", priority=priority, seed=seed, mask=mask, **kwargs)

    def after_reset(self, *, priority: int = 0, mask: Any = None) -> None:
        """Run the node's after-reset hook remotely at ``priority``."""
        self._call("after_reset", priority=priority, mask=mask)

    def after_reload(self, *, priority: int = 0, mask: Any = None) -> None:
        """Run the node's after-reload hook remotely at ``priority``."""
        self._call("after_reload", priority=priority, mask=mask)

    def get_node(self, nested_keys: Union[str, Sequence[str]]) -> Optional[RemoteWorldNode]:
        """The remote descendant node at ``nested_keys`` (one key or a path of keys), or
        ``None``."""
        keys = [nested_keys] if isinstance(nested_keys, str) else list(nested_keys)
        current: RemoteWorldNode = self
        for key in keys:
            resource_id = current.descriptor["children"].get(key)
            if resource_id is None:
                return None
            current = self.client.node(resource_id)
        return current

    def get_nodes_by_fn(self, fn: Callable[[WorldNode], bool]) -> List[WorldNode]:
        """This node and its remote descendants for which ``fn`` is true, depth first."""
        result: List[WorldNode] = [self] if fn(self) else []
        for resource_id in self.descriptor["children"].values():
            result.extend(self.client.node(resource_id).get_nodes_by_fn(fn))
        return result


class RemoteWorldEnv(WorldEnv):  # type: ignore[misc]  # WorldEnv is untyped (unienv)
    """Local lifecycle composition with explicit remote operation boundaries.

    Pass a RemoteWorld and RemoteWorldNode(s) from the same client and world.
    Underlying nodes always run on the world server. Client-local combinations
    are supported; combining different simulator worlds isn't a WorldEnv model.
    """

    def __init__(self, world: RemoteWorld, node_or_nodes: Union[RemoteWorldNode, Iterable[RemoteWorldNode]],
                 *, render_mode: Optional[str] = "auto") -> None:
        if not isinstance(world, RemoteWorld):
            raise TypeError("RemoteWorldEnv requires a RemoteWorld; detached nodes must be used standalone")
        nodes = [node_or_nodes] if isinstance(node_or_nodes, WorldNode) else list(node_or_nodes)
        if any(isinstance(node, RemoteWorldNode) and node.world is None for node in nodes):
            raise ValueError("Detached nodes cannot be composed with RemoteWorldEnv")
        if not nodes or any(not isinstance(node, RemoteWorldNode) or node.client is not world.client
                            or node.world is not world for node in nodes):
            raise ValueError("Nodes must be remote proxies belonging to this client and world")
        self.client = world.client
        self._boundary_depth = 0
        self._closed = False
        super().__init__(world, nodes[0] if isinstance(node_or_nodes, WorldNode) else nodes, render_mode=render_mode)

    def _run(self, kind: str, method: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
        if self._closed:
            raise ConnectionError("Composer is closed")
        # WorldEnv.reset invokes self.reload on first reset. That is one
        # operation, not a nested reset + reload pair.
        if self._boundary_depth:
            return method(*args, **kwargs)
        with self.client.operation(self.world.resource_id, kind):
            self._boundary_depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self._boundary_depth -= 1

    def reset(self, *, mask: Any = None, seed: Optional[int] = None, reload: bool = False, **kwargs: Any) -> Any:
        """Reset (a reload on the first reset or with ``reload=True``) the composed world and
        nodes, as one remote operation."""
        return self._run("reload" if self._first_reset or reload else "reset", super().reset,
                         mask=mask, seed=seed, reload=reload, **kwargs)

    def reload(self, *, mask: Any = None, seed: Optional[int] = None, **kwargs: Any) -> Any:
        """Reload the composed world and nodes, as one remote operation."""
        return self._run("reload", super().reload, mask=mask, seed=seed, **kwargs)

    def step(self, action: Any) -> Any:
        """Step the composed world and nodes with ``action``, as one remote operation."""
        return self._run("step", super().step, action)

    def close(self) -> None:
        """Close this composer and release shared control, retaining subscriptions."""
        if not self._closed:
            self._closed = True
            self.client.release(self.world.resource_id)
