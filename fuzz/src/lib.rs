//! Support for the fuzz targets: strict value comparison, the structured
//! request model of the `requests` target and its harness (one in-process
//! server with the fixture registry per process, one in-memory session per
//! input).

use arbitrary::Arbitrary;
use bytes::Bytes;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::transport::{MemoryTransport, TransportError};
use unienv_remote::{Codec, DType, Dict, NdArray, Value};

/// Strict structural equality (floats bit for bit, any NaN equal to any
/// NaN, `Int` and `UInt` distinct); returns the path of the first difference.
pub fn same(a: &Value, b: &Value, path: &str) -> Result<(), String> {
    match (a, b) {
        (Value::Null, Value::Null) => Ok(()),
        (Value::Bool(x), Value::Bool(y)) if x == y => Ok(()),
        (Value::Int(x), Value::Int(y)) if x == y => Ok(()),
        (Value::UInt(x), Value::UInt(y)) if x == y => Ok(()),
        (Value::BigInt(x), Value::BigInt(y)) if x == y => Ok(()),
        (Value::Float(x), Value::Float(y))
            if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) =>
        {
            Ok(())
        }
        (Value::Str(x), Value::Str(y)) if x == y => Ok(()),
        (Value::Bytes(x), Value::Bytes(y)) if x == y => Ok(()),
        (Value::Array(x), Value::Array(y))
            if x.dtype() == y.dtype() && x.shape() == y.shape() && x.as_bytes() == y.as_bytes() =>
        {
            Ok(())
        }
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y))
            if x.len() == y.len() =>
        {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                same(p, q, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Dict(x), Value::Dict(y)) if x.len() == y.len() => {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y.iter()) {
                if kx != ky {
                    return Err(format!("{path} keys {kx:?} / {ky:?}"));
                }
                same(vx, vy, &format!("{path}.{kx}"))?;
            }
            Ok(())
        }
        (Value::ObjectArray(x), Value::ObjectArray(y))
            if x.shape() == y.shape() && x.values().len() == y.values().len() =>
        {
            for (i, (p, q)) in x.values().iter().zip(y.values()).enumerate() {
                same(p, q, &format!("{path}<{i}>"))?;
            }
            Ok(())
        }
        (Value::Graph(x), Value::Graph(y)) => {
            for ((name, p), (_, q)) in x.fields().iter().zip(y.fields().iter()) {
                same(p, q, &format!("{path}.{name}"))?;
            }
            Ok(())
        }
        _ => Err(path.to_string()),
    }
}

// ---- the request model ----

/// Words the protocol cares about, so that random requests reach past the
/// first checks: methods, operation kinds, modes, field names, IDs.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Word {
    Reset,
    Step,
    Render,
    Reload,
    AfterReset,
    AfterReload,
    SetNextAction,
    PreEnvironmentStep,
    PostEnvironmentStep,
    GetContext,
    GetObservation,
    GetReward,
    GetTermination,
    GetTruncation,
    GetInfo,
    Close,
    Env,
    Components,
    Context,
    Observation,
    Reward,
    Terminated,
    Truncated,
    Info,
    Dt,
    Op1,
    Op2,
    Sub1,
    Sub2,
    Empty,
    /// A resource ID of the fixture registry (index modulo their number).
    Resource(u8),
}

impl Word {
    fn text(self, resources: &[String]) -> String {
        let s = match self {
            Word::Reset => "reset",
            Word::Step => "step",
            Word::Render => "render",
            Word::Reload => "reload",
            Word::AfterReset => "after_reset",
            Word::AfterReload => "after_reload",
            Word::SetNextAction => "set_next_action",
            Word::PreEnvironmentStep => "pre_environment_step",
            Word::PostEnvironmentStep => "post_environment_step",
            Word::GetContext => "get_context",
            Word::GetObservation => "get_observation",
            Word::GetReward => "get_reward",
            Word::GetTermination => "get_termination",
            Word::GetTruncation => "get_truncation",
            Word::GetInfo => "get_info",
            Word::Close => "close",
            Word::Env => "env",
            Word::Components => "components",
            Word::Context => "context",
            Word::Observation => "observation",
            Word::Reward => "reward",
            Word::Terminated => "terminated",
            Word::Truncated => "truncated",
            Word::Info => "info",
            Word::Dt => "dt",
            Word::Op1 => "op1",
            Word::Op2 => "op2",
            Word::Sub1 => "s1",
            Word::Sub2 => "s2",
            Word::Empty => "",
            Word::Resource(i) => return resources[i as usize % resources.len()].clone(),
        };
        s.to_string()
    }
}

/// Keys of `kwargs` and of request members.
#[derive(Arbitrary, Debug, Clone)]
pub enum Key {
    Seed,
    Mask,
    Priority,
    Action,
    DtKey,
    Options,
    Word(Word),
    Other(String),
}

impl Key {
    fn text(&self, resources: &[String]) -> String {
        match self {
            Key::Seed => "seed".into(),
            Key::Mask => "mask".into(),
            Key::Priority => "priority".into(),
            Key::Action => "action".into(),
            Key::DtKey => "dt".into(),
            Key::Options => "options".into(),
            Key::Word(w) => w.text(resources),
            Key::Other(s) => s.clone(),
        }
    }
}

/// Array element types.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Dt {
    F32,
    F64,
    I64,
    U8,
    Bool,
    F32Big,
    I16Big,
    C64,
}

impl Dt {
    fn dtype(self) -> DType {
        let s = match self {
            Dt::F32 => "<f4",
            Dt::F64 => "<f8",
            Dt::I64 => "<i8",
            Dt::U8 => "|u1",
            Dt::Bool => "|b1",
            Dt::F32Big => ">f4",
            Dt::I16Big => ">i2",
            Dt::C64 => "<c8",
        };
        DType::parse(s).expect("dtype")
    }
}

/// A random value, biased towards what hosted methods accept.
#[derive(Arbitrary, Debug, Clone)]
pub enum Val {
    Null,
    Bool(bool),
    Small(i8),
    Int(i64),
    UInt(u64),
    Float(f64),
    Word(Word),
    Str(String),
    Bytes(Vec<u8>),
    /// A float32 vector.
    F32s(Vec<f32>),
    /// An array of any supported dtype: shape dims (each mod 5) and raw bytes
    /// (repeated or cut to fit).
    Array(Dt, Vec<u8>, Vec<u8>),
    List(Vec<Val>),
    Tuple(Vec<Val>),
    Dict(Vec<(Key, Val)>),
    ObjectArray(Vec<Val>),
}

impl Val {
    /// The value tree.
    pub fn build(&self, resources: &[String]) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Bool(b) => Value::Bool(*b),
            Val::Small(i) => Value::Int(*i as i64),
            Val::Int(i) => Value::Int(*i),
            Val::UInt(u) if *u > i64::MAX as u64 => Value::UInt(*u),
            Val::UInt(u) => Value::Int(*u as i64),
            Val::Float(f) => Value::Float(*f),
            Val::Word(w) => Value::Str(w.text(resources)),
            Val::Str(s) => Value::Str(s.clone()),
            Val::Bytes(b) => Value::bytes(b.clone()),
            Val::F32s(v) => Value::Array(NdArray::from_vec(v.clone())),
            Val::Array(dt, dims, data) => {
                let dtype = dt.dtype();
                let shape: Vec<usize> = dims.iter().take(4).map(|d| *d as usize % 5).collect();
                let n = shape.iter().product::<usize>() * dtype.itemsize();
                let bytes: Vec<u8> = if data.is_empty() {
                    vec![0; n]
                } else {
                    data.iter().copied().cycle().take(n).collect()
                };
                NdArray::from_bytes(dtype, shape, Bytes::from(bytes))
                    .map(Value::Array)
                    .unwrap_or(Value::Null)
            }
            Val::List(items) => Value::List(items.iter().map(|v| v.build(resources)).collect()),
            Val::Tuple(items) => Value::Tuple(items.iter().map(|v| v.build(resources)).collect()),
            Val::Dict(entries) => {
                let mut d = Dict::new();
                for (k, v) in entries {
                    d.insert(k.text(resources), v.build(resources));
                }
                Value::Dict(d)
            }
            Val::ObjectArray(items) => {
                let values: Vec<Value> = items.iter().map(|v| v.build(resources)).collect();
                unienv_remote::ObjectArray::new(vec![values.len()], values)
                    .map(Value::ObjectArray)
                    .unwrap_or(Value::Null)
            }
        }
    }
}

/// The `op` member.
#[derive(Arbitrary, Debug, Clone)]
pub enum OpName {
    Hello,
    Discover,
    Describe,
    Acquire,
    Release,
    Begin,
    Complete,
    Abort,
    Call,
    Subscribe,
    Unsubscribe,
    Other(String),
    NotAString(Val),
}

/// The `resource_id` member.
#[derive(Arbitrary, Debug, Clone)]
pub enum Res {
    Known(u8),
    Other(String),
    Value(Val),
    Missing,
}

/// A corruption of one correlation member.
#[derive(Arbitrary, Debug, Clone)]
pub enum Corruption {
    WrongSession(Val),
    NoSession,
    Version(Val),
    NoVersion,
    Type(Val),
    NoType,
    RequestId(Val),
    NoRequestId,
}

/// One request.
#[derive(Arbitrary, Debug, Clone)]
pub struct Req {
    pub op: OpName,
    pub resource: Res,
    /// Members besides the correlation ones.
    pub members: Vec<(Key, Val)>,
    /// A corruption is applied when this is at least 224 (one in eight).
    pub corrupt: u8,
    pub corruption: Corruption,
}

/// One message of a script.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    Request(Req),
    /// Arbitrary bytes as a frame.
    Raw(Vec<u8>),
    /// A valid envelope whose root is not a request dict.
    NotADict(Val),
}

/// The `max_message_size` of the opening hello.
#[derive(Arbitrary, Debug, Clone)]
pub enum HelloLimit {
    Absent,
    Bytes(u32),
    Value(Val),
}

/// One fuzz input: an optional opening hello, then up to 32 messages.
#[derive(Arbitrary, Debug, Clone)]
pub struct Script {
    pub hello: Option<HelloLimit>,
    pub steps: Vec<Step>,
}

// ---- the harness ----

/// The server's message limit in the harness (small enough to reach the
/// serialization-error paths with the fixture registry's large results).
pub const SERVER_LIMIT: usize = 1 << 20;
/// Longest wait for an answer before the server is declared hung.
pub const HANG: Duration = Duration::from_secs(10);
/// Most messages taken from one input.
pub const MAX_STEPS: usize = 32;

/// The per-process server.
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    server: Server,
    /// Every resource ID of the fixture registry (after `discover`).
    pub resources: Vec<String>,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

impl Harness {
    /// The process's harness, started on first use.
    pub fn get() -> &'static Harness {
        HARNESS.get_or_init(Harness::start)
    }

    fn start() -> Harness {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let config = ServerConfig {
            max_message_size: SERVER_LIMIT,
            idle_timeout: None,
            ..ServerConfig::default()
        };
        let mut builder = Server::builder(config);
        unienv_remote::fixtures::register(&mut builder).expect("fixtures");
        let server = builder.start().expect("a valid server configuration");
        let resources = runtime.block_on(async {
            let mut t = server.connect_memory();
            let codec = Codec::default();
            let mut ids = Vec::new();
            let hello = request("hello", None, Value::Null);
            t.send(Bytes::from(codec.encode(&Value::Dict(hello)).unwrap()))
                .await
                .unwrap();
            let r = codec.decode(t.recv().await.unwrap()).unwrap();
            let session = r.get("result").and_then(|r| r.get("session_id")).cloned();
            let discover = request("discover", None, session.unwrap_or_default());
            t.send(Bytes::from(codec.encode(&Value::Dict(discover)).unwrap()))
                .await
                .unwrap();
            let r = codec.decode(t.recv().await.unwrap()).unwrap();
            for d in r.get("result").and_then(Value::as_seq).unwrap_or(&[]) {
                if let Some(id) = d.get("id").and_then(Value::as_str) {
                    ids.push(id.to_string());
                }
            }
            ids
        });
        assert!(!resources.is_empty(), "discover found no resources");
        Harness {
            runtime,
            server,
            resources,
        }
    }

    /// Runs one fuzz input: frame mode when it starts with
    /// [`FRAME_MAGIC`], otherwise a structured [`Script`].
    pub fn run_input(&self, data: &[u8]) {
        if let Some(rest) = data.strip_prefix(FRAME_MAGIC) {
            let frames = split_frames(rest)
                .into_iter()
                .map(Outgoing::Frame)
                .collect();
            self.run_frames(frames);
        } else if let Ok(script) = Script::arbitrary_take_rest(arbitrary::Unstructured::new(data)) {
            self.run(&script);
        }
    }

    /// Runs one script on a fresh session and checks every answer.
    pub fn run(&self, script: &Script) {
        let mut frames = Vec::new();
        if let Some(limit) = &script.hello {
            let mut hello = request("hello", None, Value::Null);
            match limit {
                HelloLimit::Absent => {}
                HelloLimit::Bytes(n) => {
                    hello.insert("max_message_size", *n as i64);
                }
                HelloLimit::Value(v) => {
                    hello.insert("max_message_size", v.build(&self.resources));
                }
            }
            frames.push(Outgoing::Request(hello));
        }
        for (i, step) in script.steps.iter().take(MAX_STEPS).enumerate() {
            frames.push(match step {
                Step::Request(r) => Outgoing::Request(self.build(r, i)),
                Step::Raw(bytes) => Outgoing::Raw(bytes.clone()),
                Step::NotADict(v) => Outgoing::Value(v.build(&self.resources)),
            });
        }
        self.run_frames(frames);
    }

    fn run_frames(&self, frames: Vec<Outgoing>) {
        self.runtime.block_on(async {
            let mut session = Session {
                transport: self.server.connect_memory(),
                id: None,
                limit: SERVER_LIMIT,
            };
            for frame in frames {
                if !session.exchange(frame).await {
                    break;
                }
            }
            drop(session);
            // The session ends (and its domains are told to detach) before
            // the next input starts, so ownership does not leak across inputs.
            let deadline = Instant::now() + HANG;
            while self.server.session_count() > 0 {
                assert!(Instant::now() < deadline, "a closed session did not end");
                tokio::task::yield_now().await;
            }
        });
    }

    fn build(&self, r: &Req, index: usize) -> Dict {
        let resources = &self.resources;
        let op = match &r.op {
            OpName::Hello => Value::from("hello"),
            OpName::Discover => Value::from("discover"),
            OpName::Describe => Value::from("describe"),
            OpName::Acquire => Value::from("acquire"),
            OpName::Release => Value::from("release"),
            OpName::Begin => Value::from("begin"),
            OpName::Complete => Value::from("complete"),
            OpName::Abort => Value::from("abort"),
            OpName::Call => Value::from("call"),
            OpName::Subscribe => Value::from("subscribe"),
            OpName::Unsubscribe => Value::from("unsubscribe"),
            OpName::Other(s) => Value::from(s.as_str()),
            OpName::NotAString(v) => v.build(resources),
        };
        let mut d = Dict::new();
        d.insert("version", 1);
        d.insert("type", "request");
        d.insert("request_id", format!("q{index}"));
        // Filled in with the real session ID when sent.
        d.insert("session_id", Value::Null);
        d.insert("op", op);
        match &r.resource {
            Res::Known(i) => {
                d.insert(
                    "resource_id",
                    resources[*i as usize % resources.len()].as_str(),
                );
            }
            Res::Other(s) => {
                d.insert("resource_id", s.as_str());
            }
            Res::Value(v) => {
                d.insert("resource_id", v.build(resources));
            }
            Res::Missing => {}
        }
        for (k, v) in &r.members {
            d.insert(k.text(resources), v.build(resources));
        }
        if r.corrupt >= 224 {
            match &r.corruption {
                Corruption::WrongSession(v) => {
                    d.insert("session_id", v.build(resources));
                    d.insert("__keep_session", true);
                }
                Corruption::NoSession => {
                    d.remove("session_id");
                    d.insert("__keep_session", true);
                }
                Corruption::Version(v) => {
                    d.insert("version", v.build(resources));
                }
                Corruption::NoVersion => {
                    d.remove("version");
                }
                Corruption::Type(v) => {
                    d.insert("type", v.build(resources));
                }
                Corruption::NoType => {
                    d.remove("type");
                }
                Corruption::RequestId(v) => {
                    d.insert("request_id", v.build(resources));
                }
                Corruption::NoRequestId => {
                    d.remove("request_id");
                }
            }
        }
        defuse_slow_actions(&mut d);
        d
    }
}

/// The fixtures sleep 1.5 s when a step or set_next_action action is all
/// 99 (an empty array included), to test hung simulators. The fuzzer would
/// find that quickly and then crawl; such actions become 0.
fn defuse_slow_actions(d: &mut Dict) {
    let is_step = d.get("op").and_then(Value::as_str) == Some("call")
        && matches!(
            d.get("method").and_then(Value::as_str),
            Some("step" | "set_next_action")
        );
    if !is_step {
        return;
    }
    let slow = |v: &Value| match v {
        Value::Array(a) => a.to_f64_vec().iter().all(|&x| x == 99.0),
        Value::Bool(_) => false,
        other => other.as_f64() == Some(99.0),
    };
    if let Some(Value::List(a) | Value::Tuple(a)) = d.get_mut("args") {
        if let Some(first) = a.first_mut() {
            if slow(first) {
                *first = Value::Int(0);
            }
        }
    }
    if let Some(Value::Dict(k)) = d.get_mut("kwargs") {
        if let Some(action) = k.get_mut("action") {
            if slow(action) {
                *action = Value::Int(0);
            }
        }
    }
}

fn request(op: &str, resource: Option<&str>, session: Value) -> Dict {
    let mut d = Dict::new();
    d.insert("version", 1);
    d.insert("type", "request");
    d.insert("request_id", format!("h-{op}"));
    d.insert("session_id", session);
    d.insert("op", op);
    d.insert("resource_id", resource);
    d
}

enum Outgoing {
    Request(Dict),
    Raw(Vec<u8>),
    Value(Value),
    /// A frame of a frame-mode input: a request dict whose `session_id` is
    /// `"$SESSION"` gets the real one; anything else is sent as it is.
    Frame(Vec<u8>),
}

/// The magic prefix of frame-mode inputs.
pub const FRAME_MAGIC: &[u8] = b"ENV1";

/// A frame-mode input: [`FRAME_MAGIC`], then frames, each a 4-byte
/// big-endian length and that many bytes.
pub fn frames_input(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = FRAME_MAGIC.to_vec();
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

fn split_frames(mut data: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while data.len() >= 4 && frames.len() < MAX_STEPS {
        let n = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let n = n.min(data.len() - 4);
        frames.push(data[4..4 + n].to_vec());
        data = &data[4 + n..];
    }
    frames
}

struct Session {
    transport: MemoryTransport,
    id: Option<String>,
    limit: usize,
}

/// What the server must do with one frame.
enum Expect {
    /// Answer with this correlation `request_id` (null when absent).
    Answer(Value),
    /// Close the connection (an invalid envelope for this session).
    Close,
}

/// Room for what an error response adds to the members it echoes.
const ERROR_OVERHEAD: usize = 4096;

impl Session {
    /// Sends one frame and waits for its answer; false once the connection
    /// is closed (as it had to be).
    async fn exchange(&mut self, frame: Outgoing) -> bool {
        let wide = Codec::new(usize::MAX).expect("codec");
        let (bytes, request) = match frame {
            Outgoing::Request(mut d) => {
                if d.remove("__keep_session").is_none() {
                    d.insert("session_id", self.id.clone());
                }
                let v = Value::Dict(d);
                match wide.encode(&v) {
                    Ok(b) => (b, Some(v)),
                    // Too deep to encode: not a message anyone can send.
                    Err(_) => return true,
                }
            }
            Outgoing::Value(v) => match wide.encode(&v) {
                Ok(b) => (b, Some(v)),
                Err(_) => return true,
            },
            Outgoing::Raw(b) => (b, None),
            Outgoing::Frame(b) => match wide.decode(Bytes::from(b.clone())) {
                Ok(Value::Dict(mut d)) => {
                    if d.get("session_id").and_then(Value::as_str) == Some("$SESSION") {
                        d.insert("session_id", self.id.clone());
                    }
                    defuse_slow_actions(&mut d);
                    let v = Value::Dict(d);
                    match wide.encode(&v) {
                        Ok(b) => (b, Some(v)),
                        Err(_) => (b, None),
                    }
                }
                _ => (b, None),
            },
        };
        if std::env::var_os("UNIENV_FUZZ_TRACE").is_some() {
            eprintln!(
                "-> {} bytes, limit {}: {request:?}",
                bytes.len(),
                self.limit
            );
        }
        let codec = Codec::new(self.limit).expect("limit");
        let len = bytes.len();
        let expect = match codec.decode(Bytes::from(bytes.clone())) {
            Err(_) => Expect::Close,
            Ok(v) => {
                if let Some(sent) = &request {
                    if let Err(path) = same(sent, &v, "$") {
                        panic!("a request changed in transit at {path}");
                    }
                }
                Expect::Answer(match &v {
                    Value::Dict(d) => d.get("request_id").cloned().unwrap_or_default(),
                    _ => Value::Null,
                })
            }
        };
        // An answer that cannot be encoded even as an error closes the
        // session; that is allowed only when the limit leaves no room.
        // For a hello, the limit it asks for applies to its own answer.
        let mut answer_limit = self.limit;
        if let Some(Value::Dict(d)) = &request {
            if d.get("op").and_then(Value::as_str) == Some("hello") {
                if let Some(asked @ (Value::Int(_) | Value::UInt(_))) = d.get("max_message_size") {
                    let asked = asked.as_u64().unwrap_or(0).min(usize::MAX as u64) as usize;
                    answer_limit = answer_limit.min(asked);
                }
            }
        }
        let may_close = answer_limit < len + ERROR_OVERHEAD;
        if self.transport.send(Bytes::from(bytes)).await.is_err() {
            assert!(
                matches!(expect, Expect::Close) || may_close,
                "the server closed the connection without cause"
            );
            return false;
        }
        loop {
            let frame = match tokio::time::timeout(HANG, self.transport.recv()).await {
                Err(_) => panic!("no answer within {HANG:?}: the server hung"),
                Ok(Err(TransportError::Closed)) => {
                    assert!(
                        matches!(expect, Expect::Close) || may_close,
                        "the server closed the connection instead of answering {request:?}"
                    );
                    return false;
                }
                Ok(Err(e)) => panic!("transport error {e}"),
                Ok(Ok(f)) => f,
            };
            assert!(
                frame.len() <= self.limit,
                "the server sent {} bytes over the session limit {}",
                frame.len(),
                self.limit
            );
            let message = codec
                .decode(frame.clone())
                .unwrap_or_else(|e| panic!("the server sent an invalid envelope: {e}: {frame:?}"));
            let Value::Dict(m) = message else {
                panic!("the server sent a non-dict message");
            };
            assert_eq!(m.get("version"), Some(&Value::Int(1)));
            if let Some(id) = &self.id {
                assert_eq!(
                    m.get("session_id").and_then(Value::as_str),
                    Some(id.as_str()),
                    "a message for another session"
                );
            }
            let kind = m.get("type").and_then(Value::as_str).unwrap_or_default();
            match kind {
                "snapshot" => {
                    assert!(m.get("subscription_id").and_then(Value::as_str).is_some());
                    assert!(m.get("data").is_some_and(|d| d.as_dict().is_some()));
                    continue;
                }
                "subscription_error" => {
                    assert_eq!(
                        m.get("error")
                            .and_then(|e| e.get("code"))
                            .and_then(Value::as_str),
                        Some("snapshot_error")
                    );
                    continue;
                }
                "response" | "error" => {}
                other => panic!("unknown message type {other:?}"),
            }
            let Expect::Answer(expected_id) = &expect else {
                panic!("an invalid envelope was answered instead of closing: {m:?}");
            };
            let got_id = m.get("request_id").cloned().unwrap_or(Value::Bool(false));
            if let Err(path) = same(expected_id, &got_id, "request_id") {
                panic!("answer for another request ({path}): expected {expected_id:?}, got {m:?}");
            }
            if kind == "error" {
                let e = m.get("error").and_then(Value::as_dict).expect("error dict");
                let code = e.get("code").and_then(Value::as_str).expect("code");
                assert!(
                    unienv_remote::protocol::ErrorCode::new(code).is_known(),
                    "unknown error code {code}"
                );
                assert!(e.get("message").and_then(Value::as_str).is_some());
                assert!(e.get("uncertain").and_then(Value::as_bool).is_some());
                // A hello that was accepted but whose answer does not fit the
                // limit it asked for (as in the reference): the session is
                // ready with that limit, and the error carries its ID.
                let hello = request.as_ref().filter(|r| {
                    r.get("op").and_then(Value::as_str) == Some("hello") && self.id.is_none()
                });
                if let (Some(hello), "serialization_error") = (hello, code) {
                    let asked = hello
                        .get("max_message_size")
                        .and_then(Value::as_u64)
                        .map_or(SERVER_LIMIT, |a| (a as usize).min(SERVER_LIMIT));
                    self.id = m
                        .get("session_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    assert!(
                        self.id.is_some(),
                        "the accepted hello's error names no session"
                    );
                    self.limit = asked;
                }
            } else {
                let result = m.get("result").expect("result");
                let is_hello = request
                    .as_ref()
                    .and_then(|r| r.get("op"))
                    .and_then(Value::as_str)
                    == Some("hello");
                if is_hello {
                    let id = result
                        .get("session_id")
                        .and_then(Value::as_str)
                        .expect("session_id");
                    assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()));
                    self.id = Some(id.to_string());
                    let limit = result
                        .get("max_message_size")
                        .and_then(Value::as_u64)
                        .expect("max_message_size") as usize;
                    assert!((8..=SERVER_LIMIT).contains(&limit));
                    self.limit = limit;
                }
            }
            return true;
        }
    }
}

// ---- hand-made seeds ----

fn seed_request(op: &str, resource: Option<&str>, members: &[(&str, Value)]) -> Vec<u8> {
    let mut d = request(op, resource, Value::from("$SESSION"));
    d.insert("request_id", format!("seed-{op}"));
    for (k, v) in members {
        d.insert(*k, v.clone());
    }
    Codec::default()
        .encode(&Value::Dict(d))
        .expect("seed request")
}

fn f32s(v: &[f32]) -> Value {
    Value::Array(NdArray::from_vec(v.to_vec()))
}

fn call(resource: &str, method: &str, args: Vec<Value>, kwargs: Dict, op: Option<&str>) -> Vec<u8> {
    seed_request(
        "call",
        Some(resource),
        &[
            ("method", Value::from(method)),
            ("args", Value::Tuple(args)),
            ("kwargs", Value::Dict(kwargs)),
            ("operation_id", Value::from(op)),
        ],
    )
}

fn seed(n: i64) -> Dict {
    let mut d = Dict::new();
    d.insert("seed", n);
    d
}

/// The hand-made seeds of the `requests` target (frame-mode inputs), by
/// file name: one session each, covering every op on every kind.
pub fn request_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let hello = seed_request("hello", None, &[]);
    let op = |id: &str| Value::from(id);
    let kind = |k: &str| Value::from(k);
    vec![
        (
            "env_mode",
            frames_input(&[
                hello.clone(),
                seed_request("discover", None, &[]),
                seed_request("describe", Some("counter"), &[]),
                seed_request(
                    "subscribe",
                    Some("counter"),
                    &[("subscription_id", Value::from("s1"))],
                ),
                call("counter", "reset", vec![], seed(1), Some("e1")),
                call(
                    "counter",
                    "step",
                    vec![f32s(&[1.0, 2.0])],
                    Dict::new(),
                    Some("e2"),
                ),
                call("counter", "render", vec![], Dict::new(), Some("e3")),
                seed_request(
                    "unsubscribe",
                    Some("counter"),
                    &[("subscription_id", Value::from("s1"))],
                ),
                seed_request("release", Some("counter"), &[]),
            ]),
        ),
        (
            "components",
            frames_input(&[
                hello.clone(),
                seed_request("acquire", Some("arm"), &[("mode", kind("components"))]),
                seed_request(
                    "begin",
                    Some("arm"),
                    &[("kind", kind("reset")), ("operation_id", op("o1"))],
                ),
                call("arm", "reset", vec![], seed(2), Some("o1")),
                seed_request("complete", Some("arm"), &[("operation_id", op("o1"))]),
                seed_request(
                    "begin",
                    Some("arm"),
                    &[("kind", kind("step")), ("operation_id", op("o2"))],
                ),
                call(
                    "arm",
                    "set_next_action",
                    vec![f32s(&[1.0])],
                    Dict::new(),
                    Some("o2"),
                ),
                call(
                    "arm",
                    "post_environment_step",
                    vec![Value::Float(0.1)],
                    Dict::new(),
                    Some("o2"),
                ),
                call("arm", "get_observation", vec![], Dict::new(), Some("o2")),
                seed_request("complete", Some("arm"), &[("operation_id", op("o2"))]),
                seed_request(
                    "begin",
                    Some("arm"),
                    &[("kind", kind("step")), ("operation_id", op("o3"))],
                ),
                seed_request("abort", Some("arm"), &[("operation_id", op("o3"))]),
            ]),
        ),
        (
            "world",
            frames_input(&[
                hello.clone(),
                seed_request(
                    "subscribe",
                    Some("composed/world"),
                    &[("subscription_id", Value::from("w"))],
                ),
                seed_request(
                    "begin",
                    Some("composed/world"),
                    &[("kind", kind("reset")), ("operation_id", op("o1"))],
                ),
                call("composed/world", "reset", vec![], seed(0), Some("o1")),
                call("composed/node", "reset", vec![], seed(0), Some("o1")),
                call(
                    "composed/world",
                    "after_reset",
                    vec![],
                    Dict::new(),
                    Some("o1"),
                ),
                seed_request(
                    "complete",
                    Some("composed/world"),
                    &[("operation_id", op("o1"))],
                ),
                seed_request(
                    "begin",
                    Some("composed/world"),
                    &[("kind", kind("step")), ("operation_id", op("o2"))],
                ),
                call("composed/world", "step", vec![], Dict::new(), Some("o2")),
                seed_request(
                    "complete",
                    Some("composed/world"),
                    &[("operation_id", op("o2"))],
                ),
            ]),
        ),
        (
            "limits",
            frames_input(&[
                seed_request("hello", None, &[("max_message_size", Value::Int(4096))]),
                call("large_render", "reset", vec![], Dict::new(), Some("e1")),
                call("large_render", "render", vec![], Dict::new(), Some("e2")),
                call("large_info", "reset", vec![], Dict::new(), Some("e3")),
                call(
                    "large_info",
                    "step",
                    vec![f32s(&[1.0, 1.0])],
                    Dict::new(),
                    Some("e4"),
                ),
                call("broken_render", "render", vec![], Dict::new(), Some("e5")),
                seed_request("describe", Some("lazy"), &[]),
                seed_request("describe", Some("lazy_composed/node"), &[]),
            ]),
        ),
        (
            "malformed",
            frames_input(&[
                call("counter", "reset", vec![], Dict::new(), Some("e0")),
                hello.clone(),
                hello,
                seed_request("explode", Some("counter"), &[]),
                seed_request("describe", Some("nowhere"), &[]),
                seed_request("describe", None, &[]),
                call("counter", "step", vec![], Dict::new(), None),
                call("counter", "__init__", vec![], Dict::new(), Some("e1")),
                seed_request("begin", Some("counter"), &[("kind", kind("dance"))]),
                seed_request("acquire", Some("arm"), &[("mode", kind("env"))]),
                b"\x00\x00\x00\x02{}".to_vec(),
                Vec::new(),
            ]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    /// Regenerates `seeds/requests/` (run with `--ignored`).
    #[test]
    #[ignore]
    fn write_request_seeds() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/requests");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in super::request_seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}
