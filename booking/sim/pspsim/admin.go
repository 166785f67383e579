package pspsim

import (
	"net/http"
	"sort"
	"strings"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/simhttp"
)

// requireAdmin admits calls carrying the admin token; with no token
// configured the admin API is shut, and says so.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	guarded := simhttp.RequireBearer("psp", []byte(s.cfg.AdminToken),
		pspapi.ErrorBody{Error: "send Authorization: Bearer <admin token>", Code: pspapi.CodeUnauthorized})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminToken == "" {
			s.writeError(w, r, &apiError{status: http.StatusForbidden, code: pspapi.CodeForbidden,
				msg: "the admin API is disabled: no admin token is configured"})
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// requireBank guards the bank's statement API with the bank's credential:
// whoever may set the simulator's faults may not read the bank by it.
func (s *Server) requireBank(next http.Handler) http.Handler {
	guarded := simhttp.RequireBearer("bank", []byte(s.cfg.BankToken),
		pspapi.ErrorBody{Error: "send Authorization: Bearer <bank token>", Code: pspapi.CodeUnauthorized})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.BankToken == "" {
			s.writeError(w, r, &apiError{status: http.StatusForbidden, code: pspapi.CodeForbidden,
				msg: "the bank statement API is disabled: no bank token is configured"})
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// handleListRoutes is GET /admin/routes: every route, by gateway and method.
func (s *Server) handleListRoutes(w http.ResponseWriter, r *http.Request) error {
	routes, err := s.allRoutes(r.Context(), s.pool)
	if err != nil {
		return err
	}
	list := make([]pspapi.RouteConfig, 0, len(routes))
	for _, rc := range routes {
		list = append(list, rc)
	}
	sort.Slice(list, func(i, j int) bool {
		return routeKey(list[i].Gateway, list[i].Method) < routeKey(list[j].Gateway, list[j].Method)
	})
	simhttp.JSON(w, http.StatusOK, list)
	return nil
}

// handlePutRoute is PUT /admin/routes/{gw}/{method}: replace one route's
// settings. The body's gateway and method may be omitted; if given they
// must match the path.
func (s *Server) handlePutRoute(w http.ResponseWriter, r *http.Request) error {
	gw, method := chiParam(r, "gw"), strings.ToUpper(chiParam(r, "method"))
	if _, ok := s.gateways[gw]; !ok {
		return notFound("unknown gateway %q", gw)
	}
	if !knownMethod(method) {
		return invalid("method %q is not one of UPI, CARD, NETBANKING", chiParam(r, "method"))
	}
	var rc pspapi.RouteConfig
	if err := simhttp.Decode(w, r, &rc, maxBody); err != nil {
		return err
	}
	if (rc.Gateway != "" && rc.Gateway != gw) || (rc.Method != "" && !strings.EqualFold(rc.Method, method)) {
		return invalid("body names route %s/%s but the path names %s/%s", rc.Gateway, rc.Method, gw, method)
	}
	rc.Gateway, rc.Method = gw, method
	if err := validateRoute(rc); err != nil {
		return invalid("invalid route settings: %v", err)
	}
	if err := s.putRoute(r.Context(), rc); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "route changed", "gateway", gw, "method", method, "config", rc)
	simhttp.JSON(w, http.StatusOK, rc)
	return nil
}
