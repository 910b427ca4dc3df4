use super::*;
use crate::codec::DType;

fn column(dir: &std::path::Path, dtype: DType, shape: &[usize]) -> Column {
    Column {
        dir: dir.to_path_buf(),
        dtype,
        shape: shape.to_vec(),
    }
}

fn f32_rows(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

#[test]
fn piece_sizes_are_powers_of_two_near_the_bytes() {
    assert_eq!(piece_size(80, PIECE_BYTES), 2048);
    assert_eq!(piece_size(80, 64 * 1024), 512);
    assert_eq!(piece_size(1, PIECE_BYTES), 4096);
    assert_eq!(piece_size(1 << 20, PIECE_BYTES), 16);
    assert_eq!(piece_size(80, 1), 16);
}

/// The writer's own contract (an episode beyond 4 MiB is handed over in
/// parts; a failed one is aborted): full pieces written early hold rows
/// beyond `num_rows`, which an abort forgets (reading the committed rows
/// back) and the next commit overwrites.
#[test]
fn rows_handed_over_early_then_aborted_stay_uncommitted() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<f32> = (0..60 * 3).map(|i| i as f32).collect();
    let rows = |a: usize, b: usize, sign: f32| {
        f32_rows(
            &data[a * 3..b * 3]
                .iter()
                .map(|v| v * sign)
                .collect::<Vec<_>>(),
        )
    };
    let format = ParquetFormat::new(1);
    let mut w = format
        .open(&[column(dir.path(), DType::F32, &[3])], 0)
        .unwrap();
    w.write(vec![rows(0, 10, 1.0)], 10, true).unwrap();
    w.write(vec![rows(10, 40, -1.0)], 30, false).unwrap();
    // pieces 0 and 1 written, not committed
    assert!(dir.path().join("part-000001.parquet").exists());
    let (got, n) = read_storage(dir.path(), DType::F32, &[3]).unwrap();
    assert_eq!((got, n), (rows(0, 10, 1.0), 10));
    w.abort().unwrap();
    w.write(vec![rows(10, 15, 1.0)], 5, true).unwrap();
    w.close();
    assert!(!dir.path().join(".tmp").exists());
    let (got, n) = read_storage(dir.path(), DType::F32, &[3]).unwrap();
    assert_eq!((got, n), (rows(0, 15, 1.0), 15));
    // Resumed after its 15 committed rows: the partial piece read back.
    let mut r = format
        .open(&[column(dir.path(), DType::F32, &[3])], 15)
        .unwrap();
    r.write(vec![rows(15, 40, 1.0)], 25, true).unwrap();
    let (got, n) = read_storage(dir.path(), DType::F32, &[3]).unwrap();
    assert_eq!((got, n), (rows(0, 40, 1.0), 40));
}

/// Every dtype the recorder supports, scalar and multi-element: what is
/// encoded decodes to the same bytes.
#[test]
fn pieces_decode_to_the_rows_encoded() {
    let dtypes = [
        DType::BOOL,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];
    let dir = tempfile::tempdir().unwrap();
    for dtype in dtypes {
        for shape in [&[][..], &[1][..], &[3, 2][..]] {
            let mut codec = PieceCodec::new(dtype, shape).unwrap();
            let rows = 7;
            let bytes: Vec<u8> = (0..rows * codec.row_bytes())
                .map(|i| {
                    if dtype == DType::BOOL {
                        (i % 3 == 0) as u8
                    } else {
                        (i * 37 + 11) as u8
                    }
                })
                .collect();
            let mut out = Vec::new();
            codec
                .encode(&piece::Encoded::default(), &bytes, rows, &mut out)
                .unwrap();
            let path = dir.path().join("piece.parquet");
            std::fs::write(&path, &out).unwrap();
            let mut back = Vec::new();
            codec.decode(&path, rows, &mut back).unwrap();
            assert_eq!(back, bytes, "{dtype:?} {shape:?}");
        }
    }
    assert!(PieceCodec::new(DType::C64, &[2]).is_err());
    assert!(PieceCodec::new(DType::F32, &[0]).is_err());
}

/// One-row commits into 64-row pieces: each commit adds a row group to
/// the partial piece (the earlier ones copied), up to `MAX_GROUPS`, then
/// the piece is encoded again as one; every version reads back whole.
#[test]
fn commits_append_row_groups_up_to_the_limit() {
    use parquet::file::reader::FileReader;
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<f32> = (0..100 * 3).map(|i| i as f32 * 0.5).collect();
    let format = ParquetFormat::new(64 * 12);
    let mut w = format
        .open(&[column(dir.path(), DType::F32, &[3])], 0)
        .unwrap();
    let mut most = 0;
    for i in 0..100 {
        w.write(vec![f32_rows(&data[i * 3..i * 3 + 3])], 1, true)
            .unwrap();
        let (got, n) = read_storage(dir.path(), DType::F32, &[3]).unwrap();
        assert_eq!((got, n), (f32_rows(&data[..(i + 1) * 3]), i as u64 + 1));
        let piece = dir.path().join(piece_name(i as u64 / 64));
        let file = std::fs::File::open(piece).unwrap();
        let groups = parquet::file::serialized_reader::SerializedFileReader::new(file)
            .unwrap()
            .num_row_groups();
        assert!(groups <= MAX_GROUPS, "{groups} row groups");
        most = most.max(groups);
    }
    assert_eq!(most, MAX_GROUPS);
}
