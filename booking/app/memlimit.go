package app

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultServeMemoryLimit is serve's soft memory limit without in-process
// workers: under a rush the heap's garbage is collected before it doubles
// (GOGC's growth), so a 10,000-user sign-in burst does not leave the
// process at several times its live heap. It is soft: the runtime
// collects harder as it nears it, never fails an allocation.
const DefaultServeMemoryLimit = 200 << 20

// MemoryLimitFor is the soft limit a process with opts gets from cfg:
// TATKAL_MEMORY_LIMIT, else DefaultServeMemoryLimit for serve without
// workers, else none (math.MaxInt64: the runtime's own default). Workers,
// dev and the simulators keep no limit: their memory follows their jobs.
func MemoryLimitFor(cfg Config, opts Options) int64 {
	switch {
	case cfg.MemoryLimit > 0:
		return cfg.MemoryLimit
	case opts.Serve && !opts.Work:
		return DefaultServeMemoryLimit
	}
	return math.MaxInt64
}

// applyMemoryLimit sets the runtime's soft memory limit unless GOMEMLIMIT
// is set (the runtime has read it already, and an operator's explicit
// choice wins), and returns the limit in force.
func applyMemoryLimit(cfg Config, opts Options) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	limit := MemoryLimitFor(cfg, opts)
	debug.SetMemoryLimit(limit)
	return limit
}

// ParseBytes reads a size: a number of bytes, or one with a KiB, MiB or
// GiB suffix (as GOMEMLIMIT writes them).
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes, KiB, MiB or GiB", s)
	}
	return n * mult, nil
}
