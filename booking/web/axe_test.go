package web_test

import (
	_ "embed"
	"encoding/json"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core from npm (testdata/axe-core/README), the field's
// standard automated accessibility check.
//
//go:embed testdata/axe-core/axe.min.js
var axeSource string

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// accessible runs axe-core on the page shown and fails the test on any
// serious or critical violation. The script is injected through the
// DevTools protocol, which the page's CSP does not govern.
func (p *phone) accessible(page string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[any](axeSource+";0")); err != nil {
		p.t.Fatalf("inject axe-core on %s: %v", page, err)
	}
	out, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => n.target.join(" "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("axe-core on %s: %v", page, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		p.t.Fatalf("axe-core answer on %s: %v: %s", page, err, out)
	}
	p.mark("axe-core on " + page)
	for _, v := range vs {
		p.t.Errorf("%s: %s violation %s (%s) at %v", page, v.Impact, v.ID, v.Help, v.Nodes)
	}
}
