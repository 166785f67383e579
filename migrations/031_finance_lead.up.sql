-- The finance lead: escalations of reconciliation exceptions past their SLA
-- go to the leads (every active finance user while there is none, so an
-- escalation never goes unheard).
ALTER TABLE console_users ADD COLUMN finance_lead boolean NOT NULL DEFAULT false;

-- A console message is read once its user has marked it so: the finance
-- home counts the unread ones.
ALTER TABLE console_messages ADD COLUMN read_at timestamptz;
