// Package teststack starts the booking stack of one test: service, committer,
// River workers and the /v1 API on a real HTTP server.
//
// A stack is booking/app's process graph (port 0, random secrets, the
// simulators in it or shared with another stack's) on a testenv database and
// Redis prefix, with its invariant check (Stack.CheckInvariants). A test may
// also run real processes of its own test binary and kill them: TestMain calls
// Main, which runs a worker (Stack.WorkerEnviron, TATKAL_TEST_WORKER) or a
// serve process (Stack.StartProcess, TATKAL_TEST_SERVE) when the environment
// asks for one. TATKAL_TEST_PAUSE=point@n stops a serve process for good the
// nth time it reaches a pause point (booking/pause.go), so a test can kill it
// between two steps; TATKAL_TEST_SWEEP_INTERVAL and
// TATKAL_TEST_NOT_CREATED_AFTER shorten a worker's sweeper and its wait for a
// payment the gateway never recorded.
package teststack
