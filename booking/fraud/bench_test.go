package fraud

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkRecord measures one batch of 200 signals (3 passengers each), the
// size a group commit or a follow-up job would hand over.
func BenchmarkRecord(b *testing.B) {
	ctx := context.Background()
	env := setup(b)
	g, err := Generate(ctx, env.env.Pool, env.rec, Population{Honest: 200, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	sigs := make([]Signal, len(g.Honest))
	for i, id := range g.Honest {
		sigs[i] = Signal{ShardID: g.ShardID, UserID: id, DeviceID: fmt.Sprintf("dev%d", i), IP: netipFrom(i % 250), SolveMS: 1000 + i,
			HeldAt: g.OpensAt.Add(time.Duration(i) * time.Millisecond), Instrument: fmt.Sprintf("u%d@upi", i),
			Passengers: []Passenger{{Name: "A B", Age: 30, IDType: "PAN", IDRef: "X1"}, {Name: "C D", Age: 31}, {Name: "E F", Age: 9}}}
	}
	b.ResetTimer()
	for b.Loop() {
		for i := range sigs {
			sigs[i].HoldID = uuid.New()
		}
		if err := env.rec.Record(ctx, env.env.Pool, sigs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(sigs)), "µs/signal")
}

// BenchmarkClusterWindow measures one window's run over a large population.
func BenchmarkClusterWindow(b *testing.B) {
	ctx := context.Background()
	env := setup(b)
	g, err := Generate(ctx, env.env.Pool, env.rec, Population{Rings: 20, RingSize: 10, Families: 500, Honest: 10000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	svc := &Service{Pool: env.env.Pool, Clusterer: Clusterer{Config: DefaultConfig()}}
	b.ResetTimer()
	var res Result
	for b.Loop() {
		if res, err = svc.ClusterWindow(ctx, g.OpensAt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Signals), "signals")
	b.ReportMetric(float64(res.Flagged()), "flagged")
}
