package console

import (
	"net/http"
	"strconv"

	"tatkal/booking/api/reply"
	"tatkal/booking/fraud"
)

// fraudNearMisses lists the members of open clusters that scored just
// below the flag (fraud.NearMisses), highest first, as JSON: the careful,
// small or split rings an analyst may want to look at. ?limit=N (1-500,
// default 100).
func (c *Console) fraudNearMisses(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			http.Error(w, "limit must be a whole number from 1 to 500", http.StatusBadRequest)
			return
		}
		limit = n
	}
	near, err := fraud.NearMisses(r.Context(), c.pool, fraud.DefaultConfig(), limit)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if near == nil {
		near = []fraud.NearMiss{}
	}
	reply.JSON(w, http.StatusOK, map[string]any{"near_misses": near})
}
