//! A dict's encoded text kept to be written again: the JSON of a dict value
//! (a descriptor) with "holes" where the values of some of its top-level
//! entries go (its `revision` and `sequence`), filled from the dict being
//! encoded each time.
//!
//! The text is exactly what the writer produces for the dict, cut at the
//! holes; it is used in place of the dict only when the caller names the
//! dict as the one the text was made for (see
//! [`Codec::encode_entries_with`](super::super::Codec::encode_entries_with))
//! and the dict still has the same number of entries, integers under the
//! hole keys at the same positions, and sits no deeper than the text was
//! checked at. Whether the other entries are unchanged is the caller's
//! knowledge (a generation of the value), never guessed here.

use crate::codec::value::{Dict, Value};

/// A value dict written once, with holes for integer entries that change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DictText {
    /// The dict's JSON text without the holes' values.
    pub(super) text: Vec<u8>,
    /// The holes, in text order.
    pub(super) holes: Vec<Hole>,
    /// The dict's number of entries.
    pub(super) len: usize,
    /// What the size check counts for the dict (its strings and keys).
    pub(super) strings: usize,
    /// The deepest position the dict was checked to encode at.
    pub(super) depth: usize,
}

/// Where one integer member's value goes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Hole {
    /// Where the value goes in the text.
    pub(super) at: usize,
    /// The entry's index in the dict.
    pub(super) index: usize,
    pub(super) key: String,
}

impl DictText {
    /// Text bytes, holes excluded.
    pub(crate) fn len(&self) -> usize {
        self.text.len()
    }

    /// What the size check counts for the dict.
    pub(super) fn strings(&self) -> usize {
        self.strings
    }

    /// Whether `d`, at `depth`, can be written as this text (assuming it is
    /// the dict the text was made for, holes aside).
    fn fits(&self, d: &Dict, depth: usize) -> bool {
        depth <= self.depth
            && d.len() == self.len
            && self.holes.iter().all(|h| {
                matches!(
                    d.iter().nth(h.index),
                    Some((k, Value::Int(_) | Value::UInt(_))) if k == h.key
                )
            })
    }
}

/// The text to write for `v` (a dict at `depth`), if `texts` names it and
/// it fits.
pub(super) fn find<'t>(
    texts: &[(&Value, &'t DictText)],
    v: &Value,
    d: &Dict,
    depth: usize,
) -> Option<&'t DictText> {
    let (_, t) = texts.iter().find(|(at, _)| std::ptr::eq(*at, v))?;
    t.fits(d, depth).then_some(*t)
}

#[cfg(test)]
mod tests {
    use super::super::{encode_entries, encode_entries_with};
    use super::*;
    use crate::codec::limits::MAX_DEPTH;
    use crate::codec::{BigInt, CodecError, NdArray};

    const HOLES: [&str; 2] = ["revision", "sequence"];

    /// A descriptor-like dict: escapes, non-ASCII, every float form,
    /// nesting, and the two integer members in the middle.
    fn descriptor(id: &str, revision: i64, sequence: u64) -> Value {
        let space = Dict::new()
            .with("type", "box")
            .with("shape", Value::tuple([3i64]))
            .with(
                "low",
                Value::list([
                    Value::Float(-1.5),
                    Value::Float(f64::NEG_INFINITY),
                    0.1.into(),
                ]),
            )
            .with(
                "high",
                Value::list([Value::Float(1e16), Value::Float(f64::NAN), (-0.0).into()]),
            )
            .with("dtype", "float32");
        Value::Dict(
            Dict::new()
                .with("id", id)
                .with("kind", "env")
                .with("world_id", Value::Null)
                .with("children", Dict::new())
                .with("revision", revision)
                .with("sequence", sequence)
                .with("domain_id", "d\"\\\n\u{1}é😀")
                .with("batch_size", Value::Null)
                .with(
                    "big",
                    Value::BigInt(BigInt::parse("123456789012345678901234567890").unwrap()),
                )
                .with("render_fps", 30i64)
                .with("flags", Value::list([true, false]))
                .with("observation_space", space.clone())
                .with("action_space", space)
                .with("operations", Value::list(["render", "reset", "step"])),
        )
    }

    fn set(d: &mut Value, key: &str, v: impl Into<Value>) {
        if let Some(slot) = d.as_dict_mut().and_then(|d| d.get_mut(key)) {
            *slot = v.into();
        }
    }

    /// A call response around `descriptors`, encoded plainly and with the
    /// texts named (by index), under `max`.
    fn both(
        descriptors: &[Value],
        texts: &[Option<&DictText>],
        max: usize,
    ) -> (Result<Vec<u8>, CodecError>, Result<Vec<u8>, CodecError>) {
        let value = Value::tuple([
            Value::Array(NdArray::from_vec(vec![1.0f32, 2.0, 3.0])),
            Value::Float(-0.25),
        ]);
        let result = Value::Dict(
            Dict::new()
                .with("value", value)
                .with("descriptors", Value::List(descriptors.to_vec())),
        );
        let sid = Value::from("session");
        let entries = [("session_id", &sid), ("result", &result)];
        let Some(Value::List(list)) = result.get("descriptors") else {
            unreachable!()
        };
        let kept: Vec<(&Value, &DictText)> = list
            .iter()
            .zip(texts)
            .filter_map(|(d, t)| Some((d, (*t)?)))
            .collect();
        (
            encode_entries(&entries, max),
            encode_entries_with(&entries, &kept, max),
        )
    }

    /// Sequences and revisions through every digit-count change, several
    /// descriptors interleaved: the same bytes as the plain encoding, and
    /// the same outcome at the size limit's edge.
    #[test]
    fn kept_texts_write_the_plain_bytes() {
        let a0 = descriptor("env-a", 0, 0);
        let b0 = descriptor("env-b", 0, 0);
        let ta = DictText::new(&a0, &HOLES, 3).unwrap();
        let tb = DictText::new(&b0, &HOLES, 3).unwrap();
        let numbers: [u64; 14] = [
            0,
            1,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1000,
            65535,
            65536,
            i64::MAX as u64,
            u64::MAX,
        ];
        let mut checked = 0;
        for (i, &seq) in numbers.iter().enumerate() {
            for &rev in &[0i64, 9, 10, -1, i64::MIN] {
                let mut a = a0.clone();
                let mut b = b0.clone();
                set(&mut a, "sequence", seq);
                set(&mut a, "revision", rev);
                set(&mut b, "sequence", numbers[numbers.len() - 1 - i]);
                set(
                    &mut b,
                    "revision",
                    Value::UInt(u64::MAX - rev.unsigned_abs()),
                );
                let list = [a.clone(), b.clone(), a];
                let texts = [Some(&ta), Some(&tb), Some(&ta)];
                let (plain, kept) = both(&list, &texts, usize::MAX);
                let plain = plain.unwrap();
                assert_eq!(kept.as_ref().unwrap(), &plain, "seq {seq} rev {rev}");
                for max in [plain.len(), plain.len() - 1, plain.len() - 300, 64] {
                    let (p, k) = both(&list, &texts, max);
                    assert_eq!(p, k, "seq {seq} rev {rev} max {max}");
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 70);
    }

    /// A dict that no longer fits its text (a member added, a hole that is
    /// not an integer, deeper than checked) is written plainly.
    #[test]
    fn a_dict_that_no_longer_fits_is_written_plainly() {
        let d0 = descriptor("env-a", 3, 7);
        let t = DictText::new(&d0, &HOLES, 3).unwrap();
        let mut snap = d0.clone();
        if let Some(d) = snap.as_dict_mut() {
            d.insert(
                "snapshot",
                Dict::new().with("data", NdArray::from_vec(vec![5u8, 6])),
            );
        }
        let mut float = d0.clone();
        set(&mut float, "sequence", 7.0);
        let mut text = d0.clone();
        set(&mut text, "revision", "3");
        for d in [snap, float, text] {
            let (plain, kept) = both(&[d.clone(), d0.clone()], &[Some(&t), Some(&t)], 1 << 20);
            assert_eq!(plain.unwrap(), kept.unwrap());
            assert!(!t.fits(d.as_dict().unwrap(), 3));
        }
        // Checked at depth 1: a descriptor at depth 3 is written plainly.
        let shallow = DictText::new(&d0, &HOLES, 1).unwrap();
        assert!(!shallow.fits(d0.as_dict().unwrap(), 3));
        let (plain, kept) = both(std::slice::from_ref(&d0), &[Some(&shallow)], 1 << 20);
        assert_eq!(plain.unwrap(), kept.unwrap());
    }

    /// Near the depth limit the plain encoding's error is the outcome:
    /// a text checked at a shallower depth is not used deeper.
    #[test]
    fn the_depth_limit_is_the_plain_one() {
        let mut deep = Value::Null;
        for _ in 0..(MAX_DEPTH - 4) {
            deep = Value::list([deep]);
        }
        let mut d = descriptor("env-a", 0, 0);
        if let Some(dict) = d.as_dict_mut() {
            dict.insert("deep", deep);
        }
        // The deepest node sits at depth + 1 + (MAX_DEPTH - 4): fine at 3.
        let t = DictText::new(&d, &HOLES, 3).unwrap();
        assert!(DictText::new(&d, &HOLES, 4).is_none());
        let (plain, kept) = both(&[d.clone()], &[Some(&t)], 1 << 20);
        assert_eq!(plain.unwrap(), kept.unwrap());
        // One level deeper (the descriptor at depth 4): both refuse.
        let wrapped = Value::list([Value::list([Value::List(vec![d.clone()])])]);
        let entries = [("result", &wrapped)];
        let inner = wrapped.as_seq().unwrap()[0].as_seq().unwrap()[0]
            .as_seq()
            .unwrap();
        let kept = [(&inner[0], &t)];
        let plain = encode_entries(&entries, 1 << 20);
        assert!(matches!(plain, Err(CodecError::TooDeep { .. })));
        assert_eq!(plain, encode_entries_with(&entries, &kept, 1 << 20));
    }

    /// What cannot be kept as text: attachments, non-integer holes, depth.
    #[test]
    fn attachments_and_odd_holes_are_not_kept() {
        let mut arr = descriptor("env-a", 0, 0);
        if let Some(d) = arr.as_dict_mut() {
            d.insert("low", NdArray::from_vec(vec![1.0f64]));
        }
        assert!(DictText::new(&arr, &HOLES, 3).is_none());
        let mut bytes = descriptor("env-a", 0, 0);
        if let Some(d) = bytes.as_dict_mut() {
            d.insert("blob", Value::bytes(Vec::<u8>::new()));
        }
        assert!(DictText::new(&bytes, &HOLES, 3).is_none());
        let mut odd = descriptor("env-a", 0, 0);
        set(&mut odd, "sequence", Value::Null);
        assert!(DictText::new(&odd, &HOLES, 3).is_none());
        assert!(DictText::new(&Value::list([1i64]), &HOLES, 3).is_none());
        assert!(DictText::new(&descriptor("a", 0, 0), &HOLES, MAX_DEPTH + 1).is_none());
        // Without holes, the text is the dict's whole encoding.
        let d = descriptor("env-a", 1, 2);
        let t = DictText::new(&d, &[], 0).unwrap();
        let whole = crate::codec::header_json(&d).unwrap();
        assert_eq!(t.text, whole.as_bytes());
        assert_eq!(t.len(), whole.len());
    }

    /// The comparison has teeth: the text of another descriptor, named for
    /// this one, changes the bytes (which is why only the caller, who knows
    /// the descriptor's build, may name texts).
    #[test]
    fn a_text_named_for_another_dict_changes_the_bytes() {
        let a = descriptor("env-a", 0, 5);
        let b = descriptor("env-b", 0, 5);
        let ta = DictText::new(&a, &HOLES, 3).unwrap();
        let (plain, kept) = both(&[b], &[Some(&ta)], 1 << 20);
        assert_ne!(plain.unwrap(), kept.unwrap());
    }
}
