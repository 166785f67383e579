-- Status banners (issue 36, 6): what passengers are told on the site and in
-- /v1 answers while something is wrong or planned. Info and warning banners
-- are shown once created; a critical one waits for a second person
-- (approved_by), as it tells every passenger something is badly wrong.
CREATE TABLE status_banners (
    id           bigserial PRIMARY KEY,
    text         text NOT NULL CHECK (length(text) BETWEEN 3 AND 300),
    severity     text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    scope        text NOT NULL CHECK (scope IN ('site', 'api', 'both')),
    starts_at    timestamptz NOT NULL,
    ends_at      timestamptz NOT NULL,
    state        text NOT NULL CHECK (state IN ('PENDING', 'ACTIVE', 'WITHDRAWN')),
    created_by   bigint NOT NULL REFERENCES console_users (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    approved_by  bigint REFERENCES console_users (id),
    approved_at  timestamptz,
    withdrawn_by bigint REFERENCES console_users (id),
    withdrawn_at timestamptz,
    CHECK (ends_at > starts_at),
    -- nobody approves their own banner
    CHECK (approved_by IS NULL OR approved_by <> created_by),
    CHECK (severity <> 'critical' OR state <> 'ACTIVE' OR approved_by IS NOT NULL)
);
CREATE INDEX status_banners_live ON status_banners (ends_at) WHERE state = 'ACTIVE';
