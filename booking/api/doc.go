// Package api serves the passenger JSON API under /v1: login, session
// preparation, availability, hold, status and cancel. Errors are
// application/problem+json with a stable code.
//
// Every route is in one list in api.go; a handler decodes, calls the domain
// service and answers through booking/api/reply, the one writer of /v1 answers
// (OpenAPI at /v1/openapi.json). The session token is checked by signature (no
// database call), and holds beyond TATKAL_MAX_HOLDS_IN_FLIGHT per process are
// shed at once with 503 and Retry-After.
//
//   - GET /v1/bookings/{hold_id}/status says it in words
//     (booking/bookingstate): confirmed with PNR and berths; confirming;
//     waiting for the bank ("you will get a ticket or an automatic refund by
//     14:35"); failed, nothing charged; refunded, with reference, amount and
//     date.
//   - POST /v1/bookings/{hold_id}/cancel cancels what the passenger saw: the
//     unpaid hold (409 ALREADY_CONFIRMED if the payment made it a ticket
//     first) or, asked explicitly with {"cancel":"booking"}, the ticket under
//     the Tatkal refund rules, which GET on the same path previews
//     (booking.Lifecycle.CancelBooking).
//   - Hold and queue answers that refuse a suspected bot are byte-identical to
//     the capacity answer (HIGH_DEMAND).
//   - Every hold carries the booking check (a solved POST /v1/challenge, or
//     {"type":"OTP","code"} after POST /v1/challenge/otp), on every shard,
//     from the account's one booking session (the newest to ask).
//   - Accounts (signup.go, booking/signup): POST /v1/signup/code and
//     /v1/signup open one with a code sent by SMS; POST /v1/account/identity
//     verifies it with the identity service; POST /v1/auth/reset/code and
//     /v1/auth/reset set a forgotten password. A code request answers the
//     same whether the number has an account.
//
// # Status notices
//
// While operators show a status banner to the API (booking/banner, scope api
// or both), every /v1 answer but /v1/admin and /v1/internal carries one
// header per banner, most severe first (notice.go), for example:
//
//	Tatkal-Notice: id=3; severity=warning; until=2026-12-07T11:30:00Z; text=UPI%20payments%20are%20slow
//
// severity is info, warning or critical; until is when it ends (UTC); text is
// percent-encoded UTF-8 (decode as a URL path segment). A header, not a body
// field, so no answer's shape changes and a client that ignores it loses
// nothing. The banners are read from a copy refreshed every two seconds.
package api
