package inventory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// Snapshot is a shard's whole Redis state read at one instant.
type Snapshot struct {
	Ready       bool
	Epoch       int64
	Legs        int
	Berths      int
	WaitlistCap int
	WaitlistLen int
	Occupancy   []uint16 // per berth, the legs it is taken on (from the leg bitmaps)
	Held        []int    // per leg, passengers in live holds (counter)
	Confirmed   []int    // per leg, confirmed passengers (counter)
	Holds       []HoldRecord

	// layout lists what is wrong with the bitmaps, the coach table and
	// the hashes themselves (bits past the last berth, berths of no or two
	// types, a hash without its pad); SelfCheck reports it.
	layout []string
}

// Snapshot reads the shard's state atomically.
func (s *Store) Snapshot(ctx context.Context, shardID int64) (Snapshot, error) {
	keys := []string{s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"),
		s.key(shardID, "live"), s.key(shardID, "daily")}
	keys = append(keys, s.legKeys(shardID, 0, MaxLegs)...)
	keys = append(keys, s.typeKeys(shardID)...)
	res, err := s.snapshot.Run(ctx, s.rdb, keys, MaxLegs).Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot shard %d: %w", shardID, err)
	}
	meta := pairs(res[0])
	var snap Snapshot
	if meta["epoch"] == "" {
		return snap, nil
	}
	snap.Ready = true
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	snap.Epoch, _ = strconv.ParseInt(meta["epoch"], 10, 64)
	snap.Legs, snap.Berths = atoi(meta["legs"]), atoi(meta["nberths"])
	snap.WaitlistCap, snap.WaitlistLen = atoi(meta["wlcap"]), atoi(meta["wlcount"])
	nbytes := (snap.Berths + 7) / 8

	legMaps, _ := res[3].([]any)
	if len(legMaps) != snap.Legs {
		return snap, fmt.Errorf("snapshot shard %d: %d leg bitmaps for %d legs", shardID, len(legMaps), snap.Legs)
	}
	snap.Occupancy = make([]uint16, snap.Berths)
	for l, v := range legMaps {
		m, ok := v.(string)
		if !ok || len(m) != nbytes {
			return snap, fmt.Errorf("snapshot shard %d: leg %d bitmap is %d bytes (present %v) for %d berths", shardID, l, len(m), ok, snap.Berths)
		}
		for b := range snap.Occupancy {
			if !bitAt(m, b) {
				snap.Occupancy[b] |= 1 << l
			}
		}
		if b := firstPadding(m, snap.Berths); b >= 0 {
			snap.layout = append(snap.layout, fmt.Sprintf("leg %d bitmap: bit %d past the last berth is set", l, b))
		}
	}

	// Every berth has exactly one type, and nothing lies past the last berth.
	typeMaps, _ := res[4].([]any)
	types := make([]int, snap.Berths)
	for i, v := range typeMaps {
		m, ok := v.(string)
		if !ok || len(m) != nbytes {
			snap.layout = append(snap.layout, fmt.Sprintf("type %q bitmap is %d bytes (present %v) for %d berths", berthCodes[i], len(m), ok, snap.Berths))
			continue
		}
		for b := range types {
			if bitAt(m, b) {
				types[b]++
			}
		}
		if b := firstPadding(m, snap.Berths); b >= 0 {
			snap.layout = append(snap.layout, fmt.Sprintf("type %q bitmap: bit %d past the last berth is set", berthCodes[i], b))
		}
	}
	for b, n := range types {
		if n != 1 {
			snap.layout = append(snap.layout, fmt.Sprintf("berth %d has %d types", b, n))
		}
	}
	pads, _ := res[5].([]any)
	for i, name := range []string{"cnt", "holds", "live", "daily"} {
		if i >= len(pads) || pads[i] != int64(1) {
			snap.layout = append(snap.layout, fmt.Sprintf("hash %s has no pad field (lost?)", name))
		}
	}
	if c := meta["coaches"]; !validCoaches(c, snap.Berths) {
		snap.layout = append(snap.layout, fmt.Sprintf("coach table %x does not cover berths 0-%d in order", c, snap.Berths-1))
	}

	cnt := pairs(res[1])
	snap.Held, snap.Confirmed = make([]int, snap.Legs), make([]int, snap.Legs)
	for l := 0; l < snap.Legs; l++ {
		snap.Held[l], snap.Confirmed[l] = atoi(cnt["h"+strconv.Itoa(l)]), atoi(cnt["c"+strconv.Itoa(l)])
	}
	for id, rec := range pairs(res[2]) {
		if id == padField {
			continue
		}
		h, err := decodeRecord(id, rec)
		if err != nil {
			return snap, fmt.Errorf("snapshot shard %d: %w", shardID, err)
		}
		snap.Holds = append(snap.Holds, h)
	}
	return snap, nil
}

// firstPadding is the first set bit of m at or past bit n, or -1.
func firstPadding(m string, n int) int {
	for b := n; b < 8*len(m); b++ {
		if bitAt(m, b) {
			return b
		}
	}
	return -1
}

// validCoaches checks the coach table: two-byte starts, the first 0, rising
// strictly, ending with the berth count.
func validCoaches(c string, n int) bool {
	if len(c) < 4 || len(c)%2 != 0 {
		return false
	}
	prev := -1
	for i := 0; i < len(c); i += 2 {
		v := int(c[i])<<8 | int(c[i+1])
		if (i == 0 && v != 0) || v <= prev {
			return false
		}
		prev = v
	}
	return prev == n
}

func pairs(v any) map[string]string {
	out := map[string]string{}
	list, _ := v.([]any)
	for i := 0; i+1 < len(list); i += 2 {
		k, _ := list[i].(string)
		val, _ := list[i+1].(string)
		out[k] = val
	}
	return out
}

// Free reports, per leg, how many berths the occupancy masks leave free.
func (snap Snapshot) Free() []int {
	free := make([]int, snap.Legs)
	for l := range free {
		for _, m := range snap.Occupancy {
			if m&(1<<l) == 0 {
				free[l]++
			}
		}
	}
	return free
}

// SelfCheck lists where the snapshot disagrees with itself: the bitmaps'
// layout; counters versus occupancy; counters versus the records (held and
// confirmed passengers per leg from H, R and C records); the waitlist length
// versus the W and X records, and against its cap; records that could not
// have been written (a journey outside the legs, berths not one per
// passenger or repeated, a waitlist record with berths or no number); and
// berths claimed by two records on one leg or claimed differently from the
// occupancy.
func (snap Snapshot) SelfCheck() []string {
	if !snap.Ready {
		return nil
	}
	bad := slices.Clone(snap.layout)
	free := snap.Free()
	for l := 0; l < snap.Legs; l++ {
		if free[l]+snap.Held[l]+snap.Confirmed[l] != snap.Berths {
			bad = append(bad, fmt.Sprintf("leg %d: free %d + held %d + confirmed %d != total %d",
				l, free[l], snap.Held[l], snap.Confirmed[l], snap.Berths))
		}
	}
	held, conf := make([]int, snap.Legs), make([]int, snap.Legs)
	wl := 0
	claimed := make([]uint16, snap.Berths)
	for _, h := range snap.Holds {
		if h.From < 0 || h.To > snap.Legs || h.From >= h.To {
			bad = append(bad, fmt.Sprintf("hold %s: journey %d-%d outside %d legs", h.ID, h.From, h.To, snap.Legs))
			continue
		}
		switch h.State {
		case 'H', 'R', 'C':
			if len(h.Berths) != h.Passengers {
				bad = append(bad, fmt.Sprintf("hold %s (%c): %d berths for %d passengers", h.ID, h.State, len(h.Berths), h.Passengers))
			}
			if len(slices.Compact(slices.Sorted(slices.Values(h.Berths)))) != len(h.Berths) {
				bad = append(bad, fmt.Sprintf("hold %s: a berth twice in %v", h.ID, h.Berths))
			}
			c := held
			if h.State == 'C' {
				c = conf
			}
			for l := h.From; l < h.To; l++ {
				c[l] += len(h.Berths)
			}
		case 'W', 'X':
			if len(h.Berths) != 0 || h.WaitlistNo < 1 {
				bad = append(bad, fmt.Sprintf("hold %s (%c): berths %v, waitlist no %d", h.ID, h.State, h.Berths, h.WaitlistNo))
			}
			wl += h.Passengers
		default:
			bad = append(bad, fmt.Sprintf("hold %s: state %q", h.ID, h.State))
		}
		mask := legMask(h.From, h.To)
		for _, b := range h.Berths {
			if b < 0 || b >= snap.Berths {
				bad = append(bad, fmt.Sprintf("hold %s: berth %d out of range", h.ID, b))
				continue
			}
			if claimed[b]&mask != 0 {
				bad = append(bad, fmt.Sprintf("hold %s: berth %d already taken on one of legs %d-%d", h.ID, b, h.From, h.To-1))
			}
			claimed[b] |= mask
		}
	}
	if !slices.Equal(held, snap.Held) {
		bad = append(bad, fmt.Sprintf("held counters %v, records say %v", snap.Held, held))
	}
	if !slices.Equal(conf, snap.Confirmed) {
		bad = append(bad, fmt.Sprintf("confirmed counters %v, records say %v", snap.Confirmed, conf))
	}
	if wl != snap.WaitlistLen {
		bad = append(bad, fmt.Sprintf("waitlist length %d, records say %d", snap.WaitlistLen, wl))
	}
	if snap.WaitlistLen > snap.WaitlistCap {
		bad = append(bad, fmt.Sprintf("waitlist length %d over cap %d", snap.WaitlistLen, snap.WaitlistCap))
	}
	for b := range claimed {
		if claimed[b] != snap.Occupancy[b] {
			bad = append(bad, fmt.Sprintf("berth %d: occupancy mask %016b but holds claim %016b", b, snap.Occupancy[b], claimed[b]))
		}
	}
	return bad
}
