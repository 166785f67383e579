package payment

// ForgetSeenEvents empties s's memory of the events it recorded, as a
// restarted process or another one has it, so a duplicate is looked up in
// PostgreSQL.
func ForgetSeenEvents(s *Service) {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	clear(s.seen.set)
	clear(s.seen.ring)
	s.seen.next = 0
}
