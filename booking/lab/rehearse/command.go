package rehearse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"tatkal/booking/app"
)

// Command is the body of tatkal rehearse: run, write the JSON and
// Markdown reports as dir/rehearsal-<time>.{json,md}, print the Markdown,
// and fail when a run broke a promise (oversold, unresolved payment,
// money off, invariant broken). An empty dir is a new temporary directory,
// named at the start: reports are a run's output, not the working tree's.
func Command(ctx context.Context, cfg app.Config, o Options, dir string, out io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	// Made before the run, so a minutes-long rehearsal never ends with
	// nowhere to write its report.
	if dir == "" {
		d, err := os.MkdirTemp("", "tatkal-rehearsal-")
		if err != nil {
			return fmt.Errorf("report directory: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report directory: %w", err)
	}
	fmt.Fprintf(out, "Reports go to %s\n", dir)
	o.Progress = out
	started := time.Now().UTC()
	o.OnRun = func(rep *Report) {
		// What is measured so far, in case the run is stopped.
		js, _ := json.MarshalIndent(rep, "", "  ")
		os.WriteFile(filepath.Join(dir, "rehearsal-"+started.Format("20060102-150405")+".partial.json"), js, 0o644) //nolint:errcheck
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	rep, err := Run(ctx, cfg, o, log)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, "rehearsal-"+rep.StartedAt.Format("20060102-150405"))
	js, _ := json.MarshalIndent(rep, "", "  ")
	md := rep.Markdown()
	if err := os.WriteFile(name+".json", js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(name+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s\nReports: %s.json, %s.md\n", md, name, name)
	if !rep.OK() {
		return fmt.Errorf("a run broke a promise: see the report")
	}
	return nil
}
