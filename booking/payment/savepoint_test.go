package payment

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/lab/testenv"
)

// A group's bodies share a transaction, each in a savepoint that rides in
// front of its first statements (savepointTx). A body's failure undoes
// only its own work, wherever it failed: before sending anything, in the
// middle of a batch, or after. A batch refused before it was sent leaves
// its savepoint unmade: rolling back must then fail the whole group, never
// undo an earlier body's work that its caller would be told committed.
func TestGroupBodiesUndoOnlyThemselves(t *testing.T) {
	t.Parallel()
	env := testenv.NewWithPool(t, 4)
	ctx := context.Background()
	if _, err := env.Pool.Exec(ctx, `CREATE TABLE group_sp (name text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	insert := func(names ...string) groupBody {
		return func(ctx context.Context, tx pgx.Tx, _ *confirmations) error {
			b := &pgx.Batch{}
			for _, n := range names {
				b.Queue(`INSERT INTO group_sp VALUES ($1)`, n)
			}
			return tx.SendBatch(ctx, b).Close()
		}
	}
	refuse := errors.New("refused")
	bodies := map[string]groupBody{
		"batch": insert("a1", "a2"),
		"exec": func(ctx context.Context, tx pgx.Tx, _ *confirmations) error {
			_, err := tx.Exec(ctx, `INSERT INTO group_sp VALUES ('b1')`)
			return err
		},
		"refuses before sending": func(context.Context, pgx.Tx, *confirmations) error { return refuse },
		"fails mid-batch":        insert("c1", "a1"), // a1 is taken: c1 goes too
		"refuses after sending": func(ctx context.Context, tx pgx.Tx, c *confirmations) error {
			if err := insert("d1")(ctx, tx, c); err != nil {
				return err
			}
			return refuse
		},
		"query row": func(ctx context.Context, tx pgx.Tx, _ *confirmations) error {
			var n string
			return tx.QueryRow(ctx, `INSERT INTO group_sp VALUES ('e1') RETURNING name`).Scan(&n)
		},
	}
	order := []string{"batch", "refuses before sending", "exec", "fails mid-batch", "refuses before sending", "refuses after sending", "query row"}
	g := newConfirmGroup(env.Pool, nil, 1, nil, slog.Default())
	items := make([]*groupItem, len(order))
	for i, name := range order {
		// write orders a group by key: keys in the order above.
		key := uuid.UUID{0: byte(i + 1)}
		items[i] = &groupItem{key: key, ctx: ctx, body: bodies[name], done: make(chan error, 1)}
	}
	g.write(slices.Clone(items))
	for i, name := range order {
		err := <-items[i].done
		wantErr := name == "fails mid-batch" || name == "refuses before sending" || name == "refuses after sending"
		if (err != nil) != wantErr {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := names(t, env); !slices.Equal(got, []string{"a1", "a2", "b1", "e1"}) {
		t.Errorf("committed %v; want the rows of the bodies that succeeded", got)
	}

	// A batch pgx refuses to send, the connection still open (its context
	// was done already): the body's savepoint was never made. The group
	// fails as a whole, and nobody is told their work committed.
	if _, err := env.Pool.Exec(ctx, `TRUNCATE group_sp`); err != nil {
		t.Fatal(err)
	}
	unsendable := func(ctx context.Context, tx pgx.Tx, _ *confirmations) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO group_sp VALUES ('g1')`)
		done, cancel := context.WithCancel(ctx)
		cancel()
		return tx.SendBatch(done, b).Close()
	}
	items = []*groupItem{
		{key: uuid.UUID{0: 1}, ctx: ctx, body: insert("f1"), done: make(chan error, 1)},
		{key: uuid.UUID{0: 2}, ctx: ctx, body: unsendable, done: make(chan error, 1)},
	}
	g.write(slices.Clone(items))
	for i, it := range items {
		if err := <-it.done; err == nil {
			t.Errorf("body %d of the group whose batch was never sent: told it committed", i)
		}
	}
	if got := names(t, env); len(got) != 0 {
		t.Errorf("committed %v; want nothing", got)
	}
}

func names(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT name FROM group_sp ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}
