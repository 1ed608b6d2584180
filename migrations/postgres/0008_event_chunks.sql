-- Events kept as chunks (format 8, ADR 0053): a checkpoint's events are ONE row, the
-- chunk of run `run_id`'s events `first_seq` to `last_seq` (numbered on by one), their
-- JSON texts one per line (`events`; a compact JSON text holds no line break), written
-- by checkpoint `seq` (NULL for the events kept before, one a chunk). The trace items a
-- checkpoint appends are kept once, in its `step` events: its delta says how many
-- (`trace_in_events`) and a load reads them from the chunk of the same `seq`. A row per
-- event (formats 5 to 7) cost an index entry and a foreign-key check per event (ADR 0050
-- measured 750 event rows at 8.6 ms of server CPU a checkpoint). No foreign key: a
-- chunk is written only by a checkpoint whose fenced update of the run row succeeded in
-- the same statement, and `prune` deletes a run's chunks with the run. The events kept
-- before become chunks of one event each, their texts unchanged.
CREATE TABLE event_chunks (
    run_id    TEXT COLLATE "C" NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq  BIGINT NOT NULL,
    seq       BIGINT,
    events    TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
-- What a load reads: the chunks of the checkpoints after the run's snapshot.
CREATE INDEX event_chunks_seq ON event_chunks (run_id, seq);

INSERT INTO event_chunks (run_id, first_seq, last_seq, events)
    SELECT run_id, seq, seq, event FROM events;

DROP TABLE events;
