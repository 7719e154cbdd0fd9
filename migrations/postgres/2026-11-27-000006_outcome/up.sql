-- A finished run's outcome in its mode's terms (the winner, the verdict, the estimate, the
-- answer's first words), written with the run's end so that lists show it without rebuilding
-- every run's result. NULL for a run that did not complete, or ended before this column.
ALTER TABLE runs ADD COLUMN outcome TEXT;
