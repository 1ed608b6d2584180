-- Format 11 (ADR 0059): a checkpoint's event chunk is packed in the client, its texts
-- lz4-compressed (their length as a little-endian 32-bit integer, then one lz4 block),
-- and kept as a BLOB value in `event_chunks.events`. SQLite types values, not columns:
-- the column (declared TEXT) keeps a BLOB as it is, and the chunks kept before this
-- format stay TEXT. A reader tells them apart by the value's type, so every chunk reads
-- back the same texts, byte for byte. No row is rewritten (a table rebuilt to declare the
-- column BLOB would copy every chunk of a store at its first open): this migration marks
-- the format, so that a pactgraph of format 10, which would read a packed chunk as text,
-- refuses the store instead.
SELECT 1;
