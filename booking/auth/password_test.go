package auth_test

import (
	"strings"
	"testing"

	"tatkal/booking/auth"
)

// A new password is refused, with the reason, when it is empty, short,
// longer than a sign-in form takes, untypable, or contains the login.
func TestCheckNewPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		login, pw, want string
	}{
		{"asha", "", "empty"},
		{"asha", "eleven-char", "shorter than 12"},
		{"asha", "ग्यारह-अक्षर", ""}, // 12 characters, more bytes
		{"asha", strings.Repeat("a", 256), ""},
		{"asha", strings.Repeat("a", 257), "longer than 256 bytes"},
		{"asha", "line\nbreak-in-it", "control characters"},
		{"asha", "nul\x00-in-the-middle", "control characters"},
		{"asha", "bad-utf8-\xff-in-it", "not valid UTF-8"},
		{"asha", "i-am-ASHA-the-admin", "contains the login"},
		{"asha", "correct horse battery", ""},
	} {
		err := auth.CheckNewPassword(tc.login, tc.pw)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q refused: %v", tc.pw, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want a refusal saying %q", tc.pw, err, tc.want)
		}
	}
}
