package api

import (
	"net/http"

	"tatkal/booking"
	"tatkal/booking/api/reply"
	"tatkal/booking/tdr"
)

// tdrResponse is a booking's TDR with its state in words.
type tdrResponse struct {
	TDR     *tdr.TDR `json:"tdr"`
	Message string   `json:"message"`
}

// fileTDR files a TDR for the caller's confirmed booking (booking/tdr):
// the train ran over 3 hours late at the boarding station, or did not run.
func (a *API) fileTDR(w http.ResponseWriter, r *http.Request) {
	id, ok := a.holdID(w, r)
	if !ok {
		return
	}
	var c tdr.Claim
	if err := decode(w, r, &c); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	t, err := (&tdr.Service{Pool: a.pool}).File(r.Context(), callerFrom(r.Context()).UserID, id, c)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusCreated, tdrResponse{TDR: &t, Message: TDRMessage(&t)})
}

// getTDR is the caller's TDR for a booking and where it stands.
func (a *API) getTDR(w http.ResponseWriter, r *http.Request) {
	id, ok := a.holdID(w, r)
	if !ok {
		return
	}
	t, err := (&tdr.Service{Pool: a.pool}).ForHold(r.Context(), callerFrom(r.Context()).UserID, id)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if t == nil {
		reply.Error(w, r, a.log, booking.Errorf(booking.ENOTFOUND, "NO_TDR", "No TDR is filed for this booking."))
		return
	}
	reply.JSON(w, http.StatusOK, tdrResponse{TDR: t, Message: TDRMessage(t)})
}

// TDRMessage says where a TDR stands, in the words of the site's English
// catalogue (tdr.state.*).
func TDRMessage(t *tdr.TDR) string {
	switch {
	case t.Status == tdr.Refused:
		return "Refused: " + t.Answer
	case t.Status == tdr.Approved && t.RefundState == "PROCESSED":
		return "Approved: the full fare is refunded."
	case t.Status == tdr.Approved:
		return "Approved: the full fare is being refunded; it reaches your bank account in 2-3 working days (the wallet at once)."
	}
	return "Filed: finance checks it against the train's running record; you will see the answer here."
}
