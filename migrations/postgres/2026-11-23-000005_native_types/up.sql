-- Native types for a database made by the earlier migrations that both backends shared: the
-- same versions 1-4, but JSON in TEXT and times in BIGINT milliseconds since the epoch. Such
-- columns become `jsonb` and `timestamptz` here, so a database made that way and one made by
-- this directory's migrations 1-4 (native from the start, where this finds nothing to convert)
-- end up with one schema. Each table is rewritten once, in this migration's transaction.

-- JSON text as jsonb. jsonb refuses the escape \u0000 (NUL), which serde_json writes for a NUL
-- in a string; such a NUL becomes U+FFFD, as the application now stores it on both backends.
-- Only an escape is replaced: "\\u0000" (a backslash, then the text u0000) is left alone.
CREATE FUNCTION pg_temp.conclave_jsonb(t TEXT) RETURNS JSONB
LANGUAGE sql IMMUTABLE STRICT AS $f$
    SELECT CASE
        WHEN strpos(t, '\u0000') = 0 THEN t::jsonb
        ELSE regexp_replace(t, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\ufffd', 'g')::jsonb
    END
$f$;

-- Milliseconds since the epoch as a timestamptz, exactly (no floating point).
CREATE FUNCTION pg_temp.conclave_timestamptz(ms BIGINT) RETURNS TIMESTAMPTZ
LANGUAGE sql IMMUTABLE STRICT AS $f$
    SELECT TIMESTAMPTZ 'epoch' + ms * INTERVAL '1 millisecond'
$f$;

DO $$
DECLARE
    t RECORD;
BEGIN
    FOR t IN
        SELECT c.table_name, string_agg(
            format('ALTER COLUMN %I TYPE %s USING pg_temp.conclave_%s(%I)',
                   c.column_name, w.native, w.native, c.column_name), ', ') AS clauses
        FROM information_schema.columns c
        JOIN (VALUES
            ('conversations', 'created_at', 'bigint', 'timestamptz'),
            ('conversations', 'updated_at', 'bigint', 'timestamptz'),
            ('messages', 'created_at', 'bigint', 'timestamptz'),
            ('runs', 'request', 'text', 'jsonb'),
            ('runs', 'lease_until', 'bigint', 'timestamptz'),
            ('runs', 'created_at', 'bigint', 'timestamptz'),
            ('runs', 'finished_at', 'bigint', 'timestamptz'),
            ('runs', 'reviewed_at', 'bigint', 'timestamptz'),
            ('deliberation_stages', 'parsed_data', 'text', 'jsonb'),
            ('deliberation_stages', 'created_at', 'bigint', 'timestamptz'),
            ('run_events', 'data', 'text', 'jsonb'),
            ('run_events', 'created_at', 'bigint', 'timestamptz'),
            ('run_journal', 'data', 'text', 'jsonb'),
            ('run_journal', 'created_at', 'bigint', 'timestamptz'),
            ('users', 'created_at', 'bigint', 'timestamptz'),
            ('users', 'revoked_at', 'bigint', 'timestamptz'),
            ('api_tokens', 'created_at', 'bigint', 'timestamptz'),
            ('api_tokens', 'expires_at', 'bigint', 'timestamptz'),
            ('api_tokens', 'revoked_at', 'bigint', 'timestamptz')
        ) AS w (table_name, column_name, portable, native)
          ON c.table_name = w.table_name AND c.column_name = w.column_name
         AND c.data_type = w.portable
        WHERE c.table_schema = current_schema()
        GROUP BY c.table_name
    LOOP
        EXECUTE format('ALTER TABLE %I %s', t.table_name, t.clauses);
    END LOOP;
END
$$;

DROP FUNCTION pg_temp.conclave_jsonb(TEXT);
DROP FUNCTION pg_temp.conclave_timestamptz(BIGINT);

-- The takeover scan (running runs whose lease ran out) and the heartbeat (running runs of one
-- process) read only running runs: a small index of those alone.
CREATE INDEX runs_running ON runs (lease_owner, lease_until) WHERE status = 'running';
