-- Ticket deposit receipts (issue 39, item 14): a passenger's claim of a
-- full refund of a confirmed Tatkal ticket because the train ran over 3
-- hours late at the boarding station or did not run from it (DOMAIN.md,
-- "Cancellation and refunds"; the time limits are booking/tdr's Rules,
-- published on /rules). Finance decides: one person at or below the
-- approval limit, two different people above it (first_by, then
-- decided_by); the refund is a refunds row with reason TDR (refund_id).
-- One claim per booking; a refusal is final.
CREATE TABLE tdrs (
    id           bigserial PRIMARY KEY,
    booking_id   bigint NOT NULL UNIQUE REFERENCES bookings (id),
    user_id      bigint NOT NULL REFERENCES users (id),
    reason       text NOT NULL CHECK (reason IN ('TRAIN_LATE', 'TRAIN_NOT_RUN')),
    late_minutes int CHECK (late_minutes IS NULL OR late_minutes BETWEEN 181 AND 4320),
    note         text NOT NULL DEFAULT '' CHECK (length(note) <= 1000),
    amount_paise bigint NOT NULL CHECK (amount_paise > 0),
    status       text NOT NULL DEFAULT 'FILED' CHECK (status IN ('FILED', 'APPROVED', 'REFUSED')),
    filed_at     timestamptz NOT NULL DEFAULT now(),
    first_by     text,
    first_at     timestamptz,
    decided_by   text,
    decided_at   timestamptz,
    answer       text NOT NULL DEFAULT '' CHECK (length(answer) <= 1000),
    refund_id    uuid REFERENCES refunds (id),
    CHECK ((reason = 'TRAIN_LATE') = (late_minutes IS NOT NULL)),
    CHECK ((first_by IS NULL) = (first_at IS NULL)),
    CHECK ((status = 'FILED') = (decided_by IS NULL) AND (decided_by IS NULL) = (decided_at IS NULL)),
    CHECK ((status = 'APPROVED') = (refund_id IS NOT NULL)),
    -- nobody gives both approvals of one claim
    CHECK (decided_by IS NULL OR first_by IS NULL OR decided_by <> first_by OR status = 'REFUSED')
);
CREATE INDEX tdrs_open ON tdrs (filed_at) WHERE status = 'FILED';
CREATE INDEX tdrs_user ON tdrs (user_id);
