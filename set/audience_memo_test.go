package set

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestAudienceEvictedSoldOutStranger: a group packet sells out to its
// members while strangers race them; then the audiences' bounded memory
// forgets it (filled past its bound by another audience), so only the
// sold-out memo knows the packet. Strangers opening and grabbing it at
// once are still refused 403 not_in_audience (never 409 sold_out: that
// would tell a stranger the packet's state), from memory with every MySQL
// connection held; members are answered their share or sold_out.
func TestAudienceEvictedSoldOutStranger(t *testing.T) {
	s := newStack(t, stackOpts{})
	members, strangers := freshUsers(6), freshUsers(6)
	users := make([]string, len(members))
	for i, u := range members {
		users[i] = `"` + u.String() + `"`
	}
	r := s.do(http.MethodPost, "/v1/packets", dbtest.FreshUser(),
		[]byte(fmt.Sprintf(`{"total":600,"count":3,"type":"random","audience":{"users":[%s]}}`, strings.Join(users, ","))))
	if r.Status != http.StatusCreated {
		t.Fatalf("send: %v", r)
	}
	id, err := hongbao.ParsePacketID(r.Str("id"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, u := range append(append([]hongbao.UserID{}, members...), strangers...) {
		wg.Go(func() { _, _, _ = openUntil(s, id, u) })
	}
	wg.Wait()
	if !s.srv.memo.knows(id) {
		t.Fatal("the sold-out packet is not in the memo")
	}
	p := dbtest.CheckPacket(t, s.db, id)
	if len(p.Shares) != 3 || p.RemainingAmount != 0 {
		t.Fatalf("shares %v, %d fen left; want 3 shares, 0", p.Shares, p.RemainingAmount)
	}

	// Evict: an audience as large as the bound pushes out every other.
	big := make(hongbao.Audience, audienceUsers)
	for i := range big {
		big[i] = hongbao.UserID(i + 1)
	}
	s.srv.audiences.learn(id+1, big)
	if s.srv.audiences.refuses(id, strangers[0]) {
		t.Fatal("the packet's audience is still remembered")
	}

	waits, release := s.exhaust(t)
	defer release()
	opens, grabs := make([]reply, len(strangers)), make([]reply, len(strangers))
	for i, u := range strangers {
		wg.Go(func() { opens[i] = s.open(u, id) })
		wg.Go(func() { grabs[i] = s.grab(u, id) })
	}
	mine := make([]reply, len(members))
	for i, u := range members {
		wg.Go(func() { mine[i] = s.open(u, id) })
	}
	wg.Wait()
	for i, u := range strangers {
		if !opens[i].IsProblem(http.StatusForbidden, "not_in_audience") {
			t.Errorf("stranger %s's open after eviction: %v, want 403 not_in_audience", u, opens[i])
		}
		checkGrabbed(t, "stranger's grab after eviction", grabs[i], false, "not_in_audience")
	}
	for i, u := range members {
		if amount, had := p.Shares[u]; had {
			checkOpened(t, "member with a share", mine[i], hongbao.AlreadyOpened, amount)
		} else if !mine[i].IsProblem(http.StatusConflict, "sold_out") {
			t.Errorf("member %s without a share: %v, want 409 sold_out", u, mine[i])
		}
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("the answers waited %d times for a MySQL connection, want 0: decided from memory", st.WaitCount-waits)
	}
}
