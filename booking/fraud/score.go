package fraud

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Scoring decides per member (issue 37). A cluster is who is linked to
// whom; whether an account in it is flagged depends on what it shares and
// on what it does with it:
//
//   - What it shares: each kind of link counts once per account at its
//     strongest (a card shared with nine colleagues is one card, not nine
//     links), more keys of a kind add half their weight, and the sum of a
//     kind is capped at twice its weight. Passenger names count only when
//     two or more of the account's passengers match (one stranger of the
//     same name and age is a coincidence), or beside another link.
//   - What it does: own travel or resale. An account booking the
//     passengers it saved on its master list well before the opening
//     (Config.OwnSavedBefore) travels itself, and its score is cut; one
//     booking strangers, or customers saved the night before, keeps it and
//     more; an account with no master list says neither. A new account
//     (under 30 days) and a scripted hold (under a second from the opening,
//     the challenge solved in under one) add to it. An old account takes
//     nothing off: rings buy aged accounts.
//   - A household: a cluster of at most six whose passengers mostly share
//     one surname, from one home address block, and that books its own
//     people or carries a rare surname, has its members' scores lowered. A
//     common surname alone (Kumar, Singh) shows nothing: touts' customers
//     carry it too. A household's scores are quartered: a ring booking one
//     rare-surnamed customer family from one address block passes as one.
//
// A member with a score from Config.MemberScore is flagged; from NearMiss
// times that, it is a near miss the analysts may browse (NearMisses).

// passengerKinds are the links through whom two accounts book.
var passengerKinds = map[string]bool{KindPassengerID: true, KindPassengerName: true, KindNameSound: true, KindRefusedPassenger: true}

// memberFacts is what scoring reads about one account in the window.
type memberFacts struct {
	ageDays    int
	passengers int
	own        int // of its passengers, those it saved long before the opening
	lastMinute int // those it saved only shortly before the opening (a tout's customers)
	savedAny   bool
	net24      map[string]bool
	scripted   bool
	surnames   []string
}

// MemberScore is one member's verdict.
type MemberScore struct {
	Score   float64 `json:"score"`
	Flagged bool    `json:"flagged"`
	Why     string  `json:"why"`
}

// prune cuts weak bridges: in a component of three or more accounts, an
// account held by fewer than two independent links (weak kinds do not
// count; a shared device, instrument, phone or login counts two, being the
// account's own; the passengers two accounts share count one per edge) is
// cut off with its
// edges, again until none is left, so a relative linked to a ring by one
// booking is not pulled into it. A pair keeps its one link: two accounts
// on one card are judged on what they book.
func prune(edges []Edge) []Edge {
	for {
		support := map[int64]int{}
		adj := map[int64][]int64{}
		for _, e := range edges {
			n, booked := 0, 0
			for _, ev := range e.Evidence {
				switch {
				case weakKindSet[ev.Kind]:
				case passengerKinds[ev.Kind]:
					booked = 1
				default:
					n += 2
				}
			}
			n += booked
			support[e.A] += n
			support[e.B] += n
			adj[e.A] = append(adj[e.A], e.B)
			adj[e.B] = append(adj[e.B], e.A)
		}
		size := componentSizes(adj)
		cut := map[int64]bool{}
		for u, s := range support {
			if s < 2 && size[u] >= 3 {
				cut[u] = true
			}
		}
		if len(cut) == 0 {
			return edges
		}
		kept := edges[:0:0]
		for _, e := range edges {
			if !cut[e.A] && !cut[e.B] {
				kept = append(kept, e)
			}
		}
		edges = kept
	}
}

// componentSizes says, for every account, how many accounts its component has.
func componentSizes(adj map[int64][]int64) map[int64]int {
	size := map[int64]int{}
	for start := range adj {
		if size[start] > 0 {
			continue
		}
		comp := []int64{start}
		size[start] = -1
		for i := 0; i < len(comp); i++ {
			for _, v := range adj[comp[i]] {
				if size[v] == 0 {
					size[v] = -1
					comp = append(comp, v)
				}
			}
		}
		for _, u := range comp {
			size[u] = len(comp)
		}
	}
	return size
}

// score reads the members' facts and scores every member of every
// cluster, then flags the clusters with a flagged member.
func score(ctx context.Context, q Querier, window time.Time, clusters []Cluster, cfg Config) error {
	var users []int64
	for _, cl := range clusters {
		users = append(users, cl.Members...)
	}
	if len(users) == 0 {
		return nil
	}
	facts, freq, err := readFacts(ctx, q, window, users, cfg)
	if err != nil {
		return err
	}
	for i := range clusters {
		scoreCluster(&clusters[i], facts, freq, cfg)
	}
	return nil
}

// readFacts reads the members' accounts, holds, passengers and saved
// passengers, and how often each surname is booked in the window.
func readFacts(ctx context.Context, q Querier, window time.Time, users []int64, cfg Config) (map[int64]*memberFacts, map[string]float64, error) {
	facts := map[int64]*memberFacts{}
	get := func(u int64) *memberFacts {
		f := facts[u]
		if f == nil {
			f = &memberFacts{net24: map[string]bool{}, ageDays: math.MaxInt32}
			facts[u] = f
		}
		return f
	}
	rows, err := q.Query(ctx, `
		SELECT user_id, account_age_days, coalesce(host(ip_net24), ''), since_open_ms, coalesce(solve_ms, -1)
		FROM fraud_signals WHERE window_opens_at = $1 AND user_id = ANY($2)`, window, users)
	if err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: holds: %w", window, err)
	}
	for rows.Next() {
		var u, since int64
		var age, solve int
		var net string
		if err := rows.Scan(&u, &age, &net, &since, &solve); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("fraud score %s: holds: %w", window, err)
		}
		f := get(u)
		f.ageDays = min(f.ageDays, age)
		if net != "" {
			f.net24[net] = true
		}
		if since >= 0 && since < 1000 && solve >= 0 && solve < 1000 {
			f.scripted = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: holds: %w", window, err)
	}
	// What they saved long before the opening, by how the name sounds and
	// the age give or take a year (a birthday since).
	saved := map[int64][]savedPassenger{}
	rows, err = q.Query(ctx, `SELECT user_id, name, age, created_at <= $2 FROM passenger_master
		WHERE user_id = ANY($1) AND removed_at IS NULL AND created_at <= $3`, users, window.Add(-cfg.OwnSavedBefore), window)
	if err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: saved passengers: %w", window, err)
	}
	for rows.Next() {
		var u int64
		var name string
		var age int
		var long bool
		if err := rows.Scan(&u, &name, &age, &long); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("fraud score %s: saved passengers: %w", window, err)
		}
		saved[u] = append(saved[u], savedPassenger{key: NameKey(name), age: age, long: long})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: saved passengers: %w", window, err)
	}
	rows, err = q.Query(ctx, `SELECT s.user_id, p.name_norm, p.age, p.name_key
		FROM fraud_signals s JOIN fraud_signal_passengers p USING (hold_id)
		WHERE s.window_opens_at = $1 AND s.user_id = ANY($2)`, window, users)
	if err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: passengers: %w", window, err)
	}
	for rows.Next() {
		var u int64
		var name, key string
		var age int
		if err := rows.Scan(&u, &name, &age, &key); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("fraud score %s: passengers: %w", window, err)
		}
		f := get(u)
		f.passengers++
		if key == "" {
			key = NameKey(name)
		}
		f.savedAny = f.savedAny || len(saved[u]) > 0
		if i := slices.IndexFunc(saved[u], func(s savedPassenger) bool { return s.key == key && s.age-age <= 1 && age-s.age <= 1 }); i >= 0 {
			if saved[u][i].long {
				f.own++
			} else {
				f.lastMinute++
			}
		}
		if w := strings.Fields(name); len(w) > 0 {
			f.surnames = append(f.surnames, w[len(w)-1])
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: passengers: %w", window, err)
	}
	// The refused attempts' passengers are the account's people too.
	rows, err = q.Query(ctx, `SELECT r.user_id, split_part(n, ' ', -1) FROM fraud_refused_attempts r CROSS JOIN LATERAL unnest(r.name_norms) AS n
		WHERE r.window_opens_at = $1 AND r.user_id = ANY($2) AND n <> ''`, window, users)
	if err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: refused passengers: %w", window, err)
	}
	for rows.Next() {
		var u int64
		var sn string
		if err := rows.Scan(&u, &sn); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("fraud score %s: refused passengers: %w", window, err)
		}
		get(u).surnames = append(get(u).surnames, sn)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: refused passengers: %w", window, err)
	}
	freq := map[string]float64{}
	rows, err = q.Query(ctx, `SELECT split_part(p.name_norm, ' ', -1), count(*)::float8 / sum(count(*)) OVER ()
		FROM fraud_signals s JOIN fraud_signal_passengers p USING (hold_id) WHERE s.window_opens_at = $1 GROUP BY 1`, window)
	if err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: surnames: %w", window, err)
	}
	for rows.Next() {
		var sn string
		var f float64
		if err := rows.Scan(&sn, &f); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("fraud score %s: surnames: %w", window, err)
		}
		freq[sn] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("fraud score %s: surnames: %w", window, err)
	}
	return facts, freq, nil
}

type savedPassenger struct {
	key  string
	age  int
	long bool // saved at least OwnSavedBefore before the opening
}

// household says whether a cluster books for relatives (see the package
// comment above), and the surname and its share.
func household(cl *Cluster, facts map[int64]*memberFacts, freq map[string]float64, cfg Config) bool {
	count, total := map[string]int{}, 0
	nets := map[string]int{}
	own, pax := 0, 0
	for _, m := range cl.Members {
		f := facts[m]
		if f == nil {
			continue
		}
		for _, sn := range f.surnames {
			count[sn]++
			total++
		}
		for n := range f.net24 {
			nets[n]++
		}
		own, pax = own+f.own, pax+f.passengers
	}
	if total == 0 {
		return false
	}
	cl.Evidence.Surname = ""
	for sn, n := range count {
		if n > count[cl.Evidence.Surname] || (n == count[cl.Evidence.Surname] && sn < cl.Evidence.Surname) {
			cl.Evidence.Surname = sn
		}
	}
	cl.Evidence.KinShare = float64(count[cl.Evidence.Surname]) / float64(total)
	home := 0
	for _, n := range nets {
		home = max(home, n)
	}
	rare := freq[cl.Evidence.Surname] <= cfg.CommonSurname
	ownPeople := pax > 0 && 2*own >= pax
	return cfg.KinShare > 0 && cl.Evidence.KinShare >= cfg.KinShare && len(cl.Members) <= 6 &&
		3*home >= 2*len(cl.Members) && (rare || ownPeople)
}

// scoreCluster scores each member of cl from its edges inside cl.
func scoreCluster(cl *Cluster, facts map[int64]*memberFacts, freq map[string]float64, cfg Config) {
	kin := household(cl, facts, freq, cfg)
	// per member and kind: its edges' evidence
	type kindSum struct {
		edges, grp, shared int
		soft               float64
	}
	per := map[int64]map[string]*kindSum{}
	add := func(u int64, ev EdgeEvidence) {
		if per[u] == nil {
			per[u] = map[string]*kindSum{}
		}
		k := per[u][ev.Kind]
		if k == nil {
			k = &kindSum{}
			per[u][ev.Kind] = k
		}
		k.edges++
		k.grp = max(k.grp, ev.Group)
		k.shared += ev.Shared
	}
	softPersons := map[int64]int{}
	softWeight := map[int64]float64{}
	for _, e := range cl.Evidence.all {
		// the same passenger matched by name and by sound is one match
		var soft float64
		persons := 0
		for _, ev := range e.Evidence {
			if softKinds[ev.Kind] {
				soft = max(soft, ev.Weight)
				persons = max(persons, ev.Shared)
				continue
			}
			add(e.A, ev)
			add(e.B, ev)
		}
		for _, u := range []int64{e.A, e.B} {
			softWeight[u] += soft
			softPersons[u] += persons
		}
	}
	cl.Scores = make(map[int64]MemberScore, len(cl.Members))
	flagged := 0
	for _, m := range cl.Members {
		var links float64
		var kinds []string
		for kind, k := range per[m] {
			base := cfg.Weights[kind]
			if weakKindSet[kind] {
				links += base * min(1, math.Sqrt(2/float64(max(k.grp, 2))))
				continue
			}
			// one key of a kind counts once, whatever the accounts on it; a
			// key on more than six accounts (an office's card) says less
			// about each; further keys of the kind add half
			keys := 1
			if k.grp > 1 {
				keys = max(1, (k.edges+k.grp-2)/(k.grp-1))
			}
			if passengerKinds[kind] {
				keys = max(keys, k.shared)
			}
			w := base * min(1, math.Sqrt(6/float64(max(k.grp, 2)))) * (1 + 0.5*float64(min(keys, 3)-1))
			links += w
			kinds = append(kinds, kind)
		}
		if softWeight[m] > 0 && (softPersons[m] >= 2 || len(kinds) > 0) {
			links += min(softWeight[m], 2*cfg.Weights[KindNameSound])
			kinds = append(kinds, "names")
		}
		f := facts[m]
		if f == nil {
			f = &memberFacts{}
		}
		// own travel or resale: an account with no master list says neither
		resale := 1.0
		var why []string
		why = append(why, fmt.Sprintf("links %.2f (%s)", links, strings.Join(slices.Sorted(slices.Values(kinds)), ", ")))
		if f.passengers > 0 && f.savedAny {
			ownShare := float64(f.own) / float64(f.passengers)
			late := float64(f.lastMinute) / float64(f.passengers)
			resale = 0.25 + 0.75*(1-ownShare)*(1-ownShare) + 0.5*late
			why = append(why, fmt.Sprintf("%d of %d passengers its own, %d saved just before the opening", f.own, f.passengers, f.lastMinute))
		}
		if f.ageDays < 30 {
			resale *= 1.2
			why = append(why, fmt.Sprintf("account %d days old", f.ageDays))
		}
		if f.scripted {
			resale *= 1.2
			why = append(why, "scripted hold")
		}
		if kin {
			resale *= 0.25
			why = append(why, fmt.Sprintf("household (%s)", cl.Evidence.Surname))
		}
		sc := links * resale
		ms := MemberScore{Score: math.Round(sc*1000) / 1000, Flagged: sc >= cfg.MemberScore && len(kinds) > 0}
		ms.Why = strings.Join(why, "; ")
		if len(ms.Why) > 500 {
			ms.Why = ms.Why[:500]
		}
		if ms.Flagged {
			flagged++
		}
		cl.Scores[m] = ms
	}
	cl.Flagged = flagged > 0 && len(cl.Members) >= cfg.MinMembers && cl.Score >= cfg.MinScore
	if !cl.Flagged {
		for m, ms := range cl.Scores {
			ms.Flagged = false
			cl.Scores[m] = ms
		}
	}
	cl.Evidence.Household = kin
	cl.Evidence.Why = why(cl, cfg)
}
