package api

import (
	"net/http"

	"tatkal/booking/api/reply"
	"tatkal/booking/fraud/review"
)

type appealRequest struct {
	Statement string `json:"statement"`
}

type appealsResponse struct {
	Appeals []review.Appeal `json:"appeals"`
	Message string          `json:"message"`
}

// fileAppeal: a member appeals the review decision that acted on their
// account (a cancelled booking, a ban); 201 with the appeal.
func (a *API) fileAppeal(w http.ResponseWriter, r *http.Request) {
	var req appealRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	ap, err := review.New(a.pool).FileAppeal(r.Context(), callerFrom(r.Context()).UserID, req.Statement)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusCreated, appealsResponse{Appeals: []review.Appeal{ap},
		Message: "Your appeal is with the reviewers. You will hear from us; the answer also shows here."})
}

// myAppeals lists the member's appeals and their answers.
func (a *API) myAppeals(w http.ResponseWriter, r *http.Request) {
	aps, err := review.New(a.pool).MyAppeals(r.Context(), callerFrom(r.Context()).UserID)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	msg := "You have no appeals."
	if len(aps) > 0 {
		msg = "Your appeals, newest first."
	}
	reply.JSON(w, http.StatusOK, appealsResponse{Appeals: aps, Message: msg})
}
