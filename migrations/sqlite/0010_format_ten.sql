-- Format 10 (ADR 0057) changes PostgreSQL's schema only (a deleted run's event chunks
-- deleted by the trigger on `runs`, the chunks compressed with lz4:
-- migrations/postgres/0010). SQLite's schema is unchanged (its chunks go with their run
-- by `ON DELETE CASCADE`): this migration only marks the format, so that a store's
-- format is the same number on both databases.
SELECT 1;
