//! Numeric arrays: a dtype, a C-order shape and a byte buffer that is usually a
//! slice of the received frame.

use super::dtype::{DType, Element, ScalarKind};
use bytes::Bytes;
use ndarray::{ArrayBase, ArrayD, ArrayViewD, CowArray, Dimension, IxDyn};
use std::fmt;
use std::ptr::NonNull;

/// The most dimensions an array may have on the wire.
pub const MAX_DIMS: usize = 32;

/// Why an array could not be built or viewed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArrayError {
    /// More than [`MAX_DIMS`] dimensions.
    #[error("array has {ndim} dimensions, at most {MAX_DIMS} are allowed")]
    TooManyDims {
        /// Dimensions given.
        ndim: usize,
    },
    /// The element count times the item size does not fit in memory, or a
    /// dimension exceeds `i64::MAX`.
    #[error("array shape {shape:?} with item size {itemsize} overflows")]
    SizeOverflow {
        /// The shape.
        shape: Vec<usize>,
        /// Bytes per element.
        itemsize: usize,
    },
    /// The byte buffer does not hold exactly product(shape) × itemsize bytes.
    #[error("array of shape {shape:?} and dtype {dtype} needs {expected} bytes, got {actual}")]
    LengthMismatch {
        /// The shape.
        shape: Vec<usize>,
        /// The dtype.
        dtype: DType,
        /// product(shape) × itemsize.
        expected: usize,
        /// The buffer length.
        actual: usize,
    },
    /// The requested element type does not match the array's dtype.
    #[error("array has dtype {actual}, not {requested}")]
    DTypeMismatch {
        /// The array's dtype.
        actual: DType,
        /// The dtype of the requested element type.
        requested: DType,
    },
    /// A borrowed view needs native byte order and an aligned buffer.
    #[error("array of dtype {dtype} cannot be viewed in place ({reason}); use to_array or as_cow")]
    NotViewable {
        /// The array's dtype.
        dtype: DType,
        /// Byte order or alignment.
        reason: &'static str,
    },
    /// A boolean array holds a byte other than 0 or 1.
    #[error("boolean array holds the byte {byte}, not 0 or 1")]
    InvalidBool {
        /// The offending byte.
        byte: u8,
    },
}

/// Product of the dimensions, as Python's `math.prod` would compute it: zero
/// if any dimension is zero, otherwise the checked product. `None` when the
/// product overflows or when a dimension exceeds `i64::MAX`, the largest one
/// the wire allows (NumPy's `intp`): with a zero dimension elsewhere such a
/// shape would hold no bytes, yet no decoder would accept it.
pub(crate) fn element_count(shape: &[usize]) -> Option<usize> {
    if shape.iter().any(|&d| d as u64 > i64::MAX as u64) {
        return None;
    }
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// A numeric array value: dtype, shape (C order) and the raw element bytes.
///
/// Decoded arrays share the received frame's memory, so they are cheap to
/// clone and to pass along. Typed access: [`NdArray::view`] borrows in place
/// when the bytes are in native order and aligned for the element type;
/// [`NdArray::to_array`] always works and copies (swapping bytes if needed);
/// [`NdArray::as_cow`] picks whichever applies.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NdArray {
    dtype: DType,
    shape: Vec<usize>,
    data: Bytes,
}

impl NdArray {
    /// Builds an array from raw bytes, validating the dimension count and the
    /// byte length against `product(shape) × itemsize`.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, data: Bytes) -> Result<NdArray, ArrayError> {
        let expected = checked_nbytes(dtype, &shape)?;
        if expected != data.len() {
            return Err(ArrayError::LengthMismatch {
                shape,
                dtype,
                expected,
                actual: data.len(),
            });
        }
        Ok(NdArray { dtype, shape, data })
    }

    /// An array of the given dtype and shape with every byte zero.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Result<NdArray, ArrayError> {
        let n = checked_nbytes(dtype, &shape)?;
        Ok(NdArray {
            dtype,
            shape,
            data: Bytes::from(vec![0u8; n]),
        })
    }

    /// A zero-dimensional array (shape `[]`) holding one value, the way NumPy
    /// scalars travel.
    pub fn scalar<T: Element>(value: T) -> NdArray {
        NdArray {
            dtype: T::DTYPE,
            shape: Vec::new(),
            data: pod_bytes(vec![value]),
        }
    }

    /// A one-dimensional array that takes ownership of `values` without copying.
    pub fn from_vec<T: Element>(values: Vec<T>) -> NdArray {
        NdArray {
            dtype: T::DTYPE,
            shape: vec![values.len()],
            data: pod_bytes(values),
        }
    }

    /// An array of the given shape that takes ownership of `values` (C order)
    /// without copying.
    pub fn from_shape_vec<T: Element>(
        shape: Vec<usize>,
        values: Vec<T>,
    ) -> Result<NdArray, ArrayError> {
        let nbytes = values.len() * T::DTYPE.itemsize();
        NdArray::from_bytes(T::DTYPE, shape, pod_bytes(values)).map_err(|e| match e {
            ArrayError::LengthMismatch {
                shape,
                dtype,
                expected,
                ..
            } => ArrayError::LengthMismatch {
                shape,
                dtype,
                expected,
                actual: nbytes,
            },
            other => other,
        })
    }

    /// Copies any `ndarray` array (any memory layout) into C order.
    pub fn from_ndarray<T, S, D>(array: &ArrayBase<S, D>) -> NdArray
    where
        T: Element,
        S: ndarray::Data<Elem = T>,
        D: Dimension,
    {
        let shape = array.shape().to_vec();
        let values: Vec<T> = match array.as_slice() {
            Some(slice) => slice.to_vec(),
            None => array.iter().copied().collect(),
        };
        NdArray {
            dtype: T::DTYPE,
            shape,
            data: pod_bytes(values),
        }
    }

    /// The element type and byte order.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.itemsize()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The raw element bytes, C order, in the array's byte order.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// The shared byte buffer.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// Splits the array into its dtype, shape and bytes.
    pub fn into_parts(self) -> (DType, Vec<usize>, Bytes) {
        (self.dtype, self.shape, self.data)
    }

    /// Points the array at `data`, bytes of the same length (the same
    /// elements' place in another frame: a kept tree's attachment);
    /// `None`, and the array unchanged, when the length differs.
    pub(crate) fn rebind(&mut self, data: Bytes) -> Option<()> {
        (data.len() == self.data.len()).then(|| self.data = data)
    }

    fn check_type<T: Element>(&self) -> Result<(), ArrayError> {
        if self.dtype.to_native() != T::DTYPE {
            return Err(ArrayError::DTypeMismatch {
                actual: self.dtype,
                requested: T::DTYPE,
            });
        }
        Ok(())
    }

    fn check_bools(bytes: &[u8]) -> Result<(), ArrayError> {
        match bytes.iter().find(|&&b| b > 1) {
            Some(&byte) => Err(ArrayError::InvalidBool { byte }),
            None => Ok(()),
        }
    }

    /// A borrowed `ndarray` view of the elements, without copying.
    ///
    /// Fails when `T` does not match the dtype, when the bytes are not in
    /// native order or not aligned for `T`, or (for `bool`) when a byte is not 0
    /// or 1. [`NdArray::as_cow`] falls back to a copy instead.
    pub fn view<T: Element>(&self) -> Result<ArrayViewD<'_, T>, ArrayError> {
        self.check_type::<T>()?;
        if !self.dtype.is_native() {
            return Err(ArrayError::NotViewable {
                dtype: self.dtype,
                reason: "non-native byte order",
            });
        }
        let n = self.len();
        let ptr = if n == 0 {
            NonNull::<T>::dangling()
        } else {
            let ptr = self.data.as_ptr();
            if ptr.align_offset(std::mem::align_of::<T>()) != 0 {
                return Err(ArrayError::NotViewable {
                    dtype: self.dtype,
                    reason: "buffer not aligned for the element type",
                });
            }
            if T::DTYPE.kind() == ScalarKind::Bool {
                Self::check_bools(&self.data)?;
            }
            // SAFETY: the pointer is non-null (non-empty buffer) and aligned.
            unsafe { NonNull::new_unchecked(ptr as *mut T) }
        };
        // SAFETY: `data` holds exactly `n * size_of::<T>()` bytes (checked at
        // construction), aligned for T and in native order; every bit pattern is
        // a valid T (bools were checked above). The view borrows `self`, which
        // keeps the buffer alive and immutable.
        let slice = unsafe { std::slice::from_raw_parts(ptr.as_ptr() as *const T, n) };
        ArrayViewD::from_shape(IxDyn(&self.shape), slice).map_err(|_| ArrayError::SizeOverflow {
            shape: self.shape.clone(),
            itemsize: self.dtype.itemsize(),
        })
    }

    /// The elements as a flat vector in native byte order (always a copy).
    /// Boolean bytes other than 0 are read as `true`, as NumPy does.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, ArrayError> {
        self.check_type::<T>()?;
        let n = self.len();
        let mut out: Vec<T> = Vec::with_capacity(n);
        let size = self.dtype.itemsize();
        // SAFETY: `out` has capacity for n elements = n * size bytes, the source
        // holds exactly that many bytes, and the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.data.as_ptr(),
                out.as_mut_ptr() as *mut u8,
                n * size,
            );
            let bytes = std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, n * size);
            if T::DTYPE.kind() == ScalarKind::Bool {
                for b in bytes.iter_mut() {
                    *b = (*b != 0) as u8;
                }
            } else if !self.dtype.is_native() {
                swap_in_place(bytes, self.dtype.swap_unit());
            }
            // Every byte pattern is now a valid T.
            out.set_len(n);
        }
        Ok(out)
    }

    /// An owned `ndarray` array in native byte order (always a copy).
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>, ArrayError> {
        let values = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(&self.shape), values).map_err(|_| ArrayError::SizeOverflow {
            shape: self.shape.clone(),
            itemsize: self.dtype.itemsize(),
        })
    }

    /// A view when the bytes allow one, otherwise an owned copy.
    pub fn as_cow<T: Element>(&self) -> Result<CowArray<'_, T, IxDyn>, ArrayError> {
        match self.view::<T>() {
            Ok(view) => Ok(CowArray::from(view)),
            Err(ArrayError::NotViewable { .. }) | Err(ArrayError::InvalidBool { .. }) => {
                Ok(CowArray::from(self.to_array::<T>()?))
            }
            Err(e) => Err(e),
        }
    }

    /// The same array in native byte order: a cheap clone when it already is,
    /// otherwise a byte-swapped copy.
    pub fn to_native(&self) -> NdArray {
        if self.dtype.is_native() {
            return self.clone();
        }
        let mut bytes = self.data.to_vec();
        swap_in_place(&mut bytes, self.dtype.swap_unit());
        NdArray {
            dtype: self.dtype.to_native(),
            shape: self.shape.clone(),
            data: Bytes::from(bytes),
        }
    }

    /// Element `index` (flat, C order) converted to `f64`; complex values give
    /// their real part. `None` when out of range.
    pub fn get_f64(&self, index: usize) -> Option<f64> {
        self.get_complex(index).map(|(re, _)| re)
    }

    /// Element `index` (flat, C order) as (real, imaginary) parts.
    pub fn get_complex(&self, index: usize) -> Option<(f64, f64)> {
        let size = self.dtype.itemsize();
        let start = index.checked_mul(size)?;
        let raw = self.data.get(start..start + size)?;
        let mut buf = [0u8; 16];
        buf[..size].copy_from_slice(raw);
        if !self.dtype.is_native() {
            swap_in_place(&mut buf[..size], self.dtype.swap_unit());
        }
        let b = &buf[..size];
        let real = |n: usize| -> f64 {
            match n {
                2 => half::f16::from_ne_bytes([b[0], b[1]]).to_f64(),
                4 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64,
                _ => f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            }
        };
        Some(match (self.dtype.kind(), size) {
            (ScalarKind::Bool, _) => ((b[0] != 0) as u8 as f64, 0.0),
            (ScalarKind::Int, 1) => (b[0] as i8 as f64, 0.0),
            (ScalarKind::Int, 2) => (i16::from_ne_bytes([b[0], b[1]]) as f64, 0.0),
            (ScalarKind::Int, 4) => (i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64, 0.0),
            (ScalarKind::Int, _) => (i64::from_ne_bytes(b.try_into().ok()?) as f64, 0.0),
            (ScalarKind::UInt, 1) => (b[0] as f64, 0.0),
            (ScalarKind::UInt, 2) => (u16::from_ne_bytes([b[0], b[1]]) as f64, 0.0),
            (ScalarKind::UInt, 4) => (u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64, 0.0),
            (ScalarKind::UInt, _) => (u64::from_ne_bytes(b.try_into().ok()?) as f64, 0.0),
            (ScalarKind::Float, n) => (real(n), 0.0),
            (ScalarKind::Complex, 8) => {
                let re = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64;
                let im = f32::from_ne_bytes([b[4], b[5], b[6], b[7]]) as f64;
                (re, im)
            }
            (ScalarKind::Complex, _) => {
                let re = f64::from_ne_bytes(b[..8].try_into().ok()?);
                let im = f64::from_ne_bytes(b[8..16].try_into().ok()?);
                (re, im)
            }
        })
    }

    /// Every element converted to `f64` (complex values give their real
    /// part), flat in C order.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        if let Ok(view) = self.view::<f32>() {
            return view.iter().map(|&x| x as f64).collect();
        }
        (0..self.len()).filter_map(|i| self.get_f64(i)).collect()
    }

    /// Element `index` formatted for people: integers exactly, floats in
    /// shortest round-trip form, booleans as `True`/`False`, complex as `a+bj`.
    pub fn format_element(&self, index: usize) -> Option<String> {
        let size = self.dtype.itemsize();
        let raw = self.data.get(index * size..index * size + size)?;
        let mut buf = [0u8; 16];
        buf[..size].copy_from_slice(raw);
        if !self.dtype.is_native() {
            swap_in_place(&mut buf[..size], self.dtype.swap_unit());
        }
        let b = &buf[..size];
        Some(match self.dtype.kind() {
            ScalarKind::Bool => if b[0] != 0 { "True" } else { "False" }.to_string(),
            ScalarKind::Int => match size {
                1 => (b[0] as i8).to_string(),
                2 => i16::from_ne_bytes([b[0], b[1]]).to_string(),
                4 => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]).to_string(),
                _ => i64::from_ne_bytes(b.try_into().ok()?).to_string(),
            },
            ScalarKind::UInt => match size {
                1 => b[0].to_string(),
                2 => u16::from_ne_bytes([b[0], b[1]]).to_string(),
                4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]).to_string(),
                _ => u64::from_ne_bytes(b.try_into().ok()?).to_string(),
            },
            ScalarKind::Float => match size {
                2 => format!("{}", half::f16::from_ne_bytes([b[0], b[1]])),
                4 => format!("{:?}", f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
                _ => format!("{:?}", f64::from_ne_bytes(b.try_into().ok()?)),
            },
            ScalarKind::Complex => {
                let (re, im) = self.get_complex(index)?;
                format!("{re}{im:+}j")
            }
        })
    }
}

impl fmt::Debug for NdArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "array(dtype={}, shape={:?}", self.dtype, self.shape)?;
        let n = self.len();
        let shown = n.min(8);
        f.write_str(", [")?;
        for i in 0..shown {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&self.format_element(i).unwrap_or_default())?;
        }
        if n > shown {
            write!(f, ", … {} more", n - shown)?;
        }
        f.write_str("])")
    }
}

fn checked_nbytes(dtype: DType, shape: &[usize]) -> Result<usize, ArrayError> {
    if shape.len() > MAX_DIMS {
        return Err(ArrayError::TooManyDims { ndim: shape.len() });
    }
    element_count(shape)
        .and_then(|n| n.checked_mul(dtype.itemsize()))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| ArrayError::SizeOverflow {
            shape: shape.to_vec(),
            itemsize: dtype.itemsize(),
        })
}

/// Reverses the bytes of every `unit`-sized chunk.
pub(crate) fn swap_in_place(bytes: &mut [u8], unit: usize) {
    if unit > 1 {
        for chunk in bytes.chunks_exact_mut(unit) {
            chunk.reverse();
        }
    }
}

/// Owns a `Vec<T>` of plain-old-data elements and exposes its bytes.
struct PodVec<T: Element>(Vec<T>);

impl<T: Element> AsRef<[u8]> for PodVec<T> {
    fn as_ref(&self) -> &[u8] {
        let len = self.0.len() * std::mem::size_of::<T>();
        // SAFETY: Element types are plain old data without padding, so their
        // memory is `len` initialized bytes; the slice borrows the vector.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr() as *const u8, len) }
    }
}

/// Moves a vector of elements into a `Bytes` without copying.
fn pod_bytes<T: Element>(values: Vec<T>) -> Bytes {
    if std::mem::size_of::<T>() == 1 {
        // SAFETY: one-byte Element types (bool, i8, u8) have the layout of u8.
        let mut values = std::mem::ManuallyDrop::new(values);
        let v = unsafe {
            Vec::from_raw_parts(
                values.as_mut_ptr() as *mut u8,
                values.len(),
                values.capacity(),
            )
        };
        return Bytes::from(v);
    }
    Bytes::from_owner(PodVec(values))
}

impl<T: Element, D: Dimension> From<ndarray::Array<T, D>> for NdArray {
    /// Takes ownership without copying when the array is in standard (C)
    /// layout; otherwise copies into C order.
    fn from(array: ndarray::Array<T, D>) -> NdArray {
        if array.is_standard_layout() {
            let shape = array.shape().to_vec();
            let n = array.len();
            let (vec, offset) = array.into_raw_vec_and_offset();
            if vec.len() == n && offset.unwrap_or(0) == 0 {
                return NdArray {
                    dtype: T::DTYPE,
                    shape,
                    data: pod_bytes(vec),
                };
            }
            let start = offset.unwrap_or(0);
            let values = vec[start..start + n].to_vec();
            return NdArray {
                dtype: T::DTYPE,
                shape,
                data: pod_bytes(values),
            };
        }
        NdArray::from_ndarray(&array)
    }
}

impl<'a, T: Element, D: Dimension> From<ndarray::ArrayView<'a, T, D>> for NdArray {
    fn from(array: ndarray::ArrayView<'a, T, D>) -> NdArray {
        NdArray::from_ndarray(&array)
    }
}

impl<T: Element, D: Dimension> From<&ndarray::Array<T, D>> for NdArray {
    fn from(array: &ndarray::Array<T, D>) -> NdArray {
        NdArray::from_ndarray(array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use ndarray::{array, s, Array3};
    use num_complex::Complex;

    #[test]
    fn owned_array_moves_without_copy() {
        let a = Array3::<f32>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as f32);
        let ptr = a.as_ptr() as *const u8;
        let v = NdArray::from(a.clone());
        assert_eq!(v.shape(), &[2, 3, 4]);
        let moved = NdArray::from(a);
        assert_eq!(moved.as_bytes().as_ptr(), ptr);
        assert_eq!(v.view::<f32>().unwrap()[[1, 2, 3]], 123.0);
    }

    #[test]
    fn non_standard_layouts_are_written_in_c_order() {
        let a = array![[1i32, 2, 3], [4, 5, 6]];
        let t = NdArray::from(a.t().to_owned());
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
        let strided = NdArray::from_ndarray(&a.slice(s![.., ..;2]));
        assert_eq!(strided.shape(), &[2, 2]);
        assert_eq!(strided.to_vec::<i32>().unwrap(), vec![1, 3, 4, 6]);
        let rev = NdArray::from(a.slice(s![..;-1, ..]));
        assert_eq!(rev.to_vec::<i32>().unwrap(), vec![4, 5, 6, 1, 2, 3]);
    }

    #[test]
    fn big_endian_is_swapped_on_copy_and_refused_as_view() {
        let data = Bytes::from(vec![0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]);
        let a = NdArray::from_bytes(
            DType::F32.with_byte_order(crate::codec::ByteOrder::Big),
            vec![2],
            data,
        )
        .unwrap();
        assert!(matches!(
            a.view::<f32>(),
            Err(ArrayError::NotViewable { .. })
        ));
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert_eq!(a.as_cow::<f32>().unwrap().as_slice().unwrap(), &[1.0, 2.0]);
        let n = a.to_native();
        assert!(n.dtype().is_native());
        assert_eq!(n.view::<f32>().unwrap().as_slice().unwrap(), &[1.0, 2.0]);
    }

    #[test]
    fn complex_swaps_each_component() {
        let c = NdArray::from_vec(vec![Complex::new(1.5f32, -2.0)]);
        let mut be = c.as_bytes().to_vec();
        swap_in_place(&mut be, 4);
        let b = NdArray::from_bytes(
            DType::C64.with_byte_order(crate::codec::ByteOrder::Big),
            vec![1],
            Bytes::from(be),
        )
        .unwrap();
        assert_eq!(
            b.to_vec::<Complex<f32>>().unwrap(),
            vec![Complex::new(1.5, -2.0)]
        );
        assert_eq!(b.get_complex(0), Some((1.5, -2.0)));
    }

    #[test]
    fn dtype_mismatch_and_length_checks() {
        let a = NdArray::from_vec(vec![1u16, 2]);
        assert!(matches!(
            a.view::<i16>(),
            Err(ArrayError::DTypeMismatch { .. })
        ));
        assert!(NdArray::from_bytes(DType::F32, vec![3], Bytes::from(vec![0u8; 8])).is_err());
        assert!(NdArray::from_bytes(DType::F32, vec![1; 33], Bytes::from(vec![0u8; 4])).is_err());
        assert!(NdArray::from_bytes(DType::F32, vec![usize::MAX, 2], Bytes::new()).is_err());
        let empty =
            NdArray::from_bytes(DType::F64, vec![i64::MAX as usize, 0], Bytes::new()).unwrap();
        assert!(empty.is_empty());
        assert!(NdArray::from_bytes(DType::F64, vec![usize::MAX, 0], Bytes::new()).is_err());
    }

    #[test]
    fn bools_and_halves() {
        let b = NdArray::from_bytes(DType::BOOL, vec![3], Bytes::from(vec![0u8, 1, 2])).unwrap();
        assert!(matches!(
            b.view::<bool>(),
            Err(ArrayError::InvalidBool { byte: 2 })
        ));
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![false, true, true]);
        let h = NdArray::from_vec(vec![f16::from_f32(0.5)]);
        assert_eq!(h.get_f64(0), Some(0.5));
        let s = NdArray::scalar(7i64);
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(
            s.view::<i64>()
                .unwrap()
                .into_dimensionality::<ndarray::Ix0>()
                .unwrap()[()],
            7
        );
    }

    #[test]
    fn zero_size_views() {
        let a = NdArray::from_shape_vec::<f64>(vec![0, 5], vec![]).unwrap();
        assert_eq!(a.view::<f64>().unwrap().shape(), &[0, 5]);
        assert_eq!(a.to_array::<f64>().unwrap().shape(), &[0, 5]);
    }
}
