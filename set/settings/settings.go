// Package settings turns the configuration into what hongbao's processes
// are built from, so that configs stays a leaf that imports nothing of
// hongbao's: the settings of the domain and of the queues, the SETs an
// operator's command acts on, the topology a SET's server and settler
// follow (with their pools following the SET's MySQL), and the log of the
// core group pools' moves.
//
// It lives under set/ because nearly all of it is the settings of a SET's
// processes and of the commands that act on the SETs: the limits and queue
// settings a SET server serves with, the SETs the meta database (or the
// file) names, the topology a SET's server and settler follow and their
// pools following the SET's MySQL. It cannot live in configs, which must
// stay a leaf, since it imports queue, set/topology and store/sqldb.
package settings

import (
	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/queue"
)

// Limits returns the domain's limits of what a sender may create.
func Limits(c *configs.Config) hongbao.Limits {
	l := c.Limits
	return hongbao.Limits{MaxTotal: l.MaxTotal, MaxCount: l.MaxCount, MaxShare: l.MaxShare,
		Expiry: l.Expiry.D(), MaxGreeting: l.MaxGreeting, MaxAudience: l.MaxAudience}
}

// Daily returns the daily limits per user the configuration sets.
func Daily(c *configs.Config) hongbao.DailyLimits {
	l := c.Limits
	return hongbao.DailyLimits{SendCount: l.DailySendCount, SendTotal: l.DailySendTotal, ReceiveTotal: l.DailyReceiveTotal}
}

// Queue returns the per-packet queues' settings.
func Queue(c *configs.Config) queue.Config {
	q := c.Queue
	return queue.Config{Size: q.Size, Batch: q.Batch, Idle: q.Idle.D(), TxTimeout: q.TxTimeout.D(), SlotCap: q.SlotCap,
		Parallel: q.Committers, Merge: q.Merge}
}
