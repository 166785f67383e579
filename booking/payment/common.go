package payment

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"tatkal/booking"
	"tatkal/booking/instrument"
	"tatkal/booking/payment/pspapi"
)

// commonSuccess is a gateway's success told ahead of its body, so that a
// confirmation group can take the common case set-based: a payment for a
// hold, still open (INITIATED, AWAITING_USER, PENDING_AT_BANK, UNKNOWN), at
// our amount and currency, whose hold is HELD with no other capture. That
// case the body would settle by recording the event, marking the payment
// SUCCESS and booking the hold's confirmation; the group does the same for
// all of its common successes with one statement of each kind, in two round
// trips, where each body takes two of its own and a savepoint. Anything
// else (a duplicate, a lapsed or cancelled hold, another amount, a top-up,
// a second payment of a hold) runs its body, which decides as it always has.
type commonSuccess struct {
	id     uuid.UUID
	p      pspapi.Payment
	cause  string
	pulled bool
	hook   *webhookEvent // a callback's event, or nil
	// Set by the group that took it; read by its caller once the group has
	// committed.
	taken   bool
	shardID int64
	res     *booking.ConfirmResult
	paidBy  instrument.Use // a UPI payment's account and address
}

// SetBasedSuccesses is how many successes this service's confirmation
// groups have taken set-based (commonSuccess), for the bench and tests.
func (s *Service) SetBasedSuccesses() int64 {
	if s.group == nil {
		return 0
	}
	return s.group.common.Load()
}

// takeCommon takes what is common among batch's successes (commonSuccess),
// in its own savepoint, and says which items it took. Should a statement
// fail (a deadlock with another group, say), the savepoint is rolled back
// and every item runs its body, as before.
func (g *confirmGroup) takeCommon(ctx context.Context, tx *savepointTx, batch []*groupItem, c *confirmations) []bool {
	taken := make([]bool, len(batch))
	var ids []uuid.UUID
	offered := map[uuid.UUID]int{} // a payment's first item; a second runs its body
	for i, it := range batch {
		if cs := it.common; cs != nil {
			if _, twice := offered[cs.id]; !twice {
				offered[cs.id] = i
				ids = append(ids, cs.id)
			}
		}
	}
	if len(ids) < 2 {
		return taken // one alone costs its body what it would cost here
	}
	tx.next()
	took, err := g.takeCommonTx(ctx, tx, batch, offered, ids, c)
	if err != nil {
		g.log.Warn("common successes taken together failed; each runs its own body", "successes", len(ids), "err", err)
		if err := tx.rollback(ctx); err != nil {
			// The group's transaction is broken: its COMMIT will fail,
			// and every caller hears of it.
			g.log.Error("roll back common successes", "err", err)
		}
		return taken
	}
	for _, i := range took {
		taken[i] = true
	}
	return taken
}

func (g *confirmGroup) takeCommonTx(ctx context.Context, tx *savepointTx, batch []*groupItem, offered map[uuid.UUID]int,
	ids []uuid.UUID, c *confirmations) ([]int, error) {
	// The payments and their holds locked, in the payments' order as bodies
	// lock them (a top-up has no hold and is not among them); the
	// savepoint rides in front.
	type found struct {
		at      int
		state   string
		holdID  uuid.UUID
		shardID int64
		paidBy  instrument.Use
	}
	var took []found
	// A callback's event names its gateway; the payment must be that
	// gateway's, at the callback's reference, and the event not seen, or
	// its body refuses it (webhookEvent.check).
	gateways, events := make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		hook := batch[offered[id]].common.hook
		gateways[i], events[i] = hook.gatewayID(), hook.id()
	}
	lock := &pgx.Batch{}
	lock.Queue(`SELECT p.id, p.state, p.purpose, p.amount_paise, h.id, h.state, h.shard_id,
			EXISTS (SELECT 1 FROM payments o WHERE o.hold_id = p.hold_id AND o.id <> p.id AND o.state IN ('SUCCESS', 'REFUNDED')),
			p.psp, coalesce(p.psp_ref, ''),
			EXISTS (SELECT 1 FROM unnest($1::uuid[], $2::text[], $3::text[]) AS k(id, gateway, event_id)
			        JOIN webhook_events e ON e.gateway = k.gateway AND e.event_id = k.event_id WHERE k.id = p.id),
			p.user_id, p.method, p.vpa
		FROM payments p JOIN holds h ON h.id = p.hold_id
		WHERE p.id = ANY($1) ORDER BY p.id FOR UPDATE OF p, h`, ids, gateways, events).Query(func(rows pgx.Rows) error {
		holds := map[uuid.UUID]bool{}
		for rows.Next() {
			var f found
			var id uuid.UUID
			var purpose, holdState, gateway, pspRef, method, vpa string
			var amount, userID int64
			var others, seen bool
			if err := rows.Scan(&id, &f.state, &purpose, &amount, &f.holdID, &holdState, &f.shardID, &others, &gateway, &pspRef, &seen,
				&userID, &method, &vpa); err != nil {
				return err
			}
			f.paidBy = upiUse(method, vpa, userID)
			f.at = offered[id]
			cs := batch[f.at].common
			// What its body would decide: a capture of a hold's fare, not a
			// late one after we had given up, of a hold still HELD.
			d := decide(answerFacts{state: f.state, purpose: purpose, amount: amount, pulled: cs.pulled}, cs.p)
			capture := d.move == moveCapture && !d.inquireLater && f.state != Failed && purpose != PurposeTopUp
			if capture && holdState == booking.HoldHeld && !others && !holds[f.holdID] &&
				cs.hook.check(gateway, pspRef, seen, cs.p) == nil && c.Check(f.holdID) == nil {
				holds[f.holdID] = true
				took = append(took, f)
			}
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, lock).Close(); err != nil {
		return nil, fmt.Errorf("lock payments: %w", err)
	}
	if len(took) == 0 {
		return nil, nil // the bodies lock them again, in this transaction
	}
	// What each body's success would write, one statement of each kind.
	var a answers
	for _, f := range took {
		cs := batch[f.at].common
		a.recorded(cs.id, cs.hook, cs.p)
		a.succeeded(cs.id, f.state, cs.p, cs.pulled, cs.cause)
	}
	b := &pgx.Batch{}
	a.queue(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("%d successes: %w", len(took), err)
	}
	booked := len(c.holds)
	at := make([]int, len(took))
	for i, f := range took {
		res, err := c.Confirm(ctx, tx, f.holdID)
		if err != nil { // checked under the lock; should it happen, undone whole
			c.holds, c.results = c.holds[:booked], c.results[:booked]
			return nil, err
		}
		at[i] = f.at
		cs := batch[f.at].common
		cs.shardID, cs.res, cs.paidBy = f.shardID, res, f.paidBy
	}
	for _, i := range at {
		batch[i].common.taken = true
	}
	g.common.Add(int64(len(at)))
	return at, nil
}

// answers are what gateway answers write, as the rows of set-based
// statements: one answer's in a body, a group's common successes' at once,
// in the same statements.
type answers struct {
	hookGateways, hookEvents, hookStatuses []string
	hookPayments                           []uuid.UUID
	refPayments                            []uuid.UUID
	refs                                   []string
	paid                                   []uuid.UUID
	pspRefs, bankRefs, froms, causes       []string
	captured                               []int64
	pulled                                 []bool
	details                                [][]byte
}

// recorded adds what an answer records before anything follows from it:
// a callback's event, and the card or bank account that paid (read by the
// confirmation's fraud signal in the same transaction).
func (a *answers) recorded(id uuid.UUID, hook *webhookEvent, p pspapi.Payment) {
	if hook != nil {
		a.hookGateways, a.hookEvents, a.hookStatuses = append(a.hookGateways, hook.gateway), append(a.hookEvents, hook.eventID), append(a.hookStatuses, hook.status)
		a.hookPayments = append(a.hookPayments, id)
	}
	if ref := instrumentRef(p); ref != "" {
		a.refPayments, a.refs = append(a.refPayments, id), append(a.refs, ref)
	}
}

// succeeded adds a payment's change from state from to SUCCESS on p, with
// its event.
func (a *answers) succeeded(id uuid.UUID, from string, p pspapi.Payment, pulled bool, cause string) {
	a.paid, a.pspRefs, a.bankRefs = append(a.paid, id), append(a.pspRefs, p.PSPRef), append(a.bankRefs, p.BankRef)
	a.captured, a.pulled = append(a.captured, p.AmountPaise), append(a.pulled, pulled)
	a.froms, a.causes, a.details = append(a.froms, from), append(a.causes, cause), append(a.details, eventDetail(answerDetail(p)))
}

// queue queues a statement for each kind added.
func (a *answers) queue(b *pgx.Batch) {
	ok := func(pgconn.CommandTag) error { return nil }
	if len(a.hookPayments) > 0 {
		b.Queue(`INSERT INTO webhook_events (gateway, event_id, payment_id, status)
			SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[]) ON CONFLICT DO NOTHING`,
			a.hookGateways, a.hookEvents, a.hookPayments, a.hookStatuses).Exec(ok)
	}
	if len(a.refPayments) > 0 {
		b.Queue(`UPDATE payments p SET instrument_ref = x.ref FROM unnest($1::uuid[], $2::text[]) AS x(id, ref)
			WHERE p.id = x.id AND p.instrument_ref = ''`, a.refPayments, a.refs).Exec(ok)
	}
	if len(a.paid) > 0 {
		b.Queue(`UPDATE payments p SET state = 'SUCCESS', psp_ref = coalesce(nullif(x.psp_ref, ''), p.psp_ref),
				bank_ref = coalesce(nullif(x.bank_ref, ''), p.bank_ref), updated_at = now(), resolved_at = now(),
				captured_paise = x.captured, gateway_confirmed_at = CASE WHEN x.pulled THEN now() END
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bool[]) AS x(id, psp_ref, bank_ref, captured, pulled)
			WHERE p.id = x.id`, a.paid, a.pspRefs, a.bankRefs, a.captured, a.pulled).Exec(ok)
		b.Queue(`INSERT INTO payment_events (payment_id, from_state, to_state, cause, detail)
			SELECT x.id, x.from_state, 'SUCCESS', x.cause, x.detail
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[]) AS x(id, from_state, cause, detail)`,
			a.paid, a.froms, a.causes, a.details).Exec(ok)
	}
}
