//! The kept request decodes exactly as the general decoder does.

use super::*;
use crate::codec::{Codec, Dict, NdArray, Value};
use crate::protocol::request_head;

const MAX: usize = 1 << 20;

/// A call request as our clients encode it (`client::template`'s plain
/// encoding): the head, then `method`, `args`, `kwargs`, `operation_id`.
fn call(request_id: &str, operation_id: &Value, args: Vec<Value>, kwargs: Dict) -> Bytes {
    call_on("env", request_id, operation_id, args, kwargs)
}

/// [`call`] on resource `resource`.
fn call_on(
    resource: &str,
    request_id: &str,
    operation_id: &Value,
    args: Vec<Value>,
    kwargs: Dict,
) -> Bytes {
    let head = request_head(
        "call",
        Value::from(request_id),
        Value::from("5e55105e55105e55105e55105e55105e"),
        Some(resource),
    );
    let method = Value::from("step");
    let args = Value::Tuple(args);
    let kwargs = Value::Dict(kwargs);
    let mut entries: Vec<(&str, &Value)> = head.iter().map(|(k, v)| (*k, v)).collect();
    entries.extend([
        ("method", &method),
        ("args", &args),
        ("kwargs", &kwargs),
        ("operation_id", operation_id),
    ]);
    Bytes::from(Codec::new(MAX).unwrap().encode_entries(&entries).unwrap())
}

fn action(values: &[f32]) -> Value {
    Value::Array(NdArray::from_vec(values.to_vec()))
}

/// Decodes with the template and with the general decoder; both must
/// agree bit for bit (same tree, same variants and bytes, same estimate,
/// or the same error). Returns whether the kept tree was used.
fn agree(t: &mut RequestTemplate, frame: &Bytes, max_message: usize, max_tree: usize) -> bool {
    let hit = t.reuse(frame, max_message, max_tree).is_some();
    let plain = decode(frame.clone(), max_message, max_tree);
    let kept = t.decode(frame.clone(), max_message, max_tree);
    match (&plain, &kept) {
        (Ok((a, na)), Ok((b, nb))) => {
            assert_eq!(na, nb, "tree estimate");
            assert!(a == b, "{a:?} != {b:?}");
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
            same_attachments(a, b, frame);
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("{plain:?} against {kept:?}"),
    }
    hit
}

/// Every attachment of both trees is the same slice of `frame` (zero copy,
/// the same bytes).
fn same_attachments(a: &Value, b: &Value, frame: &Bytes) {
    let inside = |p: *const u8, n: usize| {
        let base = frame.as_ptr() as usize;
        n == 0 || (p as usize >= base && p as usize + n <= base + frame.len())
    };
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.as_bytes().as_ptr(), y.as_bytes().as_ptr());
            assert!(inside(y.as_bytes().as_ptr(), y.as_bytes().len()));
        }
        (Value::Bytes(x), Value::Bytes(y)) => {
            assert_eq!(x.as_ptr(), y.as_ptr());
            assert!(inside(y.as_ptr(), y.len()));
        }
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            for (x, y) in x.iter().zip(y) {
                same_attachments(x, y, frame);
            }
        }
        (Value::Dict(x), Value::Dict(y)) => {
            for ((_, x), (_, y)) in x.iter().zip(y.iter()) {
                same_attachments(x, y, frame);
            }
        }
        _ => {}
    }
}

#[test]
fn steps_after_the_first_come_from_the_kept_tree_and_equal_the_decoders() {
    let mut t = RequestTemplate::default();
    let op = |i: u64| Value::from(format!("{i:032x}"));
    let first = call("1", &op(1), vec![action(&[0.5])], Dict::new());
    assert!(!agree(&mut t, &first, MAX, MAX), "nothing kept yet");
    for i in 2..600u64 {
        let f = (i as f32).sin();
        let frame = call(
            &format!("{i:x}"),
            &op(i * 7919),
            vec![action(&[f])],
            Dict::new(),
        );
        assert!(
            agree(&mut t, &frame, MAX, MAX),
            "request {i} not from the kept tree"
        );
    }
    // IDs of other lengths, empty: plain texts. Non-ASCII ones are written
    // as `\u` escapes (as Python's json module writes them): decoded.
    for (r, o, kept) in [
        ("", "", true),
        ("ffffffffffffffff", "x", true),
        ("é", "∂-op", false),
        ("a b", "", true),
    ] {
        let frame = call(r, &Value::from(o), vec![action(&[1.0])], Dict::new());
        assert_eq!(agree(&mut t, &frame, MAX, MAX), kept, "{r:?} {o:?}");
    }
}

#[test]
fn other_requests_are_decoded_as_before_and_may_be_kept_next() {
    let mut t = RequestTemplate::default();
    let op = Value::from("0123");
    let step = |r: &str, a: &[f32]| call(r, &op, vec![action(a)], Dict::new());
    agree(&mut t, &step("1", &[0.0]), MAX, MAX);
    // Escapes in an ID, an operation ID that is not a string: decoded.
    let escaped = call("a\"b\\c\n", &op, vec![action(&[0.0])], Dict::new());
    assert!(!agree(&mut t, &escaped, MAX, MAX));
    assert!(!agree(
        &mut t,
        &call("2", &Value::Null, vec![action(&[0.0])], Dict::new()),
        MAX,
        MAX
    ));
    agree(&mut t, &step("3", &[0.0]), MAX, MAX);
    assert!(agree(&mut t, &step("4", &[1.0]), MAX, MAX));
    // A longer action (another header and attachment length): decoded.
    assert!(!agree(&mut t, &step("5", &[0.0, 1.0]), MAX, MAX));
    assert!(agree(&mut t, &step("6", &[2.0, 3.0]), MAX, MAX));
    // Keywords, two arrays, bytes, nested containers: kept and re-sliced
    // in order.
    let mut kwargs = Dict::new();
    kwargs.insert("mask", Value::Bytes(Bytes::from_static(b"\x01\x00")));
    kwargs.insert(
        "nested",
        Value::List(vec![action(&[4.0]), Value::from(1.5)]),
    );
    let rich = |r: &str, x: f32| {
        call(
            r,
            &op,
            vec![action(&[x, x]), action(&[x; 3])],
            kwargs.clone(),
        )
    };
    agree(&mut t, &rich("7", 0.0), MAX, MAX);
    for i in 8..40 {
        assert!(agree(&mut t, &rich(&i.to_string(), i as f32), MAX, MAX));
    }
    // Limits: a smaller message limit or tree budget fails as the decoder does.
    let frame = rich("99", 1.0);
    assert!(!agree(&mut t, &frame, frame.len() - 1, MAX));
    let (_, bytes) = decode(frame.clone(), MAX, MAX).unwrap();
    assert!(!agree(&mut t, &frame, MAX, bytes - 1));
    assert!(agree(&mut t, &frame, MAX, bytes));
    // Large frames are never kept.
    let big = step("1", &vec![0.0; KEEP_MAX_FRAME]);
    agree(&mut t, &big, MAX, MAX);
    assert!(!agree(
        &mut t,
        &step("2", &vec![1.0; KEEP_MAX_FRAME]),
        MAX,
        MAX
    ));
}

/// Every one-byte change of a kept request's frame (each header position
/// set to each of a few bytes that matter to JSON, and truncations) decodes
/// as the general decoder decodes it, whether or not the kept tree is used.
#[test]
fn mutated_frames_agree_with_the_decoder() {
    let op = Value::from("00ff");
    let mut kwargs = Dict::new();
    kwargs.insert("k", Value::Bytes(Bytes::from_static(b"xyz")));
    let base = call("1a", &op, vec![action(&[0.25, -1.0])], kwargs);
    let header_len = u32::from_be_bytes([base[0], base[1], base[2], base[3]]) as usize;
    let mut hits = 0;
    let mut total = 0;
    for at in 4..base.len() {
        for b in [
            b'"', b'\\', b'x', b'0', b',', b']', b'}', b'[', 0x01, 0xc3, 0xa9, b' ',
        ] {
            let mut t = RequestTemplate::default();
            agree(&mut t, &base, MAX, MAX);
            let mut bytes = base.to_vec();
            bytes[at] = b;
            hits += usize::from(agree(&mut t, &Bytes::from(bytes), MAX, MAX));
            total += 1;
        }
    }
    for cut in 0..base.len() {
        let mut t = RequestTemplate::default();
        agree(&mut t, &base, MAX, MAX);
        agree(&mut t, &base.slice(..cut), MAX, MAX);
    }
    // Changed header lengths with a header to match: an ID one longer.
    let mut t = RequestTemplate::default();
    agree(&mut t, &base, MAX, MAX);
    let mut longer = base[4..4 + header_len].to_vec();
    let at = PREFIX.len();
    longer.insert(at, b'7');
    let mut frame = ((header_len + 1) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&longer);
    frame.extend_from_slice(&base[4 + header_len..]);
    assert!(agree(&mut t, &Bytes::from(frame), MAX, MAX));
    // Some mutations (inside the IDs and the attachments) are reused, most
    // are not: both kinds were compared.
    assert!(hits > 10 && hits < total / 2, "{hits} of {total}");
}

/// A vector env's connection steps one resource per env in turn: each
/// resource's requests come from its own kept tree, up to the capacity;
/// past it, requests are decoded (and still agree).
#[test]
fn a_connection_stepping_many_resources_keeps_one_tree_each() {
    let mut t = RequestTemplate::default();
    let op = Value::from("abc");
    let resources: Vec<String> = (0..CAPACITY + 4).map(|i| format!("pendulum{i}")).collect();
    for round in 0..5u32 {
        for (i, r) in resources.iter().enumerate() {
            let id = format!("{round}-{i}");
            let frame = call_on(r, &id, &op, vec![action(&[round as f32])], Dict::new());
            let hit = agree(&mut t, &frame, MAX, MAX);
            assert_eq!(hit, round > 0 && i < CAPACITY, "round {round}, {r}");
        }
    }
    assert_eq!(t.kept.len(), CAPACITY);
}

/// The kept requests are charged to the session's account while kept, and
/// given back with the template; an account that cannot hold them (with
/// room to spare: at most half its cap) leaves every frame to the general
/// decoder, with the same results.
#[test]
fn kept_requests_are_charged_to_the_account_and_given_back() {
    use crate::budget::{Account, Pool};
    use std::sync::Arc;
    // As the session's: charged within half the account's cap.
    let charged = |account: Arc<Account>| {
        RequestTemplate::reserving(Box::new(move |n| {
            let held: Held = Box::new(account.charge_within_half(n).ok()?);
            Some(held)
        }))
    };
    let op = |i: u64| Value::from(format!("{i:032x}"));
    let steps = |resources: usize| {
        (1..40u64).map(move |i| {
            call_on(
                &format!("env{}", i as usize % resources),
                &format!("{i:x}"),
                &op(i),
                vec![action(&[i as f32; 3])],
                Dict::new(),
            )
        })
    };
    // Room for everything: every resource's request kept and charged.
    let pool = Pool::new(usize::MAX);
    let account = Account::new(pool.clone(), 1 << 30);
    let mut t = charged(account.clone());
    let hits = steps(3).filter(|f| agree(&mut t, f, MAX, MAX)).count();
    assert_eq!(
        hits,
        39 - 3,
        "each resource's first request decoded, then kept"
    );
    assert_eq!(t.kept.len(), 3);
    let kept = t.kept_bytes();
    assert!(kept > 3 * 200, "{kept} bytes for 3 kept requests");
    assert_eq!(account.held(), kept);
    drop(t);
    assert_eq!(account.held(), 0, "given back with the template");

    // An account whose half cap cannot hold one kept request: nothing is
    // kept or charged, and every frame decodes as the decoder does.
    let small = Account::new(pool.clone(), kept / 3);
    let mut t = charged(small.clone());
    assert_eq!(steps(1).filter(|f| agree(&mut t, f, MAX, MAX)).count(), 0);
    assert!(t.kept.is_empty());
    assert_eq!(small.held(), 0);

    // Room for one but not three: the first kept, the others decoded.
    let one = Account::new(pool.clone(), 2 * (kept / 3) + 2 * (kept / 3) / 3);
    let mut t = charged(one.clone());
    let hits = steps(3).filter(|f| agree(&mut t, f, MAX, MAX)).count();
    assert_eq!(t.kept.len(), 1);
    assert_eq!(hits, 12, "env1's requests, after the first");
    assert_eq!(one.held(), t.kept_bytes());
    drop(t);
    assert_eq!(one.held(), 0);
    assert_eq!(pool.used(), 0);
}
