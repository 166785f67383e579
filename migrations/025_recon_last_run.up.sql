-- A run's workbook and CSV read its exceptions by scope (gateway and day)
-- or by the run that last found them: without an index on the run, that OR
-- read every exception ever recorded.
CREATE INDEX reconciliation_exceptions_last_run ON reconciliation_exceptions (last_run_id);
