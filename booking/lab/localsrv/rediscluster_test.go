package localsrv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A node whose port was taken between FreePort's look and redis-server's
// bind exits at once; it is started again on another port instead of
// failing the cluster's start after its timeout.
func TestNodeStartedAgainWhenItsPortIsTaken(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	calls := 0
	nodePort = func() (int, error) {
		calls++
		if calls == 1 {
			return takenPort, nil
		}
		return FreePort()
	}
	defer func() { nodePort = FreePort }()
	dir := t.TempDir()
	rc := &RedisCluster{dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	n, err := rc.startNode(ctx)
	if err != nil {
		t.Fatalf("start a node: %v", err)
	}
	defer n.Kill()
	if calls != 2 || n.Addr == taken.Addr().String() {
		t.Errorf("node on %s after %d ports, want the second port", n.Addr, calls)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("the taken port cost %v", waited)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d node directories, want 2 (the failed one and the node's)", len(entries))
	}
}
