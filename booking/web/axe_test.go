package web_test

import "tatkal/booking/lab/testenv"

// accessible runs axe-core (testenv.Axe) on the page shown and fails the
// test on any serious or critical violation.
func (p *phone) accessible(page string) {
	p.t.Helper()
	vs, err := testenv.Axe(p.ctx)
	if err != nil {
		p.t.Fatalf("axe-core on %s: %v", page, err)
	}
	p.mark("axe-core on " + page)
	for _, v := range vs {
		p.t.Errorf("%s: %v", page, v)
	}
}
