-- Passengers' photo ID numbers at rest (issue 39, item 13): sealed with
-- AES-GCM under a key the database never sees (booking/pii), so a copy of
-- the database, a backup or a reader of these tables learns no number.
--   id_sealed  "keyid:base64url(nonce || ciphertext)"; the key id lets keys rotate
--   id_hint    the last four characters, all that is ever shown (••••1234)
--   id_index   the keyed hash the fraud signals know the number by
--              (TATKAL_FRAUD_KEY): equality lookups use it, never the number
-- id_ref is kept only until the processes seal what older versions wrote
-- in clear (booking.SealClearIDs at start, `tatkal ids reseal`); new rows
-- leave it empty. A migration cannot seal: it has no key.
ALTER TABLE passenger_master
    ADD COLUMN id_sealed text NOT NULL DEFAULT '',
    ADD COLUMN id_hint   text NOT NULL DEFAULT '' CHECK (length(id_hint) <= 4),
    ADD COLUMN id_index  text NOT NULL DEFAULT '';
ALTER TABLE booking_passengers
    ADD COLUMN id_sealed text NOT NULL DEFAULT '',
    ADD COLUMN id_hint   text NOT NULL DEFAULT '' CHECK (length(id_hint) <= 4),
    ADD COLUMN id_index  text NOT NULL DEFAULT '';

-- What is still in clear, found without a scan (empty once sealed).
CREATE INDEX passenger_master_clear_id ON passenger_master (id) WHERE id_ref <> '';
CREATE INDEX booking_passengers_clear_id ON booking_passengers (booking_id, seq) WHERE id_ref <> '';
CREATE INDEX holds_clear_id ON holds (id) WHERE jsonb_path_exists(passengers, '$[*].id_ref ? (@ != "")');
-- An account's saved passengers by ID number: the duplicate check.
CREATE INDEX passenger_master_id_index ON passenger_master (user_id, id_index) WHERE id_index <> '' AND removed_at IS NULL;
