// Package console is the operator console under /console: people and roles,
// the live funnel over a websocket, guarded control levers, the operations
// pages, the audit log, River's UI and /metrics. Every figure comes from
// PostgreSQL or Redis, so any number of app processes show the same console.
//
// Roles are ops, finance, fraud, admin and team; sessions live in
// PostgreSQL and every form carries a CSRF token. Each route carries its
// roles in the one route list of console.go. A team member (role team,
// console_users.teams: one or more of recon.Teams) works the
// reconciliation exceptions their teams own and opens nothing else: the
// list, its exports and an exception's page show their teams' only, and
// an action on another team's exception, single or bulk, is refused 403
// NOT_YOUR_TEAM and audited (auth.go's mayWork; recon.ForTeams checks it
// again under the exception's lock). They take an exception themselves
// only; finance assigns to finance, admins and the owning team's members.
// They propose write-offs and refunds; approving what moves or writes off
// money is a finance person's (403 FINANCE_APPROVES), as recon's rule says.
// tatkal dev (and only dev) seeds ops1, finance1 (the finance lead),
// finance2, fraud1, admin1, admin2 and team-<team> for every owning team,
// password console-demo. Elsewhere the first admin comes from tatkal users add
// (users_cli.go), on the migrated, empty database.
//
// # Console users
//
// Users (users.go) is the one place console users change, from the
// admins' page /console/users (users_page.go) and from tatkal users; every
// change is audited in its transaction, as the admin's login or as
// cli:<operating-system user>. Passwords follow auth.CheckNewPassword.
// Making someone an active admin on the console (a new admin, a promotion,
// enabling a disabled admin) is a grant in console_admin_grants: one admin
// proposes, a different one approves, and the proposer must still be an
// active admin then; both names are audited. One admin may not set another
// admin's password (they could sign in as that admin and approve their own
// grant), change their own role or disable themselves, and the last active
// admin is never disabled or demoted (every such change locks the active
// admins first, so two at once cannot both pass). Disabling deletes the
// user's sessions and revokes their API tokens; a role change holds on the
// next request, since sessions read the role each time.
//
// # The live funnel
//
// Pushed over a websocket every second (hub.go drops slow clients instead of
// waiting on them; the page falls back to polling): per shard and overall,
// counts per stage per second, conversion, p95 per stage, seats left, payment
// route health, the throttle and admission rate in force, and the invariant
// check per shard (green, or red with the violation). Figures are summed over
// every app process through Redis (booking/funnel). On top, the rush over
// time: charts of the last 10 minutes in 5-second steps (queue entered,
// admitted, queue depth, hold attempts, held, refused or sold out, payments
// initiated, succeeded, failed or unknown, confirmed), one line per busy
// shard; shards with under 5 % of the busiest shard's events are one grey
// dashed line, and a checkbox (CSS, no JavaScript) draws each on its own.
// Quiet shards' panels fold to one line; a shard in trouble is never folded.
// Below them, p95 per timed stage (from latency histograms summed over
// processes: p95s do not add up, bucket counts do) and one chart per payment
// route: calls answered, refused (4xx) and unanswered (timeout, 5xx, 429: what
// opens the breaker), noted "breaker opened N×". Every chart is one component
// (views.LineChart drawing a views.Chart).
//
// # Levers
//
// Console forms and /v1/admin/levers (package levers): route weights, kill
// switches (waitlist, card, net banking, non-essential), hold window per
// method, admission rate and pause, a shard's mode, the per-shard throttle,
// holding or extending a window. Each has bounds, a preview and a typed
// confirmation; the dangerous ones need a second admin's approval (a different
// person by user id, whether each used the console or a token); an optional
// automatic revert is a River job inserted with the change, audited as
// system:lever-revert on behalf of the change's author. Every change is
// audited and in force on every process within a second.
//
// The degradation ladder and rules as data (levers/degrade.go, rules.go):
// availability_staleness (global, 250-10,000 ms an availability answer is
// served from the cache, default 1,000), poll_slowdown (global or shard:N,
// off or 2-10 times the waiting room's poll_after_ms, at most 45 s),
// light_form (global or shard:N: the single-step booking form), and the
// kill switch NON_ESSENTIAL, which switches off booking history, e-ticket
// PDFs, chart details and the queue's suggested alternatives (a 503 page,
// Retry-After 300, that says so). The "rule" lever sets, per scope, the
// Tatkal rules (daily_cap, person_daily_cap, agent_bar minutes,
// max_passengers, hold_window seconds at hold time, passenger_accounts)
// and the fraud clustering thresholds (fraud_edge_threshold,
// fraud_min_members, fraud_min_score) over those the process was
// configured with; one that loosens a limit needs a second admin. Holds,
// the committer's caps, queue entry and the next clustering run read them
// within a second on every process (TestLadderAndRulesReachSecondProcess).
//
// shard_throttle (scope global or shard:N, off or 1-20,000 calls a second;
// above 5,000 a second admin approves) paces hold calls, and as many payment
// initiations, that reach the booking core for the shard; a shard's own value
// wins over the global one. It answers the reservation core slowing down by
// pacing what is sent to it, instead of letting queues and timeouts build
// inside (booking.Throttle). A throttled hold spends no admission token, but
// on a queue shard the admitted keep their turn only so long: slow
// admission_rate with it.
//
// shard_frozen (scope shard:N, on or off) refuses the shard's new holds and
// payment starts (503 SHARD_FROZEN) and admits no one to it. The invariant
// watch (package alarms) turns it on by itself, as system:invariant_check,
// when the shard's seats could sell twice; a person turns it off, with a
// second admin while the shard's seat alarm is still open.
//
// # Pages
//
//   - Alarms (/console/alarms; ops, finance, admin): what the invariant watch
//     found (package alarms), unacknowledged first, open or cleared, with the
//     freeze it pulled and the thresholds in force; acknowledging one is
//     audited with its note.
//   - Operations: shards with a guarded rebuild and their chart. A chart whose
//     delivery to the core FAILED is sent once more by "Send the chart to the
//     core again" (a compare-and-set FAILED → PENDING, so two operators at
//     once send it once; a send is leased by chart_sending_since, so a chart
//     left PENDING by a process that died mid-send is offered again); a chart
//     whose preparation FAILED is prepared again in one transaction. Stuck
//     payments by age with "inquire now" and the payment reviews (four eyes,
//     see SECURITY.md); hold and booking lookup; a user trace ("why did this
//     person not get a ticket", with the waiting room's refusals, the
//     admissions from admission_log and the refused hold attempts: sold out,
//     daily cap, live hold, throttled, high demand, no admission; these last
//     from booking.Holds.HoldRefusals, a capped per-account Redis list
//     written off the hold path in batches, dropped rather than waited for);
//     the audit
//     log (100 a page, filters by action and actor); River's UI at
//     /console/river/ (admin).
//   - Window fairness (/console/windows, ops and admin): each window's stored
//     fairness figures with the draw's verify result and, beside each group's
//     rate, admission.ByChance (red under 1 %), and any reopened draw.
//   - Window reviews (/console/reviews and /console/reviews/{shard}, ops and
//     admin; reviews.go): the post-window review booking/winreview's job
//     wrote once each window closed and settled: funnel against the berths
//     on sale, fairness, money by state with what is UNKNOWN, incidents, and
//     the levers changed while the window was open.
//   - Status banners (/console/banners, ops and admin; banners.go; the rules
//     in booking/banner): text, severity, where (site, api, both), start and
//     end in IST. Info and warning show at once; a critical one shows once a
//     second person approves it (never its author); anyone of them withdraws
//     one. Every change audited with the person's name.
//   - Lever suggestions (suggest.go), on the funnel and levers pages and in
//     the live funnel API: a route whose breaker is open or that answered
//     under half of at least 10 calls in the last minute is suggested off
//     ("0,off", reverting after 15m); a shard with 200 or more waiting, while
//     holds' p95 is under 800 ms, is suggested an admission_rate that drains
//     its queue in about a minute (50 to 5,000). A suggestion is a link that
//     fills the lever form; the person previews and confirms as for any
//     change, and the lever's own two-admin rule applies.
//   - Schedules (/console/schedules, ops, finance and admin; schedules.go):
//     every periodic job of jobs/schedule and the jobs they set off, each with
//     when it runs (an IST time of day for the daily reconciliation), its
//     next run (a queued job of the kind, else the schedule's next time) and
//     its last run from River's table: when it ended, how long it took, and
//     its outcome with the last error.
//   - Lab (/console/lab, ops and admin): a rehearsal on a scratch stack
//     (booking/lab/rehearse), one at a time, audited, with its live chart
//     against the backend's capacity line.
//   - Users (/console/users, admin): the users with their role, state and
//     live sessions, the admin grants waiting for a second admin, the add
//     form; one page per user to change role, disable or enable, and set a
//     password (see Console users above).
//   - API tokens (/console/tokens, admin): /v1/admin takes a console user's
//     personal token (Authorization: Bearer tkc_...), acting as that user with
//     their role. Shown once, stored as SHA-256, expiring (1-365 days),
//     revocable, last use recorded, creation and revocation audited. No shared
//     token is an identity.
//   - Finance (/console/finance, finance and admin; finance.go): runs by date
//     and gateway with "run this day"; exceptions filtered by kind, age, owner
//     team, assignee, state, gateway, day and amount, 50 a page; an
//     exception's legs side by side with their raw lines and its history, and
//     the actions assign, note, resolve with a code, propose and approve a
//     write-off (two people), approve an automatic money move above the limit
//     (the list and an exception's page are a team member's too, for their
//     teams; the list exports as CSV and .xlsx and has a select-all box);
//     uploads with their lineage, accepted by a second person before they
//     start automatic resolutions (finance_accept.go); the day's books to the
//     paisa; a run's workbook (.xlsx) and CSV; the month end, all gateways
//     or one (recon.MonthOf). The finance home is the runs
//     page headed by the exceptions past their SLA and the unread console
//     messages, which the user marks read (recon.MarkMessagesRead). GET
//     /v1/internal/reconciliation/{psp}/{date} answers the newest run and a
//     page of its exceptions.
//   - Fraud (/console/fraud, fraud and admin): the queue by score with claims,
//     approvals, appeals and metrics; a cluster's page with a server-rendered
//     SVG graph, members, bookings, evidence, decision and history; evidence
//     as XLSX (booking/fraud/review).
//
// # Metrics
//
// /metrics (Prometheus text, on TATKAL_METRICS_ADDR, never the public
// listener) serves this process's counters since it started (booking/metrics:
// tatkal_funnel_events_total{stage}, tatkal_hold_duration_seconds{outcome},
// tatkal_payment_duration_seconds{step},
// tatkal_queue_request_duration_seconds{op}, with go_* and process_*) and,
// read from PostgreSQL and Redis per scrape for the whole system (metrics.go):
// tatkal_payments_unresolved, tatkal_lever_changes_pending,
// tatkal_payment_route_success_ratio{gateway,method} and
// tatkal_payment_route_breaker_open{gateway,method}.
//
// # The admin API
//
// Authorization: Bearer tkc_... (a person's token), or a console session with
// X-CSRF-Token. Errors are the same problem documents as the rest of /v1
// (booking/api/reply).
//
// GET /v1/admin/funnel/live is the live funnel for machines, summed over every
// app process (Redis), over the last complete seconds (60 by default): per
// stage its count, its p95 in milliseconds (p95_ms, the upper bound of the
// histogram bucket the 95th percentile falls in; null without samples) and
// the samples behind it. Timed stages: queue_entered (joining the waiting
// room), hold_attempt (a hold decision), pay_initiated (a payment's start at
// the gateway) and confirmed (a confirmation's work, from its transaction's
// start to after its commit). Then each shard's counts with its queue
// (waiting, admitted) and the lever suggestions. A passenger's session token
// is no console token: 401.
//
//	GET  /v1/admin/funnel/live[?seconds=60]    ops, admin   200 the live funnel (funnel_api.go); 400 BAD_SECONDS (1-600)
//	GET  /v1/admin/levers                      ops, admin   200 levers in force, recent changes, definitions
//	POST /v1/admin/levers/preview              ops, admin   200 the effect and the word to type; 400 invalid
//	POST /v1/admin/levers/changes              ops, admin   201 applied, 202 waiting for a second admin; 400 invalid
//	POST /v1/admin/levers/changes/{id}/approve admin        200; 403 SAME_PERSON or ROLE, 404, 409 NOT_PENDING
//	POST /v1/admin/levers/changes/{id}/reject  admin or the proposer   200; 403, 404, 409 as above
//	GET  /v1/internal/reconciliation/{psp}/{date}   finance, admin   200; 400 BAD_PAGE or BAD_DATE, 404 NO_SUCH_RUN
//
// Every call may also answer 401 (no or a bad token, SESSION_EXPIRED), 403
// (ROLE; NO_CSRF for a session without its header), 429, 503 with Retry-After,
// and 500.
package console
