DROP TABLE run_events;
DROP TABLE deliberation_stages;
DROP TABLE runs;
DROP TABLE messages;
DROP TABLE conversations;
