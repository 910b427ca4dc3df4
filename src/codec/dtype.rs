//! NumPy-style dtype strings (`<f4`, `|u1`, `>c16`, ...) and the Rust element
//! types that correspond to them.

use half::f16;
use num_complex::Complex;
use std::fmt;

/// The kind of a numeric element, NumPy's `dtype.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `b`: booleans stored as one byte, 0 or 1.
    Bool,
    /// `i`: two's complement signed integers.
    Int,
    /// `u`: unsigned integers.
    UInt,
    /// `f`: IEEE 754 binary floating point.
    Float,
    /// `c`: complex numbers, real part then imaginary part.
    Complex,
}

/// Byte order of multi-byte elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`
    Little,
    /// `>`
    Big,
}

impl ByteOrder {
    /// The byte order of the machine this code runs on.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
}

/// A supported array element type: kind, item size and byte order.
///
/// One-byte types have no byte order; they are written with the `|` marker, as
/// NumPy's `dtype.str` does. Multi-byte types carry `<` or `>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DType {
    kind: ScalarKind,
    size: u8,
    order: ByteOrder,
}

/// Why a dtype string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported dtype {dtype:?}: {reason}")]
pub struct DTypeError {
    /// The string as received (truncated to 64 characters).
    pub dtype: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl DType {
    /// `|b1`
    pub const BOOL: DType = DType::native(ScalarKind::Bool, 1);
    /// `|i1`
    pub const I8: DType = DType::native(ScalarKind::Int, 1);
    /// native `i2`
    pub const I16: DType = DType::native(ScalarKind::Int, 2);
    /// native `i4`
    pub const I32: DType = DType::native(ScalarKind::Int, 4);
    /// native `i8`
    pub const I64: DType = DType::native(ScalarKind::Int, 8);
    /// `|u1`
    pub const U8: DType = DType::native(ScalarKind::UInt, 1);
    /// native `u2`
    pub const U16: DType = DType::native(ScalarKind::UInt, 2);
    /// native `u4`
    pub const U32: DType = DType::native(ScalarKind::UInt, 4);
    /// native `u8`
    pub const U64: DType = DType::native(ScalarKind::UInt, 8);
    /// native `f2`
    pub const F16: DType = DType::native(ScalarKind::Float, 2);
    /// native `f4`
    pub const F32: DType = DType::native(ScalarKind::Float, 4);
    /// native `f8`
    pub const F64: DType = DType::native(ScalarKind::Float, 8);
    /// native `c8`
    pub const C64: DType = DType::native(ScalarKind::Complex, 8);
    /// native `c16`
    pub const C128: DType = DType::native(ScalarKind::Complex, 16);

    const fn native(kind: ScalarKind, size: u8) -> DType {
        DType {
            kind,
            size,
            order: ByteOrder::NATIVE,
        }
    }

    /// Builds a dtype, checking that the kind and size are a supported pair.
    pub fn new(kind: ScalarKind, size: usize, order: ByteOrder) -> Option<DType> {
        let ok = match kind {
            ScalarKind::Bool => size == 1,
            ScalarKind::Int | ScalarKind::UInt => matches!(size, 1 | 2 | 4 | 8),
            ScalarKind::Float => matches!(size, 2 | 4 | 8),
            ScalarKind::Complex => matches!(size, 8 | 16),
        };
        ok.then_some(DType {
            kind,
            size: size as u8,
            // One-byte values have no byte order; keep a canonical value so
            // that equal dtypes compare equal.
            order: if size == 1 { ByteOrder::NATIVE } else { order },
        })
    }

    /// Parses a NumPy dtype string such as `<f4`, `>i8` or `|u1`.
    ///
    /// The endian marker is required. `|` is accepted only for one-byte types;
    /// one-byte types also accept `<` and `>` (NumPy treats all three alike).
    pub fn parse(s: &str) -> Result<DType, DTypeError> {
        let err = |reason| DTypeError {
            dtype: s.chars().take(64).collect(),
            reason,
        };
        let b = s.as_bytes();
        if b.len() < 3 {
            return Err(err("expected an endian marker, a kind and an item size"));
        }
        let order = match b[0] {
            b'<' => Some(ByteOrder::Little),
            b'>' => Some(ByteOrder::Big),
            b'|' => None,
            _ => return Err(err("the endian marker must be <, > or |")),
        };
        let kind = match b[1] {
            b'b' => ScalarKind::Bool,
            b'i' => ScalarKind::Int,
            b'u' => ScalarKind::UInt,
            b'f' => ScalarKind::Float,
            b'c' => ScalarKind::Complex,
            _ => return Err(err("the kind must be one of b, i, u, f, c")),
        };
        let digits = &s[2..];
        if !digits.bytes().all(|c| c.is_ascii_digit())
            || digits.len() > 2
            || digits.starts_with('0')
        {
            return Err(err("the item size must be a decimal number"));
        }
        let size: usize = digits.parse().map_err(|_| err("bad item size"))?;
        let dtype = DType::new(kind, size, order.unwrap_or(ByteOrder::NATIVE))
            .ok_or_else(|| err("unsupported kind and item size"))?;
        if order.is_none() && size != 1 {
            return Err(err("| is only allowed for one-byte types"));
        }
        Ok(dtype)
    }

    /// The element kind.
    pub fn kind(self) -> ScalarKind {
        self.kind
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        self.size as usize
    }

    /// Byte order, or `None` for one-byte types.
    pub fn byte_order(self) -> Option<ByteOrder> {
        (self.size > 1).then_some(self.order)
    }

    /// Whether the elements are stored in this machine's byte order.
    pub fn is_native(self) -> bool {
        self.size == 1 || self.order == ByteOrder::NATIVE
    }

    /// The same kind and size in native byte order.
    pub fn to_native(self) -> DType {
        DType {
            order: ByteOrder::NATIVE,
            ..self
        }
    }

    /// The same kind and size with the given byte order (ignored for one-byte types).
    pub fn with_byte_order(self, order: ByteOrder) -> DType {
        if self.size == 1 {
            self
        } else {
            DType { order, ..self }
        }
    }

    /// Size in bytes of one component that must be byte-swapped: the item
    /// size, or half of it for complex numbers.
    pub(crate) fn swap_unit(self) -> usize {
        match self.kind {
            ScalarKind::Complex => self.itemsize() / 2,
            _ => self.itemsize(),
        }
    }

    /// The NumPy `dtype.str` spelling, e.g. `<f4` or `|u1`.
    pub fn as_str(self) -> &'static str {
        let little = self.size == 1 || self.order == ByteOrder::Little;
        match (self.kind, self.size, little) {
            (ScalarKind::Bool, _, _) => "|b1",
            (ScalarKind::Int, 1, _) => "|i1",
            (ScalarKind::UInt, 1, _) => "|u1",
            (ScalarKind::Int, 2, true) => "<i2",
            (ScalarKind::Int, 2, false) => ">i2",
            (ScalarKind::Int, 4, true) => "<i4",
            (ScalarKind::Int, 4, false) => ">i4",
            (ScalarKind::Int, _, true) => "<i8",
            (ScalarKind::Int, _, false) => ">i8",
            (ScalarKind::UInt, 2, true) => "<u2",
            (ScalarKind::UInt, 2, false) => ">u2",
            (ScalarKind::UInt, 4, true) => "<u4",
            (ScalarKind::UInt, 4, false) => ">u4",
            (ScalarKind::UInt, _, true) => "<u8",
            (ScalarKind::UInt, _, false) => ">u8",
            (ScalarKind::Float, 2, true) => "<f2",
            (ScalarKind::Float, 2, false) => ">f2",
            (ScalarKind::Float, 4, true) => "<f4",
            (ScalarKind::Float, 4, false) => ">f4",
            (ScalarKind::Float, _, true) => "<f8",
            (ScalarKind::Float, _, false) => ">f8",
            (ScalarKind::Complex, 8, true) => "<c8",
            (ScalarKind::Complex, 8, false) => ">c8",
            (ScalarKind::Complex, _, true) => "<c16",
            (ScalarKind::Complex, _, false) => ">c16",
        }
    }

    /// NumPy's dtype name (`float32`, `uint8`, `bool`, ...), as used by
    /// UniEnv's space documents.
    pub fn name(self) -> &'static str {
        match (self.kind, self.size) {
            (ScalarKind::Bool, _) => "bool",
            (ScalarKind::Int, 1) => "int8",
            (ScalarKind::Int, 2) => "int16",
            (ScalarKind::Int, 4) => "int32",
            (ScalarKind::Int, _) => "int64",
            (ScalarKind::UInt, 1) => "uint8",
            (ScalarKind::UInt, 2) => "uint16",
            (ScalarKind::UInt, 4) => "uint32",
            (ScalarKind::UInt, _) => "uint64",
            (ScalarKind::Float, 2) => "float16",
            (ScalarKind::Float, 4) => "float32",
            (ScalarKind::Float, _) => "float64",
            (ScalarKind::Complex, 8) => "complex64",
            (ScalarKind::Complex, _) => "complex128",
        }
    }

    /// Parses a NumPy dtype name (`float32`, `bool`, ...) into a native dtype.
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::BOOL,
            "int8" => DType::I8,
            "int16" => DType::I16,
            "int32" => DType::I32,
            "int64" => DType::I64,
            "uint8" => DType::U8,
            "uint16" => DType::U16,
            "uint32" => DType::U32,
            "uint64" => DType::U64,
            "float16" => DType::F16,
            "float32" => DType::F32,
            "float64" => DType::F64,
            "complex64" => DType::C64,
            "complex128" => DType::C128,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values can be array elements: `bool`, the fixed-width
/// integers, [`f16`](struct@half::f16), `f32`, `f64`, and [`Complex<f32>`] / [`Complex<f64>`].
///
/// # Safety (for the crate's own use)
/// Every implementor is plain old data of exactly `DTYPE.itemsize()` bytes with
/// no padding; every bit pattern is valid except for `bool`, whose bytes must be
/// 0 or 1 (checked before any view is handed out).
pub trait Element: sealed::Sealed + Copy + Send + Sync + fmt::Debug + 'static {
    /// The native-order dtype of this element type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $d;
        }
    )*};
}

element! {
    bool => DType::BOOL,
    i8 => DType::I8,
    i16 => DType::I16,
    i32 => DType::I32,
    i64 => DType::I64,
    u8 => DType::U8,
    u16 => DType::U16,
    u32 => DType::U32,
    u64 => DType::U64,
    f16 => DType::F16,
    f32 => DType::F32,
    f64 => DType::F64,
    Complex<f32> => DType::C64,
    Complex<f64> => DType::C128,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_every_dtype() {
        for s in [
            "|b1", "|i1", "|u1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "<u2", ">u2", "<u4",
            ">u4", "<u8", ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8", "<c16",
            ">c16",
        ] {
            let d = DType::parse(s).unwrap();
            assert_eq!(d.as_str(), s);
        }
        assert_eq!(DType::parse("<u1").unwrap(), DType::U8);
        assert_eq!(DType::parse(">b1").unwrap().as_str(), "|b1");
    }

    #[test]
    fn rejects_bad_dtypes() {
        for s in [
            "", "f4", "=f4", "<f3", "<f16", "|f4", "<b2", "<c4", "<O8", "<U4", "<V8", "<f04",
            "<f+4", "float32", "<i16", "<c32", "<f4 ",
        ] {
            assert!(DType::parse(s).is_err(), "{s} should be rejected");
        }
    }
}
