DROP INDEX conversations_eval_updated;
ALTER TABLE conversations DROP COLUMN eval_id;
