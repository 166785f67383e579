package fraud

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	// WithinLimits plans the sharing within the live limits (a device and
	// a customer on two accounts, a UPI address on three), as it must be
	// to go through the API, where past them a ring is refused and falls
	// back on its own. Its scripts still try customers past the passenger
	// limit first (Account.Attempt): refused, and recorded as such. Without
	// it (the direct path's tests) rings and families share as much as
	// they draw: more links than the live path lets a ring make.
	WithinLimits bool
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

// Account is one account of a planned population and what it does in the
// window.
type Account struct {
	Login   string
	Created time.Time
	// Verified is the direct path's: through the API every account
	// verifies its phone first, as Tatkal needs.
	Verified bool
	Phone    string // its own mobile number: ten digits, unique in the plan
	Ring     int    // -1 if none
	Family   int    // -1 if none
	// Signal is what its hold shows: DeviceID (the device it binds), IP,
	// SolveMS, HeldAt, Passengers, and Instrument, how it pays, spelt
	// "upi:<address>" or "card:<number>".
	Signal Signal
	// Attempt, within the live limits, is what the account tries first at
	// its moment: passengers of whom one is already on two other accounts'
	// holds, as a tout's script books the customers it was given. The
	// passenger limit refuses it (the uniform answer) and the account then
	// holds Signal.Passengers, its own. Empty for most accounts.
	Attempt []Passenger
}

// AttemptLead is how long before its hold a planned refused attempt is
// made on the direct path (through the API the hold follows the refusal).
const AttemptLead = 30 * time.Millisecond

// attemptMargin is how much earlier than an attempt both holders of its
// refused passenger must hold, so that through the API, at twice real
// speed and under load, their holds are durable before it arrives.
const attemptMargin = 1500 * time.Millisecond

// Plan is a population's accounts, before anything is written.
type Plan struct {
	OpensAt  time.Time
	Accounts []Account
}

// Who says who is who, given the accounts' ids by login.
func (pl Plan) Who(ids map[string]int64) Generated {
	g := Generated{OpensAt: pl.OpensAt, Ring: map[int64]int{}, Family: map[int64]int{}}
	for _, a := range pl.Accounts {
		id, ok := ids[a.Login]
		switch {
		case !ok:
		case a.Ring >= 0:
			g.Ring[id] = a.Ring
		case a.Family >= 0:
			g.Family[id] = a.Family
		default:
			g.Honest = append(g.Honest, id)
		}
	}
	return g
}

// The live limits a population is planned within, as a tout's script
// learns them: what they refuse never becomes a signal, so a ring or a
// family that shares more than this falls back on its own device, address
// or customers. admission.AccountsPerDevice's default, MaxAccountsPerInstrument
// (UPI addresses; cards are not counted live) and Rules.PassengerAccounts.
const (
	planAccountsPerDevice    = 2
	planAccountsPerUPI       = 3
	planAccountsPerPassenger = 2
)

// PlanPopulation draws a population from p.Seed: the same seed, the same
// accounts, devices, addresses, instruments, passengers and timings.
func PlanPopulation(p Population) (Plan, error) {
	switch {
	case p.Rings < 0 || p.Rings > maxRings, p.RingSize < 0 || p.RingSize > maxRingSize,
		p.Families < 0 || p.Families > maxFamilies, p.Honest < 0 || p.Honest > maxHonest:
		return Plan{}, fmt.Errorf("%w: population out of bounds (rings ≤ %d of ≤ %d, families ≤ %d, honest ≤ %d)",
			ErrInvalid, maxRings, maxRingSize, maxFamilies, maxHonest)
	}
	r := rand.New(rand.NewPCG(p.Seed, 0x7a75a1))
	opens := p.OpensAt
	if opens.IsZero() {
		now := time.Now().In(india.IST)
		opens = time.Date(now.Year(), now.Month(), now.Day()+1, 10, 0, 0, 0, india.IST)
	}
	tag := strconv.FormatUint(p.Seed, 36) + strconv.FormatInt(opens.Unix()%100000, 36)
	pl := Plan{OpensAt: opens}

	logins := map[string]bool{}
	uniqueLogin := func(l string) string {
		for logins[l] {
			l += strconv.Itoa(r.IntN(10))
		}
		logins[l] = true
		return l
	}
	phones := map[string]bool{}
	phone := func() string {
		for {
			ph := fmt.Sprintf("%d%09d", 6+r.IntN(4), r.IntN(1_000_000_000))
			if !phones[ph] {
				phones[ph] = true
				return ph
			}
		}
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
	// An Aadhaar number's shape: 12 digits, the first 2-9.
	ident := func() string { return fmt.Sprintf("%d%011d", 2+r.IntN(8), r.Int64N(100_000_000_000)) }
	card := func() string { return "card:" + luhnCard(r) }
	// used counts the accounts on each shared device, address and
	// passenger, so none passes its live limit.
	used := map[string]int{}
	share := func(key string, limit int) bool {
		if p.WithinLimits && used[key] >= limit {
			return false
		}
		used[key]++
		return true
	}
	account := func(ring, family int, login string, created time.Time, verified bool) Account {
		return Account{Login: login, Created: created, Verified: verified, Phone: phone(), Ring: ring, Family: family}
	}

	for k := range p.Rings {
		// Rings are not equally careless. Each has a discipline d in
		// [0.35, 0.85]: the share of its accounts on the ring's devices, in
		// its burst, on its proxy; fewer pay with the ring's instruments
		// (d-0.1), have sequential logins (d-0.2) or the scripted solve
		// time (d-0.3, jittered by a few ms). Its customers come from a
		// pool twice the ring's size, so accounts share only some passengers,
		// and its burst is jittered over 2-30 ms, not all within a few.
		// Devices, UPI addresses and customers are shared up to the live
		// limits (two accounts a device and a customer, three an address):
		// past them the ring's script falls back on the account's own.
		d := 0.35 + 0.5*r.Float64()
		stem := fmt.Sprintf("tk%s%c%c", tag, 'a'+rune(r.IntN(26)), 'a'+rune(r.IntN(26)))
		devices := make([]string, (p.RingSize+2)/3)
		if p.WithinLimits {
			devices = make([]string, (p.RingSize+1)/2)
		}
		for i := range devices {
			devices[i] = fmt.Sprintf("ringdev-%s-%d-%d", tag, k, i)
		}
		instruments := []string{card()}
		for i := range max(1, map[bool]int{true: (p.RingSize + 2) / 3}[p.WithinLimits]) {
			instruments = append(instruments, fmt.Sprintf("upi:tout%d.%d.%s@upi", k, i, tag))
		}
		proxy := [3]byte{103, byte(k / 200), byte(k % 200)}
		customers := make([]Passenger, 2*p.RingSize)
		for i := range customers {
			customers[i] = Passenger{Name: name(""), Age: 18 + r.IntN(50), IDType: "AADHAAR", IDRef: ident()}
		}
		burst := time.Duration(r.IntN(1500)) * time.Millisecond
		spread := 2000 + r.IntN(28000) // µs
		solve := 700 + r.IntN(300)
		first := len(pl.Accounts)
		wants := make([]int, p.RingSize)
		perms := make([][]int, p.RingSize)
		for i := range p.RingSize {
			login := ""
			if r.Float64() < d-0.2 {
				login = uniqueLogin(fmt.Sprintf("%s%03d", stem, i+1))
			} else {
				login = honestLogin()
			}
			u := account(k, -1, login, opens.Add(-time.Duration(1+r.IntN(20*24))*time.Hour), r.IntN(3) == 0)
			s := &u.Signal
			s.DeviceID = fmt.Sprintf("dev-%s-r%d-%d", tag, k, i)
			if dev := devices[i%len(devices)]; r.Float64() < d && share(dev, planAccountsPerDevice) {
				s.DeviceID = dev
			}
			s.IP = ispIP()
			if r.Float64() < d {
				s.IP = netip.AddrFrom4([4]byte{proxy[0], proxy[1], proxy[2], byte(1 + r.IntN(254))})
			}
			s.Instrument = fmt.Sprintf("upi:own-%s-r%d-%d@upi", tag, k, i)
			if r.Float64() < d-0.1 {
				if inst := instruments[r.IntN(len(instruments))]; !strings.HasPrefix(inst, "upi:") || share(inst, planAccountsPerUPI) {
					s.Instrument = inst
				} else {
					s.Instrument = instruments[0] // the ring's card, which nothing counts
				}
			}
			s.HeldAt = honestHold()
			if r.Float64() < d {
				s.HeldAt = opens.Add(burst + time.Duration(r.IntN(spread))*time.Microsecond)
			}
			s.SolveMS = 1500 + r.IntN(7000)
			if r.Float64() < d-0.3 {
				s.SolveMS = solve + r.IntN(4)
			}
			wants[i], perms[i] = 2+r.IntN(3), r.Perm(len(customers))
			pl.Accounts = append(pl.Accounts, u)
		}
		// Customers in the order the ring's holds land: the third account
		// to reach for a customer is refused by the passenger limit.
		ring := pl.Accounts[first:]
		order := make([]int, len(ring))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return ring[order[a]].Signal.HeldAt.Before(ring[order[b]].Signal.HeldAt) })
		holders := make([][]time.Time, len(customers)) // when each customer's accounts held
		for _, i := range order {
			u := &ring[i]
			s := &u.Signal
			want, perm := wants[i], perms[i]
			if p.WithinLimits {
				// The script tries the customers it was given; one already on
				// two earlier holds makes the live path refuse the attempt.
				// Only a customer whose second hold came well before counts: a
				// closer one might not be durable yet when the attempt arrives.
				refused := false
				for _, j := range perm[:want] {
					n := len(holders[j])
					refused = refused || n >= planAccountsPerPassenger && holders[j][n-1].Before(s.HeldAt.Add(-attemptMargin))
				}
				if refused {
					for _, j := range perm[:want] {
						u.Attempt = append(u.Attempt, customers[j])
					}
				}
			}
			for _, j := range perm {
				if len(s.Passengers) == want {
					break
				}
				if !p.WithinLimits || len(holders[j]) < planAccountsPerPassenger {
					s.Passengers = append(s.Passengers, customers[j])
					holders[j] = append(holders[j], s.HeldAt)
				}
			}
			if len(s.Passengers) == 0 { // every customer taken twice: a new one
				s.Passengers = append(s.Passengers, Passenger{Name: name(""), Age: 18 + r.IntN(50), IDType: "AADHAAR", IDRef: ident()})
			}
		}
	}
	for f := range p.Families {
		// Most households are two or three accounts on the home device and
		// a phone; one in six is a joint family of four or five, as large
		// as a small ring, on the home device and two phones. Half pay
		// with the household's UPI address; up to two of them (the live
		// limit's number) also book the same grandparent, and in a joint
		// family both grandparents. A device takes two accounts and the
		// address three (the live limits): past them, one's own.
		surname := surnames[r.IntN(len(surnames))]
		size := 2 + r.IntN(2)
		if r.IntN(6) == 0 {
			size = 4 + r.IntN(2)
		}
		devices := []string{fmt.Sprintf("famdev-%s-%d", tag, f)}
		if size >= 4 || (p.WithinLimits && size == 3) {
			devices = append(devices, fmt.Sprintf("famdev-%s-%d-phone", tag, f))
		}
		if p.WithinLimits && size >= 4 {
			devices = append(devices, fmt.Sprintf("famdev-%s-%d-phone2", tag, f))
		}
		home := ispIP()
		payer := fmt.Sprintf("upi:fam%d.%s@upi", f, tag)
		elders := []Passenger{{Name: name(surname), Age: 60 + r.IntN(25), IDType: "AADHAAR", IDRef: ident()}}
		if size >= 4 {
			elders = append(elders, Passenger{Name: name(surname), Age: 60 + r.IntN(25), IDType: "AADHAAR", IDRef: ident()})
		}
		forElders := 0
		var elderHolds []time.Time
		first := len(pl.Accounts)
		for j := range size {
			u := account(-1, f, honestLogin(), opens.Add(-time.Duration(30+r.IntN(3000))*24*time.Hour), r.IntN(3) > 0)
			s := &u.Signal
			s.DeviceID, s.IP, s.HeldAt, s.SolveMS, s.Attested = devices[r.IntN(len(devices))], home, honestHold(), 1500+r.IntN(7000), true
			if !share(s.DeviceID, planAccountsPerDevice) {
				s.DeviceID = fmt.Sprintf("famdev-%s-%d-own%d", tag, f, j)
			}
			s.Instrument = fmt.Sprintf("upi:own-%s-f%d-%d@upi", tag, f, len(pl.Accounts))
			if r.Float64() < 0.5 && share(payer, planAccountsPerUPI) {
				s.Instrument = payer
			}
			// a relative, but one in four married in or is a friend: another surname
			kin := surname
			if r.IntN(4) == 0 {
				kin = ""
			}
			s.Passengers = append(s.Passengers, Passenger{Name: name(kin), Age: 18 + r.IntN(50), IDType: "AADHAAR", IDRef: ident()})
			if forElders < planAccountsPerPassenger && r.Float64() < 0.3+0.2*float64(size-3) { // relatives booking for the grandparents
				s.Passengers = append(s.Passengers, elders...)
				elderHolds = append(elderHolds, s.HeldAt)
				forElders++
			}
			pl.Accounts = append(pl.Accounts, u)
		}
		if p.WithinLimits && forElders == planAccountsPerPassenger {
			// Within the live limits a third relative may try to book the
			// grandparents too, be refused, and book only their own: a
			// family leaves refused attempts as a ring does.
			for j := range pl.Accounts[first:] {
				u := &pl.Accounts[first+j]
				late := u.Signal.HeldAt.Add(-attemptMargin)
				if len(u.Signal.Passengers) == 1 && elderHolds[0].Before(late) && elderHolds[1].Before(late) && r.IntN(2) == 0 {
					u.Attempt = append(slices.Clone(u.Signal.Passengers), elders...)
				}
			}
		}
	}
	for i := range p.Honest {
		u := account(-1, -1, honestLogin(), opens.Add(-time.Duration(1+r.IntN(3000))*24*time.Hour), r.IntN(5) > 1)
		s := &u.Signal
		s.DeviceID = fmt.Sprintf("dev-%s-h%d", tag, i)
		s.IP, s.HeldAt, s.SolveMS, s.Attested = ispIP(), honestHold(), 1500+r.IntN(7000), r.IntN(10) < 7
		s.Instrument = fmt.Sprintf("upi:own-%s-h%d@upi", tag, i)
		if r.IntN(10) < 3 {
			s.Instrument = card()
		}
		for range 1 + r.IntN(3) {
			s.Passengers = append(s.Passengers, Passenger{Name: name(""), Age: 5 + r.IntN(70), IDType: "AADHAAR", IDRef: ident()})
		}
		pl.Accounts = append(pl.Accounts, u)
	}
	return pl, nil
}

// luhnCard draws a 16-digit card number that passes the Luhn check.
func luhnCard(r *rand.Rand) string {
	d := make([]byte, 16)
	d[0] = '4'
	for i := 1; i < 15; i++ {
		d[i] = byte('0' + r.IntN(10))
	}
	sum := 0
	for i := 14; i >= 0; i-- { // the check digit is position 15; double every second from its left
		n := int(d[i] - '0')
		if (14-i)%2 == 0 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	d[15] = byte('0' + (10-sum%10)%10)
	return string(d)
}

// Generate writes the population's accounts, a Tatkal shard for its
// window and one signal per account (through Recorder.Record, as the live
// path's group commit does), and says who is who: the direct path, for the
// clustering's tests and its large measure. The rehearsal lab drives the
// same plan through the HTTP API (booking/lab/rehearse.Abuse).
func Generate(ctx context.Context, q Querier, rec Recorder, p Population) (Generated, error) {
	pl, err := PlanPopulation(p)
	if err != nil {
		return Generated{}, err
	}
	opens := pl.OpensAt
	g := Generated{OpensAt: opens}

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

	ids, err := CreateAccounts(ctx, q, pl, "generated-no-login", false)
	if err != nil {
		return g, err
	}
	who := pl.Who(ids)
	who.ShardID = g.ShardID
	sigs := make([]Signal, 0, min(len(pl.Accounts), maxBatch))
	for _, u := range pl.Accounts {
		s := u.Signal
		s.HoldID, s.UserID, s.ShardID = uuid.New(), ids[u.Login], g.ShardID
		sigs = append(sigs, s)
		if len(sigs) == maxBatch {
			if err := rec.Record(ctx, q, sigs); err != nil {
				return who, err
			}
			sigs = sigs[:0]
		}
	}
	if err := rec.Record(ctx, q, sigs); err != nil {
		return who, err
	}
	// The attempts the passenger limit refused, as the group commit queues them.
	var tried []Signal
	for _, u := range pl.Accounts {
		if len(u.Attempt) == 0 {
			continue
		}
		s := u.Signal
		s.HoldID, s.UserID, s.ShardID = uuid.New(), ids[u.Login], g.ShardID
		s.HeldAt, s.Passengers, s.Instrument = s.HeldAt.Add(-AttemptLead), u.Attempt, ""
		tried = append(tried, s)
	}
	for len(tried) > 0 {
		n := min(len(tried), maxBatch)
		if err := rec.RecordRefused(ctx, q, tried[:n]); err != nil {
			return who, err
		}
		tried = tried[n:]
	}
	return who, nil
}

// CreateAccounts inserts the plan's accounts in one statement, with
// passwordHash, and returns their ids by login. unverified leaves every
// account to verify itself (the API path); otherwise each is as planned.
func CreateAccounts(ctx context.Context, q Querier, pl Plan, passwordHash string, unverified bool) (map[string]int64, error) {
	n := len(pl.Accounts)
	ls, cs, vs := make([]string, n), make([]time.Time, n), make([]bool, n)
	for i, u := range pl.Accounts {
		ls[i], cs[i], vs[i] = u.Login, u.Created, u.Verified && !unverified
	}
	rows, err := q.Query(ctx, `
		INSERT INTO users (login, password_hash, created_at, id_verification_status, verified_at)
		SELECT l, $4, c, CASE WHEN v THEN 'VERIFIED' ELSE 'UNVERIFIED' END, CASE WHEN v THEN c END
		FROM unnest($1::text[], $2::timestamptz[], $3::bool[]) AS t(l, c, v)
		RETURNING id, login`, ls, cs, vs, passwordHash)
	if err != nil {
		return nil, fmt.Errorf("generate users: %w", err)
	}
	ids := make(map[string]int64, n)
	for rows.Next() {
		var id int64
		var l string
		if err := rows.Scan(&id, &l); err != nil {
			rows.Close()
			return nil, fmt.Errorf("generate users: %w", err)
		}
		ids[l] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("generate users: %w", err)
	}
	return ids, nil
}

// Quality is how a clustering run did on a generated population.
type Quality struct {
	RingFound, Rings           int // ring accounts flagged, of all ring accounts
	Flagged, Innocents         int // honest or family accounts flagged, of all of them
	FamilyFlagged, FamilyTotal int
	Signals, Edges             int
	Clusters, FlaggedClusters  int
}

// Measure compares a run's flagged clusters with who is who.
func Measure(res Result, g Generated) Quality {
	q := Quality{Rings: len(g.Ring), Innocents: len(g.Family) + len(g.Honest), FamilyTotal: len(g.Family),
		Signals: res.Signals, Edges: res.Edges, Clusters: len(res.Clusters), FlaggedClusters: res.Flagged()}
	for _, c := range res.Clusters {
		if !c.Flagged {
			continue
		}
		for _, m := range c.Members {
			if _, ring := g.Ring[m]; ring {
				q.RingFound++
				continue
			}
			q.Flagged++
			if _, fam := g.Family[m]; fam {
				q.FamilyFlagged++
			}
		}
	}
	return q
}

// Recall is the share of ring accounts flagged.
func (q Quality) Recall() float64 { return ratio(q.RingFound, q.Rings) }

// InnocentRate is the share of honest or family accounts flagged.
func (q Quality) InnocentRate() float64 { return ratio(q.Flagged, q.Innocents) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// String is the measure's report line.
func (q Quality) String() string {
	precision := "n/a (nothing flagged)"
	if n := q.RingFound + q.Flagged; n > 0 {
		precision = fmt.Sprintf("%d/%d = %.3f", q.RingFound, n, float64(q.RingFound)/float64(n))
	}
	return fmt.Sprintf("%d signals, %d edges, %d clusters (%d flagged)\nring recall %d/%d; honest or family accounts flagged %d/%d (family %d/%d); precision of flagged accounts %s",
		q.Signals, q.Edges, q.Clusters, q.FlaggedClusters, q.RingFound, q.Rings, q.Flagged, q.Innocents, q.FamilyFlagged, q.FamilyTotal, precision)
}
