package faultproxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/clock"
)

// chunk is one read from the API server's watch response and the time the
// proxy may hand it to the client.
type chunk struct {
	data      []byte
	deliverAt time.Time
}

// watchStream is the body of one watch response as the proxy hands it to the
// client. A pump goroutine reads the API server's chunks as they arrive and
// stamps each with the time it may be delivered, under the rules current at
// arrival; Read hands them out in order, none earlier than its stamp. A
// dropped stream ends with io.EOF at once (chunks still held back are lost,
// as on a broken connection).
type watchStream struct {
	p        *Proxy
	info     *request.RequestInfo
	ctx      context.Context // the forwarded request's; ends when the client goes away or Stop cancels
	upstream io.ReadCloser
	opened   time.Time // on the proxy's clock

	ready    chan struct{} // capacity 1: the queue or err changed
	dropped  chan struct{} // closed when the stream must end
	pumpDone chan struct{}
	pending  []byte // rest of a chunk Read could not hand out at once; Read's only

	mu    sync.Mutex
	queue []chunk
	err   error // the API server's end of stream, handed out after the queue
	ended bool  // dropped is closed

	dropTimer clock.Timer // DropWatchAfter; guarded by p.mu

	closeOnce sync.Once
	closeErr  error
}

// wrapWatch is the ReverseProxy's ModifyResponse: it replaces the body of a
// successful watch response with a registered watchStream.
func (p *Proxy) wrapWatch(resp *http.Response) error {
	info, ok := request.RequestInfoFrom(resp.Request.Context())
	if !ok || info.Verb != "watch" || resp.StatusCode != http.StatusOK {
		return nil
	}
	s := &watchStream{
		p:        p,
		info:     info,
		ctx:      resp.Request.Context(),
		upstream: resp.Body,
		opened:   p.clock.Now(),
		ready:    make(chan struct{}, 1),
		dropped:  make(chan struct{}),
		pumpDone: make(chan struct{}),
	}
	p.mu.Lock()
	p.streams[s] = struct{}{}
	p.stats.WatchesOpened++
	stopped := p.stopped
	if !stopped {
		p.scheduleDropLocked(s, *p.rules.Load())
	}
	p.mu.Unlock()
	if stopped {
		s.drop()
	}
	go s.pump()
	resp.Body = s
	return nil
}

// DropWatches closes every open watch stream of resource ("" = all) now; the
// clients see their streams end cleanly and re-watch. It returns how many
// streams it closed.
func (p *Proxy) DropWatches(resource string) int {
	p.mu.Lock()
	var victims []*watchStream
	for s := range p.streams {
		if resource == "" || s.info.Resource == resource {
			victims = append(victims, s)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, s := range victims {
		if s.drop() {
			n++
		}
	}
	p.watchesDropped.Add(int64(n))
	p.logger.V(2).Info("Dropping watch streams", "resource", resource, "streams", n)
	return n
}

// scheduleDropLocked (re)arms the DropWatchAfter timer of s under rules,
// or drops s at once when it has been open that long already (a fake clock
// fires a timer that is already due only at its next step). p.mu must be
// held.
func (p *Proxy) scheduleDropLocked(s *watchStream, rules []Rule) {
	if s.dropTimer != nil {
		s.dropTimer.Stop()
		s.dropTimer = nil
	}
	after := dropWatchAfter(rules, s.info)
	if after == 0 {
		return
	}
	d := s.opened.Add(after).Sub(p.clock.Now())
	if d <= 0 {
		p.dropExpired(s, after)
		return
	}
	s.dropTimer = p.clock.AfterFunc(d, func() { p.dropExpired(s, after) })
}

// dropExpired ends s, open for its DropWatchAfter (after), and counts it. It
// runs from a clock callback, perhaps inside a fake clock's Step, so it takes
// no lock but the stream's own.
func (p *Proxy) dropExpired(s *watchStream, after time.Duration) {
	if !s.drop() {
		return
	}
	p.watchesDropped.Add(1)
	p.logger.V(2).Info("Dropping watch stream", "resource", resourceName(s.info), "namespace", s.info.Namespace, "dropWatchAfter", after)
}

// unregister forgets s once it is closed.
func (p *Proxy) unregister(s *watchStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.streams, s)
	if s.dropTimer != nil {
		s.dropTimer.Stop()
		s.dropTimer = nil
	}
}

// pump reads the API server's response until it ends or fails, queueing
// each chunk with its delivery time: max(previous deliverAt, arrival +
// the watch delay of the rules current at arrival).
func (s *watchStream) pump() {
	defer close(s.pumpDone)
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := s.upstream.Read(buf)
		if n > 0 {
			at := s.p.clock.Now().Add(watchDelay(*s.p.rules.Load(), s.info))
			if at.Before(last) {
				at = last
			}
			last = at
			s.push(chunk{data: bytes.Clone(buf[:n]), deliverAt: at}, nil)
		}
		if err != nil {
			s.push(chunk{}, err)
			return
		}
	}
}

// push queues c (if it has data) or records the end of the stream (err).
func (s *watchStream) push(c chunk, err error) {
	s.mu.Lock()
	if len(c.data) > 0 {
		s.queue = append(s.queue, c)
	}
	if err != nil {
		s.err = err
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Read hands out the next chunk once its delivery time has come. It returns
// io.EOF when the stream was dropped or the API server ended it, and the
// context's error when the client went away or the proxy stopped.
func (s *watchStream) Read(b []byte) (int, error) {
	select {
	case <-s.dropped:
		return 0, io.EOF
	default:
	}
	if len(s.pending) > 0 {
		n := copy(b, s.pending)
		s.pending = s.pending[n:]
		return n, nil
	}
	c, err := s.next()
	if err != nil {
		return 0, err
	}
	if err := s.waitUntil(c.deliverAt); err != nil {
		return 0, err
	}
	n := copy(b, c.data)
	s.pending = c.data[n:]
	return n, nil
}

// next waits for the next queued chunk, or the end of the stream.
func (s *watchStream) next() (chunk, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			c := s.queue[0]
			s.queue[0] = chunk{}
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return c, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return chunk{}, err
		}
		select {
		case <-s.ready:
		case <-s.dropped:
			return chunk{}, io.EOF
		case <-s.ctx.Done():
			return chunk{}, s.ctx.Err()
		}
	}
}

// waitUntil sleeps until t on the proxy's clock unless the stream is
// dropped or its context ends.
func (s *watchStream) waitUntil(t time.Time) error {
	d := t.Sub(s.p.clock.Now())
	if d <= 0 {
		return nil
	}
	timer := s.p.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return nil
	case <-s.dropped:
		return io.EOF
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// drop makes the stream end at the next Read. It returns false when the
// stream had already been dropped or closed.
func (s *watchStream) drop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.ended = true
	close(s.dropped)
	return true
}

// Close ends the stream, closes the API server's response (cancelling the
// upstream watch), waits for the pump goroutine to return and unregisters
// the stream. The ReverseProxy calls it once it is done with the body.
func (s *watchStream) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		if !s.ended {
			s.ended = true
			close(s.dropped)
		}
		s.mu.Unlock()
		s.closeErr = s.upstream.Close()
		<-s.pumpDone
		s.p.unregister(s)
	})
	return s.closeErr
}
