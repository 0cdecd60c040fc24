package archivetest

import (
	hongbao "github.com/hongbao-dev/hongbao"
)

// FourDays creates nine packets over four days of three buckets, every
// kind of ending (sold out, part-opened then refunded, unopened then
// refunded, cancelled), with the local-midnight edges, and returns their
// IDs, not yet settled.
//
//	db_00.t_7_03 2025-03-03: 5 packets (one at 23:59:59.900 local)
//	db_00.t_7_04 2025-03-04: 1 packet at 00:00:00.000 local
//	db_12.t_3_03 2025-03-03: 2 packets (a 100-share sold-out one)
//	db_99.t_9_10 2025-03-10: 1 packet
func (f *Fixture) FourDays() []hongbao.PacketID {
	f.t.Helper()
	return []hongbao.PacketID{
		f.Create(Spec{At: f.At(2025, 3, 3, 9, 0, 0, 0), Bucket: 7, Total: 1000, Count: 10, Opens: 10}),
		f.Create(Spec{At: f.At(2025, 3, 3, 9, 5, 0, 0), Bucket: 7, Total: 600, Count: 6, Type: hongbao.Fixed, Opens: 2}),
		f.Create(Spec{At: f.At(2025, 3, 3, 12, 0, 0, 0), Bucket: 7, Total: 500, Count: 5}),
		f.Create(Spec{At: f.At(2025, 3, 3, 23, 59, 59, 900), Bucket: 7, Total: 300, Count: 3, Opens: 3, Idem: "k-late"}),
		f.Create(Spec{At: f.At(2025, 3, 3, 13, 0, 0, 0), Bucket: 7, Total: 700, Count: 7, Cancelled: true}),
		f.Create(Spec{At: f.At(2025, 3, 4, 0, 0, 0, 0), Bucket: 7, Total: 200, Count: 2, Opens: 1}),
		f.Create(Spec{At: f.At(2025, 3, 3, 10, 0, 0, 0), Bucket: 123, Total: 20000, Count: 100, Type: hongbao.Fixed, Opens: 100}),
		f.Create(Spec{At: f.At(2025, 3, 3, 11, 0, 0, 0), Bucket: 123, Total: 999, Count: 3, Opens: 1, Idem: "k-8"}),
		f.Create(Spec{At: f.At(2025, 3, 10, 18, 0, 0, 0), Bucket: 999, Total: 5000, Count: 50, Opens: 37}),
	}
}

// StatusDays creates a day in every state the status report knows, as of
// 2025-03-15 with a retention of 7 days:
//
//	db_00.t_1_01 2025-03-01: 2 packets, settled and archived (as of 03-09)
//	db_00.t_1_05 2025-03-05: 2 packets, settled: due
//	db_00.t_2_06 2025-03-06: 1 packet, expired but not closed: pending
//	db_00.t_3_12 2025-03-12: 1 packet, settled: live (within retention)
func (f *Fixture) StatusDays() {
	f.t.Helper()
	old := f.Create(Spec{At: f.At(2025, 3, 1, 10, 0, 0, 0), Bucket: 1, Total: 300, Count: 3, Opens: 3})
	old2 := f.Create(Spec{At: f.At(2025, 3, 1, 11, 0, 0, 0), Bucket: 1, Total: 300, Count: 3, Opens: 1})
	due := f.Create(Spec{At: f.At(2025, 3, 5, 10, 0, 0, 0), Bucket: 1, Total: 200, Count: 2, Opens: 2})
	due2 := f.Create(Spec{At: f.At(2025, 3, 5, 12, 0, 0, 0), Bucket: 1, Total: 200, Count: 2})
	f.Create(Spec{At: f.At(2025, 3, 6, 10, 0, 0, 0), Bucket: 2, Total: 500, Count: 5, Opens: 1}) // never settled
	recent := f.Create(Spec{At: f.At(2025, 3, 12, 10, 0, 0, 0), Bucket: 3, Total: 100, Count: 1, Opens: 1})
	f.Settle(old, old2, due, due2, recent)
	if sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-03-09"), false); err != nil || sum.Archived != 1 || sum.Packets != 2 {
		f.t.Fatalf("archive 03-01: %+v, %v", sum, err)
	}
}
