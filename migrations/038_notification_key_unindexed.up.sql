-- A notification's idempotency key is a random UUID the messaging gateway
-- dedups on; nothing of ours looks a row up by it. Its unique index cost
-- two random-page B-tree inserts a ticket (an e-ticket is an SMS and an
-- e-mail) on the confirmation's path, and at a month's rows a cache miss
-- each. gen_random_uuid() keys collide with odds of 2^-122 a pair.
ALTER TABLE notifications DROP CONSTRAINT notifications_idempotency_key_key;
