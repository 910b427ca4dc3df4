//! The server's settings and their validation.

use std::time::Duration;

/// Server settings. Every limit has a documented default.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest message in either direction (default 64 MiB). A client may
    /// lower it for its session in `hello`.
    pub max_message_size: usize,
    /// Factory-registered domains with no activity, subscription or
    /// controller for this long are disposed (default 60 s; `None` disables).
    pub idle_timeout: Option<Duration>,
    /// Most simultaneous connections (default 1024); more are refused.
    pub max_connections: usize,
    /// When set, WebSocket clients must send `Authorization: Bearer <token>`.
    /// An empty (or blank) token is refused by [`Server::listen`](super::Server::listen).
    pub token: Option<String>,
    /// Browser origins allowed besides loopback ones (`*` allows any).
    pub allowed_origins: Vec<String>,
    /// `Host` header values allowed besides loopback names and IP literals.
    pub allowed_hosts: Vec<String>,
    /// Time allowed for a WebSocket handshake (default 10 s).
    pub handshake_timeout: Duration,
    /// Largest handshake request, headers included (default 16 KiB).
    pub max_handshake_bytes: usize,
    /// Requests a session may have queued at domains at once (default 64).
    pub max_in_flight: usize,
    /// Requests a session may have waiting at one domain (default 64, as
    /// `max_in_flight`, whose bound is met first: the session's reader
    /// then waits for a slot; set it lower to refuse instead): one more is
    /// refused at once with a certain `invalid_request` naming the limit
    /// (SPEC §6, "Fair queues"). Each domain serves the sessions that have
    /// requests waiting at it in turn, one request each.
    pub max_queued_per_domain: usize,
    /// Subscriptions a session may hold (default 1024).
    pub max_subscriptions_per_session: usize,
    /// Whether env-mutation responses also carry the mutated env's own
    /// controller snapshot (default `false`). Its data would repeat the call's
    /// value — for an image observation, doubling the response — and no
    /// protocol read is served from it; node and world snapshots are always
    /// sent. `true` reproduces the reference byte for byte.
    pub env_boundary_snapshots: bool,
    /// How long shutdown waits for each domain thread (default 10 s); a
    /// simulator hung past it is left behind rather than blocking forever.
    pub shutdown_timeout: Duration,
    /// Most bytes one connection may hold at once (default 256 MiB): the
    /// message it is sending, its requests waiting at domains (their frames
    /// and decoded trees) and the responses queued for it. Beyond it the
    /// connection is closed (1008).
    pub max_connection_bytes: usize,
    /// Most bytes all connections together may hold beyond their first MiB
    /// each (default 8 GiB; 1 GiB on 32-bit targets). A connection that
    /// needs more while it is exhausted is closed (1013, try again later).
    pub max_server_bytes: usize,
    /// Largest decoded value tree of one message, attachments excluded
    /// (default 256 MiB, counted by node); a larger one is an invalid
    /// envelope.
    pub max_decoded_bytes: usize,
    /// Decodes of large messages (over 64 KiB) running at once, on tokio's
    /// blocking threads (default: half the cores, 1 to 8, so that at
    /// least half the cores stay with the async workers that serve every
    /// connection's I/O); others wait their turn, first come first served.
    pub max_parallel_decodes: usize,
    /// WebSocket handshakes in progress at once (default 256); a new
    /// connection beyond it evicts the oldest pending handshake.
    pub max_pending_handshakes: usize,
    /// Time allowed between the upgrade and `hello` (default 10 s).
    pub hello_timeout: Duration,
    /// A session that holds nothing (no request ever routed to a domain, so
    /// no control; no subscription) and sends nothing, not even a ping, for
    /// this long is closed (default 300 s; `None` disables).
    pub idle_session_timeout: Option<Duration>,
    /// Time a WebSocket message may take to arrive once its first byte has
    /// (default 60 s).
    pub message_timeout: Duration,
    /// Whether actions (`step` of a hosted Rust env, `set_next_action` of a
    /// hosted Rust node) are checked against the declared action space
    /// before the simulator sees them: dtype kind, shape, bounds and
    /// finiteness (see [`Space::check`](crate::host::Space::check)). A bad
    /// action is answered with a certain `invalid_request` naming the
    /// element and the bound, and the simulator stays usable. Default
    /// `false`, as the reference (which passes any action through);
    /// `unienv-remote serve` turns it on. Foreign (Python) hosts are never
    /// checked.
    pub validate_actions: bool,
    /// Hosted calls taking longer than this are logged at `warn` level with
    /// `tracing` (default 1 s; `None` disables).
    pub slow_call: Option<Duration>,
    /// How long a response may wait for the session's other requests at
    /// domains, to be written together with theirs (default 500 µs; `None`
    /// writes each at once). A learner stepping many envs on one connection
    /// then wakes once per batch of replies instead of once per reply; a
    /// reply is never held longer than this, whatever the other requests
    /// do (SPEC §8.4, "replies written together").
    pub reply_hold: Option<Duration>,
    // [transport: TLS hook]
    /// TLS for every WebSocket connection (`wss://`; default none: plain
    /// `ws://`). Build it with
    /// [`ServerTls::from_pem_files`](crate::transport::ServerTls::from_pem_files).
    /// The handshake timeout covers the TLS handshake too.
    pub tls: Option<crate::transport::ServerTls>,
    // [transport: heartbeat hook]
    /// A WebSocket peer silent for this long is pinged (default 20 s; `None`
    /// disables heartbeats). Its pongs, like anything it sends, show it is
    /// there; they do not make an idle session active
    /// ([`ServerConfig::idle_session_timeout`]).
    pub heartbeat_interval: Option<Duration>,
    /// A WebSocket peer from which nothing at all (not even a pong) arrived
    /// for this long has vanished: its session is closed, which releases its
    /// control and subscriptions as any disconnect does (default 60 s; only
    /// with a heartbeat interval).
    pub heartbeat_timeout: Duration,
    // [record: recording hook]
    /// When set, every env-mode transition of every env resource is
    /// recorded into `DIR/<resource_id>/` as a `unienv_data` replay buffer,
    /// one segment per episode (see [`crate::record`]); default none. The
    /// directory is created when the server is built; if it cannot be,
    /// nothing is recorded and the failure is logged at `error`.
    pub record_dir: Option<std::path::PathBuf>,
    /// The storage `record_dir`'s buffers are written in (default Parquet,
    /// whose loading needs pyarrow beside `unienv`; NPZ loads with `unienv`
    /// alone at a file per transition; see [`crate::record::RecordFormat`]).
    pub record_format: crate::record::RecordFormat,
    /// Most bytes of transitions waiting for the recorder's writer
    /// (default 256 MiB; arrays counted by their data, other values by
    /// their size in memory). A call whose transition does not fit waits
    /// for room, as when the queue holds [`crate::record::QUEUE_EVENTS`]
    /// events; one transition larger than the whole budget is taken alone.
    /// Part of [`ServerConfig::worst_case_memory_bytes`].
    pub record_queue_bytes: usize,
    // [metrics: endpoint hook]
    /// When set (e.g. `127.0.0.1:9464`), the first
    /// [`Server::listen`](super::Server::listen) or [`Server::serve`](super::Server::serve)
    /// also serves the server's metrics in the Prometheus text format at
    /// `http://ADDR/metrics` ([`crate::metrics`]); default none. The
    /// endpoint has no authentication: bind it to loopback or a monitoring
    /// network.
    pub metrics_addr: Option<String>,
    /// The CPUs the server's threads run on (default none: wherever the
    /// OS schedules them). When set, each domain thread and the recorder's
    /// writer pin themselves to these CPUs as they start (threads they
    /// start, such as a `BatchedEnv`'s stepping threads, inherit it); the
    /// tokio runtime is the caller's: pin its threads with
    /// [`pin_current_thread`](super::pin_current_thread) in
    /// `on_thread_start`, as `unienv-remote serve --cpus` and the Python
    /// `RemoteServer(cpus=...)` do. Pays when several server processes
    /// share a machine with a learner: one server process per vCPU, the
    /// learner unpinned (BENCHMARKS.md, "Vector envs and throughput"). An empty list, a CPU the
    /// machine does not have or one outside the process's allowed set is
    /// refused by [`ServerConfig::validate`]; so is any placement where
    /// threads cannot be pinned (only Linux can).
    pub cpus: Option<Vec<usize>>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_message_size: crate::codec::DEFAULT_MAX_MESSAGE_SIZE,
            idle_timeout: Some(Duration::from_secs(60)),
            max_connections: 1024,
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            handshake_timeout: Duration::from_secs(10),
            max_handshake_bytes: 16 * 1024,
            max_in_flight: 64,
            max_queued_per_domain: 64,
            max_subscriptions_per_session: 1024,
            env_boundary_snapshots: false,
            shutdown_timeout: Duration::from_secs(10),
            max_connection_bytes: 256 << 20,
            max_server_bytes: if usize::BITS >= 64 {
                (8u64 << 30) as usize
            } else {
                1 << 30
            },
            max_decoded_bytes: 256 << 20,
            max_parallel_decodes: std::thread::available_parallelism()
                .map_or(1, |n| (n.get() / 2).clamp(1, 8)),
            max_pending_handshakes: 256,
            hello_timeout: Duration::from_secs(10),
            idle_session_timeout: Some(Duration::from_secs(300)),
            message_timeout: Duration::from_secs(60),
            validate_actions: false,
            slow_call: Some(Duration::from_secs(1)),
            reply_hold: Some(Duration::from_micros(500)),
            tls: None,
            heartbeat_interval: Some(Duration::from_secs(20)),
            heartbeat_timeout: Duration::from_secs(60),
            record_dir: None,
            record_format: crate::record::RecordFormat::parquet(),
            record_queue_bytes: crate::record::DEFAULT_QUEUE_BYTES,
            metrics_addr: None,
            cpus: None,
        }
    }
}

impl ServerConfig {
    /// The most memory the server's connections can hold at once under
    /// this configuration, whatever the peers do (SPEC section 11), in
    /// bytes:
    ///
    /// `max_connections × (1 MiB allowance + 160 KiB fixed buffers)`
    /// `+ max_server_bytes` (frames, decoded trees, queued and in-flight
    /// responses beyond the allowances)
    /// `+ max_parallel_decodes × max_decoded_bytes` (trees being built,
    /// charged once built)
    /// `+ max_connections × max_subscriptions_per_session × 1 KiB`
    /// (subscription records and their IDs, at most 256 bytes)
    /// `+ max_pending_handshakes × max_handshake_bytes`
    /// `+ record_queue_bytes` (only with [`ServerConfig::record_dir`]: the
    /// transitions waiting for the recorder's writer, or a single larger
    /// one).
    ///
    /// Not included: the hosted simulators' own memory, in-memory
    /// connections (not capped by `max_connections`), and the kernel's socket
    /// buffers (bounded by the OS, e.g. Linux's `net.ipv4.tcp_mem`).
    pub fn worst_case_memory_bytes(&self) -> u64 {
        let n = self.max_connections as u64;
        let per_connection = crate::budget::ACCOUNT_ALLOWANCE as u64 + FIXED_CONNECTION_BYTES;
        n.saturating_mul(per_connection)
            .saturating_add(self.max_server_bytes as u64)
            .saturating_add(
                (self.max_parallel_decodes.max(1) as u64)
                    .saturating_mul(self.max_decoded_bytes as u64),
            )
            .saturating_add(
                n.saturating_mul(self.max_subscriptions_per_session as u64)
                    .saturating_mul(SUBSCRIPTION_BYTES),
            )
            .saturating_add(
                (self.max_pending_handshakes as u64)
                    .saturating_mul(self.max_handshake_bytes as u64),
            )
            .saturating_add(if self.record_dir.is_some() {
                self.record_queue_bytes as u64
            } else {
                0
            })
    }
}

/// Per connection, uncharged: the read buffer's spare room (8 KiB), the
/// writer's gathering buffer (64 KiB and one small frame), control frames
/// held back (4 KiB), the tasks and session records.
const FIXED_CONNECTION_BYTES: u64 = 160 << 10;

/// One subscription: its record at the domain and the session, its ID
/// (at most 256 bytes) twice, and its pending-snapshot slot.
const SUBSCRIPTION_BYTES: u64 = 1 << 10;

/// Why a [`ServerConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerConfigError {
    /// A count or size that must be at least `min` is smaller.
    #[error("{field} is {value}: it must be at least {min}")]
    TooSmall {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The smallest allowed value.
        min: usize,
    },
    /// A time limit is zero (use `None`, where allowed, to disable it).
    #[error("{field} is zero: give a positive duration{}", if *.optional { " (or None to disable it)" } else { "" })]
    ZeroDuration {
        /// The field's name.
        field: &'static str,
        /// Whether `None` disables the limit instead.
        optional: bool,
    },
    /// The bearer token is empty or blank (which would turn authentication off).
    #[error("the bearer token is empty: set a non-empty token or none")]
    EmptyToken,
    /// The placement ([`ServerConfig::cpus`]) cannot be used.
    #[error("invalid placement (cpus): {0}")]
    Placement(#[from] super::placement::PlacementError),
}

impl ServerConfig {
    /// Checks every limit: counts that would refuse or stall every session
    /// (`max_connections`, `max_in_flight`, `max_parallel_decodes`,
    /// `max_pending_handshakes` of 0), sizes too small to carry a message,
    /// zero time limits, and a placement ([`ServerConfig::cpus`]) that
    /// cannot be used. Called by
    /// [`ServerBuilder::start`](super::ServerBuilder::start) and
    /// [`ServerBuilder::start`](super::ServerBuilder::start).
    pub fn validate(&self) -> Result<(), ServerConfigError> {
        let at_least = |field: &'static str, value: usize, min: usize| {
            if value < min {
                Err(ServerConfigError::TooSmall { field, value, min })
            } else {
                Ok(())
            }
        };
        at_least(
            "max_message_size",
            self.max_message_size,
            crate::codec::MIN_MAX_MESSAGE_SIZE,
        )?;
        at_least("max_connections", self.max_connections, 1)?;
        at_least("max_in_flight", self.max_in_flight, 1)?;
        at_least("max_queued_per_domain", self.max_queued_per_domain, 1)?;
        at_least("record_queue_bytes", self.record_queue_bytes, 1)?;
        at_least("max_parallel_decodes", self.max_parallel_decodes, 1)?;
        at_least("max_pending_handshakes", self.max_pending_handshakes, 1)?;
        at_least(
            "max_handshake_bytes",
            self.max_handshake_bytes,
            MIN_HANDSHAKE_BYTES,
        )?;
        at_least("max_connection_bytes", self.max_connection_bytes, 1)?;
        at_least("max_server_bytes", self.max_server_bytes, 1)?;
        at_least("max_decoded_bytes", self.max_decoded_bytes, 1)?;
        let positive = |field: &'static str, d: Duration| {
            if d.is_zero() {
                Err(ServerConfigError::ZeroDuration {
                    field,
                    optional: false,
                })
            } else {
                Ok(())
            }
        };
        let positive_or_none = |field: &'static str, d: Option<Duration>| {
            if d.is_some_and(|d| d.is_zero()) {
                Err(ServerConfigError::ZeroDuration {
                    field,
                    optional: true,
                })
            } else {
                Ok(())
            }
        };
        positive("handshake_timeout", self.handshake_timeout)?;
        positive("hello_timeout", self.hello_timeout)?;
        positive("message_timeout", self.message_timeout)?;
        positive("shutdown_timeout", self.shutdown_timeout)?;
        positive_or_none("idle_timeout", self.idle_timeout)?;
        positive_or_none("idle_session_timeout", self.idle_session_timeout)?;
        positive_or_none("heartbeat_interval", self.heartbeat_interval)?;
        positive_or_none("reply_hold", self.reply_hold)?;
        positive("heartbeat_timeout", self.heartbeat_timeout)?;
        match &self.cpus {
            Some(cpus) => Ok(super::placement::check_cpus(cpus)?),
            None => Ok(()),
        }
    }

    /// [`ServerConfig::validate`], and a token, when set, that is not blank
    /// (a blank one would turn authentication off): what
    /// [`Server::listen`](super::Server::listen) and
    /// [`Server::serve`](super::Server::serve) check.
    pub fn validate_for_websocket(&self) -> Result<(), ServerConfigError> {
        self.validate()?;
        if self.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ServerConfigError::EmptyToken);
        }
        Ok(())
    }
}

/// The smallest `max_handshake_bytes`: room for a minimal upgrade request.
pub const MIN_HANDSHAKE_BYTES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid() {
        assert_eq!(ServerConfig::default().validate(), Ok(()));
    }

    #[test]
    fn limits_that_stall_or_refuse_everyone_are_refused() {
        let cases: Vec<(ServerConfig, &str)> = vec![
            (
                ServerConfig {
                    max_in_flight: 0,
                    ..Default::default()
                },
                "max_in_flight",
            ),
            (
                ServerConfig {
                    max_connections: 0,
                    ..Default::default()
                },
                "max_connections",
            ),
            (
                ServerConfig {
                    max_message_size: 7,
                    ..Default::default()
                },
                "max_message_size",
            ),
            (
                ServerConfig {
                    max_parallel_decodes: 0,
                    ..Default::default()
                },
                "max_parallel_decodes",
            ),
            (
                ServerConfig {
                    max_pending_handshakes: 0,
                    ..Default::default()
                },
                "max_pending_handshakes",
            ),
            (
                ServerConfig {
                    max_handshake_bytes: 10,
                    ..Default::default()
                },
                "max_handshake_bytes",
            ),
            (
                ServerConfig {
                    max_connection_bytes: 0,
                    ..Default::default()
                },
                "max_connection_bytes",
            ),
            (
                ServerConfig {
                    max_server_bytes: 0,
                    ..Default::default()
                },
                "max_server_bytes",
            ),
            (
                ServerConfig {
                    max_decoded_bytes: 0,
                    ..Default::default()
                },
                "max_decoded_bytes",
            ),
        ];
        for (config, field) in cases {
            match config.validate() {
                Err(ServerConfigError::TooSmall { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn zero_time_limits_are_refused() {
        let zero = Duration::ZERO;
        let cases: Vec<(ServerConfig, &str, bool)> = vec![
            (
                ServerConfig {
                    handshake_timeout: zero,
                    ..Default::default()
                },
                "handshake_timeout",
                false,
            ),
            (
                ServerConfig {
                    hello_timeout: zero,
                    ..Default::default()
                },
                "hello_timeout",
                false,
            ),
            (
                ServerConfig {
                    message_timeout: zero,
                    ..Default::default()
                },
                "message_timeout",
                false,
            ),
            (
                ServerConfig {
                    shutdown_timeout: zero,
                    ..Default::default()
                },
                "shutdown_timeout",
                false,
            ),
            (
                ServerConfig {
                    idle_timeout: Some(zero),
                    ..Default::default()
                },
                "idle_timeout",
                true,
            ),
            (
                ServerConfig {
                    idle_session_timeout: Some(zero),
                    ..Default::default()
                },
                "idle_session_timeout",
                true,
            ),
            (
                ServerConfig {
                    reply_hold: Some(zero),
                    ..Default::default()
                },
                "reply_hold",
                true,
            ),
        ];
        for (config, field, optional) in cases {
            assert_eq!(
                config.validate(),
                Err(ServerConfigError::ZeroDuration { field, optional }),
                "{field}"
            );
        }
        let disabled = ServerConfig {
            idle_timeout: None,
            idle_session_timeout: None,
            slow_call: None,
            reply_hold: None,
            ..Default::default()
        };
        assert_eq!(disabled.validate(), Ok(()));
    }

    #[test]
    fn a_blank_token_is_refused() {
        let config = ServerConfig {
            token: Some("  ".into()),
            ..Default::default()
        };
        assert_eq!(
            config.validate(),
            Ok(()),
            "in-memory sessions need no token"
        );
        let refused = config.validate_for_websocket();
        assert_eq!(refused, Err(ServerConfigError::EmptyToken));
        assert!(refused.unwrap_err().to_string().contains("non-empty token"));
    }
}
