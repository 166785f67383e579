package booking

// The booking service's verbs. Each holds the one Service (its state:
// the pool, the store, the committer, the levers) and carries the
// methods of one thing a reader looks for; Service embeds them all.
type (
	// Holds takes a hold for a passenger list, ends it (release, expiry
	// in Redis), and keeps the refusals of the user trace.
	Holds struct{ *Service }
	// Settlement turns a paid hold into a booking (alone or in groups of
	// confirmations) and settles a payment against its hold.
	Settlement struct{ *Service }
	// Lifecycle answers a hold's or booking's status and cancels, expires
	// and re-syncs them.
	Lifecycle struct{ *Service }
	// Waitlist promotes waitlisted bookings onto berths given back.
	Waitlist struct{ *Service }
	// Charts prepares a shard's chart at chart time and sends it to the
	// reservation core.
	Charts struct{ *Service }
	// CoreSync sends confirmed bookings to the reservation core and
	// handles its rejections.
	CoreSync struct{ *Service }
	// Passengers keeps an account's saved passengers and booking history.
	Passengers struct{ *Service }
)
