package bench

import "context"

// wideHolds is the service phase with WideConcurrency clients on fresh
// users of their own: the rate the same code reaches when batches are as
// large as the committer takes them, which the service phase's rate is set
// beside. A durable hold waits for the group commit's flush cycle, so with
// few clients the flush, not the work, bounds the rate.
func wideHolds(ctx context.Context, env *runEnv) (Phase, error) {
	wide := *env
	wide.opts.Concurrency = env.opts.WideConcurrency
	return holdOnly(ctx, &wide, "wide: Service.Hold, fresh users, more clients", env.wide, false, wide.serviceHold(ctx, "v")), nil
}
