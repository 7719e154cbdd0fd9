DROP INDEX runs_review;
ALTER TABLE runs DROP COLUMN review_note;
ALTER TABLE runs DROP COLUMN reviewed_at;
ALTER TABLE runs DROP COLUMN review_reason;
ALTER TABLE runs DROP COLUMN needs_human_review;
