package console_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// An upload whose fields, file name or lines hold a NUL byte or invalid
// UTF-8 is refused with 400 and the reason (the line, for a line), and
// stores nothing; the console's other forms refuse multipart outright.
func TestUploadRefusesBadText(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	fin := newBrowser(t, s.Server.URL)
	fin.login("finance1")
	fin.get("/console/finance/files")
	fields := func(k, v string) url.Values {
		f := url.Values{"source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}}
		f.Set(k, v)
		return f
	}
	line := strings.SplitAfterN(swiftFile(1000), "\n", 2)[1]
	cases := []struct {
		name   string
		fields url.Values
		file   string
		body   string
		want   string
	}{
		{"NUL in the gateway", fields("gateway", "swift\x00pay"), "f.csv", swiftFile(1000), "BAD_TEXT"},
		{"invalid UTF-8 in the date", fields("date", financeDay+"\xff"), "f.csv", swiftFile(1000), "BAD_TEXT"},
		{"invalid UTF-8 in the file name", fields("source", "SETTLEMENT"), "f\xff.csv", swiftFile(1000), "BAD_TEXT"},
		{"NUL in the file name", fields("source", "SETTLEMENT"), "f\x00.csv", swiftFile(1000), "BAD_UPLOAD"},
		{"NUL in a line", fields("source", "SETTLEMENT"), "f.csv", swiftHead + strings.Replace(line, "swp_orphan_1", "swp\x00_1", 1), "line 2"},
		{"invalid UTF-8 in a line", fields("source", "SETTLEMENT"), "f.csv", swiftFile(1000) + strings.Replace(line, "ord-unknown-1", "ord-\xc3\x28", 1), "line 3"},
	}
	for _, c := range cases {
		code, body := fin.upload("/console/finance/files", c.fields, c.file, c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d, want 400 naming %q\n%.1500s", c.name, code, c.want, body)
		}
	}
	var files, lines int
	s.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM recon_files), (SELECT count(*) FROM recon_lines)`).Scan(&files, &lines) //nolint:errcheck
	if files != 0 || lines != 0 {
		t.Fatalf("refused uploads stored %d files, %d lines", files, lines)
	}

	// The other forms take no multipart at all, whatever it holds.
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	for _, c := range []struct {
		b    *browser
		path string
	}{{fin, "/console/payments/reviews/1"}, {admin, "/console/tokens"}} {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range map[string]string{"csrf": c.b.csrf, "action": "resolve", "note": "a\x00b", "user": "ops1\xff", "label": "x", "days": "30"} {
			mw.WriteField(k, v) //nolint:errcheck
		}
		mw.Close()
		req, _ := http.NewRequest("POST", c.b.base+c.path, &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("multipart with NUL to %s: %d, want 415", c.path, resp.StatusCode)
		}
	}
}
