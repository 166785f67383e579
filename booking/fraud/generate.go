package fraud

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

	// Adversarial shapes (issue 37), planned within the live limits
	// whatever WithinLimits says: rings built not to be caught and honest
	// people who look like rings. Each account is labelled (Account.Shape).
	Adversary Adversary
}

// Adversary counts the adversarial shapes of a population: rings that try
// to beat the detector, and honest look-alikes of every shape a ring has.
type Adversary struct {
	// Evasive rings rotate devices, addresses and instruments per account
	// and fire each customer from two accounts under a retyped name, a
	// different ID document and an age off by one.
	Evasive int
	// OneThing rings share one strong thing only (in turn a card, a bank
	// account, a phone), their customers and devices their own.
	OneThing int
	// Small rings of two and three accounts, as the live limits split a
	// ring into.
	Small int
	// SurnameRings book customers who share one common surname, from one
	// shop's address block, to pass as a household.
	SurnameRings int
	// Desks: an office's employees booking themselves with one corporate card.
	Desks int
	// Hostels: students behind one NAT /24, a few booking a friend.
	Hostels int
	// ParentCards: a household paying with a parent's card (sometimes verified on the parent's phone).
	ParentCards int
	// Relatives: an honest account booking one passenger a ring also booked.
	Relatives int
	// BigFamilies: joint families of four to six accounts of a common surname.
	BigFamilies int
}

// AdversarialPopulation is the population the README's figures are
// measured on (issue 37): the classic rings and families, a background of
// honest accounts, and every adversarial shape.
func AdversarialPopulation(seed uint64) Population {
	return Population{Rings: 3, RingSize: 6, Families: 30, Honest: 1200, Seed: seed, WithinLimits: true,
		Adversary: Adversary{Evasive: 3, OneThing: 6, Small: 6, SurnameRings: 2,
			Desks: 2, Hostels: 2, ParentCards: 10, Relatives: 4, BigFamilies: 6}}
}

// Shapes of generated accounts: what each label means is in Adversary.
const (
	ShapeRing        = "ring"         // the classic ring: shared devices, proxy, customers, burst
	ShapeEvasive     = "ring-evasive" // rotating everything, retyped customers
	ShapeRingCard    = "ring-card"    // one card, nothing else
	ShapeRingBank    = "ring-bank"    // one bank account, nothing else
	ShapeRingPhone   = "ring-phone"   // one phone, nothing else
	ShapeRingSmall   = "ring-small"   // two or three accounts
	ShapeRingSurname = "ring-surname" // customers of one common surname
	ShapeHonest      = "honest"
	ShapeFamily      = "family"
	ShapeDesk        = "desk"
	ShapeHostel      = "hostel"
	ShapeParentCard  = "parent-card"
	ShapeRelative    = "relative"
	ShapeBigFamily   = "big-family"
)

// Generated is who is who in a generated population.
type Generated struct {
	OpensAt time.Time
	ShardID int64
	Ring    map[int64]int // account -> ring number
	Family  map[int64]int // account -> family number
	Honest  []int64
	Shape   map[int64]string // account -> its shape (Shape*)
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
	Phone    string // its mobile number: ten digits, its own unless its shape shares one
	Ring     int    // -1 if none
	Family   int    // -1 if none
	Shape    string // what it is (Shape*)
	// Saved are the passengers on its master list and SavedAt when they
	// were saved: an honest account's own people, long before; a tout's
	// customers, the night before.
	Saved   []Passenger
	SavedAt time.Time
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
	g := Generated{OpensAt: pl.OpensAt, Ring: map[int64]int{}, Family: map[int64]int{}, Shape: map[int64]string{}}
	for _, a := range pl.Accounts {
		id, ok := ids[a.Login]
		if ok {
			g.Shape[id] = a.Shape
		}
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
		p.Families < 0 || p.Families > maxFamilies, p.Honest < 0 || p.Honest > maxHonest, !p.Adversary.valid():
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
			surname = drawSurname(r)
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
		shape := ShapeHonest
		switch {
		case ring >= 0:
			shape = ShapeRing
		case family >= 0:
			shape = ShapeFamily
		}
		return Account{Login: login, Created: created, Verified: verified, Phone: phone(), Ring: ring, Family: family, Shape: shape}
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
		surname := drawSurname(r)
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
			if r.IntN(10) < 7 { // themselves, and the grandparents they book
				u.Saved, u.SavedAt = s.Passengers, u.Created.Add(48*time.Hour)
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
		if r.IntN(10) < 6 { // most keep themselves on their master list
			u.Saved, u.SavedAt = s.Passengers[:1], u.Created.Add(24*time.Hour)
		}
		pl.Accounts = append(pl.Accounts, u)
	}
	planAdversary(r, p, &pl, planKit{opens: opens, tag: tag, phone: phone, name: name, ispIP: ispIP, login: honestLogin,
		hold: honestHold, ident: ident, card: card, share: share, account: account})
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
	if err := savePlanned(ctx, q, rec, pl, ids); err != nil {
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

// savePlanned writes what the API path would have made the accounts do
// before the window: their verified phones (keyed-hashed, as the OTP
// check stores them) and their saved passengers.
func savePlanned(ctx context.Context, q Querier, rec Recorder, pl Plan, ids map[string]int64) error {
	var users []int64
	var phones []string
	var pu []int64
	var pname, pref, ptype []string
	var page []int32
	var pat []time.Time
	for _, u := range pl.Accounts {
		id := ids[u.Login]
		if h := rec.PhoneHash(u.Phone); h != "" && u.Verified {
			users, phones = append(users, id), append(phones, h)
		}
		for _, ps := range u.Saved {
			pu, pname, page, ptype, pref, pat = append(pu, id), append(pname, ps.Name), append(page, int32(ps.Age)),
				append(ptype, ps.IDType), append(pref, ps.IDRef), append(pat, u.SavedAt)
		}
	}
	if _, err := q.Exec(ctx, `UPDATE users u SET phone_hash = v.h FROM unnest($1::bigint[], $2::text[]) AS v(id, h) WHERE u.id = v.id`,
		users, phones); err != nil {
		return fmt.Errorf("generate phones: %w", err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO passenger_master (user_id, name, age, gender, id_type, id_ref, validated, created_at)
		SELECT u, n, a, 'F', t, r, true, c FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $6::timestamptz[]) AS v(u, n, a, t, r, c)`,
		pu, pname, page, ptype, pref, pat); err != nil {
		return fmt.Errorf("generate saved passengers: %w", err)
	}
	return nil
}

// Quality is how a clustering run did on a generated population.
type Quality struct {
	RingFound, Rings           int // ring accounts flagged, of all ring accounts
	Flagged, Innocents         int // honest or family accounts flagged, of all of them
	FamilyFlagged, FamilyTotal int
	Signals, Edges             int
	Clusters, FlaggedClusters  int
	// ByShape: accounts flagged and in all, per shape (Generated.Shape).
	ByShape map[string][2]int
}

// Measure compares a run's flagged clusters with who is who.
func Measure(res Result, g Generated) Quality {
	q := Quality{Rings: len(g.Ring), Innocents: len(g.Family) + len(g.Honest), FamilyTotal: len(g.Family),
		Signals: res.Signals, Edges: res.Edges, Clusters: len(res.Clusters), FlaggedClusters: res.Flagged()}
	q.ByShape = map[string][2]int{}
	for _, sh := range g.Shape {
		n := q.ByShape[sh]
		n[1]++
		q.ByShape[sh] = n
	}
	for _, c := range res.Clusters {
		for _, m := range c.FlaggedMembers() {
			if sh, ok := g.Shape[m]; ok {
				n := q.ByShape[sh]
				n[0]++
				q.ByShape[sh] = n
			}
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
	shapes := slices.Sorted(maps.Keys(q.ByShape))
	var by []string
	for _, sh := range shapes {
		by = append(by, fmt.Sprintf("%s %d/%d", sh, q.ByShape[sh][0], q.ByShape[sh][1]))
	}
	return fmt.Sprintf("%d signals, %d edges, %d clusters (%d flagged)\nring recall %d/%d; honest or family accounts flagged %d/%d (family %d/%d); precision of flagged accounts %s\nflagged by shape: %s",
		q.Signals, q.Edges, q.Clusters, q.FlaggedClusters, q.RingFound, q.Rings, q.Flagged, q.Innocents, q.FamilyFlagged, q.FamilyTotal, precision, strings.Join(by, ", "))
}

// planKit is what PlanPopulation draws with, handed to planAdversary.
type planKit struct {
	opens   time.Time
	tag     string
	phone   func() string
	name    func(surname string) string
	ispIP   func() netip.Addr
	login   func() string
	hold    func() time.Time
	ident   func() string
	card    func() string
	share   func(key string, limit int) bool
	account func(ring, family int, login string, created time.Time, verified bool) Account
}

func (a Adversary) valid() bool {
	for _, n := range []int{a.Evasive, a.OneThing, a.Small, a.SurnameRings, a.Desks, a.Hostels, a.ParentCards, a.Relatives, a.BigFamilies} {
		if n < 0 || n > maxRings {
			return false
		}
	}
	return true
}

// rareSurnames are the long tail: most Indians carry a surname few others
// in one window carry.
var rareSurnames = strings.Fields(`Agarwal Ahluwalia Anand Apte Arora Awasthi Bajaj Bakshi Banerjee Barua Basu Bhat Bhatia
	Bhattacharya Bhonsle Biswas Borah Chakraborty Chandra Chatterjee Chaudhary Chopra Dalal Dasgupta Datta Deshmukh Deshpande
	Dhillon Dixit Dubey Dutta Gadgil Gaikwad Ganguly Garg Goswami Grewal Hegde Hooda Jadhav Jha Kamath Kapoor Karnik Kashyap
	Khanna Kohli Krishnan Kulkarni Lal Madan Mahajan Malhotra Mane Mathur Mehra Mukherjee Naidu Namboodiri Narang Nayak Oberoi
	Padmanabhan Pandey Pandit Parekh Pathak Pawar Phadke Prasad Puri Rajan Rajput Ranade Rastogi Rathore Saini Saxena Sen Sengupta
	Sethi Shetty Shinde Shukla Sinha Sodhi Srinivasan Subramanian Suri Tandon Thakur Tiwari Trivedi Upadhyay Vaidya Varma Vyas
	Wadhwa Walia Chawla Bhalla Luthra Sachdeva Talwar Ahuja Kaul Raina Dhar Handa Chadha Kalra Sabharwal Sood Goyal Mittal Bansal
	Singhal Jindal Khurana Bedi Marwah Nanda`)

// drawSurname draws as a window's passengers are named: one in five a
// very common surname, three in ten one of the frequent ones, half from
// the long tail.
func drawSurname(r *rand.Rand) string {
	switch x := r.IntN(10); {
	case x < 2:
		return commonSurnames[r.IntN(len(commonSurnames))]
	case x < 5:
		return surnames[r.IntN(len(surnames))]
	}
	return rareSurnames[r.IntN(len(rareSurnames))]
}

// commonSurnames are the surnames millions of unrelated Indians carry: a
// household is not shown by them alone.
var commonSurnames = []string{"Kumar", "Singh", "Sharma", "Yadav", "Patel", "Das"}

// retype is how a tout's script spells a customer again so the exact
// passenger limit does not know them: a letter doubled or dropped, a vowel
// spelt long, sh for s, the names swapped, the age one off, another ID
// document. Sometimes the name is left as it was and only the ID changes.
func retype(r *rand.Rand, p Passenger, ident func() string) Passenger {
	words := strings.Fields(p.Name)
	w := r.IntN(len(words))
	word := words[w]
	switch r.IntN(7) {
	case 0: // a vowel spelt long
		for i, c := range word {
			if i > 0 && strings.ContainsRune("aeiou", c) {
				long := map[rune]string{'a': "aa", 'e': "ee", 'i': "ee", 'o': "oo", 'u': "oo"}[c]
				word = word[:i] + long + word[i+1:]
				break
			}
		}
	case 1: // a letter doubled
		if len(word) > 2 {
			i := 1 + r.IntN(len(word)-2)
			word = word[:i] + word[i:i+1] + word[i:]
		}
	case 2: // a vowel dropped
		for i, c := range word {
			if i > 0 && strings.ContainsRune("aeiou", c) {
				word = word[:i] + word[i+1:]
				break
			}
		}
	case 3: // sh for s and back, w for v
		switch {
		case strings.Contains(word, "sh"):
			word = strings.Replace(word, "sh", "s", 1)
		case strings.Contains(word, "s"):
			word = strings.Replace(word, "s", "sh", 1)
		case strings.Contains(word, "v"):
			word = strings.Replace(word, "v", "w", 1)
		}
	case 4: // the names swapped
		slices.Reverse(words)
		w = -1
	case 5: // upper case and a stray dot
		word = strings.ToUpper(word) + "."
	}
	if w >= 0 {
		words[w] = word
	}
	out := Passenger{Name: strings.Join(words, " "), Age: p.Age, IDType: "AADHAAR", IDRef: ident()}
	if r.IntN(3) > 0 {
		out.Age = max(1, p.Age+[]int{-1, 1}[r.IntN(2)])
	}
	if r.IntN(2) == 0 {
		out.IDType, out.IDRef = "PAN", panRef(r)
	}
	return out
}

// panRef draws a PAN's shape: five letters, four digits, a letter.
func panRef(r *rand.Rand) string {
	b := make([]byte, 10)
	for i := range b {
		switch {
		case i >= 5 && i < 9:
			b[i] = byte('0' + r.IntN(10))
		default:
			b[i] = byte('A' + r.IntN(26))
		}
	}
	return string(b)
}

// planAdversary appends the adversarial shapes (Adversary) to pl: rings
// numbered after the classic ones, families after theirs, every account
// labelled. The sharing stays within the live limits of today (a device
// on two accounts, a UPI address on three, a passenger's exact name or ID
// on two), as a ring learns them; cards and phones are not counted live.
func planAdversary(r *rand.Rand, p Population, pl *Plan, k planKit) {
	a := p.Adversary
	ring := p.Rings
	family := p.Families
	adult := func(surname string) Passenger {
		return Passenger{Name: k.name(surname), Age: 18 + r.IntN(55), IDType: "AADHAAR", IDRef: k.ident()}
	}
	// a party of customers: mostly one family travelling together
	party := func(n int) []Passenger {
		sn := drawSurname(r)
		out := make([]Passenger, n)
		for i := range out {
			if r.IntN(4) == 0 {
				out[i] = adult("")
			} else {
				out[i] = adult(sn)
			}
		}
		return out
	}
	old := func() time.Time { return k.opens.Add(-time.Duration(90+r.IntN(2500)) * 24 * time.Hour) }
	// half a ring's accounts are new, half bought aged
	young := func() time.Time {
		if r.IntN(2) == 0 {
			return k.opens.Add(-time.Duration(60+r.IntN(700)) * 24 * time.Hour)
		}
		return k.opens.Add(-time.Duration(3+r.IntN(60)) * 24 * time.Hour)
	}
	// a script that waits a human moment: not in a burst, solve times of a person
	touted := func(s *Signal) { s.HeldAt, s.SolveMS = k.hold(), 1500+r.IntN(7000) }
	own := func(u *Account, ring bool) {
		s := &u.Signal
		s.DeviceID = fmt.Sprintf("dev-%s-%s-%d", k.tag, u.Shape, len(pl.Accounts))
		s.IP, s.Attested = k.ispIP(), r.IntN(10) < 7
		s.Instrument = fmt.Sprintf("upi:own-%s-%d@upi", k.tag, len(pl.Accounts))
		if ring {
			touted(s)
		} else {
			s.HeldAt, s.SolveMS = k.hold(), 1500+r.IntN(7000)
		}
	}
	newRing := func(shape string) Account {
		u := k.account(ring, -1, k.login(), young(), true)
		u.Shape = shape
		own(&u, true)
		return u
	}
	newHonest := func(shape string, fam int) Account {
		u := k.account(-1, fam, k.login(), old(), r.IntN(4) > 0)
		u.Shape = shape
		own(&u, false)
		return u
	}
	saveSelf := func(u *Account) {
		u.Saved, u.SavedAt = u.Signal.Passengers[:1], u.Created.Add(time.Duration(1+r.IntN(200))*24*time.Hour)
		if u.SavedAt.After(k.opens) {
			u.SavedAt = u.Created
		}
	}

	for range a.Evasive {
		// Each account holds two small parties; party i rides accounts i
		// and i+1 around the ring, retyped on the second, so every account
		// meets two others through a customer and through nothing else.
		n := 4 + r.IntN(3)
		parties := make([][]Passenger, n)
		for i := range parties {
			parties[i] = party(1 + r.IntN(2))
		}
		for i := range n {
			u := newRing(ShapeEvasive)
			if r.IntN(3) == 0 {
				u.Signal.Instrument = k.card()
			}
			u.Signal.Passengers = append(slices.Clone(parties[i]), retypeAll(r, parties[(i+n-1)%n], k.ident)...)
			// the customers saved on the account the night before, as the script needs them
			u.Saved, u.SavedAt = u.Signal.Passengers, k.opens.Add(-14*time.Hour)
			pl.Accounts = append(pl.Accounts, u)
		}
		ring++
	}
	for i := range a.OneThing {
		// One strong thing shared by every account, in turn a card, a bank
		// account, a phone (the per-person cap lets a phone's two verified
		// accounts hold); customers of their own.
		shape := []string{ShapeRingCard, ShapeRingBank, ShapeRingPhone}[i%3]
		n := 3 + r.IntN(3)
		if shape == ShapeRingPhone {
			n = 2
		}
		thing := map[string]string{ShapeRingCard: k.card(), ShapeRingBank: fmt.Sprintf("nb:nba_%s_%d", k.tag, i), ShapeRingPhone: k.phone()}[shape]
		for range n {
			u := newRing(shape)
			u.Signal.Passengers = party(2 + r.IntN(3))
			if shape == ShapeRingPhone {
				u.Phone = thing
			} else {
				u.Signal.Instrument = thing
			}
			pl.Accounts = append(pl.Accounts, u)
		}
		ring++
	}
	for i := range a.Small {
		// Two or three accounts: a device on two, the ring's UPI address,
		// and a customer booked twice.
		n := 2 + i%2
		dev := fmt.Sprintf("dev-%s-small-%d", k.tag, i)
		upi := fmt.Sprintf("upi:tout.small%d.%s@upi", i, k.tag)
		shared := adult("")
		for j := range n {
			u := newRing(ShapeRingSmall)
			u.Signal.Passengers = party(1 + r.IntN(3))
			if j < 2 {
				u.Signal.DeviceID = dev
				u.Signal.Passengers = append(u.Signal.Passengers, shared)
			}
			if j > 0 && k.share(upi, planAccountsPerUPI) {
				u.Signal.Instrument = upi
			}
			pl.Accounts = append(pl.Accounts, u)
		}
		ring++
	}
	for i := range a.SurnameRings {
		// A classic ring, but every customer carries one common surname,
		// booked from one shop's address block, the shop's card.
		sn := commonSurnames[i%len(commonSurnames)]
		n := 4 + r.IntN(3)
		shop := [3]byte{49, 2 + byte(i%50), byte(r.IntN(200))}
		dev := fmt.Sprintf("dev-%s-shop-%d", k.tag, i)
		card := k.card()
		customers := make([]Passenger, 2*n)
		for j := range customers {
			customers[j] = adult(sn)
		}
		used := make([]int, len(customers))
		for j := range n {
			u := newRing(ShapeRingSurname)
			u.Signal.IP = netip.AddrFrom4([4]byte{shop[0], shop[1], shop[2], byte(1 + r.IntN(254))})
			if j < 2 {
				u.Signal.DeviceID = dev
			}
			if r.IntN(2) == 0 {
				u.Signal.Instrument = card
			}
			for _, c := range r.Perm(len(customers))[:2+r.IntN(2)] {
				if used[c] < planAccountsPerPassenger {
					used[c]++
					u.Signal.Passengers = append(u.Signal.Passengers, customers[c])
				}
			}
			if len(u.Signal.Passengers) == 0 {
				u.Signal.Passengers = []Passenger{adult(sn)}
			}
			pl.Accounts = append(pl.Accounts, u)
		}
		ring++
	}
	for i := range a.Desks {
		// An office's travel desk: employees' own old accounts, each
		// booking themselves (now and then a colleague), all paying with
		// the corporate card from the office's /24 in the first seconds.
		n := 6 + r.IntN(7)
		corp := k.card()
		office := [3]byte{14, 1 + byte(i%50), byte(r.IntN(200))}
		for range n {
			u := newHonest(ShapeDesk, -1)
			u.Verified = true
			u.Signal.IP = netip.AddrFrom4([4]byte{office[0], office[1], office[2], byte(1 + r.IntN(254))})
			u.Signal.HeldAt = k.opens.Add(time.Duration(300+r.IntN(6000)) * time.Millisecond)
			u.Signal.Instrument = corp
			u.Signal.Passengers = []Passenger{adult("")}
			if r.IntN(4) == 0 {
				u.Signal.Passengers = append(u.Signal.Passengers, adult(""))
			}
			saveSelf(&u)
			pl.Accounts = append(pl.Accounts, u)
		}
	}
	for i := range a.Hostels {
		// A hostel: students behind one NAT /24, each booking themselves
		// home; one in four also books a friend who books too (the friend's
		// exact name and ID on two accounts, within the limit).
		n := 12 + r.IntN(12)
		nat := [3]byte{117, 1 + byte(i%50), byte(r.IntN(200))}
		first := len(pl.Accounts)
		for range n {
			u := newHonest(ShapeHostel, -1)
			u.Created = k.opens.Add(-time.Duration(30+r.IntN(1200)) * 24 * time.Hour)
			u.Signal.IP = netip.AddrFrom4([4]byte{nat[0], nat[1], nat[2], byte(1 + r.IntN(254))})
			u.Signal.HeldAt = k.opens.Add(time.Duration(200+r.IntN(8000)) * time.Millisecond)
			u.Signal.Passengers = []Passenger{{Name: k.name(""), Age: 18 + r.IntN(6), IDType: "STUDENT_ID", IDRef: fmt.Sprintf("ST%s%05d", k.tag, len(pl.Accounts))}}
			saveSelf(&u)
			pl.Accounts = append(pl.Accounts, u)
		}
		booked := map[int]bool{}
		for j := first; j < len(pl.Accounts); j++ {
			if r.IntN(4) == 0 {
				friend := first + r.IntN(len(pl.Accounts)-first)
				if friend != j && !booked[friend] {
					booked[friend] = true
					pl.Accounts[j].Signal.Passengers = append(pl.Accounts[j].Signal.Passengers, pl.Accounts[friend].Signal.Passengers[0])
				}
			}
		}
	}
	for range a.ParentCards {
		// A household paying with a parent's card: two to four accounts on
		// the home /24, relatives of one surname, now and then the home
		// device or the parent's phone on two of them.
		n := 2 + r.IntN(3)
		sn := drawSurname(r)
		home := k.ispIP()
		cardNo := k.card()
		dev := fmt.Sprintf("dev-%s-home-%d", k.tag, family)
		parentPhone := k.phone()
		for j := range n {
			u := newHonest(ShapeParentCard, family)
			u.Signal.IP = home
			u.Signal.Instrument = cardNo
			if j < 2 && r.IntN(3) == 0 {
				u.Signal.DeviceID = dev
			}
			if j < 2 && r.IntN(3) == 0 {
				u.Phone = parentPhone
			}
			u.Signal.Passengers = []Passenger{adult(sn)}
			if r.IntN(3) == 0 {
				u.Signal.Passengers = append(u.Signal.Passengers, adult(sn))
			}
			saveSelf(&u)
			pl.Accounts = append(pl.Accounts, u)
		}
		family++
	}
	// A relative of a ring's customer: an honest account booking the
	// customer (one of theirs) and themselves, linked to the ring by that
	// one booking. Only customers held by one ring account, so the
	// passenger limit lets the relative hold.
	var once []Passenger
	held := map[string]int{}
	for _, u := range pl.Accounts {
		if u.Ring >= 0 {
			for _, ps := range u.Signal.Passengers {
				held[ps.IDRef]++
			}
		}
	}
	for _, u := range pl.Accounts {
		if u.Ring >= 0 && u.Shape != ShapeEvasive {
			for _, ps := range u.Signal.Passengers {
				if held[ps.IDRef] == 1 {
					once = append(once, ps)
				}
			}
		}
	}
	for range a.Relatives {
		if len(once) == 0 {
			break
		}
		j := r.IntN(len(once))
		kin := once[j]
		once = slices.Delete(once, j, j+1)
		u := newHonest(ShapeRelative, -1)
		sn := strings.Fields(kin.Name)
		u.Signal.Passengers = []Passenger{adult(sn[len(sn)-1]), kin}
		saveSelf(&u)
		pl.Accounts = append(pl.Accounts, u)
	}
	for i := range a.BigFamilies {
		// A joint family of a common surname: four to six accounts on the
		// home /24, two home devices, the home UPI address on three, the
		// grandparents booked by two of them.
		n := 4 + r.IntN(3)
		sn := commonSurnames[(i+1)%len(commonSurnames)]
		home := k.ispIP()
		upi := fmt.Sprintf("upi:home.%d.%s@upi", family, k.tag)
		elders := []Passenger{adult(sn), adult(sn)}
		elders[0].Age, elders[1].Age = 60+r.IntN(20), 60+r.IntN(20)
		for j := range n {
			u := newHonest(ShapeBigFamily, family)
			u.Signal.IP = home
			if dev := fmt.Sprintf("dev-%s-joint-%d-%d", k.tag, family, j/2); k.share(dev, planAccountsPerDevice) {
				u.Signal.DeviceID = dev
			}
			if r.IntN(2) == 0 && k.share(upi, planAccountsPerUPI) {
				u.Signal.Instrument = upi
			}
			u.Signal.Passengers = []Passenger{adult(sn)}
			if r.IntN(5) == 0 {
				u.Signal.Passengers[0] = adult("") // married in
			}
			if j < 2 {
				u.Signal.Passengers = append(u.Signal.Passengers, elders...)
			}
			saveSelf(&u)
			u.Saved = u.Signal.Passengers // themselves and the grandparents
			pl.Accounts = append(pl.Accounts, u)
		}
		family++
	}
}

// retypeAll retypes every passenger of a party.
func retypeAll(r *rand.Rand, ps []Passenger, ident func() string) []Passenger {
	out := make([]Passenger, len(ps))
	for i, p := range ps {
		out[i] = retype(r, p, ident)
	}
	return out
}
