//! A checkpoint's event texts as a row keeps them: packed, lz4-compressed in the client,
//! on both stores. SQLite keeps a packed chunk as a `BLOB` value of
//! `event_chunks.events` (format 11, ADR 0059); PostgreSQL in a `BYTEA` column of its own,
//! `event_chunks.packed`, stored without the server's compression (format 12, ADR 0063).
//! Chunks kept before are text (SQLite before format 11, PostgreSQL before 12, compressed
//! by the server) and stay so: a chunk reads back by where and how its value is kept
//! ([`sqlite_chunk`], [`pg_chunk`]), so the texts read back are the same, byte for byte,
//! whichever format wrote them.
//!
//! A packed chunk is the texts' length in bytes (a little-endian `u32`) and then one lz4
//! block of them (`lz4_flex`'s `compress_prepend_size`).

use sqlx::{Row, TypeInfo, ValueRef};

/// A chunk's events as a row holds them, or as a checkpoint binds them: text, or packed
/// (public only as what [`super::rows::Cols`] reads; not exported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkValue {
    /// The texts, one a line (chunks kept before format 11 on SQLite, 12 on PostgreSQL).
    Text(String),
    /// The texts packed ([`ChunkValue::pack`]).
    Packed(Vec<u8>),
}

/// `texts` packed: their length and one lz4 block of them.
///
/// Complexity: linear in the texts' bytes.
pub(crate) fn pack(texts: &[u8]) -> Vec<u8> {
    lz4_flex::compress_prepend_size(texts)
}

/// The most bytes an lz4 block of `n` bytes unpacks to: a match codes at most 255 bytes
/// per byte of its length (the block format's bound), plus the block's last literals.
fn unpacked_bound(n: usize) -> usize {
    n.saturating_mul(255).saturating_add(16)
}

impl ChunkValue {
    /// `texts` packed, as a checkpoint binds them (both stores).
    pub(crate) fn pack(texts: &[u8]) -> Self {
        ChunkValue::Packed(pack(texts))
    }

    /// The texts: a packed chunk unpacked (the length it claims checked, against
    /// `max_bytes` and against what its block can hold, before anything is allocated),
    /// checked to be UTF-8. An error says what is wrong (the caller names the chunk).
    pub(crate) fn texts(self, max_bytes: usize) -> Result<String, String> {
        let bytes = match self {
            ChunkValue::Text(text) => return Ok(text),
            ChunkValue::Packed(bytes) => bytes,
        };
        let Some((len, block)) = bytes.split_first_chunk::<4>() else {
            return Err(format!(
                "its packed events ({} bytes) are shorter than their length",
                bytes.len()
            ));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > max_bytes || len > unpacked_bound(block.len()) {
            return Err(format!(
                "its packed events ({} bytes) claim {len} bytes unpacked",
                bytes.len()
            ));
        }
        let mut texts = vec![0; len];
        let got = lz4_flex::decompress_into(block, &mut texts)
            .map_err(|e| format!("its packed events do not unpack: {e}"))?;
        if got != len {
            return Err(format!(
                "its packed events unpack to {got} bytes, not the {len} they claim"
            ));
        }
        String::from_utf8(texts).map_err(|e| format!("its events are not UTF-8: {e}"))
    }
}

/// Column `col` of a SQLite row as a chunk: packed when its value is a `BLOB`, else text
/// (a `TEXT` column keeps a `BLOB` value as it is: SQLite types values, not columns).
/// SQLite has no column of packed chunks: the readers' `packed` column is `NULL` there
/// (`Dialect::packed_read`), and not read.
pub(crate) fn sqlite_chunk(
    row: &sqlx::sqlite::SqliteRow,
    col: &str,
    _packed: &str,
) -> Result<ChunkValue, sqlx::Error> {
    let packed = {
        let value = row.try_get_raw(col)?;
        !value.is_null() && value.type_info().name() == "BLOB"
    };
    Ok(if packed {
        ChunkValue::Packed(row.try_get(col)?)
    } else {
        ChunkValue::Text(row.try_get(col)?)
    })
}

/// A PostgreSQL row's chunk: column `packed` (`BYTEA`, format 12) when it is set, else
/// the text of column `col` (the chunks kept before format 12). A row with neither is an
/// error naming the column (the caller names the run).
pub(crate) fn pg_chunk(
    row: &sqlx::postgres::PgRow,
    col: &str,
    packed: &str,
) -> Result<ChunkValue, sqlx::Error> {
    match row.try_get::<Option<Vec<u8>>, _>(packed)? {
        Some(bytes) => Ok(ChunkValue::Packed(bytes)),
        None => row.try_get(col).map(ChunkValue::Text),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const MAX: usize = 1 << 30;

    proptest! {
        /// Proves, for all texts, that a packed chunk unpacks to the texts packed, byte
        /// for byte, and that a text chunk (kept by an older format) reads as it is.
        #[test]
        fn packed_texts_unpack_to_themselves(texts in ".{0,2000}", copies in 1usize..40) {
            let texts = texts.repeat(copies);
            let packed = ChunkValue::pack(texts.as_bytes());
            prop_assert!(matches!(packed, ChunkValue::Packed(_)));
            prop_assert_eq!(packed.texts(MAX).expect("unpacks"), texts.clone());
            prop_assert_eq!(ChunkValue::Text(texts.clone()).texts(MAX).expect("text"), texts);
        }

        /// Proves, for all byte strings, that unpacking one never panics nor allocates
        /// past what it can hold: it unpacks, or says why not.
        #[test]
        fn any_bytes_unpack_or_say_why(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = ChunkValue::Packed(bytes).texts(MAX);
        }
    }

    /// Proves a chunk whose length claims more than its block can hold, or than the
    /// store keeps, is refused before anything is allocated, saying so.
    #[test]
    fn a_claimed_length_past_the_bound_is_refused() {
        let mut bytes = u32::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0x10, b'a']);
        let err = ChunkValue::Packed(bytes).texts(MAX).unwrap_err();
        assert!(err.contains("claim 4294967295 bytes"), "{err}");
        let packed = ChunkValue::pack("x".repeat(5000).as_bytes());
        let err = packed.texts(100).unwrap_err();
        assert!(err.contains("claim 5000 bytes"), "{err}");
        let err = ChunkValue::Packed(vec![1, 2]).texts(MAX).unwrap_err();
        assert!(err.contains("shorter than their length"), "{err}");
    }

    /// Proves packed bytes that are not UTF-8 are refused, not turned into text.
    #[test]
    fn packed_bytes_that_are_not_text_are_refused() {
        let bytes = lz4_flex::compress_prepend_size(&[0xff, 0xfe, 0xfd]);
        let err = ChunkValue::Packed(bytes).texts(MAX).unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
    }
}
