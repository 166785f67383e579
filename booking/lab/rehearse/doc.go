// Package rehearse is the rehearsal lab: one Tatkal rush played through the
// real HTTP API by thousands of simulated travellers, once booking directly
// and once through the waiting room, with faults pulled through the real
// levers and simulators, and a report that puts the two side by side
// (seeds/001's comparison table) beside what a browser model cannot show:
// oversold berth-legs, payments unresolved after the drain, money balancing to
// the paisa and the CPU each process used.
//
// # A run
//
// Without a URL, Run creates a scratch database (migrated) and Redis prefix
// and runs the app, River workers, the waiting room's controller and the
// simulators on free loopback ports, and removes them after. Per mode it
// creates a sandbox shard (inventory_shards.sandbox; 12951 3A, mixed segments,
// parties of 1-4), verified accounts in four account-age bands with wallets,
// and runs every traveller as a goroutine through /v1: sign in, bind a device,
// (queue) enter and poll, solve the challenge, hold, pay by wallet, UPI, card
// or net banking (each traveller presses approve or decline on the gateway's
// page, the same seeded outcome in both modes), then poll the booking to a
// terminal answer. Ordinary travellers wait what Retry-After, poll_after_ms
// and next_check_after_ms say plus up to 30 % jitter; aggressive ones the
// multiplier faster, ignoring pacing. Each run books its own passengers and
// pays from its own UPI addresses, so the live limits across accounts never
// refuse a later run's travellers. A traveller who started paying, or was
// admitted before the window ended, goes on into the drain, which ends as soon
// as every payment has resolved.
//
// Faults (NAME@FROM-TO after the opening) pull real levers: core-slow (the
// reservation core's latency, a delay on every hold, the queue's admission
// rate cut to a quarter and the shard's throttle set to the quarter capacity),
// controller-outage (the admission_paused lever, refused on any shard but a
// sandbox one), gateway-degraded (every route: declines, timeouts, lost
// callbacks, latency, through the simulator's admin API), redis-shard-loss
// (the shard's seat state deleted; the sweeper rebuilds it).
//
// # Capacity
//
// seeds/001 takes its PRS capacity as an input and draws it on its chart; so
// does a rehearsal (Options.Capacity, DefaultCapacity hold and payment calls a
// second, a quarter of it during core-slow). It is configured, not measured
// per run: a measured service time swings with the neighbours' load, and one
// measured under the rush would fall as direct mode overloads the backend,
// hiding the overload. The report's peak backend load counts the calls that
// reached the core, as seeds/001 charts "requests reaching PRS"; calls refused
// at the door are origin traffic, their own row and chart. Queue mode's
// admission_rate lever is set to capacity / 4 calls per admitted traveller, as
// seeds/001 derives its queue's rate from the capacity.
//
// # The report
//
// rehearsal-<time>.json and .md: every row of seeds/001's table per mode side
// by side, then oversold berth-legs, tatkal check's violations, payments
// unresolved after the drain (each with its story), money in = tickets +
// refunds to the paisa, CPU seconds of this process, PostgreSQL and Redis,
// Spearman's rho of the queue window, how likely the aggressive travellers'
// success over the ordinary ones' is by chance alone (admission.ByChance), the
// per-second series and one followed traveller's steps. With several seeds:
// mean, sd, min and max of every figure and, per mode, every seed's travellers
// pooled by client type. tatkal rehearse (Command) writes them to a new
// temporary directory unless --out names one, and exits 1 if any run oversold,
// left a payment unresolved, did not balance or broke an invariant. The
// console's Lab page (Lab) starts one of up to 5,000 travellers and 10
// minutes, one at a time, audited, with a live chart.
//
// # The suite's rehearsal
//
// TestSmallRehearsal: 300 travellers, 40 berths, 30 s, both modes, three seeds
// at once on a stack each (TATKAL_REHEARSAL_SEEDS), core-slow over the opening
// and a controller outage during the queue's admissions. Queue mode's calls
// stay at or under capacity in every second of the faults' windows while
// direct mode's go past it; aggressive / ordinary success pooled over the
// seeds stays ≤ 1.25 unless it is also unlikely to be luck (ByChance under 1
// %). The pooled ratio, not each seed's: three seeds book about 90 tickets, so
// one seed's ratio swings from 0.6 to 1.5 with no advantage at all. Queue
// mode's aggressive travellers are chosen by place in the drawn order
// (Options.Stratify) and matched to the rest on bank answer, party and
// journey, so the ratio measures client behaviour, not the draw.
//
// tatkal seed abuse (SeedAbuse) uses the same travellers to play a fraud
// population through the API (abuse.go): every account signs in, verifies its
// phone, binds its planned device, holds with its planned passengers and pays
// with its planned instrument, within the live limits; a ring's accounts also
// try the customers earlier holds already have, and are refused and recorded
// (package fraud).
package rehearse
