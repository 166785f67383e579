package booking

// SetNewPNR replaces s's PNR source, for a test that forces collisions.
func (s *Service) SetNewPNR(f func(region int, location string) (string, error)) { s.newPNR = f }
