-- Crash semantics: which step a run's next (or in-flight) effects belong to and the
-- attempt they make, and a cancel asked of a running run (its driver stops at its next
-- step). `attempt_key` is `STEPS.TRACE_LEN` of the run the step starts from.

ALTER TABLE runs ADD COLUMN attempt_key TEXT;
ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_updated ON runs (updated_ms);
