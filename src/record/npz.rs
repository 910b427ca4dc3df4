//! NumPy's `.npy` and `.npz` file formats, written without NumPy.
//!
//! `unienv_data`'s `NPZStorage` keeps one element per file,
//! `<index>.npz`, an archive holding one array named `data`
//! (`np.savez(filename, data=array)`); `np.load` reads it back. The archive
//! is written here with its single member *stored* (no compression), which
//! `np.load` and Python's `zipfile` read as any other archive (the CRC-32 of
//! the member is checked on read).

use crate::codec::DType;
#[cfg(test)]
use crate::codec::NdArray;

/// The `.npy` header of an array of `dtype` and `shape` (format version
/// 1.0): the magic string, the header dictionary padded with spaces to a
/// multiple of 64 bytes; the elements follow in C order and in the byte
/// order `descr` names.
fn npy_header(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let shape = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        dtype.as_str()
    );
    // magic (6) + version (2) + header length (2) + header + '\n'.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    // The header of an element array is far below 64 KiB: the dims of one
    // element are at most 32.
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// The `.npy` header of one dtype and shape, built once and reused for
/// every element of a storage, with the CRC-32 state after it.
pub(crate) struct NpyHeader {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
    crc: crc32fast::Hasher,
}

impl NpyHeader {
    /// The header of arrays of `dtype` and `shape`.
    pub(crate) fn new(dtype: DType, shape: &[usize]) -> NpyHeader {
        let bytes = npy_header(dtype, shape);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&bytes);
        NpyHeader {
            dtype,
            shape: shape.to_vec(),
            bytes,
            crc,
        }
    }

    /// Whether it is the header of arrays of `dtype` and `shape`.
    pub(crate) fn is_for(&self, dtype: DType, shape: &[usize]) -> bool {
        self.dtype == dtype && self.shape == shape
    }
}

/// `cache` if it holds the header for `dtype` and `shape`; built anew
/// otherwise.
pub(crate) fn header<'a>(
    cache: &'a mut Option<NpyHeader>,
    dtype: DType,
    shape: &[usize],
) -> &'a NpyHeader {
    if !cache.as_ref().is_some_and(|h| h.is_for(dtype, shape)) {
        *cache = Some(NpyHeader::new(dtype, shape));
    }
    cache.get_or_insert_with(|| NpyHeader::new(dtype, shape))
}

/// The `.npy` bytes of `array`.
#[cfg(test)]
pub(crate) fn npy_bytes(array: &NdArray) -> Vec<u8> {
    let mut out = npy_header(array.dtype(), array.shape());
    out.extend_from_slice(array.as_bytes());
    out
}

/// A ZIP archive (stored, no compression) with one member, `data.npy`,
/// holding `array`: what `np.savez(path, data=array)` writes, as far as
/// `np.load` can tell.
#[cfg(test)]
pub(crate) fn npz_bytes(array: &NdArray) -> Vec<u8> {
    let mut out = Vec::new();
    push_npz(
        &mut out,
        &NpyHeader::new(array.dtype(), array.shape()),
        array.as_bytes(),
    );
    out
}

/// Appends to `out` the archive of [`npz_bytes`] for an array of
/// `header`'s dtype and shape whose elements are `data` (no copy beyond
/// the one into `out`).
pub(crate) fn push_npz(out: &mut Vec<u8>, header: &NpyHeader, data: &[u8]) {
    const NAME: &[u8] = b"data.npy";
    let mut hasher = header.crc.clone();
    hasher.update(data);
    let crc = hasher.finalize();
    let size = (header.bytes.len() + data.len()) as u32;
    let base = out.len();
    out.reserve(size as usize + 30 + 46 + 22 + 2 * NAME.len());
    // Local file header.
    out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
    out.extend_from_slice(&20u16.to_le_bytes()); // version needed: 2.0
    out.extend_from_slice(&0u16.to_le_bytes()); // flags
    out.extend_from_slice(&0u16.to_le_bytes()); // method: stored
    out.extend_from_slice(&0u16.to_le_bytes()); // time
    out.extend_from_slice(&0x21u16.to_le_bytes()); // date: 1980-01-01
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes()); // compressed size
    out.extend_from_slice(&size.to_le_bytes()); // uncompressed size
    out.extend_from_slice(&(NAME.len() as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // extra length
    out.extend_from_slice(NAME);
    out.extend_from_slice(&header.bytes);
    out.extend_from_slice(data);
    let central = (out.len() - base) as u32;
    // Central directory header.
    out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
    out.extend_from_slice(&20u16.to_le_bytes()); // version made by
    out.extend_from_slice(&20u16.to_le_bytes()); // version needed
    out.extend_from_slice(&0u16.to_le_bytes()); // flags
    out.extend_from_slice(&0u16.to_le_bytes()); // method
    out.extend_from_slice(&0u16.to_le_bytes()); // time
    out.extend_from_slice(&0x21u16.to_le_bytes()); // date
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&(NAME.len() as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // extra length
    out.extend_from_slice(&0u16.to_le_bytes()); // comment length
    out.extend_from_slice(&0u16.to_le_bytes()); // disk number
    out.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
    out.extend_from_slice(&0u32.to_le_bytes()); // external attributes
    out.extend_from_slice(&0u32.to_le_bytes()); // local header offset
    out.extend_from_slice(NAME);
    let central_size = (out.len() - base) as u32 - central;
    // End of central directory.
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // this disk
    out.extend_from_slice(&0u16.to_le_bytes()); // disk with the directory
    out.extend_from_slice(&1u16.to_le_bytes()); // entries on this disk
    out.extend_from_slice(&1u16.to_le_bytes()); // entries
    out.extend_from_slice(&central_size.to_le_bytes());
    out.extend_from_slice(&central.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // comment length
}

/// Whether an element of `nbytes` bytes fits the plain (non-ZIP64) archive
/// written by [`npz_bytes`].
pub(crate) fn fits(nbytes: usize) -> bool {
    nbytes < (u32::MAX as usize) - 4096
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_padded_to_64_and_names_the_dtype() {
        let a = NdArray::from_shape_vec(vec![2, 3], vec![1.0f32; 6]).unwrap();
        let b = npy_bytes(&a);
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with('\n'));
        assert_eq!(b.len(), 10 + hlen + 24);
    }

    #[test]
    fn scalar_and_vector_shapes_use_python_tuples() {
        let s = npy_bytes(&NdArray::scalar(true));
        assert!(std::str::from_utf8(&s[10..])
            .unwrap_or("")
            .contains("'shape': ()"));
        let v = NdArray::zeros(DType::I64, vec![4]).unwrap();
        let v = npy_bytes(&v);
        let text = String::from_utf8_lossy(&v[10..80]).to_string();
        assert!(
            text.contains("'descr': '<i8'") && text.contains("'shape': (4,)"),
            "{text}"
        );
    }

    #[test]
    fn npz_has_one_stored_member_with_its_crc() {
        let a = NdArray::from_vec(vec![1u8, 2, 3]);
        let z = npz_bytes(&a);
        assert_eq!(&z[..4], b"PK\x03\x04");
        let npy = npy_bytes(&a);
        assert_eq!(&z[38..38 + npy.len()], &npy[..]);
        assert_eq!(
            u32::from_le_bytes([z[14], z[15], z[16], z[17]]),
            crc32fast::hash(&npy)
        );
        let eocd = &z[z.len() - 22..];
        assert_eq!(&eocd[..4], b"PK\x05\x06");
    }
}
