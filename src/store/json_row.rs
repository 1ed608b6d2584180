//! A run row answered as one JSON array (SQLite's checkpoint, ADR 0062): the [`INFO`]
//! columns in their order, read back through [`Cols`] like any row, so that
//! [`info_from_row`](super::rows::info_from_row) reads it as it reads a row of columns.
//!
//! Why: SQLite compiles each column of a `RETURNING` clause when it prepares the
//! statement, and the checkpoint's answer (a view's insert, so each column a subquery on
//! `runs`) was about half the compiling of its statement, once per process (1.7 M
//! instructions; one `json_array` subquery, 0.87 M).

use serde_json::Value;

use super::packed::ChunkValue;
use super::rows::{Cols, INFO};

/// The columns of a run row answered as the JSON text of an array of [`INFO`]'s columns.
#[derive(Debug)]
pub(crate) struct JsonRow {
    values: Vec<Value>,
}

impl JsonRow {
    /// Reads the answer `text` (`json_array` of [`INFO`]'s columns, in order); an answer
    /// that is not such an array (not JSON, not an array, not one value a column) is a
    /// decoding error naming what it found.
    pub(crate) fn parse(text: &str) -> Result<Self, sqlx::Error> {
        let values: Vec<Value> = serde_json::from_str(text).map_err(|e| {
            decode(format!(
                "the run row's answer is not a JSON array of its columns: {e}"
            ))
        })?;
        let columns = INFO.split(',').count();
        if values.len() != columns {
            return Err(decode(format!(
                "the run row's answer holds {} values, not the {columns} columns of a run row",
                values.len()
            )));
        }
        Ok(Self { values })
    }

    /// The value of column `col`.
    fn get(&self, col: &str) -> Result<&Value, sqlx::Error> {
        INFO.split(',')
            .map(str::trim)
            .position(|c| c == col)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| sqlx::Error::ColumnNotFound(col.to_string()))
    }
}

/// A decoding error saying `what`.
fn decode(what: String) -> sqlx::Error {
    sqlx::Error::Decode(what.into())
}

/// The error of column `col` holding `found` where a `wanted` is read.
fn mismatch(col: &str, wanted: &str, found: &Value) -> sqlx::Error {
    decode(format!(
        "column `{col}` of the run row's answer: expected {wanted}, found {found}"
    ))
}

impl Cols for JsonRow {
    fn text(&self, col: &str) -> Result<String, sqlx::Error> {
        match self.get(col)? {
            Value::String(s) => Ok(s.clone()),
            other => Err(mismatch(col, "a text", other)),
        }
    }

    fn opt_text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        match self.get(col)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            other => Err(mismatch(col, "a text or null", other)),
        }
    }

    fn int(&self, col: &str) -> Result<i64, sqlx::Error> {
        match self.get(col)? {
            Value::Number(n) if n.is_i64() => n
                .as_i64()
                .ok_or_else(|| mismatch(col, "an integer", &Value::Number(n.clone()))),
            other => Err(mismatch(col, "an integer", other)),
        }
    }

    fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        match self.get(col)? {
            Value::Null => Ok(None),
            _ => self.int(col).map(Some),
        }
    }

    fn chunk(&self, col: &str, _packed: &str) -> Result<ChunkValue, sqlx::Error> {
        // A run row has no event chunk.
        Err(sqlx::Error::ColumnNotFound(col.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16 [`INFO`] columns of a run as SQLite's `json_array` writes them.
    const ROW: &str = r#"["01M8CRCKKMAETMDN1HPK4CKG1Z",null,"synth_loop","d1",
        "running",null,2000,8,1764180000000,1764180000100,null,"w \"1\"",1764180030000,
        "k",1,0]"#;

    #[test]
    fn reads_each_column_by_name_as_a_row_of_columns_reads() {
        // Proves every accessor finds its column by INFO's order and reads nulls, texts
        // (escapes undone) and integers as they were written.
        let row = JsonRow::parse(ROW).expect("a run row");
        assert_eq!(row.text("id").expect("id"), "01M8CRCKKMAETMDN1HPK4CKG1Z");
        assert_eq!(row.opt_text("name").expect("name"), None);
        assert_eq!(row.int("steps").expect("steps"), 2000);
        assert_eq!(row.opt_int("expires_ms").expect("expiry"), None);
        assert_eq!(
            row.opt_text("owner").expect("owner").as_deref(),
            Some("w \"1\"")
        );
        assert_eq!(row.int("cancel_requested").expect("cancel"), 0);
        assert!(matches!(
            row.text("nope"),
            Err(sqlx::Error::ColumnNotFound(c)) if c == "nope"
        ));
    }

    #[test]
    fn refuses_answers_that_are_not_a_run_row() {
        // Proves a damaged answer is an error naming what is wrong, never a panic nor a
        // value read from the wrong column.
        for (text, says) in [
            ("not json", "not a JSON array"),
            ("{\"id\": 1}", "not a JSON array"),
            ("[1, 2]", "holds 2 values"),
        ] {
            let err = JsonRow::parse(text).expect_err(text).to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        let row = JsonRow::parse(ROW).expect("a run row");
        let err = row.int("workflow").expect_err("a text").to_string();
        assert!(err.contains("column `workflow`"), "{err}");
        let err = row.text("steps").expect_err("an integer").to_string();
        assert!(err.contains("expected a text"), "{err}");
        let err = row.int("owner").expect_err("a text").to_string();
        assert!(err.contains("expected an integer"), "{err}");
    }
}
