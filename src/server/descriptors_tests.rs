//! Responses written with the kept descriptor texts are the plain
//! encoding's bytes: many responses of a domain of three resources whose
//! sequences and revisions cross every digit-count change, whose
//! descriptors are rebuilt now and then, with and without boundary
//! snapshots, as calls and as boundaries, and at the size limit's edges.

use super::super::call::encode_response;
use super::super::hosted::{Addr, Attrs, ResourceMeta};
use super::super::outbound::SessionShared;
use super::{DescriptorCache, Stamp};
use crate::budget::{Account, Pool};
use crate::codec::{Dict, NdArray, Value};
use crate::protocol::ResourceKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn meta(id: &str, kind: ResourceKind, index: usize) -> ResourceMeta {
    ResourceMeta {
        id: id.to_string(),
        kind,
        addr: Addr::Foreign(index),
        world_id: Some("world".to_string()),
        node_id: (kind == ResourceKind::Node).then(|| id.to_string()),
        children: if index == 0 {
            vec![("arm é".to_string(), "arm".to_string())]
        } else {
            Vec::new()
        },
    }
}

/// A foreign host's members for resource `index` at version `version`.
fn members(index: usize, version: u64) -> Dict {
    let low = Value::list([Value::Float(-2.0), Value::Float(f64::NEG_INFINITY)]);
    let space = Dict::new()
        .with("type", "box")
        .with("shape", Value::tuple([2i64]))
        .with("low", low)
        .with(
            "high",
            Value::list([Value::Float(0.1), Value::Float(1e300)]),
        )
        .with("dtype", "float32");
    let mut d = Dict::new()
        .with("render_mode", "rgb_array")
        .with("render_fps", version as i64)
        .with(
            "metadata",
            Dict::new().with("note", format!("v{version} \"q\"\n")),
        )
        .with("action_space", space.clone())
        .with("observation_space", space)
        .with("operations", Value::list(["render", "reset", "step"]));
    if index == 1 && version % 3 == 2 {
        // A host's own `snapshot` member (the cache strips it on return).
        d.insert("snapshot", Dict::new().with("own", 1i64));
    }
    d
}

fn session(max: usize) -> Arc<SessionShared> {
    let pool = Pool::new(1 << 30);
    let metrics = Arc::new(crate::metrics::Metrics::new(None));
    let s = SessionShared::new(
        Arc::from("session-1"),
        max,
        Account::new(pool, 1 << 30),
        metrics,
        None,
    );
    s.max_message_size.store(max, Ordering::Relaxed);
    s
}

fn snapshot(sequence: u64, bytes: usize) -> Dict {
    Dict::new()
        .with("sequence", sequence)
        .with("revision", 1u64)
        .with("fields", Value::list(["observation"]))
        .with(
            "data",
            Dict::new().with("observation", NdArray::from_vec(vec![7u8; bytes])),
        )
}

/// The sequence numbers stamped at each step: through 9→10, 99→100,
/// 999→1000 and the largest ones.
fn sequences() -> Vec<u64> {
    let mut s: Vec<u64> = (0..14).collect();
    s.extend(95..106);
    s.extend(995..1006);
    s.extend([65_535, 65_536, 99_999, 100_000]);
    s.extend(u64::MAX - 3..=u64::MAX);
    s.extend(0..20);
    s
}

#[test]
fn responses_with_kept_texts_are_the_plain_bytes() {
    let metas = [
        meta("world", ResourceKind::World, 0),
        meta("env-0", ResourceKind::Env, 1),
        meta("arm", ResourceKind::Node, 2),
    ];
    let count = metas.len();
    let mut cache = DescriptorCache::default();
    let mut versions = [0u64; 3];
    let request = Dict::new()
        .with("request_id", "r-1")
        .with("resource_id", "env-0")
        .with("operation_id", Value::Null);
    let big = session(64 << 20);
    let (mut responses, mut kept_used, mut limits) = (0, 0, 0);
    for (step, sequence) in sequences().into_iter().enumerate() {
        let revision = [0u64, 9, 10, 99, 100][(step / 13) % 5];
        for (i, m) in metas.iter().enumerate() {
            // Resource i's attributes change every 7 steps (offset by i);
            // otherwise they are reported unchanged or not at all.
            if step % 7 == i {
                versions[i] += 1;
            }
            let attrs = if step % 7 == i || step % 2 == 0 || !cache.is_cached(i) {
                Some(Attrs::Raw(Box::new(members(i, versions[i]))))
            } else {
                None
            };
            let stamp = Stamp {
                domain_id: "world",
                revision,
                sequence,
            };
            cache.refresh(i, count, m, attrs, stamp);
        }
        let mut descriptors = cache.take();
        cache.keep_texts(&descriptors);
        // Boundary snapshots (one with an attachment) on some steps.
        if step % 3 == 0 {
            if let Some(d) = descriptors[2].as_dict_mut() {
                d.insert("snapshot", snapshot(sequence, 40));
            }
        }
        if step % 5 == 0 {
            if let Some(d) = descriptors[0].as_dict_mut() {
                d.insert("snapshot", snapshot(sequence, 3000));
            }
        }
        let result = if step % 2 == 0 {
            let value = Value::tuple([
                Value::Array(NdArray::from_vec(vec![0.5f32; 3])),
                Value::Float(-1.25),
                Value::Bool(false),
            ]);
            Value::Dict(
                Dict::new()
                    .with("value", value)
                    .with("descriptors", Value::List(descriptors)),
            )
        } else {
            Value::List(descriptors)
        };
        let texts = cache.texts();
        kept_used += usize::from(texts.iter().any(Option::is_some));
        let encode = |session: &SessionShared, result: &Value, kept: bool| {
            let mut r = result.clone();
            let texts = if kept { &texts[..] } else { &[] };
            encode_response(session, &request, &mut r, texts)
        };
        let plain = encode(&big, &result, false).unwrap();
        let kept = encode(&big, &result, true).unwrap();
        assert!(kept == plain, "step {step}: the bytes differ");
        responses += 1;
        // The limit's edges: the whole message and the message without its
        // boundary snapshots (what the retry sends), and a byte less.
        let bare = encode(&big, &without_snapshots(&result), false).unwrap();
        for max in [plain.len(), plain.len() - 1, bare.len(), bare.len() - 1] {
            let s = session(max);
            let (plain, kept) = (encode(&s, &result, false), encode(&s, &result, true));
            assert!(plain == kept, "step {step} max {max}: the outcomes differ");
            limits += 1;
        }
        let Value::List(back) = (match result {
            Value::Dict(mut d) => d.remove("descriptors").unwrap_or_default(),
            list => list,
        }) else {
            unreachable!()
        };
        cache.restore(back, count);
    }
    assert_eq!(limits, 4 * responses);
    // Most responses wrote kept texts (each build's second use onwards).
    assert!(kept_used * 10 > responses * 8, "{kept_used} of {responses}");
}

/// `result` with no boundary snapshot in its descriptors.
fn without_snapshots(result: &Value) -> Value {
    let mut r = result.clone();
    let list = match &mut r {
        Value::Dict(d) => d.get_mut("descriptors"),
        list => Some(list),
    };
    if let Some(Value::List(list)) = list {
        for d in list {
            if let Some(d) = d.as_dict_mut() {
                d.remove("snapshot");
            }
        }
    }
    r
}
