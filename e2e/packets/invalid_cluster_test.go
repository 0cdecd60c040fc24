package packets_test

import (
	"bufio"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// badRequest is one invalid request: through the router as a client
// would send it, or raw bytes on a connection (raw != "").
type badRequest struct {
	kind, method, path string
	user               hongbao.UserID // whose token; 0: the header below, or none
	header             map[string]string
	body               []byte
	raw                string
}

// badGen makes a random invalid request of one kind.
type badGen func(rng *mrand.Rand, g *badGens) badRequest

// badGens are the generators and what they aim at.
type badGens struct {
	sender, opener hongbao.UserID
	packet         hongbao.PacketID // a live packet nobody may open here
	token          func(hongbao.UserID) string
}

// validSend is a send body that would be taken.
func validSend(rng *mrand.Rand) map[string]string {
	return map[string]string{"total": fmt.Sprint(100 + rng.IntN(1000)), "count": fmt.Sprint(1 + rng.IntN(10)),
		"type": `"random"`, "greeting": `"恭喜发财"`}
}

// object writes fields (already JSON values) as an object, in random order,
// with extra members appended.
func object(rng *mrand.Rand, fields map[string]string, extra ...string) string {
	var members []string
	for k, v := range fields {
		members = append(members, fmt.Sprintf("%q:%s", k, v))
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(append(members, extra...), ",") + "}"
}

// escapeSome spells key with some letters as \u escapes.
func escapeSome(rng *mrand.Rand, key string) string {
	var b strings.Builder
	for _, r := range key {
		if rng.IntN(2) == 0 {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func pick[T any](rng *mrand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func (g *badGens) send(kind, body string, header map[string]string) badRequest {
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range header {
		h[k] = v
	}
	return badRequest{kind: kind, method: http.MethodPost, path: "/v1/packets", user: g.sender, header: h, body: []byte(body)}
}

// generators of invalid sends: each body is refused whatever the random
// choices.
var badSends = []badGen{
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		k := pick(rng, "total", "count", "type", "greeting")
		return g.send("duplicate key", object(rng, f, fmt.Sprintf(`"%s":%s`, escapeSome(rng, k), f[k])), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		bad := pick(rng, "\xff", "\xfe", "\xc0\xaf", "\xed\xa0\x80", "\x80", "\xf4\x90\x80\x80", "\xe2\x82")
		f["greeting"] = `"恭喜` + bad + `发财"`
		return g.send("invalid UTF-8", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f["greeting"] = fmt.Sprintf(`"hi \u%04x!"`, 0xd800+rng.IntN(0x800))
		return g.send("lone surrogate", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		return g.send("trailing data", object(rng, validSend(rng))+pick(rng, "{}", "x", "1", `"a"`, "]", "}", "null"), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f[pick(rng, "total", "count", "type", "greeting")] = "null"
		return g.send("null value", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f[pick(rng, "currency", "Total", "sender", "id", "amount", "total ")] = "1"
		return g.send("unknown field", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f["total"] = pick(rng, "0", "-1", "1.5", "1e3", `"100"`, "true", "[]", "{}", "20001", "99999999999999999999", "-0")
		return g.send("invalid total", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f["count"] = pick(rng, "0", "-3", "101", "2.0", `"5"`, "false", fmt.Sprint(2000+rng.IntN(1000)))
		return g.send("invalid count", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f["type"] = pick(rng, `"lucky"`, `"RANDOM"`, `""`, "1", "[]")
		return g.send("invalid type", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		body := object(rng, validSend(rng))
		return g.send("truncated JSON", body[:rng.IntN(len(body))], nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		junk := make([]byte, 1+rng.IntN(200))
		for i := range junk {
			junk[i] = byte(rng.IntN(256))
		}
		return g.send("random bytes", "\x00"+string(junk), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		r := g.send("wrong Content-Type", object(rng, validSend(rng)), nil)
		r.header["Content-Type"] = pick(rng, "", "text/plain", "application/xml", "application/json; charset=latin1",
			"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp")
		return r
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		f := validSend(rng)
		f["greeting"] = `"` + strings.Repeat("红", 64<<10/3+rng.IntN(100)) + `"`
		return g.send("body too large", object(rng, f), nil)
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		return g.send("idempotency key too long", object(rng, validSend(rng)),
			map[string]string{"Idempotency-Key": strings.Repeat("k", 201+rng.IntN(300))})
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		r := g.send("bad token", object(rng, validSend(rng)), nil)
		r.user = 0
		r.header["Authorization"] = pick(rng, "", "Bearer ", "Basic eDp5", "Bearer "+g.token(g.sender)+"x",
			"Bearer 1.9999999999.AAAA", "Bearer "+strings.Replace(g.token(g.sender), g.sender.String(), "1", 1))
		return r
	},
}

// generators of invalid packet requests, aimed at g.packet.
var badPacketRequests = []badGen{
	func(rng *mrand.Rand, g *badGens) badRequest {
		id := pick(rng, "abc", "-1", "0", "0123", "+1", "1.5", "99999999999999999999", "1e9", "%31",
			fmt.Sprint(int64(time.Since(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).Milliseconds())<<22|int64(1000+rng.IntN(24))<<12))
		return badRequest{kind: "invalid packet ID", method: pick(rng, http.MethodPost, http.MethodGet),
			path: "/v1/packets/" + id + pick(rng, "/open", "/grab", ""), user: g.opener}
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		return badRequest{kind: "body on open", method: http.MethodPost, path: "/v1/packets/" + g.packet.String() + pick(rng, "/open", "/grab"),
			user: g.opener, header: map[string]string{"Content-Type": "application/json"}, body: []byte(pick(rng, "{}", `{"user":"1"}`, "x"))}
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		return badRequest{kind: "open without a valid token", method: http.MethodPost, path: "/v1/packets/" + g.packet.String() + "/open",
			header: map[string]string{"Authorization": pick(rng, "", "Bearer", "Bearer x.y.z", "Bearer "+g.token(g.opener)[1:])}}
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		return badRequest{kind: "wrong method or path", method: pick(rng, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodGet),
			path: pick(rng, "/v1/packets", "/v1/packets/"+g.packet.String()+"/open", "/v2/packets", "/v1/packets/"+g.packet.String()+"/steal"),
			user: g.opener}
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		return badRequest{kind: "bad page", method: http.MethodGet, path: pick(rng, "/v1/me/received", "/v1/me/sent") +
			pick(rng, "?limit=abc", "?limit=0", "?limit=101", "?cursor=-1", "?cursor=x", "?limit=1e2"), user: g.opener}
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		head := "POST /v1/packets HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer " + g.token(g.sender) +
			"\r\nContent-Type: application/json\r\n"
		return badRequest{kind: "broken framing", raw: pick(rng,
			head+"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
			head+"Transfer-Encoding: chunked\r\n\r\n5\r\n{}XXXXXX0\r\n\r\n",
			head+"Content-Length: 300\r\n\r\n"+`{"total":1000,"count":10}`)}
	},
	func(rng *mrand.Rand, g *badGens) badRequest {
		// What net/http itself refuses, before any handler.
		open := "POST /v1/packets/" + g.packet.String() + "/open HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer " + g.token(g.opener) + "\r\n"
		return badRequest{kind: "broken request", raw: pick(rng,
			"OPEN IT NOW\r\n\r\n",
			"POST /v1/packets/"+g.packet.String()+"/open HTTP/1.1\r\nAuthorization: Bearer "+g.token(g.opener)+"\r\n\r\n", // no Host
			open+"Transfer-Encoding: gzip\r\n\r\n",
			"POST /v1/packets/"+g.packet.String()+"/open HTTP/7.0\r\nHost: router\r\n\r\n",
			open+"X-Pad: "+strings.Repeat("p", 40<<10)+"\r\n\r\n")}
	},
}

// badWants are the answers each kind of invalid request may get, as
// "status code".
var badWants = map[string][]string{
	"duplicate key":              {"400 duplicate_key"},
	"invalid UTF-8":              {"400 invalid_utf8"},
	"lone surrogate":             {"400 invalid_utf8"},
	"trailing data":              {"400 trailing_data"},
	"null value":                 {"400 null_value"},
	"unknown field":              {"400 unknown_field"},
	"invalid total":              {"400 invalid_total", "400 total_over_limit"},
	"invalid count":              {"400 invalid_count", "400 count_over_limit", "400 total_below_count"},
	"invalid type":               {"400 invalid_type"},
	"truncated JSON":             {"400 malformed_json", "400 invalid_utf8"}, // cut inside 恭喜发财
	"random bytes":               {"400 invalid_utf8", "400 malformed_json"},
	"wrong Content-Type":         {"415 unsupported_media_type"},
	"body too large":             {"413 body_too_large"},
	"idempotency key too long":   {"400 invalid_idempotency_key"},
	"bad token":                  {"401 unauthorized"},
	"invalid packet ID":          {"400 invalid_id", "404 not_found", "405 method_not_allowed"}, // %31 is packet 1; GET .../open, POST /v1/packets/{id}: other methods' endpoints
	"body on open":               {"400 unexpected_body"},
	"open without a valid token": {"401 unauthorized"},
	"wrong method or path":       {"404 not_found", "405 method_not_allowed"},
	"bad page":                   {"400 invalid_limit", "400 invalid_cursor"},
	"broken framing":             {"400 malformed_body", "400 truncated_body"},
	"broken request":             {"400 malformed_request", "431 headers_too_large"},
}

// TestClusterRandomInvalidRequests sends a few hundred random invalid
// requests through the router: every answer is the 4xx problem its kind
// calls for, none is a 5xx, and nothing is written anywhere (no packet, no share, no
// ledger entry, no outbox row). The seed is logged to replay a failure.
func TestClusterRandomInvalidRequests(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	g := &badGens{sender: c.RichUser(t), opener: dbtest.FreshUser(), token: c.Token}
	g.packet = c.MustSend(t, c.RichUser(t), packettest.SendBody{Total: 1000, Count: 10, Type: "random"}, "")
	before := writes(c, t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	gens := append(append([]badGen{}, badSends...), badPacketRequests...)
	kinds := map[string]int{}
	for i := range 400 {
		rq := gens[rng.IntN(len(gens))](rng, g)
		kinds[rq.kind]++
		r := doBad(c, t, rq)
		got := fmt.Sprintf("%d %s", r.Status, r.Str("code"))
		if !slices.Contains(badWants[rq.kind], got) || !r.IsProblem(r.Status, r.Str("code")) {
			t.Errorf("request %d (%s): %s %s %q: %v, want one of %v", i, rq.kind, rq.method, rq.path, clip(rq.body, rq.raw), r, badWants[rq.kind])
		}
	}
	t.Logf("kinds sent: %v", kinds)
	if after := writes(c, t); after != before {
		t.Errorf("invalid requests wrote: before %+v, after %+v", before, after)
	}
	if got := c.Balance(t, g.sender); got != 100_000_000 {
		t.Errorf("sender's balance %d after invalid sends, want 100000000", got)
	}
	if p := c.CheckPacket(t, topo, g.packet); p != nil && (len(p.Shares) != 0 || p.RemainingCount != 10) {
		t.Errorf("invalid requests opened packet %s: %+v", g.packet, p.Shares)
	}
}

func clip(body []byte, raw string) string {
	s := string(body) + raw
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// doBad sends rq and reads the answer.
func doBad(c *packettest.Cluster, t *testing.T, rq badRequest) clustertest.Reply {
	t.Helper()
	if rq.raw != "" {
		return rawDo(c, t, rq.raw)
	}
	req := c.Request(rq.method, c.URL()+rq.path, rq.user, rq.body, rq.header)
	if ct, ok := rq.header["Content-Type"]; ok && ct == "" {
		req.Header.Del("Content-Type")
	}
	return c.Do(req)
}

// rawDo writes raw to the router on a connection of its own, closes the
// sending side (so a body cut short ends) and reads the answer.
func rawDo(c *packettest.Cluster, t *testing.T, raw string) clustertest.Reply {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	req, _ := http.NewRequest(http.MethodPost, c.URL(), nil)
	return clustertest.Do(&http.Client{Transport: connTransport{conn}}, req)
}

// connTransport reads one answer from a connection the request was
// already written to.
type connTransport struct{ conn net.Conn }

func (ct connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return http.ReadResponse(bufio.NewReader(ct.conn), req)
}

// writes counts what the cluster has written that a request could add to:
// packets (their expiry marks), pending sends, outbox credits, ledger
// entries.
type writeCounts struct{ expiry, pending, outbox, ledger int }

func writes(c *packettest.Cluster, t *testing.T) writeCounts {
	t.Helper()
	var w writeCounts
	for _, s := range c.Sets {
		for q, n := range map[string]*int{"hb_set.expiry": &w.expiry, "hb_set.pending": &w.pending, "hb_set.outbox": &w.outbox} {
			var k int
			if err := c.DB(s.Name).QueryRow("SELECT COUNT(*) FROM " + q).Scan(&k); err != nil {
				t.Fatal(err)
			}
			*n += k
		}
	}
	if err := c.WalletDB().QueryRow("SELECT COUNT(*) FROM ledger").Scan(&w.ledger); err != nil {
		t.Fatal(err)
	}
	return w
}
