//! The server: its configuration, registration, listening, polling (pump
//! mode) and shutdown.

use crate::env::{CEnv, Runner, UnienvEnv};
use crate::error::{guard, quiet, req, req_mut, status, take, text, Failure};
use crate::error::{
    UNIENV_ERR_CONFIG, UNIENV_ERR_INVALID_ARGUMENT, UNIENV_ERR_IO, UNIENV_ERR_REGISTER,
    UNIENV_ERR_STATE,
};
use crate::pump::Pump;
use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use unienv_remote::server::{
    Hosted, Listener, Server, ServerBuilder, ServerConfig, ServerConfigError,
};

/// Callbacks run on the env's own worker thread (one thread per env, its
/// calls one at a time, in arrival order; different envs concurrently).
pub const UNIENV_THREADING_WORKER: i32 = 0;
/// Callbacks run on the thread that calls `unienv_server_poll` (an engine's
/// game thread), one at a time, in arrival order across every env.
pub const UNIENV_THREADING_PUMP: i32 = 1;

/// A server's settings, owned by the caller; `unienv_server_new` copies
/// them. Every limit starts at the crate's documented default.
pub struct UnienvConfig {
    config: ServerConfig,
    threading: i32,
}

/// A new configuration with every default (worker threading, no token,
/// 64 MiB messages, 1024 connections, …).
#[no_mangle]
pub extern "C" fn unienv_config_new() -> *mut UnienvConfig {
    quiet(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(UnienvConfig {
            config: ServerConfig::default(),
            threading: UNIENV_THREADING_WORKER,
        }))
    })
}

/// Frees a configuration (NULL is ignored).
///
/// # Safety
/// `config` is NULL or a configuration not freed yet.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_free(config: *mut UnienvConfig) {
    if let Ok(c) = take(config, "config") {
        quiet((), move || drop(c));
    }
}

unsafe fn configure(
    config: *mut UnienvConfig,
    f: impl FnOnce(&mut UnienvConfig) -> Result<(), Failure>,
) -> i32 {
    status(|| f(req_mut(config, "config")?))
}

fn millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// Requires clients to send `Authorization: Bearer <token>` (NULL: no
/// token; an empty token is refused by `unienv_server_start`).
///
/// # Safety
/// `config` is live; `token` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_token(
    config: *mut UnienvConfig,
    token: *const c_char,
) -> i32 {
    configure(config, |c| {
        c.config.token = if token.is_null() {
            None
        } else {
            Some(text(token, "token")?.to_string())
        };
        Ok(())
    })
}

/// Chooses where callbacks run: `UNIENV_THREADING_WORKER` (default) or
/// `UNIENV_THREADING_PUMP`.
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_threading(config: *mut UnienvConfig, mode: i32) -> i32 {
    configure(config, |c| match mode {
        UNIENV_THREADING_WORKER | UNIENV_THREADING_PUMP => {
            c.threading = mode;
            Ok(())
        }
        other => Err(Failure::invalid(format!("unknown threading mode {other}"))),
    })
}

/// Largest message in either direction, in bytes (default 64 MiB).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_max_message_size(
    config: *mut UnienvConfig,
    bytes: usize,
) -> i32 {
    configure(config, |c| {
        c.config.max_message_size = bytes;
        Ok(())
    })
}

/// Most simultaneous connections (default 1024).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_max_connections(
    config: *mut UnienvConfig,
    n: usize,
) -> i32 {
    configure(config, |c| {
        c.config.max_connections = n;
        Ok(())
    })
}

/// Requests one session may have queued at once (default 64).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_max_in_flight(
    config: *mut UnienvConfig,
    n: usize,
) -> i32 {
    configure(config, |c| {
        c.config.max_in_flight = n;
        Ok(())
    })
}

/// Most bytes one connection may hold at once (default 256 MiB).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_max_connection_bytes(
    config: *mut UnienvConfig,
    bytes: usize,
) -> i32 {
    configure(config, |c| {
        c.config.max_connection_bytes = bytes;
        Ok(())
    })
}

/// A session holding nothing and silent this long is closed (default
/// 300 000 ms; 0 disables).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_idle_session_timeout_ms(
    config: *mut UnienvConfig,
    ms: u64,
) -> i32 {
    configure(config, |c| {
        c.config.idle_session_timeout = millis(ms);
        Ok(())
    })
}

/// How long stopping waits for sessions and then for each env's thread
/// (default 10 000 ms; must be positive). A callback that never returns is
/// left behind after it.
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_shutdown_timeout_ms(
    config: *mut UnienvConfig,
    ms: u64,
) -> i32 {
    configure(config, |c| {
        c.config.shutdown_timeout = Duration::from_millis(ms);
        Ok(())
    })
}

/// Time allowed for a WebSocket handshake and for `hello` (default
/// 10 000 ms each; must be positive).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_handshake_timeout_ms(
    config: *mut UnienvConfig,
    ms: u64,
) -> i32 {
    configure(config, |c| {
        c.config.handshake_timeout = Duration::from_millis(ms);
        c.config.hello_timeout = Duration::from_millis(ms);
        Ok(())
    })
}

/// A silent peer is pinged after this long (default 20 000 ms; 0 disables
/// heartbeats).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_heartbeat_interval_ms(
    config: *mut UnienvConfig,
    ms: u64,
) -> i32 {
    configure(config, |c| {
        c.config.heartbeat_interval = millis(ms);
        Ok(())
    })
}

/// Calls slower than this are logged at `warn` level (default 1000 ms; 0
/// disables).
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_slow_call_ms(config: *mut UnienvConfig, ms: u64) -> i32 {
    configure(config, |c| {
        c.config.slow_call = millis(ms);
        Ok(())
    })
}

/// Whether actions are checked against the action space before `step`
/// sees them (default false, as the reference): a bad action is refused
/// with a certain `invalid_request` naming the element and the bound.
///
/// # Safety
/// `config` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_config_set_validate_actions(
    config: *mut UnienvConfig,
    on: bool,
) -> i32 {
    configure(config, |c| {
        c.config.validate_actions = on;
        Ok(())
    })
}

enum State {
    Building(ServerBuilder),
    Running {
        runtime: tokio::runtime::Runtime,
        server: Server,
        /// `None` when started without listening (dialing out only).
        _listener: Option<Listener>,
    },
    Stopped,
}

/// A server: created with `unienv_server_new`, envs added, started once,
/// stopped and freed with `unienv_server_free`.
pub struct UnienvServer {
    state: State,
    runner: Runner,
    shutdown_timeout: Duration,
    address: CString,
    /// Set once stopped: its dials report `UNIENV_DIAL_STOPPED` from then
    /// on, whatever their task last recorded before the runtime ended.
    stopped: Arc<AtomicBool>,
}

impl UnienvServer {
    /// The running server, its runtime and its stopped flag (`None` before
    /// start and after stop).
    pub(crate) fn running(&self) -> Option<(&Server, &tokio::runtime::Runtime, &Arc<AtomicBool>)> {
        match &self.state {
            State::Running {
                runtime, server, ..
            } => Some((server, runtime, &self.stopped)),
            _ => None,
        }
    }
}

/// A new server with a copy of `config` (NULL: defaults). NULL on failure.
///
/// # Safety
/// `config` is NULL or a live configuration.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_new(config: *const UnienvConfig) -> *mut UnienvServer {
    guard(std::ptr::null_mut(), || {
        let (config, threading) = match config.as_ref() {
            Some(c) => (c.config.clone(), c.threading),
            None => (ServerConfig::default(), UNIENV_THREADING_WORKER),
        };
        let runner = if threading == UNIENV_THREADING_PUMP {
            Runner::Pump(Arc::new(Pump::default()))
        } else {
            Runner::Worker
        };
        Ok(Box::into_raw(Box::new(UnienvServer {
            shutdown_timeout: config.shutdown_timeout,
            state: State::Building(Server::builder(config)),
            runner,
            address: CString::default(),
            stopped: Arc::default(),
        })))
    })
}

/// Registers `env` (taken, even on failure) as the env resource `id`, in
/// an execution domain of its own. Only before `unienv_server_start`.
///
/// # Safety
/// `server` is live; `id` a NUL-terminated string; `env` an owned env or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_add_env(
    server: *mut UnienvServer,
    id: *const c_char,
    env: *mut UnienvEnv,
) -> i32 {
    let env = take(env, "env");
    status(|| {
        let env = *env?;
        let id = text(id, "id")?;
        let server = req_mut(server, "server")?;
        let State::Building(builder) = &mut server.state else {
            return Err(Failure::new(
                UNIENV_ERR_STATE,
                "envs are added before unienv_server_start",
            ));
        };
        let env = CEnv::new(env, server.runner.clone());
        // The env moves to its domain's thread as a whole; its user pointer
        // is the registrant's (see UnienvEnvCallbacks).
        let env = SendEnv(env);
        builder
            .register_with(id, move || {
                let SendEnv(env) = env;
                Ok(Hosted::env(env))
            })
            .map(|_| ())
            .map_err(|e| Failure::new(UNIENV_ERR_REGISTER, e.to_string()))
    })
}

struct SendEnv(CEnv);
// CEnv holds the registrant's callbacks (Send by UnienvEnvCallbacks' promise),
// spaces and values (Send).
unsafe impl Send for SendEnv {}

/// Validates the configuration, starts the server and listens on `address`
/// (`"127.0.0.1:0"` picks a free port; read it with
/// `unienv_server_address`). Envs are served from then on. A NULL
/// `address` starts the server without listening: it then serves only the
/// relays it dials (`unienv_server_dial`).
///
/// # Safety
/// `server` is live; `address` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_start(
    server: *mut UnienvServer,
    address: *const c_char,
) -> i32 {
    status(|| {
        let address = if address.is_null() {
            None
        } else {
            Some(text(address, "address")?.to_string())
        };
        let server = req_mut(server, "server")?;
        if !matches!(server.state, State::Building(_)) {
            return Err(Failure::new(
                UNIENV_ERR_STATE,
                "the server was already started",
            ));
        }
        let State::Building(builder) = std::mem::replace(&mut server.state, State::Stopped) else {
            return Err(Failure::new(
                UNIENV_ERR_STATE,
                "the server was already started",
            ));
        };
        let started = builder.start().map_err(|e| {
            Failure::new(
                UNIENV_ERR_CONFIG,
                format!("invalid server configuration: {e}"),
            )
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("unienv-io")
            .build()
            .map_err(|e| Failure::new(UNIENV_ERR_IO, format!("cannot start the runtime: {e}")))?;
        let Some(address) = address else {
            server.state = State::Running {
                runtime,
                server: started,
                _listener: None,
            };
            return Ok(());
        };
        let listened = runtime.block_on(started.listen(address.as_str()));
        let listener = match listened {
            Ok(l) => l,
            Err(e) => {
                let config_error = e
                    .get_ref()
                    .is_some_and(|r| r.downcast_ref::<ServerConfigError>().is_some());
                let code = if config_error {
                    UNIENV_ERR_CONFIG
                } else {
                    UNIENV_ERR_IO
                };
                stop_server(&runtime, &started, &server.runner);
                return Err(Failure::new(
                    code,
                    format!("cannot listen on {address}: {e}"),
                ));
            }
        };
        server.address = CString::new(listener.local_addr().to_string()).unwrap_or_default();
        server.state = State::Running {
            runtime,
            server: started,
            _listener: Some(listener),
        };
        Ok(())
    })
}

/// The bound address, `"HOST:PORT"` (clients connect to `ws://HOST:PORT`);
/// `""` before `unienv_server_start` or when started without listening. Valid while the server lives.
///
/// # Safety
/// `server` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_address(server: *const UnienvServer) -> *const c_char {
    quiet(c"".as_ptr(), || match server.as_ref() {
        Some(s) => s.address.as_ptr(),
        None => c"".as_ptr(),
    })
}

/// Pump mode: waits up to `timeout_ms` (0: not at all; negative: without
/// limit) for a queued callback, then runs every callback queued by then
/// on the calling thread, in arrival order. Returns how many ran (0 on
/// timeout), or a negative status (`-UNIENV_ERR_*`). In worker mode it
/// just waits `timeout_ms` (capped at 1 s when negative) and returns 0, so
/// one main loop fits both modes.
///
/// # Safety
/// `server` is live and not being freed by another thread.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_poll(server: *mut UnienvServer, timeout_ms: i32) -> i32 {
    guard(-UNIENV_ERR_INVALID_ARGUMENT, || {
        let server = req(server, "server")?;
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        match &server.runner {
            Runner::Pump(pump) => Ok(i32::try_from(pump.run(timeout)).unwrap_or(i32::MAX)),
            Runner::Worker => {
                std::thread::sleep(timeout.unwrap_or(Duration::from_secs(1)));
                Ok(0)
            }
        }
    })
}

/// Number of connected sessions (0 before start).
///
/// # Safety
/// `server` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_session_count(server: *const UnienvServer) -> usize {
    quiet(0, || match server.as_ref().map(|s| &s.state) {
        Some(State::Running { server, .. }) => server.session_count(),
        _ => 0,
    })
}

fn stop_server(runtime: &tokio::runtime::Runtime, server: &Server, runner: &Runner) {
    match runner {
        Runner::Worker => runtime.block_on(server.shutdown()),
        Runner::Pump(pump) => {
            // The envs' close callbacks (and calls still queued) run on
            // this thread: pump while the server shuts down.
            let s = server.clone();
            let done = runtime.spawn(async move { s.shutdown().await });
            while !done.is_finished() {
                pump.run(Some(Duration::from_millis(5)));
            }
            pump.close();
        }
    }
}

/// Stops the server: closes every session, calls each env's `close`
/// callback once (in pump mode on the calling thread), and waits for the
/// env threads (up to the shutdown timeout each). Idempotent; the server
/// can then only be freed.
///
/// # Safety
/// `server` is live; no other thread is polling it.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_stop(server: *mut UnienvServer) -> i32 {
    status(|| {
        let server = req_mut(server, "server")?;
        let timeout = server.shutdown_timeout;
        match std::mem::replace(&mut server.state, State::Stopped) {
            State::Running {
                runtime,
                server: s,
                _listener,
            } => {
                stop_server(&runtime, &s, &server.runner);
                drop(_listener);
                runtime.shutdown_timeout(timeout);
            }
            State::Building(builder) => {
                // Never started: the domains still stop (and close their envs).
                if let Ok(s) = builder.start() {
                    if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        stop_server(&rt, &s, &server.runner);
                    }
                }
            }
            State::Stopped => {}
        }
        if let Runner::Pump(p) = &server.runner {
            p.close();
        }
        server.stopped.store(true, Ordering::Release);
        Ok(())
    })
}

/// Stops the server (as `unienv_server_stop`) and frees it (NULL is
/// ignored).
///
/// # Safety
/// `server` is NULL or a live server not freed yet; no other thread uses it.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_free(server: *mut UnienvServer) {
    if server.is_null() {
        return;
    }
    unienv_server_stop(server);
    if let Ok(s) = take(server, "server") {
        quiet((), move || drop(s));
    }
}
