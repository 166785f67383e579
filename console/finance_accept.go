package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/recon"
	"tatkal/views"
)

// financeAccept is the second finance person's word on an uploaded file:
// until then its lines start no automatic resolution. The uploader cannot
// accept their own file. Audited by recon, refusals here.
func (c *Console) financeAccept(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	u, _ := userFrom(r.Context())
	err = c.cfg.Recon.AcceptFile(r.Context(), id, u.Login)
	if c.refuse(w, r, "recon.file_accept", fmt.Sprintf("recon_file:%d", id), nil, err) {
		return
	}
	if err != nil {
		c.renderFiles(w, r, views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1)), Error: booking.ErrorMessage(err)}, statusOf(err))
		return
	}
	c.redirectNotice(w, r, "/console/finance/files", fmt.Sprintf("File %d accepted; the automatic resolutions that waited for it run now.", id))
}

// reconPayments is the payment service as reconciliation asks it (nil
// when the console was built without one).
func (c *Console) reconPayments() recon.Payments {
	if c.cfg.Payments == nil {
		return nil
	}
	return c.cfg.Payments
}

// resolutionCodes are the codes an exception of kind may be closed with.
func resolutionCodes(kind string) []views.Resolution {
	var out []views.Resolution
	for _, r := range recon.CodesFor(kind) {
		out = append(out, views.Resolution{Code: r.Code, Meaning: r.Meaning})
	}
	return out
}
