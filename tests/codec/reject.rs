//! Every way an envelope (or a value to encode) can be invalid, each checked
//! for its specific `CodecError` variant.
//!
//! Each decode test runs a table of bad envelopes. The same tables feed
//! `reference_rejects_the_same_envelopes`, which hands them to the Python
//! reference decoder: it must reject each one too, except where a case
//! documents that the reference is more lenient (and why we are not).

use crate::common;
use crate::support;

use bytes::Bytes;
use support::frame;
use unienv_remote::codec::{DEFAULT_MAX_MESSAGE_SIZE, MAX_DEPTH};
use unienv_remote::{dict, Codec, CodecError, DType, Graph, NdArray, ObjectArray, Value};

/// What the reference decoder does with a case.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reference {
    Rejects,
    /// The reference accepts it; the text says why we reject it anyway.
    Accepts(&'static str),
}

struct Bad {
    name: String,
    frame: Bytes,
    limit: usize,
    ours: Box<dyn Fn(&CodecError) -> bool>,
    reference: Reference,
}

impl Bad {
    fn new(
        name: impl Into<String>,
        frame: Bytes,
        ours: impl Fn(&CodecError) -> bool + 'static,
    ) -> Bad {
        Bad {
            name: name.into(),
            frame,
            limit: DEFAULT_MAX_MESSAGE_SIZE,
            ours: Box::new(ours),
            reference: Reference::Rejects,
        }
    }

    fn header(
        header: &str,
        attachments: &[u8],
        ours: impl Fn(&CodecError) -> bool + 'static,
    ) -> Bad {
        Bad::new(
            header.chars().take(120).collect::<String>(),
            frame(header, attachments),
            ours,
        )
    }

    /// A header whose decoding fails with exactly `expected`.
    fn exactly(header: &str, attachments: &[u8], expected: CodecError) -> Bad {
        Bad::header(header, attachments, move |e| *e == expected)
    }

    fn reference_accepts(mut self, why: &'static str) -> Bad {
        self.reference = Reference::Accepts(why);
        self
    }

    fn limit(mut self, limit: usize) -> Bad {
        self.limit = limit;
        self
    }
}

#[track_caller]
fn check(cases: Vec<Bad>) {
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for c in &cases {
        match Codec::new(c.limit).unwrap().decode(c.frame.clone()) {
            Ok(v) => failures.push(format!("{}: accepted as {v:?}", c.name)),
            Err(e) if !(c.ours)(&e) => {
                failures.push(format!("{}: wrong error {e:?} ({e})", c.name))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The error of decoding `frame` with the default codec (it must fail).
#[track_caller]
fn decode_err(frame: Bytes) -> CodecError {
    match Codec::default().decode(frame) {
        Ok(v) => panic!("decoded as {v:?}"),
        Err(e) => e,
    }
}

fn raw(bytes: &[u8]) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

fn with_header_bytes(header: &[u8]) -> Bytes {
    let mut out = (header.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(header);
    Bytes::from(out)
}

/// `depth` nested lists around `leaf`: the leaf sits at depth `depth`.
fn nested_lists(depth: usize, leaf: &str) -> String {
    format!(
        "{}{leaf}{}",
        r#"{"t":"list","v":["#.repeat(depth),
        "]}".repeat(depth)
    )
}

fn array_header(dtype: &str, shape: &str, offset: &str, length: &str) -> String {
    format!(
        r#"{{"t":"array","dtype":"{dtype}","shape":{shape},"offset":{offset},"length":{length}}}"#
    )
}

// ---- envelope framing ----

fn too_short_cases() -> Vec<Bad> {
    (0..4)
        .map(|n| {
            Bad::new(format!("{n}-byte frame"), raw(&[0u8; 3][..n]), |e| {
                matches!(e, CodecError::TooShort { .. })
            })
        })
        .collect()
}

#[test]
fn frame_shorter_than_four_bytes() {
    check(too_short_cases());
    let e = decode_err(raw(&[0, 0]));
    assert_eq!(e, CodecError::TooShort { len: 2 });
}

fn header_length_cases() -> Vec<Bad> {
    let past = |e: &CodecError| matches!(e, CodecError::HeaderLength { .. });
    vec![
        Bad::new(
            "header length 10, 5 bytes",
            raw(&[0, 0, 0, 10, b'[', b']', b' ', b' ', b' ']),
            past,
        ),
        Bad::new("header length 1, 0 bytes", raw(&[0, 0, 0, 1]), past),
        Bad::new(
            "header length u32::MAX",
            raw(&[0xff, 0xff, 0xff, 0xff, b'1']),
            past,
        ),
    ]
}

#[test]
fn header_length_past_the_frame() {
    check(header_length_cases());
    let e = decode_err(raw(&[0, 0, 0, 10, b'1', b'2']));
    assert_eq!(
        e,
        CodecError::HeaderLength {
            header_len: 10,
            available: 2
        }
    );
}

fn utf8_cases() -> Vec<Bad> {
    let utf8 = |e: &CodecError| matches!(e, CodecError::Utf8 { .. });
    let surrogate =
        "UTF-8-encoded surrogates: the reference decodes headers with errors='surrogatepass'";
    vec![
        Bad::new("0xff", with_header_bytes(b"\"\xff\""), utf8),
        Bad::new("overlong '/'", with_header_bytes(b"\"\xc0\xaf\""), utf8),
        Bad::new(
            "truncated sequence",
            with_header_bytes(b"\"\xe2\x82\""),
            utf8,
        ),
        Bad::new(
            "continuation byte alone",
            with_header_bytes(b"\"\x80\""),
            utf8,
        ),
        Bad::new(
            "encoded surrogate",
            with_header_bytes(b"\"\xed\xa0\x80\""),
            utf8,
        )
        .reference_accepts(surrogate),
        Bad::new(
            "beyond U+10FFFF",
            with_header_bytes(b"\"\xf4\x90\x80\x80\""),
            utf8,
        ),
    ]
}

#[test]
fn header_is_not_utf8() {
    check(utf8_cases());
    let e = decode_err(with_header_bytes(b"[\"ab\xff\"]"));
    assert_eq!(e, CodecError::Utf8 { offset: 4 });
}

// ---- JSON syntax ----

fn malformed_json_cases() -> Vec<Bad> {
    let json = |e: &CodecError| matches!(e, CodecError::Json { .. });
    let mut cases: Vec<Bad> = [
        "",
        " ",
        "{",
        "}",
        "tru",
        "nul",
        "True",
        "None",
        "\"unterminated",
        r#""bad \x escape""#,
        r#""\u12""#,
        r#""\u12g4""#,
        "\"raw\tcontrol\"",
        "\"raw\ncontrol\"",
        "1 2",
        "null null",
        "01",
        "-01",
        "1.",
        ".5",
        "+1",
        "1e",
        "1e+",
        "-",
        "0x10",
        r#"{"t":"list","v":[1,]}"#,
        r#"{"t":"list","v":[1 2]}"#,
        r#"{"t":"list","v":[,1]}"#,
        r#"{"t":"list" "v":[]}"#,
        r#"{"t":"list","v":[],}"#,
        r#"{"t":"list","v":[]}}"#,
        r#"{"t":"list","v":[]"#,
        r#"{"t"="list","v":[]}"#,
        "{'t':'list','v':[]}",
        r#"{t:"list","v":[]}"#,
        r#"{"t":"list","v":[]} // comment"#,
        r#"{"t":"dict","v":[["a",1]}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", json))
    .collect();
    let bom = "a UTF-8 BOM: the reference reads header bytes with json.loads, which strips it";
    cases.push(
        Bad::new("BOM", with_header_bytes("\u{feff}null".as_bytes()), json).reference_accepts(bom),
    );
    let lone = "lone surrogate escapes: Python strings can hold them, Rust strings cannot";
    for h in [
        r#""\ud800""#,
        r#""\udc00""#,
        r#""\ud800\u0041""#,
        r#""\ud83d x""#,
    ] {
        cases.push(Bad::header(h, b"", json).reference_accepts(lone));
    }
    cases
}

#[test]
fn malformed_json() {
    check(malformed_json_cases());
}

fn bare_array_cases() -> Vec<Bad> {
    let bare = |e: &CodecError| matches!(e, CodecError::BareArray { .. });
    vec![
        Bad::header("[]", b"", bare),
        Bad::header("[1,2]", b"", bare),
        Bad::header(r#"{"t":"list","v":[[1]]}"#, b"", bare),
    ]
}

#[test]
fn bare_json_arrays_are_not_values() {
    check(bare_array_cases());
}

fn constant_cases() -> Vec<Bad> {
    let constant = |e: &CodecError| matches!(e, CodecError::NonStandardConstant { .. });
    [
        "NaN",
        "Infinity",
        "-Infinity",
        r#"{"t":"list","v":[1,NaN]}"#,
        r#"{"t":"dict","v":[["x",-Infinity]]}"#,
        r#"{"v":[Infinity],"t":"list"}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", constant))
    .collect()
}

#[test]
fn nan_and_infinity_literals() {
    check(constant_cases());
    let e = decode_err(frame(r#"{"t":"list","v":[NaN]}"#, b""));
    assert_eq!(e, CodecError::NonStandardConstant { offset: 17 });
}

fn integer_range_cases() -> Vec<Bad> {
    // Integers of any size are carried (as `Value::BigInt` beyond 64 bits),
    // up to Python's 4300-digit conversion limit, past which the reference
    // cannot read them either.
    let range = |e: &CodecError| matches!(e, CodecError::IntegerOutOfRange { .. });
    let long = "9".repeat(4301);
    [
        long.clone(),
        format!("-{}", "1".repeat(4301)),
        format!(r#"{{"t":"list","v":[0,{long}]}}"#),
    ]
    .iter()
    .map(|h| Bad::header(h, b"", range))
    .collect()
}

#[test]
fn integers_beyond_python_digit_limit() {
    check(integer_range_cases());
    // The edges themselves are fine.
    for (text, v) in [
        ("18446744073709551615", Value::UInt(u64::MAX)),
        ("-9223372036854775808", Value::Int(i64::MIN)),
    ] {
        assert_eq!(Codec::default().decode(frame(text, b"")).unwrap(), v);
    }
}

#[test]
fn integers_beyond_64_bits_are_carried_exactly() {
    let max_digits = "7".repeat(4300);
    for text in [
        "18446744073709551616",
        "-9223372036854775809",
        "340282366920938463463374607431768211455",
        max_digits.as_str(),
    ] {
        let header = format!(r#"{{"t":"dict","v":[["seed",{text}]]}}"#);
        let value = Codec::default().decode(frame(&header, b"")).unwrap();
        match value.get("seed") {
            Some(Value::BigInt(b)) => assert_eq!(b.as_str(), text),
            other => panic!("{text}: {other:?}"),
        }
        let encoded = Codec::default().encode(&value).unwrap();
        assert_eq!(&encoded[4..], header.as_bytes(), "re-encoded byte for byte");
    }
    assert!(unienv_remote::codec::BigInt::parse("18446744073709551615").is_none());
    assert!(unienv_remote::codec::BigInt::parse("018446744073709551616").is_none());
}

fn float_range_cases() -> Vec<Bad> {
    let range = |e: &CodecError| matches!(e, CodecError::FloatOutOfRange { .. });
    ["1e400", "-1e400", "1.8e308", "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792.0", r#"{"t":"list","v":[1e999]}"#]
        .into_iter()
        .map(|h| Bad::header(h, b"", range))
        .collect()
}

#[test]
fn float_tokens_that_overflow() {
    check(float_range_cases());
    // Underflow is not an error: Python reads 1e-400 as 0.0 too.
    assert_eq!(
        Codec::default().decode(frame("1e-400", b"")).unwrap(),
        Value::Float(0.0)
    );
    assert_eq!(
        Codec::default()
            .decode(frame("1.7976931348623157e308", b""))
            .unwrap(),
        Value::Float(f64::MAX)
    );
}

// ---- tags and members ----

fn unknown_tag_cases() -> Vec<Bad> {
    let unknown = |e: &CodecError| matches!(e, CodecError::UnknownTag { .. });
    [
        r#"{"t":"set","v":[]}"#,
        r#"{"t":"","v":[]}"#,
        r#"{"t":"List","v":[]}"#,
        r#"{"t":"ndarray","v":[]}"#,
        r#"{"t":"pickle","v":"gASVAAAAAAAAAAB9lC4="}"#,
        r#"{"t":"list ","v":[]}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", unknown))
    .collect()
}

#[test]
fn unknown_tag() {
    check(unknown_tag_cases());
    let e = decode_err(frame(r#"{"t":"set","v":[]}"#, b""));
    assert_eq!(e, CodecError::UnknownTag { tag: "set".into() });
}

fn non_string_tag_cases() -> Vec<Bad> {
    let bad = |e: &CodecError| matches!(e, CodecError::BadField { field: "t", .. });
    [
        r#"{"t":1,"v":[]}"#,
        r#"{"t":null,"v":[]}"#,
        r#"{"t":["list"],"v":[]}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", bad))
    .collect()
}

#[test]
fn non_string_tag() {
    check(non_string_tag_cases());
}

fn missing_tag_cases() -> Vec<Bad> {
    let missing = |e: &CodecError| matches!(e, CodecError::MissingTag { .. });
    [
        "{}",
        r#"{"v":[]}"#,
        r#"{"v":"nan"}"#,
        r#"{"shape":[1],"v":[1]}"#,
        r#"{"offset":0,"length":0}"#,
        r#"{"t":"list","v":[{}]}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", missing))
    .collect()
}

#[test]
fn missing_tag() {
    check(missing_tag_cases());
}

fn missing_member_cases() -> Vec<Bad> {
    // (header, attachments, tag, the member it lacks)
    [
        (r#"{"t":"list"}"#, &b""[..], "list", "v"),
        (r#"{"t":"tuple"}"#, b"", "tuple", "v"),
        (r#"{"t":"dict"}"#, b"", "dict", "v"),
        (r#"{"t":"float"}"#, b"", "float", "v"),
        (r#"{"t":"graph"}"#, b"", "graph", "v"),
        (
            r#"{"t":"object_array","v":[]}"#,
            b"",
            "object_array",
            "shape",
        ),
        (
            r#"{"t":"object_array","shape":[0]}"#,
            b"",
            "object_array",
            "v",
        ),
        (r#"{"t":"bytes","length":0}"#, b"", "bytes", "offset"),
        (r#"{"t":"bytes","offset":0}"#, b"", "bytes", "length"),
        (
            r#"{"t":"array","shape":[],"offset":0,"length":1}"#,
            b"\0",
            "array",
            "dtype",
        ),
        (
            r#"{"t":"array","dtype":"|u1","offset":0,"length":1}"#,
            b"\0",
            "array",
            "shape",
        ),
        (
            r#"{"t":"array","dtype":"|u1","shape":[],"length":1}"#,
            b"\0",
            "array",
            "offset",
        ),
        (
            r#"{"t":"array","dtype":"|u1","shape":[],"offset":0}"#,
            b"\0",
            "array",
            "length",
        ),
    ]
    .into_iter()
    .map(|(header, attachments, tag, field)| {
        Bad::exactly(header, attachments, CodecError::MissingField { tag, field })
    })
    .collect()
}

#[test]
fn missing_member() {
    check(missing_member_cases());
}

fn extra_member_cases() -> Vec<Bad> {
    let extra = |e: &CodecError| matches!(e, CodecError::UnexpectedField { .. });
    let lenient =
        "extra members: the reference reads only the members it needs and ignores the rest";
    let mut cases: Vec<Bad> = [
        // after the tag
        r#"{"t":"list","v":[],"x":1}"#,
        r#"{"t":"float","v":"nan","offset":0}"#,
        r#"{"t":"list","v":[],"shape":[0]}"#,
        r#"{"t":"dict","v":[],"dtype":"<f4"}"#,
        r#"{"t":"tuple","v":[],"length":0}"#,
        r#"{"t":"object_array","shape":[0],"v":[],"offset":0}"#,
        r#"{"t":"bytes","offset":0,"length":0,"shape":[0]}"#,
        r#"{"t":"array","dtype":"|u1","shape":[0],"offset":0,"length":0,"extra":null}"#,
        // before the tag
        r#"{"x":1,"t":"list","v":[]}"#,
        r#"{"shape":[0],"t":"list","v":[]}"#,
        r#"{"dtype":"<f4","t":"bytes","offset":0,"length":0}"#,
        r#"{"v":[],"t":"bytes","offset":0,"length":0}"#,
        r#"{"offset":0,"length":0,"t":"float","v":"nan"}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", extra).reference_accepts(lenient))
    .collect();
    // A `v` on bytes or array nodes is a member they do not have, and the
    // reference ignores it too.
    cases.push(
        Bad::header(r#"{"t":"bytes","offset":0,"length":0,"v":[]}"#, b"", extra)
            .reference_accepts(lenient),
    );
    cases
}

#[test]
fn extra_member_before_or_after_the_tag() {
    check(extra_member_cases());
    let e = decode_err(frame(r#"{"t":"list","v":[],"x":1}"#, b""));
    assert_eq!(
        e,
        CodecError::UnexpectedField {
            tag: "list",
            field: "x".into()
        }
    );
    let e = decode_err(frame(r#"{"x":1,"t":"list","v":[]}"#, b""));
    assert_eq!(
        e,
        CodecError::UnexpectedField {
            tag: "?",
            field: "x".into()
        }
    );
    let e = decode_err(frame(r#"{"shape":[0],"t":"list","v":[]}"#, b""));
    assert_eq!(
        e,
        CodecError::UnexpectedField {
            tag: "list",
            field: "shape".into()
        }
    );
}

fn duplicate_member_cases() -> Vec<Bad> {
    let dup = |e: &CodecError| matches!(e, CodecError::DuplicateMember { .. });
    let lenient = "repeated JSON members: json.loads keeps the last one";
    [
        r#"{"t":"list","t":"list","v":[]}"#,
        r#"{"t":"list","v":[],"v":[]}"#,
        r#"{"v":[],"t":"list","v":[1]}"#,
        r#"{"t":"bytes","offset":0,"offset":0,"length":0}"#,
        r#"{"t":"array","dtype":"|u1","dtype":"|u1","shape":[0],"offset":0,"length":0}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", dup).reference_accepts(lenient))
    .collect()
}

#[test]
fn duplicate_json_member() {
    check(duplicate_member_cases());
    let e = decode_err(frame(r#"{"t":"list","v":[],"v":[]}"#, b""));
    assert_eq!(
        e,
        CodecError::DuplicateMember {
            offset: 19,
            field: "v".into()
        }
    );
}

fn bad_member_value_cases() -> Vec<Bad> {
    let bad = |e: &CodecError| matches!(e, CodecError::BadField { .. });
    [
        r#"{"t":"float","v":"NaN"}"#,
        r#"{"t":"float","v":"Infinity"}"#,
        r#"{"t":"float","v":1.0}"#,
        r#"{"t":"float","v":null}"#,
        r#"{"t":"list","v":{"t":"list","v":[]}}"#,
        r#"{"t":"tuple","v":"ab"}"#,
        r#"{"t":"dict","v":null}"#,
        r#"{"t":"object_array","shape":[1],"v":"a"}"#,
        r#"{"t":"object_array","shape":1,"v":[1]}"#,
        r#"{"t":"array","dtype":4,"shape":[0],"offset":0,"length":0}"#,
        r#"{"t":"bytes","offset":-1,"length":0}"#,
        r#"{"t":"bytes","offset":0,"length":-1}"#,
        r#"{"t":"bytes","offset":0.0,"length":0}"#,
        r#"{"t":"bytes","offset":0,"length":1e0}"#,
        r#"{"t":"bytes","offset":"0","length":0}"#,
        r#"{"t":"bytes","offset":true,"length":0}"#,
        r#"{"t":"bytes","offset":null,"length":0}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", bad))
    .collect()
}

#[test]
fn members_of_the_wrong_type() {
    check(bad_member_value_cases());
}

// ---- depth ----

fn depth_cases() -> Vec<Bad> {
    let deep = |e: &CodecError| matches!(e, CodecError::TooDeep { max: MAX_DEPTH });
    let mut dicts = String::from("1");
    for _ in 0..MAX_DEPTH + 1 {
        dicts = format!(r#"{{"t":"dict","v":[["k",{dicts}]]}}"#);
    }
    let mut graph = r#"{"t":"graph","v":{"t":"dict","v":[["n_nodes",1],["n_edges",null],["nodes_features",null],["edges_features",null],["edges",null]]}}"#.to_string();
    for _ in 0..MAX_DEPTH - 1 {
        graph = format!(r#"{{"t":"tuple","v":[{graph}]}}"#);
    }
    let mut deferred = String::from("null");
    for _ in 0..MAX_DEPTH + 1 {
        deferred = format!(r#"{{"v":[{deferred}],"t":"list"}}"#);
    }
    vec![
        // Leaves count: a null at depth 65 is too deep, as in the reference.
        Bad::header(&nested_lists(MAX_DEPTH + 1, "null"), b"", deep),
        Bad::header(&nested_lists(MAX_DEPTH + 1, "1"), b"", deep),
        Bad::header(&nested_lists(MAX_DEPTH + 1, r#""s""#), b"", deep),
        Bad::header(
            &nested_lists(MAX_DEPTH + 1, r#"{"t":"float","v":"nan"}"#),
            b"",
            deep,
        ),
        Bad::header(
            &nested_lists(MAX_DEPTH + 1, r#"{"t":"list","v":[]}"#),
            b"",
            deep,
        ),
        Bad::header(
            &nested_lists(MAX_DEPTH + 1, r#"{"t":"bytes","offset":0,"length":0}"#),
            b"",
            deep,
        ),
        Bad::header(
            &nested_lists(MAX_DEPTH + 1, r#"{"t":"object_array","shape":[0],"v":[]}"#),
            b"",
            deep,
        ),
        Bad::new("65 nested dicts", frame(&dicts, b""), deep),
        // A graph at depth 63: its dict is at 64 and the dict's values at 65.
        Bad::new("graph at depth 63", frame(&graph, b""), deep),
        Bad::new("65 levels of v-before-t", frame(&deferred, b""), deep),
        // Far deeper than any stack should take: rejected early, no overflow.
        Bad::new(
            "100000 nested lists",
            frame(&nested_lists(100_000, "1"), b""),
            deep,
        ),
        Bad::new(
            "100000 nested v-before-t",
            frame(
                &format!(
                    "{}1{}",
                    r#"{"v":["#.repeat(100_000),
                    r#"],"t":"list"}"#.repeat(100_000)
                ),
                b"",
            ),
            deep,
        ),
        Bad::new(
            "100000 raw JSON arrays",
            frame(
                &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
                b"",
            ),
            |e| matches!(e, CodecError::BareArray { .. }),
        ),
    ]
}

#[test]
fn nesting_deeper_than_64() {
    check(depth_cases());
    // Exactly 64 levels are fine, for every kind of leaf.
    for leaf in [
        "null",
        "1",
        r#"{"t":"float","v":"inf"}"#,
        r#"{"t":"bytes","offset":0,"length":0}"#,
    ] {
        let v = Codec::default()
            .decode(frame(&nested_lists(MAX_DEPTH, leaf), b""))
            .unwrap();
        assert!(matches!(v, Value::List(_)));
    }
    let mut graph = r#"{"t":"graph","v":{"t":"dict","v":[["n_nodes",1],["n_edges",null],["nodes_features",null],["edges_features",null],["edges",null]]}}"#.to_string();
    for _ in 0..MAX_DEPTH - 2 {
        graph = format!(r#"{{"t":"tuple","v":[{graph}]}}"#);
    }
    Codec::default().decode(frame(&graph, b"")).unwrap();
}

#[test]
fn encoding_deeper_than_64_fails() {
    let mut v = Value::Null;
    for _ in 0..MAX_DEPTH + 1 {
        v = Value::List(vec![v]);
    }
    assert_eq!(
        Codec::default().encode(&v).unwrap_err(),
        CodecError::TooDeep { max: MAX_DEPTH }
    );
    let mut g = Value::from(Graph::default());
    for _ in 0..MAX_DEPTH - 1 {
        g = Value::Tuple(vec![g]);
    }
    assert_eq!(
        Codec::default().encode(&g).unwrap_err(),
        CodecError::TooDeep { max: MAX_DEPTH }
    );
    // A graph node at depth 64 is rejected before its dict.
    let mut g = Value::from(Graph::default());
    for _ in 0..MAX_DEPTH {
        g = Value::List(vec![g]);
    }
    assert_eq!(
        Codec::default().encode(&g).unwrap_err(),
        CodecError::TooDeep { max: MAX_DEPTH }
    );
}

// ---- dicts ----

fn dict_header(keys: &[String]) -> String {
    let entries: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("[\"{k}\",{i}]"))
        .collect();
    format!(r#"{{"t":"dict","v":[{}]}}"#, entries.join(","))
}

fn duplicate_key_cases() -> Vec<Bad> {
    let dup = |e: &CodecError| matches!(e, CodecError::DuplicateKey { .. });
    let mut cases = vec![
        Bad::header(r#"{"t":"dict","v":[["a",1],["a",2]]}"#, b"", dup),
        Bad::header(r#"{"t":"dict","v":[["a",1],["b",2],["a",3]]}"#, b"", dup),
        // The same key spelled with an escape.
        Bad::header(r#"{"t":"dict","v":[["é",1],["\u00e9",2]]}"#, b"", dup),
        Bad::header(r#"{"t":"dict","v":[["",1],["",2]]}"#, b"", dup),
    ];
    // Larger dicts switch to a hash index after 16 entries: repeat a key at
    // every position around the switch, and long after it.
    for (first, at) in [
        (0, 16),
        (15, 16),
        (3, 17),
        (16, 17),
        (0, 40),
        (20, 39),
        (39, 40),
    ] {
        let mut keys: Vec<String> = (0..41).map(|i| format!("k{i}")).collect();
        keys[at] = keys[first].clone();
        cases.push(Bad::new(
            format!("41 keys, key {first} repeated at {at}"),
            frame(&dict_header(&keys), b""),
            dup,
        ));
    }
    cases
}

#[test]
fn duplicate_dict_key() {
    check(duplicate_key_cases());
    let keys: Vec<String> = (0..41).map(|i| format!("k{i}")).collect();
    let d = Codec::default()
        .decode(frame(&dict_header(&keys), b""))
        .unwrap();
    assert_eq!(d.as_dict().unwrap().len(), 41);
    let e = decode_err(frame(r#"{"t":"dict","v":[["a",1],["a",2]]}"#, b""));
    assert_eq!(e, CodecError::DuplicateKey { key: "a".into() });
}

fn dict_entry_cases() -> Vec<Bad> {
    let entry = |e: &CodecError| matches!(e, CodecError::BadDictEntry { .. });
    let unpack =
        "a two-character string entry: the reference unpacks \"ab\" into key 'a' and value 'b'";
    let object = "a JSON object as the entry list: the reference iterates its member names";
    vec![
        // non-string keys
        Bad::header(r#"{"t":"dict","v":[[1,2]]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":[[null,2]]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":[[{"t":"tuple","v":[]},2]]}"#, b"", entry),
        // malformed entries
        Bad::header(r#"{"t":"dict","v":[["a"]]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":[["a",1,2]]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":[[]]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":["a",1]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":[{"a":1}]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":[null]}"#, b"", entry),
        Bad::header(r#"{"t":"dict","v":["ab"]}"#, b"", entry).reference_accepts(unpack),
        // A trailing comma leaves an entry that is not a pair.
        Bad::header(r#"{"t":"dict","v":[["a",1],]}"#, b"", entry),
        // Not a JSON array at all.
        Bad::header(r#"{"t":"dict","v":{}}"#, b"", |e| {
            matches!(e, CodecError::BadField { tag: "dict", .. })
        })
        .reference_accepts(object),
        Bad::header(r#"{"t":"dict","v":{"ab":1}}"#, b"", |e| {
            matches!(e, CodecError::BadField { tag: "dict", .. })
        })
        .reference_accepts(object),
    ]
}

#[test]
fn non_string_key_or_malformed_dict_entry() {
    check(dict_entry_cases());
}

// ---- arrays ----

fn dtype_cases() -> Vec<Bad> {
    let dtype = |e: &CodecError| matches!(e, CodecError::DType(_));
    // Rejected by NumPy itself or by the reference's kind/size check.
    let mut cases: Vec<Bad> = [
        "<f3", "<U4", "<O8", "<V8", "<S4", "<M8", "<m8", "<f16", "<b2", "<c4", "<c32", "<i16", "",
        "<", "<f4 ", " <f4", "<F4", "\u{e9}f4", "<\u{e9}4", "O", "object",
    ]
    .into_iter()
    .map(|d| Bad::header(&array_header(d, "[]", "0", "4"), &[0; 4], dtype))
    .collect();
    // Accepted by np.dtype: other markers, no marker, names, character codes
    // (`f` is float32, `d` float64, `?` bool) and odd digit spellings.
    let numpy = "NumPy dtype spellings other than <, > or | + kind + size: the reference passes the string to np.dtype";
    for (d, size) in [
        ("=f4", 4),
        ("|f4", 4),
        ("f4", 4),
        ("float32", 4),
        ("<f", 4),
        ("<f04", 4),
        ("<f+4", 4),
        ("=u1", 1),
        ("u1", 1),
        ("<?", 1),
        ("|c8", 8),
        ("d", 8),
    ] {
        let header = array_header(d, "[]", "0", &size.to_string());
        cases.push(Bad::header(&header, &vec![0; size], dtype).reference_accepts(numpy));
    }
    cases
}

#[test]
fn bad_dtype_strings() {
    check(dtype_cases());
    let e = Codec::default()
        .decode(frame(&array_header("=f4", "[]", "0", "4"), &[0; 4]))
        .unwrap_err();
    let CodecError::DType(d) = e else {
        panic!("{e:?}")
    };
    assert_eq!(d.dtype, "=f4");
}

fn too_many_dims_cases() -> Vec<Bad> {
    let dims = |e: &CodecError| matches!(e, CodecError::TooManyDims { .. });
    let shape = |n: usize| format!("[{}]", vec!["1"; n].join(","));
    vec![
        Bad::header(&array_header("<f4", &shape(33), "0", "4"), &[0; 4], dims),
        Bad::header(&array_header("<f4", &shape(1000), "0", "4"), &[0; 4], dims),
        Bad::header(
            &format!(r#"{{"t":"object_array","shape":{},"v":[1]}}"#, shape(33)),
            b"",
            dims,
        ),
    ]
}

#[test]
fn thirty_three_dimensions() {
    check(too_many_dims_cases());
    let shape = format!("[{}]", vec!["1"; 32].join(","));
    Codec::default()
        .decode(frame(&array_header("<f4", &shape, "0", "4"), &[0; 4]))
        .unwrap();
}

fn bad_dimension_cases() -> Vec<Bad> {
    let dim = |e: &CodecError| matches!(e, CodecError::BadDimension { .. });
    let mut cases: Vec<Bad> = [
        "[-1]",
        "[2,-3]",
        "[1.5]",
        "[2.0]",
        "[1e2]",
        "[\"2\"]",
        "[null]",
        "[true]",
        "[[2]]",
        "[9223372036854775808]",
    ]
    .into_iter()
    .map(|s| Bad::header(&array_header("|u1", s, "0", "0"), b"", dim))
    .collect();
    cases.push(Bad::header(
        r#"{"t":"object_array","shape":[-1],"v":[]}"#,
        b"",
        dim,
    ));
    cases.push(Bad::header(
        r#"{"t":"object_array","shape":[0.0],"v":[]}"#,
        b"",
        dim,
    ));
    cases
}

#[test]
fn negative_or_non_integer_dimensions() {
    check(bad_dimension_cases());
    // The largest dimension Python allows (intp max) is fine when another is zero.
    let shape = format!("[0,{}]", i64::MAX);
    Codec::default()
        .decode(frame(&array_header("<f8", &shape, "0", "0"), b""))
        .unwrap();
}

fn size_overflow_cases() -> Vec<Bad> {
    let overflow = |e: &CodecError| matches!(e, CodecError::SizeOverflow { .. });
    vec![
        Bad::header(
            &array_header("<f8", "[4611686018427387904,4]", "0", "0"),
            b"",
            overflow,
        ),
        Bad::header(
            &array_header("|u1", "[4294967296,4294967296]", "0", "0"),
            b"",
            overflow,
        ),
        Bad::header(
            &array_header("<c16", "[9223372036854775807,2]", "0", "0"),
            b"",
            overflow,
        ),
        Bad::header(
            &array_header("<f8", &format!("[{}]", u64::MAX / 8 + 1), "0", "0"),
            b"",
            overflow,
        ),
        Bad::header(
            &array_header("<f8", &format!("[{}]", i64::MAX), "0", "0"),
            b"",
            overflow,
        ),
    ]
}

#[test]
fn product_of_shape_and_itemsize_overflows() {
    check(size_overflow_cases());
}

fn length_mismatch_cases() -> Vec<Bad> {
    let mismatch = |e: &CodecError| matches!(e, CodecError::LengthMismatch { .. });
    vec![
        Bad::header(&array_header("<f4", "[3]", "0", "8"), &[0; 8], mismatch),
        Bad::header(&array_header("<f4", "[3]", "0", "16"), &[0; 16], mismatch),
        Bad::header(&array_header("<f4", "[]", "0", "0"), b"", mismatch),
        Bad::header(
            &array_header("<c16", "[2,0]", "0", "16"),
            &[0; 16],
            mismatch,
        ),
        Bad::header(&array_header("|b1", "[2,2]", "0", "3"), &[0; 3], mismatch),
    ]
}

#[test]
fn array_length_mismatch() {
    check(length_mismatch_cases());
    let e = Codec::default()
        .decode(frame(&array_header("<f4", "[3]", "0", "8"), &[0; 8]))
        .unwrap_err();
    assert_eq!(
        e,
        CodecError::LengthMismatch {
            dtype: "<f4".into(),
            shape: vec![3],
            expected: 12,
            length: 8
        }
    );
}

// ---- attachments ----

fn two_bytes(first: (usize, usize), second: (usize, usize)) -> String {
    format!(
        r#"{{"t":"list","v":[{{"t":"bytes","offset":{},"length":{}}},{{"t":"bytes","offset":{},"length":{}}}]}}"#,
        first.0, first.1, second.0, second.1
    )
}

fn attachment_cases() -> Vec<Bad> {
    let order = |e: &CodecError| matches!(e, CodecError::AttachmentOrder { .. });
    let bounds = |e: &CodecError| matches!(e, CodecError::AttachmentOutOfBounds { .. });
    let trailing = |e: &CodecError| matches!(e, CodecError::TrailingData { .. });
    vec![
        Bad::new("gap", frame(&two_bytes((0, 2), (3, 1)), b"abcd"), order),
        Bad::new(
            "gap before the first",
            frame(&two_bytes((1, 2), (3, 1)), b"abcd"),
            order,
        ),
        Bad::new("overlap", frame(&two_bytes((0, 2), (1, 2)), b"abc"), order),
        Bad::new(
            "same offset twice",
            frame(&two_bytes((0, 2), (0, 2)), b"abab"),
            order,
        ),
        Bad::new(
            "out of traversal order",
            frame(&two_bytes((2, 2), (0, 2)), b"abcd"),
            order,
        ),
        Bad::new(
            "array out of traversal order",
            frame(
                &format!(
                    r#"{{"t":"list","v":[{},{}]}}"#,
                    array_header("|u1", "[2]", "2", "2"),
                    array_header("|u1", "[2]", "0", "2")
                ),
                b"abcd",
            ),
            order,
        ),
        Bad::new(
            "out of bounds",
            frame(&two_bytes((0, 2), (2, 3)), b"abcd"),
            bounds,
        ),
        Bad::new(
            "out of bounds, no attachments",
            frame(r#"{"t":"bytes","offset":0,"length":1}"#, b""),
            bounds,
        ),
        Bad::new(
            "length near u64::MAX",
            frame(
                &format!(r#"{{"t":"bytes","offset":0,"length":{}}}"#, i64::MAX),
                b"ab",
            ),
            bounds,
        ),
        Bad::new(
            "array out of bounds",
            frame(&array_header("<f8", "[2]", "0", "16"), &[0; 15]),
            bounds,
        ),
        Bad::new(
            "trailing bytes",
            frame(&two_bytes((0, 2), (2, 1)), b"abcd"),
            trailing,
        ),
        Bad::new(
            "trailing bytes, no attachments",
            frame("null", b"x"),
            trailing,
        ),
        Bad::new(
            "trailing bytes after an array",
            frame(&array_header("|u1", "[1]", "0", "1"), b"ab"),
            trailing,
        ),
    ]
}

#[test]
fn attachment_gap_overlap_order_bounds_and_trailing_bytes() {
    check(attachment_cases());
    let codec = Codec::default();
    assert_eq!(
        codec
            .decode(frame(&two_bytes((0, 2), (3, 1)), b"abcd"))
            .unwrap_err(),
        CodecError::AttachmentOrder {
            expected: 2,
            offset: 3
        }
    );
    assert_eq!(
        codec
            .decode(frame(&two_bytes((0, 2), (2, 3)), b"abcd"))
            .unwrap_err(),
        CodecError::AttachmentOutOfBounds {
            offset: 2,
            length: 3,
            available: 4
        }
    );
    assert_eq!(
        codec
            .decode(frame(&two_bytes((0, 2), (2, 1)), b"abcd"))
            .unwrap_err(),
        CodecError::TrailingData {
            used: 3,
            total: 4,
            unused: 1
        }
    );
}

// ---- object arrays and graphs ----

fn object_array_count_cases() -> Vec<Bad> {
    let count = |e: &CodecError| matches!(e, CodecError::ObjectArrayCount { .. });
    [
        r#"{"t":"object_array","shape":[2],"v":[1,2,3]}"#,
        r#"{"t":"object_array","shape":[2,2],"v":[1,2,3]}"#,
        r#"{"t":"object_array","shape":[],"v":[]}"#,
        r#"{"t":"object_array","shape":[0],"v":[1]}"#,
        r#"{"t":"object_array","shape":[3,0],"v":[null]}"#,
    ]
    .into_iter()
    .map(|h| Bad::header(h, b"", count))
    .collect()
}

#[test]
fn object_array_count_mismatch() {
    check(object_array_count_cases());
    let e = decode_err(frame(
        r#"{"t":"object_array","shape":[2],"v":[1,2,3]}"#,
        b"",
    ));
    assert_eq!(
        e,
        CodecError::ObjectArrayCount {
            shape: vec![2],
            actual: 3
        }
    );
}

fn object_array_bound_cases() -> Vec<Bad> {
    let large = |e: &CodecError| matches!(e, CodecError::ObjectArrayTooLarge { .. });
    let nulls = |n: usize| vec!["null"; n].join(",");
    vec![
        // product(shape) * 8 > limit, whatever the values.
        Bad::header(
            &format!(
                r#"{{"t":"object_array","shape":[{}],"v":[]}}"#,
                DEFAULT_MAX_MESSAGE_SIZE / 8 + 1
            ),
            b"",
            large,
        ),
        Bad::header(
            r#"{"t":"object_array","shape":[4294967296,4294967296],"v":[]}"#,
            b"",
            large,
        ),
        Bad::header(
            r#"{"t":"object_array","shape":[9223372036854775807,9223372036854775807],"v":[]}"#,
            b"",
            large,
        ),
        // With a 1000-byte limit: 126 pointers (1008 bytes) are too many even
        // though the message itself is well under the limit.
        Bad::header(
            &format!(
                r#"{{"t":"object_array","shape":[126],"v":[{}]}}"#,
                nulls(126)
            ),
            b"",
            large,
        )
        .limit(1000),
        Bad::header(
            &format!(
                r#"{{"t":"object_array","shape":[2,63],"v":[{}]}}"#,
                nulls(126)
            ),
            b"",
            large,
        )
        .limit(1000),
    ]
}

#[test]
fn object_array_allocation_bound() {
    check(object_array_bound_cases());
    // 125 pointers are exactly 1000 bytes: allowed.
    let h = format!(
        r#"{{"t":"object_array","shape":[125],"v":[{}]}}"#,
        vec!["null"; 125].join(",")
    );
    Codec::new(1000).unwrap().decode(frame(&h, b"")).unwrap();
    // The encoder applies the same bound.
    let o = ObjectArray::new(vec![126], vec![Value::Null; 126]).unwrap();
    let e = Codec::new(1000)
        .unwrap()
        .encode(&o.clone().into())
        .unwrap_err();
    assert_eq!(e, CodecError::ObjectArrayTooLarge { shape: vec![126] });
    assert!(e.is_too_large());
    let o = ObjectArray::new(vec![125], vec![Value::Null; 125]).unwrap();
    Codec::new(1000).unwrap().encode(&o.into()).unwrap();
}

fn graph_header(fields: &[&str]) -> String {
    let entries: Vec<String> = fields.iter().map(|f| format!("[\"{f}\",null]")).collect();
    format!(
        r#"{{"t":"graph","v":{{"t":"dict","v":[{}]}}}}"#,
        entries.join(",")
    )
}

fn graph_cases() -> Vec<Bad> {
    let fields = |e: &CodecError| matches!(e, CodecError::GraphFields);
    let all = [
        "n_nodes",
        "n_edges",
        "nodes_features",
        "edges_features",
        "edges",
    ];
    let mut cases = Vec::new();
    for missing in 0..5 {
        let mut f = all.to_vec();
        f.remove(missing);
        cases.push(Bad::new(
            format!("graph without {}", all[missing]),
            frame(&graph_header(&f), b""),
            fields,
        ));
    }
    let mut extra = all.to_vec();
    extra.push("n_graphs");
    cases.push(Bad::new(
        "graph with an extra field",
        frame(&graph_header(&extra), b""),
        fields,
    ));
    let mut renamed = all.to_vec();
    renamed[2] = "node_features";
    cases.push(Bad::new(
        "graph with a misspelt field",
        frame(&graph_header(&renamed), b""),
        fields,
    ));
    cases.push(Bad::new(
        "empty graph dict",
        frame(&graph_header(&[]), b""),
        fields,
    ));
    for v in [
        "null",
        "1",
        r#""n_nodes""#,
        r#"{"t":"list","v":[]}"#,
        r#"{"t":"tuple","v":[1]}"#,
        r#"{"t":"object_array","shape":[0],"v":[]}"#,
        r#"{"t":"graph","v":{"t":"dict","v":[]}}"#,
    ] {
        cases.push(Bad::header(
            &format!(r#"{{"t":"graph","v":{v}}}"#),
            b"",
            fields,
        ));
    }
    cases
}

#[test]
fn graph_with_missing_or_extra_fields_or_a_non_dict_value() {
    check(graph_cases());
    // A repeated field is a duplicate dict key.
    let mut dup: Vec<&str> = vec![
        "n_nodes",
        "n_edges",
        "nodes_features",
        "edges_features",
        "edges",
    ];
    dup[4] = "n_nodes";
    let e = decode_err(frame(&graph_header(&dup), b""));
    assert_eq!(
        e,
        CodecError::DuplicateKey {
            key: "n_nodes".into()
        }
    );
}

// ---- size limits ----

fn limit_cases() -> Vec<Bad> {
    let large = |e: &CodecError| matches!(e, CodecError::MessageTooLarge { .. });
    vec![
        Bad::new("101 bytes, limit 100", frame("null", &[0; 93]), large).limit(100),
        Bad::new("9 bytes, limit 8", frame("12345", b""), large).limit(8),
        Bad::new(
            "bytes over the limit",
            frame(r#"{"t":"bytes","offset":0,"length":100}"#, &[0; 100]),
            large,
        )
        .limit(100),
    ]
}

#[test]
fn message_over_the_limit_on_decode() {
    check(limit_cases());
    let e = Codec::new(100)
        .unwrap()
        .decode(frame("null", &[0; 93]))
        .unwrap_err();
    assert_eq!(
        e,
        CodecError::MessageTooLarge {
            size: 101,
            max: 100
        }
    );
    assert!(e.is_too_large());
}

#[test]
fn message_over_the_limit_on_encode() {
    let value = Value::bytes(vec![1u8; 100]);
    let size = Codec::default().encode(&value).unwrap().len();
    let e = Codec::new(size - 1).unwrap().encode(&value).unwrap_err();
    assert_eq!(
        e,
        CodecError::MessageTooLarge {
            size,
            max: size - 1
        }
    );
    // Attachments alone over the limit, and a header alone over the limit.
    let e = Codec::new(64)
        .unwrap()
        .encode(&NdArray::zeros(DType::F64, vec![100]).unwrap().into())
        .unwrap_err();
    assert!(
        matches!(e, CodecError::MessageTooLarge { max: 64, .. }),
        "{e:?}"
    );
    let e = Codec::new(64)
        .unwrap()
        .encode(&Value::from("x".repeat(100)))
        .unwrap_err();
    assert!(
        matches!(e, CodecError::MessageTooLarge { max: 64, .. }),
        "{e:?}"
    );
    // Many attachments whose sum passes the limit.
    let many = Value::list((0..10).map(|_| Value::bytes(vec![0u8; 10])));
    let e = Codec::new(80).unwrap().encode(&many).unwrap_err();
    assert!(
        matches!(e, CodecError::MessageTooLarge { max: 80, .. }),
        "{e:?}"
    );
}

#[test]
fn encoder_refuses_dimensions_no_decoder_accepts() {
    // A zero dimension leaves the others unconstrained by the byte count, but
    // both decoders refuse a dimension above i64::MAX (NumPy's intp), so such
    // arrays must not be built (or encoded) at all.
    let huge = i64::MAX as usize + 1;
    assert!(NdArray::zeros(DType::U8, vec![0, huge]).is_err());
    assert!(NdArray::from_bytes(DType::F32, vec![huge, 0], Bytes::new()).is_err());
    assert!(ObjectArray::new(vec![0, huge], vec![]).is_err());
    assert!(NdArray::zeros(DType::U8, vec![0, i64::MAX as usize]).is_ok());
    assert!(ObjectArray::new(vec![i64::MAX as usize, 0], vec![]).is_ok());
}

#[test]
fn values_that_cannot_be_built_report_why() {
    assert!(ObjectArray::new(vec![2], vec![Value::Null]).is_err());
    assert!(NdArray::from_shape_vec(vec![2, 2], vec![1.0f32; 3]).is_err());
    assert!(NdArray::from_bytes(DType::F32, vec![1; 33], Bytes::from(vec![0u8; 4])).is_err());
    // Dicts built in Rust cannot hold a repeated key: insert replaces.
    let mut d = dict! { "a" => 1 };
    d.insert("a", 2);
    assert_eq!(d.len(), 1);
}

// ---- the reference on the same envelopes ----

fn all_cases() -> Vec<Bad> {
    [
        too_short_cases(),
        header_length_cases(),
        utf8_cases(),
        malformed_json_cases(),
        bare_array_cases(),
        constant_cases(),
        integer_range_cases(),
        float_range_cases(),
        unknown_tag_cases(),
        non_string_tag_cases(),
        missing_tag_cases(),
        missing_member_cases(),
        extra_member_cases(),
        duplicate_member_cases(),
        bad_member_value_cases(),
        depth_cases(),
        duplicate_key_cases(),
        dict_entry_cases(),
        dtype_cases(),
        too_many_dims_cases(),
        bad_dimension_cases(),
        size_overflow_cases(),
        length_mismatch_cases(),
        attachment_cases(),
        object_array_count_cases(),
        object_array_bound_cases(),
        graph_cases(),
        limit_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[test]
fn reference_rejects_the_same_envelopes() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let cases = all_cases();
    let mut input = Vec::new();
    for c in &cases {
        input.extend_from_slice(&(c.frame.len() as u32).to_be_bytes());
        input.extend_from_slice(&(c.limit as u32).to_be_bytes());
        input.extend_from_slice(&c.frame);
    }
    let out = common::run_python(&python, "golden_reject.py", &[], Some(&input));
    let out = String::from_utf8(out).unwrap();
    let verdicts: Vec<&str> = out.lines().collect();
    assert_eq!(verdicts.len(), cases.len(), "{out}");
    let mut failures = Vec::new();
    let mut lenient = 0;
    for (c, verdict) in cases.iter().zip(&verdicts) {
        match (c.reference, *verdict) {
            (Reference::Rejects, "reject") => {}
            (Reference::Accepts(_), "accept") => lenient += 1,
            (expected, got) => failures.push(format!(
                "{}: expected the reference to {expected:?}, got {got}",
                c.name
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        lenient > 0 && lenient < cases.len() / 2,
        "{lenient} of {} accepted",
        cases.len()
    );
}
