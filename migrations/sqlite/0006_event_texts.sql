-- Events given as their texts (format 6, ADR 0044): a checkpoint binds its events as a
-- JSON array of strings, each an event's JSON text, numbered on by one from
-- `first_event`. The trigger stores each string as it is: no event is parsed again (the
-- `{"seq", "event"}` objects of migration 5 cost two `json_extract`s per event, which
-- was most of a batch's time in SQLite). The checkpoint itself (`checkpoint_in`, its
-- fence and writes) is unchanged; so is the `events` table.
DROP TRIGGER checkpoint_events_in_insert;
DROP VIEW checkpoint_events_in;

CREATE VIEW checkpoint_events_in (
    run_id, seq, steps, status, termination_reason, now_ms, owner, running,
    next_key, next_attempt, digest, document, delta, snapshot, events, first_event
) AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL, NULL;

CREATE TRIGGER checkpoint_events_in_insert INSTEAD OF INSERT ON checkpoint_events_in
BEGIN
    INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, now_ms,
        owner, running, next_key, next_attempt, digest, document, delta, snapshot)
    VALUES (NEW.run_id, NEW.seq, NEW.steps, NEW.status, NEW.termination_reason,
        NEW.now_ms, NEW.owner, NEW.running, NEW.next_key, NEW.next_attempt, NEW.digest,
        NEW.document, NEW.delta, NEW.snapshot);
    INSERT INTO events (run_id, seq, event)
        SELECT NEW.run_id, NEW.first_event + key, value FROM json_each(NEW.events);
END;
