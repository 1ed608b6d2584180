-- Format 6 (ADR 0044): a checkpoint is one statement of data-modifying `WITH` clauses
-- (store/dialects.rs), its events bound as a JSON array of their texts. The PL/pgSQL
-- function of migration 4 is no longer called: a store of format 6 is refused by a
-- pactgraph of format 5, so nothing calls it again.
DROP FUNCTION pactgraph_checkpoint(TEXT, BIGINT, BIGINT, TEXT, TEXT, BIGINT, TEXT, BOOLEAN,
    TEXT, BIGINT, TEXT, TEXT, TEXT, TEXT);
