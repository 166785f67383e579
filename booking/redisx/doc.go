// Package redisx opens Redis the one way the whole process does: a single
// node, or a Redis Cluster when the address lists several nodes, behind
// go-redis's UniversalClient, and walks keys on every master of a cluster.
//
// go-redis reloads a cluster's slot map only on MOVED, and after a failover
// nothing answers MOVED for the dead master's slots. So the cluster client
// here reloads the map every second of use and at once after a failed command,
// and sends a command that failed to dial again once after the reload
// (TestClusterClientFollowsFailover). Its connections' buffers are 8 KiB each
// way, not go-redis's 32 KiB: with a pool per node they were a large share of
// a serve process's heap under a rush.
package redisx
