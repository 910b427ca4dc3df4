//! Envs implemented by C callbacks: the registration record
//! ([`UnienvEnv`]), one invocation ([`UnienvCall`]), and the Rust [`Env`]
//! that the server drives ([`CEnv`]).

use crate::error::{guard, quiet, req, req_mut, status, take, text, Failure};
use crate::pump::Pump;
use crate::space::UnienvSpace;
use crate::value::{native, UnienvValue};
use std::ffi::{c_char, c_void};
use std::sync::{mpsc, Arc};
use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
use unienv_remote::{Dict, ScalarKind, Value};

/// Returned by a callback that set its result.
pub const UNIENV_CALLBACK_OK: i32 = 0;
/// Returned by a callback that refused its arguments *before changing
/// anything* (an action outside the action space, an unknown reset option):
/// the client gets a certain `invalid_request` and the env stays usable.
pub const UNIENV_CALLBACK_INVALID_ARGUMENT: i32 = 1;
/// Returned by a callback that failed while running: the client gets an
/// `execution_error`, uncertain for `reset` and `step` (the state may have
/// changed), and the env is faulted (steps refused) until a successful
/// reset.
pub const UNIENV_CALLBACK_EXECUTION_ERROR: i32 = 2;
/// Returned by a callback that does not implement the method
/// (`execution_error`, as Python's `NotImplementedError` in the reference).
pub const UNIENV_CALLBACK_NOT_IMPLEMENTED: i32 = 3;

/// A `reset`, `step` or `render` callback: reads its arguments from `call`,
/// sets its result on it (`unienv_call_set_reset`, `_set_step`,
/// `_set_render`) and returns `UNIENV_CALLBACK_OK`, or returns one of the
/// error statuses (with a message from `unienv_call_error`). It must not
/// unwind (C++: catch every exception).
pub type UnienvEnvFn =
    Option<unsafe extern "C" fn(user: *mut c_void, call: *mut UnienvCall) -> i32>;

/// The `close` callback: releases the env, once, when the server disposes
/// of it (at `unienv_server_stop` / `unienv_server_free`).
pub type UnienvCloseFn = Option<unsafe extern "C" fn(user: *mut c_void)>;

/// An env's callbacks and the pointer passed to each. `reset` and `step` are
/// required; `render` and `close` may be NULL.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UnienvEnvCallbacks {
    /// Passed unchanged to every callback.
    pub user: *mut c_void,
    /// Starts an episode: `unienv_call_seed`, `unienv_call_kwargs` in;
    /// `unienv_call_set_reset` out.
    pub reset: UnienvEnvFn,
    /// Advances one step: `unienv_call_action` in; `unienv_call_set_step` out.
    pub step: UnienvEnvFn,
    /// Renders the current state: `unienv_call_set_render` out (no result:
    /// `None`). NULL: the env does not render.
    pub render: UnienvEnvFn,
    /// Releases the env (may be NULL).
    pub close: UnienvCloseFn,
}

// The user pointer is only ever used by the callbacks, on the one thread the
// threading mode runs them on (documented in the header): moving the copy
// to that thread is the caller's promise.
unsafe impl Send for UnienvEnvCallbacks {}

/// An env being described (spaces, metadata), owned by the caller until
/// `unienv_server_add_env` takes it or `unienv_env_free` frees it.
pub struct UnienvEnv {
    callbacks: UnienvEnvCallbacks,
    action_space: Option<Space>,
    observation_space: Option<Space>,
    context_space: Option<Space>,
    render_mode: Option<String>,
    render_fps: Option<i64>,
    metadata: Option<Dict>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Reset,
    Step,
    Render,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Reset => "reset",
            Method::Step => "step",
            Method::Render => "render",
        }
    }
}

enum Produced {
    Reset(ResetResult),
    Step(StepResult),
    Render(Value),
}

/// One callback invocation: its arguments, and the result or error the
/// callback sets. Valid only during the callback.
pub struct UnienvCall {
    method: Method,
    seed: Option<i64>,
    kwargs: Value,
    action: Value,
    produced: Option<Produced>,
    error: Option<String>,
}

impl UnienvCall {
    fn new(method: Method) -> Box<UnienvCall> {
        Box::new(UnienvCall {
            method,
            seed: None,
            kwargs: Value::Null,
            action: Value::Null,
            produced: None,
            error: None,
        })
    }
}

/// A new env with `callbacks` (copied). NULL when `reset` or `step` is
/// missing.
///
/// # Safety
/// `callbacks` points to a readable `UnienvEnvCallbacks`.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_new(callbacks: *const UnienvEnvCallbacks) -> *mut UnienvEnv {
    guard(std::ptr::null_mut(), || {
        let callbacks = *req(callbacks, "callbacks")?;
        if callbacks.reset.is_none() || callbacks.step.is_none() {
            return Err(Failure::invalid(
                "the reset and step callbacks are required",
            ));
        }
        Ok(Box::into_raw(Box::new(UnienvEnv {
            callbacks,
            action_space: None,
            observation_space: None,
            context_space: None,
            render_mode: None,
            render_fps: None,
            metadata: None,
        })))
    })
}

unsafe fn set_space(
    env: *mut UnienvEnv,
    space: *mut UnienvSpace,
    slot: fn(&mut UnienvEnv) -> &mut Option<Space>,
) -> i32 {
    let space = take(space, "space");
    status(|| {
        let space = space?;
        *slot(req_mut(env, "env")?) = Some(space.0);
        Ok(())
    })
}

/// Sets the action space (`space` taken, even on failure).
///
/// # Safety
/// `env` is a live env; `space` an owned space or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_set_action_space(
    env: *mut UnienvEnv,
    space: *mut UnienvSpace,
) -> i32 {
    set_space(env, space, |e| &mut e.action_space)
}

/// Sets the observation space (`space` taken, even on failure). Every
/// observation a callback returns is checked against it (dtype and shape of
/// arrays, keys of dicts, lengths of tuples): one that does not fit is an
/// execution error of the call, which faults the env until a reset.
///
/// # Safety
/// `env` is a live env; `space` an owned space or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_set_observation_space(
    env: *mut UnienvEnv,
    space: *mut UnienvSpace,
) -> i32 {
    set_space(env, space, |e| &mut e.observation_space)
}

/// Sets the context space (`space` taken, even on failure).
///
/// # Safety
/// `env` is a live env; `space` an owned space or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_set_context_space(
    env: *mut UnienvEnv,
    space: *mut UnienvSpace,
) -> i32 {
    set_space(env, space, |e| &mut e.context_space)
}

/// Sets the render mode (e.g. `"rgb_array"`; NULL: none) and frames per
/// second (negative: none).
///
/// # Safety
/// `env` is a live env; `mode` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_set_render(
    env: *mut UnienvEnv,
    mode: *const c_char,
    fps: i64,
) -> i32 {
    status(|| {
        let mode = if mode.is_null() {
            None
        } else {
            Some(text(mode, "mode")?.to_string())
        };
        let env = req_mut(env, "env")?;
        env.render_mode = mode;
        env.render_fps = (fps >= 0).then_some(fps);
        Ok(())
    })
}

/// Sets the metadata dictionary (`metadata`, a dict value, taken even on
/// failure). Default: `{"render_modes": []}`, UniEnv's.
///
/// # Safety
/// `env` is a live env; `metadata` an owned value or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_set_metadata(
    env: *mut UnienvEnv,
    metadata: *mut UnienvValue,
) -> i32 {
    let metadata = take(metadata, "metadata");
    status(|| {
        let Value::Dict(d) = metadata?.0 else {
            return Err(Failure::invalid("metadata must be a dict value"));
        };
        req_mut(env, "env")?.metadata = Some(d);
        Ok(())
    })
}

/// Frees an env that was not added to a server (NULL is ignored). Its
/// `close` callback is not called.
///
/// # Safety
/// `env` is NULL or an owned env not freed or taken yet.
#[no_mangle]
pub unsafe extern "C" fn unienv_env_free(env: *mut UnienvEnv) {
    if let Ok(e) = take(env, "env") {
        quiet((), move || drop(e));
    }
}

// ---- the call ----

/// The method being called: `"reset"`, `"step"` or `"render"` (static
/// text; NULL for a NULL call).
///
/// # Safety
/// `call` is NULL or the live call of a callback.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_method(call: *const UnienvCall) -> *const c_char {
    quiet(std::ptr::null(), || match call.as_ref().map(|c| c.method) {
        Some(Method::Reset) => c"reset".as_ptr(),
        Some(Method::Step) => c"step".as_ptr(),
        Some(Method::Render) => c"render".as_ptr(),
        None => std::ptr::null(),
    })
}

/// `reset`'s seed: writes it to `*seed` and returns true when the client
/// passed one, returns false for `seed=None`.
///
/// # Safety
/// `call` is the live call of a callback; `seed` is writable.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_seed(call: *const UnienvCall, seed: *mut i64) -> bool {
    quiet(false, || {
        match (call.as_ref().and_then(|c| c.seed), seed.as_mut()) {
            (Some(s), Some(out)) => {
                *out = s;
                true
            }
            _ => false,
        }
    })
}

/// `reset`'s other keyword arguments (Gymnasium's `options`, …) as a dict,
/// borrowed for the duration of the callback (NULL for other methods).
///
/// # Safety
/// `call` is the live call of a callback.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_kwargs(call: *const UnienvCall) -> *const UnienvValue {
    quiet(std::ptr::null(), || match call.as_ref() {
        Some(c) if c.method == Method::Reset => UnienvValue::borrowed(&c.kwargs),
        _ => std::ptr::null(),
    })
}

/// `step`'s action, borrowed for the duration of the callback: its arrays
/// point into the received message, in native byte order, without a copy
/// (NULL for other methods).
///
/// # Safety
/// `call` is the live call of a callback.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_action(call: *const UnienvCall) -> *const UnienvValue {
    quiet(std::ptr::null(), || match call.as_ref() {
        Some(c) if c.method == Method::Step => UnienvValue::borrowed(&c.action),
        _ => std::ptr::null(),
    })
}

fn expect(call: &UnienvCall, method: Method) -> Result<(), Failure> {
    if call.method != method {
        return Err(Failure::new(
            crate::error::UNIENV_ERR_STATE,
            format!(
                "unienv_call_set_{} called in a {} callback",
                method.name(),
                call.method.name()
            ),
        ));
    }
    Ok(())
}

unsafe fn owned(v: *mut UnienvValue) -> Value {
    if v.is_null() {
        Value::Null
    } else {
        Box::from_raw(v).0
    }
}

fn info_of(v: Value) -> Result<Dict, Failure> {
    match v {
        Value::Null => Ok(Dict::new()),
        Value::Dict(d) => Ok(d),
        other => Err(Failure::invalid(format!(
            "info must be a dict value or NULL, got {}",
            other.type_name()
        ))),
    }
}

/// Sets `reset`'s result `(context, observation, info)`. Every value is
/// taken, even on failure; `context` NULL is `None`, `info` NULL is `{}`.
///
/// # Safety
/// `call` is the live call of a reset callback; the values are owned or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_set_reset(
    call: *mut UnienvCall,
    context: *mut UnienvValue,
    observation: *mut UnienvValue,
    info: *mut UnienvValue,
) -> i32 {
    let (context, observation, info) = (owned(context), owned(observation), owned(info));
    status(|| {
        let call = req_mut(call, "call")?;
        expect(call, Method::Reset)?;
        call.produced = Some(Produced::Reset(ResetResult {
            context,
            observation,
            info: info_of(info)?,
        }));
        Ok(())
    })
}

/// Sets `step`'s result `(observation, reward, terminated, truncated,
/// info)`. The values are taken, even on failure; `info` NULL is `{}`.
///
/// # Safety
/// `call` is the live call of a step callback; the values are owned or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_set_step(
    call: *mut UnienvCall,
    observation: *mut UnienvValue,
    reward: f64,
    terminated: bool,
    truncated: bool,
    info: *mut UnienvValue,
) -> i32 {
    let (observation, info) = (owned(observation), owned(info));
    status(|| {
        let call = req_mut(call, "call")?;
        expect(call, Method::Step)?;
        call.produced = Some(Produced::Step(StepResult {
            observation,
            reward: Value::Float(reward),
            terminated: Value::Bool(terminated),
            truncated: Value::Bool(truncated),
            info: info_of(info)?,
        }));
        Ok(())
    })
}

/// Sets `render`'s result (a frame, typically a uint8 array of shape
/// `(height, width, 3)`; taken, even on failure; NULL is `None`).
///
/// # Safety
/// `call` is the live call of a render callback; `frame` owned or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_set_render(
    call: *mut UnienvCall,
    frame: *mut UnienvValue,
) -> i32 {
    let frame = owned(frame);
    status(|| {
        let call = req_mut(call, "call")?;
        expect(call, Method::Render)?;
        call.produced = Some(Produced::Render(frame));
        Ok(())
    })
}

/// Sets the message of a failing callback and returns `code`, so that a
/// callback can `return unienv_call_error(call,
/// UNIENV_CALLBACK_INVALID_ARGUMENT, "action must be 0 or 1");`. The client
/// reads the message in its error.
///
/// # Safety
/// `call` is the live call of a callback; `message` NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn unienv_call_error(
    call: *mut UnienvCall,
    code: i32,
    message: *const c_char,
) -> i32 {
    quiet(code, || {
        if let Some(call) = call.as_mut() {
            call.error = if message.is_null() {
                None
            } else {
                Some(
                    std::ffi::CStr::from_ptr(message)
                        .to_string_lossy()
                        .into_owned(),
                )
            };
        }
        code
    })
}

// ---- the Rust side ----

/// Where callbacks run: on the domain's own thread, or queued for the
/// thread that calls `unienv_server_poll`.
#[derive(Clone)]
pub(crate) enum Runner {
    Worker,
    Pump(Arc<Pump>),
}

/// A registered C env, as the server drives it.
pub(crate) struct CEnv {
    callbacks: UnienvEnvCallbacks,
    action_space: Option<Space>,
    observation_space: Option<Space>,
    context_space: Option<Space>,
    render_mode: Option<String>,
    render_fps: Option<i64>,
    metadata: Option<Dict>,
    runner: Runner,
    started: bool,
}

impl CEnv {
    pub(crate) fn new(env: UnienvEnv, runner: Runner) -> CEnv {
        CEnv {
            callbacks: env.callbacks,
            action_space: env.action_space,
            observation_space: env.observation_space,
            context_space: env.context_space,
            render_mode: env.render_mode,
            render_fps: env.render_fps,
            metadata: env.metadata,
            runner,
            started: false,
        }
    }

    /// Runs `f` where callbacks run, and waits for it.
    fn on_callback_thread<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> HostResult<R> {
        match &self.runner {
            Runner::Worker => Ok(f()),
            Runner::Pump(pump) => {
                let (tx, rx) = mpsc::sync_channel(1);
                pump.submit(Box::new(move || {
                    let _ = tx.send(f());
                }))
                .map_err(|_| HostError::new("the server is stopping: callbacks no longer run"))?;
                rx.recv().map_err(|_| {
                    HostError::new("the call was dropped: the server stopped before polling it")
                })
            }
        }
    }

    /// Calls `f` with a fresh call and interprets its status.
    fn invoke(&self, f: UnienvEnvFn, call: Box<UnienvCall>) -> HostResult<Option<Produced>> {
        let method = call.method;
        let Some(f) = f else {
            return Err(HostError::not_implemented(method.name()));
        };
        let user = self.callbacks;
        let (code, call) = self.on_callback_thread(move || {
            let mut call = call;
            let user = user;
            // SAFETY: the registrant's callback with its own pointer and a
            // call that lives until it returns.
            let code = unsafe { f(user.user, &mut *call) };
            (code, call)
        })?;
        let UnienvCall {
            produced, error, ..
        } = *call;
        let name = method.name();
        let message = |default: String| error.clone().unwrap_or(default);
        match code {
            UNIENV_CALLBACK_OK => match produced {
                Some(p) => Ok(Some(p)),
                None if method == Method::Render => Ok(None),
                None => Err(HostError::new(format!(
                    "the {name} callback returned UNIENV_CALLBACK_OK without setting its result (unienv_call_set_{name})"
                ))),
            },
            UNIENV_CALLBACK_INVALID_ARGUMENT => Err(HostError::invalid_argument(message(format!(
                "the {name} callback refused its arguments"
            )))),
            UNIENV_CALLBACK_EXECUTION_ERROR => Err(HostError::new(message(format!(
                "the {name} callback failed"
            )))),
            UNIENV_CALLBACK_NOT_IMPLEMENTED => Err(HostError::new(message(format!(
                "{name} is not implemented"
            )))),
            other => Err(HostError::new(format!(
                "the {name} callback returned the unknown status {other}{}",
                error.map(|e| format!(": {e}")).unwrap_or_default()
            ))),
        }
    }

    fn check_observation(&self, method: &str, obs: &Value) -> HostResult<()> {
        match &self.observation_space {
            Some(space) => fits(space, obs, "observation").map_err(|e| {
                HostError::new(format!(
                    "the {method} callback returned an observation outside the observation space: {e}"
                ))
            }),
            None => Ok(()),
        }
    }
}

/// Whether `value` has the structure of `space`: dtype and shape of boxes
/// and binary arrays (a Python scalar of the same kind fits shape `()`;
/// bounds are not checked: observations may leave them), keys of dicts,
/// lengths of tuples.
fn fits(space: &Space, value: &Value, path: &str) -> Result<(), String> {
    match space {
        Space::Box(_) | Space::Binary(_) => {
            let (Some(dtype), Some(shape)) = (space.dtype(), space.shape()) else {
                return Ok(());
            };
            // A Python scalar fits a shape-() space of its kind.
            let scalar_fits = shape.is_empty()
                && match value {
                    Value::Bool(_) => dtype.kind() == ScalarKind::Bool,
                    Value::Int(_) | Value::UInt(_) => {
                        matches!(dtype.kind(), ScalarKind::Int | ScalarKind::UInt)
                    }
                    Value::Float(_) => dtype.kind() == ScalarKind::Float,
                    _ => false,
                };
            if scalar_fits {
                return Ok(());
            }
            let Value::Array(a) = value else {
                return Err(format!(
                    "{path} is {}, the space wants a {} array of shape {shape:?}",
                    value.type_name(),
                    dtype.name()
                ));
            };
            if a.dtype().to_native() != dtype.to_native() {
                return Err(format!(
                    "{path} has dtype {}, the space {}",
                    a.dtype().name(),
                    dtype.name()
                ));
            }
            if a.shape() != shape.as_slice() {
                return Err(format!(
                    "{path} has shape {:?}, the space {shape:?}",
                    a.shape()
                ));
            }
            Ok(())
        }
        Space::Dict(d) => {
            let Value::Dict(v) = value else {
                return Err(format!(
                    "{path} is {}, the space wants a dict",
                    value.type_name()
                ));
            };
            if v.len() != d.len() || d.entries().iter().any(|(k, _)| !v.contains_key(k)) {
                let want: Vec<&str> = d.entries().iter().map(|(k, _)| k.as_str()).collect();
                let got: Vec<&str> = v.keys().collect();
                return Err(format!("{path} has the keys {got:?}, the space {want:?}"));
            }
            for (k, s) in d.entries() {
                if let Some(item) = v.get(k) {
                    fits(s, item, &format!("{path}[{k:?}]"))?;
                }
            }
            Ok(())
        }
        Space::Tuple(spaces) => {
            let (Value::Tuple(items) | Value::List(items)) = value else {
                return Err(format!(
                    "{path} is {}, the space wants a tuple",
                    value.type_name()
                ));
            };
            if items.len() != spaces.len() {
                return Err(format!(
                    "{path} has {} items, the space {}",
                    items.len(),
                    spaces.len()
                ));
            }
            for (i, (s, item)) in spaces.iter().zip(items).enumerate() {
                fits(s, item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Env for CEnv {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        if args.mask.is_some() {
            return Err(HostError::invalid_argument(
                "this env is not batched: reset takes no mask",
            ));
        }
        let mut call = UnienvCall::new(Method::Reset);
        call.seed = args.seed;
        call.kwargs = native(Value::Dict(args.kwargs));
        match self.invoke(self.callbacks.reset, call)? {
            Some(Produced::Reset(r)) => {
                self.check_observation("reset", &r.observation)?;
                self.started = true;
                Ok(r)
            }
            _ => Err(HostError::new("the reset callback set no reset result")),
        }
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let mut call = UnienvCall::new(Method::Step);
        call.action = native(action);
        match self.invoke(self.callbacks.step, call)? {
            Some(Produced::Step(r)) => {
                self.check_observation("step", &r.observation)?;
                Ok(r)
            }
            _ => Err(HostError::new("the step callback set no step result")),
        }
    }

    fn awaits_reset(&self) -> bool {
        !self.started
    }

    fn render(&mut self) -> HostResult<Value> {
        if self.callbacks.render.is_none() {
            return Ok(Value::Null);
        }
        match self.invoke(self.callbacks.render, UnienvCall::new(Method::Render))? {
            Some(Produced::Render(v)) => Ok(v),
            _ => Ok(Value::Null),
        }
    }

    fn close(&mut self) {
        if let Some(close) = self.callbacks.close {
            let user = self.callbacks;
            // SAFETY: the registrant's close callback, called once.
            let _ = self.on_callback_thread(move || {
                let user = user;
                unsafe { close(user.user) }
            });
        }
    }

    fn action_space(&self) -> Option<Space> {
        self.action_space.clone()
    }

    fn observation_space(&self) -> Option<Space> {
        self.observation_space.clone()
    }

    fn context_space(&self) -> Option<Space> {
        self.context_space.clone()
    }

    fn render_mode(&self) -> Option<String> {
        self.render_mode.clone()
    }

    fn render_fps(&self) -> Option<i64> {
        self.render_fps
    }

    fn metadata(&self) -> Dict {
        match &self.metadata {
            Some(d) => d.clone(),
            None => {
                let mut d = Dict::new();
                d.insert("render_modes", Value::List(Vec::new()));
                d
            }
        }
    }
}
