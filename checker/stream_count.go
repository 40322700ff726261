package checker

// Violations is the exclusion checker's count so far: the grants decided
// to have started while another hold of their key was believed, as
// Results.Exclusion.Count will say of the events added up to now, less
// those granted at the latest instant, which are decided once the clock
// passes it. Call it from the goroutine that adds the events: a progress
// display takes it from the check alongside the run rather than judging
// every event again.
func (s *Stream) Violations() int { return s.ex.count }
