DROP TABLE run_journal;
ALTER TABLE runs DROP COLUMN lease_owner;
