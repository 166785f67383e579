package pii

import (
	"strings"
	"testing"
)

func TestSealOpenRotate(t *testing.T) {
	old, err := Parse(NewSpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := old.Seal("ABCDE1234F")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "ABCDE") || KeyOf(s) != "k1" {
		t.Fatalf("sealed %q", s)
	}
	s2, _ := old.Seal("ABCDE1234F")
	if s2 == s {
		t.Fatal("two seals of one number are equal: the nonce is not fresh")
	}
	// a ring with a new key first still opens the old one's values
	k1 := strings.Repeat("11", 32)
	k2 := strings.Repeat("22", 32)
	r1, _ := Parse("k1=" + k1)
	r21, err := Parse("k2=" + k2 + ",k1=" + k1)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := r1.Seal("987654321012")
	if got, err := r21.Open(v); err != nil || got != "987654321012" {
		t.Fatalf("open under rotated ring: %q %v", got, err)
	}
	n, _ := r21.Seal("987654321012")
	if KeyOf(n) != "k2" {
		t.Fatalf("new value sealed under %q, want the newest k2", KeyOf(n))
	}
	r2, _ := Parse("k2=" + k2)
	if _, err := r2.Open(v); err == nil {
		t.Fatal("a value of a dropped key opened")
	}
	// tampering is refused
	bad := v[:len(v)-2] + "AA"
	if _, err := r1.Open(bad); err == nil {
		t.Fatal("a tampered value opened")
	}
}

func TestParseRefuses(t *testing.T) {
	for _, spec := range []string{"", "k1", "k1=zz", "k1=" + strings.Repeat("ab", 16), "a b=" + strings.Repeat("ab", 32),
		"k=" + strings.Repeat("ab", 32) + ",k=" + strings.Repeat("cd", 32)} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}

func TestMask(t *testing.T) {
	if got := Mask(Hint("ABCDE1234F")); got != "••••234F" {
		t.Fatalf("mask %q", got)
	}
	if Hint("1234") != "" || Mask("") != "" {
		t.Fatal("a short number is kept whole")
	}
}

// BenchmarkSeal is the hold path's added cost per passenger with an ID.
func BenchmarkSeal(b *testing.B) {
	k, err := Parse(NewSpec("k1"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Seal("ABCDE1234F"); err != nil {
			b.Fatal(err)
		}
	}
}
