package token

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

func rings(t *testing.T) (*Keyring, *Keyring) {
	t.Helper()
	k, err := NewKeyring(Key{ID: "k2", Secret: bytes.Repeat([]byte("b"), 32)}, Key{ID: "k1", Secret: bytes.Repeat([]byte("a"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewKeyring(Key{ID: "d1", Secret: bytes.Repeat([]byte("d"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	return k, d
}

func TestAdmissionTokenBindings(t *testing.T) {
	t.Parallel()
	keys, devs := rings(t)
	v := NewVerifier(keys, devs)
	now := time.Now()
	dev := devs.BindDevice(7, "devA", now.Add(time.Hour))
	otherDev := devs.BindDevice(7, "devB", now.Add(time.Hour))
	sess := SessionInfo{UserID: 7, SessionToken: "st_abc", DeviceToken: dev}
	c := Claims{TokenID: TokenID(3, 7, 0), UserID: 7, ShardID: 3, Session: SessionHash("st_abc"), Device: "devA", ExpiresAt: now.Add(120 * time.Second)}
	good := keys.Issue(c)
	got, err := v.Verify(good, sess, Intent{ShardID: 3}, now)
	if err != nil || got.TokenID != c.TokenID || got.KeyID != "k2" {
		t.Fatalf("good token: %+v %v", got, err)
	}

	// A token signed by the old key still verifies while the key is in the ring.
	oldRing, _ := NewKeyring(Key{ID: "k1", Secret: bytes.Repeat([]byte("a"), 32)})
	if _, err := v.Verify(oldRing.Issue(c), sess, Intent{ShardID: 3}, now); err != nil {
		t.Fatalf("token of the previous key: %v", err)
	}
	retired, _ := NewKeyring(Key{ID: "k0", Secret: bytes.Repeat([]byte("z"), 32)})
	attacker, _ := NewKeyring(Key{ID: "k2", Secret: bytes.Repeat([]byte("x"), 32)})

	body := strings.TrimPrefix(good, "adm_")
	parts := strings.Split(body, ".")
	tampered := "adm_" + parts[0] + "." + b64.EncodeToString([]byte("1|"+c.TokenID+"|8|3|"+c.Session+"|devA|9999999999999")) + "." + parts[2]

	cases := []struct {
		name  string
		tok   string
		sess  SessionInfo
		shard int64
		at    time.Time
		want  error
	}{
		{"forged with another secret", attacker.Issue(c), sess, 3, now, ErrForged},
		{"signed by a retired key", retired.Issue(c), sess, 3, now, ErrForged},
		{"payload edited", tampered, sess, 3, now, ErrForged},
		{"garbage", "adm_nonsense", sess, 3, now, ErrMalformed},
		{"expired", good, sess, 3, now.Add(121 * time.Second), ErrExpired},
		{"wrong intent", good, sess, 4, now, ErrWrongIntent},
		{"wrong device", good, SessionInfo{UserID: 7, SessionToken: "st_abc", DeviceToken: otherDev}, 3, now, ErrWrongDevice},
		{"no device", good, SessionInfo{UserID: 7, SessionToken: "st_abc"}, 3, now, ErrWrongDevice},
		{"device of another account", good, SessionInfo{UserID: 7, SessionToken: "st_abc", DeviceToken: devs.BindDevice(8, "devA", now)}, 3, now, ErrWrongDevice},
		{"wrong session", good, SessionInfo{UserID: 7, SessionToken: "st_other", DeviceToken: dev}, 3, now, ErrWrongSess},
		{"wrong user", good, SessionInfo{UserID: 8, SessionToken: "st_abc", DeviceToken: dev}, 3, now, ErrWrongUser},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(tc.tok, tc.sess, Intent{ShardID: tc.shard}, tc.at); err != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTicketsAreStableAndUnforgeable(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("t"), 32)
	a := Ticket(key, 5, 100)
	if a != Ticket(key, 5, 100) {
		t.Fatal("ticket not stable")
	}
	if shard, ok := CheckTicket(key, a, 100); !ok || shard != 5 {
		t.Fatalf("own ticket refused: %d %v", shard, ok)
	}
	if _, ok := CheckTicket(key, a, 101); ok {
		t.Fatal("another account's ticket accepted")
	}
	if strings.Contains(a, "100") {
		t.Fatalf("ticket %s shows the account", a)
	}
}

func TestChallenge(t *testing.T) {
	t.Parallel()
	keys, _ := rings(t)
	now := time.Now()
	c := Challenge{ID: "c1", UserID: 7, Session: SessionHash("st_abc"), Attempt: "idem-0001", Bits: 10, ExpiresAt: now.Add(time.Minute)}
	tok := keys.IssueChallenge(c)
	nonce := Solve(tok, 10)
	if _, err := VerifyChallenge(keys, tok, nonce, 7, "st_abc", "idem-0001", now); err != nil {
		t.Fatalf("solved challenge: %v", err)
	}
	bad := "x"
	for LeadingZeroBits(tok, bad) >= 10 {
		bad += "x"
	}
	for name, tc := range map[string]struct {
		nonce, sess, attempt string
		at                   time.Time
		want                 error
	}{
		"wrong work":    {bad, "st_abc", "idem-0001", now, ErrWork},
		"other attempt": {nonce, "st_abc", "idem-0002", now, ErrWrongIntent},
		"other session": {nonce, "st_x", "idem-0001", now, ErrWrongSess},
		"expired":       {nonce, "st_abc", "idem-0001", now.Add(time.Minute), ErrExpired},
	} {
		if _, err := VerifyChallenge(keys, tok, tc.nonce, 7, tc.sess, tc.attempt, tc.at); err != tc.want {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

// Solve answers the first nonce in counting order whose hash has the bits,
// as the server's check counts them.
func TestSolveFindsTheFirstNonceTheCheckAccepts(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"ch_one", "ch_" + strings.Repeat("x", 300)} {
		for nbits := 0; nbits <= 12; nbits++ {
			nonce := Solve(tok, nbits)
			if LeadingZeroBits(tok, nonce) < nbits {
				t.Fatalf("Solve(%q, %d) = %q: the check counts %d bits", tok[:6], nbits, nonce, LeadingZeroBits(tok, nonce))
			}
			n, err := strconv.Atoi(nonce)
			if err != nil {
				t.Fatalf("nonce %q: %v", nonce, err)
			}
			for j := range n {
				if LeadingZeroBits(tok, strconv.Itoa(j)) >= nbits {
					t.Fatalf("Solve(%q, %d) = %d, but %d already had the bits", tok[:6], nbits, n, j)
				}
			}
		}
	}
}

// BenchmarkSolve is a rehearsal traveller's work for a 16-bit challenge.
//
//	go test -run '^$' -bench Solve -benchmem ./booking/admission/token/
func BenchmarkSolve(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		Solve("ch_bench_"+strconv.Itoa(i), 16)
	}
}
