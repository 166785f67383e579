package audit

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanText(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"admin1", 100, "admin1"},
		{"evil\x1b[31m\r\nadmin\x00", 100, "evil[31madmin"},
		{"bad\xff\xfeutf8", 100, "badutf8"},
		{"rtl\u202eoverride\u200bzero\u2028line", 100, "rtloverridezeroline"},
		{"दिल्ली", 100, "दिल्ली"},
		{strings.Repeat("x", 20), 10, strings.Repeat("x", 7) + "…"},
		{strings.Repeat("दि", 5), 10, "दि" + "…"}, // cut on a rune boundary
	} {
		got := CleanText(tc.in, tc.limit)
		if got != tc.want || !utf8.ValidString(got) || len(got) > tc.limit {
			t.Errorf("CleanText(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

func TestCleanDetail(t *testing.T) {
	b, err := cleanDetail(map[string]any{"n": 7, "ok": true, "s": "a\x00b", "list": []any{"c\x1bd", 1.5}, "nested": map[string]any{"k\n": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["s"] != "ab" || got["n"] != 7.0 || got["ok"] != true || got["list"].([]any)[0] != "cd" || got["nested"].(map[string]any)["k"] != "v" {
		t.Fatalf("cleaned detail: %s", b)
	}
	if b, _ := cleanDetail(nil); string(b) != "{}" {
		t.Fatalf("nil detail: %s", b)
	}
}

// Write is the one writer of audit_log: no other code of the module
// inserts into it directly (and so around its cleaning and caps).
func TestWriteIsTheOnlyWriter(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := filepath.Abs(".")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || path == self) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(strings.ToUpper(string(b)), "INSERT INTO AUDIT_LOG") {
			t.Errorf("%s writes audit_log directly; use audit.Write", strings.TrimPrefix(path, root+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
