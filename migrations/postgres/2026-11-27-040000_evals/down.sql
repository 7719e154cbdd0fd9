DROP TABLE eval_runs;
DROP TABLE evals;
