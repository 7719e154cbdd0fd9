-- Back to the types the earlier shared migrations used (TEXT JSON, BIGINT milliseconds), which
-- is what a binary that knows only migrations 1-4 reads. Whatever the database was made by.
DROP INDEX runs_running;

DO $$
DECLARE
    t RECORD;
BEGIN
    FOR t IN
        SELECT c.table_name, string_agg(
            CASE c.data_type
                WHEN 'jsonb' THEN format('ALTER COLUMN %I TYPE TEXT USING %I::text',
                                         c.column_name, c.column_name)
                ELSE format('ALTER COLUMN %I TYPE BIGINT USING '
                            'round(extract(epoch FROM %I) * 1000)::bigint',
                            c.column_name, c.column_name)
            END, ', ') AS clauses
        FROM information_schema.columns c
        WHERE c.table_schema = current_schema()
          AND c.data_type IN ('jsonb', 'timestamp with time zone')
          AND c.table_name IN ('conversations', 'messages', 'runs', 'deliberation_stages',
                               'run_events', 'run_journal', 'users', 'api_tokens')
        GROUP BY c.table_name
    LOOP
        EXECUTE format('ALTER TABLE %I %s', t.table_name, t.clauses);
    END LOOP;
END
$$;
