-- The eval a conversation was started by (its runs are an eval's questions and judgements),
-- or NULL for a person's own. History and the dashboard hide an eval's conversations unless
-- asked for them; a run's page says which eval it belongs to.
ALTER TABLE conversations ADD COLUMN eval_id TEXT;
CREATE INDEX conversations_eval_updated ON conversations (eval_id, updated_at);
