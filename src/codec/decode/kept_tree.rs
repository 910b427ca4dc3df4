//! The attachments of a kept tree: the server's kept requests
//! (`RequestTemplate`, `request.rs`) and the client's
//! kept replies (`reply_kept.rs`) both keep a decoded tree whose arrays and
//! bytes must not hold the frame they came from, and point it at each new
//! frame's attachment section. Both walk the tree in the same order: the
//! order the encoder wrote the attachments in.

use super::*;

/// Checks that each attachment of `v` (in tree order) is the frame's bytes
/// at `at` onwards, and replaces it by a copy (a kept tree must not hold
/// the frame); `false` if one is elsewhere or the tree has nodes whose
/// attachments' order is not their tree order (graphs, object arrays).
pub(super) fn owned_attachments(v: &mut Value, frame: &Bytes, at: &mut usize) -> bool {
    let claim = |data: &[u8], at: &mut usize| -> Option<Bytes> {
        let here = frame.get(*at..*at + data.len())?;
        if !std::ptr::eq(here.as_ptr(), data.as_ptr()) {
            return None;
        }
        *at += data.len();
        Some(Bytes::copy_from_slice(data))
    };
    match v {
        Value::Bytes(b) => match claim(b, at) {
            Some(copy) => {
                *b = copy;
                true
            }
            None => false,
        },
        Value::Array(a) => {
            let Some(copy) = claim(a.as_bytes(), at) else {
                return false;
            };
            let Value::Array(a) = std::mem::take(v) else {
                return false;
            };
            let (dtype, shape, _) = a.into_parts();
            match NdArray::from_bytes(dtype, shape, copy) {
                Ok(owned) => {
                    *v = Value::Array(owned);
                    true
                }
                Err(_) => false,
            }
        }
        Value::List(items) | Value::Tuple(items) => {
            items.iter_mut().all(|i| owned_attachments(i, frame, at))
        }
        Value::Dict(d) => d.iter_mut().all(|(_, i)| owned_attachments(i, frame, at)),
        Value::Graph(_) | Value::ObjectArray(_) => false,
        Value::Null
        | Value::Bool(_)
        | Value::Int(_)
        | Value::UInt(_)
        | Value::BigInt(_)
        | Value::Float(_)
        | Value::Str(_) => true,
    }
}

/// Points each attachment of a kept tree (in tree order) at the frame's
/// bytes from `at` on.
pub(super) fn reslice(v: &mut Value, frame: &Bytes, at: &mut usize) -> Option<()> {
    match v {
        Value::Bytes(b) => {
            let end = at.checked_add(b.len()).filter(|&e| e <= frame.len())?;
            *b = frame.slice(*at..end);
            *at = end;
        }
        Value::Array(a) => {
            let end = at
                .checked_add(a.as_bytes().len())
                .filter(|&e| e <= frame.len())?;
            a.rebind(frame.slice(*at..end))?;
            *at = end;
        }
        Value::List(items) | Value::Tuple(items) => {
            for i in items {
                reslice(i, frame, at)?;
            }
        }
        Value::Dict(d) => {
            for (_, i) in d.iter_mut() {
                reslice(i, frame, at)?;
            }
        }
        // Never kept (`owned_attachments`).
        Value::Graph(_) | Value::ObjectArray(_) => return None,
        Value::Null
        | Value::Bool(_)
        | Value::Int(_)
        | Value::UInt(_)
        | Value::BigInt(_)
        | Value::Float(_)
        | Value::Str(_) => {}
    }
    Some(())
}
