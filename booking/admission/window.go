package admission

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
)

// LateBase is the first score of an entrant after the randomisation
// window: cohort scores are below it (52-bit hashes), later entrants get
// LateBase + their arrival number, all exact in a Redis score.
const LateBase = 1 << 52

// Score is the cohort place of ticket under seed: the first 52 bits of
// HMAC-SHA256(seed, ticket). Ordering the cohort by (score, ticket) is
// the admission order; anyone with the revealed seed can recompute it.
func Score(seed []byte, ticket string) int64 {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(ticket))
	return int64(binary.BigEndian.Uint64(m.Sum(nil)) >> 12)
}

// Commitment is the published SHA-256 of a seed, in hex.
func Commitment(seed []byte) string {
	h := sha256.Sum256(seed)
	return hex.EncodeToString(h[:])
}

// Window is the admission window of one queue-mode shard.
type Window struct {
	ShardID         int64
	Seed            []byte // secret until RevealedAt
	Commitment      string
	PrequeueOpensAt time.Time
	OpensAt         time.Time
	RandomiseUntil  time.Time
	ClosesAt        time.Time
	SealedAt        *time.Time
	RevealedAt      *time.Time
	CohortSize      *int
	// DrawsReopened: how often the queue was lost before its seal and the
	// draw reopened (Controller.reopen); DrawReopenedAt the last time.
	DrawsReopened  int
	DrawReopenedAt *time.Time
	loaded         time.Time
}

// Revealed reports whether the seed may be shown.
func (w *Window) Revealed() bool { return w.RevealedAt != nil }

// windowReload is how often a window not yet revealed is read again, so
// a seal made by another process shows up everywhere.
const windowReload = 2 * time.Second

// windowRefreshWait bounds the wait of the one caller rereading a cached
// window for the pool: past it, it goes on with the cached window.
const windowRefreshWait = time.Second

// WindowFor returns the shard's window, creating it (and committing to a
// fresh random seed) the first time anyone asks. Cached per process; until
// it is revealed, one caller at a time rereads it every windowReload while
// the others go on with the cached one (a queue-status poll never waits
// for the pool when the window is known), and a failed reread keeps it.
func (s *Service) WindowFor(ctx context.Context, shard *booking.Shard) (*Window, error) {
	var old *Window
	if v, ok := s.windows.Load(shard.ID); ok {
		old = v.(*Window)
		if old.Revealed() || time.Since(old.loaded) < windowReload || s.windowRead.Busy(shard.ID) {
			return old, nil
		}
	}
	rctx := ctx
	if old != nil {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, windowRefreshWait)
		defer cancel()
	}
	w, err := s.windowRead.Do(rctx, shard.ID, func() (*Window, error) {
		if old == nil { // the first read in this process: the window may not exist yet
			seed := make([]byte, 32)
			if _, err := rand.Read(seed); err != nil {
				return nil, fmt.Errorf("window seed: %w", err)
			}
			if _, err := s.pool.Exec(rctx, `INSERT INTO admission_windows (shard_id, seed, seed_sha256, prequeue_opens_at, opens_at, randomise_until)
				VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (shard_id) DO NOTHING`,
				shard.ID, seed, Commitment(seed), shard.OpensAt.Add(-s.cfg.Prequeue), shard.OpensAt, shard.OpensAt.Add(s.cfg.Randomise)); err != nil {
				return nil, fmt.Errorf("create window of shard %d: %w", shard.ID, err)
			}
		}
		w, err := s.loadWindow(rctx, shard.ID)
		if err != nil {
			return nil, err
		}
		w.ClosesAt = shard.ClosesAt
		s.windows.Store(shard.ID, w)
		return w, nil
	})
	if err != nil && old != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		return old, nil
	}
	return w, err
}

func (s *Service) loadWindow(ctx context.Context, shardID int64) (*Window, error) {
	w := &Window{ShardID: shardID, loaded: time.Now()}
	err := s.pool.QueryRow(ctx, `SELECT seed, seed_sha256, prequeue_opens_at, opens_at, randomise_until, sealed_at, revealed_at, cohort_size,
		draws_reopened, draw_reopened_at
		FROM admission_windows WHERE shard_id = $1`, shardID).Scan(&w.Seed, &w.Commitment, &w.PrequeueOpensAt, &w.OpensAt,
		&w.RandomiseUntil, &w.SealedAt, &w.RevealedAt, &w.CohortSize, &w.DrawsReopened, &w.DrawReopenedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_WINDOW", "Window %d has no waiting room.", shardID)
	}
	if err != nil {
		return nil, fmt.Errorf("load window %d: %w", shardID, err)
	}
	return w, nil
}

// Fairness is what is published about a window: the commitment always;
// the seed and the cohort once revealed.
type Fairness struct {
	WindowID        int64      `json:"window_id"`
	Intent          string     `json:"intent"`
	SeedSHA256      string     `json:"seed_sha256"`
	PrequeueOpensAt time.Time  `json:"prequeue_opens_at"`
	OpensAt         time.Time  `json:"opens_at"`
	RandomiseUntil  time.Time  `json:"randomise_until"`
	Seed            string     `json:"seed,omitempty"`
	RevealedAt      *time.Time `json:"revealed_at,omitempty"`
	CohortSize      *int       `json:"cohort_size,omitempty"`
	// DrawsReopened: the queue was lost before its seal this many times and
	// the draw reopened until randomise_until (the last at DrawReopenedAt).
	DrawsReopened  int        `json:"draws_reopened"`
	DrawReopenedAt *time.Time `json:"draw_reopened_at,omitempty"`
	Admitted       int64      `json:"admitted"`
	Method         string     `json:"method"`
	// Entrants: the cohort's tickets with their scores, in admission order
	// (only once revealed, and only when asked for).
	Entrants []Entrant `json:"entrants,omitempty"`
	// Figures: the window's aggregate fairness figures, once its fairness
	// job has computed them after the draw.
	Figures *Figures `json:"fairness_figures,omitempty"`
}

// Entrant is one member of the randomised cohort.
type Entrant struct {
	Ticket string `json:"ticket"`
	Score  int64  `json:"score"`
}

const method = "Everyone who joined the queue by randomise_until gets score = first 52 bits of HMAC-SHA256(key = seed, message = ticket); " +
	"they are admitted in ascending (score, ticket) order, and everyone who joined later is admitted after them in arrival order. " +
	"If the queue was lost before its seal, the draw reopened until randomise_until (draws_reopened) and everyone who joined again by then was drawn. " +
	"Check SHA-256(seed) = seed_sha256, then recompute the order from the entrants."

// Fairness returns the published facts of shard's window.
func (s *Service) Fairness(ctx context.Context, shardID int64, withEntrants bool) (Fairness, error) {
	shard, err := s.cfg.Catalog.ByID(ctx, shardID)
	if err != nil {
		return Fairness{}, err
	}
	if shard.Mode != "queue" {
		return Fairness{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_WINDOW", "Train %s %s %s has no waiting room: it is booked directly.", shard.Train, shard.Class, shard.Date.Format(time.DateOnly))
	}
	w, err := s.WindowFor(ctx, shard)
	if err != nil {
		return Fairness{}, err
	}
	f := Fairness{WindowID: shardID, Intent: shard.Key(), SeedSHA256: w.Commitment, PrequeueOpensAt: w.PrequeueOpensAt,
		OpensAt: w.OpensAt, RandomiseUntil: w.RandomiseUntil, DrawsReopened: w.DrawsReopened, DrawReopenedAt: w.DrawReopenedAt, Method: method}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM admission_log WHERE shard_id = $1`, shardID).Scan(&f.Admitted); err != nil {
		return Fairness{}, fmt.Errorf("fairness %d: %w", shardID, err)
	}
	if !w.Revealed() {
		return f, nil
	}
	f.Seed, f.RevealedAt, f.CohortSize = hex.EncodeToString(w.Seed), w.RevealedAt, w.CohortSize
	if fig, ok, err := StoredFigures(ctx, s.pool, shardID); err != nil {
		return Fairness{}, err
	} else if ok {
		f.Figures = &fig
	}
	if withEntrants {
		rows, err := s.pool.Query(ctx, `SELECT ticket, score FROM admission_entrants WHERE shard_id = $1 ORDER BY score, ticket`, shardID)
		if err != nil {
			return Fairness{}, fmt.Errorf("fairness %d entrants: %w", shardID, err)
		}
		var e Entrant
		if _, err := pgx.ForEachRow(rows, []any{&e.Ticket, &e.Score}, func() error {
			f.Entrants = append(f.Entrants, e)
			return nil
		}); err != nil {
			return Fairness{}, fmt.Errorf("fairness %d entrants: %w", shardID, err)
		}
	}
	return f, nil
}
