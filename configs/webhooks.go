package configs

import (
	"errors"
	"fmt"
	"net/url"
)

// Webhooks configures the signed event notifications (packet.sent,
// packet.opened, ...): the endpoints every event is POSTed to and the
// secret that signs them. No URLs: webhooks are off, servers and
// settlers write no events (the open transaction costs what it did
// without them) and nothing is delivered; changes made while off are
// never announced. Environment: HB_WEBHOOKS_URLS (comma-separated) and
// HB_WEBHOOKS_SECRET.
type Webhooks struct {
	URLs   []string `yaml:"urls"`
	Secret string   `yaml:"secret"`
}

// On reports whether events are written and delivered.
func (w Webhooks) On() bool { return len(w.URLs) > 0 }

// check validates the endpoints and requires a secret once there are any.
func (w Webhooks) check() []error {
	if !w.On() {
		return nil
	}
	var errs []error
	if len(w.Secret) < 16 {
		errs = append(errs, errors.New("webhooks: secret must be at least 16 bytes when urls are set"))
	}
	for _, u := range w.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("webhooks: url %q: want an absolute http or https URL", u))
		}
	}
	return errs
}
