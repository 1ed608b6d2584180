-- Events given as one blob (format 7, ADR 0049): a checkpoint binds its events' JSON
-- texts one after the other in one blob (`events`) and a JSON array of where each is in
-- it (`event_spans`: an event's byte offset times 2^32 plus its length, one integer),
-- numbered on by one from `first_event`. The trigger cuts each event's bytes out of
-- the blob and stores them as text, as they are: no
-- text is escaped by pactgraph or unescaped by SQLite (format 6's JSON array of strings
-- cost an escape of every byte and `json_each`'s unescape of it, most of a batch's time
-- in SQLite). `json_each` reads only the small array of spans. The checkpoint itself
-- (`checkpoint_in`, its fence and writes) is unchanged; so is the `events` table.
DROP TRIGGER checkpoint_events_in_insert;
DROP VIEW checkpoint_events_in;

CREATE VIEW checkpoint_events_in (
    run_id, seq, steps, status, termination_reason, now_ms, owner, running,
    next_key, next_attempt, digest, document, delta, snapshot, events, first_event,
    event_spans
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL, NULL, NULL;

CREATE TRIGGER checkpoint_events_in_insert INSTEAD OF INSERT ON checkpoint_events_in
BEGIN
    INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, now_ms,
        owner, running, next_key, next_attempt, digest, document, delta, snapshot)
    VALUES (NEW.run_id, NEW.seq, NEW.steps, NEW.status, NEW.termination_reason,
        NEW.now_ms, NEW.owner, NEW.running, NEW.next_key, NEW.next_attempt, NEW.digest,
        NEW.document, NEW.delta, NEW.snapshot);
    INSERT INTO events (run_id, seq, event)
        SELECT NEW.run_id, NEW.first_event + key,
               CAST(substr(CAST(NEW.events AS BLOB), (value >> 32) + 1, value & 4294967295)
                    AS TEXT)
          FROM json_each(NEW.event_spans);
END;
