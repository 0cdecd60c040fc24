package settle

import "context"

// DeliverRead is Deliver that also reports whether it read all it may
// read at once (the pace's backlog test).
func (s *Settler) DeliverRead(ctx context.Context) (sent int, full bool, err error) {
	d, err := s.deliver(ctx)
	return d.sent, d.full, err
}
