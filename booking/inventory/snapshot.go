package inventory

import (
	"context"
	"fmt"
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
	Occupancy   []uint16 // per berth, the legs it is taken on
	Held        []int    // per leg, passengers in live holds (counter)
	Confirmed   []int    // per leg, confirmed passengers (counter)
	Holds       []HoldRecord
}

// Snapshot reads the shard's state atomically.
func (s *Store) Snapshot(ctx context.Context, shardID int64) (Snapshot, error) {
	keys := []string{s.key(shardID, "meta"), s.key(shardID, "occ"), s.key(shardID, "cnt"), s.key(shardID, "holds")}
	res, err := s.snapshot.Run(ctx, s.rdb, keys).Slice()
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
	occ := res[1].(string)
	if len(occ) != 2*snap.Berths {
		return snap, fmt.Errorf("snapshot shard %d: occupancy is %d bytes for %d berths", shardID, len(occ), snap.Berths)
	}
	snap.Occupancy = make([]uint16, snap.Berths)
	for b := range snap.Occupancy {
		snap.Occupancy[b] = uint16(occ[2*b])<<8 | uint16(occ[2*b+1])
	}
	cnt := pairs(res[2])
	snap.Held, snap.Confirmed = make([]int, snap.Legs), make([]int, snap.Legs)
	for l := 0; l < snap.Legs; l++ {
		snap.Held[l], snap.Confirmed[l] = atoi(cnt["h"+strconv.Itoa(l)]), atoi(cnt["c"+strconv.Itoa(l)])
	}
	for id, rec := range pairs(res[3]) {
		h, err := decodeRecord(id, rec)
		if err != nil {
			return snap, fmt.Errorf("snapshot shard %d: %w", shardID, err)
		}
		snap.Holds = append(snap.Holds, h)
	}
	return snap, nil
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

// SelfCheck lists where the snapshot disagrees with itself: counters versus
// occupancy masks, and berths claimed by two records on one leg.
func (snap Snapshot) SelfCheck() []string {
	var bad []string
	if !snap.Ready {
		return nil
	}
	free := snap.Free()
	for l := 0; l < snap.Legs; l++ {
		if free[l]+snap.Held[l]+snap.Confirmed[l] != snap.Berths {
			bad = append(bad, fmt.Sprintf("leg %d: free %d + held %d + confirmed %d != total %d",
				l, free[l], snap.Held[l], snap.Confirmed[l], snap.Berths))
		}
	}
	claimed := make([]uint16, snap.Berths)
	for _, h := range snap.Holds {
		var mask uint16
		for l := h.From; l < h.To; l++ {
			mask |= 1 << l
		}
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
	for b := range claimed {
		if claimed[b] != snap.Occupancy[b] {
			bad = append(bad, fmt.Sprintf("berth %d: occupancy mask %016b but holds claim %016b", b, snap.Occupancy[b], claimed[b]))
		}
	}
	return bad
}
