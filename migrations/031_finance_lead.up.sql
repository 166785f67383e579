-- The finance lead: escalations of reconciliation exceptions past their SLA
-- go to the leads (every active finance user while there is none, so an
-- escalation never goes unheard).
ALTER TABLE console_users ADD COLUMN finance_lead boolean NOT NULL DEFAULT false;
