package api

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestOpenAPIDocumentsEveryRoute keeps the embedded document honest: it is
// OpenAPI 3.1 JSON, every route Routes mounts is in it with its method,
// nothing in it is a route that does not exist, and every $ref resolves.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if v := doc["openapi"]; v != "3.1.0" {
		t.Fatalf("openapi version %v, want 3.1.0", v)
	}
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatal("openapi.json has no paths object")
	}

	// Handlers are never invoked, so a zero configuration mounts them all.
	r := chi.NewRouter()
	New(Config{}).Routes(r)
	mounted := map[string]bool{}
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		key := strings.ToLower(method) + " " + route
		mounted[key] = true
		item, ok := paths[route].(map[string]any)
		if !ok {
			t.Errorf("route %s %s is not documented in openapi.json", method, route)
			return nil
		}
		if _, ok := item[strings.ToLower(method)]; !ok {
			t.Errorf("route %s %s: openapi.json documents the path but not the method", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}
	if len(mounted) == 0 {
		t.Fatal("Routes mounted nothing")
	}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				if !mounted[method+" "+path] {
					t.Errorf("openapi.json documents %s %s, which no route serves", strings.ToUpper(method), path)
				}
			}
		}
	}

	var refs []string
	collectRefs(doc, &refs)
	sort.Strings(refs)
	for _, ref := range refs {
		if !resolves(doc, ref) {
			t.Errorf("$ref %q does not resolve", ref)
		}
	}
}

func collectRefs(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				*out = append(*out, s)
				continue
			}
			collectRefs(x, out)
		}
	case []any:
		for _, x := range v {
			collectRefs(x, out)
		}
	}
}

// resolves follows a local JSON pointer ("#/components/schemas/Problem").
func resolves(doc map[string]any, ref string) bool {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = doc
	for part := range strings.SplitSeq(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}
