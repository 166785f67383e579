// Package static embeds the CSS, scripts and icons and serves them under
// content-hash URLs, so browsers may cache them forever and a new release
// is never mixed with an old stylesheet.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed *.css *.js *.ttf
var files embed.FS

// DevanagariFont is Noto Sans Devanagari (SIL Open Font License 1.1, see
// NotoSansDevanagari-OFL.txt beside it): the Hindi pages' font (site.css)
// and the Hindi e-ticket PDF's (booking/eticket).
func DevanagariFont() []byte {
	b, _ := files.ReadFile(devanagari)
	return b
}

const devanagari = "NotoSansDevanagari-Regular.ttf"

// hashes maps a file name to its content hash; computed once, read-only after.
var hashes = func() map[string]string {
	out := map[string]string{}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		sum := sha256.Sum256(b)
		out[e.Name()] = hex.EncodeToString(sum[:])[:12]
	}
	return out
}()

// URL is the cache-forever address of an embedded file.
func URL(name string) string {
	return "/static/" + hashes[name] + "/" + name
}

// Handler serves /static/{hash}/{name}. A stale hash still gets the current
// file, but without the long cache lifetime.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/static/")
		hash, name, ok := strings.Cut(rest, "/")
		if !ok || path.Base(name) != name {
			http.NotFound(w, r)
			return
		}
		b, err := files.ReadFile(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		// A font is named by its release and never changes under its
		// name, and site.css reaches it relative to its own address: it is
		// cached for good under any hash.
		if hash == hashes[name] || path.Ext(name) == ".ttf" {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		switch path.Ext(name) {
		case ".css":
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
		case ".js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		case ".ttf":
			w.Header().Set("Content-Type", "font/ttf")
		}
		w.Write(b) //nolint:errcheck
	})
}
