// Package pspsim is the payment gateway simulator (tatkal psp): a separate
// HTTP server that speaks pspapi like a real Indian gateway, with realistic
// latency, customer behaviour, bank outcomes and faults per route, so the
// orchestrator's adapter is exercised over a real protocol.
//
// Everything it knows (payments, refunds, webhook deliveries, route settings)
// lives in its own PostgreSQL schema, so a restart keeps it.
//
// Two gateways, swiftpay and bharatpg, each with UPI, card and net-banking
// routes. Per route, at PUT /admin/routes/{gw}/{method} (Bearer
// TATKAL_SIM_ADMIN_TOKEN; unset, the admin API is off): latency, declines,
// pending, timeouts, lost and duplicate callbacks, late success, capacity,
// outage, refused refunds, inquiries without amounts. The customer's page
// (approve or decline, the card number or bank login typed there) stands for
// the bank; the card fingerprint and account reference it reports are keyed
// hashes of what was typed, stable across payments and both gateways. Each
// gateway writes a daily settlement file in its own format, with seeded faults
// at PUT /admin/settlement-faults/{gw}, and the bank's statement of payouts is
// at GET /bank/v1/statements/{date}.csv, with the credits no payout explains
// that the faults add (stray_credits).
package pspsim
