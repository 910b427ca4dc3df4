//! A raw protocol client for server tests: builds request dicts by hand and
//! reads every message, so tests can check exactly what goes over the wire.
#![allow(dead_code)]

use bytes::Bytes;
use std::time::Duration;
use unienv_remote::transport::MemoryTransport;
use unienv_remote::{Codec, Dict, Value};

pub struct Raw {
    pub transport: MemoryTransport,
    pub codec: Codec,
    pub session: Option<String>,
    next: u64,
    /// Snapshots received while waiting for responses.
    pub events: Vec<Dict>,
}

/// `dict!`-like helper for request fields.
pub fn fields(pairs: &[(&str, Value)]) -> Dict {
    let mut d = Dict::new();
    for (k, v) in pairs {
        d.insert(*k, v.clone());
    }
    d
}

impl Raw {
    pub fn new(transport: MemoryTransport) -> Raw {
        Raw {
            transport,
            codec: Codec::default(),
            session: None,
            next: 0,
            events: Vec::new(),
        }
    }

    /// Connects in memory and completes hello.
    pub async fn connect(server: &unienv_remote::server::Server) -> Raw {
        let mut raw = Raw::new(server.connect_memory());
        let hello = raw.hello(None).await;
        assert_eq!(
            hello.get("type").and_then(Value::as_str),
            Some("response"),
            "{hello:?}"
        );
        raw
    }

    pub async fn send_value(&mut self, v: &Value) {
        let bytes = self.codec.encode(v).expect("encode");
        self.transport.send(Bytes::from(bytes)).await.expect("send");
    }

    pub async fn send_raw(&mut self, bytes: Vec<u8>) {
        self.transport.send(Bytes::from(bytes)).await.expect("send");
    }

    /// The next message of any kind.
    pub async fn recv(&mut self) -> Option<Dict> {
        let frame = tokio::time::timeout(Duration::from_secs(10), self.transport.recv())
            .await
            .expect("a message within 10 s")
            .ok()?;
        match self.codec.decode(frame).expect("decode") {
            Value::Dict(d) => Some(d),
            other => panic!("not a dict: {other:?}"),
        }
    }

    /// Builds a request dict with fresh correlation members.
    pub fn request(&mut self, op: &str, resource: Option<&str>, extra: Dict) -> Dict {
        self.next += 1;
        let mut d = Dict::new();
        d.insert("version", 1);
        d.insert("type", "request");
        d.insert("request_id", format!("r{}", self.next));
        d.insert("session_id", self.session.clone());
        d.insert("op", op);
        d.insert("resource_id", resource.map(str::to_string));
        for (k, v) in extra {
            d.insert(k, v);
        }
        d
    }

    /// Sends a request and waits for its response or error, keeping
    /// snapshot events aside.
    pub async fn call_raw(&mut self, request: Dict) -> Dict {
        let id = request.get("request_id").cloned();
        self.send_value(&Value::Dict(request)).await;
        loop {
            let msg = self.recv().await.expect("connection closed while waiting");
            match msg.get("type").and_then(Value::as_str) {
                Some("snapshot") | Some("subscription_error") => self.events.push(msg),
                _ => {
                    assert_eq!(
                        msg.get("request_id").cloned(),
                        id,
                        "response for another request: {msg:?}"
                    );
                    return msg;
                }
            }
        }
    }

    pub async fn op(&mut self, op: &str, resource: Option<&str>, extra: Dict) -> Dict {
        let r = self.request(op, resource, extra);
        self.call_raw(r).await
    }

    pub async fn hello(&mut self, max: Option<i64>) -> Dict {
        let extra = match max {
            Some(m) => fields(&[("max_message_size", Value::Int(m))]),
            None => Dict::new(),
        };
        let r = self.op("hello", None, extra).await;
        if let Some(result) = r.get("result") {
            self.session = result
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_string);
            let limit = result
                .get("max_message_size")
                .and_then(Value::as_u64)
                .unwrap_or(64 << 20);
            self.codec = Codec::new(limit as usize).unwrap_or_default();
        }
        r
    }

    /// A `call` with positional and keyword arguments.
    pub async fn call(
        &mut self,
        resource: &str,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
        operation: Option<&str>,
    ) -> Dict {
        let extra = fields(&[
            ("method", Value::from(method)),
            ("args", Value::Tuple(args)),
            ("kwargs", Value::Dict(kwargs)),
            ("operation_id", Value::from(operation.map(str::to_string))),
        ]);
        self.op("call", Some(resource), extra).await
    }

    /// An env call with a fresh operation ID, as the reference client sends it.
    pub async fn env_call(
        &mut self,
        resource: &str,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> Dict {
        self.next += 1;
        let op = format!("envop{}", self.next);
        self.call(resource, method, args, kwargs, Some(&op)).await
    }

    pub async fn begin(&mut self, resource: &str, kind: &str, operation: &str) -> Dict {
        self.op(
            "begin",
            Some(resource),
            fields(&[
                ("kind", Value::from(kind)),
                ("operation_id", Value::from(operation)),
            ]),
        )
        .await
    }

    pub async fn finish(&mut self, op: &str, resource: &str, operation: &str) -> Dict {
        self.op(
            op,
            Some(resource),
            fields(&[("operation_id", Value::from(operation))]),
        )
        .await
    }
}

/// The error code of an error message (panics on a success).
pub fn code(msg: &Dict) -> String {
    assert_eq!(
        msg.get("type").and_then(Value::as_str),
        Some("error"),
        "expected an error: {msg:?}"
    );
    msg.get("error")
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Whether an error message says the outcome is uncertain.
pub fn uncertain(msg: &Dict) -> bool {
    msg.get("error")
        .and_then(|e| e.get("uncertain"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The result of a response (panics on an error).
pub fn result(msg: &Dict) -> Value {
    assert_eq!(
        msg.get("type").and_then(Value::as_str),
        Some("response"),
        "expected a response: {msg:?}"
    );
    msg.get("result").cloned().unwrap_or_default()
}
