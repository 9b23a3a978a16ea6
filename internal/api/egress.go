package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// egress is the dialer of outgoing connections and its policy.
func (s *Server) egress() *egress.Dialer {
	if s.cfg.Egress != nil {
		return s.cfg.Egress
	}
	return &egress.Dialer{Policy: egress.Default(s.cfg.AllowPrivate)}
}

func (s *Server) keyOptions() repokey.Options {
	return repokey.Options{AllowPrivate: s.cfg.AllowPrivate, Egress: s.egress().Policy, Fold: s.cfg.Fold}
}

// normalizeUpstream validates an upstream URL given to the API: its form,
// and its scheme, host, port and the host's DNS answers against the egress
// policy, for a fast "blocked destination" answer (the dialer is what
// enforces, at each fetch).
func (s *Server) normalizeUpstream(ctx context.Context, raw string) (key repokey.Key, fetchURL string, err error) {
	key, fetchURL, err = repokey.Normalize(raw, s.keyOptions())
	if err != nil {
		return "", "", err
	}
	if err := s.egress().CheckAnswers(ctx, fetchURL); err != nil {
		return "", "", fmt.Errorf("%w %q: %w", repokey.ErrInvalid, raw, err)
	}
	return key, fetchURL, nil
}

// hookClient is the client of outgoing webhooks: every connection through
// the egress dialer, no redirect followed (a 3xx is a failed delivery).
func hookClient(d *egress.Dialer) *http.Client {
	return &http.Client{
		Timeout:   hookPostTimeout,
		Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 2},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
