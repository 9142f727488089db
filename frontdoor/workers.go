package frontdoor

import (
	"net"
	"time"
)

// Connection goroutines are reused. A connection goroutine grows its stack
// twice on the way into a handshake (morestack: a new stack and a copy of
// the old one each time); one that finished its connection waits a little
// for the next accepted connection instead of exiting, so that a busy
// listener serves most connections on stacks already grown. At most
// maxIdleWorkers wait, each at most workerIdle, and all of them leave when
// the Server stops accepting.
const (
	maxIdleWorkers = 64
	workerIdle     = time.Second
)

// connJob is an accepted connection waiting for its goroutine.
type connJob struct {
	cfg *ListenerConfig
	raw net.Conn
	cl  *client
}

// start serves j on an idle connection goroutine, or on a new one.
func (s *Server) start(j connJob) {
	select {
	case s.work <- j:
	default:
		go s.worker(j)
	}
}

// worker serves j, then the connections handed to it while it waits.
func (s *Server) worker(j connJob) {
	var idle *time.Timer
	for {
		s.serveConn(j.cfg, j.raw, j.cl)
		if s.idleWorkers.Add(1) > maxIdleWorkers {
			s.idleWorkers.Add(-1)
			return
		}
		if idle == nil {
			idle = time.NewTimer(workerIdle)
		} else {
			idle.Reset(workerIdle)
		}
		select {
		case j = <-s.work:
			s.idleWorkers.Add(-1)
		case <-idle.C:
			s.idleWorkers.Add(-1)
			return
		case <-s.stop:
			s.idleWorkers.Add(-1)
			idle.Stop()
			return
		}
	}
}

// stopWorkers makes the idle connection goroutines leave (s.mu held).
func (s *Server) stopWorkers() {
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
}
