-- Team members of the console: people of an owning team of reconciliation
-- exceptions (reservations, disputes, treasury, ...) who work their teams'
-- exceptions and nothing else. The teams are recon's owning teams, checked
-- by the application (recon.Teams) where users are changed; a team member
-- has at least one, and only a team member has any (finance and admin see
-- every team).
ALTER TABLE console_users DROP CONSTRAINT console_users_role_check;
ALTER TABLE console_users ADD CONSTRAINT console_users_role_check CHECK (role IN ('ops', 'finance', 'fraud', 'admin', 'team'));
ALTER TABLE console_users ADD COLUMN teams text[] NOT NULL DEFAULT '{}';
ALTER TABLE console_users ADD CONSTRAINT console_users_teams_role CHECK ((role = 'team') = (cardinality(teams) > 0));
