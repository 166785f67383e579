package booking

import "context"

// PauseFunc is called at named points between two steps of a path (for
// example "cancel.before-update"), so a test can hold one path there while
// it runs a competing one: interleavings are forced, not hoped for. It is
// nil in production. It may block; it must return when ctx ends.
type PauseFunc func(ctx context.Context, point string)

// At calls the pause function, if any, at the named point.
func (p PauseFunc) At(ctx context.Context, point string) {
	if p != nil {
		p(ctx, point)
	}
}
