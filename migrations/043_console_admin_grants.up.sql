-- Console user management (issue 36, 1). Making someone an active admin
-- (a new user, a promotion, or enabling a disabled admin) takes two admins:
-- one proposes, a different one approves (decided_by). The command line's
-- tatkal users is the operator's way in and needs no grant.
CREATE TABLE console_admin_grants (
    id            bigserial PRIMARY KEY,
    -- a new user, created on approval (user_id is set then)
    new_user      boolean NOT NULL,
    user_id       bigint REFERENCES console_users (id),
    login         text NOT NULL CHECK (login ~ '^[a-z0-9._-]{3,40}$'),
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    -- a new user's first password, kept only while the grant waits
    password_hash text,
    reason        text NOT NULL CHECK (length(reason) BETWEEN 3 AND 500),
    state         text NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'APPROVED', 'REJECTED')),
    proposed_by   bigint NOT NULL REFERENCES console_users (id),
    proposed_at   timestamptz NOT NULL DEFAULT now(),
    decided_by    bigint REFERENCES console_users (id),
    decided_at    timestamptz,
    CHECK ((state = 'PENDING') = (decided_by IS NULL) AND (decided_by IS NULL) = (decided_at IS NULL)),
    -- nobody approves their own proposal (withdrawing it is a rejection)
    CHECK (state <> 'APPROVED' OR decided_by <> proposed_by),
    CHECK (state = 'PENDING' OR password_hash IS NULL),
    CHECK (state <> 'PENDING' OR new_user = (password_hash IS NOT NULL)),
    CHECK (new_user OR user_id IS NOT NULL),
    CHECK (state <> 'APPROVED' OR user_id IS NOT NULL)
);
-- One waiting grant per login.
CREATE UNIQUE INDEX console_admin_grants_pending ON console_admin_grants (login) WHERE state = 'PENDING';

-- Disabling a user revokes their API tokens. At the command line no console
-- user revokes them: revoked_by stays NULL and the audit log names the
-- operator (cli:NAME).
ALTER TABLE console_api_tokens DROP CONSTRAINT console_api_tokens_check1,
    ADD CONSTRAINT console_api_tokens_revoked_by CHECK (revoked_by IS NULL OR revoked_at IS NOT NULL);
