package rehearse_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"tatkal/booking/lab/rehearse"
)

// lockedBuffer takes the progress lines of a run's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestReportsGoToATemporaryDirectoryByDefault: tatkal rehearse without
// --out writes its reports (and the partial one during the run) to a new
// temporary directory it names, never into the directory it was started
// from, which is usually a checkout.
func TestReportsGoToATemporaryDirectoryByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearsal: a 5 s window")
	}
	wd := t.TempDir()
	t.Chdir(wd)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // os.MkdirTemp's parent, removed with the test

	o := rehearse.Defaults()
	o.Travellers, o.Berths, o.Duration, o.Mode, o.Seed, o.Seeds = 4, 8, 5*time.Second, rehearse.Direct, 1, 1
	o.Drain = 30 * time.Second // ends as soon as every payment has resolved
	cfg := testConfig()
	cfg.DBPool = 6
	var out lockedBuffer
	if err := rehearse.Command(context.Background(), cfg, o, "", &out); err != nil {
		// The promises are TestSmallRehearsal's subject; a report was
		// written either way, and where it went is this test's.
		if !strings.Contains(err.Error(), "broke a promise") {
			t.Fatal(err)
		}
		t.Logf("the run: %v", err)
	}
	if left, err := os.ReadDir(wd); err != nil || len(left) > 0 {
		t.Errorf("the working directory holds %v (%v), want nothing", names(left), err)
	}
	m := regexp.MustCompile(`(?m)^Reports go to (.+)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the output does not say where the reports go:\n%s", out.String())
	}
	dir := m[1]
	if rel, err := filepath.Rel(tmp, dir); err != nil || strings.HasPrefix(rel, "..") || rel == "." {
		t.Errorf("reports in %s, want a new directory under the temporary directory %s", dir, tmp)
	}
	for _, ext := range []string{".json", ".md"} {
		if got, _ := filepath.Glob(filepath.Join(dir, "rehearsal-*[0-9]"+ext)); len(got) != 1 {
			t.Errorf("%d rehearsal-*%s reports in %s, want 1", len(got), ext, dir)
		}
	}
}

func names(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
