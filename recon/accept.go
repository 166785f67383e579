package recon

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
)

// An uploaded file is evidence, never the truth: its lines start no
// automatic resolution until a second person, not the uploader, accepts it.
// A file our own job fetched from its issuer's API is accepted as it
// arrives. Even accepted, a file's capture only starts a question to the
// gateway (resolve.go): what moves the money is the gateway's answer.

// AcceptFile records a second person's acceptance of an uploaded file and
// enqueues the automatic resolutions that waited for it, in one
// transaction. The uploader cannot accept their own file.
func (s *Service) AcceptFile(ctx context.Context, id int64, actor string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		f, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM recon_files WHERE id = $1 FOR UPDATE`, id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_FILE", "No file %d.", id)
		case err != nil:
			return fmt.Errorf("accept file %d: %w", id, err)
		case f.Accepted():
			return booking.Errorf(booking.ECONFLICT, "ALREADY_ACCEPTED", "File %d was accepted by %s already.", id, f.AcceptedBy)
		case f.IngestedBy == actor:
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "%s uploaded file %d: a second person accepts it.", actor, id)
		}
		if _, err := tx.Exec(ctx, `UPDATE recon_files SET accepted_by = $2, accepted_at = now() WHERE id = $1`, id, actor); err != nil {
			return fmt.Errorf("accept file %d: %w", id, err)
		}
		n, err := s.enqueueForFile(ctx, tx, id)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, "recon.file_accept", fmt.Sprintf("recon_file:%d", id),
			map[string]any{"uploaded_by": f.IngestedBy, "sha256": f.SHA256, "resolutions_enqueued": n})
	})
}

// acceptFetched marks a file the issuer's API has now sent byte for byte
// as fetched and accepted, and enqueues what waited for it.
func (s *Service) acceptFetched(ctx context.Context, tx pgx.Tx, id int64, by string) error {
	tag, err := tx.Exec(ctx, `UPDATE recon_files SET origin = 'FETCHED', accepted_by = $2, accepted_at = now()
		WHERE id = $1 AND accepted_by IS NULL`, id, by)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	_, err = s.enqueueForFile(ctx, tx, id)
	return err
}

// enqueueForFile inserts the resolution job of every open automatic
// exception (approved, where it needs approval) with a line in the file.
func (s *Service) enqueueForFile(ctx context.Context, tx pgx.Tx, fileID int64) (int, error) {
	rows, err := tx.Query(ctx, `SELECT e.id FROM reconciliation_exceptions e
		WHERE e.state IN ('OPEN', 'INVESTIGATING') AND e.path = 'AUTO' AND (NOT e.needs_approval OR e.approved_by <> '')
		  AND jsonb_typeof(e.evidence->'lines') = 'array'
		  AND EXISTS (SELECT 1 FROM recon_lines l WHERE l.file_id = $1
		              AND l.id IN (SELECT v::bigint FROM jsonb_array_elements_text(e.evidence->'lines') v))`, fileID)
	if err != nil {
		return 0, fmt.Errorf("resolutions waiting for file %d: %w", fileID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, fmt.Errorf("resolutions waiting for file %d: %w", fileID, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if s.cfg.Jobs == nil {
		return 0, errors.New("resolutions to enqueue but no job inserter configured")
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: ResolveArgs{ExceptionID: id}}
	}
	// One statement that skips a job still waiting for the same exception.
	if _, err := s.cfg.Jobs.InsertManyTx(ctx, tx, params); err != nil {
		return 0, fmt.Errorf("enqueue resolutions for file %d: %w", fileID, err)
	}
	return len(ids), nil
}

// unacceptedFile is the first file behind the exception's lines that no
// second person has accepted (0: none).
func unacceptedFile(ctx context.Context, q db.Querier, e Exception) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT f.id FROM recon_lines l JOIN recon_files f ON f.id = l.file_id
		WHERE jsonb_typeof($1::jsonb->'lines') = 'array'
		  AND l.id IN (SELECT v::bigint FROM jsonb_array_elements_text($1::jsonb->'lines') v) AND f.accepted_by IS NULL
		ORDER BY f.id LIMIT 1`, e.Evidence).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("files behind exception %s: %w", e.ID, err)
	}
	return id, nil
}

// peopleBehind are the persons whose word an exception rests on: who
// uploaded a line behind it or made its file current again by hand
// (versions.go), and who ran a reconciliation that found it.
// Jobs are not persons.
func peopleBehind(ctx context.Context, q db.Querier, e Exception) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT f.ingested_by FROM recon_lines l JOIN recon_files f ON f.id = l.file_id
		WHERE jsonb_typeof($1::jsonb->'lines') = 'array' AND l.id IN (SELECT v::bigint FROM jsonb_array_elements_text($1::jsonb->'lines') v)
		  AND f.origin = 'UPLOAD'
		UNION SELECT f.current_by FROM recon_lines l JOIN recon_files f ON f.id = l.file_id
		WHERE jsonb_typeof($1::jsonb->'lines') = 'array' AND l.id IN (SELECT v::bigint FROM jsonb_array_elements_text($1::jsonb->'lines') v)
		  AND f.current_by IS NOT NULL
		UNION SELECT r.run_by FROM recon_runs r WHERE r.id IN ($2, $3)
		   OR r.id IN (SELECT v.run_id FROM reconciliation_exception_events v WHERE v.exception_id = $4 AND v.run_id IS NOT NULL)`,
		e.Evidence, e.FirstRunID, e.LastRunID, e.ID)
	if err != nil {
		return nil, fmt.Errorf("people behind exception %s: %w", e.ID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
