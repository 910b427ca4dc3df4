//! One Parquet piece (`part-NNNNNN.parquet`) of a `ParquetStorage`
//! column, encoded from the rows' bytes and decoded back into them.
//!
//! A piece is the file pyarrow writes of unienv_data's table
//! (`_numpy_arrays_to_arrow_table`: a column `data`) as
//! `_write_piece_to_disk` does, minus the dictionary encoding and column
//! statistics its reader never uses: data pages of version 1, PLAIN
//! values, snappy; but in a row group per commit rather than one in all,
//! so that a commit encodes only its own rows and copies the earlier row
//! groups' bytes (pyarrow reads the row groups of a piece as one table). The Parquet schema is pyarrow's for
//! that table:
//!
//! ```text
//! required group schema {
//!   optional <type> data;                          (shape ())
//!   optional group data (LIST) {                   (any other shape)
//!     repeated group list { optional <type> element; }
//!   }
//! }
//! ```
//!
//! with `<type>` as pyarrow stores the NumPy dtype (int8 to uint32 in
//! INT32 with their integer annotation, uint64 in INT64, float16 in a
//! 2-byte FIXED_LEN_BYTE_ARRAY annotated FLOAT16), and the key-value
//! metadata pyarrow writes: `ARROW:schema` (see [`arrow_schema`]) and
//! `column_shapes`.

use super::arrow_schema;
use crate::codec::{DType, ScalarKind};
use bytes::Bytes;
use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use parquet::column::reader::ColumnReader;
use parquet::column::writer::{ColumnCloseResult, ColumnWriter};
use parquet::data_type::{ByteArray, FixedLenByteArray};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, KeyValue};
use parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesPtr, WriterVersion,
};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};
use std::path::Path;
use std::sync::Arc;

/// Why a piece could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum PieceError {
    /// The Parquet library's error.
    #[error("parquet: {0}")]
    Parquet(#[from] ParquetError),
    /// Reading the file.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A piece that does not hold what the storage declares.
    #[error("{0}")]
    Content(String),
}

/// One row group of a piece: its column chunk (where it is in the file)
/// and its rows.
#[derive(Clone)]
pub(super) struct Group {
    chunk: ColumnChunkMetaData,
    rows: u64,
}

/// A piece as written: its bytes and its row groups (to be copied into
/// the next version of the piece, see [`PieceCodec::encode`]).
#[derive(Clone, Default)]
pub(super) struct Encoded {
    pub file: Bytes,
    pub groups: Vec<Group>,
}

/// How one column's pieces are encoded: its schema, writer properties and
/// the definition and repetition levels of its values.
pub(super) struct PieceCodec {
    /// The element's dtype (native byte order).
    dtype: DType,
    /// Values per row.
    elements: usize,
    /// Whether rows are lists (any shape but `()`).
    list: bool,
    schema: TypePtr,
    props: WriterPropertiesPtr,
    /// Per value, its definition level (every value present) and, for
    /// lists, its repetition level (0 starts a row); grown on demand.
    def: Vec<i16>,
    rep: Vec<i16>,
}

/// The physical type and annotation pyarrow gives a NumPy dtype.
fn physical(dtype: DType) -> Option<(Physical, Option<LogicalType>, i32)> {
    let int = |bits: i8, signed: bool| {
        Some(LogicalType::Integer {
            bit_width: bits,
            is_signed: signed,
        })
    };
    Some(match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Bool, 1) => (Physical::BOOLEAN, None, 0),
        (ScalarKind::Int, 1) => (Physical::INT32, int(8, true), 0),
        (ScalarKind::Int, 2) => (Physical::INT32, int(16, true), 0),
        (ScalarKind::Int, 4) => (Physical::INT32, None, 0),
        (ScalarKind::Int, 8) => (Physical::INT64, None, 0),
        (ScalarKind::UInt, 1) => (Physical::INT32, int(8, false), 0),
        (ScalarKind::UInt, 2) => (Physical::INT32, int(16, false), 0),
        (ScalarKind::UInt, 4) => (Physical::INT32, int(32, false), 0),
        (ScalarKind::UInt, 8) => (Physical::INT64, int(64, false), 0),
        (ScalarKind::Float, 2) => (
            Physical::FIXED_LEN_BYTE_ARRAY,
            Some(LogicalType::Float16),
            2,
        ),
        (ScalarKind::Float, 4) => (Physical::FLOAT, None, 0),
        (ScalarKind::Float, 8) => (Physical::DOUBLE, None, 0),
        _ => return None,
    })
}

/// `json.dumps(value)` of a shape: `[3, 2]`, `[]`.
pub(super) fn shape_json(shape: &[usize]) -> String {
    let items: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", items.join(", "))
}

impl PieceCodec {
    /// The codec of a column of `dtype` elements of `shape`, or why
    /// unienv_data's Parquet storage cannot hold it.
    pub(super) fn new(dtype: DType, shape: &[usize]) -> Result<PieceCodec, String> {
        let dtype = dtype.to_native();
        let unsupported = || format!("{} elements are not stored in Parquet", dtype.name());
        let (physical, logical, length) = physical(dtype).ok_or_else(unsupported)?;
        let elements: usize = shape.iter().product();
        let list = !shape.is_empty();
        if list && elements == 0 {
            return Err(format!(
                "elements of shape {shape:?} (no values) are not stored in Parquet"
            ));
        }
        let shapes = format!("{{\"data\": {}}}", shape_json(shape));
        let message = arrow_schema::schema_message(dtype, list.then_some(elements), &shapes)
            .ok_or_else(unsupported)?;
        let leaf = |name: &str, repetition: Repetition| {
            Type::primitive_type_builder(name, physical)
                .with_repetition(repetition)
                .with_logical_type(logical.clone())
                .with_length(length)
                .build()
        };
        let build = || -> Result<Type, ParquetError> {
            let data = if list {
                let element = leaf("element", Repetition::OPTIONAL)?;
                let repeated = Type::group_type_builder("list")
                    .with_repetition(Repetition::REPEATED)
                    .with_fields(vec![Arc::new(element)])
                    .build()?;
                Type::group_type_builder("data")
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(Some(LogicalType::List))
                    .with_fields(vec![Arc::new(repeated)])
                    .build()?
            } else {
                leaf("data", Repetition::OPTIONAL)?
            };
            Type::group_type_builder("schema")
                .with_fields(vec![Arc::new(data)])
                .build()
        };
        let schema = Arc::new(build().map_err(|e| e.to_string())?);
        let metadata = vec![
            KeyValue::new("ARROW:schema".to_string(), arrow_schema::base64(&message)),
            KeyValue::new("column_shapes".to_string(), shapes),
        ];
        let props = WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(Compression::SNAPPY)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::None)
            .set_offset_index_disabled(true)
            .set_key_value_metadata(Some(metadata))
            .build();
        Ok(PieceCodec {
            dtype,
            elements,
            list,
            schema,
            props: Arc::new(props),
            def: Vec::new(),
            rep: Vec::new(),
        })
    }

    /// Bytes of one row.
    pub(super) fn row_bytes(&self) -> usize {
        self.elements * self.dtype.itemsize()
    }

    /// Encodes a piece into `out` (cleared first): the row groups of
    /// `earlier` (a piece this codec wrote, `earlier.file`), copied as they
    /// are, then `rows` more rows (their bytes back to back, C order) in a
    /// row group of their own; returns the new piece's row groups.
    pub(super) fn encode(
        &mut self,
        earlier: &Encoded,
        bytes: &[u8],
        rows: usize,
        out: &mut Vec<u8>,
    ) -> Result<Vec<Group>, PieceError> {
        let values = rows * self.elements;
        if bytes.len() != rows * self.row_bytes() {
            return Err(PieceError::Content(format!(
                "{} bytes for {rows} rows of {} bytes",
                bytes.len(),
                self.row_bytes()
            )));
        }
        let max_def = if self.list { 3 } else { 1 };
        if self.def.len() < values {
            self.def.resize(values, max_def);
            let elements = self.elements;
            self.rep = (0..values).map(|i| i16::from(i % elements != 0)).collect();
        }
        let def = Some(&self.def[..values]);
        let rep = self.list.then(|| &self.rep[..values]);
        out.clear();
        let mut file =
            SerializedFileWriter::new(&mut *out, self.schema.clone(), self.props.clone())?;
        for g in &earlier.groups {
            let mut group = file.next_row_group()?;
            group.append_column(
                &earlier.file,
                ColumnCloseResult {
                    bytes_written: u64::try_from(g.chunk.compressed_size()).unwrap_or(0),
                    rows_written: g.rows,
                    metadata: g.chunk.clone(),
                    bloom_filter: None,
                    column_index: None,
                    offset_index: None,
                },
            )?;
            group.close()?;
        }
        let mut group = file.next_row_group()?;
        let mut column = group
            .next_column()?
            .ok_or_else(|| PieceError::Content("the schema has no column".into()))?;
        let size = self.dtype.itemsize();
        let kind = self.dtype.kind();
        match column.untyped() {
            ColumnWriter::BoolColumnWriter(w) => {
                let v: Vec<bool> = bytes.iter().map(|&b| b != 0).collect();
                w.write_batch(&v, def, rep)?;
            }
            ColumnWriter::Int32ColumnWriter(w) => {
                let v: Vec<i32> = bytes
                    .chunks_exact(size)
                    .map(|c| match (kind, size) {
                        (ScalarKind::Int, 1) => i32::from(c[0] as i8),
                        (ScalarKind::UInt, 1) => i32::from(c[0]),
                        (ScalarKind::Int, 2) => i32::from(i16::from_ne_bytes([c[0], c[1]])),
                        (ScalarKind::UInt, 2) => i32::from(u16::from_ne_bytes([c[0], c[1]])),
                        // int32, and uint32 kept as its bits (UINT_32).
                        _ => i32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
                    })
                    .collect();
                w.write_batch(&v, def, rep)?;
            }
            ColumnWriter::Int64ColumnWriter(w) => {
                let v: Vec<i64> = bytes
                    .chunks_exact(8)
                    .map(ne_array)
                    .map(i64::from_ne_bytes)
                    .collect();
                w.write_batch(&v, def, rep)?;
            }
            ColumnWriter::FloatColumnWriter(w) => {
                let v: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(ne_array)
                    .map(f32::from_ne_bytes)
                    .collect();
                w.write_batch(&v, def, rep)?;
            }
            ColumnWriter::DoubleColumnWriter(w) => {
                let v: Vec<f64> = bytes
                    .chunks_exact(8)
                    .map(ne_array)
                    .map(f64::from_ne_bytes)
                    .collect();
                w.write_batch(&v, def, rep)?;
            }
            ColumnWriter::FixedLenByteArrayColumnWriter(w) => {
                // float16, stored little-endian.
                let v: Vec<FixedLenByteArray> = bytes
                    .chunks_exact(2)
                    .map(|c| {
                        let le = u16::from_ne_bytes([c[0], c[1]]).to_le_bytes();
                        FixedLenByteArray::from(ByteArray::from(le.to_vec()))
                    })
                    .collect();
                w.write_batch(&v, def, rep)?;
            }
            _ => return Err(PieceError::Content("an unexpected column type".into())),
        }
        column.close()?;
        group.close()?;
        let metadata = file.close()?;
        Ok(metadata
            .row_groups()
            .iter()
            .map(|g| Group {
                chunk: g.column(0).clone(),
                rows: u64::try_from(g.num_rows()).unwrap_or(0),
            })
            .collect())
    }

    /// Reads the piece at `path` (ours, or pyarrow's of the same table)
    /// and appends its first `rows` rows' bytes to `out`.
    pub(super) fn decode(
        &self,
        path: &Path,
        rows: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), PieceError> {
        let reader = SerializedFileReader::new(std::fs::File::open(path)?)?;
        let want = rows * self.elements;
        let start = out.len();
        for g in 0..reader.num_row_groups() {
            let got = (out.len() - start) / self.dtype.itemsize();
            if got >= want {
                break;
            }
            let group = reader.get_row_group(g)?;
            let records = usize::try_from(group.metadata().num_rows()).unwrap_or(0);
            self.decode_group(group.get_column_reader(0)?, records, out)?;
        }
        let have = (out.len() - start) / self.dtype.itemsize();
        if have < want {
            return Err(PieceError::Content(format!(
                "{} holds {have} values, not the {want} of {rows} rows",
                path.display()
            )));
        }
        out.truncate(start + want * self.dtype.itemsize());
        Ok(())
    }

    /// Appends one row group's values (`records` rows) to `out`.
    fn decode_group(
        &self,
        reader: ColumnReader,
        records: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), PieceError> {
        let (mut def, mut rep) = (Vec::new(), Vec::new());
        let rep_levels = if self.list { Some(&mut rep) } else { None };
        let (size, kind) = (self.dtype.itemsize(), self.dtype.kind());
        let levels = match reader {
            ColumnReader::BoolColumnReader(mut r) => {
                let mut v = Vec::new();
                let (_, _, levels) = r.read_records(records, Some(&mut def), rep_levels, &mut v)?;
                out.extend(v.iter().map(|&b| u8::from(b)));
                levels
            }
            ColumnReader::Int32ColumnReader(mut r) => {
                let mut v = Vec::new();
                let (_, _, levels) = r.read_records(records, Some(&mut def), rep_levels, &mut v)?;
                for x in v {
                    // Narrowed back to the element's width (its bits).
                    match (kind, size) {
                        (_, 1) => out.push(x as u8),
                        (ScalarKind::Int, 2) => out.extend_from_slice(&(x as i16).to_ne_bytes()),
                        (_, 2) => out.extend_from_slice(&(x as u16).to_ne_bytes()),
                        _ => out.extend_from_slice(&x.to_ne_bytes()),
                    }
                }
                levels
            }
            ColumnReader::Int64ColumnReader(mut r) => {
                let mut v = Vec::new();
                let (_, _, levels) = r.read_records(records, Some(&mut def), rep_levels, &mut v)?;
                v.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_ne_bytes()));
                levels
            }
            ColumnReader::FloatColumnReader(mut r) => {
                let mut v = Vec::new();
                let (_, _, levels) = r.read_records(records, Some(&mut def), rep_levels, &mut v)?;
                v.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_ne_bytes()));
                levels
            }
            ColumnReader::DoubleColumnReader(mut r) => {
                let mut v = Vec::new();
                let (_, _, levels) = r.read_records(records, Some(&mut def), rep_levels, &mut v)?;
                v.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_ne_bytes()));
                levels
            }
            ColumnReader::FixedLenByteArrayColumnReader(mut r) if kind == ScalarKind::Float => {
                let mut v = Vec::new();
                let (_, _, levels) = r.read_records(records, Some(&mut def), rep_levels, &mut v)?;
                for x in v {
                    let b = x.data();
                    if b.len() != 2 {
                        return Err(PieceError::Content("a float16 value not of 2 bytes".into()));
                    }
                    out.extend_from_slice(&u16::from_le_bytes([b[0], b[1]]).to_ne_bytes());
                }
                levels
            }
            _ => return Err(PieceError::Content("a column of another type".into())),
        };
        let max_def = if self.list { 3 } else { 1 };
        if def.len() != levels || def.iter().any(|&d| d != max_def) {
            return Err(PieceError::Content("a piece with missing values".into()));
        }
        Ok(())
    }
}

fn ne_array<const N: usize>(c: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(c);
    a
}
