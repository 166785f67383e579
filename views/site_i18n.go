package views

import (
	"context"

	"tatkal/booking/i18n"
)

// The passenger site speaks English and Hindi. Every string a page shows
// of its own is in the one catalogue (booking/i18n), which the messages
// sent to passengers (booking.NotifyT) share.

type langKey struct{}

// WithLang returns ctx carrying the page language ("en" or "hi").
func WithLang(ctx context.Context, lang string) context.Context {
	return context.WithValue(ctx, langKey{}, lang)
}

// Lang is the page language of ctx, English by default.
func Lang(ctx context.Context) string {
	if l, ok := ctx.Value(langKey{}).(string); ok && l == "hi" {
		return "hi"
	}
	return "en"
}

// T is the catalogue's string for key in the page's language; a missing
// Hindi string falls back to English, a missing key shows itself (so a
// test finds it).
func T(ctx context.Context, key string) string {
	return i18n.Text(Lang(ctx), key)
}

// Languages are the switch's choices: code and the language's own name.
var Languages = [][2]string{{"en", "English"}, {"hi", "हिन्दी"}}

// Tf is T with the arguments of a catalogue string's fmt verbs.
func Tf(ctx context.Context, key string, args ...any) string {
	return i18n.Format(Lang(ctx), key, args...)
}
