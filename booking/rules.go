package booking

import (
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Rules are the Tatkal limits of DOMAIN.md, as configuration.
type Rules struct {
	// ChartBefore is when the chart is prepared, before departure from
	// the origin: the shard is frozen, the waitlist settled.
	ChartBefore   time.Duration
	MaxPassengers int           // per PNR
	DailyCap      int           // Tatkal tickets per account per opening day
	HoldWindow    time.Duration // how long seats stay held awaiting payment
	AgentBar      time.Duration // agents may not book this long after opening
	Waitlist      bool          // offer TQWL when seats run out
	IdemTTL       time.Duration // how long a hold answer is remembered per key
	// Limits across accounts and over the month (DOMAIN.md, seeds/000 6.6).
	// PassengerAccounts: one passenger (ID number, or name + age) may be on
	// Tatkal holds of at most this many accounts per opening day.
	PassengerAccounts int
	// PersonDailyCap: Tatkal tickets per opening day across all verified
	// accounts of one person (one OTP-verified phone).
	PersonDailyCap int
	// MonthlyCap, MonthlyCapVerified: Tatkal tickets per account per
	// calendar month (of the opening day), unverified and verified.
	MonthlyCap, MonthlyCapVerified int
	// BookingLocation is the two-digit location code in the PNR (DOMAIN.md, "Codes").
	BookingLocation string
	// MinAccountAge: an account younger than this may not book Tatkal,
	// verified or not (ACCOUNT_TOO_NEW). DOMAIN.md asks only that the
	// account be identity-verified (which holds the 3-day rule of accounts
	// not verified), so the default is 0: a passenger who signs up and
	// verifies books the same day. Operators raise it through the
	// min_account_age rule lever against a wave of fresh accounts.
	MinAccountAge time.Duration
}

// DefaultRules are the rules in force unless configured otherwise.
func DefaultRules() Rules {
	return Rules{
		MaxPassengers:   4,
		DailyCap:        2,
		HoldWindow:      3 * time.Minute,
		AgentBar:        30 * time.Minute,
		Waitlist:        true,
		IdemTTL:         24 * time.Hour,
		BookingLocation: "25",
		ChartBefore:     4 * time.Hour,

		PassengerAccounts:  2,
		PersonDailyCap:     2,
		MonthlyCap:         12,
		MonthlyCapVerified: 24,
	}
}

// AcceptedIDs are the photo IDs a Tatkal passenger may carry, with the
// shape of each reference.
var AcceptedIDs = map[string]*regexp.Regexp{
	"AADHAAR":         regexp.MustCompile(`^[2-9][0-9]{11}$`),
	"PAN":             regexp.MustCompile(`^[A-Z]{5}[0-9]{4}[A-Z]$`),
	"PASSPORT":        regexp.MustCompile(`^[A-Z][0-9]{7}$`),
	"VOTER_ID":        regexp.MustCompile(`^[A-Z]{3}[0-9]{7}$`),
	"DRIVING_LICENCE": regexp.MustCompile(`^[A-Z]{2}[0-9]{2}[0-9A-Z]{7,14}$`),
	"GOVT_ID":         regexp.MustCompile(`^[A-Z0-9/-]{4,20}$`),
	"STUDENT_ID":      regexp.MustCompile(`^[A-Z0-9/-]{4,20}$`),
	"BANK_PASSBOOK":   regexp.MustCompile(`^[0-9]{9,18}$`),
	"CREDIT_CARD":     regexp.MustCompile(`^[0-9]{4}$`), // last four digits only
	"PSU_ID":          regexp.MustCompile(`^[A-Z0-9/-]{4,20}$`),
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z .'-]*$`)

// berthPrefs lists the preferences each class can honour.
func berthPrefs(class string) map[string]byte {
	switch class {
	case "SL", "3A", "3E":
		return map[string]byte{"LB": 'L', "MB": 'M', "UB": 'U', "SL": 'S', "SU": 'T'}
	case "2A":
		return map[string]byte{"LB": 'L', "UB": 'U', "SL": 'S', "SU": 'T'}
	case "1A":
		return map[string]byte{"LB": 'L', "UB": 'U'}
	default: // chair cars and second sitting
		return map[string]byte{"WS": 'W', "MS": 'C', "AS": 'A'}
	}
}

// Senior reports whether the passenger is entitled to a lower berth by
// preference: men 60+, women 45+ (DOMAIN.md, "Coaches and berths").
func (p Passenger) Senior() bool {
	return (p.Gender == "M" && p.Age >= 60) || (p.Gender == "F" && p.Age >= 45) || (p.Gender == "T" && p.Age >= 60)
}

// ValidatePassengers checks every passenger and returns the berth
// preference codes for the seat scripts ('-' for none; seniors without a
// preference ask for a lower berth) and whether someone carries a valid ID.
func ValidatePassengers(class string, ps []Passenger, rules Rules) (prefs []byte, idOK bool, err error) {
	if len(ps) == 0 {
		return nil, false, Errorf(EINVALID, "NO_PASSENGERS", "Add at least one passenger.")
	}
	if len(ps) > rules.MaxPassengers {
		return nil, false, Errorf(EINVALID, "TOO_MANY_PASSENGERS", "A Tatkal ticket carries at most %d passengers; you sent %d.", rules.MaxPassengers, len(ps))
	}
	allowed := berthPrefs(class)
	prefs = make([]byte, len(ps))
	for i := range ps {
		p := &ps[i]
		p.Name = strings.Join(strings.Fields(p.Name), " ")
		p.Gender = strings.ToUpper(p.Gender)
		p.BerthPref = strings.ToUpper(p.BerthPref)
		p.IDType = strings.ToUpper(p.IDType)
		p.IDRef = strings.ToUpper(strings.ReplaceAll(p.IDRef, " ", ""))
		n := i + 1
		switch {
		case utf8.RuneCountInString(p.Name) < 3 || utf8.RuneCountInString(p.Name) > 60 || !nameRE.MatchString(p.Name):
			return nil, false, Errorf(EINVALID, "BAD_NAME", "Passenger %d: the name must be 3-60 letters (spaces, dots, hyphens and apostrophes allowed).", n)
		case p.Age < 5 && p.Age >= 0:
			return nil, false, Errorf(EINVALID, "CHILD_UNDER_5", "Passenger %d: children under 5 travel without a ticket; do not add them.", n)
		case p.Age < 0 || p.Age > 125:
			return nil, false, Errorf(EINVALID, "BAD_AGE", "Passenger %d: age must be between 5 and 125.", n)
		case p.Gender != "M" && p.Gender != "F" && p.Gender != "T":
			return nil, false, Errorf(EINVALID, "BAD_GENDER", "Passenger %d: gender must be M, F or T.", n)
		}
		prefs[i] = '-'
		if p.BerthPref != "" {
			code, ok := allowed[p.BerthPref]
			if !ok {
				return nil, false, Errorf(EINVALID, "BAD_BERTH_PREF", "Passenger %d: class %s has no berth preference %q.", n, class, p.BerthPref)
			}
			prefs[i] = code
		} else if p.Senior() {
			if code, ok := allowed["LB"]; ok {
				prefs[i] = code
			}
		}
		if p.IDType != "" || p.IDRef != "" {
			re, ok := AcceptedIDs[p.IDType]
			if !ok {
				return nil, false, Errorf(EINVALID, "BAD_ID_TYPE", "Passenger %d: %q is not an accepted photo ID.", n, p.IDType)
			}
			if !re.MatchString(p.IDRef) {
				return nil, false, Errorf(EINVALID, "BAD_ID_REF", "Passenger %d: the %s number is not in the right format.", n, p.IDType)
			}
			idOK = true
		}
	}
	if !idOK {
		return nil, false, Errorf(EINVALID, "NO_ID", "At least one passenger must carry an accepted photo ID (type and number).")
	}
	return prefs, true, nil
}

// ComputeFare prices a journey of km for n passengers: basic fare,
// reservation and superfast charges, the Tatkal charge (a share of the
// basic fare clamped per class, with a minimum distance) and GST on AC
// classes. No concessions: everyone pays the full fare.
func ComputeFare(r FareRule, superfast bool, km, n int) Fare {
	roundRupee := func(p int64) int64 { return (p + 50) / 100 * 100 }
	basic := roundRupee(int64(km) * r.PaisePerKm)
	tatkalBase := basic
	if km < r.TatkalMinKm {
		tatkalBase = roundRupee(int64(r.TatkalMinKm) * r.PaisePerKm)
	}
	tatkal := roundRupee(tatkalBase * r.TatkalPct / 100)
	tatkal = max(r.TatkalMin, min(r.TatkalMax, tatkal))
	lines := []FareLine{{"basic", basic}, {"reservation", r.Reservation}}
	if superfast {
		lines = append(lines, FareLine{"superfast", r.Superfast})
	}
	lines = append(lines, FareLine{"tatkal", tatkal})
	var sub int64
	for _, l := range lines {
		sub += l.Paise
	}
	if r.GSTBps > 0 {
		lines = append(lines, FareLine{"gst", roundRupee(sub * r.GSTBps / 10000)})
	}
	f := Fare{}
	for _, l := range lines {
		l.Paise *= int64(n)
		f.Breakup = append(f.Breakup, l)
		f.TotalPaise += l.Paise
	}
	return f
}
