//! The `ARROW:schema` key of a piece's Parquet metadata: the Arrow schema
//! of unienv_data's table (`_numpy_arrays_to_arrow_table`), which pyarrow
//! writes into every file and reads back to restore Arrow types that
//! Parquet cannot say (a `fixed_size_list`, which `unienv_data`'s reader
//! needs for every multi-element column).
//!
//! The value is the base64 of an Arrow IPC schema message: the
//! continuation marker `0xFFFFFFFF`, the flatbuffer's length (padded so
//! that the message ends on 8 bytes), a `Message` flatbuffer whose header
//! is the `Schema`, and zero padding. The flatbuffer is built with the
//! calls Arrow C++ makes (`SchemaToFlatbuffer`, `FieldToFlatbuffer`, the
//! generated `Create*` functions, which add a table's fields largest
//! first, the last declared first), so that the bytes are pyarrow's
//! (python/tests/test_record_parquet.py compares them).
//!
//! The schema: one field `data`, nullable, either the element's type
//! (shape `()`) or `fixed_size_list<item: type>[n]` (`n` the element's
//! size), and the schema metadata `column_shapes` (`{"data": [..]}`).

use crate::codec::{DType, ScalarKind};
use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

// Arrow's `Type` union (Schema.fbs).
const TYPE_INT: u8 = 2;
const TYPE_FLOATING_POINT: u8 = 3;
const TYPE_BOOL: u8 = 6;
const TYPE_FIXED_SIZE_LIST: u8 = 16;
// `MessageHeader::Schema` and `MetadataVersion::V5` (Message.fbs, Schema.fbs).
const HEADER_SCHEMA: u8 = 1;
const METADATA_V5: i16 = 4;

/// A table field's vtable slot: 4 + 2 × its id.
const fn slot(id: u16) -> u16 {
    4 + 2 * id
}

/// The Arrow type of an element dtype: `(Type union tag, table)`, or
/// `None` for a dtype unienv_data's Parquet storage does not hold (complex).
fn element_type(
    fbb: &mut FlatBufferBuilder<'_>,
    dtype: DType,
) -> Option<(u8, WIPOffset<UnionWIPOffset>)> {
    let bits = i32::try_from(dtype.itemsize() * 8).ok()?;
    match dtype.kind() {
        ScalarKind::Bool => {
            let t = fbb.start_table();
            Some((TYPE_BOOL, fbb.end_table(t).as_union_value()))
        }
        ScalarKind::Int | ScalarKind::UInt => {
            // CreateInt: bitWidth (int), is_signed (bool).
            let t = fbb.start_table();
            fbb.push_slot::<i32>(slot(0), bits, 0);
            fbb.push_slot::<bool>(slot(1), dtype.kind() == ScalarKind::Int, false);
            Some((TYPE_INT, fbb.end_table(t).as_union_value()))
        }
        ScalarKind::Float => {
            // Precision: HALF 0, SINGLE 1, DOUBLE 2.
            let precision: i16 = match bits {
                16 => 0,
                32 => 1,
                64 => 2,
                _ => return None,
            };
            let t = fbb.start_table();
            fbb.push_slot::<i16>(slot(0), precision, 0);
            Some((TYPE_FLOATING_POINT, fbb.end_table(t).as_union_value()))
        }
        ScalarKind::Complex => None,
    }
}

/// A nullable field `name` of `dtype` (a `fixed_size_list` of `list`
/// elements named `item` when `list` is given), as `FieldToFlatbuffer`
/// builds it: the type (its children first), the name, the children
/// vector, then the table.
fn field(
    fbb: &mut FlatBufferBuilder<'_>,
    name: &str,
    dtype: DType,
    list: Option<i32>,
) -> Option<WIPOffset<flatbuffers::TableFinishedWIPOffset>> {
    let mut children = Vec::new();
    let (tag, type_table) = match list {
        None => element_type(fbb, dtype)?,
        Some(n) => {
            children.push(field(fbb, "item", dtype, None)?);
            let t = fbb.start_table();
            fbb.push_slot::<i32>(slot(0), n, 0);
            (TYPE_FIXED_SIZE_LIST, fbb.end_table(t).as_union_value())
        }
    };
    let name = fbb.create_string(name);
    let children = fbb.create_vector(&children);
    // CreateField: children (5), type (3), name (0), type_type (2), nullable (1).
    let t = fbb.start_table();
    fbb.push_slot_always(slot(5), children);
    fbb.push_slot_always(slot(3), type_table);
    fbb.push_slot_always(slot(0), name);
    fbb.push_slot::<u8>(slot(2), tag, 0);
    fbb.push_slot::<bool>(slot(1), true, false);
    Some(fbb.end_table(t))
}

/// The IPC schema message of a column `data` of `dtype` elements of
/// `elements` values (`None`: shape `()`), with the schema metadata
/// `column_shapes` = `shapes_json` (`None` for a dtype Arrow's Parquet
/// storage does not hold).
pub(super) fn schema_message(
    dtype: DType,
    elements: Option<usize>,
    shapes_json: &str,
) -> Option<Vec<u8>> {
    let mut fbb = FlatBufferBuilder::new();
    let list = match elements {
        None => None,
        Some(n) => Some(i32::try_from(n).ok()?),
    };
    let data = field(&mut fbb, "data", dtype, list)?;
    let fields = fbb.create_vector(&[data]);
    // KeyValueMetadataToFlatbuffer: key, value, CreateKeyValue (value, key).
    let key = fbb.create_string("column_shapes");
    let value = fbb.create_string(shapes_json);
    let t = fbb.start_table();
    fbb.push_slot_always(slot(1), value);
    fbb.push_slot_always(slot(0), key);
    let pair = fbb.end_table(t);
    let metadata = fbb.create_vector(&[pair]);
    // CreateSchema: custom_metadata (2), fields (1); endianness Little (0),
    // the default, is left out.
    let t = fbb.start_table();
    fbb.push_slot_always(slot(2), metadata);
    fbb.push_slot_always(slot(1), fields);
    let schema = fbb.end_table(t);
    // CreateMessage: header (2), version (0), header_type (1); bodyLength
    // 0 is the default.
    let t = fbb.start_table();
    fbb.push_slot_always(slot(2), schema);
    fbb.push_slot::<i16>(slot(0), METADATA_V5, 0);
    fbb.push_slot::<u8>(slot(1), HEADER_SCHEMA, 0);
    let message = fbb.end_table(t);
    fbb.finish(message, None);
    let body = fbb.finished_data();
    // WriteMessage: the prefix (8 bytes) and the flatbuffer end on 8 bytes.
    let padded = (body.len() + 8).div_ceil(8) * 8 - 8;
    let mut out = Vec::with_capacity(padded + 8);
    out.extend_from_slice(&u32::MAX.to_le_bytes());
    out.extend_from_slice(&u32::try_from(padded).ok()?.to_le_bytes());
    out.extend_from_slice(body);
    out.resize(padded + 8, 0);
    Some(out)
}

/// Standard base64 with padding (RFC 4648, as Arrow's `base64_encode`).
pub(super) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648() {
        for (input, want) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"\xff\xfe\x00", "//4A"),
        ] {
            assert_eq!(base64(input), want);
        }
    }

    /// pyarrow 26's `ARROW:schema` (base64-decoded) of unienv_data's table
    /// for float64 elements of shape (10,), int64 of shape (), bool of
    /// (2,), float16 of (3,) (which no env declares over the protocol, so
    /// the Python tests cannot reach it) and uint8 of (2, 2): the same bytes.
    #[test]
    fn schemas_are_pyarrows() {
        let cases = [
            (DType::F64, Some(10), "[10]", "fffffffff80000001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a0000004c00000004000000010000000c00000008000c0004000800080000001c000000040000000e0000007b2264617461223a205b31305d7d00000d000000636f6c756d6e5f7368617065730000000100000004000000ccffffff00000110140000002000000004000000010000002c00000004000000646174610000060008000400060000000a000000100014000800060007000c00000010001000000000000103100000001c0000000400000000000000040000006974656d0000060008000600060000000000020000000000"),
            (DType::I64, None, "[]", "ffffffffc80000001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a0000004c00000004000000010000000c00000008000c0004000800080000001c000000040000000c0000007b2264617461223a205b5d7d000000000d000000636f6c756d6e5f7368617065730000000100000014000000100014000800060007000c000000100010000000000001021000000020000000040000000000000004000000646174610000000008000c0008000700080000000000000140000000"),
            (DType::BOOL, Some(2), "[2]", "fffffffff00000001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a0000004c00000004000000010000000c00000008000c0004000800080000001c000000040000000d0000007b2264617461223a205b325d7d0000000d000000636f6c756d6e5f7368617065730000000100000004000000ccffffff00000110140000002000000004000000010000002c000000040000006461746100000600080004000600000002000000100014000800060007000c00000010001000000000000106100000001c0000000400000000000000040000006974656d000000000400040004000000"),
            (DType::F16, Some(3), "[3]", "fffffffff00000001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a0000004c00000004000000010000000c00000008000c0004000800080000001c000000040000000d0000007b2264617461223a205b335d7d0000000d000000636f6c756d6e5f7368617065730000000100000004000000ccffffff00000110140000002000000004000000010000002c000000040000006461746100000600080004000600000003000000100014000800060007000c00000010001000000000000103100000001c0000000400000000000000040000006974656d000000000400040004000000"),
            (DType::U8, Some(4), "[2, 2]", "fffffffff80000001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a0000005000000004000000010000000c00000008000c0004000800080000002000000004000000100000007b2264617461223a205b322c20325d7d000000000d000000636f6c756d6e5f7368617065730000000100000004000000d0ffffff00000110140000001c000000040000000100000028000000040000006461746100000000c6ffffff04000000100014000800060007000c00000010001000000000000102100000001c0000000400000000000000040000006974656d0000060008000400060000000800000000000000"),
        ];
        for (dtype, elements, shape, want) in cases {
            let shapes = format!("{{\"data\": {shape}}}");
            let got = schema_message(dtype, elements, &shapes).unwrap();
            let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, want, "{dtype:?} {shape}");
        }
    }
}
