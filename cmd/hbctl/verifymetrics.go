package main

import (
	"time"

	"github.com/hongbao-dev/hongbao/metrics"
)

// writeVerify records a verify's result in a textfile, keeping the time of
// the last success from the previous file when this one failed.
func writeVerify(path string, ok bool) error {
	now := time.Now()
	lastOK := now
	if !ok {
		lastOK = time.Time{}
		if lines, err := metrics.ReadTextfile(path); err == nil {
			if v, found := metrics.Sample(lines, "hongbao_verify_last_success_timestamp_seconds"); found {
				lastOK = time.Unix(int64(v), 0)
			}
		}
	}
	return metrics.WriteVerify(path, ok, now, lastOK)
}
