package settle_test

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// TestSweepPendingSends plays a server that crashed in the middle of three
// sends (packet inserted, debit not yet made or not yet recorded on the
// packet): nobody can open them meanwhile; the client's retry of one of
// them, before the sweeper, funds it once; the sweeper (-sweep-after)
// funds the one whose debit was made and cancels the one whose debit was
// not, and a retry afterwards gets the same decision. No money is moved
// twice or lost.
func TestSweepPendingSends(t *testing.T) {
	const sweepAfter = 3 * time.Second
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1, SweepAfter: sweepAfter})
	cl := c.Client.Retrying(10 * time.Second)
	const sender, opener hongbao.UserID = 900, 901
	c.TopUp(t, sender, 10000)
	ctx := t.Context()
	loc := dbtest.Shanghai(t)
	w, err := wallet.Open(ctx, c.WalletDSN, nil, 4, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// What the crashed server left: a pending packet per key, in the
	// bucket a retry with the key lands in; for crash-2 the debit too.
	minter := hongbao.NewMinter(time.Now)
	reqs := map[string]hongbao.SendRequest{
		"crash-1": {Total: 1000, Count: 2, Type: hongbao.Random, Greeting: "one"},
		"crash-2": {Total: 2000, Count: 2, Type: hongbao.Random, Greeting: "two"},
		"crash-3": {Total: 3000, Count: 2, Type: hongbao.Random, Greeting: "three"},
	}
	ids := map[string]hongbao.PacketID{}
	for _, key := range []string{"crash-1", "crash-2", "crash-3"} {
		id, err := minter.Next(hongbao.BucketFor(sender, []byte(key)))
		if err != nil {
			t.Fatal(err)
		}
		owner, err := c.SetOf(id)
		if err != nil {
			t.Fatal(err)
		}
		sdb, err := sqldb.Open(c.Set(owner).DSN, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		st := store.New(sdb, owner, loc, time.Now, rand.Int64N)
		if _, created, err := st.Create(ctx, store.NewPacket{ID: id, Sender: sender, Req: reqs[key], Expiry: 24 * time.Hour,
			IdempotencyKey: key, Funding: hongbao.Pending}); err != nil || !created {
			t.Fatalf("create pending %s: created %v, %v", key, created, err)
		}
		ids[key] = id
		if key == "crash-3" {
			// Its retry below must reach the server before the
			// sweeper decides it, whatever the machine's load (a
			// starved CI took longer than sweepAfter to get there):
			// its mark is dated a minute on, so the sweeper leaves it
			// alone that long.
			if _, err := sdb.ExecContext(ctx, "UPDATE hb_set.pending SET created_at = created_at + INTERVAL 1 MINUTE WHERE packet_id = ?", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := w.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(ids["crash-2"]), User: sender, Amount: -2000,
		Kind: hongbao.KindSend, Packet: ids["crash-2"]}); err != nil {
		t.Fatal(err)
	}
	for key, id := range ids {
		if r := cl.Open(opener, id.String()); r.Status != http.StatusNotFound {
			t.Errorf("open of pending %s: %v; want 404", key, r)
		}
	}
	c.CheckInvariants(t) // the paid pending send is accounted for

	// The client retries crash-3 before the sweeper: the server finishes it.
	if r := cl.Send(sender, reqs["crash-3"], "crash-3"); r.Status != http.StatusCreated || r.Body.ID != ids["crash-3"].String() {
		t.Fatalf("retry of crash-3: %v; want 201 with packet %s", r, ids["crash-3"])
	}

	waitSettled(t, c, false, 5*sweepAfter)
	void := ledger(t, c, "entry_key = ?", hongbao.SendKey(ids["crash-1"]))
	if len(void) != 1 || void[0].kind != hongbao.KindVoid || void[0].amount != 0 {
		t.Errorf("ledger under %s: %+v; want one void of 0", hongbao.SendKey(ids["crash-1"]), void)
	}
	funding := map[hongbao.PacketID]hongbao.Funding{}
	for _, p := range packetsOf(t, c, sender) {
		funding[p.id] = p.funding
	}
	for key, want := range map[string]hongbao.Funding{"crash-1": hongbao.Cancelled, "crash-2": hongbao.Funded, "crash-3": hongbao.Funded} {
		if funding[ids[key]] != want {
			t.Errorf("%s: funding %d, want %d", key, funding[ids[key]], want)
		}
	}

	// Retries after the sweep get its decision.
	// The sender's balance covers it: the answer says the send was
	// cancelled, not that the money is short.
	if r := cl.Send(sender, reqs["crash-1"], "crash-1"); r.Status != http.StatusConflict || r.Code != "send_cancelled" {
		t.Errorf("retry of the swept-and-cancelled crash-1: %v; want 409 send_cancelled", r)
	}
	if r := cl.Send(sender, reqs["crash-2"], "crash-2"); r.Status != http.StatusCreated || r.Body.ID != ids["crash-2"].String() {
		t.Errorf("retry of the swept crash-2: %v; want 201 with packet %s", r, ids["crash-2"])
	}
	if r := cl.Open(opener, ids["crash-1"].String()); r.Status != http.StatusNotFound {
		t.Errorf("open of the cancelled crash-1: %v; want 404", r)
	}
	for _, key := range []string{"crash-2", "crash-3"} {
		if r := cl.Open(opener, ids[key].String()); r.Status != http.StatusOK || r.Body.Status != hongbao.Opened {
			t.Errorf("open of %s: %v; want opened", key, r)
		}
	}
	if got := balance(t, c, sender); got != 10000-2000-3000 {
		t.Errorf("sender's balance %d, want %d", got, 10000-2000-3000)
	}
	if es := ledger(t, c, "user_id = ? AND kind = 'send'", sender); len(es) != 2 {
		t.Errorf("debits: %+v; want two", es)
	}
	waitSettled(t, c, false, 10*time.Second)
	c.CheckInvariants(t)
}

// TestSettlerIdlesOnPendingExpiredPacket: a packet left pending by a crash
// that expires before the sweeper may decide it (expiry shorter than
// -sweep-after) cannot be closed yet. The settler must keep its normal
// pace meanwhile, not spin on it; once swept, the packet is closed.
func TestSettlerIdlesOnPendingExpiredPacket(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1, Expiry: time.Second, SweepAfter: 5 * time.Second})
	// A pending packet on the last SET (the first one also hosts the
	// topology and the wallet, whose polling would blur the count).
	last := c.Sets[len(c.Sets)-1]
	id, err := hongbao.NewMinter(time.Now).Next(hongbao.Buckets - 1)
	if err != nil {
		t.Fatal(err)
	}
	if owner, err := c.SetOf(id); err != nil || owner != last.Name {
		t.Fatalf("packet %s: SET %q (%v), want the last SET %s", id, owner, err, last.Name)
	}
	loc := dbtest.Shanghai(t)
	sdb, err := sqldb.Open(last.DSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	created := time.Now()
	if _, _, err := store.New(sdb, last.Name, loc, time.Now, rand.Int64N).Create(t.Context(), store.NewPacket{ID: id, Sender: 950,
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random}, Expiry: time.Second, Funding: hongbao.Pending}); err != nil {
		t.Fatal(err)
	}
	selects := func() int64 {
		var name string
		var n int64
		if err := c.DB(last.Name).QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(time.Until(created.Add(1500 * time.Millisecond))) // expired, not yet swept
	n0, t0 := selects(), time.Now()
	time.Sleep(2 * time.Second)
	rate := float64(selects()-n0) / time.Since(t0).Seconds()
	if rate > 200 {
		t.Errorf("SET %s's MySQL ran %.0f SELECTs/s while an expired packet waited for the sweeper; the settler spins", last.Name, rate)
	}
	waitSettled(t, c, true, 20*time.Second)
	if es := ledger(t, c, "entry_key = ?", hongbao.SendKey(id)); len(es) != 1 || es[0].kind != hongbao.KindVoid {
		t.Errorf("ledger under %s after the sweep: %+v; want one void", hongbao.SendKey(id), es)
	}
	c.CheckInvariants(t)
}
