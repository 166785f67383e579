// Package testenv gives each test its own freshly migrated PostgreSQL database
// (cloned from a template built once per schema) and its own Redis key prefix,
// so tests run in parallel and never see each other's data.
//
// It is the one test-helper package: New (a database and prefix), Redis and
// RedisPrefix (Redis alone), Do and Call (JSON or a form over HTTP),
// FormClient (cookies kept and redirects shown, for pages), NewBrowser
// (headless Chromium, skipped with a message where none is installed; axe-core
// vendored under testdata for the accessibility checks), StartPostgres and
// StartRedisCluster (private servers a test may stop, kill or fail over, on
// booking/lab/localsrv), EachRedis (a test run on the single node and on the
// Redis Cluster), Eventually (waiting for a condition with a deadline,
// instead of a fixed sleep or a loop of one's own), Clock (a settable clock
// for code that takes a Now func), and the goleak options.
//
// # What the tests need
//
// PostgreSQL on 127.0.0.1:5432 with trust authentication for the connecting
// user, Redis on 127.0.0.1:6379, chromium for the browser tests and poppler's
// pdftotext for the e-ticket's. Variables:
//
//	TATKAL_TEST_DATABASE_URL            the server the test databases live on (default postgres://127.0.0.1:5432/postgres?sslmode=disable)
//	TATKAL_TEST_REDIS_URL               default redis://127.0.0.1:6379/0 (several nodes, comma-separated: a cluster)
//	TATKAL_TEST_DB_POOL                 connections per test database, at least 4 (default 16)
//	TATKAL_TEST_REDIS_CLUSTER           the cluster of EachRedis's variants (default 127.0.0.1:7001-7003, which .ci/run starts)
//	TATKAL_TEST_REDIS_CLUSTER_REQUIRED  set: a missing cluster fails the cluster variants instead of skipping them (.ci/run sets it)
//	TATKAL_SCREENSHOTS                  where the browser tests save their screenshots
//
// Knobs of single tests and benchmarks, read where they are used:
// TATKAL_INTERLEAVE_SECONDS and TATKAL_INTERLEAVE_SEED (booking's interleaving
// test), TATKAL_PROPERTY_OPS and TATKAL_PROPERTY_SEED (inventory's property
// test), TATKAL_BENCH_ENTRANTS (the waiting room's memory benchmark),
// TATKAL_MEASURE_LOGIN (booking/api's login memory measure),
// TATKAL_RECON_BENCH_PAYMENTS, _STEPS, _EXPLAIN and _PROFILE (reconciliation's
// benchmark), TATKAL_BENCH_USERS, TATKAL_BENCH_SECONDS, TATKAL_BENCH_HEAP and
// TATKAL_BENCH_CHALLENGE_BITS (rehearse's BenchmarkServeRSS),
// TATKAL_REHEARSAL_SEEDS (TestSmallRehearsal's seeds), TATKAL_RUSH_USERS
// (booking/api's TestRushNeverOversells: 600 passengers unless set). booking/lab/teststack
// sets TATKAL_TEST_WORKER, TATKAL_TEST_SERVE, TATKAL_TEST_PAUSE,
// TATKAL_TEST_SWEEP_INTERVAL, TATKAL_TEST_NOT_CREATED_AFTER and
// TATKAL_TEST_INQUIRY_AFTER for the
// processes a test starts.
//
// # The connection budget
//
// PostgreSQL allows 100 connections by default, and pools open connections
// only as they are used. go test ./... runs about four tests at once (two
// packages, two tests each), each on a pool of at most PoolSize (a worker
// subprocess 8, main's tests 10, the berth race 24: one connection per racing
// booking); a chaos test's five processes add theirs, and an idle go run . dev
// holds a handful of its 20. The defaults keep all of it under 100 with room.
package testenv
