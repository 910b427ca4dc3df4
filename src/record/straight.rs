//! The learner side's flattened rows written straight from a vector call's
//! stacked arrays ([`super::vector`], a flattened layout in an external
//! format such as Parquet): each sub-env's row of the observations and
//! actions is appended as float64 from the stacked bytes, and the
//! observation a transition starts from is kept as those bytes, with no
//! array, shape or [`Value`] per leaf per row
//! (`transition::row`, then [`Layout::push_flat`](super::transition::Layout::push_flat),
//! on the plain path).
//!
//! The bytes and the outcome are the plain path's: a leaf that is of its
//! space's dtype and shape, in a dtype `push_f64` converts itself, is
//! copied from its row; any other goes through the plain path's own
//! functions (`transition::array_row`, `transition::flat_leaf`). What
//! `transition::row` refuses (not a batch, too few rows, not a dict, a key
//! missing) is refused here before anything changes, as there; a leaf that
//! does not fit its space fails the transition it is part of, as
//! `push_flat` fails it (the tests in [`super::vector`] compare both paths'
//! files byte for byte).

use super::transition::{array_row, each_part, flat_leaf, push_f64_native};
use crate::codec::Value;
use crate::host::Space;

/// One (sub-)env's observation or action, converted: its flattened float64
/// bytes, or why it does not fit its space (the first leaf that does not).
pub(crate) enum Converted {
    Row(Vec<u8>),
    Unfit(String),
}

/// Row `k` of the stacked `value` (a batch of `space`, one sub-env's
/// space), converted into `out` (cleared first): `Err` for what
/// `transition::row` refuses; otherwise the row's bytes, or the first
/// leaf's error (`out` then holds no meaningful bytes).
pub(crate) fn row(
    space: &Space,
    value: &Value,
    k: usize,
    at: &str,
    mut out: Vec<u8>,
) -> Result<Converted, String> {
    out.clear();
    let mut unfit = None;
    walk(space, value, k, at, &mut out, &mut unfit)?;
    Ok(match unfit {
        None => Converted::Row(out),
        Some(e) => Converted::Unfit(e),
    })
}

/// An unstacked value of `space` (`SAME_STEP`'s `final_obs`), converted as
/// [`Layout::push_flat`](super::transition::Layout::push_flat) converts it.
pub(crate) fn value(space: &Space, value: &Value, at: &str, mut out: Vec<u8>) -> Converted {
    out.clear();
    match super::transition::push_flat_value(space, value, at, &mut out) {
        Ok(()) => Converted::Row(out),
        Err(e) => Converted::Unfit(e),
    }
}

/// `transition::row`'s walk (the same structure errors: [`each_part`]),
/// each leaf's row appended as float64 until one does not fit (kept in
/// `unfit`; the walk goes on, for the structure errors that come after it).
fn walk(
    space: &Space,
    value: &Value,
    k: usize,
    at: &str,
    out: &mut Vec<u8>,
    unfit: &mut Option<String>,
) -> Result<(), String> {
    each_part(space, value, at, &mut |space, value, at| match space {
        Space::Box(b) => leaf(b.dtype, &b.shape, value, k, at, out, unfit),
        Space::Binary(b) => leaf(b.dtype, &b.shape, value, k, at, out, unfit),
        // (A layout holds no other leaves; as `transition::row` splits them.)
        _ => {
            array_row(value, k, at)?;
            unfit.get_or_insert_with(|| format!("{at}: unsupported space"));
            Ok(())
        }
    })
}

fn leaf(
    dtype: crate::codec::DType,
    shape: &[usize],
    value: &Value,
    k: usize,
    at: &str,
    out: &mut Vec<u8>,
    unfit: &mut Option<String>,
) -> Result<(), String> {
    if let Value::Array(a) = value {
        if let Some((&n, rest)) = a.shape().split_first() {
            if unfit.is_none() && k < n && a.dtype() == dtype && rest == shape {
                let size = rest.iter().product::<usize>() * dtype.itemsize();
                if let Some(bytes) = a.as_bytes().get(k * size..(k + 1) * size) {
                    if push_f64_native(dtype, bytes, out) {
                        return Ok(());
                    }
                }
            }
        }
    }
    // The plain path: the row as `transition::row` makes it, converted as
    // `push_flat` converts it.
    let r = Value::Array(array_row(value, k, at)?);
    if unfit.is_none() {
        if let Err(e) = flat_leaf(dtype, shape, &r, at, out) {
            *unfit = Some(e);
        }
    }
    Ok(())
}
