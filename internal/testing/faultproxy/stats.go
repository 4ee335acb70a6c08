package faultproxy

import "maps"

// Stats are the proxy's counters since Start.
type Stats struct {
	// Forwarded counts the requests sent to the API server by "verb
	// resource", as RequestInfo names them: "list pods", "watch
	// replicasets", "update deployments/status"; non-resource requests count
	// as "verb path" ("get /version"). Requests forwarded before an
	// AfterForward fault count here too.
	Forwarded map[string]int
	// Faults counts the injected faults by kind.
	Faults map[Fault]int
	// OpenWatches is the number of watch streams open through the proxy now.
	OpenWatches int
	// WatchesOpened counts every watch stream the API server accepted.
	WatchesOpened int
	// WatchesDropped counts the watch streams the proxy closed on purpose
	// (DropWatches, DropWatchAfter); not those ended by Stop, the client or
	// the API server.
	WatchesDropped int
	// Held counts the requests a HoldFor rule held, and Abandoned those of
	// them whose client gave up before the hold ended (never forwarded), by
	// "verb resource" as Forwarded.
	Held, Abandoned map[string]int
}

// Stats returns a copy of the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Forwarded = maps.Clone(p.stats.Forwarded)
	s.Faults = maps.Clone(p.stats.Faults)
	s.Held, s.Abandoned = maps.Clone(p.stats.Held), maps.Clone(p.stats.Abandoned)
	s.OpenWatches = len(p.streams)
	s.WatchesDropped = int(p.watchesDropped.Load())
	return s
}
