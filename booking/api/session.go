package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/auth"
)

type loginRequest struct {
	Login    string `json:"login"`
	Password string `json:"password"`
}

type loginResponse struct {
	Token     string    `json:"token"`
	UserID    int64     `json:"user_id"`
	Verified  bool      `json:"verified"`
	Agent     bool      `json:"agent"`
	ExpiresAt time.Time `json:"expires_at"`
}

// login checks a password and hands out a signed session token.
func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	if req.Login == "" || req.Password == "" || len(req.Login) > 64 || len(req.Password) > 256 {
		writeError(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_CREDENTIALS_FORMAT", "Send a login (up to 64 characters) and a password."))
		return
	}
	var id int64
	var hash, userType, verification string
	var created time.Time
	err := a.pool.QueryRow(r.Context(), `SELECT id, password_hash, user_type, id_verification_status, created_at
		FROM users WHERE login = $1`, req.Login).Scan(&id, &hash, &userType, &verification, &created)
	wrong := booking.Errorf(booking.EUNAUTH, "WRONG_CREDENTIALS", "Wrong login or password.")
	if errors.Is(err, pgx.ErrNoRows) {
		writeError(w, r, a.log, wrong)
		return
	}
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	ok, err := auth.CheckPassword(hash, req.Password)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	if !ok {
		writeError(w, r, a.log, wrong)
		return
	}
	s := auth.Session{UserID: id, Verified: verification == "VERIFIED", Agent: userType == "AGENT",
		CreatedAt: created, ExpiresAt: a.now().Add(a.ttl).Truncate(time.Second)}
	writeJSON(w, http.StatusOK, loginResponse{Token: a.signer.Sign(s), UserID: id, Verified: s.Verified, Agent: s.Agent, ExpiresAt: s.ExpiresAt})
}

type prepareRequest struct {
	DeviceToken       string `json:"device_token"`
	ClientAttestation string `json:"client_attestation"`
	// ClientTime lets the server tell the client how far its clock is off.
	ClientTime *time.Time `json:"client_time"`
	Intent     *intent    `json:"intent"`
}

type intent struct {
	TrainNo     string `json:"train_no"`
	JourneyDate string `json:"journey_date"`
	Class       string `json:"class"`
	Quota       string `json:"quota"`
}

type prepareResponse struct {
	ServerTime            time.Time  `json:"server_time"`
	ServerTimeOffsetMs    *int64     `json:"server_time_offset_ms"`
	WindowOpensAt         *time.Time `json:"window_opens_at,omitempty"`
	WindowClosesAt        *time.Time `json:"window_closes_at,omitempty"`
	Mode                  string     `json:"mode,omitempty"`
	PrefetchBundleVersion string     `json:"prefetch_bundle_version"`
}

// prepare tells a client, before the window, the server's time, its own
// clock offset and when its train's window opens.
func (a *API) prepare(w http.ResponseWriter, r *http.Request) {
	var req prepareRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	now := a.now()
	resp := prepareResponse{ServerTime: now, PrefetchBundleVersion: a.bundle}
	if req.ClientTime != nil {
		off := now.Sub(*req.ClientTime).Milliseconds()
		resp.ServerTimeOffsetMs = &off
	}
	if req.Intent != nil {
		date, err := parseDate(req.Intent.JourneyDate)
		if err != nil {
			writeError(w, r, a.log, err)
			return
		}
		quota := req.Intent.Quota
		if quota == "" {
			quota = "TQ"
		}
		shard, err := a.svc.Catalog().Find(r.Context(), req.Intent.TrainNo, date, req.Intent.Class, quota)
		if err != nil {
			writeError(w, r, a.log, err)
			return
		}
		opens, closes := shard.OpensAt.In(booking.IST), shard.ClosesAt.In(booking.IST)
		resp.WindowOpensAt, resp.WindowClosesAt, resp.Mode = &opens, &closes, shard.Mode
	}
	writeJSON(w, http.StatusOK, resp)
}

func parseDate(s string) (time.Time, error) {
	d, err := time.ParseInLocation(time.DateOnly, s, booking.IST)
	if err != nil {
		return time.Time{}, booking.Errorf(booking.EINVALID, "BAD_DATE", "journey_date must be a date like 2026-12-01; got %q.", s)
	}
	return d, nil
}
