//! Kept reply values against the plain path: the same IDs and the same
//! value, bit for bit, for every frame of a sequence read by one
//! [`KeptReplies`] (so later frames go through kept values).

use super::super::decode_reply;
use super::*;
use crate::codec::{Codec, DType, Dict, NdArray};

/// Bit for bit: the same variants, floats by their bits, arrays by dtype,
/// shape and bytes, dict entries in order.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::UInt(x), Value::UInt(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.dtype() == y.dtype() && x.shape() == y.shape() && x.as_bytes() == y.as_bytes()
        }
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::BigInt(_), Value::BigInt(_)) => a == b,
        _ => false,
    }
}

/// Reads every frame with one `KeptReplies` and with the plain path;
/// they must agree on each. Returns how many were read from kept values.
fn agree_on(frames: &[Bytes]) -> usize {
    let mut kept = KeptReplies::default();
    for (n, frame) in frames.iter().enumerate() {
        let plain = decode_reply(frame, 1 << 24);
        let got = kept.decode(frame, 1 << 24);
        let what = || format!("frame {n}: {}", String::from_utf8_lossy(frame));
        match (plain, got) {
            (None, None) => {}
            (Some(p), Some(g)) => {
                assert_eq!(p.session_id, g.session_id, "{}", what());
                assert_eq!(p.request_id, g.request_id, "{}", what());
                assert!(
                    same(&p.result, &g.result),
                    "{}\nplain {:?}\nkept  {:?}",
                    what(),
                    p.result,
                    g.result
                );
            }
            (p, g) => panic!(
                "{}: plain {:?}, kept {:?}",
                what(),
                p.map(|r| r.result),
                g.map(|r| r.result)
            ),
        }
    }
    kept.hits
}

fn response(request: u64, result: Value) -> Bytes {
    let request = format!("{request:x}");
    let entries: Vec<(&str, Value)> = vec![
        ("version", Value::Int(1)),
        ("type", Value::from("response")),
        (
            "session_id",
            Value::from("1ccaf9daae07487e51d170c14ac6ecca"),
        ),
        ("request_id", Value::from(request.as_str())),
        ("resource_id", Value::from("pendulum1")),
        (
            "operation_id",
            Value::from(format!("{:032x}", request.len() * 977).as_str()),
        ),
        ("result", result),
    ];
    let refs: Vec<(&str, &Value)> = entries.iter().map(|(k, v)| (*k, v)).collect();
    Bytes::from(
        Codec::new(1 << 24)
            .expect("a codec")
            .encode_entries(&refs)
            .expect("encoded"),
    )
}

/// A call result as servers send it (descriptors recognised and blanked).
fn call(value: Value) -> Value {
    Value::Dict(
        Dict::new()
            .with("value", value)
            .with("descriptors", Value::List(Vec::new())),
    )
}

fn single_step(obs: [f32; 3], reward: Value, terminated: Value, info: Dict) -> Value {
    call(Value::Tuple(vec![
        Value::Array(NdArray::from_vec(obs.to_vec())),
        reward,
        terminated,
        Value::Bool(false),
        Value::Dict(info),
    ]))
}

/// The frame with the header text `from` (once) replaced by `to`.
fn edited(frame: &Bytes, from: &str, to: &str) -> Bytes {
    let header_len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    let header = std::str::from_utf8(&frame[4..4 + header_len]).expect("text");
    assert_eq!(header.matches(from).count(), 1, "{from} in {header}");
    let header = header.replacen(from, to, 1);
    let mut out = (header.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&frame[4 + header_len..]);
    Bytes::from(out)
}

#[test]
fn single_env_steps_read_as_the_parser_reads_them() {
    let rewards = [
        Value::Float(-7.597172153860404),
        Value::Float(0.0),
        Value::Float(-0.0),
        Value::Float(1e300),
        Value::Float(5e-324),
        Value::Float(-1.5),
        Value::Int(3),
        Value::Int(-4),
        Value::UInt(u64::MAX),
        Value::Int(i64::MIN),
        Value::Null,
        Value::Bool(true),
    ];
    let mut frames = Vec::new();
    for (i, r) in rewards.iter().enumerate() {
        let obs = [i as f32, -(i as f32) * 0.5, 1.0 / (i as f32 + 1.0)];
        let terminated = Value::Bool(i % 3 == 0);
        frames.push(response(
            i as u64 * 4099,
            single_step(obs, r.clone(), terminated, Dict::new()),
        ));
    }
    let hits = agree_on(&frames);
    assert_eq!(
        hits,
        frames.len() - 1,
        "every step after the first from the kept value"
    );
}

#[test]
fn other_tokens_in_a_hole_read_as_the_parser_reads_them() {
    let first = response(
        1,
        single_step(
            [1.0, 2.0, 3.0],
            Value::Float(0.125),
            Value::Bool(false),
            Dict::new(),
        ),
    );
    let mut frames = vec![first.clone()];
    // Tokens the encoder does not write, but the parser reads (or refuses):
    // each read as the plain path reads it, or refused by both.
    for token in [
        "123456789012345678901234567890",
        "-0",
        "1E5",
        "1.50",
        "2.5e-3",
        "0.125",
        "-",
        "1.",
        "01",
        "nul",
        "truex",
        "NaN",
        "-Infinity",
        "\"text\"",
        "{\"t\":\"float\",\"v\":\"nan\"}",
        "{\"t\":\"float\",\"v\":\"-inf\"}",
        "[1]",
        " 1",
        "",
    ] {
        frames.push(edited(&first, "0.125", token));
        frames.push(first.clone());
    }
    let hits = agree_on(&frames);
    assert!(
        hits >= 20,
        "the plain frames and the numbers come from the kept value: {hits}"
    );
}

#[test]
fn infos_lists_and_nesting_read_as_the_parser_reads_them() {
    let info = |entries: Vec<(&str, Value)>| {
        let mut d = Dict::new();
        for (k, v) in entries {
            d.insert(k, v);
        }
        d
    };
    let nested = |x: f64, flag: bool| {
        Value::List(vec![
            Value::Tuple(vec![Value::Float(x), Value::Bool(flag)]),
            Value::from("name"),
            Value::List(vec![Value::Int(x as i64), Value::Null]),
        ])
    };
    let step =
        |r: f64, i: Dict| single_step([0.5, 0.25, 0.125], Value::Float(r), Value::Bool(false), i);
    let frames = vec![
        response(
            1,
            step(
                1.0,
                info(vec![("x", Value::Float(1.5)), ("n", nested(2.0, true))]),
            ),
        ),
        response(
            2,
            step(
                2.0,
                info(vec![("x", Value::Float(2.5)), ("n", nested(-3.0, false))]),
            ),
        ),
        response(
            3,
            step(
                3.0,
                info(vec![("x", Value::Int(7)), ("n", nested(4.25, true))]),
            ),
        ),
        // Another key, another text: parsed (and kept).
        response(
            4,
            step(
                4.0,
                info(vec![("y", Value::Float(1.5)), ("n", nested(2.0, true))]),
            ),
        ),
        response(
            5,
            step(
                5.0,
                info(vec![("y", Value::Float(0.5)), ("n", nested(9.0, false))]),
            ),
        ),
        // A string where a number was: parsed.
        response(
            6,
            step(
                6.0,
                info(vec![("x", Value::from("1.5")), ("n", nested(2.0, true))]),
            ),
        ),
        // Empty info again.
        response(7, step(7.0, Dict::new())),
        response(8, step(8.0, Dict::new())),
        response(
            9,
            step(
                9.0,
                info(vec![("x", Value::Float(9.5)), ("n", nested(1.0, true))]),
            ),
        ),
    ];
    assert_eq!(agree_on(&frames), 5);
}

#[test]
fn batched_steps_take_their_arrays_from_each_frame() {
    let batch = |seed: f32, b: usize, terminated: Vec<bool>| {
        call(Value::Tuple(vec![
            Value::Array(
                NdArray::from_shape_vec(vec![b, 3], (0..3 * b).map(|x| seed + x as f32).collect())
                    .expect("an array"),
            ),
            Value::Array(NdArray::from_vec(
                (0..b).map(|x| seed as f64 * x as f64).collect::<Vec<f64>>(),
            )),
            Value::Array(NdArray::from_vec(terminated)),
            Value::Array(NdArray::from_vec(vec![false; b])),
            Value::Dict(Dict::new()),
        ]))
    };
    let mut frames: Vec<Bytes> = (0..6)
        .map(|i| {
            response(
                i,
                batch(
                    i as f32 * 1.25,
                    8,
                    (0..8).map(|k| (k + i) % 5 == 0).collect(),
                ),
            )
        })
        .collect();
    // Another batch size: other attachment lengths, other text.
    frames.push(response(7, batch(3.0, 4, vec![true; 4])));
    frames.push(response(8, batch(4.0, 8, vec![false; 8])));
    // Bools with other bytes than 0 and 1 are taken as they are.
    let odd = NdArray::from_bytes(
        DType::BOOL,
        vec![8],
        Bytes::from(vec![2u8, 0, 255, 1, 0, 0, 7, 0]),
    )
    .expect("an array");
    frames.push(response(
        9,
        call(Value::Tuple(vec![
            Value::Array(NdArray::from_shape_vec(vec![8, 3], vec![9.0f32; 24]).expect("an array")),
            Value::Array(NdArray::from_vec(vec![0.5f64; 8])),
            Value::Array(odd),
            Value::Array(NdArray::from_vec(vec![false; 8])),
            Value::Dict(Dict::new()),
        ])),
    ));
    assert_eq!(agree_on(&frames), 7);
}

#[test]
fn broken_frames_after_a_kept_one_are_refused_as_before() {
    let good = response(
        1,
        single_step(
            [1.0, 2.0, 3.0],
            Value::Float(0.25),
            Value::Bool(false),
            Dict::new(),
        ),
    );
    let header_len = u32::from_be_bytes([good[0], good[1], good[2], good[3]]) as usize;
    let rebuilt = |header: &[u8], attachments: &[u8]| {
        let mut f = (header.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(header);
        f.extend_from_slice(attachments);
        Bytes::from(f)
    };
    let header = &good[4..4 + header_len];
    let attachments = &good[4 + header_len..];
    let mut extra = attachments.to_vec();
    extra.push(0);
    let mut trailing = header.to_vec();
    trailing.push(b' ');
    let mut frames = vec![good.clone(), good.clone()];
    frames.push(rebuilt(header, &extra));
    frames.push(rebuilt(header, &attachments[1..]));
    frames.push(rebuilt(&trailing, attachments));
    for cut in [header_len - 1, header_len - 3, header_len - 20] {
        frames.push(rebuilt(&header[..cut], attachments));
    }
    frames.push(good.slice(..good.len() - 1));
    frames.push(good.clone());
    assert_eq!(agree_on(&frames), 2);
    let mut kept = KeptReplies::default();
    assert!(kept.decode(&good, 1 << 24).is_some());
    assert!(kept.decode(&good, 10).is_none(), "over the size limit");
}
