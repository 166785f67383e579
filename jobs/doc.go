// Package jobs wires River: the client, the workers (thin: each calls a domain
// service) and the booking stack's share of the periodic schedule, which is
// declared, with the back office's, in one list (jobs/schedule: what runs
// when, in IST where the business means a time of day; the console lists
// it). Job args live beside the domain that
// enqueues them and are inserted in the same transaction as the state change
// that causes them. Only booking/app, which builds the River client and the
// services the workers call once, and jobs/backoffice (the back office's
// workers over those services, which only main.go imports) import this
// package.
//
// Every job is idempotent, so River may run one twice: a job left running by a
// killed worker is rescued after DefaultRescueStuckJobsAfter (two minutes, not
// River's hour), and group jobs (expiry, seat sync, core sync) give each item
// that failed a job of its own kind rather than repeat what succeeded. Workers
// of an older release do not know a newer release's kinds and River retries
// those until new workers take them, so a rolling deploy starts the workers
// first.
package jobs
