package testenv

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core from npm (testdata/axe-core/README), the field's
// standard automated accessibility check.
//
//go:embed testdata/axe-core/axe.min.js
var axeSource string

// AxeViolation is one serious or critical accessibility failure.
type AxeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

func (v AxeViolation) String() string {
	return fmt.Sprintf("%s violation %s (%s) at %v", v.Impact, v.ID, v.Help, v.Nodes)
}

// Axe runs axe-core on the page shown in the tab of ctx and returns its
// serious and critical violations. The script is injected through the
// DevTools protocol, which the page's CSP does not govern.
func Axe(ctx context.Context) ([]AxeViolation, error) {
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](axeSource+";0")); err != nil {
		return nil, fmt.Errorf("inject axe-core: %w", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => n.target.join(" "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("run axe-core: %w", err)
	}
	var vs []AxeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		return nil, fmt.Errorf("axe-core answer: %w: %s", err, out)
	}
	return vs, nil
}

// Accessible fails t on every serious or critical violation axe-core
// finds on the page shown; page names it in the failure.
func (b *Browser) Accessible(page string) {
	b.t.Helper()
	vs, err := Axe(b.Ctx)
	if err != nil {
		b.t.Fatalf("axe-core on %s: %v", page, err)
	}
	for _, v := range vs {
		b.t.Errorf("%s: %v", page, v)
	}
}
