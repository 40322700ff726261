package serverrecord

// GapOpen reports whether node's record has a gap open now: a test waits
// for it before it ends a fault, rather than sleeping a guessed while.
func (obs *Observers) GapOpen(node string) bool {
	for _, o := range obs.nodes {
		if o.node.Name == node {
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.gapOpen
		}
	}
	return false
}

// Caught reports whether node's observer has received everything the node
// did before t, tokens read: a test waits for it before a fault that
// would cut a read short.
func (obs *Observers) Caught(node string, t int64) bool {
	for _, o := range obs.nodes {
		if o.node.Name == node {
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.confirmed >= t && len(o.queue) == 0
		}
	}
	return false
}
