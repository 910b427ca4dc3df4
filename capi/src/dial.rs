//! Hosting by dialing out: a started server connects to a relay, registers
//! under a name and serves the clients the relay forwards (SPEC.md, "Relay
//! and dial-out hosts"), with the same callbacks, threading mode and
//! connection slots as accepted connections.

use crate::error::{guard, quiet, req, status, take, text, Failure};
use crate::error::{UNIENV_ERR_CONFIG, UNIENV_ERR_INVALID_ARGUMENT, UNIENV_ERR_STATE};
use crate::server::UnienvServer;
use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use unienv_remote::server::{DialError, DialHandle, DialOptions, DialState};

/// Connecting to the relay and registering.
pub const UNIENV_DIAL_CONNECTING: i32 = 0;
/// Registered: clients reach the server at `ws://RELAY/hosts/NAME`.
pub const UNIENV_DIAL_REGISTERED: i32 = 1;
/// Waiting before the next attempt (after a refusal or a lost connection).
pub const UNIENV_DIAL_WAITING: i32 = 2;
/// Stopped: `unienv_dial_stop`, or the server stopped.
pub const UNIENV_DIAL_STOPPED: i32 = 3;

/// A server's dialing to one relay, from `unienv_server_dial` until
/// `unienv_dial_free` (which stops the dialing).
pub struct UnienvDial {
    handle: DialHandle,
    runtime: tokio::runtime::Handle,
    /// The server's: set once it stopped (and its runtime with it).
    server_stopped: Arc<AtomicBool>,
    last_error: CString,
}

impl UnienvDial {
    fn state(&self) -> DialState {
        if self.server_stopped.load(Ordering::Acquire) {
            DialState::Stopped
        } else {
            self.handle.status().state
        }
    }
}

/// A dialing server's state, filled by `unienv_dial_status`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UnienvDialStatus {
    /// One of `UNIENV_DIAL_CONNECTING`, `_REGISTERED`, `_WAITING`, `_STOPPED`.
    pub state: i32,
    /// Attempts since the last registration (the current one included).
    pub attempts: u64,
    /// Registrations so far (a re-dial after a loss counts again).
    pub registrations: u64,
    /// Tunnels opened for clients so far (one per client session).
    pub tunnels: u64,
    /// While waiting: milliseconds until the next attempt (0 otherwise).
    pub retry_in_ms: u64,
}

fn dial_failure(e: DialError) -> Failure {
    let code = match e {
        DialError::Config(_) | DialError::Tls(_) => UNIENV_ERR_CONFIG,
        _ => UNIENV_ERR_INVALID_ARGUMENT,
    };
    Failure::new(code, e.to_string())
}

/// Dials the relay at `url` (`ws://HOST:PORT` or `wss://…`) and registers
/// the started `server` as `name` (1 to 64 of `A-Z a-z 0-9 . _ -`, starting
/// with a letter or a digit); clients then reach it at
/// `ws://HOST:PORT/hosts/NAME`. `host_token` is the relay's host token
/// (NULL: none); `ca_file` a PEM file of CA certificates to trust for a
/// `wss://` relay besides the system's (NULL: the system's only).
///
/// Returns at once: the connection is made in the background and re-made
/// after any loss (a refused registration included), with exponential
/// backoff from 0.25 s to 10 s and jitter, each attempt bounded by 10 s.
/// Query it with `unienv_dial_status`. Callbacks run as for accepted
/// connections (in pump mode: inside `unienv_server_poll`, nothing more to
/// call). A server may dial several relays and listen too. NULL on
/// failure: an invalid URL or name (`UNIENV_ERR_INVALID_ARGUMENT`), a
/// server not started (`UNIENV_ERR_STATE`), an unreadable `ca_file`
/// (`UNIENV_ERR_CONFIG`).
///
/// # Safety
/// `server` is live; `url` and `name` NUL-terminated strings; `host_token`
/// and `ca_file` NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn unienv_server_dial(
    server: *mut UnienvServer,
    url: *const c_char,
    name: *const c_char,
    host_token: *const c_char,
    ca_file: *const c_char,
) -> *mut UnienvDial {
    guard(std::ptr::null_mut(), || {
        let url = text(url, "url")?;
        let mut options = DialOptions::new(text(name, "name")?);
        if !host_token.is_null() {
            options = options.with_token(text(host_token, "host_token")?);
        }
        if !ca_file.is_null() {
            options.ca_file = Some(text(ca_file, "ca_file")?.into());
        }
        let Some((server, runtime, stopped)) = req(server, "server")?.running() else {
            return Err(Failure::new(
                UNIENV_ERR_STATE,
                "start the server before dialing (unienv_server_start(server, NULL) serves only \
                 the relays it dials)",
            ));
        };
        let _entered = runtime.enter();
        let handle = server.dial(url, options).map_err(dial_failure)?;
        Ok(Box::into_raw(Box::new(UnienvDial {
            handle,
            runtime: runtime.handle().clone(),
            server_stopped: stopped.clone(),
            last_error: CString::default(),
        })))
    })
}

fn state_code(state: DialState) -> i32 {
    match state {
        DialState::Connecting => UNIENV_DIAL_CONNECTING,
        DialState::Registered => UNIENV_DIAL_REGISTERED,
        DialState::Waiting => UNIENV_DIAL_WAITING,
        _ => UNIENV_DIAL_STOPPED,
    }
}

/// Fills `out` with the dialing's current state.
///
/// # Safety
/// `dial` is live; `out` points to a writable `UnienvDialStatus`.
#[no_mangle]
pub unsafe extern "C" fn unienv_dial_status(
    dial: *const UnienvDial,
    out: *mut UnienvDialStatus,
) -> i32 {
    status(|| {
        let dial = req(dial, "dial")?;
        let out = out.as_mut().ok_or_else(|| Failure::null("out"))?;
        let s = dial.handle.status();
        *out = UnienvDialStatus {
            state: state_code(dial.state()),
            attempts: s.attempts,
            registrations: s.registrations,
            tunnels: s.tunnels,
            retry_in_ms: s
                .retry_in
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        Ok(())
    })
}

/// The last failure of the dialing, in words (a refused registration with
/// the relay's reason, a lost connection), or `""` when registered since.
/// The text stays valid until the next call of this function on `dial`.
///
/// # Safety
/// `dial` is NULL or live, and not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn unienv_dial_last_error(dial: *mut UnienvDial) -> *const c_char {
    quiet(c"".as_ptr(), || match dial.as_mut() {
        Some(d) => {
            let message = d.handle.status().last_error.unwrap_or_default();
            d.last_error = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
            d.last_error.as_ptr()
        }
        None => c"".as_ptr(),
    })
}

/// Waits until the server is registered at the relay (now or later), at
/// most `timeout_ms` (negative: without limit, until registered or
/// stopped). Whether it is. Callbacks do not run meanwhile in pump mode
/// (registering needs none).
///
/// # Safety
/// `dial` is live, and its server is not stopped by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn unienv_dial_wait_registered(
    dial: *const UnienvDial,
    timeout_ms: i32,
) -> bool {
    guard(false, || {
        let dial = req(dial, "dial")?;
        let mut left = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        // In slices, so that a dialing stopped meanwhile ends the wait.
        let slice = Duration::from_millis(200);
        loop {
            match dial.state() {
                DialState::Registered => return Ok(true),
                DialState::Stopped => return Ok(false),
                _ => {}
            }
            let now = left.map_or(slice, |l| l.min(slice));
            if now.is_zero() {
                return Ok(false);
            }
            if dial.runtime.block_on(dial.handle.wait_registered(now)) {
                return Ok(dial.state() == DialState::Registered);
            }
            left = left.map(|l| l.saturating_sub(now));
        }
    })
}

/// Stops dialing and closes the connection to the relay (the relay lists
/// the server no more and closes the sessions it forwarded), in the
/// background: the state is `UNIENV_DIAL_STOPPED` once done. The server
/// goes on serving its other connections. Idempotent.
///
/// # Safety
/// `dial` is live.
#[no_mangle]
pub unsafe extern "C" fn unienv_dial_stop(dial: *const UnienvDial) -> i32 {
    status(|| {
        req(dial, "dial")?.handle.stop();
        Ok(())
    })
}

/// Stops dialing (as `unienv_dial_stop`) and frees the handle (NULL is
/// ignored). May be called before or after the server is freed.
///
/// # Safety
/// `dial` is NULL or a live handle not freed yet.
#[no_mangle]
pub unsafe extern "C" fn unienv_dial_free(dial: *mut UnienvDial) {
    if dial.is_null() {
        return;
    }
    if let Ok(d) = take(dial, "dial") {
        quiet((), move || {
            d.handle.stop();
            drop(d)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;
    use std::ffi::{c_void, CStr};
    use std::ptr;
    use unienv_remote::client::{Client, ClientConfig};
    use unienv_remote::host::ResetArgs;
    use unienv_remote::relay::{Relay, RelayConfig};
    use unienv_remote::Value;

    /// The threads the env's reset ran on.
    #[derive(Default)]
    struct Seen(Vec<std::thread::ThreadId>);

    unsafe extern "C" fn seed_reset(user: *mut c_void, call: *mut UnienvCall) -> i32 {
        (*(user as *mut Seen)).0.push(std::thread::current().id());
        let mut seed = 0;
        unienv_call_seed(call, &mut seed);
        unienv_call_set_reset(
            call,
            ptr::null_mut(),
            unienv_value_int(seed),
            ptr::null_mut(),
        );
        UNIENV_CALLBACK_OK
    }

    unsafe extern "C" fn no_step(_: *mut c_void, call: *mut UnienvCall) -> i32 {
        unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT, c"no steps".as_ptr())
    }

    /// A pump-mode server hosting `echo` (reset answers its seed), started
    /// without listening.
    unsafe fn pump_server(seen: &mut Seen) -> *mut UnienvServer {
        let config = unienv_config_new();
        assert_eq!(
            unienv_config_set_threading(config, UNIENV_THREADING_PUMP),
            0
        );
        let server = unienv_server_new(config);
        unienv_config_free(config);
        let callbacks = UnienvEnvCallbacks {
            user: (seen as *mut Seen).cast(),
            reset: Some(seed_reset),
            step: Some(no_step),
            render: None,
            close: None,
        };
        assert_eq!(
            unienv_server_add_env(server, c"echo".as_ptr(), unienv_env_new(&callbacks)),
            0
        );
        server
    }

    fn message() -> String {
        unsafe { CStr::from_ptr(unienv_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    fn state(dial: *const UnienvDial) -> UnienvDialStatus {
        let mut s = UnienvDialStatus::default();
        assert_eq!(unsafe { unienv_dial_status(dial, &mut s) }, 0);
        s
    }

    #[test]
    fn a_pump_mode_server_dialing_out_is_driven_through_the_relay() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let relay = rt
            .block_on(Relay::start("127.0.0.1:0", RelayConfig::default()))
            .unwrap();
        let relay_url = CString::new(relay.url()).unwrap();
        let mut seen = Seen::default();
        unsafe {
            let server = pump_server(&mut seen);
            let early = unienv_server_dial(
                server,
                relay_url.as_ptr(),
                c"engine".as_ptr(),
                ptr::null(),
                ptr::null(),
            );
            assert!(early.is_null());
            assert_eq!(unienv_last_error_code(), UNIENV_ERR_STATE);
            assert!(message().contains("unienv_server_start(server, NULL)"));

            assert_eq!(unienv_server_start(server, ptr::null()), 0);
            assert_eq!(
                CStr::from_ptr(unienv_server_address(server)).to_bytes(),
                b""
            );
            let bad = unienv_server_dial(
                server,
                relay_url.as_ptr(),
                c"no/slash".as_ptr(),
                ptr::null(),
                ptr::null(),
            );
            assert!(bad.is_null());
            assert_eq!(unienv_last_error_code(), UNIENV_ERR_INVALID_ARGUMENT);
            let bad = unienv_server_dial(
                server,
                c"http://x".as_ptr(),
                c"engine".as_ptr(),
                ptr::null(),
                ptr::null(),
            );
            assert!(bad.is_null());
            assert_eq!(unienv_last_error_code(), UNIENV_ERR_INVALID_ARGUMENT);

            let dial = unienv_server_dial(
                server,
                relay_url.as_ptr(),
                c"engine".as_ptr(),
                ptr::null(),
                ptr::null(),
            );
            assert!(!dial.is_null(), "{}", message());
            assert!(unienv_dial_wait_registered(dial, 60_000));
            let s = state(dial);
            assert_eq!(s.state, UNIENV_DIAL_REGISTERED);
            assert_eq!((s.registrations, s.tunnels), (1, 0));
            assert_eq!(CStr::from_ptr(unienv_dial_last_error(dial)).to_bytes(), b"");

            // A client through the relay; the callbacks run here, in poll.
            let url = relay.host_url("engine");
            let client = rt.spawn(async move {
                let config = ClientConfig::default().with_timeout(Some(Duration::from_secs(30)));
                let client = Client::connect(&url, config).await.unwrap();
                let env = client.env("echo").await.unwrap();
                let r = env.reset(ResetArgs::with_seed(7)).await.unwrap();
                client.close().await;
                r.observation
            });
            while !client.is_finished() {
                assert!(unienv_server_poll(server, 10) >= 0);
            }
            assert_eq!(rt.block_on(client).unwrap(), Value::Int(7));
            assert_eq!(seen.0, vec![std::thread::current().id()]);
            assert_eq!(state(dial).tunnels, 1);

            // Stopping: the relay lists it no more.
            assert_eq!(unienv_dial_stop(dial), 0);
            while state(dial).state != UNIENV_DIAL_STOPPED {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(!unienv_dial_wait_registered(dial, -1));
            rt.block_on(async {
                while !relay.hosts().is_empty() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            unienv_server_free(server);
            unienv_dial_free(dial);
        }
        rt.block_on(relay.shutdown());
    }

    #[test]
    fn a_taken_name_is_reported_and_a_freed_server_stops_dialing() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let relay = rt
            .block_on(Relay::start("127.0.0.1:0", RelayConfig::default()))
            .unwrap();
        let relay_url = CString::new(relay.url()).unwrap();
        let (mut a, mut b) = (Seen::default(), Seen::default());
        unsafe {
            let first = pump_server(&mut a);
            let second = pump_server(&mut b);
            assert_eq!(unienv_server_start(first, ptr::null()), 0);
            assert_eq!(unienv_server_start(second, c"127.0.0.1:0".as_ptr()), 0);
            let holder = unienv_server_dial(
                first,
                relay_url.as_ptr(),
                c"engine".as_ptr(),
                ptr::null(),
                ptr::null(),
            );
            assert!(unienv_dial_wait_registered(holder, 60_000));
            let refused = unienv_server_dial(
                second,
                relay_url.as_ptr(),
                c"engine".as_ptr(),
                ptr::null(),
                ptr::null(),
            );
            assert!(!refused.is_null(), "{}", message());
            assert!(!unienv_dial_wait_registered(refused, 0));
            while state(refused).state != UNIENV_DIAL_WAITING {
                std::thread::sleep(Duration::from_millis(5));
            }
            let why = CStr::from_ptr(unienv_dial_last_error(refused))
                .to_string_lossy()
                .into_owned();
            assert!(why.contains("name_taken"), "{why}");
            assert_eq!(state(refused).registrations, 0);

            // The holder's server freed: its dialing stops, and the name
            // goes to the other server when it re-dials.
            unienv_server_free(first);
            assert_eq!(state(holder).state, UNIENV_DIAL_STOPPED);
            assert!(!unienv_dial_wait_registered(holder, 1_000));
            unienv_dial_free(holder);
            assert!(unienv_dial_wait_registered(refused, 60_000));
            assert_eq!(state(refused).registrations, 1);
            unienv_dial_free(refused);
            unienv_server_free(second);
        }
        rt.block_on(relay.shutdown());
    }
}
