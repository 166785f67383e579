-- Month end (issue 35, item 9): the ageing report and the period's figures
-- a finance lead signs, frozen as they were signed. One per month (its
-- first day, in IST); never changed once written.
CREATE TABLE recon_month_signoffs (
    month     date PRIMARY KEY CHECK (extract(day FROM month) = 1),
    signed_by text NOT NULL CHECK (signed_by <> ''),
    signed_at timestamptz NOT NULL DEFAULT now(),
    report    jsonb NOT NULL
);
CREATE TRIGGER recon_month_signoffs_no_change BEFORE UPDATE OR DELETE ON recon_month_signoffs
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
