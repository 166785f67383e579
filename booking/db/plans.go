package db

import "github.com/jackc/pgx/v5"

// GenericPlans is the statement that makes a transaction's prepared
// statements use their generic plan, made once per connection, instead of
// a custom plan made at every execution.
//
// PostgreSQL plans each of a connection's prepared statements afresh for
// its first five executions before it considers the generic plan, and a
// group commit's statements (a batch of holds, a group of confirmations
// with their bodies) run on whichever pool connection the writer takes,
// each connection seeing a statement only now and then: in a wallet rush
// nearly every execution was planned (6.6 plans per wallet confirmation,
// the holds' INSERT at 1-2.5 ms a plan, about a fifth of the statements'
// time; issue 38). These statements look rows up by key or unnest their
// parameters, so the generic plan is the plan a custom one would be; a
// statement whose plan depends on its parameters' values stays outside
// such transactions.
const GenericPlans = "SET LOCAL plan_cache_mode = force_generic_plan"

// GenericPlansTx begins a transaction that runs under GenericPlans, the
// SET riding in BEGIN's round trip.
var GenericPlansTx = pgx.TxOptions{BeginQuery: "BEGIN; " + GenericPlans}
