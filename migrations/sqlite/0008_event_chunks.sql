-- Events kept as chunks (format 8, ADR 0053): a checkpoint's events are ONE row, the
-- chunk of run `run_id`'s events `first_seq` to `last_seq` (numbered on by one), their
-- JSON texts one per line (`events`; a compact JSON text holds no line break), written
-- by checkpoint `seq` (NULL for the events kept before, one a chunk). The trace items a
-- checkpoint appends are kept once, in its `step` events: its delta (`steps.delta`)
-- says how many (`trace_in_events`) and a load reads them from the chunk of the same
-- `seq` (deltas written before carry their items, as they did). A row per
-- event (formats 5 to 7) cost a B-tree insert and a key per event, about 750 a batch of
-- pure steps; readers (`runs watch`, the event feeds, `runs show`) cut the events they
-- need out of the chunks that hold them. The events kept before become chunks of one
-- event each, their texts unchanged. A rowid table: a chunk can weigh hundreds of KB,
-- which a `WITHOUT ROWID` table keeps poorly.
CREATE TABLE event_chunks (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    seq       INTEGER,
    events    TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
-- What a load reads: the chunks of the checkpoints after the run's snapshot.
CREATE INDEX event_chunks_seq ON event_chunks (run_id, seq);

INSERT INTO event_chunks (run_id, first_seq, last_seq, events)
    SELECT run_id, seq, seq, event FROM events ORDER BY run_id, seq;

DROP TRIGGER checkpoint_events_in_insert;
DROP VIEW checkpoint_events_in;
DROP TABLE events;

-- A checkpoint and its chunk in one statement, as before: the trigger writes the
-- checkpoint through `checkpoint_in` (its fence and writes, unchanged), then the chunk
-- as bound (none when the checkpoint has no event: `last_event` below `first_event`).
CREATE VIEW checkpoint_events_in (
    run_id, seq, steps, status, termination_reason, now_ms, owner, running,
    next_key, next_attempt, digest, document, delta, snapshot, events, first_event,
    last_event
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL, NULL, NULL;

CREATE TRIGGER checkpoint_events_in_insert INSTEAD OF INSERT ON checkpoint_events_in
BEGIN
    INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, now_ms,
        owner, running, next_key, next_attempt, digest, document, delta, snapshot)
    VALUES (NEW.run_id, NEW.seq, NEW.steps, NEW.status, NEW.termination_reason,
        NEW.now_ms, NEW.owner, NEW.running, NEW.next_key, NEW.next_attempt, NEW.digest,
        NEW.document, NEW.delta, NEW.snapshot);
    INSERT INTO event_chunks (run_id, first_seq, last_seq, seq, events)
        SELECT NEW.run_id, NEW.first_event, NEW.last_event, NEW.seq, NEW.events
         WHERE NEW.last_event >= NEW.first_event;
END;
