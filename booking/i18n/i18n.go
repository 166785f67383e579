// Package i18n is the one catalogue of what passengers read, in English
// and Hindi: the site's pages and the messages sent to them.
package i18n

import (
	"fmt"
	"sort"
	"strings"
)

// Norm is lang as the catalogue knows it: "hi" or "en" (anything else).
func Norm(lang string) string {
	if lang == "hi" {
		return "hi"
	}
	return "en"
}

// Text is the catalogue's string for key in lang; a missing Hindi string
// falls back to English, a missing key shows itself (so a test finds it).
func Text(lang, key string) string {
	s, ok := catalogue[key]
	if !ok {
		return key
	}
	if Norm(lang) == "hi" && s[1] != "" {
		return s[1]
	}
	return s[0]
}

// Format is Text used as a fmt format with args. A string with no verb
// (a subject, say) is itself: a message's args serve its body and
// subject alike, and fmt would append them to a verbless string.
func Format(lang, key string, args ...any) string {
	s := Text(lang, key)
	if !strings.Contains(s, "%") {
		return s
	}
	return fmt.Sprintf(s, args...)
}

// Messages are the catalogue's message keys (key.subject and key.body,
// as booking.NotifyT takes them), sorted.
func Messages() []string {
	var keys []string
	for k := range catalogue {
		if strings.HasPrefix(k, "msg.") && strings.HasSuffix(k, ".body") {
			keys = append(keys, strings.TrimSuffix(k, ".body"))
		}
	}
	sort.Strings(keys)
	return keys
}

// Has: the catalogue holds key.
func Has(key string) bool {
	_, ok := catalogue[key]
	return ok
}
