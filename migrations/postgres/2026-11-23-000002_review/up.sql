-- Human review of runs a mode flags (Clarity: the Arbiter was needed).
ALTER TABLE runs ADD COLUMN needs_human_review BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE runs ADD COLUMN review_reason TEXT;
ALTER TABLE runs ADD COLUMN reviewed_at TIMESTAMPTZ;
ALTER TABLE runs ADD COLUMN review_note TEXT;
CREATE INDEX runs_review ON runs (needs_human_review, reviewed_at);
