-- FORGET: erase the idempotency key (and the admission token's use-mark) of
-- an attempt that never became durable and whose seats are already free:
-- its process died between HOLD and its commit, and the sweeper released
-- the orphan record. A retry with the key is then a fresh attempt instead
-- of waiting, until the key lapses, for a commit that will never come.
-- KEYS: 1 holds 2 idem 3 the token's use-mark (optional)
-- ARGV: 1 hold_id
-- Answers LIVE (the record is still there: the attempt may yet commit),
-- FORGOTTEN, GONE (the key names another attempt, or none) or NOT_READY.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'NOT_READY' end
local hold_id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], hold_id) == 1 then return 'LIVE' end
if idem_hold(KEYS[2]) ~= hold_id then return 'GONE' end
redis.call('DEL', KEYS[2])
if KEYS[3] and redis.call('GET', KEYS[3]) == hold_id then redis.call('DEL', KEYS[3]) end
return 'FORGOTTEN'
