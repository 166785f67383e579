package fraud

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"

	"tatkal/booking/india"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Population describes an abuse test population: K rings of M accounts
// that share devices, instruments and passengers and fire together, F
// families of 2-3 accounts sharing a device and booking for relatives, and
// N honest accounts.
type Population struct {
	Rings    int
	RingSize int
	Families int
	Honest   int
	Seed     uint64
	// OpensAt is the window the holds race in (default: next 10:00 IST).
	OpensAt time.Time
}

// Generated is who is who in a generated population.
type Generated struct {
	OpensAt time.Time
	ShardID int64
	Ring    map[int64]int // account -> ring number
	Family  map[int64]int // account -> family number
	Honest  []int64
}

// Caps so a typo cannot fill the database.
const (
	maxRings    = 1000
	maxRingSize = 200
	maxFamilies = 100_000
	maxHonest   = 1_000_000
)

var (
	firstNames = []string{"Ramesh", "Suresh", "Priya", "Anita", "Rahul", "Sunita", "Amit", "Kavita", "Vijay", "Pooja",
		"Arjun", "Deepa", "Manoj", "Lakshmi", "Sanjay", "Meena", "Ravi", "Geeta", "Anil", "Rekha",
		"Kiran", "Nisha", "Ashok", "Usha", "Rajesh", "Seema", "Mohan", "Shanti", "Gopal", "Radha",
		"Imran", "Fatima", "Harpreet", "Gurpreet", "Joseph", "Mary", "Arun", "Divya", "Naveen", "Swati"}
	surnames = []string{"Kumar", "Sharma", "Verma", "Singh", "Patel", "Reddy", "Nair", "Iyer", "Das", "Gupta",
		"Yadav", "Jain", "Mehta", "Shah", "Rao", "Pillai", "Menon", "Bose", "Ghosh", "Mishra",
		"Khan", "Ali", "Gill", "Sandhu", "Thomas", "Fernandes", "Joshi", "Kulkarni", "Desai", "Chauhan"}
)

type genUser struct {
	login    string
	created  time.Time
	verified bool
	sig      Signal
	ring     int // -1 if none
	family   int // -1 if none
}

// Generate writes the population's accounts, a Tatkal shard for its
// window and one signal per account (through Recorder.Record, as the live
// path will), and says who is who. The through-the-API version is the
// rehearsal lab's; this one tests the clustering.
func Generate(ctx context.Context, q Querier, rec Recorder, p Population) (Generated, error) {
	switch {
	case p.Rings < 0 || p.Rings > maxRings, p.RingSize < 0 || p.RingSize > maxRingSize,
		p.Families < 0 || p.Families > maxFamilies, p.Honest < 0 || p.Honest > maxHonest:
		return Generated{}, fmt.Errorf("%w: population out of bounds (rings ≤ %d of ≤ %d, families ≤ %d, honest ≤ %d)",
			ErrInvalid, maxRings, maxRingSize, maxFamilies, maxHonest)
	}
	r := rand.New(rand.NewPCG(p.Seed, 0x7a75a1))
	opens := p.OpensAt
	if opens.IsZero() {
		now := time.Now().In(india.IST)
		opens = time.Date(now.Year(), now.Month(), now.Day()+1, 10, 0, 0, 0, india.IST)
	}
	g := Generated{OpensAt: opens, Ring: map[int64]int{}, Family: map[int64]int{}}
	tag := strconv.FormatUint(p.Seed, 36) + strconv.FormatInt(opens.Unix()%100000, 36)

	var users []genUser
	logins := map[string]bool{}
	uniqueLogin := func(l string) string {
		for logins[l] {
			l += strconv.Itoa(r.IntN(10))
		}
		logins[l] = true
		return l
	}
	name := func(surname string) string {
		if surname == "" {
			surname = surnames[r.IntN(len(surnames))]
		}
		return firstNames[r.IntN(len(firstNames))] + " " + surname
	}
	ispIP := func() netip.Addr { // home broadband and mobile: 400 /24s
		n := r.IntN(400)
		return netip.AddrFrom4([4]byte{49, byte(n / 200), byte(n % 200), byte(1 + r.IntN(254))})
	}
	honestLogin := func() string {
		return uniqueLogin(fmt.Sprintf("%s%d", firstNames[r.IntN(len(firstNames))], r.IntN(100000)))
	}
	honestHold := func() time.Time { // the rush: most within the first 20 s
		return opens.Add(time.Duration(r.ExpFloat64()*6000+float64(r.IntN(400))) * time.Millisecond)
	}
	ident := func() string { return fmt.Sprintf("%04d%04d%04d", r.IntN(10000), r.IntN(10000), r.IntN(10000)) }

	for k := range p.Rings {
		// Rings are not equally careless. Each has a discipline d in
		// [0.35, 0.85]: the share of its accounts on the ring's devices, in
		// its burst, on its proxy; fewer pay with the ring's instruments
		// (d-0.1), have sequential logins (d-0.2) or the scripted solve
		// time (d-0.3, jittered by a few ms). Its customers come from a
		// pool twice the ring's size, so accounts share only some passengers,
		// and its burst is jittered over 2-30 ms, not all within a few.
		d := 0.35 + 0.5*r.Float64()
		stem := fmt.Sprintf("tk%s%c%c", tag, 'a'+rune(r.IntN(26)), 'a'+rune(r.IntN(26)))
		devices := make([]string, (p.RingSize+2)/3)
		for i := range devices {
			devices[i] = fmt.Sprintf("ringdev-%s-%d-%d", tag, k, i)
		}
		instruments := []string{fmt.Sprintf("tout%d.%s@upi", k, tag), fmt.Sprintf("card-%s-%d", tag, k)}
		proxy := [3]byte{103, byte(k / 200), byte(k % 200)}
		customers := make([]Passenger, 2*p.RingSize)
		for i := range customers {
			customers[i] = Passenger{Name: name(""), Age: 18 + r.IntN(50), IDType: "AADHAAR", IDRef: ident()}
		}
		burst := time.Duration(r.IntN(1500)) * time.Millisecond
		spread := 2000 + r.IntN(28000) // µs
		solve := 700 + r.IntN(300)
		for i := range p.RingSize {
			u := genUser{ring: k, family: -1, created: opens.Add(-time.Duration(1+r.IntN(20*24)) * time.Hour), verified: r.IntN(3) == 0}
			if r.Float64() < d-0.2 {
				u.login = uniqueLogin(fmt.Sprintf("%s%03d", stem, i+1))
			} else {
				u.login = honestLogin()
			}
			s := &u.sig
			s.DeviceID = fmt.Sprintf("dev-%s-r%d-%d", tag, k, i)
			if r.Float64() < d {
				s.DeviceID = devices[i%len(devices)]
			}
			s.IP = ispIP()
			if r.Float64() < d {
				s.IP = netip.AddrFrom4([4]byte{proxy[0], proxy[1], proxy[2], byte(1 + r.IntN(254))})
			}
			s.Instrument = fmt.Sprintf("own-%s-r%d-%d@upi", tag, k, i)
			if r.Float64() < d-0.1 {
				s.Instrument = instruments[r.IntN(len(instruments))]
			}
			s.HeldAt = honestHold()
			if r.Float64() < d {
				s.HeldAt = opens.Add(burst + time.Duration(r.IntN(spread))*time.Microsecond)
			}
			s.SolveMS = 1500 + r.IntN(7000)
			if r.Float64() < d-0.3 {
				s.SolveMS = solve + r.IntN(4)
			}
			for _, j := range r.Perm(len(customers))[:2+r.IntN(3)] {
				s.Passengers = append(s.Passengers, customers[j])
			}
			users = append(users, u)
		}
	}
	for f := range p.Families {
		// Most households are two or three accounts on one device; one in
		// six is a joint family of four or five, as large as a small ring,
		// on the home device and a phone or two. Half pay with the
		// household's UPI address; up to two of them (the live limit's
		// number) also book the same grandparent, and in a joint family
		// both grandparents.
		surname := surnames[r.IntN(len(surnames))]
		size := 2 + r.IntN(2)
		if r.IntN(6) == 0 {
			size = 4 + r.IntN(2)
		}
		devices := []string{fmt.Sprintf("famdev-%s-%d", tag, f)}
		if size >= 4 {
			devices = append(devices, fmt.Sprintf("famdev-%s-%d-phone", tag, f))
		}
		home := ispIP()
		payer := fmt.Sprintf("fam%d.%s@upi", f, tag)
		elders := []Passenger{{Name: name(surname), Age: 60 + r.IntN(25), IDType: "AADHAAR", IDRef: ident()}}
		if size >= 4 {
			elders = append(elders, Passenger{Name: name(surname), Age: 60 + r.IntN(25), IDType: "AADHAAR", IDRef: ident()})
		}
		forElders := 0
		for range size {
			u := genUser{ring: -1, family: f, login: honestLogin(), created: opens.Add(-time.Duration(30+r.IntN(3000)) * 24 * time.Hour), verified: r.IntN(3) > 0}
			s := &u.sig
			s.DeviceID, s.IP, s.HeldAt, s.SolveMS, s.Attested = devices[r.IntN(len(devices))], home, honestHold(), 1500+r.IntN(7000), true
			s.Instrument = fmt.Sprintf("own-%s-f%d-%d@upi", tag, f, len(users))
			if r.Float64() < 0.5 {
				s.Instrument = payer
			}
			// a relative, but one in four married in or is a friend: another surname
			kin := surname
			if r.IntN(4) == 0 {
				kin = ""
			}
			s.Passengers = append(s.Passengers, Passenger{Name: name(kin), Age: 18 + r.IntN(50), IDType: "AADHAAR", IDRef: ident()})
			if forElders < 2 && r.Float64() < 0.3+0.2*float64(size-3) { // relatives booking for the grandparents
				s.Passengers = append(s.Passengers, elders...)
				forElders++
			}
			users = append(users, u)
		}
	}
	for i := range p.Honest {
		u := genUser{ring: -1, family: -1, login: honestLogin(), created: opens.Add(-time.Duration(1+r.IntN(3000)) * 24 * time.Hour), verified: r.IntN(5) > 1}
		s := &u.sig
		s.DeviceID = fmt.Sprintf("dev-%s-h%d", tag, i)
		s.IP, s.HeldAt, s.SolveMS, s.Attested = ispIP(), honestHold(), 1500+r.IntN(7000), r.IntN(10) < 7
		s.Instrument = fmt.Sprintf("own-%s-h%d@upi", tag, i)
		for range 1 + r.IntN(3) {
			s.Passengers = append(s.Passengers, Passenger{Name: name(""), Age: 5 + r.IntN(70), IDType: "AADHAAR", IDRef: ident()})
		}
		users = append(users, u)
	}

	// The train and shard the window sells.
	if _, err := q.Exec(ctx, `INSERT INTO trains (number, name, superfast, departs_at) VALUES ('99001', 'Abuse Test Express', true, '16:00')
		ON CONFLICT (number) DO NOTHING`); err != nil {
		return g, fmt.Errorf("generate train: %w", err)
	}
	// A shard of its own for this window: the shard is what ties a hold to
	// its window, so two windows must not share one (same journey date,
	// different opening: take the next class).
	journey := opens.In(india.IST).AddDate(0, 0, 1).Format(time.DateOnly)
	for _, class := range []string{"3A", "2A", "1A", "3E", "SL", "CC", "EC", "2S"} {
		err := q.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO inventory_shards (train_number, journey_date, class, quota, total_berths, legs, window_opens_at, window_closes_at)
				VALUES ('99001', $1::date, $2, 'TQ', 64, 1, $3::timestamptz, $3::timestamptz + interval '1 hour')
				ON CONFLICT (train_number, journey_date, class, quota) DO NOTHING RETURNING id)
			SELECT id FROM ins
			UNION ALL
			SELECT id FROM inventory_shards WHERE train_number = '99001' AND journey_date = $1::date AND class = $2
				AND quota = 'TQ' AND window_opens_at = $3::timestamptz`, journey, class, opens).Scan(&g.ShardID)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return g, fmt.Errorf("generate shard: %w", err)
		}
	}
	if g.ShardID == 0 {
		return g, fmt.Errorf("generate shard: every class of %s is taken by other windows", journey)
	}

	// Accounts in one statement; ids come back by login.
	ls := make([]string, len(users))
	cs := make([]time.Time, len(users))
	vs := make([]bool, len(users))
	for i, u := range users {
		ls[i], cs[i], vs[i] = u.login, u.created, u.verified
	}
	rows, err := q.Query(ctx, `
		INSERT INTO users (login, password_hash, created_at, id_verification_status, verified_at)
		SELECT l, 'generated-no-login', c, CASE WHEN v THEN 'VERIFIED' ELSE 'UNVERIFIED' END, CASE WHEN v THEN c END
		FROM unnest($1::text[], $2::timestamptz[], $3::bool[]) AS t(l, c, v)
		RETURNING id, login`, ls, cs, vs)
	if err != nil {
		return g, fmt.Errorf("generate users: %w", err)
	}
	ids := make(map[string]int64, len(users))
	for rows.Next() {
		var id int64
		var l string
		if err := rows.Scan(&id, &l); err != nil {
			rows.Close()
			return g, fmt.Errorf("generate users: %w", err)
		}
		ids[l] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return g, fmt.Errorf("generate users: %w", err)
	}
	sigs := make([]Signal, 0, len(users))
	for _, u := range users {
		id := ids[u.login]
		switch {
		case u.ring >= 0:
			g.Ring[id] = u.ring
		case u.family >= 0:
			g.Family[id] = u.family
		default:
			g.Honest = append(g.Honest, id)
		}
		s := u.sig
		s.HoldID, s.UserID, s.ShardID = uuid.New(), id, g.ShardID
		sigs = append(sigs, s)
		if len(sigs) == maxBatch {
			if err := rec.Record(ctx, q, sigs); err != nil {
				return g, err
			}
			sigs = sigs[:0]
		}
	}
	if err := rec.Record(ctx, q, sigs); err != nil {
		return g, err
	}
	return g, nil
}
