// Package hosts makes hosts on one machine: a network namespace per host,
// joined by a veth pair to a bridge in the namespace that made them, each
// with an address of its own. A process started on a host sees only that
// host's network; the namespace that made them (where tests and hbctl run)
// reaches every host. Faults are made the way a network makes them:
// Cut drops a host's packets toward an address (a one-way partition; cut
// both ends for a symmetric one), Isolate drops everything but the host's
// own loopback, and neither sends a FIN or RST: sockets vanish as they do
// when a host loses power or a switch dies.
//
// It needs root (CAP_NET_ADMIN) and iproute2; tests run it inside a
// private network namespace (unshare -n) so that several may run at once.
package hosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Net is a bridge and the hosts on it.
type Net struct {
	name   string // short: it prefixes interface names (15 bytes at most)
	bridge string
	prefix netip.Prefix
	gw     netip.Addr

	mu    sync.Mutex
	hosts []*Host
	next  netip.Addr
}

// Host is one network namespace on the Net.
type Host struct {
	Name string     // the host's name, as given
	NS   string     // its network namespace (ip netns)
	Addr netip.Addr // its address on the bridge
	net  *Net
	veth string
}

// New makes a bridge named for name (at most 8 characters) with the first
// address of prefix (an IPv4 /24 or smaller, e.g. 10.77.0.0/24).
func New(ctx context.Context, name string, prefix netip.Prefix) (*Net, error) {
	if len(name) == 0 || len(name) > 8 {
		return nil, fmt.Errorf("hosts: net name %q: 1 to 8 characters", name)
	}
	if !prefix.Addr().Is4() || prefix.Bits() > 28 {
		return nil, fmt.Errorf("hosts: prefix %s: an IPv4 prefix of /28 or larger", prefix)
	}
	prefix = prefix.Masked()
	n := &Net{name: name, bridge: "hb" + name, prefix: prefix, gw: prefix.Addr().Next()}
	n.next = n.gw.Next()
	cidr := fmt.Sprintf("%s/%d", n.gw, prefix.Bits())
	if err := run(ctx, "", "ip", "link", "add", n.bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"ip", "addr", "add", cidr, "dev", n.bridge},
		{"ip", "link", "set", n.bridge, "up"},
		{"ip", "link", "set", "lo", "up"},
	} {
		if err := run(ctx, "", args...); err != nil {
			_ = run(context.Background(), "", "ip", "link", "del", n.bridge)
			return nil, err
		}
	}
	return n, nil
}

// Gateway is the bridge's address: how hosts reach the namespace that
// made them.
func (n *Net) Gateway() netip.Addr { return n.gw }

// Add makes a host: a namespace named <net>-<name>, a veth pair into the
// bridge, the next free address, loopback up and a default route through
// the bridge.
func (n *Net) Add(ctx context.Context, name string) (*Host, error) {
	n.mu.Lock()
	addr := n.next
	if !n.prefix.Contains(addr) || !n.prefix.Contains(addr.Next()) {
		n.mu.Unlock()
		return nil, fmt.Errorf("hosts: %s is full", n.prefix)
	}
	n.next = addr.Next()
	idx := len(n.hosts)
	n.mu.Unlock()

	h := &Host{Name: name, NS: n.name + "-" + name, Addr: addr, net: n, veth: fmt.Sprintf("%sv%d", n.name, idx)}
	peer := h.veth + "p"
	steps := [][]string{
		{"ip", "netns", "add", h.NS},
		{"ip", "link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", h.veth, "master", n.bridge},
		{"ip", "link", "set", h.veth, "up"},
		{"ip", "link", "set", peer, "netns", h.NS},
	}
	for _, args := range steps {
		if err := run(ctx, "", args...); err != nil {
			h.remove()
			return nil, err
		}
	}
	inside := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "set", peer, "name", "eth0"},
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", addr, n.prefix.Bits()), "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "via", n.gw.String()},
	}
	for _, args := range inside {
		if err := run(ctx, h.NS, args...); err != nil {
			h.remove()
			return nil, err
		}
	}
	n.mu.Lock()
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	return h, nil
}

// Hosts are the hosts made so far, in order.
func (n *Net) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.hosts...)
}

// Close removes every host's namespace and the bridge. Processes still
// running in a namespace lose its network but are not killed: stop them
// first.
func (n *Net) Close() error {
	var errs []error
	for _, h := range n.Hosts() {
		errs = append(errs, h.remove())
	}
	errs = append(errs, run(context.Background(), "", "ip", "link", "del", n.bridge))
	return errors.Join(errs...)
}

// Command is name with args run on host h (ip netns exec).
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Attach is the host named name already made on a Net over prefix (by
// another process: make up HOSTS=1, whose hosts.json names it), in
// network namespace ns at addr: what Cut, Heal, Isolate and Rejoin need.
func Attach(name, ns string, addr netip.Addr, prefix netip.Prefix) *Host {
	prefix = prefix.Masked()
	return &Host{Name: name, NS: ns, Addr: addr, net: &Net{prefix: prefix, gw: prefix.Addr().Next()}}
}

// Cut drops every packet h sends to addr (a blackhole route in h's
// namespace): h can no longer reach addr, nor answer it, while addr's
// packets still arrive. Cut both hosts for a symmetric partition. The
// bridge's address (Gateway) stands for the namespace that made the hosts.
func (h *Host) Cut(ctx context.Context, addr netip.Addr) error {
	return run(ctx, h.NS, "ip", "route", "replace", "blackhole", addr.String()+"/32")
}

// Heal removes a Cut toward addr.
func (h *Host) Heal(ctx context.Context, addr netip.Addr) error {
	return run(ctx, h.NS, "ip", "route", "del", "blackhole", addr.String()+"/32")
}

// Isolate drops every packet h sends off the host, to every address of
// the Net's prefix (the gateway included) and beyond.
func (h *Host) Isolate(ctx context.Context) error {
	if err := run(ctx, h.NS, "ip", "route", "replace", "blackhole", h.net.prefix.String()); err != nil {
		return err
	}
	return run(ctx, h.NS, "ip", "route", "replace", "blackhole", "default")
}

// Rejoin undoes Isolate.
func (h *Host) Rejoin(ctx context.Context) error {
	if err := run(ctx, h.NS, "ip", "route", "replace", h.net.prefix.String(), "dev", "eth0", "src", h.Addr.String()); err != nil {
		return err
	}
	return run(ctx, h.NS, "ip", "route", "replace", "default", "via", h.net.gw.String())
}

func (h *Host) remove() error {
	// Deleting the namespace deletes the peer end and with it the pair.
	err := run(context.Background(), "", "ip", "netns", "del", h.NS)
	_ = run(context.Background(), "", "ip", "link", "del", h.veth) // gone already when the namespace was made
	return err
}

// run runs args in namespace ns ("" for this one) and returns its output
// as the error when it fails.
func run(ctx context.Context, ns string, args ...string) error {
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hosts: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Dial opens a connection from host h to addr, from this process: the
// socket is made inside h's namespace (a thread enters it for the call),
// then belongs to h for its life. A test's client thus runs on a host of
// its own without a process of its own.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.within(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen is net.Listen on host h (see Dial).
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := h.within(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// within runs fn on an OS thread that has entered h's namespace. The
// thread goes back to its own namespace after; if it cannot, it is not
// given back to the runtime (its goroutine ends locked, so the thread
// exits with it).
func (h *Host) within(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("hosts: own namespace: %w", err)
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + h.NS)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("hosts: namespace %s: %w", h.NS, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("hosts: enter %s: %w", h.NS, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("hosts: leave %s: %w", h.NS, err)) // thread stays locked: it dies
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// Remove undoes New and Add for a Net made by another process (make up
// made it and has exited; make down removes it): the namespaces named and
// the bridge of name. Ones already gone are no error, so that it may run
// again after a partial removal.
func Remove(ctx context.Context, name string, namespaces []string) error {
	var errs []error
	for _, ns := range namespaces {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		errs = append(errs, run(ctx, "", "ip", "netns", "del", ns))
	}
	if _, err := net.InterfaceByName("hb" + name); err == nil {
		errs = append(errs, run(ctx, "", "ip", "link", "del", "hb"+name))
	}
	return errors.Join(errs...)
}
