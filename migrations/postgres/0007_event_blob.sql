-- Format 7 (ADR 0049): a checkpoint binds its events as one blob of their JSON texts
-- (`BYTEA`) and the JSON array of the byte offsets where each ends, instead of a JSON
-- array of the texts (escaped by pactgraph, unescaped by the server). The statement is
-- pactgraph's own (store/dialects.rs); the schema is unchanged. This migration only
-- marks the format, so that the store's format is the same number on both databases.
SELECT 1;
