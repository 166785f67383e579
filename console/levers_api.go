package console

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/api/reply"
	"tatkal/console/levers"
)

// apiProposal is the JSON body of a lever change.
type apiProposal struct {
	Name        string `json:"name"`
	Scope       string `json:"scope"`
	Value       string `json:"value"`
	Reason      string `json:"reason"`
	Confirm     string `json:"confirm"`
	RevertAfter string `json:"revert_after"`
}

func (a apiProposal) proposal() (levers.Proposal, error) {
	p := levers.Proposal{Name: a.Name, Scope: a.Scope, Value: a.Value, Reason: a.Reason, Confirm: a.Confirm}
	if a.RevertAfter != "" {
		d, err := time.ParseDuration(a.RevertAfter)
		if err != nil {
			return p, booking.Errorf(booking.EINVALID, "BAD_REVERT", "revert_after is a duration like 15m.")
		}
		p.RevertAfter = d
	}
	return p, nil
}

// apiFail answers a /v1/admin error like every other /v1 error.
func (c *Console) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	reply.Error(w, r, c.log, err)
}

func decodeProposal(r *http.Request) (levers.Proposal, error) {
	var a apiProposal
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16)).Decode(&a); err != nil {
		return levers.Proposal{}, booking.Errorf(booking.EINVALID, "BAD_JSON", "Send a JSON object with name, scope, value, reason, confirm.")
	}
	return a.proposal()
}

// apiLevers lists the levers in force and recent changes.
func (c *Console) apiLevers(w http.ResponseWriter, r *http.Request) {
	vals, err := c.levers.InForce(r.Context())
	if err != nil {
		c.apiFail(w, r, err)
		return
	}
	changes, err := c.levers.Changes(r.Context(), 50)
	if err != nil {
		c.apiFail(w, r, err)
		return
	}
	reply.JSON(w, http.StatusOK, map[string]any{"in_force": vals, "changes": changes, "definitions": levers.Defs})
}

// apiPreview says what a change would do and what to type to confirm it.
func (c *Console) apiPreview(w http.ResponseWriter, r *http.Request) {
	p, err := decodeProposal(r)
	if err == nil {
		var pv levers.Preview
		if pv, err = c.levers.Preview(r.Context(), p); err == nil {
			reply.JSON(w, http.StatusOK, pv)
			return
		}
	}
	c.apiFail(w, r, err)
}

// apiPropose records a change (201 applied, 202 waiting for approval).
func (c *Console) apiPropose(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	p, err := decodeProposal(r)
	if err == nil {
		var ch levers.Change
		if ch, err = c.levers.Propose(r.Context(), u.Actor(), p); err == nil {
			status := http.StatusCreated
			if ch.State == "PENDING" {
				status = http.StatusAccepted
			}
			reply.JSON(w, status, ch)
			return
		}
	}
	c.apiFail(w, r, err)
}

func (c *Console) apiChangeAction(w http.ResponseWriter, r *http.Request, approve bool) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		c.apiFail(w, r, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_CHANGE", "No such change."))
		return
	}
	var ch levers.Change
	if approve {
		ch, err = c.levers.Approve(r.Context(), u.Actor(), id)
	} else {
		ch, err = c.levers.Reject(r.Context(), u.Actor(), id, "")
	}
	if err != nil {
		c.apiFail(w, r, err)
		return
	}
	reply.JSON(w, http.StatusOK, ch)
}

func (c *Console) apiApprove(w http.ResponseWriter, r *http.Request) { c.apiChangeAction(w, r, true) }
func (c *Console) apiReject(w http.ResponseWriter, r *http.Request)  { c.apiChangeAction(w, r, false) }
