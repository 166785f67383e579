-- Operator API access by personal tokens, two-person approval by user id,
-- flash messages kept with the console session, and a bounded audit log.

-- A personal API token acts as its console user, with that user's role
-- (looked up on each use, so a role change or a disabled user takes effect
-- at once). Only the SHA-256 of the token is stored; the token itself is
-- shown once, to the admin who created it. created_by is kept because that
-- admin has seen the token: two-person approval counts them as a second
-- holder of it.
CREATE TABLE console_api_tokens (
    id           bigserial PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES console_users (id),
    label        text NOT NULL CHECK (length(label) BETWEEN 1 AND 80),
    token_hash   bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    -- the token's first characters, to recognise it in the list
    hint         text NOT NULL CHECK (length(hint) <= 16),
    created_by   bigint NOT NULL REFERENCES console_users (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    revoked_by   bigint REFERENCES console_users (id),
    CHECK (expires_at > created_at),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
CREATE INDEX console_api_tokens_user ON console_api_tokens (user_id);

-- Who proposed and approved a lever change, by user id: the login text is
-- kept for display, the ids decide. *_issuer_id is the admin who created
-- the API token used, when that was someone else than its user.
ALTER TABLE lever_changes
    ADD COLUMN proposed_by_id        bigint REFERENCES console_users (id),
    ADD COLUMN proposed_by_issuer_id bigint REFERENCES console_users (id),
    ADD COLUMN approved_by_id        bigint REFERENCES console_users (id),
    ADD COLUMN approved_by_issuer_id bigint REFERENCES console_users (id);
UPDATE lever_changes c SET proposed_by_id = u.id FROM console_users u WHERE u.login = c.proposed_by;
UPDATE lever_changes c SET approved_by_id = u.id FROM console_users u WHERE u.login = c.approved_by;
-- NOT VALID: rows approved before this rule are history, not checked.
ALTER TABLE lever_changes ADD CONSTRAINT lever_changes_two_people CHECK (
    approved_by_id IS NULL OR (
        proposed_by_id IS NOT NULL
        AND approved_by_id <> proposed_by_id
        AND approved_by_id IS DISTINCT FROM proposed_by_issuer_id
        AND approved_by_issuer_id IS DISTINCT FROM proposed_by_id
        AND (approved_by_issuer_id IS NULL OR approved_by_issuer_id IS DISTINCT FROM proposed_by_issuer_id))) NOT VALID;

-- A notice for the next page this session renders (set before a redirect,
-- cleared when shown). Never taken from the URL.
ALTER TABLE console_sessions ADD COLUMN flash text CHECK (length(flash) <= 1000);

-- The audit writer (booking/audit) truncates and cleans; these
-- looser bounds catch any other writer. NOT VALID: old rows stay as they are.
ALTER TABLE audit_log ADD CONSTRAINT audit_log_bounded CHECK (
    length(actor) <= 200 AND length(action) <= 100 AND length(subject) <= 500
    AND octet_length(detail::text) <= 65536) NOT VALID;
