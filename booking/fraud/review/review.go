package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
)

// Outcomes of a decision, mildest first (graduated responses).
const (
	Clear          = "CLEAR"           // false positive, labelled
	Watch          = "WATCH"           // keep an eye: flagged again next window
	ExtraChallenge = "EXTRA_CHALLENGE" // members' next challenges are harder
	CancelBookings = "CANCEL_BOOKINGS" // bulk: needs a second analyst
	Ban            = "BAN"             // bulk: needs a second analyst
)

// Reason codes. Clearing takes one of the first two; acting takes one of
// the others; OTHER needs a note.
var reasons = map[string]bool{
	"FALSE_POSITIVE": true, "FAMILY_OR_OFFICE": true,
	"SHARED_DEVICES": false, "SHARED_INSTRUMENTS": false, "PASSENGER_RESALE": false,
	"AUTOMATION": false, "AGENT_VIA_PERSONAL": false, "OTHER": false,
}

var outcomes = map[string]bool{Clear: false, Watch: false, ExtraChallenge: false, CancelBookings: true, Ban: true}

const (
	maxNote        = 2000
	defaultClaim   = 15 * time.Minute
	maxClaim       = 2 * time.Hour
	maxQueueLength = 500
)

// Service is the review queue.
type Service struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// EnforceDelay: how long after a decision (or its approval) the batch
	// may enforce it (DefaultEnforceDelay unless set).
	EnforceDelay time.Duration
	// Refunds records the refunds of upheld appeals against cancellations;
	// nil: such an appeal cannot be upheld here (nothing is changed).
	Refunds Refunder
}

// New returns the review service on pool.
func New(pool *pgxpool.Pool) *Service {
	return &Service{pool: pool, now: time.Now, EnforceDelay: DefaultEnforceDelay}
}

// Item is one cluster in the queue.
type Item struct {
	ClusterID    int64
	Window       time.Time
	Score        float64
	Members      int
	ClaimedBy    int64 // 0: free (or the claim lapsed)
	ClaimedUntil time.Time
}

// Decision is what an analyst decides on a cluster.
type Decision struct {
	Outcome string
	Reason  string
	Note    string
	// Members are the accounts it acts on, each a member of the cluster:
	// a case is decided member by member, and a member may get more than
	// one outcome (a cancellation and a ban), each once. None: every
	// member, and the decision closes the case.
	Members []int64
}

// Labels of a decision, what it says of its members for the weights of
// the next clustering (fraud reads fraud_decisions.label with
// fraud_decision_members).
const (
	LabelClear     = "CLEAR"     // honest: a false positive
	LabelUnsure    = "UNSURE"    // watched, neither cleared nor confirmed
	LabelConfirmed = "CONFIRMED" // fraud, acted on
)

// Label is the label a decision of outcome carries.
func Label(outcome string) string {
	switch outcome {
	case Clear:
		return LabelClear
	case Watch:
		return LabelUnsure
	}
	return LabelConfirmed
}

// Decided is a stored decision.
type Decided struct {
	ID            int64
	ClusterID     int64
	AnalystID     int64
	Decision      Decision
	NeedsApproval bool
	ApprovedBy    int64
}

var errNobody = booking.Errorf(booking.EFORBIDDEN, "NO_ANALYST", "Fraud review is done by an active fraud analyst or admin.")

// analyst checks id is an active console user whose role may review, and
// returns their login for the audit log.
func (s *Service) analyst(ctx context.Context, q pgx.Tx, id int64) (string, error) {
	if id <= 0 {
		return "", errNobody
	}
	var login, role string
	err := q.QueryRow(ctx, `SELECT login, role FROM console_users WHERE id = $1 AND NOT disabled`, id).Scan(&login, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errNobody
	}
	if err != nil {
		return "", fmt.Errorf("console user %d: %w", id, err)
	}
	if role != "fraud" && role != "admin" {
		return "", errNobody
	}
	return login, nil
}

// Queue lists flagged open clusters by score, highest first, claimed or not.
func (s *Service) Queue(ctx context.Context, limit int) ([]Item, error) {
	if limit <= 0 || limit > maxQueueLength {
		limit = maxQueueLength
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id, window_opens_at, score, members,
		       CASE WHEN claimed_until > $2 THEN claimed_by ELSE 0 END,
		       CASE WHEN claimed_until > $2 THEN claimed_until ELSE 'epoch'::timestamptz END
		FROM fraud_clusters WHERE flagged AND status = 'OPEN'
		ORDER BY score DESC, id LIMIT $1`, limit, s.now())
	if err != nil {
		return nil, fmt.Errorf("review queue: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Item, error) {
		var it Item
		var score float32
		err := r.Scan(&it.ClusterID, &it.Window, &score, &it.Members, &it.ClaimedBy, &it.ClaimedUntil)
		it.Score = float64(score)
		if it.ClaimedBy == 0 {
			it.ClaimedUntil = time.Time{}
		}
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("review queue: %w", err)
	}
	return items, nil
}

// Claim gives the analyst the cluster for ttl (default 15 minutes, at most
// two hours); claiming again extends one's own claim. A cluster someone
// else holds is a conflict until their claim lapses.
func (s *Service) Claim(ctx context.Context, analystID, clusterID int64, ttl time.Duration) (time.Time, error) {
	if ttl <= 0 {
		ttl = defaultClaim
	}
	if ttl > maxClaim {
		return time.Time{}, booking.Errorf(booking.EINVALID, "CLAIM_TOO_LONG", "A claim lasts at most %s.", maxClaim)
	}
	var until time.Time
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		now := s.now()
		var status string
		var flagged bool
		var holder *int64
		var holderUntil *time.Time
		err = tx.QueryRow(ctx, `SELECT status, flagged, claimed_by, claimed_until FROM fraud_clusters WHERE id = $1 FOR UPDATE`, clusterID).
			Scan(&status, &flagged, &holder, &holderUntil)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_CLUSTER", "No cluster %d.", clusterID)
		}
		if err != nil {
			return fmt.Errorf("cluster %d: %w", clusterID, err)
		}
		switch {
		case status != "OPEN":
			return booking.Errorf(booking.ECONFLICT, "DECIDED", "Cluster %d has been decided.", clusterID)
		case holder != nil && *holder != analystID && holderUntil.After(now):
			return booking.Errorf(booking.ECONFLICT, "CLAIMED", "Cluster %d is claimed by another analyst until %s.",
				clusterID, holderUntil.In(booking.IST).Format("15:04:05 IST"))
		}
		until = now.Add(ttl)
		if _, err := tx.Exec(ctx, `UPDATE fraud_clusters SET claimed_by = $2, claimed_until = $3 WHERE id = $1`, clusterID, analystID, until); err != nil {
			return fmt.Errorf("claim cluster %d: %w", clusterID, err)
		}
		return audit.Write(ctx, tx, login, "fraud.claim", fmt.Sprintf("cluster:%d", clusterID),
			map[string]any{"until": until.UTC().Format(time.RFC3339)})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("claim cluster %d: %w", clusterID, err)
	}
	return until, nil
}

// Release gives up one's own claim.
func (s *Service) Release(ctx context.Context, analystID, clusterID int64) error {
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE fraud_clusters SET claimed_by = NULL, claimed_until = NULL
			WHERE id = $1 AND claimed_by = $2 AND status = 'OPEN'`, clusterID, analystID)
		if err != nil {
			return fmt.Errorf("release cluster %d: %w", clusterID, err)
		}
		if tag.RowsAffected() == 0 {
			return booking.Errorf(booking.ECONFLICT, "NOT_CLAIMED", "You do not hold cluster %d.", clusterID)
		}
		return audit.Write(ctx, tx, login, "fraud.release", fmt.Sprintf("cluster:%d", clusterID), nil)
	})
	if err != nil {
		return fmt.Errorf("release cluster %d: %w", clusterID, err)
	}
	return nil
}

// Validate checks a decision's outcome, reason and note.
func (d Decision) Validate() error {
	if _, ok := outcomes[d.Outcome]; !ok {
		return booking.Errorf(booking.EINVALID, "BAD_OUTCOME", "Outcome %q is not one of CLEAR, WATCH, EXTRA_CHALLENGE, CANCEL_BOOKINGS, BAN.", d.Outcome)
	}
	clearing, ok := reasons[d.Reason]
	if !ok {
		return booking.Errorf(booking.EINVALID, "BAD_REASON", "Reason code %q is unknown.", d.Reason)
	}
	if clearing != (d.Outcome == Clear) {
		if clearing {
			return booking.Errorf(booking.EINVALID, "BAD_REASON", "Reason %s clears a cluster; it cannot justify %s.", d.Reason, d.Outcome)
		}
		return booking.Errorf(booking.EINVALID, "BAD_REASON", "Clearing takes FALSE_POSITIVE or FAMILY_OR_OFFICE, not %s.", d.Reason)
	}
	if d.Reason == "OTHER" && strings.TrimSpace(audit.CleanText(d.Note, maxNote)) == "" {
		return booking.Errorf(booking.EINVALID, "NOTE_REQUIRED", "Reason OTHER needs a note.")
	}
	if len(d.Note) > maxNote {
		return booking.Errorf(booking.EINVALID, "NOTE_TOO_LONG", "A note is at most %d bytes.", maxNote)
	}
	return nil
}

// lockClaimed locks the open cluster clusterID for the analyst holding a
// live claim on it, and returns its members.
func (s *Service) lockClaimed(ctx context.Context, tx pgx.Tx, analystID, clusterID int64, what string) ([]int64, error) {
	var status string
	var holder *int64
	var until *time.Time
	err := tx.QueryRow(ctx, `SELECT status, claimed_by, claimed_until FROM fraud_clusters WHERE id = $1 FOR UPDATE`, clusterID).
		Scan(&status, &holder, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, booking.Errorf(booking.ENOTFOUND, "NO_CLUSTER", "No cluster %d.", clusterID)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %d: %w", clusterID, err)
	}
	if status != "OPEN" {
		return nil, booking.Errorf(booking.ECONFLICT, "DECIDED", "Cluster %d has been decided.", clusterID)
	}
	if holder == nil || *holder != analystID || !until.After(s.now()) {
		return nil, booking.Errorf(booking.ECONFLICT, "NOT_CLAIMED", "Claim cluster %d before %s.", clusterID, what)
	}
	rows, err := tx.Query(ctx, `SELECT user_id FROM fraud_cluster_members WHERE cluster_id = $1 ORDER BY user_id`, clusterID)
	if err != nil {
		return nil, fmt.Errorf("members of cluster %d: %w", clusterID, err)
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("members of cluster %d: %w", clusterID, err)
	}
	return members, nil
}

// Decide records the claiming analyst's decision on some members of the
// cluster (Decision.Members), or on all of them, which closes it. Only
// the analyst holding a live claim may decide. Cancelling bookings and
// banning accounts are recorded as awaiting a second analyst; nothing is
// enforced here. A member given the same outcome twice in one case is a
// conflict.
func (s *Service) Decide(ctx context.Context, analystID, clusterID int64, d Decision) (Decided, error) {
	if err := d.Validate(); err != nil {
		return Decided{}, err
	}
	// control characters go; the length was checked on what was sent
	d.Note = audit.CleanText(d.Note, maxNote)
	out := Decided{ClusterID: clusterID, AnalystID: analystID, Decision: d, NeedsApproval: outcomes[d.Outcome]}
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		members, err := s.lockClaimed(ctx, tx, analystID, clusterID, "deciding on it")
		if err != nil {
			return err
		}
		whole := len(d.Members) == 0
		targets := members
		if !whole {
			targets = nil
			seen := map[int64]bool{}
			for _, m := range d.Members {
				if !slices.Contains(members, m) {
					return booking.Errorf(booking.EINVALID, "NOT_A_MEMBER", "Account #%d is not a member of cluster %d.", m, clusterID)
				}
				if !seen[m] {
					seen[m] = true
					targets = append(targets, m)
				}
			}
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO fraud_decisions (cluster_id, analyst_id, outcome, reason_code, note, needs_approval, enforce_after, label)
			VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $6 THEN NULL ELSE $7::timestamptz END, $8) RETURNING id`,
			clusterID, analystID, d.Outcome, d.Reason, d.Note, out.NeedsApproval, s.now().Add(s.EnforceDelay), Label(d.Outcome)).Scan(&out.ID); err != nil {
			return fmt.Errorf("insert decision: %w", err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO fraud_decision_members (decision_id, cluster_id, user_id, outcome)
			SELECT $1, $2, u, $3 FROM unnest($4::bigint[]) AS u ON CONFLICT (cluster_id, user_id, outcome) DO NOTHING`,
			out.ID, clusterID, d.Outcome, targets)
		if err != nil {
			return fmt.Errorf("decision members: %w", err)
		}
		if int(tag.RowsAffected()) != len(targets) {
			return booking.Errorf(booking.ECONFLICT, "MEMBER_DECIDED", "A member chosen already has a %s decision in this case.", d.Outcome)
		}
		out.Decision.Members = targets
		if whole {
			if _, err := tx.Exec(ctx, `UPDATE fraud_clusters SET status = 'CLOSED', claimed_by = NULL, claimed_until = NULL WHERE id = $1`, clusterID); err != nil {
				return fmt.Errorf("close cluster: %w", err)
			}
		}
		return audit.Write(ctx, tx, login, "fraud.decide", fmt.Sprintf("cluster:%d", clusterID), map[string]any{
			"decision": out.ID, "outcome": d.Outcome, "reason": d.Reason, "note": d.Note, "needs_approval": out.NeedsApproval,
			"label": Label(d.Outcome), "members": targets, "closed": whole})
	})
	if err != nil {
		return Decided{}, fmt.Errorf("decide cluster %d: %w", clusterID, err)
	}
	return out, nil
}

// Close ends the claiming analyst's case once every member has a decision.
func (s *Service) Close(ctx context.Context, analystID, clusterID int64) error {
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		if _, err := s.lockClaimed(ctx, tx, analystID, clusterID, "closing it"); err != nil {
			return err
		}
		var undecided int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM fraud_cluster_members m WHERE m.cluster_id = $1
			AND NOT EXISTS (SELECT 1 FROM fraud_decision_members d WHERE d.cluster_id = m.cluster_id AND d.user_id = m.user_id)`,
			clusterID).Scan(&undecided); err != nil {
			return fmt.Errorf("undecided members of cluster %d: %w", clusterID, err)
		}
		if undecided > 0 {
			return booking.Errorf(booking.ECONFLICT, "MEMBERS_UNDECIDED", "%d members of cluster %d have no decision yet (CLEAR them if they are honest).",
				undecided, clusterID)
		}
		if _, err := tx.Exec(ctx, `UPDATE fraud_clusters SET status = 'CLOSED', claimed_by = NULL, claimed_until = NULL WHERE id = $1`, clusterID); err != nil {
			return fmt.Errorf("close cluster %d: %w", clusterID, err)
		}
		return audit.Write(ctx, tx, login, "fraud.close", fmt.Sprintf("cluster:%d", clusterID), nil)
	})
	if err != nil {
		return fmt.Errorf("close cluster %d: %w", clusterID, err)
	}
	return nil
}

// HandOver passes the analyst's live claim on an open cluster to another
// active analyst, for a fresh claim period; both names are audited.
func (s *Service) HandOver(ctx context.Context, analystID, clusterID, toID int64) (time.Time, error) {
	var until time.Time
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		if toID == analystID {
			return booking.Errorf(booking.EINVALID, "SAME_ANALYST", "Choose another analyst to hand cluster %d to.", clusterID)
		}
		to, err := s.analyst(ctx, tx, toID)
		if err != nil {
			return booking.Errorf(booking.EINVALID, "NO_ANALYST", "Cluster %d can be handed only to an active fraud analyst or admin.", clusterID)
		}
		if _, err := s.lockClaimed(ctx, tx, analystID, clusterID, "handing it over"); err != nil {
			return err
		}
		until = s.now().Add(defaultClaim)
		if _, err := tx.Exec(ctx, `UPDATE fraud_clusters SET claimed_by = $2, claimed_until = $3 WHERE id = $1`, clusterID, toID, until); err != nil {
			return fmt.Errorf("hand over cluster %d: %w", clusterID, err)
		}
		return audit.Write(ctx, tx, login, "fraud.hand_over", fmt.Sprintf("cluster:%d", clusterID),
			map[string]any{"to": to, "until": until.UTC().Format(time.RFC3339)})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("hand over cluster %d: %w", clusterID, err)
	}
	return until, nil
}

// Approve is the second analyst's yes to a bulk decision; the analyst who
// decided may not approve it (the database refuses it too).
func (s *Service) Approve(ctx context.Context, approverID, decisionID int64) error {
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, approverID)
		if err != nil {
			return err
		}
		var analyst int64
		var needs bool
		var approved *int64
		err = tx.QueryRow(ctx, `SELECT analyst_id, needs_approval, approved_by FROM fraud_decisions WHERE id = $1 FOR UPDATE`, decisionID).
			Scan(&analyst, &needs, &approved)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_DECISION", "No decision %d.", decisionID)
		}
		if err != nil {
			return fmt.Errorf("decision %d: %w", decisionID, err)
		}
		switch {
		case !needs:
			return booking.Errorf(booking.ECONFLICT, "NO_APPROVAL_NEEDED", "Decision %d needs no approval.", decisionID)
		case approved != nil:
			return booking.Errorf(booking.ECONFLICT, "APPROVED", "Decision %d is already approved.", decisionID)
		case analyst == approverID:
			return booking.Errorf(booking.EFORBIDDEN, "SAME_ANALYST", "A second analyst must approve decision %d.", decisionID)
		}
		if _, err := tx.Exec(ctx, `UPDATE fraud_decisions SET approved_by = $2, approved_at = now(), enforce_after = $3 WHERE id = $1`,
			decisionID, approverID, s.now().Add(s.EnforceDelay)); err != nil {
			return fmt.Errorf("approve: %w", err)
		}
		return audit.Write(ctx, tx, login, "fraud.approve", fmt.Sprintf("decision:%d", decisionID), nil)
	})
	if err != nil {
		return fmt.Errorf("approve decision %d: %w", decisionID, err)
	}
	return nil
}
