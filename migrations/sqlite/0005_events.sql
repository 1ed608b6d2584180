-- Run events (issue 27, ADR 0034): every event but `model_delta`, kept with its run and
-- written in the transaction of the checkpoint that made it (docs/spec/events.md). `seq`
-- rises by one per run without gaps; `event` is the event's JSON. Runs stored before
-- this migration have no history before their first checkpoint after it.
CREATE TABLE events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    event  TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- A checkpoint and its events in one statement: an insert into `checkpoint_events_in`,
-- whose trigger writes the checkpoint through `checkpoint_in` (its fence and writes,
-- unchanged) and then the events, given as a JSON array of `{"seq", "event"}`. One
-- statement: a process stopped between round trips never holds the write lock.
CREATE VIEW checkpoint_events_in (
    run_id, seq, steps, status, termination_reason, now_ms, owner, running,
    next_key, next_attempt, digest, document, delta, snapshot, events
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL;

CREATE TRIGGER checkpoint_events_in_insert INSTEAD OF INSERT ON checkpoint_events_in
BEGIN
    INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, now_ms,
        owner, running, next_key, next_attempt, digest, document, delta, snapshot)
    VALUES (NEW.run_id, NEW.seq, NEW.steps, NEW.status, NEW.termination_reason,
        NEW.now_ms, NEW.owner, NEW.running, NEW.next_key, NEW.next_attempt, NEW.digest,
        NEW.document, NEW.delta, NEW.snapshot);
    INSERT INTO events (run_id, seq, event)
        SELECT NEW.run_id, json_extract(value, '$.seq'), json_extract(value, '$.event')
          FROM json_each(NEW.events);
END;
