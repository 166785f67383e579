package rehearse

// Profiles exposes the seeded travellers to the tests.
var Profiles = profiles

// WithTravellers gives a run its travellers' counts by client type, as a
// finished window's report has them.
func WithTravellers(rr RunReport, aggOK, aggN, ordOK, ordN int) RunReport {
	rr.aggressiveOK, rr.aggressiveN, rr.ordinaryOK, rr.ordinaryN = aggOK, aggN, ordOK, ordN
	return rr
}
