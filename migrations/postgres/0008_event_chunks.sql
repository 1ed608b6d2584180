-- Events kept as chunks (format 8, ADR 0053): a checkpoint's events are ONE row, the
-- chunk of run `run_id`'s events `first_seq` to `last_seq` (numbered on by one), their
-- JSON texts one per line (`events`; a compact JSON text holds no line break). A row per
-- event (formats 5 to 7) cost an index entry and a foreign-key check per event (ADR 0050
-- measured 750 event rows at 8.6 ms of server CPU a checkpoint). No foreign key: a
-- chunk is written only by a checkpoint whose fenced update of the run row succeeded in
-- the same statement, and `prune` deletes a run's chunks with the run. The events kept
-- before become chunks of one event each, their texts unchanged.
CREATE TABLE event_chunks (
    run_id    TEXT COLLATE "C" NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq  BIGINT NOT NULL,
    events    TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);

INSERT INTO event_chunks (run_id, first_seq, last_seq, events)
    SELECT run_id, seq, seq, event FROM events;

DROP TABLE events;
